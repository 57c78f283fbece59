package core

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// Authenticator decides whether a client may connect. A refusal returns an
// error; a codec.ReasonCode error (BadUserNameOrPassword, NotAuthorized,
// Banned …) is sent to the client as is, any other error as Not Authorized.
// crossOrigin is the Origin of the browser page that opened the connection
// when that page is not the broker's own (see CrossOriginer), else "": such
// a page must not get what a local client gets without credentials.
type Authenticator interface {
	Authenticate(clientID, username string, password []byte, remote net.Addr, listener, crossOrigin string) error
}

// Authorizer decides what a connected client may do, at every use: it is
// asked on every PUBLISH, for every will, for every SUBSCRIBE filter, and on
// delivery to subscriptions whose filter reaches topics the client may not
// read, so it must be fast (cache its decisions). Core never asks it about
// the broker's own $SYS and $share topics, which no client may publish to.
type Authorizer interface {
	// CanPublish decides a PUBLISH (and a retained message) to topic.
	CanPublish(clientID, username, topic string) bool
	// CanWill decides a will on topic: at CONNECT, and again when the will
	// is published, since the rules may have changed in between.
	CanWill(clientID, username, topic string) bool
	// CanSubscribe decides a SUBSCRIBE filter (of a shared subscription,
	// the whole $share/GROUP/FILTER). A granted filter may still reach
	// topics the client may not read: deliveries are checked with CanRead
	// unless ReadsAll says they need not be.
	CanSubscribe(clientID, username, filter string) bool
	// ReadsAll reports that the client may read every topic filter
	// matches, so deliveries through it need no CanRead. It has no side
	// effect (core asks it again after Generation changes).
	ReadsAll(clientID, username, filter string) bool
	// CanRead decides whether a message on topic may be delivered to the client.
	CanRead(clientID, username, topic string) bool
	// Generation changes whenever earlier answers may no longer hold (the
	// rules were reloaded): core then asks ReadsAll again.
	Generation() uint64
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("core: server closed")

// Server is the MQTT broker. Its fields are its parts (router, retained
// set, counters, store, cluster) and the registry Server.mu guards; a
// group of fields with a concern of its own is a type held by value
// (liveLimits, listenerStats, tracing, warnClocks, parking, bufPools,
// sysControl), so that no use pays a pointer more. Its methods are many
// because it is the package's API (about half are exported: admin
// actions, views and pages, the cluster seam) and the root the jobs hang
// from; doc.go says which file holds which.
type Server struct {
	opts Options
	// live holds the Limits part of opts, which SetLimits may change:
	// their uses read live, never opts (live.go).
	live     liveLimits
	log      *zap.Logger
	auth     Authenticator
	authz    Authorizer
	store    Store
	router   *router
	retained *retainedStore
	// cluster links this node to the others; nil for a single node, the
	// default, whose publish path then tests it once (cluster.go).
	cluster Cluster
	stats   Stats
	// byListener counts accepted CONNECTs per listener name, and knows
	// each listener's transport.
	byListener listenerStats
	// topicMetrics counts the messages of registered topics (topicmetrics.go).
	topicMetrics topicMetrics
	started      time.Time
	tracing      tracing // the running traces (trace.go)

	mu        sync.Mutex // guards sessions, clients, listeners, closed, shut
	sessions  map[string]*session
	clients   map[*client]struct{}
	listeners map[net.Listener]struct{}
	closed    bool // Drain began: no more connections
	shut      bool // Shutdown began
	// drained are the persistent sessions whose clients Drain
	// disconnected (DrainedSessions).
	drained map[string]bool

	// clientIDs holds the keys of sessions in order, for the admin views;
	// guarded by mu. Write sessions only through putSessionLocked and
	// dropSessionLocked (pages.go), which keep both.
	clientIDs clientIndex

	willTimers []*time.Timer // restored wills whose session is gone; guarded by mu
	inBaseMax  uint64        // highest inbound sequence restored; guarded by mu

	warned   warnClocks // when each throttled warning was last logged (persist.go)
	preLogin byteBudget // Options.PreLoginMemory, shared by connections before CONNACK
	parking  parking    // where connections park: the poller and keepalive wheel (park.go)
	// workers run readers and writers on goroutines whose stacks have
	// grown already (workers.go).
	workers *workers
	syncer  *syncer  // group commit of acknowledgements (acks.go)
	bufs    bufPools // the connections' read buffers and writers' scratch (client.go)

	conns sync.WaitGroup
	sys   sysControl // the $SYS goroutine (sys.go)
}

// Config is what New needs besides Options; nil fields get defaults: a
// no-op logger, allow-all auth and an in-memory store.
type Config struct {
	Log           *zap.Logger
	Authenticator Authenticator
	Authorizer    Authorizer
	Store         Store
	// Cluster links the broker to other nodes (cluster.go); nil: none.
	Cluster Cluster
	// SysTopics, when set, returns more topics and values to publish
	// under $SYS/broker/ with the broker's own on every round (sys.go):
	// a cluster's totals. It runs on the $SYS goroutine and must not
	// block.
	SysTopics func() [][2]string
}

// New builds a Server and restores the sessions and retained messages in
// the store.
func New(opts Options, cfg Config) (*Server, error) {
	opts.setDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Store == nil {
		cfg.Store = NewMemStore()
	}
	s := &Server{
		opts: opts, log: cfg.Log, auth: cfg.Authenticator, authz: cfg.Authorizer, store: cfg.Store,
		router: newRouter(opts.SharedStrategy), retained: newRetainedStore(), started: time.Now(),
		sessions: map[string]*session{}, clients: map[*client]struct{}{}, listeners: map[net.Listener]struct{}{},
		sys: sysControl{stop: make(chan struct{}), done: make(chan struct{}), extra: cfg.SysTopics}, cluster: cfg.Cluster,
	}
	s.router.cluster = cfg.Cluster // before restore, whose subscriptions it hears of
	if s.authz != nil {
		s.router.readable = func(m subscriber, topic string) bool {
			return s.canRead(m.s, m.opts.acl, topic, s.aclGeneration())
		}
		s.router.unreadable = func() { s.stats.dropped(dropNotReadable) }
	}
	s.live.store(&opts)
	s.preLogin.max = opts.PreLoginMemory
	s.bufs.read.New = func() any { return bufio.NewReaderSize(nil, opts.ReadBufferSize) }
	s.bufs.write.New = func() any { return &writeScratch{buf: make([]byte, 0, 512)} } // grows with the bursts that use it
	if err := s.restore(); err != nil {
		return nil, err
	}
	s.workers = newWorkers(workerIdle)
	if p, err := newPoller(); err == nil {
		s.parking = parking{poller: p, wheel: newKAWheel()}
	} else if !errors.Is(err, errors.ErrUnsupported) {
		s.log.Warn("idle connections keep a goroutine each: no epoll set", zap.Error(err))
	}
	s.syncer = newSyncer(s)
	go s.syncer.run()
	go s.sysLoop()
	return s, nil
}

// Options returns the options in force, defaults filled in, with the
// Limits SetLimits last put in force.
func (s *Server) Options() Options {
	o := s.opts
	s.live.load(&o)
	return o
}

// capExpiry applies MaxSessionExpiry to a requested session expiry.
func (s *Server) capExpiry(e uint32) uint32 {
	if m := s.live.maxSessionExpiry.Load(); m > 0 && e > m {
		return m
	}
	return e
}

// Serve accepts connections from l until Shutdown, serving each on its own
// goroutine. name labels the listener in logs and metrics. Temporary accept
// errors are retried with backoff, as net/http does.
func (s *Server) Serve(l net.Listener, name string) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = l.Close()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	if t, ok := l.(interface{ Transport() string }); ok {
		s.byListener.transports.Store(name, t.Transport())
	}
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()
	var delay time.Duration
	for {
		conn, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTooManyFiles(err) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("accept error; retrying", zap.String("listener", name), zap.Error(err), zap.Duration("delay", delay))
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		s.ServeConn(conn, name)
	}
}

// ServeConn serves one connection on a new goroutine and returns at once.
// conn carries raw MQTT bytes, whatever the transport.
func (s *Server) ServeConn(conn net.Conn, listener string) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = conn.Close()
		return
	}
	c := newClient(s, conn, listener)
	s.clients[c] = struct{}{}
	s.conns.Add(1)
	s.mu.Unlock()
	s.stats.sockets.Add(1)
	s.stats.connOpened()
	go c.serve()
}

func (s *Server) connDone(c *client) {
	s.mu.Lock()
	delete(s.clients, c)
	s.mu.Unlock()
	s.stats.connected.Add(-1)
	s.conns.Done()
}

// errNotOwner refuses a CONNECT whose client id names a session that
// belongs to another identity.
var errNotOwner = errors.New("core: the session of this client id belongs to another user")

// attach binds c to its session: a new one, or the existing one when the
// client resumes, taking it over from another connection with the same id
// [MQTT-3.1.4-3], and returns with the session's state (and a delayed
// will) on disk: the caller queues CONNACK then. Until c.connected is set,
// the writer takes no delivery, so none overtakes CONNACK. Unless
// AnySessionOwner is set, a session that belongs to another identity is
// neither resumed, taken over nor ended: attach returns errNotOwner and
// leaves it alone.
func (s *Server) attach(c *client, clean bool, expiry uint32) (*session, bool, error) {
	s.mu.Lock()
	sess := s.sessions[c.id]
	if sess != nil && !s.opts.AnySessionOwner && !sess.ownedBy(c.username) {
		s.mu.Unlock()
		return nil, false, errNotOwner
	}
	var old *client
	var cut streamCut
	present := false
	if sess != nil {
		sess.mu.Lock()
		old = sess.c
		sess.c = nil
		cut = sess.cutStreamsLocked()
		sess.mu.Unlock()
		if clean {
			s.discardLocked(sess)
			sess = nil
		} else {
			present = true
		}
	}
	if sess == nil {
		sess = newSession(s, c.id)
		sess.qos2in.base = s.newInBase()
		sess.qos2in.seq = sess.qos2in.base
		s.putSessionLocked(sess)
	}
	sess.mu.Lock()
	sess.version = c.version
	sess.expiry = expiry
	sess.setOwner(c.username)
	c.sess = sess
	pendingWill := sess.will.timer != nil
	sess.attachLocked(c)
	var stored *sessionRecord
	if sess.persistent() {
		stored = sess.recordLocked(0)
	}
	sess.mu.Unlock()
	s.mu.Unlock()
	if old != nil {
		old.log(zap.InfoLevel, "session taken over", zap.String("by", c.remoteAddr()))
		old.close(CloseTakenOver, codec.SessionTakenOver)
	}
	s.noteCut(c.id, cut)
	if x := c.extra; stored != nil && x != nil && x.will != nil && x.willDelay > 0 {
		// On disk before CONNACK, like the session: if the broker dies
		// while the client is connected, the restart publishes the will
		// once its delay has run from then.
		s.storePutWill(c.id, &willRecord{Delay: time.Duration(x.willDelay) * time.Second, Expiry: x.willExpiry,
			Msg: x.will, Owner: c.username, OwnerKnown: true})
		x.willStored = true
	} else if pendingWill || present {
		// The client is back within the will delay, or took over from a
		// connection whose will was on disk.
		s.storeDeleteWill(c.id)
	}
	if stored != nil {
		s.storeSave(c.id, stored)
		// On disk before any delivery: a restart must know the session was
		// online, so that what it may have been sent is resent with DUP.
		if err := s.syncStore(); err != nil {
			s.storeError("store: sync after connect failed", err, zap.String("client_id", c.id))
		}
	} else if present {
		s.storeDelete(c.id) // resumed with expiry 0: nothing to keep on disk
	}
	return sess, present, nil
}

// discardLocked removes a session and its subscriptions; s.mu is held.
func (s *Server) discardLocked(sess *session) {
	sess.mu.Lock()
	filters := make([]string, 0, len(sess.subs))
	for f := range sess.subs {
		filters = append(filters, f)
	}
	sess.subs = nil
	sess.queue, sess.qhead, sess.holes, sess.dropAt, sess.qbytes = nil, 0, 0, 0, 0
	s.stats.inflight.Add(-int64(len(sess.inflight)))
	sess.inflight = nil
	sess.qos2in.ids = nil
	s.stats.pending.Add(-int64(sess.load.Swap(0)))
	if sess.expireTimer != nil {
		sess.expireTimer.Stop()
	}
	// The session ends now, so a will waiting for its delay goes now: the
	// delay ends early when the session does (3.1.3.2.2).
	if sess.will.timer != nil && sess.will.timer.Stop() {
		go sess.will.publish()
	}
	sess.will.timer, sess.will.publish = nil, nil
	s.setOnlineLocked(sess, false) // a session taken over with Clean Start ends online
	cut := sess.cutStreamsLocked()
	sess.mu.Unlock()
	s.noteCut(sess.id, cut)
	for _, f := range filters {
		group, filter, _, _ := codec.ParseShared([]byte(f))
		s.router.unsubscribe(sess, string(filter), string(group))
	}
	if s.sessions[sess.id] == sess {
		s.dropSessionLocked(sess.id)
	}
	s.storeDelete(sess.id)
	s.storeDeleteWill(sess.id) // a will on disk for a crash, or one just published
}

// detach runs when c's connection has ended: the session ends or waits
// for its client, shared-group messages move to other members, and the
// will is published or scheduled.
func (s *Server) detach(c *client, reason CloseReason) {
	sess := c.sess
	s.mu.Lock()
	sess.mu.Lock()
	current := sess.c == c
	var released []delivery
	var stored *sessionRecord
	var cut streamCut
	if current {
		sess.c = nil
		s.setOnlineLocked(sess, false)
		cut = sess.cutStreamsLocked()
		released = sess.releaseSharedLocked()
		if sess.persistent() {
			stored = sess.recordLocked(time.Now().Unix())
		}
	}
	persistent := sess.persistent()
	expiry := sess.expiry
	moved := sess.moved
	sess.mu.Unlock()
	// A new connection with Clean Start took c's place and ended the
	// session; a session that moved to another node goes on there.
	ended := !current && s.sessions[sess.id] != sess && !moved
	if current && !persistent {
		s.discardLocked(sess)
	}
	s.mu.Unlock()
	s.noteCut(sess.id, cut)
	if stored != nil {
		s.storeSave(sess.id, stored)
		s.scheduleExpiry(sess, time.Now())
	}
	for _, d := range released {
		s.redispatch(d, sess)
	}
	// A session taken over by a new connection within the will delay keeps
	// its will unsent [MQTT-3.1.3-9]; with no delay, or when the takeover
	// ended the session (Clean Start), the will goes now (3.1.2.5).
	scheduled := false
	x := c.rare()
	if x.will != nil && reason.publishesWill() && (current || x.willDelay == 0 || ended) {
		delay := x.willDelay
		owner := &c.username
		if delay > 0 && current && persistent {
			if expiry != neverExpires && expiry < delay {
				delay = expiry // the will goes when the session ends, if sooner
			}
			will := x.will
			sess.mu.Lock()
			scheduled = sess.c == nil && !c.takenElsewhere.Load()
			if scheduled {
				willExpiry := x.willExpiry
				sess.will.publish = func() { s.publishWill(will, willExpiry, sess, owner) }
				sess.will.timer = time.AfterFunc(time.Duration(delay)*time.Second, sess.will.publish)
			}
			sess.mu.Unlock()
			if scheduled {
				s.storePutWill(sess.id, &willRecord{At: time.Now().Add(time.Duration(delay) * time.Second),
					Expiry: x.willExpiry, Msg: will, Owner: c.username, OwnerKnown: true})
			}
		} else {
			s.publishWill(x.will, x.willExpiry, nil, owner)
		}
	}
	if current && x.willStored && !scheduled {
		// Published now, or discarded by a normal DISCONNECT: a restart
		// must not publish it again.
		s.storeDeleteWill(sess.id)
	}
	if current && x.willStored {
		if err := s.syncStore(); err != nil {
			s.storeError("store: sync of a will failed", err, zap.String("client_id", sess.id))
		}
	}
}

// redispatch gives a shared-group delivery whose member went away to
// another member: of this node, else of another node of the cluster.
func (s *Server) redispatch(d delivery, from *session) {
	s.router.mu.RLock()
	m, ok := s.router.pick(d.group, d.msg.Topic, d.msg.Topic, from)
	s.router.mu.RUnlock()
	if !ok {
		if s.cluster != nil && !strings.HasPrefix(d.msg.Topic, "$SYS/") { // $SYS stays on its node (forward)
			msg := d.msg
			s.cluster.HandOver(d.group.name, d.group.filter, msg.Message)
		}
		return
	}
	if !s.mayRead(m.s, m.opts.acl, d.msg.Topic, s.aclGeneration()) {
		return
	}
	d.qos = min(d.msg.QoS, m.opts.qos)
	d.seq = 0
	m.s.enqueue(d)
}

// scheduleExpiry ends an offline session when its expiry interval passes.
func (s *Server) scheduleExpiry(sess *session, since time.Time) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.c != nil || sess.expiry == neverExpires {
		return
	}
	wait := time.Until(since.Add(time.Duration(sess.expiry) * time.Second))
	if sess.expireTimer != nil {
		sess.expireTimer.Stop()
	}
	sess.expireTimer = time.AfterFunc(max(wait, 0), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		sess.mu.Lock()
		online := sess.c != nil
		sess.mu.Unlock()
		if !online && s.sessions[sess.id] == sess {
			s.log.Info("session expired", zap.String("client_id", sess.id))
			s.stats.expired.Add(1)
			s.discardLocked(sess)
		}
	})
}

// Shutdown stops accepting, tells every client the server is going away
// (MQTT 5: DISCONNECT Server Shutting Down), waits for the connections to
// end or ctx to expire, then closes the store.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.shut {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.shut = true
	s.mu.Unlock()
	err := s.drainConns(ctx) // the store's Close flushes what they left
	// Stop timers so nothing fires into a closed store.
	s.mu.Lock()
	for _, t := range s.willTimers {
		t.Stop()
	}
	for _, sess := range s.sessions {
		sess.mu.Lock()
		if sess.expireTimer != nil {
			sess.expireTimer.Stop()
		}
		if sess.will.timer != nil {
			sess.will.timer.Stop()
		}
		sess.mu.Unlock()
	}
	s.mu.Unlock()
	close(s.syncer.stop) // it drains its queue first
	<-s.syncer.done
	s.workers.close()
	if s.parking.poller != nil {
		s.parking.poller.close()
		s.parking.wheel.close()
	}
	if cerr := s.store.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// Drain stops taking connections and closes every one (MQTT 5:
// DISCONNECT 0x8B, Server shutting down), waits for them until ctx ends,
// and syncs the store, so that what they left behind is on disk.
// Sessions, the store and deliveries into offline sessions go on until
// Shutdown, which drains first if Drain was not called. A cluster node
// drains before it leaves its cluster: a client's PUBLISH is then never
// acknowledged by a node that no longer forwards it to the others.
func (s *Server) Drain(ctx context.Context) error {
	if err := s.drainConns(ctx); err != nil {
		return err
	}
	if err := s.syncStore(); err != nil {
		s.storeError("store: sync after the last connection closed failed", err)
		return err
	}
	return nil
}

// drainConns stops taking connections, closes every one and waits for
// them until ctx ends.
func (s *Server) drainConns(ctx context.Context) error {
	s.mu.Lock()
	first := !s.closed
	s.closed = true
	var clients []*client
	if first {
		for l := range s.listeners {
			_ = l.Close()
		}
		clients = make([]*client, 0, len(s.clients))
		for c := range s.clients {
			clients = append(clients, c)
		}
		s.drained = map[string]bool{}
		for id, sess := range s.sessions {
			sess.mu.Lock()
			if sess.c != nil && sess.persistent() {
				s.drained[id] = true
			}
			sess.mu.Unlock()
		}
	}
	s.mu.Unlock()
	if first {
		close(s.sys.stop)
		<-s.sys.done
		for _, c := range clients {
			c.close(CloseServerShutdown, codec.ServerShuttingDown)
		}
	}
	done := make(chan struct{})
	go func() { s.conns.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// DrainedSessions counts the persistent sessions whose clients Drain
// disconnected and that are still here: a cluster node waits, for a
// while, until their clients' next connections on other nodes have moved
// them, so that they resume with Session Present rather than wait for
// this node's return.
func (s *Server) DrainedSessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.drained {
		if s.sessions[id] == nil {
			delete(s.drained, id) // moved: the next count skips it
		}
	}
	return len(s.drained)
}

// Disconnect closes the connection of clientID (an operator's action) and
// reports whether it was connected.
func (s *Server) Disconnect(clientID string) bool {
	s.mu.Lock()
	sess := s.sessions[clientID]
	s.mu.Unlock()
	if sess == nil {
		return false
	}
	sess.mu.Lock()
	c := sess.c
	sess.mu.Unlock()
	if c == nil {
		return false
	}
	c.close(CloseAdmin, codec.AdministrativeAction)
	return true
}

// RemoveSession ends clientID's session, whoever owns it (an operator's
// action): its connection, if any, is closed (MQTT 5: Administrative
// action) and its will published, and its subscriptions, queued messages
// and stored state are discarded. It reports whether there was a session.
func (s *Server) RemoveSession(clientID string) bool {
	s.mu.Lock()
	sess := s.sessions[clientID]
	if sess == nil {
		s.mu.Unlock()
		return false
	}
	c := s.endSessionLocked(sess)
	s.mu.Unlock()
	s.log.Info("session removed by an operator", zap.String("client_id", clientID))
	if c != nil {
		c.close(CloseAdmin, codec.AdministrativeAction)
	}
	return true
}

// endSessionLocked ends sess now and returns its connection, if any, for
// the caller to close: that connection's detach finds the session gone,
// as after a Clean Start takeover. s.mu is held.
func (s *Server) endSessionLocked(sess *session) *client {
	sess.mu.Lock()
	c := sess.c
	sess.c = nil
	s.setOnlineLocked(sess, false)
	sess.mu.Unlock()
	s.discardLocked(sess)
	return c
}

// DisconnectWhere closes every connection for which match (given the
// client id, user name and remote address) is true, as an operator's
// action, and returns how many it closed. A ban uses it to cut off the
// connections that it now refuses.
func (s *Server) DisconnectWhere(match func(clientID, username string, remote net.Addr) bool) int {
	s.mu.Lock()
	var hit []*client
	for c := range s.clients {
		c.mu.Lock()
		connected := c.connected
		c.mu.Unlock()
		if connected && match(c.id, c.username, c.conn.RemoteAddr()) {
			hit = append(hit, c)
		}
	}
	s.mu.Unlock()
	for _, c := range hit {
		c.close(CloseAdmin, codec.AdministrativeAction)
	}
	return len(hit)
}

// Publish injects a message as the broker (operators, $SYS, tests).
func (s *Server) Publish(topic string, payload []byte, qos byte, retain bool) error {
	if err := codec.ValidTopicName([]byte(topic)); err != nil {
		return err
	}
	p := codec.Publish{QoS: qos, Retain: retain, Payload: payload}
	s.publish(newMessage(&p, []byte(topic), ""))
	return nil
}

// isTooManyFiles reports EMFILE/ENFILE: the process is out of descriptors,
// which passes as connections close, so the accept loop backs off.
func isTooManyFiles(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}
