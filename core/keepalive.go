package core

import (
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// kaWheel enforces the keepalive of parked connections, which have no
// reader waiting under a read deadline (park.go). It is a timing wheel of
// kaSlots slots, one tick (kaTick) each: a connection sits in exactly one
// slot, the one of its due tick, and costs one pointer there — a timer per
// connection was 130 bytes and a heap operation per park. A parked
// connection records its due tick (client.kaDue) each time it parks; when
// the wheel reaches the slot it moves on the ones that parked again since,
// keeps the ones that are reading (their next park sets a new due tick) and
// closes the ones still parked and due. A due tick beyond the wheel's span
// waits in the slot of the last tick it spans and is looked at again. A
// connection that ends leaves the wheel at once (remove), so the wheel
// never keeps a dead client alive.
type kaWheel struct {
	mu    sync.Mutex // guards slots and every client's kaSlot and kaPos
	slots [kaSlots][]*client
	spare []*client // the backing array of the slot last emptied, reused
	tick  atomic.Int64
	// expire closes a connection found parked and due; tests replace it.
	expire func(*client)
	stop   chan struct{}
	done   chan struct{}
}

const (
	kaSlots = 256
	kaTick  = 250 * time.Millisecond // a parked connection is closed at most this late
)

func newKAWheel() *kaWheel {
	w := &kaWheel{expire: (*client).keepAliveExpired, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// due is the tick after which a connection parked now with keepalive
// deadline d may be closed: never early, at most one tick late.
func (w *kaWheel) due(d time.Duration) int64 {
	return w.tick.Load() + int64((d+kaTick-1)/kaTick) + 1
}

// add puts c in the wheel; it stays until remove.
func (w *kaWheel) add(c *client, due int64) {
	w.mu.Lock()
	w.place(c, due)
	w.mu.Unlock()
}

// remove takes c out of the wheel, if it is in.
func (w *kaWheel) remove(c *client) {
	w.mu.Lock()
	if i := c.kaSlot; i >= 0 {
		s := w.slots[i]
		last := s[len(s)-1]
		s[c.kaPos], last.kaPos = last, c.kaPos
		s[len(s)-1] = nil
		w.slots[i] = s[:len(s)-1]
		c.kaSlot = -1
	}
	w.mu.Unlock()
}

// place puts c in the slot of its due tick, or of the last tick the wheel
// spans; w.mu is held.
func (w *kaWheel) place(c *client, due int64) {
	now := w.tick.Load()
	due = min(max(due, now+1), now+kaSlots-1)
	i := int32(due % kaSlots)
	c.kaSlot, c.kaPos = i, int32(len(w.slots[i]))
	w.slots[i] = append(w.slots[i], c)
}

func (w *kaWheel) run() {
	defer close(w.done)
	t := time.NewTicker(kaTick)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		w.advance()
	}
}

// advance moves to the next tick and handles its slot.
func (w *kaWheel) advance() {
	w.mu.Lock()
	now := w.tick.Add(1)
	i := now % kaSlots
	list := w.slots[i]
	w.slots[i] = w.spare[:0]
	var expired []*client
	for _, c := range list {
		c.kaSlot = -1
		switch due := c.kaDue.Load(); {
		case due > now:
			w.place(c, due) // parked again since, or due beyond the span
		case c.pstate.CompareAndSwap(parked, reading):
			expired = append(expired, c)
		default:
			// Reading now: its next park sets a new due tick.
			w.place(c, now+int64(c.keepAliveDeadline()/kaTick)+1)
		}
	}
	clear(list)
	w.spare = list[:0]
	w.mu.Unlock()
	for _, c := range expired {
		go w.expire(c)
	}
}

func (w *kaWheel) close() {
	close(w.stop)
	<-w.done
}

// keepAliveExpired closes a connection that stayed parked, silent, for 1.5
// times its keepalive [MQTT-3.1.2-22]; the wheel gave it the reading state.
func (c *client) keepAliveExpired() {
	c.log(zap.DebugLevel, "closing connection: keepalive timeout", zap.Duration("keepalive", c.keepAlive))
	c.close(CloseKeepAlive, codec.KeepAliveTimeout)
	c.finish()
}
