package web

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"

	"github.com/xmq-io/xmq/core"
)

// DefaultAddress is where the dashboard listens unless told otherwise:
// loopback only, so a bare xmq never exposes its admin API to the network.
const DefaultAddress = "127.0.0.1:18083"

// DefaultAdminUser is the admin user's name unless configured.
const DefaultAdminUser = "admin"

// DefaultSessionTTL is how long a dashboard login lasts.
const DefaultSessionTTL = 12 * time.Hour

// Defaults of the HTTP server's limits. Nothing the web port serves streams
// (the dashboard's live data comes over MQTT, pprof has its own server), so
// every request can be read and answered within seconds; a client that
// trickles its headers or body, or never reads its answer, is cut.
const (
	// DefaultReadHeaderTimeout bounds reading a request's headers.
	DefaultReadHeaderTimeout = 5 * time.Second
	// DefaultReadTimeout bounds reading a whole request, body included,
	// from its first byte: a 1 MiB publish body needs 70 KiB/s.
	DefaultReadTimeout = 15 * time.Second
	// DefaultWriteTimeout bounds a request from the end of its headers to
	// the end of its answer (1000 list items are well under a megabyte).
	DefaultWriteTimeout = 30 * time.Second
	// DefaultIdleTimeout closes a keep-alive connection without a request.
	DefaultIdleTimeout = time.Minute
	// DefaultMaxHeaderBytes bounds a request's line and headers: room for a
	// session cookie, a bearer token and a paging cursor (see after= in the
	// README), not for Go's default megabyte per connection.
	DefaultMaxHeaderBytes = 64 << 10
)

// Broker is what the web server reads and does; *core.Server implements it.
type Broker interface {
	Stats() core.Snapshot
	StartTime() time.Time
	Options() core.Options
	ClientsPage(q core.ClientQuery) core.ClientPage
	Client(clientID string) (core.ClientInfo, bool)
	SubscriptionsPage(q core.SubscriptionQuery) core.SubscriptionPage
	RetainedPage(q core.RetainedQuery) core.RetainedPage
	RetainedMessage(topic string) (*core.Message, time.Time, bool)
	QueuedBytes() int64
	DeleteRetained(topic string) bool
	ConnectionsByListener() map[string]int
	Disconnect(clientID string) bool
	RemoveSession(clientID string) bool
	Publish(topic string, payload []byte, qos byte, retain bool) error
	// Topic metrics (core.Server.AddTopicMetric and the others): counters
	// of registered topics and filters, bounded by core.MaxTopicMetrics.
	AddTopicMetric(filter string) error
	RemoveTopicMetric(filter string) bool
	TopicMetrics() []core.TopicMetric
}

var _ Broker = (*core.Server)(nil)

// Listener describes one of the broker's MQTT listeners, as bound.
type Listener struct {
	Name      string `json:"name"`
	Transport string `json:"transport"` // tcp, tls, ws, wss, quic
	Address   string `json:"address"`   // the bound address, port 0 resolved
	Path      string `json:"path,omitempty"`
	// HandshakeFailures counts the connections the listener gave up on
	// before they carried MQTT, by reason (listeners.Listener's); nil:
	// not reported.
	HandshakeFailures func() map[string]int64 `json:"-"`
	// CertNotAfter is when the certificate the listener serves ends; nil
	// for listeners without TLS. A zero time is not known yet (ACME
	// before its first certificate).
	CertNotAfter func() time.Time `json:"-"`
}

// StoreUsage is what the broker's on-disk store holds against its budget.
type StoreUsage struct {
	DiskBytes   int64  // what the budget counts (store.Store.DiskUsage)
	BudgetBytes int64  // store.max_disk_bytes; 0: no budget
	FreeBytes   int64  // free bytes on its file system
	State       string // one of StoreStates
}

// StoreStates are the states of the on-disk store (store.State), for the
// xmq_store_state series.
var StoreStates = []string{"ok", "full", "stalled", "unavailable", "failed"}

// Ban is one entry of the banned list.
type Ban struct {
	Kind    string    `json:"kind"`  // client_id, username or ip (an address or CIDR prefix); flapping: client_id+username, client_id+ip
	Value   string    `json:"value"` //
	Reason  string    `json:"reason,omitempty"`
	Until   time.Time `json:"until,omitzero"` // zero: until removed
	Created time.Time `json:"created,omitzero"`
}

// BanList is the broker's runtime banned list (provided by auth; the
// composition root adapts it). A nil BanList makes the API answer 501.
type BanList interface {
	Ban(kind, value, reason string, until time.Time) error
	Unban(kind, value string) (removed bool, err error)
	Bans() []Ban
}

// APIKey is a key that scripts present in X-API-Key or as a bearer token.
// Only its SHA-256 is kept: keys are long random strings, not passwords.
type APIKey struct {
	Name   string
	SHA256 [32]byte
	Role   Role
}

// Options configures the web server.
type Options struct {
	// Address is host:port to listen on (default DefaultAddress).
	Address string
	// TLS, when set, makes the server HTTPS; session cookies are then Secure.
	TLS *tls.Config
	// AdminUser is the admin's login name (default DefaultAdminUser).
	AdminUser string
	// AdminPasswordHash is the admin's bcrypt hash (see AdminPassword).
	// Empty: nobody can log in with a password.
	AdminPasswordHash []byte
	// AdminPasswordFile is where a new password of the admin user, set
	// through the API, is kept (the data directory's AdminPasswordFile,
	// which AdminPassword reads at the next start); "": in memory only.
	AdminPasswordFile string
	// AdminPasswordFixed says the admin's password comes from
	// XMQ_ADMIN_PASSWORD or web.admin_password_hash, which win at every
	// start: the API refuses to change it.
	AdminPasswordFixed bool
	// UsersFile keeps the dashboard users that admins create (users.go),
	// written atomically, mode 0600; "": in memory only, lost at exit.
	UsersFile string
	// APIKeys are the keys scripts may use, each with its role.
	APIKeys []APIKey
	// AllowAnonymousLoopback lets API requests from a loopback address to a
	// loopback host name in without credentials, as admin.
	AllowAnonymousLoopback bool
	// SessionTTL is the lifetime of a login (default DefaultSessionTTL).
	SessionTTL time.Duration
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout and
	// MaxHeaderBytes are the HTTP server's limits (defaults
	// DefaultReadHeaderTimeout and so on); see net/http.Server.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	MaxHeaderBytes                                            int
	// Listeners are the broker's MQTT listeners, for the overview and for
	// the dashboard's own MQTT client.
	Listeners []Listener
	// Ready reports whether the broker can serve (listeners bound, store
	// open); nil means ready. /readyz answers 503 with its error.
	Ready func() error
	// Degraded reports why the broker serves with less than its full
	// function (the store full or unavailable); nil means it does not.
	// /healthz answers 200 either way, since a restart would not help, but
	// says {"status":"degraded","reason":…}.
	Degraded func() error
	// Bans is the runtime banned list; nil: the banned API answers 501.
	Bans BanList
	// MQTTTokens issues the dashboard's MQTT passwords (GET
	// /api/v1/auth/mqtt). The broker must check them: pass the same
	// MQTTTokens' Wrap of its Authenticator and Authorizer to core.New.
	// nil: New makes one, which only an allow-all broker accepts.
	MQTTTokens *MQTTTokens
	// AuthStats reads the MQTT authentication counters for /metrics; nil:
	// no xmq_auth_* series.
	AuthStats func() AuthStats
	// Bridges are the broker's bridges to other brokers (the bridges API,
	// the xmq_bridge_* metrics and the dashboard's Bridges page); nil:
	// none.
	Bridges Bridges
	// Reload does what SIGHUP does (POST /api/v1/reload): the
	// configuration file's live keys, certificates, password and ACL files,
	// and the bridges; nil: the endpoint answers 501.
	Reload func() (Reloaded, error)
	// TraceDir holds the trace files of the traces API (NAME.log, and
	// NAME.json with its facts); "" answers the traces API with 501. The
	// broker must implement Tracer.
	TraceDir string
	// Store reads the on-disk store's usage for /metrics and the
	// overview; nil: the broker keeps its state in memory.
	Store func() StoreUsage
	// HistoryFile keeps the overview's one-minute history of the last day
	// across restarts (written every minute and at Close, atomically);
	// "": in memory only.
	HistoryFile string
	// Version is the build's version, for the overview and metrics.
	Version string
	// Node is this broker's node name in a cluster: every /metrics
	// series then carries a node label. "" (a single broker): none.
	Node string
	// Cluster reads this node's cluster counters for the xmq_cluster_*
	// series; nil: not in a cluster, no such series.
	Cluster func() ClusterStats
	// Peers reach the other nodes of the cluster: GET /api/v1/nodes, and
	// the client and subscription lookups answered for every node
	// (nodes.go); nil: not in a cluster, the nodes API answers 404.
	Peers Peers
	// Log receives the server's logs (default: none).
	Log *zap.Logger
}

func (o *Options) setDefaults() {
	if o.Address == "" {
		o.Address = DefaultAddress
	}
	if o.AdminUser == "" {
		o.AdminUser = DefaultAdminUser
	}
	if o.SessionTTL == 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.ReadHeaderTimeout == 0 {
		o.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxHeaderBytes == 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.MQTTTokens == nil {
		o.MQTTTokens = NewMQTTTokens()
	}
}

// Validate reports options that cannot work.
func (o *Options) Validate() error {
	if o.SessionTTL < time.Minute {
		return fmt.Errorf("web: session ttl %v: want at least 1m", o.SessionTTL)
	}
	if o.ReadHeaderTimeout < 0 || o.ReadTimeout < 0 || o.WriteTimeout < 0 || o.IdleTimeout < 0 || o.MaxHeaderBytes < 0 {
		return errors.New("web: negative HTTP timeout or header limit")
	}
	if len(o.AdminPasswordHash) > 0 {
		if _, err := bcryptCost(o.AdminPasswordHash); err != nil {
			return fmt.Errorf("web: admin password hash: %w", err)
		}
	}
	seen := map[string]bool{}
	for _, k := range o.APIKeys {
		if k.Name == "" {
			return errors.New("web: an api key has no name")
		}
		if seen[k.Name] {
			return fmt.Errorf("web: api key %q is defined twice", k.Name)
		}
		seen[k.Name] = true
		if k.Role != RoleViewer && k.Role != RoleAdmin {
			return fmt.Errorf("web: api key %q: role %q: want viewer or admin", k.Name, k.Role)
		}
	}
	return nil
}

// Server is the HTTP server of the dashboard, API and metrics.
type Server struct {
	opts    Options
	broker  Broker
	log     *zap.Logger
	handler http.Handler
	auth    *authenticator
	sampler *sampler
	// topicRates turns topic metrics' counters into rates between listings.
	topicRates topicRateTracker
	alarms     *alarms
	reg        *prometheus.Registry
	node       *nodeStats    // the overview's node card
	traces     *traceManager // nil: no trace directory
	audit      *auditLog

	mu     sync.Mutex // guards http and closed
	http   *http.Server
	closed bool
}

// New builds a Server and starts its sampler; Close or Shutdown stops it.
func New(b Broker, opts Options) (*Server, error) {
	opts.setDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, broker: b, log: opts.Log}
	s.auth = newAuthenticator(&s.opts)
	if err := s.auth.users.load(); err != nil {
		return nil, err
	}
	s.audit = newAuditLog(auditEntries, s.log.Named("audit"))
	s.reg = prometheus.NewRegistry()
	var reg prometheus.Registerer = s.reg
	if opts.Node != "" {
		// Series of several nodes scraped into one Prometheus stay apart.
		reg = prometheus.WrapRegistererWith(prometheus.Labels{"node": opts.Node}, s.reg)
	}
	reg.MustRegister(newCollector(b, &s.opts),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if opts.Bridges != nil {
		reg.MustRegister(newBridgeCollector(opts.Bridges))
	}
	if opts.Cluster != nil {
		reg.MustRegister(newClusterCollector(opts.Cluster))
	}
	s.node = newNodeStats()
	if tr, ok := b.(Tracer); ok && opts.TraceDir != "" {
		s.traces = newTraceManager(opts.TraceDir, tr, s.log.Named("trace"))
	}
	s.alarms = &alarms{s: s, since: map[string]time.Time{}}
	s.sampler = newSampler(b, time.Second, historySamples, func(now time.Time) { s.alarms.check(now) })
	s.sampler.file, s.sampler.log = opts.HistoryFile, s.log.Named("history")
	if err := s.sampler.load(time.Now()); err != nil {
		// The charts start empty; the file is rewritten within a minute.
		s.log.Warn("overview history not loaded", zap.Error(err))
	}
	s.sampler.start()
	s.handler = s.routes()
	return s, nil
}

// Handler returns the server's HTTP handler (for tests and embedding).
func (s *Server) Handler() http.Handler { return s.handler }

// Listen binds Options.Address, so the caller learns at once whether the
// port is free; Serve then serves on it.
func (s *Server) Listen() (net.Listener, error) {
	l, err := net.Listen("tcp", s.opts.Address)
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	return l, nil
}

// Serve serves HTTP, or HTTPS with Options.TLS, on l until Shutdown; it
// returns nil after Shutdown.
func (s *Server) Serve(l net.Listener) error {
	hs := &http.Server{
		Handler: s.handler,
		// ReadTimeout runs from a request's first byte, so it also cuts a
		// body sent a byte at a time; net/http resets it for each request
		// of a keep-alive connection, and HTTP/2 applies both per stream.
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		ReadTimeout:       s.opts.ReadTimeout,
		WriteTimeout:      s.opts.WriteTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		MaxHeaderBytes:    s.opts.MaxHeaderBytes,
		ErrorLog:          zap.NewStdLog(s.log.Named("http")),
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = l.Close()
		return nil
	}
	if s.http != nil {
		s.mu.Unlock()
		return errors.New("web: Serve called twice")
	}
	s.http = hs
	s.mu.Unlock()
	var err error
	if s.opts.TLS != nil {
		// ServeTLS sets up HTTP/2 and takes the certificate from the
		// config's GetCertificate, so reloaded certificates apply.
		hs.TLSConfig = s.opts.TLS.Clone()
		err = hs.ServeTLS(l, "", "")
	} else {
		err = hs.Serve(l)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops the HTTP server gracefully and the sampler.
func (s *Server) Shutdown(ctx context.Context) error {
	s.Close()
	s.mu.Lock()
	hs := s.http
	s.closed = true
	s.mu.Unlock()
	if hs == nil {
		return nil
	}
	return hs.Shutdown(ctx)
}

// Close stops the sampler, keeps its history (Options.HistoryFile) and
// stops the running traces; the handler keeps working without rates.
func (s *Server) Close() {
	s.sampler.stop()
	if err := s.sampler.save(); err != nil {
		s.log.Warn("overview history not saved", zap.Error(err))
	}
	if s.traces != nil {
		s.traces.close()
	}
}
