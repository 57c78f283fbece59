package core

import (
	"sync"
	"time"

	"xmq/codec"
)

// retainedStore holds the last retained message of each topic. Lookups for
// a wildcard subscription scan every topic; subscriptions are rare next to
// publishes, and the scan holds only a read lock.
type retainedStore struct {
	mu   sync.RWMutex
	msgs map[string]*Message
}

func newRetainedStore() *retainedStore { return &retainedStore{msgs: map[string]*Message{}} }

// set replaces the topic's retained message; an empty payload clears it
// and is itself not retained [MQTT-3.3.1-6] [MQTT-3.3.1-7].
func (r *retainedStore) set(m *Message) {
	r.mu.Lock()
	if len(m.Payload) == 0 {
		delete(r.msgs, m.Topic)
	} else {
		r.msgs[m.Topic] = m
	}
	r.mu.Unlock()
}

func (r *retainedStore) count() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.msgs)
}

// match returns the unexpired retained messages whose topic matches filter.
func (r *retainedStore) match(filter string, now time.Time) []*Message {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if !codec.HasWildcard(unsafeBytes(filter)) {
		if m := r.msgs[filter]; m != nil && !m.expired(now) {
			return []*Message{m}
		}
		return nil
	}
	var out []*Message
	for t, m := range r.msgs {
		if codec.Match(unsafeBytes(filter), unsafeBytes(t)) && !m.expired(now) {
			out = append(out, m)
		}
	}
	return out
}

// all returns every retained message, for the admin views.
func (r *retainedStore) all() []*Message {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Message, 0, len(r.msgs))
	for _, m := range r.msgs {
		out = append(out, m)
	}
	return out
}
