package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/certs"
	"github.com/xmq-io/xmq/internal/config"
	"github.com/xmq-io/xmq/listeners"
)

// devCertsDir is where the development CA lives inside the data directory.
const devCertsDir = "certs"

// tlsSetup holds the certificate sources of a run: the default one (ACME,
// the top-level files or the development CA) and one per listener that
// names its own files.
type tlsSetup struct {
	mu      sync.Mutex // guards def, byFiles and slots; a reload changes them
	def     *certs.Source
	byFiles map[[2]string]*certs.Source
	// slots hold the source each TLS listener (by name) and the web
	// server ("" ) serve from: their tls.Configs read it at every
	// handshake, so a reload can point a listener at other files.
	slots   map[string]*certSlot
	tempDir string          // development CA in a temporary directory (data_dir ""), removed at close
	retired []*certs.Source // default sources a reload replaced, closed at close
	log     *zap.Logger
}

// certSlot is the certificate source a listener serves from now.
type certSlot struct{ p atomic.Pointer[certs.Source] }

func (c *certSlot) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.p.Load().GetCertificate(hello)
}

// notAfter is when the certificate served now ends (web.Listener.CertNotAfter).
func (c *certSlot) notAfter() time.Time { return c.p.Load().NotAfter() }

// newTLSSetup builds the sources the listeners need; none when no listener
// serves TLS.
func newTLSSetup(cfg *config.Config, log *zap.Logger) (*tlsSetup, error) {
	ts := &tlsSetup{byFiles: map[[2]string]*certs.Source{}, slots: map[string]*certSlot{}, log: log.Named("certs")}
	if !cfg.NeedsTLS() {
		return ts, nil
	}
	if cfg.TLS.CertFile == "" && len(cfg.ACME.Domains) == 0 && !cfg.NeedsDefaultCert() {
		// Every TLS listener has files of its own (an imported Mosquitto
		// configuration): no development CA to make, nor to advertise.
		return ts, ts.loadListenerFiles(cfg, log.Named("certs"))
	}
	clog := log.Named("certs")
	opts := certs.Options{
		CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.KeyFile, ReloadInterval: cfg.TLS.ReloadInterval, Log: clog,
	}
	switch {
	case len(cfg.ACME.Domains) > 0:
		cache := cfg.ACME.CacheDir
		if cache == "" {
			if cfg.DataDir == "" {
				return nil, errors.New("acme needs acme.cache_dir when data_dir is empty: without a cache every start asks the CA again")
			}
			cache = filepath.Join(cfg.DataDir, "acme")
		}
		opts.ACME = certs.ACMEOptions{
			Domains: cfg.ACME.Domains, Email: cfg.ACME.Email, CacheDir: cache, DirectoryURL: cfg.ACME.DirectoryURL,
			CAFile: cfg.ACME.CAFile, HTTPAddress: cfg.ACME.HTTPAddress,
		}
	case cfg.TLS.CertFile == "":
		if cfg.DataDir != "" {
			opts.DevDir = filepath.Join(cfg.DataDir, devCertsDir)
		} else {
			dir, err := os.MkdirTemp("", "xmq-certs-")
			if err != nil {
				return nil, fmt.Errorf("development CA: %w", err)
			}
			ts.tempDir, opts.DevDir = dir, dir
		}
	}
	src, err := certs.New(opts)
	if err != nil {
		ts.close()
		return nil, err
	}
	ts.def = src
	if dev := src.Dev(); dev != nil {
		fields := []zap.Field{zap.String("ca_file", dev.CAFile), zap.Bool("created", dev.Created),
			zap.Strings("names", dev.Hosts), zap.Time("not_after", dev.Cert.Leaf.NotAfter)}
		if ts.tempDir != "" {
			clog.Warn("development CA in a temporary directory (data_dir is empty), removed at exit: clients trust its ca_file", fields...)
		} else {
			clog.Info("development CA: clients trust its ca_file, e.g. "+mosquittoSubHint(dev.CAFile, cfg), fields...)
		}
		warnDevCA(cfg, dev, clog)
	} else if src.Kind() == certs.KindFiles {
		leaf := src.Certificate().Leaf
		clog.Info("certificate from files", zap.String("cert_file", cfg.TLS.CertFile), zap.Strings("names", leaf.DNSNames),
			zap.Time("not_after", leaf.NotAfter))
	}
	if err := ts.loadListenerFiles(cfg, clog); err != nil {
		return nil, err
	}
	return ts, nil
}

// loadListenerFiles loads the certificate files of the listeners that have
// their own; on an error everything is closed.
func (ts *tlsSetup) loadListenerFiles(cfg *config.Config, clog *zap.Logger) error {
	for _, lc := range cfg.Listeners {
		key := [2]string{lc.TLS.CertFile, lc.TLS.KeyFile}
		if lc.TLS.CertFile == "" || ts.byFiles[key] != nil {
			continue
		}
		s, err := certs.New(certs.Options{CertFile: key[0], KeyFile: key[1], ReloadInterval: cfg.TLS.ReloadInterval, Log: clog})
		if err != nil {
			ts.close()
			return fmt.Errorf("listener %s: %w", lc.Name, err)
		}
		ts.byFiles[key] = s
	}
	return nil
}

// warnDevCA warns, once per listener, when a configuration file leaves a
// TLS listener on the development CA without tls.dev_ca: true. A bare
// `xmq` is a development run and says nothing; a file is what production
// runs from, and there a device that does not trust ca.pem fails with
// nothing more than "a TLS error occurred".
func warnDevCA(cfg *config.Config, dev *certs.Dev, log *zap.Logger) {
	if cfg.File == "" || cfg.TLS.DevCA {
		return // a bare xmq is a development run
	}
	for i, lc := range cfg.Listeners {
		if !config.IsTLS(lc.Transport) || lc.TLS.CertFile != "" {
			continue
		}
		log.Warn(fmt.Sprintf("listener %s (%s on %s) has no certificate in %s: it serves the development CA's, "+
			"which only clients given %s trust. For production set tls.cert_file and tls.key_file (every TLS listener), "+
			"listeners[%d].tls.cert_file and key_file (this one) or acme.domains; for a development setup set "+
			"tls.dev_ca: true to keep the development CA without this warning",
			lc.Name, lc.Transport, lc.Address, cfg.File, dev.CAFile, i),
			zap.String("listener", lc.Name), zap.String("config", cfg.File))
	}
	if cfg.Web.TLS && cfg.Web.Address != "" {
		log.Warn(fmt.Sprintf("web.tls serves the development CA's certificate (no tls.cert_file in %s); set tls.dev_ca: true if that is meant", cfg.File),
			zap.String("config", cfg.File))
	}
}

// tlsPort is the port of the first listener of transport that serves the
// default certificate (no cert_file of its own), "" for none: a hint
// naming the development CA must not point at a port serving the
// operator's certificate.
func tlsPort(cfg *config.Config, transport string) string {
	for _, lc := range cfg.Listeners {
		if lc.Transport == transport && lc.TLS.CertFile == "" {
			if _, port, err := net.SplitHostPort(lc.Address); err == nil && port != "0" {
				return port
			}
			return ""
		}
	}
	return ""
}

// mosquittoSubHint is a command that tries the development CA against the
// configured TLS listener's real port.
func mosquittoSubHint(caFile string, cfg *config.Config) string {
	port := tlsPort(cfg, listeners.TransportTLS)
	if port == "" {
		return "mosquitto_sub --cafile " + caFile + " -h localhost -p <TLS port>"
	}
	return "mosquitto_sub --cafile " + caFile + " -h localhost -p " + port
}

// serverConfig is the TLS configuration of one listener; nil for the
// transports without TLS. Its certificate comes from the listener's slot,
// which a reload may point at other files.
func (ts *tlsSetup) serverConfig(lc config.Listener) (*tls.Config, error) {
	src := ts.source(lc)
	if src == nil {
		return nil, nil
	}
	conf, err := src.ServerConfig(certs.ClientAuth{Verify: certs.Verify(lc.TLS.Verify), CAFile: lc.TLS.ClientCAFile,
		CRLFile: lc.TLS.ClientCRLFile})
	if err != nil {
		return nil, err
	}
	// validate has checked both.
	if conf.MinVersion, err = certs.MinVersion(lc.TLS.MinVersion); err != nil {
		return nil, err
	}
	if conf.CipherSuites, err = certs.CipherSuites(lc.TLS.CipherSuites); err != nil {
		return nil, err
	}
	if conf.CurvePreferences, err = certs.Curves(lc.TLS.Curves); err != nil {
		return nil, err
	}
	if src.Kind() != certs.KindACME { // ACME answers its challenges through its own hook
		conf.GetCertificate = ts.slot(lc.Name, src).getCertificate
	}
	return conf, nil
}

// slot returns the slot of name, made with src in it.
func (ts *tlsSetup) slot(name string, src *certs.Source) *certSlot {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	sl := ts.slots[name]
	if sl == nil {
		sl = &certSlot{}
		sl.p.Store(src)
		ts.slots[name] = sl
	}
	return sl
}

// certNotAfter is when the certificate listener name serves ends; nil
// for a listener without TLS.
func (ts *tlsSetup) certNotAfter(lc config.Listener) func() time.Time {
	ts.mu.Lock()
	sl := ts.slots[lc.Name]
	ts.mu.Unlock()
	if sl != nil {
		return sl.notAfter
	}
	if src := ts.source(lc); src != nil {
		return src.NotAfter
	}
	return nil
}

// source is the certificate source of one listener: its own files, or the
// default one; nil for the transports without TLS.
func (ts *tlsSetup) source(lc config.Listener) *certs.Source {
	if !config.IsTLS(lc.Transport) {
		return nil
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if lc.TLS.CertFile != "" {
		return ts.byFiles[[2]string{lc.TLS.CertFile, lc.TLS.KeyFile}]
	}
	return ts.def
}

// applyFiles points the TLS listeners at the certificate files of next
// where they differ from cur's (a reload): a listener's own cert_file and
// key_file, or the top-level pair when the certificate comes from files or
// the development CA (a change to or from ACME needs a restart). It
// returns the keys it changed; a pair that does not load changes nothing
// and is an error.
func (ts *tlsSetup) applyFiles(cur, next *config.Config) ([]config.KeyPath, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var applied []config.KeyPath
	var errs []error
	load := func(cert, key string) (*certs.Source, error) {
		if s := ts.byFiles[[2]string{cert, key}]; s != nil {
			return s, nil
		}
		s, err := certs.New(certs.Options{CertFile: cert, KeyFile: key, ReloadInterval: cur.TLS.ReloadInterval, Log: ts.log})
		if err != nil {
			return nil, err
		}
		ts.byFiles[[2]string{cert, key}] = s
		return s, nil
	}
	if ts.def != nil && (next.TLS.CertFile != cur.TLS.CertFile || next.TLS.KeyFile != cur.TLS.KeyFile) &&
		next.TLS.CertFile != "" && len(cur.ACME.Domains) == 0 && len(next.ACME.Domains) == 0 {
		if src, err := load(next.TLS.CertFile, next.TLS.KeyFile); err != nil {
			errs = append(errs, fmt.Errorf("tls: %w", err))
		} else {
			old := ts.def
			ts.def = src
			for name, sl := range ts.slots {
				if sl.p.Load() == old && (name == "" || ts.listenerUsesDefault(next, name)) {
					sl.p.Store(src)
				}
			}
			applied = append(applied, config.Path("tls", "cert_file"), config.Path("tls", "key_file"))
			ts.retired = append(ts.retired, old) // closed with the others: a handshake may still be reading it
		}
	}
	for i, lc := range next.Listeners {
		if i >= len(cur.Listeners) || cur.Listeners[i].Name != lc.Name {
			break // the listeners changed: a restart, said elsewhere
		}
		old := cur.Listeners[i].TLS
		sl := ts.slots[lc.Name]
		if sl == nil || lc.TLS.CertFile == old.CertFile && lc.TLS.KeyFile == old.KeyFile {
			continue
		}
		src := ts.def
		if src == nil && lc.TLS.CertFile == "" {
			errs = append(errs, fmt.Errorf("listeners[%d].tls: no cert_file left and no default certificate (none was needed at start): restart xmq", i))
			continue
		}
		if lc.TLS.CertFile != "" {
			var err error
			if src, err = load(lc.TLS.CertFile, lc.TLS.KeyFile); err != nil {
				errs = append(errs, fmt.Errorf("listeners[%d].tls: %w", i, err))
				continue
			}
		}
		sl.p.Store(src)
		applied = append(applied, config.Path("listeners", i, "tls", "cert_file"), config.Path("listeners", i, "tls", "key_file"))
	}
	// Sources no slot serves any more stop watching their files.
	for key, s := range ts.byFiles {
		used := false
		for _, sl := range ts.slots {
			used = used || sl.p.Load() == s
		}
		if !used && s != ts.def {
			_ = s.Close()
			delete(ts.byFiles, key)
		}
	}
	return applied, errors.Join(errs...)
}

// listenerUsesDefault reports whether listener name has no files of its
// own in cfg.
func (ts *tlsSetup) listenerUsesDefault(cfg *config.Config, name string) bool {
	for _, lc := range cfg.Listeners {
		if lc.Name == name {
			return lc.TLS.CertFile == ""
		}
	}
	return false
}

// reload re-reads every certificate file (SIGHUP).
func (ts *tlsSetup) reload(log *zap.Logger) {
	for _, s := range ts.all() {
		if err := s.Reload(); err != nil {
			log.Error("certificate reload failed; the previous certificate stays", zap.Error(err))
		}
	}
}

func (ts *tlsSetup) all() []*certs.Source {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	all := append([]*certs.Source(nil), ts.retired...)
	if ts.def != nil {
		all = append(all, ts.def)
	}
	for _, s := range ts.byFiles {
		all = append(all, s)
	}
	return all
}

// close stops the sources and removes a temporary development CA.
func (ts *tlsSetup) close() {
	for _, s := range ts.all() {
		_ = s.Close()
	}
	if ts.tempDir != "" {
		_ = os.RemoveAll(ts.tempDir)
	}
}

// runCerts is `xmq certs`: it prints the development CA's files, creating
// them when missing, regenerates them, or issues a client certificate.
func runCerts(args []string, stdout io.Writer) error {
	var f certsFlags
	fs := newCertsFlagSet(&f)
	if helped, err := parseSubcommand("certs", fs, args, printCertsUsage, stdout); helped || err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	cfg := config.Default()
	if f.configFile != "" {
		if err := config.ReadFile(f.configFile, &cfg); err != nil {
			return err
		}
	}
	if set["data"] {
		cfg.DataDir = f.data
	}
	cfg.SetDefaults()
	if cfg.DataDir == "" {
		return config.UsageError{Err: errors.New("certs: the development CA lives in the data directory; -data \"\" has none")}
	}
	dir := filepath.Join(cfg.DataDir, devCertsDir)
	if len(f.hosts) > 0 {
		if _, err := certs.AddExtraHosts(dir, f.hosts); err != nil {
			return config.UsageError{Err: fmt.Errorf("certs: -host: %w", err)}
		}
	}
	dev, err := certs.EnsureDev(dir, f.regen)
	if err != nil {
		return err
	}
	state := "existing"
	if dev.Created {
		state = "created"
	}
	leaf := dev.Cert.Leaf
	fmt.Fprintf(stdout, "development CA (%s) in %s\n", state, dev.Dir)
	fmt.Fprintf(stdout, "  CA certificate      %s   (clients trust this one)\n", dev.CAFile)
	fmt.Fprintf(stdout, "  CA key              %s\n", dev.CAKeyFile)
	fmt.Fprintf(stdout, "  server certificate  %s   for %s, until %s\n", dev.CertFile,
		strings.Join(dev.Hosts, ", "), leaf.NotAfter.Format("2006-01-02"))
	fmt.Fprintf(stdout, "  server key          %s\n", dev.KeyFile)
	if f.client != "" {
		certPEM, keyPEM, err := dev.CA.IssueClient(f.client)
		if err != nil {
			return err
		}
		certFile, keyFile, err := writeIssued(dev.Dir, "client-", f.client, certPEM, keyPEM)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "  client certificate  %s   (CN=%s)\n", certFile, f.client)
		fmt.Fprintf(stdout, "  client key          %s\n", keyFile)
	}
	if f.node != "" {
		// A node's routes are dialled at the addresses in its peers'
		// routes: this machine's, and the -host names for another one.
		hosts := append(slices.Clone([]string(f.hosts)), certs.DevHosts()...)
		certPEM, keyPEM, err := dev.CA.IssueNode(f.node, hosts...)
		if err != nil {
			return err
		}
		certFile, keyFile, err := writeIssued(dev.Dir, "node-", f.node, certPEM, keyPEM)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "  node certificate    %s   (CN=%s, for %s)\n", certFile, f.node, strings.Join(hosts, ", "))
		fmt.Fprintf(stdout, "  node key            %s\n", keyFile)
		fmt.Fprintf(stdout, "\ncluster.nats.embedded.tls: {cert_file: %s, key_file: %s, ca_file: %s}\n", certFile, keyFile, dev.CAFile)
	}
	if port := tlsPort(&cfg, listeners.TransportTLS); port != "" {
		fmt.Fprintf(stdout, "\ntry: mosquitto_sub --cafile %s -h localhost -p %s -t '#' -v\n", dev.CAFile, port)
	}
	if port := tlsPort(&cfg, listeners.TransportWSS); port != "" {
		fmt.Fprintf(stdout, "     browsers and WebSocket clients: wss://localhost:%s%s with the same CA\n", port, wssPath(&cfg))
	}
	fmt.Fprintln(stdout, "\nA running xmq serves a certificate for new names after SIGHUP (kill -HUP <pid>).")
	return nil
}

// writeIssued writes a certificate and its key the development CA issued
// for name into dir, as PREFIXname.pem and PREFIXname-key.pem.
func writeIssued(dir, prefix, name string, certPEM, keyPEM []byte) (certFile, keyFile string, err error) {
	safe := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 {
			return '_'
		}
		return r
	}, name)
	certFile = filepath.Join(dir, prefix+safe+".pem")
	keyFile = filepath.Join(dir, prefix+safe+"-key.pem")
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("certs: %w", err)
	}
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		return "", "", fmt.Errorf("certs: %w", err)
	}
	return certFile, keyFile, nil
}

// wssPath is the path of the first wss listener.
func wssPath(cfg *config.Config) string {
	for _, lc := range cfg.Listeners {
		if lc.Transport == listeners.TransportWSS {
			if lc.Path == "" {
				return listeners.DefaultPath
			}
			return lc.Path
		}
	}
	return listeners.DefaultPath
}

// certsFlags are the flags of `xmq certs`.
type certsFlags struct {
	configFile, data, client, node string
	hosts                          config.ListFlag
	regen                          bool
}

func newCertsFlagSet(f *certsFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("xmq certs", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.configFile, "c", "", "configuration file (YAML): its data_dir")
	fs.StringVar(&f.configFile, "config", "", "configuration file (YAML): its data_dir")
	fs.StringVar(&f.data, "data", "", "data directory")
	fs.BoolVar(&f.regen, "regen", false, "make a new CA and server certificate")
	fs.StringVar(&f.client, "client", "", "issue a client certificate with this common name")
	fs.StringVar(&f.node, "node", "", "issue a cluster node certificate for this node name")
	fs.Var(&f.hosts, "host", "names and addresses the server certificate covers besides this machine's")
	return fs
}

func printCertsUsage(w io.Writer) {
	fmt.Fprint(w, `xmq certs prints where the development CA and the server certificate it
issued are, creating them when missing. xmq makes the same files on its
first start with TLS listeners and no certificate configured.

Usage:
  xmq certs [flags]

Flags:
  -c FILE, -config FILE
        take the data directory from this configuration file.
  -data DIR
        data directory (default "./data"); the files are in DIR/certs.
  -regen
        make a new CA and server certificate (clients must trust the new
        ca.pem; restart xmq to serve the new certificate).
  -host NAME,IP,...
        also cover these names and addresses (repeatable or comma-separated):
        a DNS name or address devices dial that is not this machine's own,
        such as a router's public address. They are kept in
        DIR/certs/hosts and in every renewal; localhost, the host name and
        the interface addresses are always covered.
  -client NAME
        also issue a client certificate with common name NAME, signed by
        the development CA: DIR/certs/client-NAME.pem and -key.pem, for
        listeners with tls.verify optional or required.
  -node NAME
        also issue the certificate of cluster node NAME for its routes
        (server and client use; this machine's names and addresses and the
        -host ones): DIR/certs/node-NAME.pem and -key.pem, for
        cluster.nats.embedded.tls with ca_file DIR/certs/ca.pem. Every node
        of a cluster needs one from the same CA.
  -h, -help
        print this help and exit.
`)
}
