package bridge

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// UserPrefix starts the user name and client id of every bridge's local
// session: "$bridge:NAME". Such names are reserved (Manager.CheckLogin):
// only a bridge of this process logs in with them.
const UserPrefix = "$bridge:"

// ListenerPrefix starts the listener name of a bridge's local connection,
// "bridge:NAME", which labels it in logs and metrics.
const ListenerPrefix = "bridge:"

// Local is the local broker as the bridges use it; the composition root
// adapts *core.Server to it, so this package never imports core.
type Local interface {
	// ServeConn serves conn as a client connection of the broker, on a
	// goroutine of its own, labelled listener.
	ServeConn(conn net.Conn, listener string)
	// Session describes the session of clientID, if there is one.
	Session(clientID string) (SessionInfo, bool)
	// SessionIDs lists the client ids of the sessions that start with prefix.
	SessionIDs(prefix string) []string
	// RemoveSession ends the session of clientID and discards its queue.
	RemoveSession(clientID string) bool
}

// SessionInfo is what the bridges read of their local session.
type SessionInfo struct {
	Queued   int      // messages waiting: what the remote has not got yet
	Inflight int      // messages sent to the bridge and not yet acknowledged by the remote
	Dropped  int64    // messages the session lost (queue full, QoS 0 while offline, expired, too large)
	Filters  []string // its subscriptions
	// AwaitingRelease are the packet ids of QoS 2 messages in that the
	// local broker received and whose PUBREL it waits for.
	AwaitingRelease []uint16
}

// Options configures a Manager.
type Options struct {
	// Local is the local broker.
	Local Local
	// ReceiveMaximum is how many QoS 1/2 messages the local broker takes
	// from one client unacknowledged (its receive_maximum): the bridges
	// announce it to their remotes, since every message in goes on to it.
	// Default 1024, the broker's default.
	ReceiveMaximum uint16
	// MaxPacketSize is the local broker's max_packet_size, announced to
	// the remotes; 0: none announced.
	MaxPacketSize int
	// Log receives the bridges' logs (default: none).
	Log *zap.Logger
}

// Manager runs the configured bridges. Safe for concurrent use.
type Manager struct {
	opts   Options
	log    *zap.Logger
	secret [32]byte // the local sessions' password: random, never leaves the process

	mu      sync.Mutex // guards bridges and closed; held while bridges start and stop
	bridges map[string]*Bridge
	closed  bool

	// names are the configured bridges, for CheckLogin, which core calls
	// while a bridge connects, possibly while Apply holds mu and waits
	// for that bridge to stop.
	names sync.Map // string → struct{}
}

// NewManager returns a Manager with no bridge; Apply configures them.
func NewManager(opts Options) *Manager {
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	if opts.ReceiveMaximum == 0 {
		opts.ReceiveMaximum = 1024
	}
	m := &Manager{opts: opts, log: opts.Log, bridges: map[string]*Bridge{}}
	var key [16]byte
	_, _ = rand.Read(key[:]) // never fails on supported platforms
	hex.Encode(m.secret[:], key[:])
	return m
}

// Changes says what Apply did.
type Changes struct {
	Added, Changed, Removed, Unchanged []string
}

// Apply makes the running bridges those of cfgs: new ones start (unless
// disabled), removed ones stop and their local sessions are discarded
// (with what they queued), changed ones restart with their new
// configuration, keeping their local session, its queue and their
// counters; unchanged ones go on untouched. Local sessions of bridges not
// configured at all (removed while the broker was down) are discarded
// too. An invalid list changes nothing.
func (m *Manager) Apply(cfgs []Config) (Changes, error) {
	var ch Changes
	if err := ValidateAll(cfgs); err != nil {
		return ch, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ch, errors.New("bridge: the manager is closed")
	}
	want := map[string]bool{}
	for _, c := range cfgs {
		c.SetDefaults()
		want[c.Name] = true
		m.names.Store(c.Name, struct{}{})
		old := m.bridges[c.Name]
		switch {
		case old == nil:
			ch.Added = append(ch.Added, c.Name)
			b := newBridge(m, c, &counters{})
			m.bridges[c.Name] = b
			if !c.Disabled {
				b.start()
			}
		case reflect.DeepEqual(old.cfg, c):
			ch.Unchanged = append(ch.Unchanged, c.Name)
		default:
			ch.Changed = append(ch.Changed, c.Name)
			wasRunning := old.running()
			old.halt()
			b := newBridge(m, c, old.c)
			// The remote session still holds the old in rules'
			// subscriptions: the next link drops those no rule keeps.
			b.stale = append(newRules(old.cfg.Topics).inFilters(), old.stale...)
			m.bridges[c.Name] = b
			// An operator's stop outlives a reload that changes the
			// configuration; enabling or disabling it in the file wins.
			if !c.Disabled && (wasRunning || old.cfg.Disabled) {
				b.start()
			}
		}
	}
	for name, b := range m.bridges {
		if !want[name] {
			ch.Removed = append(ch.Removed, name)
			b.halt()
			delete(m.bridges, name)
			m.names.Delete(name)
			m.opts.Local.RemoveSession(b.localID)
		}
	}
	for _, id := range m.opts.Local.SessionIDs(UserPrefix) {
		if !want[strings.TrimPrefix(id, UserPrefix)] {
			m.log.Info("removing the local session of a bridge no longer configured", zap.String("client_id", id))
			m.opts.Local.RemoveSession(id)
		}
	}
	for _, l := range [][]string{ch.Added, ch.Changed, ch.Removed, ch.Unchanged} {
		slices.Sort(l)
	}
	if len(ch.Added)+len(ch.Changed)+len(ch.Removed) > 0 {
		m.log.Info("bridges configured", zap.Strings("added", ch.Added), zap.Strings("changed", ch.Changed),
			zap.Strings("removed", ch.Removed), zap.Int("unchanged", len(ch.Unchanged)))
	}
	return ch, nil
}

// ErrUnknown is returned for a bridge name that is not configured.
var ErrUnknown = errors.New("bridge: no such bridge")

// Start starts a stopped bridge; a running one goes on.
func (m *Manager) Start(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.bridges[name]
	if b == nil || m.closed {
		return fmt.Errorf("%w: %q", ErrUnknown, name)
	}
	b.start()
	return nil
}

// Stop stops a bridge and waits for its link to close; its local session
// stays and queues what it would forward, within the broker's limits.
func (m *Manager) Stop(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.bridges[name]
	if b == nil {
		return fmt.Errorf("%w: %q", ErrUnknown, name)
	}
	b.halt()
	return nil
}

// Close stops every bridge; their local sessions stay for the next start.
func (m *Manager) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	var wg sync.WaitGroup
	for _, b := range m.bridges {
		wg.Go(b.halt)
	}
	wg.Wait()
}

// Status is one bridge as the admin API and metrics show it.
type Status struct {
	Name      string
	State     State
	Addresses []string
	Address   string // in use, or tried last
	Protocol  string
	ClientID  string // at the remote
	LocalID   string // the local session's client id
	// LoopPrevention is how the current link stops loops: no_local (MQTT
	// 5), bridge_bit (a 3.1.1 remote that took it), origin_tracking, or
	// none_needed (no topic goes both ways); "" when not connected.
	LoopPrevention string
	ConnectedSince time.Time // zero unless connected
	Backoff        time.Duration
	LastError      string
	LastErrorAt    time.Time
	Topics         []Rule

	MessagesOut, MessagesIn int64
	BytesOut, BytesIn       int64
	Links                   int64 // links established
	Reconnects              int64 // connection rounds after the first
	Failures                map[string]int64
	Dropped                 map[string]int64 // by cause: the bridge's, and local_queue for its local session's
	LoopsPrevented          int64            // messages from the remote recognised as the bridge's own
	SubscriptionsRefused    int64
	Queued, Inflight        int // the local session: waiting for the remote, and sent to it unacknowledged
	// InflightIn are the messages in (from the remote) the current link
	// has not finished: not yet acknowledged by the local broker, or QoS
	// 2 ones whose PUBREL the remote has not sent; 0 without a link.
	InflightIn int
	// InflightTimeouts counts the links closed because a message in
	// flight, either way, was not acknowledged within InflightTimeout.
	InflightTimeouts int64
}

// Status lists the bridges by name.
func (m *Manager) Status() []Status {
	m.mu.Lock()
	bs := make([]*Bridge, 0, len(m.bridges))
	for _, b := range m.bridges {
		bs = append(bs, b)
	}
	m.mu.Unlock()
	slices.SortFunc(bs, func(a, b *Bridge) int { return strings.Compare(a.cfg.Name, b.cfg.Name) })
	out := make([]Status, len(bs))
	for i, b := range bs {
		out[i] = b.status()
	}
	return out
}

// Bridge returns one bridge's status.
func (m *Manager) Bridge(name string) (Status, bool) {
	m.mu.Lock()
	b := m.bridges[name]
	m.mu.Unlock()
	if b == nil {
		return Status{}, false
	}
	return b.status(), true
}

func (b *Bridge) status() Status {
	c := &b.cfg
	s := Status{Name: c.Name, Addresses: slices.Clone(c.Addresses), Protocol: c.Protocol, ClientID: c.ClientID,
		LocalID: b.localID, Topics: slices.Clone(c.Topics),
		MessagesOut: b.c.msgsOut.Load(), MessagesIn: b.c.msgsIn.Load(), BytesOut: b.c.bytesOut.Load(), BytesIn: b.c.bytesIn.Load(),
		Links: b.c.links.Load(), Reconnects: b.c.reconnects.Load(), LoopsPrevented: b.c.loops.Load(),
		SubscriptionsRefused: b.c.subRefused.Load(), InflightTimeouts: b.c.inflightTimeouts.Load(),
		Failures: map[string]int64{}, Dropped: map[string]int64{}}
	for i := range b.c.failures {
		s.Failures[failNames[i]] = b.c.failures[i].Load()
	}
	for i := range b.c.drops {
		s.Dropped[dropNames[i]] = b.c.drops[i].Load()
	}
	if info, ok := b.m.opts.Local.Session(b.localID); ok {
		s.Queued, s.Inflight = info.Queued, info.Inflight
		s.Dropped["local_queue"] = info.Dropped
	} else {
		s.Dropped["local_queue"] = 0
	}
	b.mu.Lock()
	s.State, s.Address, s.Backoff, s.LastError, s.LastErrorAt = b.state, b.address, b.backoff, b.lastErr, b.lastErrAt
	if b.state == StateConnected {
		s.ConnectedSince, s.LoopPrevention = b.since, b.loopsBy
	}
	if b.link != nil {
		s.InflightIn = int(b.link.in.open.Load())
	}
	b.mu.Unlock()
	return s
}

// ErrReservedName refuses a login with a bridge's reserved names that
// is not one of this process's bridges.
var ErrReservedName = fmt.Errorf("bridge: user names and client ids starting with %q are the bridges': %w", UserPrefix, codec.NotAuthorized)

// Reserved reports whether a CONNECT uses a bridge's reserved client id or
// user name, which only CheckLogin may let in.
func Reserved(clientID, username string) bool {
	return strings.HasPrefix(clientID, UserPrefix) || strings.HasPrefix(username, UserPrefix)
}

// CheckLogin decides a CONNECT that uses a reserved name (Reserved): it
// is a bridge of this process if the user name and client id are both
// "$bridge:NAME" of a configured bridge, it came on that bridge's
// in-process listener, and the password is the Manager's secret, which
// never leaves the process. Anything else is refused with Not authorized.
func (m *Manager) CheckLogin(clientID, username string, password []byte, listener string) error {
	name, ok := strings.CutPrefix(username, UserPrefix)
	if !ok || clientID != username || listener != ListenerPrefix+name || !hmac.Equal(password, m.secret[:]) {
		return ErrReservedName
	}
	if _, known := m.names.Load(name); !known {
		return ErrReservedName
	}
	return nil
}
