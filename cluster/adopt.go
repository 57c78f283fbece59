package cluster

import (
	"context"
	"errors"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// adopter rebuilds, with session replicas, a dead node's persistent
// sessions here (liveness.go says when and which).
type adopter struct {
	*link
	reg             *registry // the claims and entries of the ids adopted
	replay          *replayer // install: the records and what was published meanwhile
	rep             *replica  // the dead node's records
	members         *membership
	sessionsAdopted atomic.Int64
}

// adoptNode adopts the dead node's replicated sessions whose client did
// not come back: those that hash to this node first, the others once
// their own adopter had deadAfter to do it.
func (ad *adopter) adoptNode(st *state, node string, alive []string) {
	// All its records in one pass (one ordered consumer), not one read
	// per session.
	var all map[string]*replicaRecords
	err := ad.retry(adoptTimeout, func() (err error) {
		all, err = ad.rep.readRecords(st, node, ">")
		return err
	})
	ids := make([]string, 0, len(all))
	for id := range all {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if err != nil {
		ad.log.Error("cannot list a dead node's sessions: they come back when a client connects, or with the node",
			zap.String("node", node), zap.Error(err))
		return
	}
	me := slices.Index(alive, ad.opts.Node)
	var mine, later []string
	for _, id := range ids {
		h := fnv.New32a()
		_, _ = h.Write([]byte(id))
		if int(h.Sum32()%uint32(len(alive))) != me {
			later = append(later, id)
		} else {
			mine = append(mine, id)
		}
	}
	var n atomic.Int64
	ad.adoptAll(st, node, mine, all, &n)
	if len(later) > 0 {
		select {
		case <-ad.stop:
			return
		case <-time.After(deadAfter):
		}
		if ad.members.isDead(node) { // not back: it would have them
			ad.adoptAll(st, node, later, all, &n)
		}
	}
	ad.log.Info("sessions of a dead node adopted", zap.String("node", node), zap.Int("sessions", len(ids)), zap.Int64("adopted_here", n.Load()))
}

// adoptWorkers is how many of a dead node's sessions a node adopts at
// once: each waits for registry round trips, and the replays of those
// rebuilt together are one request (replayInto).
const adoptWorkers = 32

// adoptAll adopts the sessions ids of node from all, adoptWorkers at a
// time, counting those adopted in n.
func (ad *adopter) adoptAll(st *state, node string, ids []string, all map[string]*replicaRecords, n *atomic.Int64) {
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(adoptWorkers, len(ids)) {
		wg.Go(func() {
			for id := range work {
				if ad.adopt(st, node, id, all[id]) {
					n.Add(1)
				}
			}
		})
	}
	for _, id := range ids {
		select {
		case work <- id:
		case <-ad.stop:
		}
	}
	close(work)
	wg.Wait()
}

// adopt takes clientID's session from the dead node's records recs, if
// the registry still names that node, with what was published for it
// since the node's marks, and reports whether it did.
func (ad *adopter) adopt(st *state, node, clientID string, recs *replicaRecords) bool {
	// One at a time with a claim of the id here (which may restore it).
	defer ad.reg.claims.serialize(clientID)()
	k := key(clientID)
	var e jetstream.KeyValueEntry
	err := ad.retry(replicaSyncTimeout, func() (err error) {
		gctx, gcancel := context.WithTimeout(context.Background(), stateTimeout)
		defer gcancel()
		e, err = st.clients.Get(gctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		return err
	})
	if err == nil && e == nil {
		return false // no entry: its session ended
	}
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		ad.warn("cannot read the client id registry: a dead node's session not adopted", zap.String("client_id", clientID), zap.Error(err))
		return false
	}
	if err != nil || heldBy(e.Value()) != node {
		return false // the client is back elsewhere (that node took the session), or its session ended
	}
	ok, err := ad.replay.install(st, node, clientID, recs, true)
	if err != nil || !ok {
		if err != nil {
			ad.log.Warn("a dead node's session not adopted", zap.String("client_id", clientID), zap.Error(err))
		}
		return false
	}
	refused := false
	err = ad.retry(replicaSyncTimeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
		defer cancel()
		// The dead node's entry names the session's owner: it stays.
		held, _ := parseEntry(e.Value())
		_, err := st.clients.Update(ctx, k, regEntry{node: ad.opts.Node, flag: "s", owner: held.owner}.value(), e.Revision())
		if err != nil && !isLeaderless(err) {
			refused = true // another write came first
			return nil
		}
		return err
	})
	if err != nil || refused {
		// Another node took it (its client connected, or another adopter;
		// or, after a lost answer, this node's own update): unless it is
		// this node, the copy here goes, will unsent. A read may lag
		// behind the write it follows (a replica answers): the leader's
		// answer to an update with the revision read says which.
		ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
		defer cancel()
		if e2, err2 := st.clients.Get(ctx, k); err2 != nil || heldBy(e2.Value()) != ad.opts.Node {
			ad.local.ExportSession(clientID, 0, true)
			return false
		}
	}
	ad.rep.dropReplica(st, node, clientID)
	ad.sessionsAdopted.Add(1)
	return true
}
