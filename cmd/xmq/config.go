package main

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

// config is the whole configuration: defaults, then the YAML file, then
// flags. xmq.example.yaml at the repository root lists every key with its
// default; a test keeps the two in step.
type config struct {
	Listeners []listenerConfig `yaml:"listeners"`
	// TLS is the certificate every TLS listener (tls, wss, quic) serves
	// unless it names its own; with neither, the development CA's.
	TLS tlsConfig `yaml:"tls"`
	// ACME gets the certificate from an ACME CA (Let's Encrypt) instead.
	ACME acmeConfig `yaml:"acme"`
	// DataDir holds the on-disk store (<data_dir>/store) and the development
	// CA; "" keeps state in memory.
	DataDir string       `yaml:"data_dir"`
	Log     logConfig    `yaml:"log"`
	Broker  brokerConfig `yaml:"broker"`
	// Auth is authentication, ACLs and abuse limits (auth.go).
	Auth authConfig `yaml:"auth"`
	// Web is the dashboard, admin API and metrics server (web.go).
	Web webConfig `yaml:"web"`
	// Store is the on-disk store's durability and disk budget (store.go).
	Store storeConfig `yaml:"store"`
	// Bridges are links to other brokers (bridges.go).
	Bridges []bridgeConfig `yaml:"bridges"`
	// Cluster makes this xmq one node of several (cluster.go).
	Cluster clusterConfig `yaml:"cluster"`
	// pprof is the -pprof debug address (loopback only); a flag, not a key.
	pprof string
	// file is the configuration file run read, "" for none: not a
	// setting (loadConfig leaves it empty), it only words warnings.
	file string
}

// configFileArg is the -c/-config file named by args, "" for none.
func configFileArg(args []string) string {
	var f flags
	if err := newFlagSet(&f).Parse(args); err != nil {
		return ""
	}
	return f.config
}

// listenerConfig is one listener (listeners.Options with YAML names).
type listenerConfig struct {
	Name      string `yaml:"name"`      // labels logs and metrics; default: the transport
	Transport string `yaml:"transport"` // tcp, tls, ws, wss or quic; default tcp
	Address   string `yaml:"address"`   // host:port; default: the transport's port on every interface
	Path      string `yaml:"path"`      // ws and wss: the HTTP path; default /mqtt
	// TLS: tls, wss and quic only.
	TLS            listenerTLSConfig `yaml:"tls"`
	AllowedOrigins []string          `yaml:"allowed_origins"` // ws and wss
	TrustedProxies []string          `yaml:"trusted_proxies"`
	ProxyProtocol  bool              `yaml:"proxy_protocol"`
	MaxConnections int               `yaml:"max_connections"`
	// AllowAnonymous overrides auth.allow_anonymous on this listener; "" inherits it.
	AllowAnonymous auth.Anonymous `yaml:"allow_anonymous"`
}

// listenerTLSConfig is a TLS listener's own certificate and client-certificate policy.
type listenerTLSConfig struct {
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

// isZero reports an empty tls section.
func (t *listenerTLSConfig) isZero() bool {
	return t.CertFile == "" && t.KeyFile == "" && t.ClientCAFile == "" && t.Verify == "" && t.IdentityAsUsername == "" &&
		t.MinVersion == "" && len(t.CipherSuites) == 0 && len(t.Curves) == 0 && t.ClientCRLFile == ""
}

// tlsConfig is the default certificate of the TLS listeners.
type tlsConfig struct {
	CertFile         string        `yaml:"cert_file"`
	KeyFile          string        `yaml:"key_file"`
	ReloadInterval   time.Duration `yaml:"reload_interval"`   // how often the files are checked for a change
	HandshakeTimeout time.Duration `yaml:"handshake_timeout"` // TLS, WebSocket and QUIC handshakes
	// DevCA acknowledges that a configuration file leaves TLS listeners
	// on the development CA: without it, xmq warns at every start.
	DevCA bool `yaml:"dev_ca"`
}

// acmeConfig configures certificates from an ACME CA (certs.ACMEOptions).
type acmeConfig struct {
	Domains      []string `yaml:"domains"` // none: ACME is off
	Email        string   `yaml:"email"`
	CacheDir     string   `yaml:"cache_dir"` // default <data_dir>/acme
	DirectoryURL string   `yaml:"directory_url"`
	CAFile       string   `yaml:"ca_file"`
	HTTPAddress  string   `yaml:"http_address"`
}

// brokerConfig mirrors core.Options (all but Version, which is the build's
// version) with YAML names. Zero values mean core's default, as in
// core.Options, so the defaults live in one place: core.
type brokerConfig struct {
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
	MemoryLimit byteSize `yaml:"memory_limit"`
	// TrimBinaryPages gives up, once started, the page-table entries of
	// the binary's read-only pages (trimBinaryPages); nil: true.
	TrimBinaryPages *bool `yaml:"trim_binary_pages"`
}

// options converts to core.Options; core fills in its defaults and validates.
func (b brokerConfig) options() core.Options {
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
	defaultTCPAddress       = ":1883"
	defaultDataDir          = "./data"
	defaultReloadInterval   = 10 * time.Second
	defaultHandshakeTimeout = 10 * time.Second
)

// defaultConfig is the configuration of a bare `xmq`: every transport on
// its usual port, the TLS ones with the development CA.
func defaultConfig() config {
	return config{
		Listeners: []listenerConfig{
			{Name: "tcp", Transport: listeners.TransportTCP, Address: defaultTCPAddress},
			{Name: "tls", Transport: listeners.TransportTLS, Address: ":" + listeners.DefaultTLSPort},
			{Name: "ws", Transport: listeners.TransportWS, Address: ":" + listeners.DefaultWSPort},
			{Name: "wss", Transport: listeners.TransportWSS, Address: ":" + listeners.DefaultWSSPort},
			{Name: "quic", Transport: listeners.TransportQUIC, Address: ":" + listeners.DefaultQUICPort},
		},
		TLS:     tlsConfig{ReloadInterval: defaultReloadInterval, HandshakeTimeout: defaultHandshakeTimeout},
		DataDir: defaultDataDir,
		Log:     logConfig{Level: "info", Format: "auto", MaxSizeMB: defaultLogMaxSizeMB, MaxBackups: defaultLogMaxBackups},
		Web:     defaultWebConfig(),
	}
}

// isTLS reports the transports that need a certificate.
func isTLS(transport string) bool {
	return transport == listeners.TransportTLS || transport == listeners.TransportWSS || transport == listeners.TransportQUIC
}

// setDefaults fills what a listener entry may leave out.
func (c *config) setDefaults() {
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
		if l.TLS.Verify == "" && isTLS(l.Transport) {
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

// needsTLS reports whether any listener, or the web server, serves TLS.
func (c *config) needsTLS() bool {
	if c.Web.TLS && c.Web.Address != "" {
		return true
	}
	for _, l := range c.Listeners {
		if isTLS(l.Transport) {
			return true
		}
	}
	return false
}

// needsDefaultCert reports whether anything serves the top-level
// certificate: the web server with TLS, or a TLS listener without files of
// its own.
func (c *config) needsDefaultCert() bool {
	if c.Web.TLS && c.Web.Address != "" {
		return true
	}
	for _, l := range c.Listeners {
		if isTLS(l.Transport) && l.TLS.CertFile == "" {
			return true
		}
	}
	return false
}

// validate checks the whole configuration and returns every problem, each
// under its key (configErrors), or nil.
func (c *config) validate() error {
	var ps problems
	c.validateListeners(&ps)
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		ps.add(path("tls", missingOf(c.TLS.CertFile, "cert_file", "key_file")), "cert_file and key_file go together: set both or neither")
	}
	if len(c.ACME.Domains) > 0 && c.TLS.CertFile != "" {
		ps.add(path("acme", "domains"), "acme and tls.cert_file exclude each other: pick one source for the certificate")
	}
	if c.TLS.HandshakeTimeout < 0 {
		ps.add(path("tls", "handshake_timeout"), "%v must not be negative", c.TLS.HandshakeTimeout)
	}
	c.validateLog(&ps)
	c.validateBroker(&ps)
	c.validateAuth(&ps)
	c.validateWeb(&ps)
	c.validateStore(&ps)
	c.validateBridges(&ps)
	c.validateCluster(&ps)
	if len(ps.list) > 0 {
		return ps.list
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
func (c *config) validateListeners(ps *problems) {
	if len(c.Listeners) == 0 {
		ps.add(path("listeners"), "no listeners configured: xmq would accept no connection")
		return
	}
	names := map[string]int{}
	for i, l := range c.Listeners {
		lp := path("listeners", i)
		before := len(ps.list)
		c.validateListener(l, lp, names, i, ps)
		if len(ps.list) == before {
			l.validateOptions(c, lp, ps) // what only the listeners package checks, if nothing else is wrong
		}
	}
}

// validateListener checks listener i, l, at lp; names maps the names of the
// listeners before it to their numbers.
func (c *config) validateListener(l listenerConfig, lp keyPath, names map[string]int, i int, ps *problems) {
	if first, dup := names[l.Name]; dup {
		ps.add(lp.with("name"), "%q is the name of listeners[%d] already: give each listener its own", l.Name, first)
	} else {
		names[l.Name] = i
	}
	if !oneOf(ps, lp.with("transport"), l.Transport, "a transport", listeners.TransportTCP, listeners.TransportTLS,
		listeners.TransportWS, listeners.TransportWSS, listeners.TransportQUIC) {
		return
	}
	if _, port, err := net.SplitHostPort(l.Address); err != nil {
		ps.add(lp.with("address"), "%q is not host:port (write :1883 for every interface, 127.0.0.1:1883 for this machine only)", l.Address)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		ps.add(lp.with("address"), "port %q is not a number from 0 to 65535", port)
	}
	if !isTLS(l.Transport) && !l.TLS.isZero() {
		ps.add(lp.with("tls"), "tls settings are for the tls, wss and quic transports, not %s", l.Transport)
		return
	}
	l.validateTLSProtocol(lp, ps)
	if (l.TLS.CertFile == "") != (l.TLS.KeyFile == "") {
		ps.add(lp.with("tls", missingOf(l.TLS.CertFile, "cert_file", "key_file")), "cert_file and key_file go together: set both or neither")
	}
	oneOf(ps, lp.with("tls", "verify"), certs.Verify(l.TLS.Verify), "a client-certificate policy", "", certs.VerifyNone, certs.VerifyOptional, certs.VerifyRequired)
	oneOf(ps, lp.with("tls", "identity_as_username"), l.TLS.IdentityAsUsername, "an identity", "", listeners.IdentityCN, listeners.IdentitySAN)
	if l.TLS.IdentityAsUsername != "" && certs.Verify(l.TLS.Verify) == certs.VerifyNone {
		ps.add(lp.with("tls", "identity_as_username"), "needs tls.verify optional or required (a client certificate to take the identity from)")
	}
	if l.MaxConnections < 0 {
		ps.add(lp.with("max_connections"), "%d must not be negative (0 is no limit)", l.MaxConnections)
	}
	if l.AllowAnonymous != "" {
		oneOf(ps, lp.with("allow_anonymous"), l.AllowAnonymous, "an anonymous policy", "", auth.AnonymousAllow, auth.AnonymousDeny, auth.AnonymousLoopback)
	}
}

// validateOptions checks what listeners.Options.Validate checks beyond
// validateListeners (origins, proxies, paths), so that check-config finds
// it and not only the start.
func (l *listenerConfig) validateOptions(c *config, lp keyPath, ps *problems) {
	var tlsConf *tls.Config
	if isTLS(l.Transport) {
		tlsConf = &tls.Config{ClientAuth: tls.NoClientCert}
		if certs.Verify(l.TLS.Verify) != certs.VerifyNone && l.TLS.Verify != "" {
			tlsConf.ClientAuth = tls.VerifyClientCertIfGiven
		}
	}
	o := listenerOptions(*l, tlsConf, c, nil)
	if err := o.Validate(); err != nil {
		ps.addErr(lp, err)
	}
}

// validateLog checks the log section.
func (c *config) validateLog(ps *problems) {
	oneOf(ps, path("log", "level"), c.Log.Level, "a log level", "debug", "info", "warn", "error")
	oneOf(ps, path("log", "format"), c.Log.Format, "a log format", "auto", "console", "json")
	c.validateLogOutputs(ps)
}

// validateBroker checks the broker section with core's own rules, each
// under its key.
func (c *config) validateBroker(ps *problems) {
	bp := path("broker")
	oneOf(ps, bp.with("shared_strategy"), c.Broker.SharedStrategy, "a shared subscription strategy", append([]core.SharedStrategy{""}, core.SharedStrategies...)...)
	oneOf(ps, bp.with("queue_overflow"), c.Broker.QueueOverflow, "an overflow policy", append([]core.OverflowPolicy{""}, core.OverflowPolicies...)...)
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"connect_timeout", c.Broker.ConnectTimeout}, {"write_timeout", c.Broker.WriteTimeout}} {
		if d.v < 0 {
			ps.add(bp.with(d.key), "%v must not be negative", d.v)
		}
	}
	opts := c.Broker.options()
	opts.SetDefaults()
	for _, err := range unjoin(opts.Validate()) {
		var oe *core.OptionError
		if !errors.As(err, &oe) {
			ps.addErr(bp, err)
			continue
		}
		if oe.Option == "SharedStrategy" || oe.Option == "QueueOverflow" || oe.Option == "ConnectTimeout" || oe.Option == "WriteTimeout" {
			continue // reported above, with the valid values
		}
		ps.add(bp.with(brokerKey(oe.Option)), "%s", oe.Msg)
	}
}

// brokerKey is the broker section's key of a core.Options field (the
// names match, as TestBrokerConfigCoversOptions keeps true).
func brokerKey(option string) string {
	if option == "AnySessionOwner" {
		return "session_owner_check"
	}
	if f, ok := reflect.TypeFor[brokerConfig]().FieldByName(option); ok {
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		return key
	}
	return option
}

// validateTLSProtocol checks a listener's min_version, cipher_suites,
// curves and client_crl_file.
func (l *listenerConfig) validateTLSProtocol(lp keyPath, ps *problems) {
	minV, err := certs.MinVersion(l.TLS.MinVersion)
	if err != nil {
		ps.addErr(lp.with("tls", "min_version"), err)
	}
	if _, err := certs.CipherSuites(l.TLS.CipherSuites); err != nil {
		ps.addErr(lp.with("tls", "cipher_suites"), err)
	}
	if _, err := certs.Curves(l.TLS.Curves); err != nil {
		ps.addErr(lp.with("tls", "curves"), err)
	}
	if len(l.TLS.CipherSuites) > 0 {
		// Go offers no choice of TLS 1.3 suites (all three are secure).
		switch {
		case l.Transport == listeners.TransportQUIC:
			ps.add(lp.with("tls", "cipher_suites"), "cipher_suites choose TLS 1.2 suites; QUIC speaks only TLS 1.3, whose suites are not configurable: remove them")
		case err == nil && minV == tls.VersionTLS13:
			ps.add(lp.with("tls", "cipher_suites"), "cipher_suites choose TLS 1.2 suites; with min_version 1.3 they would never be used: remove them")
		}
	}
	if l.TLS.ClientCRLFile != "" && (l.TLS.Verify == "" || certs.Verify(l.TLS.Verify) == certs.VerifyNone) {
		ps.add(lp.with("tls", "client_crl_file"), "needs tls.verify optional or required (there is no client certificate to check otherwise)")
	}
}

// readConfigFile decodes the YAML file at path over cfg: keys present in
// the file replace the values in cfg, absent keys keep them. Unknown keys
// are errors, so a typo never passes silently; every mistake is reported
// at once with its line (configErrors).
func readConfigFile(path string, cfg *config) error {
	_, err := readConfigFileLines(path, cfg)
	return err
}

// readConfigFileLines is readConfigFile that also returns the line of
// each key in the file, for the errors found later.
func readConfigFileLines(path string, cfg *config) (map[string]int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	lines := map[string]int{}
	ps := decodeFile(data, cfg, lines)
	if len(ps) > 0 {
		o := origin{file: path, lines: lines}
		o.locate(ps)
		sortProblems(ps)
		return lines, ps
	}
	return lines, nil
}

// usageError is a mistake on the command line; main exits 2 for it.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// errHelp asks run to print the usage and succeed.
var errHelp = flag.ErrHelp

// errVersion asks run to print the version and succeed (-version).
var errVersion = errors.New("version asked for")

// listFlag collects a repeatable, comma-separated flag.
type listFlag []string

func (f *listFlag) String() string { return strings.Join(*f, ",") }

func (f *listFlag) Set(v string) error {
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
	listen    listFlag
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

// loadConfig builds the configuration from defaults, the file named by
// -c/-config, the XMQ_ environment variables and the flags, in that order
// of precedence (flags win).
func loadConfig(args []string) (config, error) {
	cfg, _, err := loadConfigEnv(args, os.Environ())
	return cfg, err
}

// configSources maps each key set by an environment variable or a flag
// ("broker.max_queued", "listeners.0.address") to the variable or flag.
type configSources map[string]string

// flagKeys names the key each configuration flag overrides.
var flagKeys = map[string]string{
	"listen": "listeners", "data": "data_dir", "log-level": "log.level", "log-format": "log.format",
	"password-file": "auth.password_file", "acl-file": "auth.acl_file", "web": "web.address",
}

// loadConfigEnv is loadConfig with the environment given (os.Environ's
// form); it also says which keys the environment and the flags set.
func loadConfigEnv(args, env []string) (config, configSources, error) {
	cfg, src, err := loadConfigAll(args, env)
	if err != nil {
		return config{}, nil, err
	}
	cfg.file = "" // run sets it; config print and the tests compare settings
	return cfg, src, nil
}

// loadConfigAll is loadConfigEnv that, when the configuration has
// mistakes (configErrors: every one, each located in the file, the
// environment or the flags), still returns what it could make of it, for
// check-config to check further.
func loadConfigAll(args, env []string) (config, configSources, error) {
	cfg, o, err := loadConfigOrigin(args, env)
	return cfg, o.src, err
}

// loadConfigOrigin is loadConfigAll that returns where every key came
// from, to locate the problems found later (check-config).
func loadConfigOrigin(args, env []string) (config, origin, error) {
	var f flags
	fs := newFlagSet(&f)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return config{}, origin{}, errHelp
		}
		return config{}, origin{}, usageError{fmt.Errorf("%w (xmq -h lists the flags)", err)}
	}
	if f.version {
		return config{}, origin{}, errVersion
	}
	if fs.NArg() > 0 {
		return config{}, origin{}, usageError{fmt.Errorf("unexpected argument %q (xmq -h lists the flags)", fs.Arg(0))}
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })

	cfg := defaultConfig()
	o := origin{file: f.config}
	var all configErrors
	if f.config != "" {
		lines, err := readConfigFileLines(f.config, &cfg)
		if ce, ok := asConfigErrors(err); ok {
			all = append(all, ce...)
		} else if err != nil {
			return config{}, origin{}, err
		}
		o.lines = lines
	}
	envSet, err := applyEnv(&cfg, env) // env.go
	if ce, ok := asConfigErrors(err); ok {
		all = append(all, ce...)
	} else if err != nil {
		return config{}, origin{}, err
	}
	src := configSources{}
	for _, s := range envSet {
		src[s.key()] = s.name
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
			cfg.Listeners = append(cfg.Listeners, listenerConfig{Name: name, Transport: listeners.TransportTCP, Address: addr})
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
	cfg.pprof = f.pprof
	f.auth.apply(&cfg, set)
	f.web.apply(&cfg, set)
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		ce, _ := asConfigErrors(err)
		o.src = src
		o.locate(ce)
		all = append(all, ce...)
	}
	o.src = src
	cfg.file = f.config
	if len(all) > 0 {
		sortProblems(all)
		return cfg, o, all
	}
	return cfg, o, nil
}

// printUsage documents every flag; a test checks none is missing. It is
// also the text of the man page xmq(1) (make man): lines ending in a colon
// at the margin are its sections, "  -flag ARG" lines its flag entries.
func printUsage(w io.Writer) {
	fmt.Fprint(w, `xmq is an MQTT 3.1, 3.1.1 and 5.0 broker.

Usage:
  xmq [flags]        serve MQTT; with no flags, data directory ./data and
                       mqtt   TCP        :1883
                       mqtts  TLS        :8883
                       ws     WebSocket  :8083/mqtt
                       wss    WebSocket  :8084/mqtt over TLS
                       quic   QUIC       :14567/udp (ALPN mqtt)
                     the TLS ones with a development CA made on first start:
                     clients trust ./data/certs/ca.pem
  xmq certs [flags]  print the development CA's files, creating them if missing
                     (xmq certs -h for -host names, regenerating, client and
                     cluster node certificates)
  xmq cluster secret print a new cluster secret, for cluster.secret_file on
                     every node of a cluster
  xmq passwd [-b] [-D] FILE USER [PASSWORD]
                     add, change or delete a user of a password file, in the
                     hash its entries use; xmq passwd -U FILE hashes a
                     plain-text file (xmq passwd -h for the hash and SCRAM options)
  xmq import mosquitto.conf > xmq.yaml
                     convert a Mosquitto configuration, with a comment for
                     every option (xmq import -h)
  xmq store check [DATA_DIR]
                     read every record of the store, read-only, and report
                     what is damaged (default ./data)
  xmq config print [flags]
                     print the configuration in effect with these flags (the
                     file, the XMQ_ environment, the flags), secrets masked
  xmq config env     list the environment variable of every configuration key
  xmq check-config [-c FILE] [flags]
                     check a configuration without serving: keys and values,
                     the files it names, certificates against their keys,
                     the data directory and the ports; every problem listed,
                     exit status 1 if there is any (xmq check-config -h)
  xmq health [-c FILE]
                     ask the running broker's /healthz: exit 0 when healthy
                     (the container image's HEALTHCHECK)
  xmq completion bash|zsh|fish
                     print a shell completion script
  xmq version        print the version, commit, date, Go version and platform

Flags (each one given overrides the configuration file and the environment):
  -c FILE, -config FILE
        YAML configuration file. xmq.example.yaml lists every key with its
        default; unknown keys are errors.
  -listen ADDR
        serve MQTT over TCP on ADDR (host:port; port 0 picks a free port).
        Repeat the flag or separate addresses with commas for several
        listeners. Replaces every listener of the defaults or the file
        (TLS, WebSocket and QUIC included) with these TCP ones.
  -data DIR
        data directory, created if missing. Default "./data". Persistent
        sessions, their queued messages, retained messages, delayed wills
        and the bans set through the admin API are stored in DIR/store and
        survive a restart or a crash (see the store section of
        xmq.example.yaml for durability). -data "" keeps state in memory:
        it is lost when xmq exits.
`+authUsage+webUsage+`  -log-level LEVEL
        debug, info, warn or error. Default "info".
  -log-format FORMAT
        auto, console or json. Default "auto": console on a terminal,
        JSON otherwise.
  -pprof ADDR
        debug: serve Go's profiles (net/http/pprof, /debug/pprof/) on ADDR,
        which must be a loopback address such as 127.0.0.1:6060. Off by
        default.
  -version, --version
        print the version, as xmq version does, and exit.
  -h, -help
        print this help and exit.

Environment:
  Every configuration key can be set by a variable: XMQ_ and the key's path
  in capitals, dots as underscores: broker.max_queued is
  XMQ_BROKER_MAX_QUEUED=5000. Values are written as in YAML (10s, true); a
  list of plain values is comma-separated; an entry of a list of sections is
  numbered from 0 (XMQ_LISTENERS_0_ADDRESS=:1884). The environment overrides
  the file, flags override both; xmq config env lists every variable and
  xmq.yaml(5) states the whole rule. An unknown XMQ_ variable that looks
  like a key is an error. XMQ_ADMIN_PASSWORD sets the dashboard admin's
  password. NOTIFY_SOCKET, set by systemd for a Type=notify service, is
  told when every listener accepts connections (READY=1) and when xmq
  stops (STOPPING=1).

Signals:
  SIGINT or SIGTERM shuts down gracefully (up to 10s for clients to go);
  SIGHUP reads the configuration file again (with the environment and flags
  of the start) and applies what can change live: the broker's limits
  (max_connections, max_keep_alive, max_session_expiry, connect_timeout,
  write_timeout, max_inflight, max_queued, max_queued_bytes, queue_overflow,
  max_subscriptions_per_client, max_message_rate, max_byte_rate,
  max_retained_messages, max_retained_bytes), log.level,
  auth.password_file and auth.acl_file, the TLS certificate files
  (tls.cert_file, key_file and each listener's) and the bridges; any other
  key that changed is logged as needing a restart. It also reloads the
  certificate files (checked every 10s too), the password file and the ACL
  file (checked every 2s). Connections stay up. POST /api/v1/reload does the
  same.
`)
}
