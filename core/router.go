package core

import (
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
)

// subOpts are the options of one subscription.
type subOpts struct {
	qos     byte
	noLocal bool
	rap     bool // retain as published
	rh      byte // retain handling
	subID   uint32
	v5      bool    // the subscriber spoke MQTT 5 when it subscribed
	acl     *subACL // nil without an Authorizer
}

// subscriber is one session subscribed at a node.
type subscriber struct {
	s    *session
	opts subOpts
}

// node is one level of the topic tree.
type node struct {
	parent   *node
	key      string
	children map[string]*node
	subs     []subscriber
	index    map[*session]int // position of each session in subs
	groups   map[string]*sharedGroup
	announce uint64 // the cluster's number of the change that announced subs (Cluster.Interest)
}

// sharedGroup is a $share/{group}/{filter} group: one message, one member.
type sharedGroup struct {
	name     string
	filter   string
	announce uint64 // the cluster's number of the change that announced the group
	members  []subscriber
	next     atomic.Uint32
}

// match is one delivery the router found for a topic.
type match struct {
	s     *session
	opts  subOpts
	group *sharedGroup // set when the delivery went through a shared group
}

// router is the subscription tree. Its lock guards the tree and the member
// lists; it is held only while matching or changing subscriptions, never
// while anything is written to a socket.
type router struct {
	mu       sync.RWMutex
	root     node
	strategy SharedStrategy
	count    atomic.Int64 // subscriptions, for $SYS
	groups   atomic.Int64 // shared subscription groups
	shared   atomic.Int64 // shared subscriptions: the members of every group (also in count)
	// cluster, when set, hears of each filter's first and last plain
	// subscription (Cluster.Interest), under mu so in order.
	cluster Cluster
	// readable, with an Authorizer, reports whether a member may read a
	// topic now: a shared group's message goes to a member that may
	// (pick); unreadable counts one that no member may read.
	readable   func(sub subscriber, topic string) bool
	unreadable func()
}

func newRouter(strategy SharedStrategy) *router {
	return &router{strategy: strategy}
}

func (n *node) child(key string) *node {
	c := n.children[key]
	if c == nil {
		if n.children == nil {
			n.children = map[string]*node{}
		}
		c = &node{parent: n, key: key}
		n.children[key] = c
	}
	return c
}

// walk returns the node for filter, creating the path when create is set.
func (r *router) walk(filter string, create bool) *node {
	n := &r.root
	for {
		i := strings.IndexByte(filter, '/')
		lvl := filter
		if i >= 0 {
			lvl = filter[:i]
		}
		if create {
			n = n.child(lvl)
		} else if n = n.children[lvl]; n == nil {
			return nil
		}
		if i < 0 {
			return n
		}
		filter = filter[i+1:]
	}
}

// subscribe adds or replaces s's subscription to filter (in group when
// non-empty) and reports whether it existed before, and the cluster's
// number of the change that announced filter (or group) on this node (0
// without a cluster), for the SUBACK to wait for (Cluster.AwaitInterest).
func (r *router) subscribe(s *session, filter, group string, o subOpts) (existed bool, announce uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.walk(filter, true)
	if group != "" {
		g := n.groups[group]
		if g == nil {
			if n.groups == nil {
				n.groups = map[string]*sharedGroup{}
			}
			g = &sharedGroup{name: group, filter: filter}
			n.groups[group] = g
			r.groups.Add(1)
			if r.cluster != nil {
				g.announce = r.cluster.Interest(group, filter, true)
			}
		}
		for i := range g.members {
			if g.members[i].s == s {
				g.members[i].opts = o
				return true, g.announce
			}
		}
		g.members = append(g.members, subscriber{s, o})
		r.count.Add(1)
		r.shared.Add(1)
		s.routes.Add(1)
		return false, g.announce
	}
	if i, ok := n.index[s]; ok {
		n.subs[i].opts = o
		return true, n.announce
	}
	if n.index == nil {
		n.index = map[*session]int{}
	}
	n.index[s] = len(n.subs)
	n.subs = append(n.subs, subscriber{s, o})
	r.count.Add(1)
	s.routes.Add(1)
	if r.cluster != nil && len(n.subs) == 1 {
		n.announce = r.cluster.Interest("", filter, true)
	}
	return false, n.announce
}

// unsubscribe removes s's subscription and reports whether there was one.
func (r *router) unsubscribe(s *session, filter, group string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.walk(filter, false)
	if n == nil {
		return false
	}
	found := false
	if group != "" {
		if g := n.groups[group]; g != nil {
			for i := range g.members {
				if g.members[i].s == s {
					// Copy, not in place: a concurrent reader may hold the old slice.
					g.members = append(g.members[:i:i], g.members[i+1:]...)
					found = true
					r.shared.Add(-1)
					break
				}
			}
			if len(g.members) == 0 {
				delete(n.groups, group)
				r.groups.Add(-1)
				if r.cluster != nil {
					r.cluster.Interest(group, filter, false)
				}
			}
		}
	} else if i, ok := n.index[s]; ok {
		last := len(n.subs) - 1
		n.subs[i] = n.subs[last]
		n.index[n.subs[i].s] = i
		n.subs[last] = subscriber{}
		n.subs = n.subs[:last]
		delete(n.index, s)
		found = true
		if r.cluster != nil && last == 0 {
			r.cluster.Interest("", filter, false)
		}
	}
	if found {
		r.count.Add(-1)
		s.routes.Add(-1)
	}
	// Prune empty branches so churn does not grow the tree.
	for n != &r.root && len(n.subs) == 0 && len(n.groups) == 0 && len(n.children) == 0 {
		delete(n.parent.children, n.key)
		n = n.parent
	}
	return found
}

// pick chooses one member of g for a message on topic (key is what the
// strategy hashes: the topic, or the publisher's client id), excluding
// skip (a member whose copy is being redispatched) and, with an
// Authorizer, the members that may not read topic: a member that would
// drop the message must not take another's share. Offline members are
// passed over while an online one exists.
func (r *router) pick(g *sharedGroup, topic, key string, skip *session) (subscriber, bool) {
	n := len(g.members)
	if n == 0 {
		return subscriber{}, false
	}
	can := func(m subscriber) bool {
		return m.s != skip && (r.readable == nil || r.readable(m, topic))
	}
	start := 0
	switch r.strategy {
	case SharedRoundRobin:
		start = int(g.next.Add(1)-1) % n
	case SharedRandom:
		start = rand.IntN(n)
	case SharedHashClient, SharedHashTopic:
		// hash_clientid keeps a publisher's messages on one member; the
		// publisher is not known here, so the caller passes it as topic.
		h := fnv.New32a()
		_, _ = h.Write([]byte(key))
		start = int(h.Sum32() % uint32(n))
	case SharedLeastInflight:
		best, bestLoad := -1, 0
		for i, m := range g.members {
			if !m.s.online() || !can(m) {
				continue
			}
			if l := int(m.s.load.Load()); best < 0 || l < bestLoad {
				best, bestLoad = i, l
			}
		}
		if best >= 0 {
			return g.members[best], true
		}
	}
	// Readability last: the common case, every member may read, costs one
	// check of the first member online.
	for i := 0; i < n; i++ {
		m := g.members[(start+i)%n]
		if m.s.online() && can(m) {
			return m, true
		}
	}
	for i := 0; i < n; i++ { // nobody online: queue on a persistent member
		m := g.members[(start+i)%n]
		if can(m) {
			return m, true
		}
	}
	return subscriber{}, false
}

// collect appends n's plain subscribers and, with groups, one member of
// each of its shared groups.
func (r *router) collect(n *node, topic string, out []match, from string, groups bool) []match {
	for _, sub := range n.subs {
		out = append(out, match{s: sub.s, opts: sub.opts})
	}
	if groups {
		for _, g := range n.groups {
			out = r.pickMatch(g, topic, from, out)
		}
	}
	return out
}

// pickMatch appends the member of g that gets a message on topic from
// the client from, if any.
func (r *router) pickMatch(g *sharedGroup, topic, from string, out []match) []match {
	key := topic
	if r.strategy == SharedHashClient && from != "" {
		key = from
	}
	if m, ok := r.pick(g, topic, key, nil); ok {
		out = append(out, match{s: m.s, opts: m.opts, group: g})
	} else if len(g.members) > 0 && r.unreadable != nil {
		r.unreadable() // members, none of whom may read it
	}
	return out
}

func (r *router) matchLevel(n *node, topic, rest string, dollar bool, out []match, from string, groups bool) []match {
	i := strings.IndexByte(rest, '/')
	lvl, next := rest, ""
	if i >= 0 {
		lvl, next = rest[:i], rest[i+1:]
	}
	wild := !(dollar && n == &r.root)
	if wild {
		if h := n.children["#"]; h != nil {
			out = r.collect(h, topic, out, from, groups)
		}
	}
	for _, key := range [2]string{lvl, "+"} {
		if key == "+" && !wild {
			break
		}
		c := n.children[key]
		if c == nil {
			continue
		}
		if i < 0 {
			out = r.collect(c, topic, out, from, groups)
			if h := c.children["#"]; h != nil { // "a/#" matches "a"
				out = r.collect(h, topic, out, from, groups)
			}
		} else {
			out = r.matchLevel(c, topic, next, dollar, out, from, groups)
		}
		if lvl == "+" {
			break // a literal "+" level cannot occur in a valid topic; guard anyway
		}
	}
	return out
}

// match appends to out every delivery for topic: each direct subscriber
// and one chosen member per shared group. A topic starting with '$' is not
// matched by a filter starting with a wildcard [MQTT-4.7.2-1]. from is the
// publisher's client id (empty for the broker), for hash_clientid dispatch.
func (r *router) match(topic, from string, out []match) []match {
	r.mu.RLock()
	out = r.matchLevel(&r.root, topic, topic, len(topic) > 0 && topic[0] == '$', out, from, true)
	r.mu.RUnlock()
	return out
}

// matchPlain appends every plain subscription matching topic, and no
// shared group: the deliveries of a message another node sent here,
// matched once against the whole tree as a local one is
// (DeliverRemote); the groups' copies come through their own interest.
func (r *router) matchPlain(topic string, out []match) []match {
	r.mu.RLock()
	out = r.matchLevel(&r.root, topic, topic, len(topic) > 0 && topic[0] == '$', out, "", false)
	r.mu.RUnlock()
	return out
}

// matchFilter appends the plain subscribers of exactly filter (group "")
// or one member of group on filter, picked as for a local message: the
// deliveries of a message on topic, from the client from, that another
// node sent here because of this node's interest in filter, or in group
// on filter (DeliverRemote).
func (r *router) matchFilter(group, filter, from, topic string, out []match) []match {
	r.mu.RLock()
	defer r.mu.RUnlock()
	n := r.walk(filter, false)
	switch {
	case n == nil:
	case group == "":
		for _, sub := range n.subs {
			out = append(out, match{s: sub.s, opts: sub.opts})
		}
	default:
		if g := n.groups[group]; g != nil {
			out = r.pickMatch(g, topic, from, out)
		}
	}
	return out
}
