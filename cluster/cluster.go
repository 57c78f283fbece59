package cluster

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// Local is the broker as the cluster sees it: *core.Server satisfies it.
type Local interface {
	// DeliverRemote routes a message from another node, and forwards
	// nothing: with group and filter "", to every plain subscriber here
	// whose filter matches its topic, matched once against the whole
	// subscription tree as a local PUBLISH is (an MQTT 3.1.1 client
	// whose subscriptions overlap gets one copy, at the highest QoS
	// granted; an MQTT 5 client one per subscription, with its
	// identifier); with a filter only, to the plain subscribers of
	// exactly filter (a message whose copies cannot be told apart, see
	// firstCopy); with a group, to one member of the shared group group
	// on filter.
	DeliverRemote(group, filter string, m codec.Message) int
	// TakeOver closes clientID's connection here, if it holds claim,
	// because another node's connection took the id over; endSession
	// ends the session here too.
	TakeOver(clientID string, claim uint64, endSession bool) bool
	// SetRetained keeps a retained message set on another node (an empty
	// payload clears it) without delivering it.
	SetRetained(m codec.Message)
	// LocalRetained calls f with each retained message this node keeps
	// that the cluster replicates (not the broker's own $SYS ones); f
	// must not call back into the broker.
	LocalRetained(f func(m codec.Message))
	// ExportSession returns clientID's persistent session encoded, nil
	// when there is none or it would exceed maxBytes: without take its
	// subscriptions only, changing nothing; with take all of it, which
	// leaves this node (its connection here is closed).
	ExportSession(clientID string, maxBytes int, take bool) []byte
	// ImportSession installs a session another node exported: without
	// final its subscriptions, pending, queuing what comes; with final
	// all of it, before what the pending session queued.
	ImportSession(clientID string, data []byte, final bool) error
	// DropImport ends a pending session whose move failed.
	DropImport(clientID string)
	// PendSession installs a dead node's session from its session record
	// as a pending session, queuing what comes, and returns the filters
	// of its plain subscriptions; RestoreSession completes it.
	PendSession(clientID string, session []byte) ([]string, error)
	// ReplayPending routes a message published (forwarded by its node)
	// at published while no node held the sessions of clientIDs to those
	// pending, before what they queued meanwhile; a session that began
	// after published on the node that wrote its record takes none.
	ReplayPending(clientIDs map[string]bool, m codec.Message, published time.Time) int
	// DeliverReplayed routes a message published at published while this
	// node was down to its plain subscribers, with DUP, but those whose
	// session began here after published.
	DeliverReplayed(m codec.Message, published time.Time) int
	// RestoreSession installs clientID's session from the records another
	// node's store was given (replica.go), offline; withWill schedules
	// its will.
	RestoreSession(clientID string, session, inbound []byte, seqs []uint64, msgs [][]byte, will []byte, withWill bool) error
	// StaleSessions lists the persistent sessions whose client is not
	// connected here.
	StaleSessions() []string
	// MergeSession adds the messages of an exported session to
	// clientID's session here and returns how many it took.
	MergeSession(clientID string, data []byte) (int, error)
	// SessionOwner reports whether clientID has a session here
	// (connected or not) and, when known, the identity it belongs to.
	SessionOwner(clientID string) (owner string, known, ok bool)
}

// inboxSize bounds the messages received from NATS and not yet routed
// locally: past it NATS drops (a slow consumer, logged and counted).
const inboxSize = 64 << 10

// externalMaxSubject bounds a forwarded subject on a NATS server that is
// not ours: a PUB line longer than the server's max_control_line (4 KiB by
// default) would make it close the connection.
const externalMaxSubject = 4096 - 256

// Stats counts a node's cluster traffic.
type Stats struct {
	Forwarded       int64 // messages handed to NATS for the other nodes
	ForwardDropped  int64 // messages that could not be (subject too long, too large, NATS down)
	Received        int64 // messages received from NATS (each copy: NATS delivers one per matching filter)
	ReceivedDropped int64 // received messages whose subject is not a mapped topic, or that NATS dropped (slow consumer)
	Interest        int64 // distinct filters this node receives from NATS
	// ClaimsUnavailable counts connections held on this node only: the
	// registry could not be written (not ready, no quorum).
	ClaimsUnavailable int64
	// ClaimsRefused counts connections refused because the client id's
	// session on another node belongs to another identity, or because
	// their claim began before the connection they would replace there.
	ClaimsRefused int64
	TakenOver     int64 // local connections or sessions another node's connection took over
	RetainDropped int64 // retained changes that stayed on this node (too many waiting to be replicated)
	SessionsIn    int64 // persistent sessions moved here from another node
	SessionsOut   int64 // persistent sessions moved from here to another node
	// SessionsLost counts connections that should have resumed a session
	// from another node and started a new one here: that node did not
	// answer, or its session could not be installed.
	SessionsLost int64
	// HandedOver counts shared-group messages handed to the group's
	// members on other nodes: their member here left with them
	// unacknowledged, and no other member was here (HandOver).
	HandedOver int64
	// SessionsAdopted counts a dead node's sessions rebuilt here from
	// the session replicas while their client was away; SessionsRestored
	// those rebuilt for a client connecting here; SessionsMerged stale
	// sessions (this node was down while their client moved on) whose
	// messages went to the client's session on another node.
	SessionsAdopted, SessionsRestored, SessionsMerged int64
	// ReplicaDropped counts session records not replicated (too many
	// waiting for the stream); NodesDead the nodes seen dying.
	ReplicaDropped, NodesDead int64
	// Replayed counts the deliveries of messages published while no
	// node held their subscriber's session, its node dead (replay.go).
	Replayed int64
}

// Cluster is one node's link to the others (it satisfies core.Cluster):
// the routing and the public API, over parts that hold the rest (doc.go).
// Interest changes are applied in order by one goroutine; messages from
// NATS are routed by one goroutine, so that the order of a publisher's
// messages, which NATS keeps, is the order its subscribers get.
type Cluster struct {
	link
	inbox *inbox

	// ids numbers the QoS 0 messages Forward sends (hdrID); lastIn is,
	// per node, the number of its last message handed to the broker for
	// the plain subscribers (firstCopy), on routeLoop.
	ids     atomic.Uint64
	lastIn  map[string]*msgNumber
	started atomic.Bool
	// sessionSub and groupSub bring the other nodes' session and shared
	// group requests into the inbox, for route to hand to their part.
	sessionSub, groupSub                                             *nats.Subscription
	forwarded, forwardDropped, received, receivedDropped, handedOver atomic.Int64

	// The parts (doc.go), with the files of their methods.
	interests *interests    // interest.go, barrier.go
	members   *membership   // liveness.go, nodes.go
	reg       *registry     // registry.go, order.go
	retained  *retainedSync // retained.go
	sessions  *sessions     // session.go
	rep       *replica      // replica.go, replay.go (the marks)
	replay    *replayer     // replay.go, replica.go (restoreFromReplica)
	adoption  *adopter      // adopt.go
	sticky    *sticky       // sticky.go
}

// queueName is the NATS queue group of a shared group: NATS delivers each
// message to one queue subscriber of a name, whatever its subject, so the
// name holds the filter too.
func queueName(group, filter string) string {
	return "xmq-" + base64.RawURLEncoding.EncodeToString([]byte(group+"\x00"+filter))
}

// New starts the node's NATS side: the embedded NATS server (unless
// opts.URL names an external one) and the connection to it. Routing
// starts with Start, once the broker exists; interest may be declared
// before.
func New(opts Options, log *zap.Logger) (*Cluster, error) {
	opts.SetDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	c := &Cluster{
		link:   link{opts: opts, log: log, stop: make(chan struct{}), maxSubject: externalMaxSubject},
		lastIn: map[string]*msgNumber{},
	}
	l := &c.link
	c.inbox = newInbox(c.stop)
	c.members = &membership{link: l, dead: map[string]bool{}, left: map[string]bool{}}
	c.interests = &interests{link: l, inbox: c.inbox, members: c.members, opsWake: make(chan struct{}, 1),
		subs: map[*nats.Subscription]interest{}, filters: map[interest][]*nats.Subscription{}}
	c.sticky = &sticky{link: l}
	c.reg = &registry{link: l,
		claims: claims{m: map[string]uint64{}, owners: map[string]string{}, pending: map[string]int{}, newer: map[string]otherClaim{}, busy: map[string]chan struct{}{}}}
	c.retained = &retainedSync{link: l, ops: map[string]*nats.Msg{}, wake: make(chan struct{}, 1)}
	c.rep = newReplica(l)
	c.replay = &replayer{link: l, rep: c.rep, interests: c.interests, members: c.members, inbox: c.inbox}
	c.adoption = &adopter{link: l, reg: c.reg, replay: c.replay, rep: c.rep, members: c.members}
	c.sessions = &sessions{link: l, reg: c.reg, members: c.members, interests: c.interests, replay: c.replay, rep: c.rep, inbox: c.inbox}
	// What parts ask the other way round, of parts that hold them or of
	// the routing, are functions: no two parts hold each other.
	c.members.adopt, c.members.changed, c.members.groups = c.adoption.adoptNode, c.sticky.rebuild, c.heartbeatGroups
	c.members.ready = func() bool { return c.Ready() && c.Healthy() == nil }
	c.sticky.handOver = c.HandOver
	c.reg.move, c.reg.ownerAt = c.sessions.moveSession, c.sessions.ownerAt
	c.replay.send = c.publish
	c.replay.ring.start(time.Now())
	// From the start time, as the ring's numbers: a restarted node's first
	// message must not look like a copy of its last one before.
	c.ids.Store(uint64(time.Now().UnixNano()))
	nopts := []nats.Option{
		nats.Name("xmq/" + opts.Name + "/" + opts.Node),
		// A node routes its own messages locally before forwarding them.
		nats.NoEcho(),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if !c.closed.Load() {
				log.Warn("disconnected from NATS: messages to other nodes are buffered, then dropped", zap.Error(err))
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("reconnected to NATS", zap.String("url", nc.ConnectedUrlRedacted())) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrSlowConsumer) {
				c.receivedDropped.Add(1)
			}
			c.warn("NATS error", zap.Error(err))
		}),
	}
	var err error
	if opts.URL == "" {
		c.emb, err = startEmbedded(&opts, log.Named("nats"))
		if err != nil {
			return nil, err
		}
		c.maxSubject = embeddedMaxSubject
		nopts = append(nopts, nats.InProcessServer(c.emb.srv), c.emb.nodeAuth())
		c.nc, err = nats.Connect("", nopts...)
	} else {
		nopts = append(nopts, externalAuth(&opts)...)
		c.nc, err = nats.Connect(opts.URL, nopts...)
		if err == nil {
			go checkExternalOpen(&opts, c.nc, log)
		}
	}
	if err != nil {
		c.emb.close()
		return nil, fmt.Errorf("cluster: connecting to NATS: %w", err)
	}
	c.done.Add(2)
	go c.interests.interestLoop()
	go c.reg.freezeLoop()
	url := c.nc.ConnectedUrlRedacted()
	if c.emb != nil {
		url = c.ClientURL() // the in-process connection has none
	}
	log.Info("cluster node up", zap.String("cluster", opts.Name), zap.String("node", opts.Node),
		zap.Bool("embedded", c.emb != nil), zap.String("nats", url))
	return c, nil
}

// checkExternalOpen warns when a client without credentials receives
// what this node publishes on the cluster's control subjects of an
// external NATS: then anyone who reaches that NATS can take sessions,
// forge nodes and read replays. A warning, not a refusal: the operator's
// NATS is theirs to secure (docs/cluster.md says how). It takes at most
// a few seconds and runs beside the start.
func checkExternalOpen(o *Options, node *nats.Conn, log *zap.Logger) {
	var no []nats.Option
	if o.CAFile != "" {
		no = append(no, nats.RootCAs(o.CAFile))
	}
	no = append(no, nats.Timeout(2*time.Second), nats.NoReconnect(),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	anon, err := nats.Connect(o.URL, no...)
	if err != nil {
		return // no client without credentials gets in
	}
	defer anon.Close()
	subj := "$XMQ." + o.Name + ".probe." + randomSecret()
	sub, err := anon.SubscribeSync(subj)
	if err != nil || anon.Flush() != nil {
		return
	}
	if node.Publish(subj, nil) != nil || node.Flush() != nil {
		return
	}
	if _, err := sub.NextMsg(time.Second); err != nil {
		return // denied, or in an account of its own
	}
	log.Warn("a NATS client without credentials receives xmq's control subjects $XMQ." + o.Name + ".> on " + anon.ConnectedUrlRedacted() +
		": anyone who reaches this NATS can take sessions, forge nodes and read messages; give xmq a user in an account of its own " +
		"and deny $XMQ.>, $JS.> and $KV.> to everyone else (docs/cluster.md, External NATS)")
}

// externalAuth are the connection options for an external NATS.
func externalAuth(o *Options) []nats.Option {
	var no []nats.Option
	switch {
	case o.CredentialsFile != "":
		no = append(no, nats.UserCredentials(o.CredentialsFile))
	case o.Token != "":
		no = append(no, nats.Token(o.Token))
	case o.User != "":
		no = append(no, nats.UserInfo(o.User, o.Password))
	}
	if o.CAFile != "" {
		no = append(no, nats.RootCAs(o.CAFile))
	}
	if o.CertFile != "" {
		no = append(no, nats.ClientCert(o.CertFile, o.KeyFile))
	}
	return no
}

// Start routes the messages other nodes send to local; call it once.
func (c *Cluster) Start(local Local) {
	if !c.started.CompareAndSwap(false, true) {
		return
	}
	c.local = local
	var err error
	c.sessionSub, err = c.nc.ChanSubscribe(sessionSubject(c.opts.Name, c.opts.Node), c.inbox.ch)
	if err != nil {
		c.log.Error("cannot serve session moves: sessions here stay here", zap.Error(err))
	} else {
		_ = c.sessionSub.SetPendingLimits(-1, -1) // the inbox bounds it, as the others
	}
	c.members.answerPings()
	if c.opts.SharedHash != "" {
		c.sticky.start()
		if c.groupSub, err = c.nc.ChanSubscribe(groupSubject(c.opts.Name, c.opts.Node), c.inbox.ch); err != nil {
			c.log.Error("cannot take other nodes' messages for shared groups: they go to any node with members", zap.Error(err))
		} else {
			_ = c.groupSub.SetPendingLimits(-1, -1)
		}
	}
	if _, err := c.nc.Subscribe(replaySubject(c.opts.Name), c.replay.serveReplay); err != nil {
		c.log.Error("cannot answer other nodes' replays: sessions of a dead node may miss messages published here meanwhile", zap.Error(err))
	}
	c.replay.rejoinDone = make(chan struct{})
	marks := c.rep.loadMarks()
	c.done.Add(2)
	go func() {
		// What the other nodes published for this node's sessions while
		// it was down, before anything they publish now.
		c.replay.rejoin(marks)
		close(c.replay.rejoinDone)
		c.routeLoop()
	}()
	go c.stateLoop()
	if c.opts.MarksFile != "" {
		c.done.Add(1)
		go c.rep.marksLoop()
	}
}

// Ready reports whether the replicated state (client id registry,
// retained messages) is in use.
func (c *Cluster) Ready() bool { return c.state.Load() != nil }

// Node is this node's name.
func (c *Cluster) Node() string { return c.opts.Node }

// ClientURL is the embedded NATS server's client URL for NATS
// applications, "" when it has no client port or with an external NATS.
func (c *Cluster) ClientURL() string {
	if c.emb == nil || c.opts.Embedded.ClientListen == "" {
		return ""
	}
	return c.emb.srv.ClientURL()
}

// Interest records that filter (group "") or the shared group group on
// filter is wanted on this node (on) or no longer (!on), and returns the
// change's number for AwaitInterest; core.Cluster's contract: it never
// blocks.
func (c *Cluster) Interest(group, filter string, on bool) uint64 {
	return c.interests.declare(group, filter, on)
}

// routeLoop hands each message from NATS to the broker, in arrival order.
func (c *Cluster) routeLoop() {
	defer c.done.Done()
	for {
		select {
		case <-c.stop:
			return
		case m := <-c.inbox.ch:
			c.route(m)
		}
	}
}

func (c *Cluster) route(m *nats.Msg) {
	if m.Sub == queued {
		c.inbox.runQueued(m)
		return
	}
	if m.Sub == c.groupSub && m.Sub != nil {
		c.received.Add(1)
		c.sticky.serve(m)
		return
	}
	if m.Sub == c.sessionSub || m.Sub == pinged {
		// Served in order with the messages that came before: those for
		// the session are in it when it leaves.
		c.sessions.serveSession(m)
		return
	}
	c.received.Add(1)
	distrustApplication(m.Header)
	it, ok := c.interests.lookup(m.Sub)
	if !ok {
		return // unsubscribed meanwhile
	}
	if it.group != "" && slices.Contains(m.Header[hdrServed], queueName(it.group, it.filter)) {
		return // a member on the publisher's node had it: NATS picked this node for nothing
	}
	if g := m.Header[hdrGroup]; len(g) > 0 && (it.group == "" || g[0] != queueName(it.group, it.filter)) {
		return // handed over to another shared group's members
	}
	filter := it.filter
	if it.group == "" {
		numbered, first := c.firstCopy(m.Header)
		if numbered && !first {
			return // NATS's copy for another of this node's filters: the first went to the whole tree
		}
		if numbered {
			filter = "" // the whole tree, once
		}
	}
	topic, err := Topic(c.opts.SubjectPrefix, m.Subject)
	if err != nil {
		c.receivedDropped.Add(1)
		c.warn("message from NATS dropped: its subject is not a mapped MQTT topic", zap.String("subject", m.Subject))
		return
	}
	var in incoming
	decodeMsg(&in, topic, m.Data, m.Header)
	if it.group == "" && c.replay.replayedOnRejoin(&in) {
		return // replayed when this node came back (rejoin)
	}
	c.local.DeliverRemote(it.group, filter, in.msg)
	if in.seq != 0 {
		c.rep.mark(in.node, in.seq)
	}
}

// distrustApplication drops the Xmq-* headers of a message a NATS
// application published (embedded server: through the APP account's
// service import, where nats-server sets its Nats-Request-Info header,
// which a node's own messages never carry): they are the nodes' — a
// message's number and node (the copies it stands for, the replay marks,
// keyed by node), the shared groups served — and one an application
// forged could suppress other messages or grow the marks without bound.
// Its MQTT headers stay: they are what an application may set.
func distrustApplication(h nats.Header) {
	if _, app := h[server.ClientInfoHdr]; !app {
		return
	}
	for k := range h {
		if strings.HasPrefix(k, "Xmq-") {
			delete(h, k)
		}
	}
}

// msgNumber is a forwarded message's number on its node: seq (hdrSeq) for
// QoS 1/2, id (hdrID) for QoS 0, as sent (two counters: a QoS 0 message
// is not the QoS 1/2 one with the same number).
type msgNumber struct{ seq, id string }

// maxOrigins bounds lastIn: only nodes send numbered messages, but a NATS
// application may forge the headers. Past it lastIn starts again, which
// at worst lets one message's later copies through.
const maxOrigins = 1024

// firstCopy reports whether h heads a message its node numbered (hdrSeq,
// hdrID) and, if so, whether this is its first copy here. NATS delivers a
// node one copy of a message per subscription of the node that matches
// it, so one per plain filter it matches (R/# and R/+ both bring R/a):
// routing each copy to the subscribers of its filter would give a client
// whose subscriptions overlap more copies than a publisher on its own
// node gives it. So the first copy goes to the broker, to be matched
// against the whole tree, and the others are dropped. NATS delivers a
// message to all the matching subscriptions of a connection before the
// same publisher's next message (a server fans out each message it reads
// before reading the next, and one node's messages reach this node's
// server by one path), so a copy is one with the number of its node's
// last message here: other nodes' messages may come between, never its
// own node's next. That costs one map lookup per message, no set of
// recent messages to search. A message without a number (a NATS
// application's, a QoS 0 message from a node older than hdrID) cannot be
// told from its copies: it goes to the filter that brought each copy. On
// routeLoop.
func (c *Cluster) firstCopy(h nats.Header) (numbered, first bool) {
	node := h[hdrNode]
	if len(node) == 0 {
		return false, false
	}
	var n msgNumber
	if v := h[hdrSeq]; len(v) > 0 {
		n.seq = v[0]
	}
	if v := h[hdrID]; len(v) > 0 {
		n.id = v[0]
	}
	if n == (msgNumber{}) {
		return false, false
	}
	last := c.lastIn[node[0]] // one lookup per message: updated in place
	if last == nil {
		if len(c.lastIn) >= maxOrigins {
			clear(c.lastIn)
		}
		last = new(msgNumber)
		c.lastIn[node[0]] = last
	}
	if *last == n {
		return true, false
	}
	*last = n
	return true, true
}

// Forward publishes a message of this node on NATS, where only nodes with
// interest receive it, and each shared group's queue one of them;
// core.Cluster's contract. The groups served here are named in a header,
// so that the node NATS picks for them drops its copy. Each message
// carries its number here (hdrSeq for QoS 1/2, hdrID for QoS 0), by which
// a receiving node tells NATS's copies of it apart (firstCopy). A message
// NATS cannot carry is dropped, counted and logged (at most every 10s).
func (c *Cluster) Forward(m codec.Message, served []string) {
	nm := c.message(&m)
	if nm == nil {
		return
	}
	if c.opts.SharedHash != "" {
		served = c.sticky.send(nm, m, served)
	}
	for i := 0; i+1 < len(served); i += 2 {
		nm.Header[hdrServed] = append(nm.Header[hdrServed], queueName(served[i], served[i+1]))
	}
	if m.QoS > 0 {
		c.replay.publishNumbered(nm, m.Topic) // kept for a replay (replay.go)
		return
	}
	// Numbered too, for the nodes that receive it (firstCopy), without
	// the ring's lock: those only compare numbers, never order them.
	nm.Header[hdrID] = []string{strconv.FormatUint(c.ids.Add(1), 36)}
	c.publish(nm, m.Topic)
}

// HandOver publishes, for the members of shared group group on filter
// only, a message of the group whose member on this node went away with
// it unacknowledged, when no other member is here; core.Cluster's
// contract. NATS hands it to one node queue-subscribed for the group; the
// nodes it reaches through other subscriptions drop it (hdrGroup). With no
// member left on any node it is gone, as a shared message with no member
// is on one node.
func (c *Cluster) HandOver(group, filter string, m codec.Message) {
	nm := c.message(&m)
	if nm == nil {
		return
	}
	nm.Header.Set(hdrGroup, queueName(group, filter))
	c.handedOver.Add(1)
	c.publish(nm, m.Topic)
}

// message is the NATS message carrying an MQTT message of this node, or
// nil when it cannot travel (counted and logged).
func (c *Cluster) message(m *codec.Message) *nats.Msg {
	if c.closed.Load() {
		return nil // the node is stopping: its broker's last messages stay local
	}
	subj := Subject(c.opts.SubjectPrefix, m.Topic)
	if len(subj) > c.maxSubject {
		c.forwardDropped.Add(1)
		c.warn("message not forwarded to other nodes: topic too long for NATS", zap.Int("subject_bytes", len(subj)))
		return nil
	}
	return &nats.Msg{Subject: subj, Data: m.Payload, Header: encodeHeader(c.opts.Node, m)}
}

func (c *Cluster) publish(m *nats.Msg, topic string) {
	if err := c.nc.PublishMsg(m); err != nil {
		c.forwardDropped.Add(1)
		c.warn("message not forwarded to other nodes", zap.String("topic", topic), zap.Error(err))
		return
	}
	c.forwarded.Add(1)
}

// Stats returns the node's counters.
func (c *Cluster) Stats() Stats {
	ss := c.sessions
	return Stats{Forwarded: c.forwarded.Load(), ForwardDropped: c.forwardDropped.Load(), Received: c.received.Load(),
		ReceivedDropped: c.receivedDropped.Load(), Interest: int64(c.interests.count()),
		ClaimsUnavailable: c.reg.claimsUnavailable.Load(), ClaimsRefused: c.reg.claimsRefused.Load(),
		TakenOver: c.reg.takenOver.Load(), RetainDropped: c.retained.retainDropped.Load(),
		SessionsIn: ss.sessionsIn.Load(), SessionsOut: ss.sessionsOut.Load(), SessionsLost: ss.sessionsLost.Load(),
		HandedOver:      c.handedOver.Load(),
		SessionsAdopted: c.adoption.sessionsAdopted.Load(), SessionsRestored: ss.sessionsRestored.Load(), SessionsMerged: ss.sessionsMerged.Load(),
		ReplicaDropped: c.rep.replicaDropped.Load(), NodesDead: c.members.nodesDead.Load(), Replayed: c.replay.replayedMsgs.Load()}
}

// Connected reports whether the node's NATS connection is up.
func (c *Cluster) Connected() bool { return c.nc.Status() == nats.CONNECTED }

// Routes is the number of routes of the embedded NATS server to other
// nodes, -1 with an external NATS.
func (c *Cluster) Routes() int {
	if c.emb == nil {
		return -1
	}
	return c.emb.srv.NumRoutes()
}

// Healthy reports whether the node is part of its cluster: connected to
// NATS, with an embedded server that has routes configured routed to at
// least one other node (an isolated node's clients would not reach the
// others'), and its replicated state in use. /readyz answers with it.
func (c *Cluster) Healthy() error {
	if !c.Connected() {
		return fmt.Errorf("cluster: NATS connection %s", c.nc.Status())
	}
	if c.emb != nil && len(c.opts.Embedded.Routes) > 0 && c.emb.srv.NumRoutes() == 0 {
		return errors.New("cluster: no route to any other node")
	}
	if !c.Ready() {
		// Until the registry is usable a CONNECT is held on this node
		// only: a rolling restart must not move on to the next node yet.
		return errors.New("cluster: replicated state (client id registry, retained messages) not ready")
	}
	return nil
}

// Close stops routing, closes the NATS connection and stops the embedded
// server. The broker must forward nothing more (call it before or after
// the broker's Shutdown: Forward after Close drops).
func (c *Cluster) Close() error {
	c.closeMu.Lock()
	first := c.closed.CompareAndSwap(false, true)
	c.closeMu.Unlock()
	if !first {
		return nil
	}
	c.members.leave()
	close(c.stop)
	c.done.Wait()
	c.nc.Close()
	c.emb.close()
	return nil
}
