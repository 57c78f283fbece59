package cluster

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// interests are this node's NATS subscriptions for its broker's: one per
// subject of each filter its plain subscribers use, a queue subscription
// per shared group (queueName), all into the inbox. The changes core
// declares are applied in order by one goroutine (interestLoop), and
// AwaitInterest's rounds (barrier.go) confirm them with every other node.
type interests struct {
	*link
	inbox   *inbox
	members *membership // its pings end a round

	// ops are the interest changes not yet applied, in order; opsWake
	// wakes the goroutine that applies them (interestLoop).
	opsMu   sync.Mutex
	ops     []interestOp
	opsWake chan struct{}

	// subs maps each NATS subscription to the interest it serves;
	// filters maps an interest to its subscriptions. Written by
	// interestLoop, read by routeLoop.
	subsMu  sync.RWMutex
	subs    map[*nats.Subscription]interest
	filters map[interest][]*nats.Subscription

	bar                 barrier       // AwaitInterest's rounds
	declared, confirmed atomic.Uint64 // interest changes queued (Interest), and known to every node (barrier)
}

// interest is a filter this node's plain subscribers use (group ""), or
// a shared group on a filter.
type interest struct{ group, filter string }

type interestOp struct {
	interest
	on bool
	// done, when not nil, makes the op a marker: closed once the ops
	// before it are applied (syncInterest).
	done chan struct{}
}

// declare records that filter (group "") or the shared group group on
// filter is wanted on this node (on) or no longer (!on), and returns the
// change's number for AwaitInterest (Cluster.Interest). The number is taken under opsMu with the queueing, so numbers
// follow the queue's order.
func (in *interests) declare(group, filter string, on bool) uint64 {
	in.opsMu.Lock()
	in.ops = append(in.ops, interestOp{interest: interest{group, filter}, on: on})
	n := in.declared.Add(1)
	in.opsMu.Unlock()
	select {
	case in.opsWake <- struct{}{}:
	default:
	}
	return n
}

func (in *interests) queueOp(op interestOp) {
	in.opsMu.Lock()
	in.ops = append(in.ops, op)
	in.opsMu.Unlock()
	select {
	case in.opsWake <- struct{}{}:
	default:
	}
}

// syncInterest waits, up to timeout, until the interest changes declared
// so far are NATS subscriptions that this node's NATS server has (not
// yet necessarily the other servers, which learn them right after).
func (in *interests) syncInterest(timeout time.Duration) error {
	done := make(chan struct{})
	in.queueOp(interestOp{done: done})
	t := time.NewTimer(timeout)
	defer t.Stop()
	start := time.Now()
	select {
	case <-done:
	case <-in.stop:
		return errors.New("cluster: closing")
	case <-t.C:
		return errors.New("cluster: interest not applied in time")
	}
	return in.nc.FlushTimeout(max(timeout-time.Since(start), time.Millisecond))
}

// interestLoop applies the interest changes in order: a NATS
// subscription per subject of each filter — a queue subscription for a
// shared group — into the one inbox.
func (in *interests) interestLoop() {
	defer in.done.Done()
	for {
		select {
		case <-in.stop:
			return
		case <-in.opsWake:
		}
		in.opsMu.Lock()
		ops := in.ops
		in.ops = nil
		in.opsMu.Unlock()
		for _, op := range ops {
			if op.done != nil {
				close(op.done)
				continue
			}
			in.apply(op)
		}
	}
}

func (in *interests) apply(op interestOp) {
	in.subsMu.Lock()
	defer in.subsMu.Unlock()
	if !op.on {
		for _, s := range in.filters[op.interest] {
			_ = s.Unsubscribe()
			delete(in.subs, s)
		}
		delete(in.filters, op.interest)
		return
	}
	if _, ok := in.filters[op.interest]; ok {
		return
	}
	var subs []*nats.Subscription
	for _, subj := range FilterSubjects(in.opts.SubjectPrefix, op.filter) {
		if len(subj) > in.maxSubject {
			in.warn("filter too long for NATS: other nodes' messages do not reach it", zap.String("filter", op.filter))
			continue
		}
		var s *nats.Subscription
		var err error
		if op.group == "" {
			s, err = in.nc.ChanSubscribe(subj, in.inbox.ch)
		} else {
			s, err = in.nc.ChanQueueSubscribe(subj, queueName(op.group, op.filter), in.inbox.ch)
		}
		if err != nil {
			in.warn("cannot subscribe on NATS", zap.String("subject", subj), zap.Error(err))
			continue
		}
		// No limit but the inbox's: NATS must not drop for a burst on
		// one filter while the inbox has room.
		_ = s.SetPendingLimits(-1, -1)
		in.subs[s] = op.interest
		subs = append(subs, s)
	}
	in.filters[op.interest] = subs
}

// lookup returns the interest the NATS subscription s serves; false once
// it is unsubscribed.
func (in *interests) lookup(s *nats.Subscription) (interest, bool) {
	in.subsMu.RLock()
	defer in.subsMu.RUnlock()
	it, ok := in.subs[s]
	return it, ok
}

// count is the number of distinct interests (Stats.Interest).
func (in *interests) count() int {
	in.subsMu.RLock()
	defer in.subsMu.RUnlock()
	return len(in.filters)
}

// plainFilters are the filters of this node's plain subscribers.
func (in *interests) plainFilters() map[string]bool {
	filters := map[string]bool{}
	in.subsMu.RLock()
	for it := range in.filters {
		if it.group == "" {
			filters[it.filter] = true
		}
	}
	in.subsMu.RUnlock()
	return filters
}

// ownGroups lists the shared groups with members here, as "$share/G/F",
// sorted, at most maxStickyGroups.
func (in *interests) ownGroups() []string {
	var gs []string
	in.subsMu.RLock()
	for it := range in.filters {
		if it.group != "" {
			gs = append(gs, "$share/"+it.group+"/"+it.filter)
		}
	}
	in.subsMu.RUnlock()
	slices.Sort(gs)
	return gs[:min(len(gs), maxStickyGroups)]
}
