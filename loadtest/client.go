package loadtest

import (
	"bufio"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xmq-io/xmq/codec"
)

// client is one simulated MQTT client: a publisher, a subscriber, or both
// on one connection (p2p -loop). Like the broker, each connection has one
// read loop and one write loop: the read loop never writes, it appends the
// acknowledgements it owes to ctl and wakes the write loop, which sends
// them with the publishes in one buffered write.
type client struct {
	w     *Worker
	slot  int // index within the worker: picks the recorder shard
	id    string
	clean bool
	pub   *pubRole // nil for a subscriber only
	sub   *subRole // nil for a publisher only

	// ctl holds encoded packets for the write loop (acks, PUBREL, SUBSCRIBE,
	// PINGREQ). mu guards ctl; the write loop swaps it with spare.
	mu         sync.Mutex
	ctl        []byte
	spare      []byte
	ctlPending atomic.Bool
	notify     chan struct{} // cap 1: the write loop has something to do

	suback  chan error // cap 1: the read loop saw SUBACK
	pings   atomic.Uint64
	pongs   atomic.Uint64
	timer   *time.Timer // the write loop's wake-up; owned by it
	lastOut time.Time   // when the write loop last sent bytes; owned by it

	conns int // connections made (churn counts reconnects); owned by serve
}

// pubRole is a client's publishing side.
type pubRole struct {
	num     uint32 // global publisher number, in every payload header
	qos     byte
	version byte
	pkt     codec.Publish // reused for every message; Payload is payload
	payload []byte
	size    int     // encoded size of one PUBLISH
	rate    float64 // messages per second, 0 = unlimited
	phase   time.Duration
	seq     uint32 // next sequence number; owned by the write loop
	// The inflight window: at most inflight messages unacknowledged. Packet
	// ids cycle through 1..len(sentAt)-1, twice the window, skipping any
	// still outstanding, so no channel or lock sits on the hot path.
	inflight int64
	lowWater int64          // a blocked writer resumes once this many ids are free
	nextID   uint16         // owned by the write loop
	sentAt   []atomic.Int64 // by packet id: send time while outstanding, 0 when free
	blocked  atomic.Bool    // the write loop waits for the window to drain
	finished bool           // the write loop has stopped publishing and sent its barrier PINGREQ
	barrier  atomic.Uint64  // pings sent when finishing; the pong for it ends the run

	published   atomic.Uint64
	acked       atomic.Uint64
	outstanding atomic.Int64
	finishing   atomic.Bool
	done        chan struct{}
	doneOnce    sync.Once
	doneAt      atomic.Int64 // Unix ns when done closed
}

// subRole is a client's subscribing side.
type subRole struct {
	filter   []byte
	qos      byte
	trackers *trackerSet
	counts   seqCounts // owned by the read loop
	stale    uint64    // sent before this run began (a persistent session's leftovers)
	foreign  uint64    // not ours, or from a publisher this receiver does not track
	skew     uint64    // received "before" it was sent: clocks disagree

	received atomic.Uint64 // mirrors for the progress ticker
	unique   atomic.Uint64
	lastNs   atomic.Int64
}

func (p *pubRole) finish() {
	p.doneOnce.Do(func() {
		p.doneAt.Store(time.Now().UnixNano())
		close(p.done)
	})
}

// queue appends an encoded packet for the write loop and wakes it.
func (c *client) queue(b []byte) {
	c.mu.Lock()
	c.ctl = append(c.ctl, b...)
	c.mu.Unlock()
	c.ctlPending.Store(true)
	c.wake()
}

// queueAck queues PUBACK, PUBREC, PUBREL or PUBCOMP for id without allocating.
func (c *client) queueAck(kind codec.Type, id uint16) {
	var flags byte
	if kind == codec.PUBREL {
		flags = 0x02
	}
	c.mu.Lock()
	c.ctl = append(c.ctl, byte(kind)<<4|flags, 2, byte(id>>8), byte(id))
	c.mu.Unlock()
	c.ctlPending.Store(true)
	c.wake()
}

func (c *client) wake() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// writeCtl moves the queued control packets into bw.
func (c *client) writeCtl(bw *bufio.Writer) error {
	if !c.ctlPending.Load() {
		return nil
	}
	c.mu.Lock()
	b := c.ctl
	c.ctl, c.spare = c.spare[:0], nil
	c.ctlPending.Store(false)
	c.mu.Unlock()
	_, err := bw.Write(b)
	c.mu.Lock()
	c.spare = b[:0]
	c.mu.Unlock()
	return err
}

// errStopped ends a connection's loops when the run is over.
var errStopped = errors.New("loadtest: stopped")

// readLoop reads until the connection ends. It owns m.rd.
func (c *client) readLoop(m *mconn) error {
	for {
		p, err := m.rd.ReadPacket()
		if err != nil {
			return err
		}
		switch p := p.(type) {
		case *codec.Publish:
			if c.sub == nil {
				c.w.errs.add("unexpected PUBLISH", nil)
				continue
			}
			c.onPublish(p, time.Now().UnixNano())
			switch p.QoS {
			case 1:
				c.queueAck(codec.PUBACK, p.PacketID)
			case 2:
				c.queueAck(codec.PUBREC, p.PacketID)
			}
		case *codec.Ack:
			c.onAck(p)
		case *codec.Suback:
			var err error
			for _, rc := range p.ReasonCodes {
				if rc.IsError() {
					err = &SubackError{Code: rc}
				}
			}
			select {
			case c.suback <- err:
			default:
			}
		case *codec.Pingresp:
			c.pongs.Add(1)
			if c.pub != nil {
				c.pub.maybeDone(c)
			}
		case *codec.Disconnect:
			return &DisconnectError{Code: p.ReasonCode}
		case *codec.Unsuback:
		default:
			return errUnexpected
		}
	}
}

// SubackError is a SUBACK that refused a subscription.
type SubackError struct{ Code codec.ReasonCode }

func (e *SubackError) Error() string { return "SUBACK " + e.Code.String() }

// onPublish accounts for one received message: header, sequence, latency.
// It runs on the read loop for every message and allocates nothing.
func (c *client) onPublish(p *codec.Publish, now int64) {
	s := c.sub
	s.received.Add(1)
	sent, pub, seq, ok := parseHeader(p.Payload)
	if !ok {
		s.foreign++
		return
	}
	if sent < c.w.notBefore {
		s.stale++
		return
	}
	res, ok := s.trackers.observe(pub, seq)
	if !ok {
		s.foreign++
		return
	}
	s.counts.add(res)
	if res == seqDuplicate {
		return
	}
	s.unique.Store(s.counts.Unique)
	s.lastNs.Store(now)
	lat := now - sent
	if lat < 0 {
		s.skew++
		lat = 0
	}
	c.w.lat.Record(c.slot, lat)
}

// onAck handles the acknowledgements of the QoS 1 and 2 flows, both as
// publisher (PUBACK, PUBREC, PUBCOMP) and as subscriber (PUBREL).
func (c *client) onAck(a *codec.Ack) {
	switch a.Kind {
	case codec.PUBREL:
		c.queueAck(codec.PUBCOMP, a.PacketID)
		return
	case codec.PUBREC:
		if c.pub == nil {
			c.w.errs.add("unexpected PUBREC", nil)
			return
		}
		if !a.ReasonCode.IsError() {
			c.queueAck(codec.PUBREL, a.PacketID)
			return
		}
	}
	p := c.pub
	if p == nil || int(a.PacketID) >= len(p.sentAt) {
		c.w.errs.add("unexpected "+a.Kind.String(), nil)
		return
	}
	sent := p.sentAt[a.PacketID].Swap(0)
	if sent == 0 {
		c.w.errs.add("unexpected "+a.Kind.String(), nil)
		return
	}
	if a.ReasonCode.IsError() {
		c.w.errs.add(a.Kind.String()+" "+a.ReasonCode.String(), nil)
	} else {
		p.acked.Add(1)
	}
	c.w.ack.Record(c.slot, time.Now().UnixNano()-sent)
	if n := p.outstanding.Add(-1); p.blocked.Load() && n <= p.inflight-p.lowWater {
		p.blocked.Store(false)
		c.wake()
	}
	p.maybeDone(c)
}

// maybeDone ends the publisher once it has finished publishing, every
// message is acknowledged and the barrier PINGREQ has come back, which
// means the broker has read everything it was sent.
func (p *pubRole) maybeDone(c *client) {
	if p.finishing.Load() && p.outstanding.Load() == 0 && c.pongs.Load() >= p.barrier.Load() {
		p.finish()
	}
}

// writeLoop writes until the run stops or the connection fails. It owns
// m.bw, the publisher's sequence numbers and the client's timer.
func (c *client) writeLoop(ctx context.Context, m *mconn, dead <-chan struct{}, churn <-chan time.Time) error {
	bw := m.bw
	w := c.w
	ka := w.keepAlive / 2
	c.lastOut = time.Now()
	for {
		if err := c.writeCtl(bw); err != nil {
			return err
		}
		blocked := false // the publisher waits for its window to drain
		var wakeAt time.Time
		if p := c.pub; p != nil && !p.finished && w.started.Load() {
			if w.pubStop.Load() {
				if err := c.finishPublishing(bw); err != nil {
					return err
				}
				continue
			}
			due := p.due(time.Now(), w.startTime)
			for due > 0 {
				var id uint16
				if p.qos > 0 {
					if blocked = p.windowFull(); blocked {
						break
					}
					id = p.takeID()
				}
				if err := c.writePublish(bw, id); err != nil {
					return err
				}
				due--
				if c.ctlPending.Load() {
					if err := c.writeCtl(bw); err != nil {
						return err
					}
				}
				if w.pubStop.Load() {
					break
				}
			}
			if !blocked && p.rate == 0 && !w.pubStop.Load() {
				continue // unlimited: keep going; bufio flushes when full
			}
			if p.rate > 0 {
				wakeAt = p.nextAt(w.startTime)
			}
		}
		if bw.Buffered() > 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
			c.lastOut = time.Now()
		}
		// Keepalive: a client that has sent nothing for half the interval pings.
		if ka > 0 {
			if since := time.Since(c.lastOut); since >= ka {
				c.pings.Add(1)
				if _, err := bw.Write(pingreq[:]); err != nil {
					return err
				}
				continue
			}
			if ping := c.lastOut.Add(ka); wakeAt.IsZero() || ping.Before(wakeAt) {
				wakeAt = ping
			}
		}
		var timer <-chan time.Time
		if !wakeAt.IsZero() {
			c.timer.Reset(time.Until(wakeAt))
			timer = c.timer.C
		}
		var start, stop <-chan struct{}
		if c.pub != nil && !c.pub.finished {
			if w.started.Load() {
				stop = w.stopCh
			} else {
				start = w.startCh
			}
		}
		select {
		case <-c.notify:
		case <-timer:
		case <-start:
		case <-stop:
		case <-w.closing:
			c.timer.Stop()
			return errStopped
		case <-dead:
			c.timer.Stop()
			return errDead
		case <-churn:
			c.timer.Stop()
			return errChurn
		case <-ctx.Done():
			c.timer.Stop()
			return ctx.Err()
		}
		c.timer.Stop()
	}
}

var (
	pingreq    = [2]byte{byte(codec.PINGREQ) << 4, 0}
	disconnect = [2]byte{byte(codec.DISCONNECT) << 4, 0}
)

// windowFull reports whether the inflight window is full. When it is, it
// marks the publisher blocked, so that the read loop wakes the write loop
// once lowWater ids are free again: a burst of acks costs one wake-up and
// one write, not one each. The check after setting blocked closes the race
// with an ack arriving in between.
func (p *pubRole) windowFull() bool {
	if p.outstanding.Load() < p.inflight {
		return false
	}
	p.blocked.Store(true)
	if p.outstanding.Load() <= p.inflight-p.lowWater {
		p.blocked.Store(false)
		return false
	}
	return true
}

// takeID returns the next free packet id. There are twice as many ids as
// the window holds, so the next one is almost always free.
func (p *pubRole) takeID() uint16 {
	for {
		p.nextID++
		if int(p.nextID) >= len(p.sentAt) {
			p.nextID = 1
		}
		if p.sentAt[p.nextID].Load() == 0 {
			return p.nextID
		}
	}
}

// finishPublishing sends the barrier PINGREQ after the last message.
func (c *client) finishPublishing(bw *bufio.Writer) error {
	p := c.pub
	p.finished = true
	p.barrier.Store(c.pings.Add(1))
	p.finishing.Store(true)
	_, err := bw.Write(pingreq[:])
	p.maybeDone(c)
	return err
}

// due is how many messages the publisher should have sent by now and has
// not: unlimited publishers send in batches of 64 between checks.
func (p *pubRole) due(now, start time.Time) int {
	if p.rate == 0 {
		return 64
	}
	elapsed := now.Sub(start) - p.phase
	if elapsed < 0 {
		return 0
	}
	should := uint64(elapsed.Seconds()*p.rate) + 1
	if should <= uint64(p.seq) {
		return 0
	}
	return int(min(should-uint64(p.seq), 1024))
}

// nextAt is when the next message falls due.
func (p *pubRole) nextAt(start time.Time) time.Time {
	return start.Add(p.phase + time.Duration(float64(p.seq)/p.rate*float64(time.Second)))
}

// writePublish appends one PUBLISH to bw: header stamped, sequence
// numbered, written straight into the buffer's free space. No allocation.
func (c *client) writePublish(bw *bufio.Writer, id uint16) error {
	p := c.pub
	now := time.Now().UnixNano()
	if len(p.payload) >= headerLen {
		putHeader(p.payload, now, p.num, p.seq)
	}
	p.pkt.PacketID = id
	if p.qos > 0 {
		p.outstanding.Add(1)
		p.sentAt[id].Store(now)
	}
	if bw.Available() < p.size && bw.Buffered() > 0 {
		if err := bw.Flush(); err != nil {
			return err
		}
		c.lastOut = time.Now()
	}
	var err error
	if buf := bw.AvailableBuffer(); cap(buf) >= p.size {
		_, err = bw.Write(p.pkt.Append(buf, p.version))
	} else {
		_, err = bw.Write(p.pkt.Append(make([]byte, 0, p.size), p.version)) // larger than the buffer
	}
	if err != nil {
		return err
	}
	p.seq++
	p.published.Store(uint64(p.seq))
	return nil
}
