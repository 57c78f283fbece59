package core

import "github.com/xmq-io/xmq/codec"

// Writing in place. At high rates a subscriber's writer goroutine gathers
// many deliveries into one write, which is what makes fan-out fast. At low
// rates there is nothing to gather: each delivery cost a hand-off to a
// writer goroutine and back. So a reader routing a PUBLISH does not wake
// the subscribers' writers at once: it notes them (deferWake) and, when its
// burst ends (the next read may wait), either writes what each has queued
// itself, with a write that never waits, or — if the burst was large, so
// writers will have batches to gather — wakes their writers as before. A
// socket that does not take everything leaves the rest to a writer.
// Mosquitto writes in place always; NATS in place when the socket takes it.

// inlineBurst is the most packets a reader's burst may hold for it to
// write its subscribers' deliveries itself. Beyond it the subscribers'
// writers gather more than one burst's worth each.
const inlineBurst = 4

// deferWake wakes sub's writer at the end of this reader's burst, or has
// the reader write for it then (flushDirty); c is the reader's client, and
// sub may be c itself: its replies (reply) are written the same way.
func (c *client) deferWake(sub *client) {
	if c.burst > inlineBurst || sub.raw == nil && !sub.inPlace || sub.writing.Load() {
		sub.wake() // a large burst, a conn that cannot write in place, or a writer already running
		return
	}
	// One reader notes a subscriber at a time; another that finds it noted
	// leaves it to that one, whose burst end writes everything queued.
	if sub.flushQueued.CompareAndSwap(false, true) {
		c.dirty = append(c.dirty, sub)
	}
}

// flushDirty writes, or wakes the writers of, the subscribers this
// reader's burst gave deliveries to. It runs before the reader may wait.
func (c *client) flushDirty() {
	inline := c.burst <= inlineBurst
	for i, sub := range c.dirty {
		c.dirty[i] = nil
		sub.flushQueued.Store(false)
		if inline && sub.writing.CompareAndSwap(false, true) {
			sub.writeInline()
		} else {
			sub.wake()
		}
	}
	c.dirty = c.dirty[:0]
}

// writeInline writes what c has to send, on the caller's goroutine, with a
// write that never waits; the caller has taken c.writing. What the socket
// does not take, or a close under way, goes to a writer job.
func (c *client) writeInline() {
	if !c.closing.Load() {
		// With more left (a full batch, a retained stream) a writer goes
		// on once buf is written, as with what the socket did not take.
		buf, more := c.collect(false)
		if (len(buf) == 0 || c.writeOut(buf, false, true) && c.ws.tail == nil) && !more {
			c.putScratch()
			c.writing.Store(false)
			// A wake meanwhile found c.writing taken and started nothing.
			if !c.pending.Load() && !c.closing.Load() || !c.writing.CompareAndSwap(false, true) {
				return
			}
		}
	}
	c.pending.Store(true) // the writer writes a tail before anything else
	c.srv.workers.run(job{c, jobWrite})
}

// reply queues a control packet answering the reader's own packet
// (PINGRESP, SUBACK, a PUBACK that waits for no Sync) to go out with the
// burst's other writes, before the reader's next read. Woken writers
// wrote it only after that read had found the socket empty and the reader
// had parked: two system calls and a hand-off between a quiet client's
// packet and its answer. Reader only.
func (c *client) reply(p codec.Packet) {
	c.mu.Lock()
	c.ctrl = p.Append(c.ctrl, c.version)
	c.mu.Unlock()
	c.srv.stats.ctrlOut.Add(1)
	c.deferWake(c)
}
