package core

// This file holds acknowledgements back until the store has made durable
// what they promise: a reader queues them (ackAfterSync) and releases them
// at its burst's end (releaseAcks); the syncer calls Sync once for many
// connections' batches (group commit), then hands each to its writer.

import (
	"sync"

	"github.com/xmq-io/xmq/codec"
)

// maxPendingAcks bounds the acknowledgements a reader holds for one Sync.
const maxPendingAcks = 256

// pendingAck is an acknowledgement waiting for the store: PUBACK, PUBREC,
// PUBREL or PUBCOMP.
type pendingAck struct {
	kind codec.Type
	id   uint16
	rc   codec.ReasonCode
}

// ackAfterSync queues an acknowledgement to go out once what this
// connection wrote to the store is durable (releaseAcks, once per read
// burst): many messages share one fsync. Acknowledgements keep their order
// [MQTT-4.6.0-2]. Reader only.
func (c *client) ackAfterSync(kind codec.Type, id uint16, rc codec.ReasonCode) {
	c.acks = append(c.acks, pendingAck{kind, id, rc})
	if len(c.acks) >= maxPendingAcks {
		c.releaseAcks()
	}
}

// releaseAcks hands the held acknowledgements on at the end of a read
// burst. When this connection wrote to the store since its last release
// (or earlier acknowledgements are still waiting), they go to the server's
// syncer, which sends them after its next Sync; the reader does not wait
// and goes on reading and routing. Otherwise they go to the writer now.
// Reader only.
func (c *client) releaseAcks() {
	if len(c.acks) == 0 && !c.needSync {
		return
	}
	if c.needSync || c.syncQueued.Load() > 0 {
		c.needSync = false
		c.syncQueued.Add(1)
		c.srv.syncer.submit(syncBatch{c: c, acks: c.acks})
		c.acks = make([]pendingAck, 0, 8)
		return
	}
	if c.queueAcks(c.acks) {
		c.deferWake(c) // written with the burst's deliveries (inline.go)
	}
	c.acks = c.acks[:0]
}

// releaseAcksWait is releaseAcks that returns only once every
// acknowledgement held so far is with the writer, for a control packet
// that must follow them and the store writes they cover (SUBACK, the
// writer's last flush before DISCONNECT). Reader only.
func (c *client) releaseAcksWait() {
	if len(c.dirty) > 0 {
		c.flushDirty() // the wait must not hold this burst's deliveries back
	}
	if len(c.acks) == 0 && !c.needSync && c.syncQueued.Load() == 0 {
		return
	}
	done := make(chan struct{})
	c.needSync = false
	c.syncQueued.Add(1)
	c.srv.syncer.submit(syncBatch{c: c, acks: c.acks, done: done})
	c.acks = nil
	<-done
}

// sendAcks hands acknowledgements to the writer.
func (c *client) sendAcks(acks []pendingAck) {
	if c.queueAcks(acks) {
		c.wake()
	}
}

// queueAcks puts acknowledgements into the control packets waiting to be
// written, and reports whether there were any.
func (c *client) queueAcks(acks []pendingAck) bool {
	if len(acks) == 0 {
		return false
	}
	c.mu.Lock()
	for _, a := range acks {
		c.ctrl = (&codec.Ack{Kind: a.kind, PacketID: a.id, ReasonCode: a.rc}).Append(c.ctrl, c.version)
	}
	c.mu.Unlock()
	c.srv.stats.ctrlOut.Add(int64(len(acks)))
	return true
}

// refuseAcks turns acknowledgements held for a Sync that failed into
// refusals, and reports whether they may be sent: an MQTT 5 publisher gets
// an error code instead of each PUBACK and PUBREC that promised
// durability; an MQTT 3 publisher, which has no such code, is disconnected
// without them.
func (c *client) refuseAcks(acks []pendingAck, err error) bool {
	if c.version != codec.V5 {
		c.close(CloseStoreError, 0)
		return false
	}
	rc := codec.UnspecifiedError
	if isNoSpace(err) {
		rc = codec.QuotaExceeded
	}
	for i := range acks {
		a := &acks[i]
		if (a.kind == codec.PUBACK || a.kind == codec.PUBREC) && !a.rc.IsError() {
			a.rc = rc
			if a.kind == codec.PUBREC {
				c.sess.forgetInbound(a.id) // a refused QoS 2 flow ends at PUBREC
			}
		}
	}
	return true
}

// syncBatch is one connection's acknowledgements waiting for a Sync.
type syncBatch struct {
	c    *client
	acks []pendingAck
	done chan struct{} // closed once handed on, for releaseAcksWait
}

// syncer is the server's group commit: readers submit their held
// acknowledgements without waiting; one goroutine calls Sync once for
// everything submitted meanwhile, then hands each batch to its writer, in
// submission order, so each connection's acknowledgements keep theirs.
type syncer struct {
	srv     *Server
	mu      sync.Mutex
	queue   []syncBatch
	stopped bool          // Shutdown is over: batches are dropped
	wake    chan struct{} // cap 1
	stop    chan struct{}
	done    chan struct{}
}

func newSyncer(srv *Server) *syncer {
	return &syncer{srv: srv, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

func (y *syncer) submit(b syncBatch) {
	y.mu.Lock()
	if y.stopped {
		y.mu.Unlock()
		b.c.syncQueued.Add(-1)
		if b.done != nil {
			close(b.done)
		}
		return
	}
	y.queue = append(y.queue, b)
	y.mu.Unlock()
	select {
	case y.wake <- struct{}{}:
	default:
	}
}

// run is the syncer goroutine; after stop it drains what is queued.
func (y *syncer) run() {
	defer close(y.done)
	var batch []syncBatch
	for {
		select {
		case <-y.wake:
		case <-y.stop:
			y.round(batch)
			y.mu.Lock()
			y.stopped = true
			y.mu.Unlock()
			y.round(nil)
			return
		}
		batch = y.round(batch)
	}
}

// round syncs once for every queued batch and hands them on; it returns
// the slice for reuse.
func (y *syncer) round(batch []syncBatch) []syncBatch {
	y.mu.Lock()
	batch, y.queue = y.queue, batch[:0]
	y.mu.Unlock()
	if len(batch) == 0 {
		return batch
	}
	err := y.srv.syncStore()
	if err != nil {
		y.srv.storeError("store: sync failed; refusing the messages it held", err)
	}
	for i := range batch {
		b := &batch[i]
		if err == nil || b.c.refuseAcks(b.acks, err) {
			b.c.sendAcks(b.acks)
		}
		b.c.syncQueued.Add(-1)
		if b.done != nil {
			close(b.done)
		}
		*b = syncBatch{}
	}
	return batch
}
