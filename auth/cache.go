package auth

import (
	"hash/maphash"
	"strings"
	"sync"
)

// topicCache remembers a V per (client id, user name, topic, access) —
// write for PUBLISH and wills, read for deliveries, subscribe for the HTTP
// service's SUBSCRIBE answers — so the message path costs a map lookup,
// not a rule scan or a request. It is sharded by client id: a client's
// reader goroutine is the only one asking about that client, so its
// shard's lock is rarely contended. Each shard holds at most max entries;
// a full shard drops an arbitrary entry (Go's map iteration starts at a
// random place) to make room.
type topicCache[V any] struct {
	seed   maphash.Seed
	max    int // per shard
	shards [cacheShards]cacheShard[V]
}

// decisionCache holds the ACL file's decisions. A cache belongs to one ACL
// generation: a reload builds a new one, which is how old decisions are
// invalidated.
type decisionCache = topicCache[decision]

func newDecisionCache(size int) *decisionCache { return newTopicCache[decision](size) }

const cacheShards = 64

type cacheKey struct {
	clientID, username, topic string
	acc                       access
}

// decision is a cached outcome and the rule that made it (nil: no rule
// allows it), which a refusal's log line names.
type decision struct {
	ok bool
	by *rule
}

type cacheShard[V any] struct {
	mu sync.RWMutex
	m  map[cacheKey]V
	_  [40]byte // keep shards on separate cache lines
}

func newTopicCache[V any](size int) *topicCache[V] {
	c := &topicCache[V]{seed: maphash.MakeSeed(), max: max(size/cacheShards, 1)}
	for i := range c.shards {
		c.shards[i].m = make(map[cacheKey]V)
	}
	return c
}

func (c *topicCache[V]) shard(clientID string) *cacheShard[V] {
	return &c.shards[maphash.String(c.seed, clientID)%cacheShards]
}

// get returns a cached value. The strings may alias buffers the caller
// reuses: get keeps none of them.
func (c *topicCache[V]) get(clientID, username, topic string, acc access) (d V, ok bool) {
	s := c.shard(clientID)
	s.mu.RLock()
	d, ok = s.m[cacheKey{clientID, username, topic, acc}]
	s.mu.RUnlock()
	return d, ok
}

// put stores a value, copying the strings (core's topic aliases its read
// buffer).
func (c *topicCache[V]) put(clientID, username, topic string, acc access, d V) {
	s := c.shard(clientID)
	k := cacheKey{strings.Clone(clientID), strings.Clone(username), strings.Clone(topic), acc}
	s.mu.Lock()
	if len(s.m) >= c.max {
		for old := range s.m {
			delete(s.m, old)
			break
		}
	}
	s.m[k] = d
	s.mu.Unlock()
}

// len counts the cached values.
func (c *topicCache[V]) len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}
