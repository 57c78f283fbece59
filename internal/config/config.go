package config

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/xmq-io/xmq/auth"
	"github.com/xmq-io/xmq/certs"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/listeners"
)

// Config is the whole configuration: defaults, then the YAML file, then
// flags. xmq.example.yaml at the repository root lists every key with its
// default; a test keeps the two in step.
type Config struct {
	Listeners []Listener `yaml:"listeners"`
	// TLS is the certificate every TLS listener (tls, wss, quic) serves
	// unless it names its own; with neither, the development CA's.
	TLS TLS `yaml:"tls"`
	// ACME gets the certificate from an ACME CA (Let's Encrypt) instead.
	ACME ACME `yaml:"acme"`
	// DataDir holds the on-disk store (<data_dir>/store) and the development
	// CA; "" keeps state in memory.
	DataDir string `yaml:"data_dir"`
	Log     Log    `yaml:"log"`
	Broker  Broker `yaml:"broker"`
	// Auth is authentication, ACLs and abuse limits (auth.go).
	Auth Auth `yaml:"auth"`
	// Web is the dashboard, admin API and metrics server (web.go).
	Web Web `yaml:"web"`
	// Store is the on-disk store's durability and disk budget (store.go).
	Store Store `yaml:"store"`
	// Bridges are links to other brokers (bridges.go).
	Bridges []Bridge `yaml:"bridges"`
	// Cluster makes this xmq one node of several (cluster.go).
	Cluster Cluster `yaml:"cluster"`
	// Pprof is the -pprof debug address (loopback only); a flag, not a key.
	Pprof string `yaml:"-"`
	// File is the configuration file run read, "" for none: not a
	// setting (LoadEnv leaves it empty), it only words warnings.
	File string `yaml:"-"`
}

// FileArg is the -c/-config file named by args, "" for none.
func FileArg(args []string) string {
	var f flags
	if err := newFlagSet(&f).Parse(args); err != nil {
		return ""
	}
	return f.config
}

// Listener is one listener (listeners.Options with YAML names).
type Listener struct {
	Name      string `yaml:"name"`      // labels logs and metrics; default: the transport
	Transport string `yaml:"transport"` // tcp, tls, ws, wss or quic; default tcp
	Address   string `yaml:"address"`   // host:port; default: the transport's port on every interface
	Path      string `yaml:"path"`      // ws and wss: the HTTP path; default /mqtt
	// TLS: tls, wss and quic only.
	TLS            ListenerTLS `yaml:"tls"`
	AllowedOrigins []string    `yaml:"allowed_origins"` // ws and wss
	TrustedProxies []string    `yaml:"trusted_proxies"`
	ProxyProtocol  bool        `yaml:"proxy_protocol"`
	MaxConnections int         `yaml:"max_connections"`
	// AllowAnonymous overrides auth.allow_anonymous on this listener; "" inherits it.
	AllowAnonymous auth.Anonymous `yaml:"allow_anonymous"`
}

// ListenerTLS is a TLS listener's own certificate and client-certificate policy.
type ListenerTLS struct {
	CertFile           string `yaml:"cert_file"`            // default: the top-level tls section's
	KeyFile            string `yaml:"key_file"`             // goes with cert_file
	ClientCAFile       string `yaml:"client_ca_file"`       // CAs for client certificates; default: the development CA
	Verify             string `yaml:"verify"`               // none, optional or required; default none
	IdentityAsUsername string `yaml:"identity_as_username"` // "", cn or san
	// MinVersion is the oldest TLS version accepted: 1.2 (default) or 1.3.
	MinVersion string `yaml:"min_version"`
	// CipherSuites are the TLS 1.2 suites offered (Go's names); none: Go's
	// defaults. TLS 1.3 suites are not configurable.
	CipherSuites []string `yaml:"cipher_suites"`
	// Curves are the key exchanges offered, in order of preference (X25519,
	// P256, X25519MLKEM768, …); none: Go's defaults.
	Curves []string `yaml:"curves"`
	// ClientCRLFile holds revocation lists for client certificates,
	// reloaded like the certificate files.
	ClientCRLFile string `yaml:"client_crl_file"`
}

// IsZero reports an empty tls section.
func (t *ListenerTLS) IsZero() bool {
	return t.CertFile == "" && t.KeyFile == "" && t.ClientCAFile == "" && t.Verify == "" && t.IdentityAsUsername == "" &&
		t.MinVersion == "" && len(t.CipherSuites) == 0 && len(t.Curves) == 0 && t.ClientCRLFile == ""
}

// TLS is the default certificate of the TLS listeners.
type TLS struct {
	CertFile         string        `yaml:"cert_file"`
	KeyFile          string        `yaml:"key_file"`
	ReloadInterval   time.Duration `yaml:"reload_interval"`   // how often the files are checked for a change
	HandshakeTimeout time.Duration `yaml:"handshake_timeout"` // TLS, WebSocket and QUIC handshakes
	// DevCA acknowledges that a configuration file leaves TLS listeners
	// on the development CA: without it, xmq warns at every start.
	DevCA bool `yaml:"dev_ca"`
}

// ACME configures certificates from an ACME CA (certs.ACMEOptions).
type ACME struct {
	Domains      []string `yaml:"domains"` // none: ACME is off
	Email        string   `yaml:"email"`
	CacheDir     string   `yaml:"cache_dir"` // default <data_dir>/acme
	DirectoryURL string   `yaml:"directory_url"`
	CAFile       string   `yaml:"ca_file"`
	HTTPAddress  string   `yaml:"http_address"`
}

// Broker mirrors core.Options (all but Version, which is the build's
// version) with YAML names. Zero values mean core's default, as in
// core.Options, so the defaults live in one place: core.
type Broker struct {
	MaxConnections            int                 `yaml:"max_connections"`
	MaxPacketSize             int                 `yaml:"max_packet_size"`
	MaxConnectSize            int                 `yaml:"max_connect_size"`
	MaxUserProperties         int                 `yaml:"max_user_properties"`
	PreLoginMemory            int64               `yaml:"pre_login_memory"`
	SessionOwnerCheck         *bool               `yaml:"session_owner_check"` // nil: true
	ConnectTimeout            time.Duration       `yaml:"connect_timeout"`
	MaxKeepAlive              uint16              `yaml:"max_keep_alive"`
	ReceiveMaximum            uint16              `yaml:"receive_maximum"`
	MaxInflight               int                 `yaml:"max_inflight"`
	MaxQueued                 int                 `yaml:"max_queued"`
	MaxQueuedBytes            int64               `yaml:"max_queued_bytes"`
	QueueOverflow             core.OverflowPolicy `yaml:"queue_overflow"`
	TopicAliasMaximum         uint16              `yaml:"topic_alias_maximum"`
	MaxTopicLevels            int                 `yaml:"max_topic_levels"`
	MaxSubscriptionsPerClient int                 `yaml:"max_subscriptions_per_client"`
	MaxMessageRate            int                 `yaml:"max_message_rate"`
	MaxByteRate               int                 `yaml:"max_byte_rate"`
	MaxSessionExpiry          uint32              `yaml:"max_session_expiry"`
	RetainDisabled            bool                `yaml:"retain_disabled"`
	MaxRetainedMessages       int                 `yaml:"max_retained_messages"`
	MaxRetainedBytes          int64               `yaml:"max_retained_bytes"`
	SharedStrategy            core.SharedStrategy `yaml:"shared_strategy"`
	SysInterval               time.Duration       `yaml:"sys_interval"`
	WriteTimeout              time.Duration       `yaml:"write_timeout"`
	ReadBufferSize            int                 `yaml:"read_buffer_size"`
	// MemoryLimit is the Go runtime's soft memory limit (not a core
	// option: it is the process's, applyMemoryLimit).
	MemoryLimit ByteSize `yaml:"memory_limit"`
	// TrimBinaryPages gives up, once started, the page-table entries of
	// the binary's read-only pages (trimBinaryPages); nil: true.
	TrimBinaryPages *bool `yaml:"trim_binary_pages"`
}

// Options converts to core.Options; core fills in its defaults and validates.
func (b Broker) Options() core.Options {
	return core.Options{
		MaxConnections:            b.MaxConnections,
		MaxPacketSize:             b.MaxPacketSize,
		MaxConnectSize:            b.MaxConnectSize,
		MaxUserProperties:         b.MaxUserProperties,
		PreLoginMemory:            b.PreLoginMemory,
		AnySessionOwner:           b.SessionOwnerCheck != nil && !*b.SessionOwnerCheck,
		ConnectTimeout:            b.ConnectTimeout,
		MaxKeepAlive:              b.MaxKeepAlive,
		ReceiveMaximum:            b.ReceiveMaximum,
		MaxInflight:               b.MaxInflight,
		MaxQueued:                 b.MaxQueued,
		MaxQueuedBytes:            b.MaxQueuedBytes,
		QueueOverflow:             b.QueueOverflow,
		TopicAliasMaximum:         b.TopicAliasMaximum,
		MaxTopicLevels:            b.MaxTopicLevels,
		MaxSubscriptionsPerClient: b.MaxSubscriptionsPerClient,
		MaxMessageRate:            b.MaxMessageRate,
		MaxByteRate:               b.MaxByteRate,
		MaxSessionExpiry:          b.MaxSessionExpiry,
		RetainDisabled:            b.RetainDisabled,
		MaxRetainedMessages:       b.MaxRetainedMessages,
		MaxRetainedBytes:          b.MaxRetainedBytes,
		SharedStrategy:            b.SharedStrategy,
		SysInterval:               b.SysInterval,
		WriteTimeout:              b.WriteTimeout,
		ReadBufferSize:            b.ReadBufferSize,
	}
}

// Defaults that are not core's.
const (
	defaultTCPAddress       = ":" + listeners.DefaultTCPPort
	DefaultDataDir          = "./data"
	defaultReloadInterval   = 10 * time.Second
	defaultHandshakeTimeout = 10 * time.Second
)

// Default is the configuration of a bare `xmq`: every transport on
// its usual port, the TLS ones with the development CA.
func Default() Config {
	return Config{
		Listeners: []Listener{
			{Name: "tcp", Transport: listeners.TransportTCP, Address: defaultTCPAddress},
			{Name: "tls", Transport: listeners.TransportTLS, Address: ":" + listeners.DefaultTLSPort},
			{Name: "ws", Transport: listeners.TransportWS, Address: ":" + listeners.DefaultWSPort},
			{Name: "wss", Transport: listeners.TransportWSS, Address: ":" + listeners.DefaultWSSPort},
			{Name: "quic", Transport: listeners.TransportQUIC, Address: ":" + listeners.DefaultQUICPort},
		},
		TLS:     TLS{ReloadInterval: defaultReloadInterval, HandshakeTimeout: defaultHandshakeTimeout},
		DataDir: DefaultDataDir,
		Log:     Log{Level: "info", Format: "auto", MaxSizeMB: defaultLogMaxSizeMB, MaxBackups: defaultLogMaxBackups},
		Web:     defaultWebConfig(),
	}
}

// IsTLS reports the transports that need a certificate.
func IsTLS(transport string) bool {
	return transport == listeners.TransportTLS || transport == listeners.TransportWSS || transport == listeners.TransportQUIC
}

// SetDefaults fills what a listener entry may leave out.
func (c *Config) SetDefaults() {
	for i := range c.Listeners {
		l := &c.Listeners[i]
		if l.Transport == "" {
			l.Transport = listeners.TransportTCP
		}
		if l.Name == "" {
			l.Name = l.Transport
		}
		if l.Address == "" {
			l.Address = ":" + listeners.DefaultPort(l.Transport)
		}
		if l.Path == "" && (l.Transport == listeners.TransportWS || l.Transport == listeners.TransportWSS) {
			l.Path = listeners.DefaultPath
		}
		if l.TLS.Verify == "" && IsTLS(l.Transport) {
			l.TLS.Verify = string(certs.VerifyNone)
		}
		// An empty list and no list are the same.
		if len(l.AllowedOrigins) == 0 {
			l.AllowedOrigins = nil
		}
		if len(l.TrustedProxies) == 0 {
			l.TrustedProxies = nil
		}
		if len(l.TLS.CipherSuites) == 0 {
			l.TLS.CipherSuites = nil
		}
		if len(l.TLS.Curves) == 0 {
			l.TLS.Curves = nil
		}
	}
	if len(c.ACME.Domains) == 0 {
		c.ACME.Domains = nil
	}
	if len(c.Bridges) == 0 {
		c.Bridges = nil
	}
	if len(c.Cluster.NATS.Embedded.Users) == 0 {
		c.Cluster.NATS.Embedded.Users = nil
	}
	if len(c.Cluster.NATS.Embedded.Routes) == 0 {
		c.Cluster.NATS.Embedded.Routes = nil
	}
	c.Web.setDefaults()
}

// NeedsTLS reports whether any listener, or the web server, serves TLS.
func (c *Config) NeedsTLS() bool {
	if c.Web.TLS && c.Web.Address != "" {
		return true
	}
	for _, l := range c.Listeners {
		if IsTLS(l.Transport) {
			return true
		}
	}
	return false
}

// NeedsDefaultCert reports whether anything serves the top-level
// certificate: the web server with TLS, or a TLS listener without files of
// its own.
func (c *Config) NeedsDefaultCert() bool {
	if c.Web.TLS && c.Web.Address != "" {
		return true
	}
	for _, l := range c.Listeners {
		if IsTLS(l.Transport) && l.TLS.CertFile == "" {
			return true
		}
	}
	return false
}

// Checks are the rules of the sections whose packages config does not
// import, for they link a server (web, cluster); cmd/xmq passes them to
// the loaders. Each adds its problems at its section's turn in Validate,
// so that the problems come in the same order as the others'. A nil check
// leaves its section unchecked.
type Checks struct {
	Web, Cluster func(c *Config, ps *Problems)
}

// Validate checks the whole configuration, with checks for the web and
// cluster sections, and returns every problem, each under its key
// (Errors), or nil.
func (c *Config) Validate(checks Checks) error {
	var ps Problems
	c.validateListeners(&ps)
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		ps.Add(Path("tls", missingOf(c.TLS.CertFile, "cert_file", "key_file")), "cert_file and key_file go together: set both or neither")
	}
	if len(c.ACME.Domains) > 0 && c.TLS.CertFile != "" {
		ps.Add(Path("acme", "domains"), "acme and tls.cert_file exclude each other: pick one source for the certificate")
	}
	if c.TLS.HandshakeTimeout < 0 {
		ps.Add(Path("tls", "handshake_timeout"), "%v must not be negative", c.TLS.HandshakeTimeout)
	}
	c.validateLog(&ps)
	c.validateBroker(&ps)
	c.validateAuth(&ps)
	if checks.Web != nil {
		checks.Web(c, &ps)
	}
	c.validateStore(&ps)
	c.validateBridges(&ps)
	if checks.Cluster != nil {
		checks.Cluster(c, &ps)
	}
	if len(ps.List) > 0 {
		return ps.List
	}
	return nil
}

// missingOf names the key of a pair that is empty.
func missingOf(a, aKey, bKey string) string {
	if a == "" {
		return aKey
	}
	return bKey
}

// validateListeners checks the listeners section.
func (c *Config) validateListeners(ps *Problems) {
	if len(c.Listeners) == 0 {
		ps.Add(Path("listeners"), "no listeners configured: xmq would accept no connection")
		return
	}
	names := map[string]int{}
	for i, l := range c.Listeners {
		lp := Path("listeners", i)
		before := len(ps.List)
		c.validateListener(l, lp, names, i, ps)
		if len(ps.List) == before {
			l.validateOptions(c, lp, ps) // what only the listeners package checks, if nothing else is wrong
		}
	}
}

// validateListener checks listener i, l, at lp; names maps the names of the
// listeners before it to their numbers.
func (c *Config) validateListener(l Listener, lp KeyPath, names map[string]int, i int, ps *Problems) {
	if first, dup := names[l.Name]; dup {
		ps.Add(lp.With("name"), "%q is the name of listeners[%d] already: give each listener its own", l.Name, first)
	} else {
		names[l.Name] = i
	}
	if !oneOf(ps, lp.With("transport"), l.Transport, "a transport", listeners.TransportTCP, listeners.TransportTLS,
		listeners.TransportWS, listeners.TransportWSS, listeners.TransportQUIC) {
		return
	}
	if _, port, err := net.SplitHostPort(l.Address); err != nil {
		ps.Add(lp.With("address"), "%q is not host:port (write :1883 for every interface, 127.0.0.1:1883 for this machine only)", l.Address)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		ps.Add(lp.With("address"), "port %q is not a number from 0 to 65535", port)
	}
	if !IsTLS(l.Transport) && !l.TLS.IsZero() {
		ps.Add(lp.With("tls"), "tls settings are for the tls, wss and quic transports, not %s", l.Transport)
		return
	}
	l.validateTLSProtocol(lp, ps)
	if (l.TLS.CertFile == "") != (l.TLS.KeyFile == "") {
		ps.Add(lp.With("tls", missingOf(l.TLS.CertFile, "cert_file", "key_file")), "cert_file and key_file go together: set both or neither")
	}
	oneOf(ps, lp.With("tls", "verify"), certs.Verify(l.TLS.Verify), "a client-certificate policy", "", certs.VerifyNone, certs.VerifyOptional, certs.VerifyRequired)
	oneOf(ps, lp.With("tls", "identity_as_username"), l.TLS.IdentityAsUsername, "an identity", "", listeners.IdentityCN, listeners.IdentitySAN)
	if l.TLS.IdentityAsUsername != "" && certs.Verify(l.TLS.Verify) == certs.VerifyNone {
		ps.Add(lp.With("tls", "identity_as_username"), "needs tls.verify optional or required (a client certificate to take the identity from)")
	}
	if l.MaxConnections < 0 {
		ps.Add(lp.With("max_connections"), "%d must not be negative (0 is no limit)", l.MaxConnections)
	}
	if l.AllowAnonymous != "" {
		oneOf(ps, lp.With("allow_anonymous"), l.AllowAnonymous, "an anonymous policy", "", auth.AnonymousAllow, auth.AnonymousDeny, auth.AnonymousLoopback)
	}
}

// validateOptions checks what listeners.Options.Validate checks beyond
// validateListeners (origins, proxies, paths), so that check-config finds
// it and not only the start.
func (l *Listener) validateOptions(c *Config, lp KeyPath, ps *Problems) {
	var tlsConf *tls.Config
	if IsTLS(l.Transport) {
		tlsConf = &tls.Config{ClientAuth: tls.NoClientCert}
		if certs.Verify(l.TLS.Verify) != certs.VerifyNone && l.TLS.Verify != "" {
			tlsConf.ClientAuth = tls.VerifyClientCertIfGiven
		}
	}
	o := c.ListenerOptions(*l, tlsConf)
	if err := o.Validate(); err != nil {
		ps.AddErr(lp, err)
	}
}

// ListenerOptions converts listener l to listeners.Options, with tlsConf
// for its TLS; the caller adds the logger.
func (c *Config) ListenerOptions(l Listener, tlsConf *tls.Config) listeners.Options {
	return listeners.Options{
		Name: l.Name, Transport: l.Transport, Address: l.Address, Path: l.Path, TLS: tlsConf,
		IdentityAsUsername: l.TLS.IdentityAsUsername, AllowedOrigins: l.AllowedOrigins,
		TrustedProxies: l.TrustedProxies, ProxyProtocol: l.ProxyProtocol, MaxConnections: l.MaxConnections,
		HandshakeTimeout: c.TLS.HandshakeTimeout,
	}
}

// validateLog checks the log section.
func (c *Config) validateLog(ps *Problems) {
	oneOf(ps, Path("log", "level"), c.Log.Level, "a log level", "debug", "info", "warn", "error")
	oneOf(ps, Path("log", "format"), c.Log.Format, "a log format", "auto", "console", "json")
	c.validateLogOutputs(ps)
}

// validateBroker checks the broker section with core's own rules, each
// under its key.
func (c *Config) validateBroker(ps *Problems) {
	bp := Path("broker")
	oneOf(ps, bp.With("shared_strategy"), c.Broker.SharedStrategy, "a shared subscription strategy", append([]core.SharedStrategy{""}, core.SharedStrategies...)...)
	oneOf(ps, bp.With("queue_overflow"), c.Broker.QueueOverflow, "an overflow policy", append([]core.OverflowPolicy{""}, core.OverflowPolicies...)...)
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"connect_timeout", c.Broker.ConnectTimeout}, {"write_timeout", c.Broker.WriteTimeout}} {
		if d.v < 0 {
			ps.Add(bp.With(d.key), "%v must not be negative", d.v)
		}
	}
	opts := c.Broker.Options()
	opts.SetDefaults()
	for _, err := range Unjoin(opts.Validate()) {
		var oe *core.OptionError
		if !errors.As(err, &oe) {
			ps.AddErr(bp, err)
			continue
		}
		if oe.Option == "SharedStrategy" || oe.Option == "QueueOverflow" || oe.Option == "ConnectTimeout" || oe.Option == "WriteTimeout" {
			continue // reported above, with the valid values
		}
		ps.Add(bp.With(BrokerKey(oe.Option)), "%s", oe.Msg)
	}
}

// BrokerKey is the broker section's key of a core.Options field (the
// names match, as TestBrokerConfigCoversOptions keeps true).
func BrokerKey(option string) string {
	if option == "AnySessionOwner" {
		return "session_owner_check"
	}
	if f, ok := reflect.TypeFor[Broker]().FieldByName(option); ok {
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		return key
	}
	return option
}

// validateTLSProtocol checks a listener's min_version, cipher_suites,
// curves and client_crl_file.
func (l *Listener) validateTLSProtocol(lp KeyPath, ps *Problems) {
	minV, err := certs.MinVersion(l.TLS.MinVersion)
	if err != nil {
		ps.AddErr(lp.With("tls", "min_version"), err)
	}
	if _, err := certs.CipherSuites(l.TLS.CipherSuites); err != nil {
		ps.AddErr(lp.With("tls", "cipher_suites"), err)
	}
	if _, err := certs.Curves(l.TLS.Curves); err != nil {
		ps.AddErr(lp.With("tls", "curves"), err)
	}
	if len(l.TLS.CipherSuites) > 0 {
		// Go offers no choice of TLS 1.3 suites (all three are secure).
		switch {
		case l.Transport == listeners.TransportQUIC:
			ps.Add(lp.With("tls", "cipher_suites"), "cipher_suites choose TLS 1.2 suites; QUIC speaks only TLS 1.3, whose suites are not configurable: remove them")
		case err == nil && minV == tls.VersionTLS13:
			ps.Add(lp.With("tls", "cipher_suites"), "cipher_suites choose TLS 1.2 suites; with min_version 1.3 they would never be used: remove them")
		}
	}
	if l.TLS.ClientCRLFile != "" && (l.TLS.Verify == "" || certs.Verify(l.TLS.Verify) == certs.VerifyNone) {
		ps.Add(lp.With("tls", "client_crl_file"), "needs tls.verify optional or required (there is no client certificate to check otherwise)")
	}
}

// ReadFile decodes the YAML file at path over cfg: keys present in
// the file replace the values in cfg, absent keys keep them. Unknown keys
// are errors, so a typo never passes silently; every mistake is reported
// at once with its line (Errors).
func ReadFile(path string, cfg *Config) error {
	_, err := readFileLines(path, cfg)
	return err
}

// readFileLines is ReadFile that also returns the line of
// each key in the file, for the errors found later.
func readFileLines(path string, cfg *Config) (map[string]int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	lines := map[string]int{}
	ps := decodeFile(data, cfg, lines)
	if len(ps) > 0 {
		o := Origin{file: path, lines: lines}
		o.Locate(ps)
		SortProblems(ps)
		return lines, ps
	}
	return lines, nil
}

// UsageError is a mistake on the command line; main exits 2 for it.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// ErrHelp asks run to print the usage and succeed.
var ErrHelp = flag.ErrHelp

// ErrVersion asks run to print the version and succeed (-version).
var ErrVersion = errors.New("version asked for")

// ListFlag collects a repeatable, comma-separated flag.
type ListFlag []string

func (f *ListFlag) String() string { return strings.Join(*f, ",") }

func (f *ListFlag) Set(v string) error {
	for a := range strings.SplitSeq(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			*f = append(*f, a)
		}
	}
	return nil
}

// flags are the command-line settings; each one set overrides the file.
type flags struct {
	config    string
	listen    ListFlag
	logLevel  string
	logFormat string
	data      string
	pprof     string
	version   bool
	auth      authFlags
	web       webFlags
}

func newFlagSet(f *flags) *flag.FlagSet {
	fs := flag.NewFlagSet("xmq", flag.ContinueOnError)
	// run prints the usage to stdout for -h and returns parse errors; the
	// flag package itself prints nothing.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&f.config, "c", "", "configuration file (YAML)")
	fs.StringVar(&f.config, "config", "", "configuration file (YAML)")
	fs.Var(&f.listen, "listen", "TCP listen address; repeatable or comma-separated")
	fs.StringVar(&f.logLevel, "log-level", "", "debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "", "auto, console or json")
	fs.StringVar(&f.data, "data", "", `data directory; "" keeps state in memory`)
	fs.StringVar(&f.pprof, "pprof", "", "debug: serve net/http/pprof on this loopback address")
	fs.BoolVar(&f.version, "version", false, "print the version and exit")
	addAuthFlags(fs, &f.auth)
	addWebFlags(fs, &f.web)
	return fs
}

// Sources maps each key set by an environment variable or a flag
// ("broker.max_queued", "listeners.0.address") to the variable or flag.
type Sources map[string]string

// flagKeys names the key each configuration flag overrides.
var flagKeys = map[string]string{
	"listen": "listeners", "data": "data_dir", "log-level": "log.level", "log-format": "log.format",
	"password-file": "auth.password_file", "acl-file": "auth.acl_file", "web": "web.address",
}

// LoadEnv builds the configuration from defaults, the file named by
// -c/-config in args, the XMQ_ variables of env (os.Environ's form) and the
// flags in args, in that order of precedence (flags win), and checks it
// with checks for the sections config does not check itself. It also says
// which keys the environment and the flags set.
func LoadEnv(args, env []string, checks Checks) (Config, Sources, error) {
	cfg, o, err := LoadOrigin(args, env, checks)
	if err != nil {
		return Config{}, nil, err
	}
	cfg.File = "" // run sets it; config print and the tests compare settings
	return cfg, o.src, nil
}

// LoadOrigin is LoadEnv that, when the configuration has mistakes (Errors:
// every one, each located in the file, the environment or the flags),
// still returns what it could make of it, for check-config to check
// further, and where every key came from, to locate the problems found
// later.
func LoadOrigin(args, env []string, checks Checks) (Config, Origin, error) {
	var f flags
	fs := newFlagSet(&f)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Config{}, Origin{}, ErrHelp
		}
		return Config{}, Origin{}, UsageError{Err: fmt.Errorf("%w (xmq -h lists the flags)", err)}
	}
	if f.version {
		return Config{}, Origin{}, ErrVersion
	}
	if fs.NArg() > 0 {
		return Config{}, Origin{}, UsageError{Err: fmt.Errorf("unexpected argument %q (xmq -h lists the flags)", fs.Arg(0))}
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })

	cfg := Default()
	o := Origin{file: f.config}
	var all Errors
	if f.config != "" {
		lines, err := readFileLines(f.config, &cfg)
		if ce, ok := AsErrors(err); ok {
			all = append(all, ce...)
		} else if err != nil {
			return Config{}, Origin{}, err
		}
		o.lines = lines
	}
	envSet, err := applyEnv(&cfg, env) // env.go
	if ce, ok := AsErrors(err); ok {
		all = append(all, ce...)
	} else if err != nil {
		return Config{}, Origin{}, err
	}
	src := Sources{}
	for _, s := range envSet {
		src[s.Key()] = s.name
	}
	for name := range set {
		if key, ok := flagKeys[name]; ok {
			maps.DeleteFunc(src, func(k, _ string) bool { return strings.HasPrefix(k, key+".") })
			src[key] = "-" + name
		}
	}
	if set["listen"] {
		cfg.Listeners = nil
		for i, addr := range f.listen {
			name := "tcp"
			if i > 0 {
				name = fmt.Sprintf("tcp-%d", i+1)
			}
			cfg.Listeners = append(cfg.Listeners, Listener{Name: name, Transport: listeners.TransportTCP, Address: addr})
		}
	}
	if set["log-level"] {
		cfg.Log.Level = f.logLevel
	}
	if set["log-format"] {
		cfg.Log.Format = f.logFormat
	}
	if set["data"] {
		cfg.DataDir = f.data
	}
	cfg.Pprof = f.pprof
	f.auth.apply(&cfg, set)
	f.web.apply(&cfg, set)
	cfg.SetDefaults()
	if err := cfg.Validate(checks); err != nil {
		ce, _ := AsErrors(err)
		o.src = src
		o.Locate(ce)
		all = append(all, ce...)
	}
	o.src = src
	cfg.File = f.config
	if len(all) > 0 {
		SortProblems(all)
		return cfg, o, all
	}
	return cfg, o, nil
}

// Flags is the command line's flag set, to list the flags (completion,
// usage tests); the values it parses go nowhere.
func Flags() *flag.FlagSet {
	var f flags
	return newFlagSet(&f)
}
