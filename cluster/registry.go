package cluster

import (
	"context"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// registry is this node's side of the client id registry (the
// NAME_clients bucket): the claims of its connections, the order of
// takeovers (order.go), and the takeovers other nodes' claims make here.
type registry struct {
	*link
	claims claims
	freeze freezes // order.go
	// claimsRefused counts the claims refused cluster-wide: another
	// owner's session, or an older claim (mayTake).
	claimsUnavailable, claimsRefused, takenOver atomic.Int64

	// Set by New, from the session moves (session.go): bring a session
	// from the node that held the id before the claim, and ask a node
	// whose session of a client id it holds.
	move    func(clientID, node string, rev uint64)
	ownerAt func(node, clientID string) (string, error)
}

// held is the claim of clientID this node holds, 0 for none.
func (rg *registry) held(clientID string) uint64 {
	rg.claims.mu.Lock()
	defer rg.claims.mu.Unlock()
	return rg.claims.m[clientID]
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

// claim is Cluster.Claim.
func (rg *registry) claim(clientID, owner string, checkOwner, clean bool) (uint64, codec.ReasonCode) {
	for _, p := range rg.opts.NodeLocalIDs {
		if strings.HasPrefix(clientID, p) {
			return 0, 0
		}
	}
	st := rg.state.Load()
	if st == nil {
		rg.claimsUnavailable.Add(1)
		rg.warn("client id registry not ready: the connection is held on this node only", zap.String("client_id", clientID))
		return 0, 0
	}
	began := rg.claimTime()
	defer rg.claims.serialize(clientID)()
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
	mine := regEntry{node: rg.opts.Node, flag: flag, owner: ownerField(owner), at: began.UnixMilli()}
	k, v := key(clientID), mine.value()
	var refused codec.ReasonCode
	rg.claims.mu.Lock()
	ours := rg.claims.m[clientID]
	rg.claims.pending[clientID]++
	rg.claims.mu.Unlock()
	var rev uint64
	var err error
	prev := "" // the node that held the id, "" for none
	if ours != 0 {
		prev = rg.opts.Node
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
			if refused = rg.mayTake(held, mine, clientID, checkOwner); refused != 0 {
				err = nil
				break
			}
			try(func(ctx context.Context) { rev, err = st.clients.Update(ctx, k, v, e.Revision()) }) // refused: another write came in between, again
		}
		if refused != 0 {
			break
		}
	}
	rg.claims.mu.Lock()
	newer := rg.claims.newer[clientID]
	if rg.claims.pending[clientID]--; rg.claims.pending[clientID] == 0 {
		delete(rg.claims.pending, clientID)
		delete(rg.claims.newer, clientID)
	}
	superseded := err == nil && refused == 0 && newer.rev > rev
	if err == nil && refused == 0 && !superseded {
		rg.claims.m[clientID] = rev
		rg.claims.owners[clientID] = mine.owner
	}
	rg.claims.mu.Unlock()
	if refused != 0 {
		rg.claimsRefused.Add(1)
		return 0, refused
	}
	if err != nil {
		rg.claimsUnavailable.Add(1)
		rg.warn("client id registry unavailable: the connection is held on this node only", zap.String("client_id", clientID), zap.Error(err))
		return 0, 0
	}
	if superseded {
		// Another node's claim came after ours and was seen first: the
		// connection is taken over once attached.
		rg.takeOverSoon(clientID, rev, newer.clean)
		return rev, 0
	}
	if !clean && prev != "" && prev != rg.opts.Node {
		rg.move(clientID, prev, rev)
	}
	return rev, 0
}

// mayTake decides whether the claim mine may replace held, another
// claim of clientID: 0, or the reason it may not.
func (rg *registry) mayTake(held, mine regEntry, clientID string, checkOwner bool) codec.ReasonCode {
	if held.node == rg.opts.Node {
		return 0 // the broker here decides (attach)
	}
	if held.flag != "s" && held.at > mine.at+claimSlack.Milliseconds() {
		// The connection there began well after this claim did: this one
		// is a CONNECT read late (the node was frozen), the client has
		// moved on. Claims closer than claimSlack (a race, clocks a little
		// apart) are ordered by their writes: the later one wins.
		rg.log.Warn("a connection's claim is older than the connection it would take over on another node: refused",
			zap.String("client_id", clientID), zap.String("node", held.node),
			zap.Time("claim_began", time.UnixMilli(mine.at)), zap.Time("held_since", time.UnixMilli(held.at)))
		return codec.UseAnotherServer
	}
	if !checkOwner || held.owner == "" || held.owner == mine.owner {
		return 0
	}
	// The registry names another owner; the node holding the session
	// knows whether it is still there, and whose it is.
	owner, err := rg.ownerAt(held.node, clientID)
	switch {
	case err != nil:
		rg.log.Warn("the node holding a client id does not say whose its session is: the connection is refused",
			zap.String("client_id", clientID), zap.String("node", held.node), zap.Error(err))
		return codec.NotAuthorized
	case owner == "" || owner == mine.owner:
		return 0 // no session there any more, or one of no known owner, or ours
	default:
		rg.log.Info("the session of a client id held on another node belongs to another user: the connection is refused",
			zap.String("client_id", clientID), zap.String("node", held.node))
		return codec.NotAuthorized
	}
}

// claimTimeout bounds a claim: a few round trips, or the election of
// the registry's leader after the loss of the node that was.
const claimTimeout = 10 * time.Second

// release is Cluster.Release.
func (rg *registry) release(clientID string, claim uint64, session bool) {
	rg.claims.mu.Lock()
	owner := rg.claims.owners[clientID]
	if rg.claims.m[clientID] == claim {
		delete(rg.claims.m, clientID)
		delete(rg.claims.owners, clientID)
	}
	rg.claims.mu.Unlock()
	st := rg.state.Load()
	if st == nil {
		return
	}
	rg.goUnlessClosed(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
		defer cancel()
		// Refused when a newer claim replaced it: then it is not ours.
		if session {
			_, _ = st.clients.Update(ctx, key(clientID), regEntry{node: rg.opts.Node, flag: "s", owner: owner}.value(), claim)
		} else {
			_ = st.clients.Delete(ctx, key(clientID), jetstream.LastRevision(claim))
		}
	})
}

// clientEntry handles a registry change: another node's claim of a
// client id connected here (with an older claim) takes it over.
func (rg *registry) clientEntry(e jetstream.KeyValueEntry) {
	if e.Operation() != jetstream.KeyValuePut {
		return
	}
	re, ok := parseEntry(e.Value())
	if !ok || re.node == rg.opts.Node || re.flag == "s" {
		return // ours, or a session left offline on another node: no claim
	}
	clean := re.flag
	id, ok := unkey(e.Key())
	if !ok {
		return
	}
	rg.claims.mu.Lock()
	ours := rg.claims.m[id]
	if rg.claims.pending[id] > 0 {
		// A claim under way here sees it when its answer comes.
		if e.Revision() > rg.claims.newer[id].rev {
			rg.claims.newer[id] = otherClaim{e.Revision(), clean == "1"}
		}
		if ours == 0 {
			rg.claims.mu.Unlock()
			return
		}
	}
	if ours >= e.Revision() {
		rg.claims.mu.Unlock()
		return // a newer claim of ours replaced it already
	}
	delete(rg.claims.m, id)
	rg.claims.mu.Unlock()
	if rg.local.TakeOver(id, ours, clean == "1") {
		rg.takenOver.Add(1)
		return
	}
	if ours != 0 {
		// The connection holding ours claimed the id but is not
		// attached to its session yet (its CONNECT is between Claim and
		// CONNACK).
		rg.takeOverSoon(id, ours, clean == "1")
	}
}

// takeOverSoon tries TakeOver for a moment (40 times 25 ms), so that a
// connection not attached yet does not stay connected beside a newer one
// on another node. A connection that ended meanwhile makes these no-ops.
func (rg *registry) takeOverSoon(id string, claim uint64, clean bool) {
	rg.goUnlessClosed(func() {
		for range 40 {
			select {
			case <-rg.stop:
				return
			case <-time.After(25 * time.Millisecond):
			}
			if rg.local.TakeOver(id, claim, clean) {
				rg.takenOver.Add(1)
				return
			}
		}
	})
}

// holder is Cluster.Holder.
func (rg *registry) holder(clientID string) (node string, offline bool, err error) {
	st := rg.state.Load()
	if st == nil {
		return "", false, errors.New("cluster: client id registry not ready")
	}
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	e, err := st.clients.Get(ctx, key(clientID))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	re, _ := parseEntry(e.Value())
	return re.node, re.flag == "s", nil
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
	return c.reg.claim(clientID, owner, checkOwner, clean)
}

// Release deletes clientID's registry entry if it is still claim, or,
// with session, marks it as the node holding the client's offline
// session (so that a connection on another node moves it there);
// core.Cluster's contract: it returns at once, the write runs behind.
func (c *Cluster) Release(clientID string, claim uint64, session bool) {
	c.reg.release(clientID, claim, session)
}
