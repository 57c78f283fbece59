package core

import "time"

// rateLimiter is a client's token bucket for messages and bytes per second,
// owned by the reader. Its burst is one second's worth.
type rateLimiter struct {
	msgRate, byteRate float64 // 0 = unlimited
	msgs, bytes       float64 // tokens; may go negative (debt) for QoS 1/2
	last              time.Time
}

func (l *rateLimiter) init(msgRate, byteRate int) {
	l.msgRate, l.byteRate = float64(msgRate), float64(byteRate)
	l.msgs, l.bytes = l.msgRate, l.byteRate
	l.last = time.Now()
}

func (l *rateLimiter) limited() bool { return l != nil && (l.msgRate > 0 || l.byteRate > 0) }

// admit accounts for a message of n bytes. A message over the rate is
// refused when it may be dropped (QoS 0); otherwise it is admitted into
// debt and wait says how long the reader should pause so that the client's
// average stays at the rate: pausing holds back the acknowledgement and the
// next read, so TCP slows the publisher without any buffering here.
func (l *rateLimiter) admit(n int, droppable bool, now time.Time) (ok bool, wait time.Duration) {
	dt := now.Sub(l.last).Seconds()
	l.last = now
	if l.msgRate > 0 {
		l.msgs = min(l.msgRate, l.msgs+dt*l.msgRate)
	}
	if l.byteRate > 0 {
		l.bytes = min(l.byteRate, l.bytes+dt*l.byteRate)
	}
	over := l.msgRate > 0 && l.msgs < 1 || l.byteRate > 0 && l.bytes < float64(n)
	if over && droppable {
		return false, 0
	}
	var w float64
	if l.msgRate > 0 {
		l.msgs--
		w = max(w, -l.msgs/l.msgRate)
	}
	if l.byteRate > 0 {
		l.bytes -= float64(n)
		w = max(w, -l.bytes/l.byteRate)
	}
	return true, time.Duration(w * float64(time.Second))
}
