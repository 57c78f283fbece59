package auth

import (
	"time"

	"go.uber.org/zap"
)

// denyKind is what an ACL refusal refused; it labels the log line and the
// counter.
type denyKind uint8

const (
	denyPublish denyKind = iota
	denySubscribe
	denyWill
	denyRead // a message not delivered to a subscriber
	denyKinds
)

var denyKindNames = [denyKinds]string{"publish", "subscribe", "will", "delivery"}

func (k denyKind) String() string { return denyKindNames[k] }

// Each client gets at most denyLogLines refusal log lines per
// denyLogWindow; the first line of the next window says how many were
// left out. A misbehaving device cannot flood the log, and the operator
// still sees it.
const (
	denyLogWindow = time.Minute
	denyLogLines  = 5
)

// denyWindow is one client's refusal log lines in the current window.
type denyWindow struct {
	start      time.Time
	lines      int
	suppressed int
}

func newDenyLog(tableSize int) *limitTable[string, denyWindow] {
	return newLimitTable[string](tableSize, func(w *denyWindow, now time.Time) bool {
		return now.Sub(w.start) > denyLogWindow
	})
}

// denied counts an ACL refusal and logs it, rate-limited per client.
func (a *Auth) denied(kind denyKind, clientID, username, topic string, by *rule) {
	a.stats.denied[kind].Add(1)
	now := a.now()
	t := a.denyLog
	t.mu.Lock()
	w := t.getLocked(clientID, now, true)
	log, suppressed := true, 0
	if w != nil {
		if now.Sub(w.start) > denyLogWindow {
			suppressed = w.suppressed
			*w = denyWindow{start: now}
		}
		if w.lines >= denyLogLines {
			w.suppressed++
			log = false
		} else {
			w.lines++
		}
	}
	t.mu.Unlock()
	if !log {
		return
	}
	fields := []zap.Field{zap.String("kind", kind.String()), zap.String("client_id", clientID), zap.String("username", username),
		zap.String("topic", topic), zap.String("rule", by.describe())}
	if suppressed > 0 {
		fields = append(fields, zap.Int("suppressed_before", suppressed))
	}
	a.log.Info("acl: access refused", fields...)
}
