package bridge

import (
	"hash/maphash"
	"sync"
	"time"
)

// Origin tracking stops loops through a 3.1.1 remote that takes neither No
// Local (MQTT 5) nor Mosquitto's bridge bit: such a remote sends back what
// the bridge published whenever an in rule covers its topic. The bridge
// remembers a fingerprint (topic and payload) of every message it sent on
// such a topic, and drops a message from the remote that matches one, once
// per message sent. A message another client publishes with the same
// topic and payload within originTTL is dropped too: the price of a remote
// that cannot tell the bridge which messages are its own.
const (
	originTTL  = time.Minute
	originSize = 1 << 14 // fingerprints kept at most
)

type originCount struct{ live, used int32 }

type originEntry struct {
	h  uint64
	at int64 // Unix nanoseconds
}

// originTracker is the set of fingerprints, in a ring so the oldest goes
// first. Safe for concurrent use.
type originTracker struct {
	seed maphash.Seed

	mu sync.Mutex
	// counts holds, by fingerprint, the ring entries (live) and how many
	// of them came back already (used). Echoes come back in the order the
	// messages went, so the used ones are the oldest.
	counts map[uint64]originCount
	ring   [originSize]originEntry
	head   int // oldest entry
	n      int // entries in the ring
}

func newOriginTracker() *originTracker {
	return &originTracker{seed: maphash.MakeSeed(), counts: map[uint64]originCount{}}
}

func (o *originTracker) hash(topic, payload []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(o.seed)
	_, _ = h.Write(topic)
	_ = h.WriteByte(0) // no topic+payload split looks like another
	_, _ = h.Write(payload)
	return h.Sum64()
}

// sent remembers a message sent to the remote.
func (o *originTracker) sent(topic, payload []byte, now time.Time) {
	h := o.hash(topic, payload)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.expire(now.UnixNano())
	if o.n == originSize {
		o.forgetOldest()
	}
	o.ring[(o.head+o.n)%originSize] = originEntry{h: h, at: now.UnixNano()}
	o.n++
	c := o.counts[h]
	c.live++
	o.counts[h] = c
}

// echo reports whether a message from the remote is one the bridge sent,
// and forgets that sending.
func (o *originTracker) echo(topic, payload []byte, now time.Time) bool {
	h := o.hash(topic, payload)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.expire(now.UnixNano())
	c, ok := o.counts[h]
	if !ok || c.used == c.live {
		return false
	}
	c.used++ // the entry stays in the ring until it expires
	o.counts[h] = c
	return true
}

// expire forgets fingerprints older than originTTL; o.mu is held.
func (o *originTracker) expire(now int64) {
	for o.n > 0 && now-o.ring[o.head].at > int64(originTTL) {
		o.forgetOldest()
	}
}

// forgetOldest drops the oldest entry; o.mu is held.
func (o *originTracker) forgetOldest() {
	e := o.ring[o.head]
	c := o.counts[e.h]
	if c.live <= 1 {
		delete(o.counts, e.h)
	} else {
		c.live--
		c.used = max(c.used-1, 0)
		o.counts[e.h] = c
	}
	o.head = (o.head + 1) % originSize
	o.n--
}
