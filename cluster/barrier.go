package cluster

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// interestWait bounds how long AwaitInterest holds a SUBACK: past it (a
// node that does not answer) the subscription is acknowledged anyway,
// and a message published on that node meanwhile may miss it.
const interestWait = time.Second

// barrier coalesces AwaitInterest calls: one round (interest flushed to
// this node's NATS server, then a ping answered by every other node)
// serves every call made before it started, so a storm of subscriptions
// costs a round per batch, not per SUBSCRIBE.
type barrier struct {
	mu      sync.Mutex
	waiting []chan struct{}
	running bool
}

// AwaitInterest returns once the interest change numbered seq (Interest's
// result) is known to every other node's NATS server, so that a message
// published on any node after it reaches this node's new subscriber, or
// after interestWait; core.Cluster's contract. The broker calls it before
// a SUBACK, with the number of the change that announced each filter:
// a client that subscribes and then has a request published on another
// node (request/response) gets the answer. A change known already costs
// an atomic load.
func (c *Cluster) AwaitInterest(seq uint64) { c.interests.await(seq) }

// await is AwaitInterest.
func (in *interests) await(seq uint64) {
	if in.confirmed.Load() >= seq {
		return
	}
	ch := make(chan struct{})
	in.bar.mu.Lock()
	in.bar.waiting = append(in.bar.waiting, ch)
	start := !in.bar.running
	in.bar.running = true
	in.bar.mu.Unlock()
	if start {
		in.goUnlessClosed(in.barrierLoop)
	}
	t := time.NewTimer(interestWait)
	defer t.Stop()
	select {
	case <-ch:
	case <-in.stop:
	case <-t.C:
		in.warn("a subscription is acknowledged before every node knows it: a message published on a node that is slow to answer may miss it")
	}
}

// barrierLoop runs rounds while calls wait.
func (in *interests) barrierLoop() {
	for {
		in.bar.mu.Lock()
		w := in.bar.waiting
		in.bar.waiting = nil
		if len(w) == 0 {
			in.bar.running = false
			in.bar.mu.Unlock()
			return
		}
		in.bar.mu.Unlock()
		// The changes the callers wait for were queued before they
		// waited: the marker syncInterest queues comes after them, and
		// upto counts them.
		upto := in.declared.Load()
		err := in.syncInterest(interestWait)
		if err != nil {
			in.warn("interest not flushed to NATS in time", zap.Error(err))
		}
		if in.members.ping(interestWait) && err == nil {
			for old := in.confirmed.Load(); old < upto && !in.confirmed.CompareAndSwap(old, upto); old = in.confirmed.Load() {
			}
		}
		for _, ch := range w {
			close(ch)
		}
	}
}
