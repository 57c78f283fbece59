package cluster

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Takeovers are ordered by when a claim began (Claim, mayTake): a
// connection on a node that was frozen (SIGSTOP, a paused VM, a stalled
// host) whose CONNECT waited in the socket meanwhile must not take over
// the connection its client made elsewhere since. The node cannot see
// when the bytes arrived, only that it was frozen: a claim that begins
// during a freeze not yet noticed, or within freezeGrace after one,
// counts as begun when the freeze began, so that it loses to anything
// claimed while the node was frozen.

const (
	freezeTick  = 100 * time.Millisecond
	freezeGap   = time.Second     // a tick this late means the node was frozen
	freezeGrace = 2 * time.Second // how long CONNECTs read after a freeze count as older
	// claimSlack is how much older than the connection it would replace
	// a claim must have begun to lose (mayTake): more than the nodes'
	// clocks differ by, less than a freeze that lets a client give up and
	// reconnect elsewhere.
	claimSlack = time.Second
)

// freezes are the ticks of freezeLoop and the last freeze, in Unix
// nanoseconds.
type freezes struct {
	tick        atomic.Int64
	from, until atomic.Int64
}

// freezeLoop ticks, and notes a tick that comes freezeGap late as a
// freeze.
func (rg *registry) freezeLoop() {
	defer rg.done.Done()
	t := time.NewTicker(freezeTick)
	defer t.Stop()
	rg.freeze.tick.Store(time.Now().UnixNano())
	for {
		select {
		case <-rg.stop:
			return
		case <-t.C:
		}
		now := time.Now().UnixNano()
		last := rg.freeze.tick.Swap(now)
		if gap := time.Duration(now - last); gap > freezeGap {
			rg.freeze.from.Store(last)
			rg.freeze.until.Store(now)
			rg.log.Warn("this node was frozen for "+gap.Round(time.Millisecond).String()+
				": connections read now count as made before it, and lose to those made elsewhere meanwhile",
				zap.Duration("frozen_for", gap))
		}
	}
}

// claimTime is when a claim beginning now began, for the order of
// takeovers.
func (rg *registry) claimTime() time.Time {
	now := time.Now()
	if last := rg.freeze.tick.Load(); last != 0 && now.UnixNano()-last > int64(freezeGap) {
		return time.Unix(0, last) // frozen until a moment ago: freezeLoop has not run yet
	}
	if until := rg.freeze.until.Load(); until != 0 && now.UnixNano()-until < int64(freezeGrace) {
		return time.Unix(0, rg.freeze.from.Load())
	}
	return now
}
