package loadtest

import "encoding/binary"

// Every message the generator publishes starts with a 16-byte header:
//
//	bytes 0–7   send time, Unix nanoseconds, big-endian
//	byte  8     headerMagic, to tell our messages from anyone else's
//	bytes 9–11  publisher number (global across agents), big-endian
//	bytes 12–15 the publisher's sequence number, from 0, big-endian
//
// The rest of the payload is filler. Payloads shorter than the header are
// sent as zeros and only counted, never timed or sequenced.
const (
	headerLen   = 16
	headerMagic = 0xA7
	maxPubs     = 1 << 24
)

// putHeader writes the header into b, which must hold headerLen bytes.
func putHeader(b []byte, sentNs int64, pub, seq uint32) {
	_ = b[headerLen-1]
	binary.BigEndian.PutUint64(b, uint64(sentNs))
	binary.BigEndian.PutUint32(b[8:], headerMagic<<24|pub&(maxPubs-1))
	binary.BigEndian.PutUint32(b[12:], seq)
}

// parseHeader reads the header at the start of b; ok is false when b is too
// short or does not carry the magic byte.
func parseHeader(b []byte) (sentNs int64, pub, seq uint32, ok bool) {
	if len(b) < headerLen || b[8] != headerMagic {
		return 0, 0, 0, false
	}
	return int64(binary.BigEndian.Uint64(b)), binary.BigEndian.Uint32(b[8:]) & (maxPubs - 1),
		binary.BigEndian.Uint32(b[12:]), true
}

// seqResult classifies one received sequence number.
type seqResult uint8

const (
	seqInOrder   seqResult = iota // new, and above everything seen so far (gaps before it are allowed)
	seqReordered                  // new, but below the highest seen: it overtook or was overtaken
	seqDuplicate                  // seen before
	seqLate                       // below the tracking window: assumed new, counted as reordered
)

// seqWindow is how far behind the highest sequence number a message may
// arrive and still be told apart from a duplicate: 16384 messages, 2 KiB of
// bits, allocated only once something arrives out of order.
const seqWindow = 1 << 14

// seqTracker follows one publisher's sequence numbers as seen by one
// receiver (a subscriber, or a shared-subscription group). In-order traffic
// costs two compares and an increment; the bitmap exists only after the
// first gap.
type seqTracker struct {
	next   uint32   // every number below next has been seen (or written off, see forced)
	high   uint32   // one past the highest number seen
	ring   []uint64 // bit s%seqWindow: s in [next, next+seqWindow) has been seen
	forced bool     // the window once slid past numbers never seen
}

func (t *seqTracker) bit(s uint32) (word int, mask uint64) {
	i := s % seqWindow
	return int(i / 64), 1 << (i % 64)
}

// observe records sequence number s and classifies it.
func (t *seqTracker) observe(s uint32) seqResult {
	if s < t.next {
		if t.forced {
			return seqLate
		}
		return seqDuplicate
	}
	if t.ring == nil {
		if s == t.next {
			t.next++
			t.high = t.next
			return seqInOrder
		}
		t.ring = make([]uint64, seqWindow/64)
	}
	if s-t.next >= seqWindow {
		t.slide(s - seqWindow + 1)
	}
	w, m := t.bit(s)
	if t.ring[w]&m != 0 {
		return seqDuplicate
	}
	t.ring[w] |= m
	res := seqReordered
	if s >= t.high {
		t.high = s + 1
		res = seqInOrder
	}
	for {
		w, m := t.bit(t.next)
		if t.ring[w]&m == 0 {
			break
		}
		t.ring[w] &^= m
		t.next++
	}
	return res
}

// slide moves next up to to, writing off the numbers in between that were
// never seen (they may still arrive: then they are late, not duplicates).
func (t *seqTracker) slide(to uint32) {
	if to-t.next >= seqWindow {
		clear(t.ring)
		t.next, t.forced = to, true
		return
	}
	for ; t.next < to; t.next++ {
		w, m := t.bit(t.next)
		if t.ring[w]&m == 0 {
			t.forced = true
		}
		t.ring[w] &^= m
	}
}

// seqCounts is what a receiver counts per message, by seqResult.
type seqCounts struct {
	Received   uint64 `json:"received"`   // every message with our header, duplicates included
	Unique     uint64 `json:"unique"`     // first copies: in order, reordered and late
	Duplicates uint64 `json:"duplicates"` // second and later copies
	Reordered  uint64 `json:"reordered"`  // first copies that arrived below the highest seen (late ones included)
}

func (c *seqCounts) add(r seqResult) {
	c.Received++
	switch r {
	case seqDuplicate:
		c.Duplicates++
		return
	case seqReordered, seqLate:
		c.Reordered++
	}
	c.Unique++
}
