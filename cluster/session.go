package cluster

import (
	"context"
	"errors"
	"github.com/nats-io/nats.go/jetstream"
	"strconv"
	"sync/atomic"
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

// sessions moves persistent sessions between nodes: it brings one here
// for a claim (moveSession), serves the other nodes' requests for those
// here (serveSession, on routeLoop), and checks this node's sessions
// against the registry when it comes back (reconcile).
type sessions struct {
	*link
	reg       *registry // the claims here
	members   *membership
	interests *interests
	replay    *replayer // the sessions of a node gone, from its records
	rep       *replica
	inbox     *inbox
	given     givenSessions // sessions given away lately (keepGiven), on routeLoop
	// sessionsIn, sessionsOut, sessionsLost, sessionsRestored and
	// sessionsMerged are Stats' SessionsIn, SessionsOut, SessionsLost,
	// SessionsRestored and SessionsMerged.
	sessionsIn, sessionsOut, sessionsLost, sessionsRestored, sessionsMerged atomic.Int64
}

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
func (ss *sessions) moveSession(clientID, node string, rev uint64) {
	start := time.Now()
	lost := func(msg string, err error) {
		ss.sessionsLost.Add(1)
		ss.log.Warn(msg+": the connection starts a new session here", zap.String("client_id", clientID),
			zap.String("from", node), zap.Error(err))
	}
	subs, err := ss.sessionRequest(node, clientID, rev, "subs")
	if errors.Is(err, nats.ErrNoResponders) {
		ss.members.noResponders(node)
	}
	if err != nil && ss.opts.SessionReplicas > 1 && (errors.Is(err, nats.ErrNoResponders) || ss.members.isDead(node)) {
		// The node is gone (no NATS server has its session subject): the
		// session comes from its replicated records.
		ss.restoreHere(node, clientID, start)
		return
	}
	if err != nil {
		lost("session not moved from another node", err)
		return
	}
	if len(subs) == 0 {
		return // no persistent session there (ended, expired, or MQTT 5 with no expiry)
	}
	if err := ss.local.ImportSession(clientID, subs, false); err != nil {
		lost("session from another node not installed", err)
		return
	}
	if err := ss.interests.syncInterest(sessionTimeout); err != nil {
		ss.warn("a moving session's subscriptions are not on NATS yet", zap.String("client_id", clientID), zap.Error(err))
	}
	ss.members.ping(pingTimeout)
	data, err := ss.sessionRequest(node, clientID, rev, "take")
	if errors.Is(err, nats.ErrTimeout) && !ss.members.isDead(node) {
		// The answer may be lost, not the node: it keeps what it gave
		// for this claim (keepGiven), so ask once more.
		data, err = ss.sessionRequest(node, clientID, rev, "take")
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
		ss.members.ping(pingTimeout)
		err = ss.inbox.run(func() error { return ss.local.ImportSession(clientID, data, true) })
	}
	if err != nil {
		ss.local.DropImport(clientID)
		lost("session not moved from another node", err)
		return
	}
	ss.sessionsIn.Add(1)
	ss.log.Info("session moved here", zap.String("client_id", clientID), zap.String("from", node),
		zap.Int("bytes", len(data)), zap.Duration("took", time.Since(start)))
}

// restoreHere rebuilds clientID's session from the records node (gone)
// replicated, for its client connecting here; with none, a session this
// node adopted meanwhile, if any, is the client's.
func (ss *sessions) restoreHere(node, clientID string, start time.Time) {
	st := ss.state.Load()
	ok, err := ss.replay.restoreFromReplica(st, node, clientID, false)
	if err != nil {
		ss.sessionsLost.Add(1)
		ss.log.Warn("session of a node gone not restored from its replicas: the connection starts a new session here",
			zap.String("client_id", clientID), zap.String("from", node), zap.Error(err))
		return
	}
	if !ok {
		return
	}
	// Every node routes to the session before its client is told it is
	// there (CONNACK), as after a move.
	if err := ss.interests.syncInterest(sessionTimeout); err != nil {
		ss.warn("a restored session's subscriptions are not on NATS yet", zap.String("client_id", clientID), zap.Error(err))
	}
	ss.members.ping(pingTimeout)
	ss.rep.dropReplica(st, node, clientID)
	ss.sessionsRestored.Add(1)
	ss.log.Info("session restored here from the replicas of a node gone", zap.String("client_id", clientID),
		zap.String("from", node), zap.Duration("took", time.Since(start)))
}

// sessionRequest asks node for step op of clientID's session and returns
// the answer's data.
func (ss *sessions) sessionRequest(node, clientID string, rev uint64, op string) ([]byte, error) {
	req := nats.NewMsg(sessionSubject(ss.opts.Name, node))
	req.Data = []byte(clientID)
	req.Header.Set(hdrClaim, strconv.FormatUint(rev, 10))
	req.Header.Set(hdrOp, op)
	resp, err := ss.nc.RequestMsg(req, sessionTimeout)
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
func (ss *sessions) keepGiven(id string, rev uint64, data []byte) []byte {
	gs := &ss.given
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
		ss.sessionsOut.Add(1)
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
		ss.log.Info("session given again: the first answer did not arrive", zap.String("client_id", id))
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
func (ss *sessions) serveSession(m *nats.Msg) {
	switch m.Header.Get(hdrOp) {
	case "merge":
		ss.serveMerge(m)
		return
	case "owner":
		// Whose session this is, for another node's Claim (mayTake).
		resp := nats.NewMsg(m.Reply)
		if owner, known, ok := ss.local.SessionOwner(string(m.Data)); ok && known {
			resp.Data = []byte(ownerField(owner))
		}
		if err := ss.nc.PublishMsg(resp); err != nil {
			ss.warn("cannot answer a session request", zap.Error(err))
		}
		return
	}
	take := m.Header.Get(hdrOp) == "take"
	if take && m.Sub != pinged {
		ss.goUnlessClosed(func() {
			ss.members.ping(pingTimeout)
			m.Sub = pinged
			ss.inbox.put(m)
		})
		return
	}
	id := string(m.Data)
	rev, _ := strconv.ParseUint(m.Header.Get(hdrClaim), 10, 64)
	resp := nats.NewMsg(m.Reply)
	ours := ss.reg.held(id)
	if ours > rev {
		resp.Header.Set(hdrError, "the client connected again on node "+ss.opts.Node)
	} else {
		max := int(ss.nc.MaxPayload()) - 1024 // room for the headers
		resp.Data = ss.local.ExportSession(id, max, take)
		if take {
			resp.Data = ss.keepGiven(id, rev, resp.Data)
		}
	}
	if err := ss.nc.PublishMsg(resp); err != nil {
		ss.warn("cannot answer a session request", zap.String("client_id", id), zap.Error(err))
	}
}

// serveMerge takes the messages of a stale session on the requesting
// node (liveness.go) into the client's session here, off routeLoop: the
// store's Sync may wait for the session replicas.
func (ss *sessions) serveMerge(m *nats.Msg) {
	ss.goUnlessClosed(func() {
		id := m.Header.Get(hdrClient)
		resp := nats.NewMsg(m.Reply)
		if _, err := ss.local.MergeSession(id, m.Data); err != nil {
			resp.Header.Set(hdrError, err.Error())
		}
		if err := ss.nc.PublishMsg(resp); err != nil {
			ss.warn("cannot answer a session request", zap.String("client_id", id), zap.Error(err))
		}
	})
}

// ownerAt asks node whose session of clientID it holds: the registry
// owner field, or "" when it has none (or one of no known owner).
func (ss *sessions) ownerAt(node, clientID string) (string, error) {
	b, err := ss.sessionRequest(node, clientID, 0, "owner")
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// reconcile runs once the registry is ready on a node that (re)started
// with persistent sessions: a session whose client id the registry gives
// to another node is stale (its client moved on while this node was
// down). With session replicas, the session there came from the
// replicated records and this copy goes; without, this copy's messages
// are merged into the session there (with DUP), so that nothing this node
// acknowledged is lost. A session the registry does not know is
// registered as left offline here, so that the client's next connection
// anywhere moves it.
func (ss *sessions) reconcile(st *state) {
	// The replay of what was published while this node was down goes
	// into its sessions first, stale ones included.
	select {
	case <-ss.replay.rejoinDone:
	case <-ss.stop:
		return
	}
	ids := ss.local.StaleSessions()
	stale, registered := 0, 0
	for _, id := range ids {
		if ss.closed.Load() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
		k := key(id)
		e, err := st.clients.Get(ctx, k)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			re := regEntry{node: ss.opts.Node, flag: "s"}
			if owner, known, _ := ss.local.SessionOwner(id); known {
				re.owner = ownerField(owner)
			}
			if _, err := st.clients.Create(ctx, k, re.value()); err == nil {
				registered++
			}
		case err != nil:
			ss.warn("cannot read the client id registry: a session left as it is", zap.String("client_id", id), zap.Error(err))
		case heldBy(e.Value()) != ss.opts.Node:
			stale++
			ss.dropStale(id, heldBy(e.Value()))
		}
		cancel()
	}
	if stale > 0 || registered > 0 {
		ss.log.Info("sessions checked against the registry", zap.Int("sessions", len(ids)), zap.Int("stale", stale),
			zap.Int("registered", registered))
	}
}

// dropStale ends clientID's stale session here (its will unsent: the
// client is back on holder) and, without session replicas, merges its
// messages into the session on holder.
func (ss *sessions) dropStale(clientID, holder string) {
	data := ss.local.ExportSession(clientID, 0, true)
	if data == nil || ss.opts.SessionReplicas > 1 {
		return
	}
	req := nats.NewMsg(sessionSubject(ss.opts.Name, holder))
	req.Data = data
	req.Header.Set(hdrClaim, "0")
	req.Header.Set(hdrOp, "merge")
	req.Header.Set(hdrClient, clientID)
	resp, err := ss.nc.RequestMsg(req, sessionTimeout)
	if err == nil {
		if e := resp.Header.Get(hdrError); e != "" {
			err = errorString(e)
		}
	}
	if err != nil {
		// Kept here rather than lost: the client's next move takes it.
		if ierr := ss.local.ImportSession(clientID, data, true); ierr != nil {
			ss.log.Error("a stale session's messages lost", zap.String("client_id", clientID), zap.Error(ierr))
		}
		ss.log.Warn("a stale session's messages not merged into its client's session: kept here", zap.String("client_id", clientID),
			zap.String("node", holder), zap.Error(err))
		return
	}
	ss.sessionsMerged.Add(1)
}
