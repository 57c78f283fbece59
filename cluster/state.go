package cluster

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// The replicated state lives in two JetStream key-value buckets per
// cluster, whatever the number of clients, subscriptions or topics (never
// one JetStream object per MQTT subscription or client):
//
//	NAME_clients   client id → the node holding its connection (the registry)
//	NAME_retained  topic → its retained message
//
// Keys are the client id or topic in unpadded base64url (KV keys allow
// few characters). Each node watches both buckets with one ordered
// consumer each.

// stateTimeout bounds one request to JetStream (a claim, a bucket setup).
const stateTimeout = 2 * time.Second

// state is the JetStream side once its buckets exist.
type state struct {
	js       jetstream.JetStream
	clients  jetstream.KeyValue
	retained jetstream.KeyValue
	// sessions is the session replicas' stream (replica.go), nil
	// without session replicas.
	sessions jetstream.Stream
	// retainedSubject is the subject prefix of retained's keys, for
	// asynchronous puts.
	retainedSubject string
}

// claims are the client ids connected on this node, by the revision of
// their registry entry (their claim).
type claims struct {
	mu sync.Mutex
	m  map[string]uint64
	// owners are the registry owner fields of m's claims, for Release.
	owners map[string]string
	// pending counts the claims of an id under way here; newer holds
	// the newest other node's claim of such an id seen meanwhile (the
	// watch may deliver it before the claim's own answer arrives).
	pending map[string]int
	newer   map[string]otherClaim
	// busy holds, per client id, the end of the claim under way here
	// (closed when it returns): a second connection with the id waits
	// for it, so that it finds the session the first one brought here
	// rather than make a new one beside it (liveness.go: a client that
	// gave up waiting for its CONNACK while the session came).
	busy map[string]chan struct{}
}

// serializeTimeout bounds the wait for another claim of the same id:
// longer than a claim that restores a dead node's session can take.
const serializeTimeout = time.Minute

// serialize waits until no claim of clientID is under way here (at most
// serializeTimeout) and marks this one; the returned function ends it.
func (cl *claims) serialize(clientID string) func() {
	deadline := time.After(serializeTimeout)
	for {
		cl.mu.Lock()
		ch := cl.busy[clientID]
		if ch == nil {
			ch = make(chan struct{})
			cl.busy[clientID] = ch
			cl.mu.Unlock()
			return func() {
				cl.mu.Lock()
				delete(cl.busy, clientID)
				cl.mu.Unlock()
				close(ch)
			}
		}
		cl.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			return func() {} // as before: side by side
		}
	}
}

// otherClaim is another node's claim of a client id.
type otherClaim struct {
	rev   uint64
	clean bool
}

func key(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func unkey(k string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(k)
	return string(b), err == nil
}

// replicas is the buckets' replica count: Options.Replicas, or min(3,
// nodes) with the nodes counted from the embedded routes (this node's
// own listed route aside) or, with an external NATS, from the servers
// the connection knows.
func (c *Cluster) replicas() int {
	if c.opts.Replicas > 0 {
		return c.opts.Replicas
	}
	return min(3, c.nodeCount())
}

// stateLoop makes the buckets, retrying until JetStream answers (a
// clustered JetStream needs a quorum of its servers), then watches them
// until Close, making the watches again when they end.
func (c *Cluster) stateLoop() {
	defer c.done.Done()
	js, err := jetstream.New(c.nc, jetstream.WithPublishAsyncMaxPending(4096), jetstream.WithPublishAsyncTimeout(stateTimeout))
	if err != nil {
		c.log.Error("JetStream unavailable: no client id registry, retained messages stay on their node", zap.Error(err))
		return
	}
	r := c.replicas()
	var st *state
	for st == nil {
		st, err = c.makeBuckets(js, r)
		if err != nil {
			c.warn("JetStream not ready yet: client ids are held per node and retained messages stay local meanwhile",
				zap.Int("replicas", r), zap.Error(err))
			select {
			case <-c.stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The watches exist before any claim is made (state is stored after):
	// a claim by another node must not slip in before the registry's
	// watch, which sees only updates.
	cw := c.startWatch(ctx, st.clients, jetstream.UpdatesOnly())
	rw := c.startWatch(ctx, st.retained)
	if cw == nil || rw == nil {
		return // stopping
	}
	var wg sync.WaitGroup
	wg.Go(func() { c.watch(ctx, st.clients, cw, c.clientEntry, nil, jetstream.UpdatesOnly()) })
	// Topics the bucket has (or had: a cleared one keeps a delete marker)
	// when this node starts watching; the others among this node's own
	// retained messages were kept before it joined, and are uploaded.
	known := map[string]bool{}
	wg.Go(func() {
		c.watch(ctx, st.retained, rw, func(e jetstream.KeyValueEntry) {
			if known != nil {
				known[e.Key()] = true
			}
			c.retainedEntry(e)
		}, func() {
			c.uploadRetained(known)
			known = nil
		})
	})
	wg.Go(func() { c.retainLoop(st) })
	if st.sessions != nil {
		wg.Go(func() { c.replicaLoop(st) })
	}
	wg.Go(func() { c.members.livenessLoop(st) })
	c.state.Store(st)
	wg.Go(func() { c.reconcile(st) })
	c.log.Info("cluster state ready", zap.Int("replicas", r))
	select { // changes queued before the bucket existed
	case c.retainQ.wake <- struct{}{}:
	default:
	}
	<-c.stop
	cancel()
	wg.Wait()
}

func (c *Cluster) makeBuckets(js jetstream.JetStream, replicas int) (*state, error) {
	st := &state{js: js}
	// JetStream drops API requests until its servers have elected a meta
	// leader: ask a cheap one first, with a short wait.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, err := js.AccountInfo(ctx)
	cancel()
	if err != nil {
		return nil, err
	}
	st.clients, err = c.bucket(js, jetstream.KeyValueConfig{Bucket: c.opts.Name + "_clients",
		Description: "xmq: the node of each connected client id", Replicas: replicas, Storage: jetstream.FileStorage})
	if err != nil {
		return nil, err
	}
	st.retained, err = c.bucket(js, jetstream.KeyValueConfig{Bucket: c.opts.Name + "_retained",
		Description: "xmq: retained messages", Replicas: replicas, Storage: jetstream.FileStorage})
	if err != nil {
		return nil, err
	}
	st.retainedSubject = "$KV." + c.opts.Name + "_retained."
	if c.opts.SessionReplicas > 1 {
		n := min(c.opts.SessionReplicas, c.nodeCount())
		if st.sessions, err = c.makeSessionStream(js, n); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// bucket binds to a bucket, creating it if it does not exist. Every node
// starting at once tries: one creates it (its replicas elect a leader,
// which takes seconds), the others find it.
func (c *Cluster) bucket(js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	// A request lost to a meta leader change is not answered: a short
	// wait, and the caller tries again.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return kv, err
	}
	kv, err = js.CreateKeyValue(ctx, cfg)
	if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return js.KeyValue(ctx, cfg.Bucket)
	}
	return kv, err
}

// startWatch watches kv, trying again until it can or ctx ends (nil).
func (c *Cluster) startWatch(ctx context.Context, kv jetstream.KeyValue, opts ...jetstream.WatchOpt) jetstream.KeyWatcher {
	for {
		w, err := kv.WatchAll(ctx, opts...)
		if err == nil {
			return w
		}
		c.warn("cannot watch a cluster bucket", zap.String("bucket", kv.Bucket()), zap.Error(err))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// watch hands every entry of w to handle until ctx ends, and calls
// initial (when not nil) once the bucket's values at the start are all
// in; when the watch ends early (its consumer lost with a server), it
// watches again from the revision after the last one handled, so no
// change is skipped (with first's options when none was).
func (c *Cluster) watch(ctx context.Context, kv jetstream.KeyValue, w jetstream.KeyWatcher, handle func(jetstream.KeyValueEntry),
	initial func(), first ...jetstream.WatchOpt) {
	var last uint64
	for {
		for e := range w.Updates() {
			if e == nil { // the initial values are all in
				if initial != nil {
					initial()
					initial = nil
				}
				continue
			}
			last = e.Revision()
			handle(e)
		}
		_ = w.Stop()
		if ctx.Err() != nil {
			return
		}
		opts := first // nothing handled yet: as the first time
		if last > 0 {
			opts = []jetstream.WatchOpt{jetstream.ResumeFromRevision(last + 1)}
		}
		if w = c.startWatch(ctx, kv, opts...); w == nil {
			return
		}
	}
}

// A registry value is "NODE FLAG" and tagged fields: FLAG is 1 (the
// connection started clean), 0, or s (the connection ended and its
// persistent session stays on NODE, offline, for the next connection with
// the id to move: session.go); "u" + base64 is the owner (the user name or
// certificate identity the session belongs to; absent: unknown), "t" +
// Unix milliseconds when the claim began (the order of takeovers).
type regEntry struct {
	node, flag string
	owner      string // the "u" field as written, "" when unknown
	at         int64  // Unix ms, 0 when unknown
}

func (e regEntry) value() []byte {
	v := e.node + " " + e.flag
	if e.owner != "" {
		v += " " + e.owner
	}
	if e.at != 0 {
		v += " t" + strconv.FormatInt(e.at, 10)
	}
	return []byte(v)
}

// parseEntry reads a registry value; ok is false for one that is not.
func parseEntry(v []byte) (e regEntry, ok bool) {
	f := strings.Fields(string(v))
	if len(f) < 2 {
		return e, false
	}
	e.node, e.flag = f[0], f[1]
	for _, x := range f[2:] {
		switch x[0] {
		case 'u':
			e.owner = x
		case 't':
			e.at, _ = strconv.ParseInt(x[1:], 10, 64)
		}
	}
	return e, true
}

// ownerField is the registry's owner field of a user name.
func ownerField(owner string) string {
	return "u" + base64.RawURLEncoding.EncodeToString([]byte(owner))
}

// heldBy is the node of a registry value.
func heldBy(v []byte) string {
	e, _ := parseEntry(v)
	return e.node
}

// Claim records that clientID's connection, of the identity owner, is on
// this node; core.Cluster's contract. A new id costs one JetStream round
// trip (create); taking an id over from another node, a read and a
// compare-and-set update, retried when another node's update came in
// between, so that of two nodes claiming at once the later write wins and
// the other is taken over.
//
// Two checks hold cluster-wide before an id held on another node is
// written: with checkOwner, a session there of another identity refuses
// the claim (codec.NotAuthorized), as attach does on one node — asked of
// that node, where the session is, when the registry names another
// owner; and a claim that began before the live connection it would
// replace (this node was frozen, its CONNECTs read late) loses: the
// client is connected elsewhere now (codec.UseAnotherServer; a CONNACK
// may not carry 0x8E, Session taken over, which is what happened).
func (c *Cluster) Claim(clientID, owner string, checkOwner, clean bool) (uint64, codec.ReasonCode) {
	for _, p := range c.opts.NodeLocalIDs {
		if strings.HasPrefix(clientID, p) {
			return 0, 0
		}
	}
	st := c.state.Load()
	if st == nil {
		c.claimsUnavailable.Add(1)
		c.warn("client id registry not ready: the connection is held on this node only", zap.String("client_id", clientID))
		return 0, 0
	}
	began := c.claimTime()
	defer c.claims.serialize(clientID)()
	// A registry whose leader was on a node that died answers again once
	// its replicas elected another (seconds): the claim waits for that.
	// Each request waits up to stateTimeout (one lost to a leader
	// election is not answered), all of them up to claimTimeout.
	ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
	defer cancel()
	try := func(f func(context.Context)) {
		actx, acancel := context.WithTimeout(ctx, stateTimeout)
		f(actx)
		acancel()
	}
	flag := "0"
	if clean {
		flag = "1"
	}
	mine := regEntry{node: c.opts.Node, flag: flag, owner: ownerField(owner), at: began.UnixMilli()}
	k, v := key(clientID), mine.value()
	var refused codec.ReasonCode
	c.claims.mu.Lock()
	ours := c.claims.m[clientID]
	c.claims.pending[clientID]++
	c.claims.mu.Unlock()
	var rev uint64
	var err error
	prev := "" // the node that held the id, "" for none
	if ours != 0 {
		prev = c.opts.Node
		// Reconnecting here: update our own entry in one round trip.
		try(func(ctx context.Context) { rev, err = st.clients.Update(ctx, k, v, ours) }) // refused when replaced meanwhile: as below
	} else {
		try(func(ctx context.Context) { rev, err = st.clients.Create(ctx, k, v) })
	}
	// A conflict is ErrKeyExists from Create, or "wrong last sequence"
	// (one of two codes) from Update or Create: read and try again, until
	// stateTimeout. The replicated code (10164) also comes while another
	// write of the key is still being agreed on (the previous node's
	// Release of a client that reconnected at once): the read then gives
	// the revision before it, so pause a little first, longer each time.
	for pause := time.Millisecond; errors.Is(err, jetstream.ErrKeyExists) || isWrongRevision(err) || isLeaderless(err); pause = min(2*pause, 50*time.Millisecond) {
		if isLeaderless(err) {
			pause = 250 * time.Millisecond
		}
		if isMidWrite(err) || isLeaderless(err) {
			select {
			case <-time.After(pause):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		var e jetstream.KeyValueEntry
		try(func(ctx context.Context) { e, err = st.clients.Get(ctx, k) })
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			try(func(ctx context.Context) { rev, err = st.clients.Create(ctx, k, v) })
		case err == nil:
			held, _ := parseEntry(e.Value())
			prev = held.node
			if refused = c.mayTake(held, mine, clientID, checkOwner); refused != 0 {
				err = nil
				break
			}
			try(func(ctx context.Context) { rev, err = st.clients.Update(ctx, k, v, e.Revision()) }) // refused: another write came in between, again
		}
		if refused != 0 {
			break
		}
	}
	c.claims.mu.Lock()
	newer := c.claims.newer[clientID]
	if c.claims.pending[clientID]--; c.claims.pending[clientID] == 0 {
		delete(c.claims.pending, clientID)
		delete(c.claims.newer, clientID)
	}
	superseded := err == nil && refused == 0 && newer.rev > rev
	if err == nil && refused == 0 && !superseded {
		c.claims.m[clientID] = rev
		c.claims.owners[clientID] = mine.owner
	}
	c.claims.mu.Unlock()
	if refused != 0 {
		c.claimsRefused.Add(1)
		return 0, refused
	}
	if err != nil {
		c.claimsUnavailable.Add(1)
		c.warn("client id registry unavailable: the connection is held on this node only", zap.String("client_id", clientID), zap.Error(err))
		return 0, 0
	}
	if superseded {
		// Another node's claim came after ours and was seen first: the
		// connection is taken over once attached.
		c.takeOverSoon(clientID, rev, newer.clean)
		return rev, 0
	}
	if !clean && prev != "" && prev != c.opts.Node {
		c.moveSession(clientID, prev, rev)
	}
	return rev, 0
}

// mayTake decides whether the claim mine may replace held, another
// claim of clientID: 0, or the reason it may not.
func (c *Cluster) mayTake(held, mine regEntry, clientID string, checkOwner bool) codec.ReasonCode {
	if held.node == c.opts.Node {
		return 0 // the broker here decides (attach)
	}
	if held.flag != "s" && held.at > mine.at+claimSlack.Milliseconds() {
		// The connection there began well after this claim did: this one
		// is a CONNECT read late (the node was frozen), the client has
		// moved on. Claims closer than claimSlack (a race, clocks a little
		// apart) are ordered by their writes: the later one wins.
		c.log.Warn("a connection's claim is older than the connection it would take over on another node: refused",
			zap.String("client_id", clientID), zap.String("node", held.node),
			zap.Time("claim_began", time.UnixMilli(mine.at)), zap.Time("held_since", time.UnixMilli(held.at)))
		return codec.UseAnotherServer
	}
	if !checkOwner || held.owner == "" || held.owner == mine.owner {
		return 0
	}
	// The registry names another owner; the node holding the session
	// knows whether it is still there, and whose it is.
	owner, err := c.ownerAt(held.node, clientID)
	switch {
	case err != nil:
		c.log.Warn("the node holding a client id does not say whose its session is: the connection is refused",
			zap.String("client_id", clientID), zap.String("node", held.node), zap.Error(err))
		return codec.NotAuthorized
	case owner == "" || owner == mine.owner:
		return 0 // no session there any more, or one of no known owner, or ours
	default:
		c.log.Info("the session of a client id held on another node belongs to another user: the connection is refused",
			zap.String("client_id", clientID), zap.String("node", held.node))
		return codec.NotAuthorized
	}
}

// claimTimeout bounds a claim: a few round trips, or the election of
// the registry's leader after the loss of the node that was.
const claimTimeout = 10 * time.Second

// isLeaderless reports a request no stream leader answered (in time).
func isLeaderless(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
}

func isWrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// isMidWrite reports the replicated stream's refusal that names no
// revision: among other cases, a write of the same key is in flight.
func isMidWrite(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// Release deletes clientID's registry entry if it is still claim, or,
// with session, marks it as the node holding the client's offline
// session (so that a connection on another node moves it there);
// core.Cluster's contract: it returns at once, the write runs behind.
func (c *Cluster) Release(clientID string, claim uint64, session bool) {
	c.claims.mu.Lock()
	owner := c.claims.owners[clientID]
	if c.claims.m[clientID] == claim {
		delete(c.claims.m, clientID)
		delete(c.claims.owners, clientID)
	}
	c.claims.mu.Unlock()
	st := c.state.Load()
	if st == nil {
		return
	}
	c.goUnlessClosed(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
		defer cancel()
		// Refused when a newer claim replaced it: then it is not ours.
		if session {
			_, _ = st.clients.Update(ctx, key(clientID), regEntry{node: c.opts.Node, flag: "s", owner: owner}.value(), claim)
		} else {
			_ = st.clients.Delete(ctx, key(clientID), jetstream.LastRevision(claim))
		}
	})
}

// clientEntry handles a registry change: another node's claim of a
// client id connected here (with an older claim) takes it over.
func (c *Cluster) clientEntry(e jetstream.KeyValueEntry) {
	if e.Operation() != jetstream.KeyValuePut {
		return
	}
	re, ok := parseEntry(e.Value())
	if !ok || re.node == c.opts.Node || re.flag == "s" {
		return // ours, or a session left offline on another node: no claim
	}
	clean := re.flag
	id, ok := unkey(e.Key())
	if !ok {
		return
	}
	c.claims.mu.Lock()
	ours := c.claims.m[id]
	if c.claims.pending[id] > 0 {
		// A claim under way here sees it when its answer comes.
		if e.Revision() > c.claims.newer[id].rev {
			c.claims.newer[id] = otherClaim{e.Revision(), clean == "1"}
		}
		if ours == 0 {
			c.claims.mu.Unlock()
			return
		}
	}
	if ours >= e.Revision() {
		c.claims.mu.Unlock()
		return // a newer claim of ours replaced it already
	}
	delete(c.claims.m, id)
	c.claims.mu.Unlock()
	if c.local.TakeOver(id, ours, clean == "1") {
		c.takenOver.Add(1)
		return
	}
	if ours != 0 {
		// The connection holding ours claimed the id but is not
		// attached to its session yet (its CONNECT is between Claim and
		// CONNACK).
		c.takeOverSoon(id, ours, clean == "1")
	}
}

// takeOverSoon tries TakeOver for a moment (40 times 25 ms), so that a
// connection not attached yet does not stay connected beside a newer one
// on another node. A connection that ended meanwhile makes these no-ops.
func (c *Cluster) takeOverSoon(id string, claim uint64, clean bool) {
	c.goUnlessClosed(func() {
		for range 40 {
			select {
			case <-c.stop:
				return
			case <-time.After(25 * time.Millisecond):
			}
			if c.local.TakeOver(id, claim, clean) {
				c.takenOver.Add(1)
				return
			}
		}
	})
}

// retainedValue is a retained message in its bucket.
type retainedValue struct {
	Topic   string      `json:"t"`
	Payload []byte      `json:"p,omitempty"`
	QoS     byte        `json:"q,omitempty"`
	Expires int64       `json:"e,omitempty"` // Unix milliseconds
	From    string      `json:"f,omitempty"`
	Props   nats.Header `json:"h,omitempty"` // as the message's headers (message.go)
}

// maxRetainPending bounds the retained changes waiting to be replicated
// (distinct topics: a topic changed again while waiting keeps one entry).
const maxRetainPending = 64 << 10

// retainQueue holds the retained changes of this node not yet in the
// bucket, one per topic, in the order their topics first changed.
type retainQueue struct {
	mu    sync.Mutex
	order []string
	ops   map[string]*nats.Msg
	wake  chan struct{}
}

// Retain records a retained message in the cluster's bucket (an empty
// payload deletes it); core.Cluster's contract: it queues the change and
// returns. One goroutine (retainLoop) writes the queue to the bucket and
// retries what JetStream did not take (a leader election after a node's
// loss), so a change is lost only when the queue is full (logged,
// counted) or the node stops first.
func (c *Cluster) Retain(m codec.Message) {
	c.queueRetain(m, false)
}

// queueRetain queues a retained change for the bucket; with create, only
// if the topic has no change queued already, and to be written only if
// the bucket has no entry for it (a refusal drops it). It reports whether
// it queued the change.
func (c *Cluster) queueRetain(rm codec.Message, create bool) bool {
	if c.closed.Load() {
		return false
	}
	topic := rm.Topic
	m := &nats.Msg{Header: nats.Header{}}
	if create {
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	}
	if len(rm.Payload) == 0 {
		m.Header.Set("KV-Operation", "DEL")
	} else {
		v := retainedValue{Topic: topic, Payload: rm.Payload, QoS: rm.QoS, From: rm.From}
		if !rm.Expires.IsZero() {
			v.Expires = rm.Expires.UnixMilli()
		}
		if rm.Props != nil {
			v.Props = nats.Header{}
			setProps(v.Props, rm.Props)
		}
		m.Data, _ = json.Marshal(v) // cannot fail: plain fields
	}
	q := &c.retainQ
	q.mu.Lock()
	if _, queued := q.ops[topic]; !queued {
		if len(q.order) >= maxRetainPending {
			q.mu.Unlock()
			c.retainDropped.Add(1)
			c.warn("retained message kept on this node only: too many waiting to be replicated", zap.String("topic", topic))
			return false
		}
		q.order = append(q.order, topic)
	} else if create {
		q.mu.Unlock()
		return false // a change of this node is on its way
	}
	q.ops[topic] = m
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// retainLoop writes the queued retained changes to the bucket, in
// batches: each published asynchronously, the batch awaited; a failed
// change goes back to the queue unless its topic changed again meanwhile.
func (c *Cluster) retainLoop(st *state) {
	q := &c.retainQ
	for {
		select {
		case <-c.stop:
			return
		case <-q.wake:
		}
		for {
			q.mu.Lock()
			order := q.order
			batch := make([]*nats.Msg, len(order))
			for i, topic := range order {
				batch[i] = q.ops[topic]
			}
			q.order = nil
			clear(q.ops)
			q.mu.Unlock()
			if len(order) == 0 {
				break
			}
			futures := make([]jetstream.PubAckFuture, len(batch))
			for i, m := range batch {
				m.Subject = st.retainedSubject + key(order[i])
				futures[i], _ = st.js.PublishMsgAsync(m)
			}
			failed := false
			for i, f := range futures {
				err, stopped := c.awaitAck(f)
				if stopped {
					return
				}
				if err == nil {
					continue
				}
				if isWrongRevision(err) && batch[i].Header.Get(jetstream.ExpectedLastSubjSeqHeader) == "0" {
					continue // an upload (uploadRetained) of a topic another node set meanwhile: theirs wins
				}
				failed = true
				c.warn("retained message not replicated yet: retrying", zap.String("topic", order[i]), zap.Error(err))
				q.mu.Lock()
				if _, newer := q.ops[order[i]]; !newer {
					q.order = append(q.order, order[i])
					q.ops[order[i]] = batch[i]
				}
				q.mu.Unlock()
			}
			if failed {
				select {
				case <-c.stop:
					return
				case <-time.After(250 * time.Millisecond):
				}
			}
		}
	}
}

// uploadRetained queues for the bucket this node's retained messages
// whose topic the bucket has never had (known holds the keys it has):
// those a broker kept before it became a node of the cluster, or set
// while alone. Each is written only if the topic still has no entry
// then: a value another node set meanwhile wins.
func (c *Cluster) uploadRetained(known map[string]bool) {
	n := 0
	c.local.LocalRetained(func(m codec.Message) {
		if known[key(m.Topic)] || len(m.Payload) == 0 {
			return
		}
		if c.queueRetain(m, true) {
			n++
		}
	})
	if n > 0 {
		c.log.Info("retained messages kept before joining the cluster are replicated", zap.Int("topics", n))
	}
}

// retainedEntry keeps a retained message of the bucket on this node. Every
// node, the one that set it included, applies the bucket's changes in the
// bucket's order, so all end with the same message per topic.
func (c *Cluster) retainedEntry(e jetstream.KeyValueEntry) {
	topic, ok := unkey(e.Key())
	if !ok || codec.ValidTopicName([]byte(topic)) != nil {
		return
	}
	if e.Operation() != jetstream.KeyValuePut {
		c.local.SetRetained(codec.Message{Topic: topic})
		return
	}
	var v retainedValue
	if err := json.Unmarshal(e.Value(), &v); err != nil || v.Topic != topic {
		c.warn("a retained message in the cluster's bucket does not decode", zap.String("topic", topic))
		return
	}
	m := codec.Message{Topic: topic, Payload: v.Payload, QoS: v.QoS, Props: decodeProps(v.Props), From: v.From}
	if v.Expires != 0 {
		m.Expires = time.UnixMilli(v.Expires)
	}
	c.local.SetRetained(m)
}
