package loadtest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/listeners"
)

// Mode is what a run measures.
type Mode string

// The modes.
const (
	ModeConn   Mode = "conn"   // connections: ramp, hold, liveness
	ModePub    Mode = "pub"    // ingest: publishers only
	ModePubSub Mode = "pubsub" // end-to-end: every subscriber gets every publisher
	ModeFanIn  Mode = "fanin"  // many publishers → a shared subscription group
	ModeP2P    Mode = "p2p"    // publisher i → subscriber i on a topic of their own
)

// Modes lists the modes in the order the help shows them.
var Modes = []Mode{ModeConn, ModePub, ModePubSub, ModeFanIn, ModeP2P}

// Options is one load test. It travels to agents as JSON, so every field
// is plain data; durations are nanoseconds in JSON. Target and Session are
// embedded, so that the JSON stays one flat object, as agents read it.
type Options struct {
	Target
	Session

	// Workload.
	Mode            Mode          `json:"mode"`
	Levels          []int         `json:"levels,omitempty"` // conn: connection counts, one case each
	Hold            time.Duration `json:"hold_ns"`
	DialConcurrency int           `json:"dial_concurrency"`
	ConnRate        float64       `json:"conn_rate,omitempty"` // new connections per second; 0 = as fast as dials finish
	// Wake is how many times conn mode, after the liveness check, lets
	// every connection stay quiet for WakeIdle and then times one PINGREQ
	// on one of them (and one more right after, on the now busy one): the
	// cost of waking a parked connection. 0 = off.
	Wake     int           `json:"wake,omitempty"`
	WakeIdle time.Duration `json:"wake_idle_ns,omitempty"`
	Pubs     int           `json:"pubs"`
	Subs     int           `json:"subs"`
	QoS      int           `json:"qos"`
	Payloads []int         `json:"payloads"`            // one case per size
	Duration time.Duration `json:"duration_ns"`         // 0: until Config.Stop (Ctrl-C)
	Rate     float64       `json:"rate"`                // messages per second per publisher; 0 = as fast as possible
	Inflight int           `json:"inflight"`            // unacknowledged QoS 1/2 messages per publisher
	Topic    string        `json:"topic"`               // publisher i's topic; %i is i, %c its client id, %u the user
	SubTopic string        `json:"sub_topic,omitempty"` // subscriber j's filter, placeholders as Topic's; "" = derived from Topic
	Loop     bool          `json:"loop,omitempty"`      // p2p: one connection publishes to and subscribes to its own topic
	Churn    time.Duration `json:"churn_ns,omitempty"`  // subscribers drop and come back every Churn
	Drain    time.Duration `json:"drain_ns"`            // how long to wait for messages after publishing ends

	token string // the run's client id prefix (Job.Token), for the %c placeholder
}

// Target is the broker a load test dials and how: address, transport and
// TLS, and the local addresses to dial from.
type Target struct {
	Addr string `json:"addr"` // host:port, or a URL whose scheme names the transport
	// SubAddr is where subscribers connect when it is not Addr (same form,
	// same transport): what reaches them goes through a bridge or a cluster.
	SubAddr   string `json:"sub_addr,omitempty"`
	Transport string `json:"transport"` // tcp, tls, ws, wss, quic; "" = from Addr, else tcp
	WSPath    string `json:"ws_path"`   // path of ws/wss URLs built from host:port
	Insecure  bool   `json:"insecure,omitempty"`
	// TLSResume shares one TLS session cache between the connections, so
	// that they resume sessions (TLS 1.3 tickets): a reconnect storm of
	// devices that kept their tickets.
	TLSResume bool     `json:"tls_resume,omitempty"`
	CAFile    string   `json:"cafile,omitempty"`
	CertFile  string   `json:"cert,omitempty"`
	KeyFile   string   `json:"key,omitempty"`
	SrcIPs    []string `json:"src_ips,omitempty"` // local addresses to spread connections over
}

// Session is the MQTT session of every connection.
type Session struct {
	User           string        `json:"user,omitempty"`
	Pass           string        `json:"pass,omitempty"` // reports print it redacted
	MQTT           string        `json:"mqtt"`           // "3.1", "3.1.1" or "5"
	Clean          bool          `json:"clean"`
	KeepAlive      time.Duration `json:"keepalive_ns"`
	ConnectTimeout time.Duration `json:"connect_timeout_ns"`
	IDPrefix       string        `json:"id_prefix,omitempty"` // client ids are IDPrefix-p0, -s0, -c0 …; "" = random
}

// DefaultOptions returns the defaults the command-line flags show.
func DefaultOptions() Options {
	return Options{
		Target:  Target{Addr: "127.0.0.1:1883", WSPath: "/mqtt"},
		Session: Session{MQTT: "5", Clean: true, KeepAlive: 60 * time.Second, ConnectTimeout: 10 * time.Second},
		Mode:    ModePub, Levels: []int{1000}, Hold: 3 * time.Second, DialConcurrency: 200, WakeIdle: 300 * time.Millisecond,
		Pubs: 10, Subs: 10, Payloads: []int{64}, Duration: 10 * time.Second, Inflight: 64, Topic: "loadtest/%i",
		Drain: 5 * time.Second,
	}
}

// ModeDefaults returns the flag settings a mode implies unless the command
// line says otherwise: fan-in and point-to-point are QoS 1 at 1 msg/s per
// publisher, and point-to-point subscribers keep their sessions.
func ModeDefaults(m Mode) []string {
	switch m {
	case ModeFanIn:
		return []string{"-qos", "1", "-rate", "1", "-pubs", "100", "-subs", "5"}
	case ModeP2P:
		return []string{"-qos", "1", "-rate", "1", "-clean=false"}
	}
	return nil
}

// Version is the protocol level o.MQTT names.
func (o *Options) Version() (byte, error) {
	switch o.MQTT {
	case "3.1":
		return codec.V31, nil
	case "3.1.1", "311", "4":
		return codec.V311, nil
	case "5", "5.0":
		return codec.V5, nil
	}
	return 0, fmt.Errorf("loadtest: -mqtt %q: want 3.1, 3.1.1 or 5", o.MQTT)
}

// URL returns the URL to dial and its transport. A bare host:port gets the
// scheme of o.Transport (tcp when empty) and, for ws and wss, o.WSPath; a
// URL keeps its own, and a -transport that disagrees with it is an error.
// With several addresses (see URLs) it is the first.
func (o *Options) URL() (rawURL, transport string, err error) {
	us, t, err := o.URLs()
	if err != nil {
		return "", "", err
	}
	return us[0], t, nil
}

// URLs returns every URL that Addr names and their one transport. Addr may
// be a comma-separated list (the nodes of a cluster, say): connection i
// dials the (i mod n)-th, so the clients spread evenly over the brokers.
func (o *Options) URLs() (rawURLs []string, transport string, err error) {
	return o.urlsOf("-addr", o.Addr)
}

// SubURLs is URLs for the subscribers: SubAddr's, or Addr's without one.
func (o *Options) SubURLs() (rawURLs []string, transport string, err error) {
	if o.SubAddr == "" {
		return o.URLs()
	}
	us, t, err := o.urlsOf("-sub-addr", o.SubAddr)
	if err != nil {
		return nil, "", err
	}
	if _, at, aerr := o.URL(); aerr == nil && at != t {
		return nil, "", fmt.Errorf("loadtest: -sub-addr %s: want the transport of -addr (%s), not %s", o.SubAddr, at, t)
	}
	return us, t, nil
}

// urlsOf resolves a comma-separated list of addresses, which must share
// one transport: a run measures one transport at a time.
func (o *Options) urlsOf(flag, list string) (rawURLs []string, transport string, err error) {
	for _, addr := range strings.Split(list, ",") {
		u, t, err := o.urlOf(flag, strings.TrimSpace(addr))
		if err != nil {
			return nil, "", err
		}
		if transport != "" && t != transport {
			return nil, "", fmt.Errorf("loadtest: %s %s: every address needs the same transport, not %s and %s", flag, list, transport, t)
		}
		rawURLs, transport = append(rawURLs, u), t
	}
	return rawURLs, transport, nil
}

// urlOf reads one address in listeners' URL grammar, the one the broker's
// configuration and bridges read; a bare host or host:port is first given
// the scheme of -transport (tcp when empty) and its default port.
func (o *Options) urlOf(flag, addr string) (rawURL, transport string, err error) {
	rawURL = addr
	if !strings.Contains(addr, "://") {
		if rawURL, err = o.bareURL(flag, addr); err != nil {
			return "", "", err
		}
	}
	t, _, _, err := listeners.ParseURL(rawURL)
	if err != nil {
		return "", "", fmt.Errorf("loadtest: %s: %w", flag, err)
	}
	if o.Transport != "" && o.Transport != t {
		return "", "", fmt.Errorf("loadtest: -transport %s disagrees with %s %s", o.Transport, flag, addr)
	}
	// -ws-path names the path of a ws or wss URL that gives none.
	if (t == listeners.TransportWS || t == listeners.TransportWSS) && o.WSPath != "" {
		if u, err := url.Parse(rawURL); err == nil && (u.Path == "" || u.Path == "/") {
			u.Path = o.WSPath
			rawURL = u.String()
		}
	}
	return rawURL, t, nil
}

// bareURL turns a host or host:port into a URL of -transport.
func (o *Options) bareURL(flag, addr string) (string, error) {
	t := o.Transport
	if t == "" {
		t = listeners.TransportTCP
	}
	scheme := listeners.Scheme(t)
	if scheme == "" {
		return "", fmt.Errorf("loadtest: -transport %q: want tcp, tls, ws, wss or quic", t)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil { // no port: the transport's default
		host, port = strings.Trim(addr, "[]"), listeners.DefaultPort(t)
	}
	if host == "" {
		return "", fmt.Errorf("loadtest: %s %q has no host", flag, addr)
	}
	u := scheme + "://" + net.JoinHostPort(host, port)
	if t == listeners.TransportWS || t == listeners.TransportWSS {
		p := o.WSPath
		if p == "" {
			p = listeners.DefaultPath
		}
		if !strings.HasPrefix(p, "/") {
			p = "/" + p
		}
		u += p
	}
	return u, nil
}

// TLSConfig builds the client TLS configuration from -insecure, -cafile,
// -cert/-key and -tls-resume; nil for transports without TLS.
func (o *Options) TLSConfig() (*tls.Config, error) {
	_, t, err := o.URL()
	if err != nil {
		return nil, err
	}
	if t != "tls" && t != "wss" && t != "quic" {
		return nil, nil
	}
	cfg := &tls.Config{InsecureSkipVerify: o.Insecure} //nolint:gosec // an explicit -insecure
	if o.TLSResume {
		// Keyed by server name: one entry per broker address, whose latest
		// ticket every connection to it resumes with.
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(0)
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("loadtest: -cafile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("loadtest: -cafile %s: no PEM certificates", o.CAFile)
		}
		cfg.RootCAs = pool
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, errors.New("loadtest: -cert and -key go together")
	}
	if o.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("loadtest: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// ClientID is the client id of connection i of a role: p (publisher), s
// (subscriber) or c (conn mode).
func (o *Options) ClientID(role byte, i int) string { return fmt.Sprintf("%s-%c%d", o.token, role, i) }

// expand fills a topic pattern's placeholders for connection i of a role,
// as emqtt-bench's: %i its number, %c its client id, %u the user name.
func (o *Options) expand(pattern string, role byte, i int) string {
	if !strings.Contains(pattern, "%") {
		return pattern
	}
	return strings.NewReplacer("%i", strconv.Itoa(i), "%c", o.ClientID(role, i), "%u", o.User).Replace(pattern)
}

// PubTopic is publisher i's topic.
func (o *Options) PubTopic(i int) string { return o.expand(o.Topic, 'p', i) }

// perClient reports whether a pattern differs between connections.
func perClient(pattern string) bool {
	return strings.Contains(pattern, "%i") || strings.Contains(pattern, "%c")
}

// wildcardFor turns a publisher topic pattern into a filter matching every
// publisher: each level that differs between publishers becomes +.
func (o *Options) wildcardFor(pattern string) string {
	levels := strings.Split(pattern, "/")
	for i, l := range levels {
		if perClient(l) {
			levels[i] = "+"
		} else {
			levels[i] = o.expand(l, 'p', 0) // %u
		}
	}
	return strings.Join(levels, "/")
}

// SubFilter is subscriber j's topic filter.
func (o *Options) SubFilter(j int) string {
	if o.SubTopic != "" {
		return o.expand(o.SubTopic, 's', j)
	}
	switch o.Mode {
	case ModeP2P:
		return o.PubTopic(j) // its publisher's
	case ModeFanIn:
		return "$share/loadtest/" + o.wildcardFor(o.Topic)
	}
	return o.wildcardFor(o.Topic)
}

// hasSubscribers reports whether the mode has subscribers.
func (o *Options) hasSubscribers() bool {
	return o.Mode == ModePubSub || o.Mode == ModeFanIn || o.Mode == ModeP2P
}

// subCount is the number of subscribers the mode runs.
func (o *Options) subCount() int {
	switch o.Mode {
	case ModePubSub, ModeFanIn:
		return o.Subs
	case ModeP2P:
		if o.Loop {
			return 0 // the publishers subscribe
		}
		return o.Pubs
	}
	return 0
}

// Validate reports the first setting that cannot work.
func (o *Options) Validate() error {
	if _, err := o.Version(); err != nil {
		return err
	}
	if _, _, err := o.SubURLs(); err != nil {
		return err
	}
	if o.Mode == "" {
		o.Mode = ModePub
	}
	known := false
	for _, m := range Modes {
		known = known || m == o.Mode
	}
	switch {
	case !known:
		return fmt.Errorf("loadtest: -mode %q: want conn, pub, pubsub, fanin or p2p", o.Mode)
	case o.KeepAlive < 0 || o.KeepAlive > 65535*time.Second:
		return fmt.Errorf("loadtest: -keepalive %s out of range 0..18h12m15s", o.KeepAlive)
	case o.ConnectTimeout <= 0:
		return errors.New("loadtest: connect timeout must be positive")
	case o.DialConcurrency < 1:
		return errors.New("loadtest: -dial-concurrency must be at least 1")
	case o.ConnRate < 0:
		return errors.New("loadtest: -conn-rate must not be negative")
	case o.Drain < 0 || o.Churn < 0 || o.Hold < 0:
		return errors.New("loadtest: -drain, -churn and -hold must not be negative")
	case o.Loop && o.Mode != ModeP2P:
		return errors.New("loadtest: -loop is for -mode p2p")
	case o.Wake < 0:
		return errors.New("loadtest: -wake must not be negative")
	case o.Wake > 0 && o.Mode != ModeConn:
		return errors.New("loadtest: -wake is for -mode conn")
	case o.WakeIdle < 0 || o.Wake > 0 && o.WakeIdle == 0:
		return errors.New("loadtest: -wake-idle must be positive")
	}
	if o.Mode == ModeConn {
		if len(o.Levels) == 0 {
			return errors.New("loadtest: -levels is empty")
		}
		for _, l := range o.Levels {
			if l < 1 {
				return fmt.Errorf("loadtest: -levels: %d is not a connection count", l)
			}
		}
		return nil
	}
	switch {
	case o.Pubs < 1 || o.Pubs >= maxPubs:
		return fmt.Errorf("loadtest: -pubs %d out of range 1..%d", o.Pubs, maxPubs-1)
	case (o.Mode == ModePubSub || o.Mode == ModeFanIn) && o.Subs < 1:
		return errors.New("loadtest: -subs must be at least 1")
	case o.QoS < 0 || o.QoS > 2:
		return fmt.Errorf("loadtest: -qos %d: want 0, 1 or 2", o.QoS)
	case len(o.Payloads) == 0:
		return errors.New("loadtest: -payload is empty")
	case o.Duration < 0:
		return errors.New("loadtest: -duration must not be negative (0 runs until Ctrl-C)")
	case o.Rate < 0:
		return errors.New("loadtest: -rate must not be negative")
	case o.Inflight < 1 || o.Inflight > 65535:
		return fmt.Errorf("loadtest: -inflight %d out of range 1..65535", o.Inflight)
	case o.Churn > 0 && !o.hasSubscribers():
		return errors.New("loadtest: -churn needs subscribers (pubsub, fanin, p2p)")
	}
	for _, p := range o.Payloads {
		if p < 0 || p > 256<<20 {
			return fmt.Errorf("loadtest: -payload %d out of range 0..256MiB", p)
		}
	}
	for _, i := range []int{0, o.Pubs - 1} {
		if err := codec.ValidTopicName([]byte(o.PubTopic(i))); err != nil {
			return fmt.Errorf("loadtest: -topic %q: %w", o.Topic, err)
		}
	}
	if o.hasSubscribers() && !o.Loop {
		for _, j := range []int{0, o.subCount() - 1} {
			if err := codec.ValidFilter([]byte(o.SubFilter(j))); err != nil {
				return fmt.Errorf("loadtest: subscription filter %q: %w", o.SubFilter(j), err)
			}
		}
	}
	return nil
}

// clientCount is how many connections a case opens.
func (o *Options) clientCount(level int) int {
	if o.Mode == ModeConn {
		return level
	}
	return o.Pubs + o.subCount()
}
