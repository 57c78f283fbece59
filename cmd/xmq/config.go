package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"xmq/core"
	"xmq/listeners"
)

// config is the whole configuration: defaults, then the YAML file, then
// flags. xmq.example.yaml at the repository root lists every key with its
// default; a test keeps the two in step.
type config struct {
	Listeners []listenerConfig `yaml:"listeners"`
	// DataDir is where the on-disk store will live; "" keeps state in memory.
	// Persistence to disk is not implemented yet: the directory is only created.
	DataDir string       `yaml:"data_dir"`
	Log     logConfig    `yaml:"log"`
	Broker  brokerConfig `yaml:"broker"`
}

// listenerConfig is one listener. Only the "tcp" transport is built today.
type listenerConfig struct {
	Name      string `yaml:"name"`      // labels logs and metrics; default: the transport
	Transport string `yaml:"transport"` // tcp (tls, ws, wss, quic later); default tcp
	Address   string `yaml:"address"`   // host:port; default :1883 for tcp
}

// logConfig configures the logger.
type logConfig struct {
	Level  string `yaml:"level"`  // debug, info, warn, error
	Format string `yaml:"format"` // auto, console, json
}

// brokerConfig mirrors core.Options (all but Version, which is the build's
// version) with YAML names. Zero values mean core's default, as in
// core.Options, so the defaults live in one place: core.
type brokerConfig struct {
	MaxConnections    int                 `yaml:"max_connections"`
	MaxPacketSize     int                 `yaml:"max_packet_size"`
	ConnectTimeout    time.Duration       `yaml:"connect_timeout"`
	MaxKeepAlive      uint16              `yaml:"max_keep_alive"`
	ReceiveMaximum    uint16              `yaml:"receive_maximum"`
	MaxInflight       int                 `yaml:"max_inflight"`
	MaxQueued         int                 `yaml:"max_queued"`
	QueueOverflow     core.OverflowPolicy `yaml:"queue_overflow"`
	TopicAliasMaximum uint16              `yaml:"topic_alias_maximum"`
	MaxTopicLevels    int                 `yaml:"max_topic_levels"`
	MaxSessionExpiry  uint32              `yaml:"max_session_expiry"`
	RetainDisabled    bool                `yaml:"retain_disabled"`
	SharedStrategy    core.SharedStrategy `yaml:"shared_strategy"`
	SysInterval       time.Duration       `yaml:"sys_interval"`
	WriteTimeout      time.Duration       `yaml:"write_timeout"`
	ReadBufferSize    int                 `yaml:"read_buffer_size"`
}

// options converts to core.Options; core fills in its defaults and validates.
func (b brokerConfig) options() core.Options {
	return core.Options{
		MaxConnections:    b.MaxConnections,
		MaxPacketSize:     b.MaxPacketSize,
		ConnectTimeout:    b.ConnectTimeout,
		MaxKeepAlive:      b.MaxKeepAlive,
		ReceiveMaximum:    b.ReceiveMaximum,
		MaxInflight:       b.MaxInflight,
		MaxQueued:         b.MaxQueued,
		QueueOverflow:     b.QueueOverflow,
		TopicAliasMaximum: b.TopicAliasMaximum,
		MaxTopicLevels:    b.MaxTopicLevels,
		MaxSessionExpiry:  b.MaxSessionExpiry,
		RetainDisabled:    b.RetainDisabled,
		SharedStrategy:    b.SharedStrategy,
		SysInterval:       b.SysInterval,
		WriteTimeout:      b.WriteTimeout,
		ReadBufferSize:    b.ReadBufferSize,
	}
}

// Defaults that are not core's.
const (
	defaultTCPAddress = ":1883"
	defaultDataDir    = "./data"
)

// defaultConfig is the configuration of a bare `xmq`.
func defaultConfig() config {
	return config{
		Listeners: []listenerConfig{{Name: "tcp", Transport: listeners.TransportTCP, Address: defaultTCPAddress}},
		DataDir:   defaultDataDir,
		Log:       logConfig{Level: "info", Format: "auto"},
	}
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
		if l.Address == "" && l.Transport == listeners.TransportTCP {
			l.Address = defaultTCPAddress
		}
	}
}

// validate checks what core does not: listeners, logging and durations.
func (c *config) validate() error {
	if len(c.Listeners) == 0 {
		return errors.New("no listeners configured")
	}
	names := map[string]bool{}
	for _, l := range c.Listeners {
		if names[l.Name] {
			return fmt.Errorf("listener name %q is used twice", l.Name)
		}
		names[l.Name] = true
		if err := listeners.Supported(l.Transport); err != nil {
			return fmt.Errorf("listener %s: %w", l.Name, err)
		}
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log level %q: want debug, info, warn or error", c.Log.Level)
	}
	switch c.Log.Format {
	case "auto", "console", "json":
	default:
		return fmt.Errorf("log format %q: want auto, console or json", c.Log.Format)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"connect_timeout", c.Broker.ConnectTimeout}, {"write_timeout", c.Broker.WriteTimeout}} {
		if d.v < 0 {
			return fmt.Errorf("broker.%s %v must not be negative", d.key, d.v)
		}
	}
	return nil
}

// readConfigFile decodes the YAML file at path over cfg: keys present in
// the file replace the values in cfg, absent keys keep them. Unknown keys
// are errors, so a typo never passes silently.
func readConfigFile(path string, cfg *config) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) { // EOF: an empty file
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

// usageError is a mistake on the command line; main exits 2 for it.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// errHelp asks run to print the usage and succeed.
var errHelp = flag.ErrHelp

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
	return fs
}

// loadConfig builds the configuration from defaults, the file named by
// -c/-config and the flags, in that order of precedence (flags win).
func loadConfig(args []string) (config, error) {
	var f flags
	fs := newFlagSet(&f)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return config{}, errHelp
		}
		return config{}, usageError{fmt.Errorf("%w (xmq -h lists the flags)", err)}
	}
	if fs.NArg() > 0 {
		return config{}, usageError{fmt.Errorf("unexpected argument %q (xmq -h lists the flags)", fs.Arg(0))}
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })

	cfg := defaultConfig()
	if f.config != "" {
		if err := readConfigFile(f.config, &cfg); err != nil {
			return config{}, err
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
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return config{}, err
	}
	return cfg, nil
}

// printUsage documents every flag; a test checks none is missing.
func printUsage(w io.Writer) {
	fmt.Fprint(w, `xmq is an MQTT 3.1, 3.1.1 and 5.0 broker.

Usage:
  xmq [flags]        serve MQTT (with no flags: TCP on :1883, data directory ./data)
  xmq version        print the version and exit

Flags (each one given overrides the configuration file):
  -c FILE, -config FILE
        YAML configuration file. xmq.example.yaml lists every key with its
        default; unknown keys are errors.
  -listen ADDR
        serve MQTT over TCP on ADDR (host:port; port 0 picks a free port).
        Repeat the flag or separate addresses with commas for several
        listeners. Replaces the listeners of the file. Default ":1883".
  -data DIR
        data directory, created if missing. Default "./data"; -data ""
        keeps state in memory explicitly. Persistence to disk is not
        implemented yet: whatever this says, sessions, queued and retained
        messages live in memory and are lost when xmq exits.
  -log-level LEVEL
        debug, info, warn or error. Default "info".
  -log-format FORMAT
        auto, console or json. Default "auto": console on a terminal,
        JSON otherwise.
  -h, -help
        print this help and exit.

Signals: SIGINT or SIGTERM shuts down gracefully (up to 10s for clients to go).
`)
}
