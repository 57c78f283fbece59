package cluster

import (
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// Sessions move: a connection that does not start clean, on a node other
// than the one that held its client id (the registry's entry, connected
// or with its session left offline there), brings the session from that
// node before the session is attached, in two requests over NATS so that
// no message published meanwhile is lost:
//
//  1. "subs": the old node answers with the session's subscriptions; this
//     node installs them as a pending session, which queues what comes,
//     and waits until every NATS server knows its interest (its own
//     flushed, then a ping answered by every other node: a server
//     forwards the ping after the interest it learned before, on the
//     same route).
//  2. "take": the old node, in order with the messages that reached it
//     before, closes the connection if it is still there, takes the
//     session out of its broker (core encodes it with its store's
//     records) and answers with it; this node puts its messages before
//     those the pending session queued (with DUP: they may be copies).
//
// CONNACK then says Session Present and the queued messages flow from here.

// sessionTimeout bounds the wait for each answer of another node: past it
// (the node is dead or cut off) the connection starts a new session here.
const sessionTimeout = 2 * time.Second

// pingTimeout bounds the wait for the other nodes' pings; with an
// external NATS, whose nodes this node cannot count, the wait ends
// pingQuiet after the last answer.
const (
	pingTimeout = time.Second
	pingQuiet   = 50 * time.Millisecond
)

// hdrClaim is the header of a session request holding the requester's
// claim (registry revision), hdrOp its step ("subs" or "take");
// hdrError is the answer's refusal.
const (
	hdrClaim = "Xmq-Claim"
	hdrOp    = "Xmq-Op"
	hdrError = "Xmq-Error"
	// hdrClient names the client id of a "merge" request, whose data is
	// the session (liveness.go).
	hdrClient = "Xmq-Client"
)

// sessionSubject is where node of cluster name answers session requests:
// outside the subject prefix (which may not hold '$'), so that no MQTT
// subscription, nor a NATS application reading MQTT traffic, sees it.
func sessionSubject(name, node string) string {
	return "$XMQ." + name + ".node." + node + ".session"
}

// moveSession brings clientID's session from node, which held the id
// before this node's claim rev.
func (c *Cluster) moveSession(clientID, node string, rev uint64) {
	start := time.Now()
	lost := func(msg string, err error) {
		c.sessionsLost.Add(1)
		c.log.Warn(msg+": the connection starts a new session here", zap.String("client_id", clientID),
			zap.String("from", node), zap.Error(err))
	}
	subs, err := c.sessionRequest(node, clientID, rev, "subs")
	if errors.Is(err, nats.ErrNoResponders) {
		c.members.noResponders(node)
	}
	if err != nil && c.opts.SessionReplicas > 1 && (errors.Is(err, nats.ErrNoResponders) || c.members.isDead(node)) {
		// The node is gone (no NATS server has its session subject): the
		// session comes from its replicated records.
		c.restoreHere(node, clientID, start)
		return
	}
	if err != nil {
		lost("session not moved from another node", err)
		return
	}
	if len(subs) == 0 {
		return // no persistent session there (ended, expired, or MQTT 5 with no expiry)
	}
	if err := c.local.ImportSession(clientID, subs, false); err != nil {
		lost("session from another node not installed", err)
		return
	}
	if err := c.interests.syncInterest(sessionTimeout); err != nil {
		c.warn("a moving session's subscriptions are not on NATS yet", zap.String("client_id", clientID), zap.Error(err))
	}
	c.members.ping(pingTimeout)
	data, err := c.sessionRequest(node, clientID, rev, "take")
	if errors.Is(err, nats.ErrTimeout) && !c.members.isDead(node) {
		// The answer may be lost, not the node: it keeps what it gave
		// for this claim (keepGiven), so ask once more.
		data, err = c.sessionRequest(node, clientID, rev, "take")
	}
	if err == nil && len(data) == 0 {
		err = errors.New("the session ended there meanwhile")
	}
	if err == nil {
		// A message that reached the old node before the session left
		// may reach this node after the answer: after a ping answered by
		// every node, it is in the inbox, and the session is installed
		// on routeLoop behind it, so that it is among what the pending
		// session queued (sent with DUP), not a new message after.
		c.members.ping(pingTimeout)
		err = c.inbox.run(func() error { return c.local.ImportSession(clientID, data, true) })
	}
	if err != nil {
		c.local.DropImport(clientID)
		lost("session not moved from another node", err)
		return
	}
	c.sessionsIn.Add(1)
	c.log.Info("session moved here", zap.String("client_id", clientID), zap.String("from", node),
		zap.Int("bytes", len(data)), zap.Duration("took", time.Since(start)))
}

// restoreHere rebuilds clientID's session from the records node (gone)
// replicated, for its client connecting here; with none, a session this
// node adopted meanwhile, if any, is the client's.
func (c *Cluster) restoreHere(node, clientID string, start time.Time) {
	st := c.state.Load()
	ok, err := c.restoreFromReplica(st, node, clientID, false)
	if err != nil {
		c.sessionsLost.Add(1)
		c.log.Warn("session of a node gone not restored from its replicas: the connection starts a new session here",
			zap.String("client_id", clientID), zap.String("from", node), zap.Error(err))
		return
	}
	if !ok {
		return
	}
	// Every node routes to the session before its client is told it is
	// there (CONNACK), as after a move.
	if err := c.interests.syncInterest(sessionTimeout); err != nil {
		c.warn("a restored session's subscriptions are not on NATS yet", zap.String("client_id", clientID), zap.Error(err))
	}
	c.members.ping(pingTimeout)
	c.dropReplica(st, node, clientID)
	c.sessionsRestored.Add(1)
	c.log.Info("session restored here from the replicas of a node gone", zap.String("client_id", clientID),
		zap.String("from", node), zap.Duration("took", time.Since(start)))
}

// sessionRequest asks node for step op of clientID's session and returns
// the answer's data.
func (c *Cluster) sessionRequest(node, clientID string, rev uint64, op string) ([]byte, error) {
	req := nats.NewMsg(sessionSubject(c.opts.Name, node))
	req.Data = []byte(clientID)
	req.Header.Set(hdrClaim, strconv.FormatUint(rev, 10))
	req.Header.Set(hdrOp, op)
	resp, err := c.nc.RequestMsg(req, sessionTimeout)
	if err != nil {
		return nil, err
	}
	if e := resp.Header.Get(hdrError); e != "" {
		return nil, errorString(e)
	}
	return resp.Data, nil
}

type errorString string

func (e errorString) Error() string { return string(e) }

// pinged marks a "take" request put back in the inbox once the other
// nodes answered this node's ping (serveSession).
var pinged = new(nats.Subscription)

// givenKeep is how long a node keeps a session it gave away in a "take"
// answer, for the same request again: an answer lost on the way would
// otherwise lose the session, which has left this node.
const givenKeep = 30 * time.Second

// givenMax bounds the bytes kept (keepGiven): past it, during a storm of
// moves, the newest sessions given are not kept.
const givenMax = 64 << 20

// given is a session a "take" answer carried (serveSession's, on routeLoop).
type given struct {
	id   string
	rev  uint64
	data []byte
	at   time.Time
}

// givenSessions are the sessions given away lately, in the order given,
// so that expiring them costs only the expired ones in a storm of moves.
type givenSessions struct {
	byID  map[string]*given
	order []*given
	bytes int
}

// keepGiven keeps data, the session id just left with for the claim rev,
// and returns it; with no data (the session is not here), what a former
// answer to the same claim carried, if any. It runs on routeLoop.
func (c *Cluster) keepGiven(id string, rev uint64, data []byte) []byte {
	gs := &c.given
	now := time.Now()
	for len(gs.order) > 0 && now.Sub(gs.order[0].at) > givenKeep {
		g := gs.order[0]
		gs.order[0] = nil
		gs.order = gs.order[1:]
		gs.bytes -= len(g.data)
		if gs.byID[g.id] == g {
			delete(gs.byID, g.id)
		}
	}
	if data != nil {
		c.sessionsOut.Add(1)
		if gs.bytes+len(data) <= givenMax {
			if gs.byID == nil {
				gs.byID = map[string]*given{}
			}
			g := &given{id, rev, data, now}
			gs.byID[id] = g
			gs.order = append(gs.order, g)
			gs.bytes += len(data)
		}
		return data
	}
	if g := gs.byID[id]; g != nil && g.rev == rev {
		c.log.Info("session given again: the first answer did not arrive", zap.String("client_id", id))
		return g.data
	}
	return nil
}

// serveSession answers another node's request for a session of this
// node, on routeLoop: unless a claim of this node newer than the
// requester's holds the id (the client came back here meanwhile), "subs"
// gets the session's subscriptions and "take" the whole session, which
// leaves the broker (an empty answer: there is none).
//
// A "take" first pings the other nodes, off routeLoop, then goes back in
// the inbox: each node's answer comes after the messages its NATS server
// sent here before it learned the requester's interest, so those are in
// the inbox before the request and reach the session before it leaves.
func (c *Cluster) serveSession(m *nats.Msg) {
	switch m.Header.Get(hdrOp) {
	case "merge":
		c.serveMerge(m)
		return
	case "owner":
		// Whose session this is, for another node's Claim (mayTake).
		resp := nats.NewMsg(m.Reply)
		if owner, known, ok := c.local.SessionOwner(string(m.Data)); ok && known {
			resp.Data = []byte(ownerField(owner))
		}
		if err := c.nc.PublishMsg(resp); err != nil {
			c.warn("cannot answer a session request", zap.Error(err))
		}
		return
	}
	take := m.Header.Get(hdrOp) == "take"
	if take && m.Sub != pinged {
		c.goUnlessClosed(func() {
			c.members.ping(pingTimeout)
			m.Sub = pinged
			c.inbox.put(m)
		})
		return
	}
	id := string(m.Data)
	rev, _ := strconv.ParseUint(m.Header.Get(hdrClaim), 10, 64)
	resp := nats.NewMsg(m.Reply)
	ours := c.reg.held(id)
	if ours > rev {
		resp.Header.Set(hdrError, "the client connected again on node "+c.opts.Node)
	} else {
		max := int(c.nc.MaxPayload()) - 1024 // room for the headers
		resp.Data = c.local.ExportSession(id, max, take)
		if take {
			resp.Data = c.keepGiven(id, rev, resp.Data)
		}
	}
	if err := c.nc.PublishMsg(resp); err != nil {
		c.warn("cannot answer a session request", zap.String("client_id", id), zap.Error(err))
	}
}

// serveMerge takes the messages of a stale session on the requesting
// node (liveness.go) into the client's session here, off routeLoop: the
// store's Sync may wait for the session replicas.
func (c *Cluster) serveMerge(m *nats.Msg) {
	c.goUnlessClosed(func() {
		id := m.Header.Get(hdrClient)
		resp := nats.NewMsg(m.Reply)
		if _, err := c.local.MergeSession(id, m.Data); err != nil {
			resp.Header.Set(hdrError, err.Error())
		}
		if err := c.nc.PublishMsg(resp); err != nil {
			c.warn("cannot answer a session request", zap.String("client_id", id), zap.Error(err))
		}
	})
}
