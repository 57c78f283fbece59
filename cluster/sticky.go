package cluster

import (
	"hash/fnv"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// Sticky shared groups. With a hash strategy (Options.SharedHash, the
// broker's hash_clientid or hash_topic), a shared group's messages of one
// publisher (or topic) must reach one member, whichever node they are
// published on. NATS gives a queue group's message to a node at random,
// so a node with no member of a group picks the node itself: each node
// lists its shared groups in its heartbeats (at most maxStickyGroups); a
// node that publishes a message on a group's filter, with no member of
// the group here, sends it to the node the hash of its key picks among
// those listing the group (sorted by name, so every node picks the same),
// on that node's group subject, as a request, and names the group in the
// normal message's served header (the node NATS picks for the group drops
// its copy). There the group's strategy picks the member, as on one node.
// The node answers whether a member got it; when none did (the group left
// that node since its heartbeat), NATS says no node listens (it is dead),
// or no answer comes within stickyTimeout, the message is handed over to
// the group's queue (HandOver): one member on any node gets it. Messages
// of one publisher to one node travel on one path, in order.

// maxStickyGroups bounds the shared groups a heartbeat lists; a group
// past it is dispatched by NATS (any node with members).
const maxStickyGroups = 256

// stickyTimeout bounds the wait for the answer of the node a message was
// sent to, before it is handed over to any node with members.
const stickyTimeout = 2 * time.Second

// The headers of a message sent to a node for a shared group.
const (
	hdrShareGroup  = "Xmq-Share-Group"  // the group, escaped
	hdrShareFilter = "Xmq-Share-Filter" // its filter, escaped
)

// groupSubject is where node of cluster name takes messages for its
// shared groups.
func groupSubject(name, node string) string { return "$XMQ." + name + ".node." + node + ".group" }

// stickyGroup is a shared group of other nodes, with the nodes listing it.
type stickyGroup struct {
	interest
	match []byte   // the filter, for codec.Match
	nodes []string // sorted
}

// sticky is what a node keeps for its sticky shared groups.
type sticky struct {
	*link
	// handOver is Cluster.HandOver, for a message no member took.
	handOver func(group, filter string, m codec.Message)
	table    atomic.Pointer[[]stickyGroup]
	inbox    string // replies come on inbox.ID
	mu       sync.Mutex
	next     uint64
	pending  map[string]*stickySent
}

// stickySent is a message sent to a node for a shared group, waiting for
// its answer.
type stickySent struct {
	group, filter string
	msg           codec.Message
	at            time.Time
}

// rebuild makes the table of the other reachable nodes' groups from
// their last heartbeats. n.mu is held.
func (sk *sticky) rebuild(n *nodes) {
	if sk.opts.SharedHash == "" {
		return
	}
	byGroup := map[interest][]string{}
	for _, p := range n.peers {
		if !p.Reachable {
			continue
		}
		for _, g := range p.Groups {
			group, filter, ok, err := codec.ParseShared([]byte(g))
			if !ok || err != nil {
				continue
			}
			it := interest{string(group), string(filter)}
			byGroup[it] = append(byGroup[it], p.Node)
		}
	}
	t := make([]stickyGroup, 0, len(byGroup))
	for it, ns := range byGroup {
		slices.Sort(ns)
		t = append(t, stickyGroup{interest: it, match: []byte(it.filter), nodes: ns})
	}
	sk.table.Store(&t)
}

// send sends msg, which nm carries, to the node each sticky group
// on its topic picks, for the groups not served here, and returns served
// with those added.
func (sk *sticky) send(nm *nats.Msg, msg codec.Message, served []string) []string {
	tp := sk.table.Load()
	if tp == nil || len(*tp) == 0 {
		return served
	}
	key := msg.Topic
	if sk.opts.SharedHash == SharedHashClient {
		key = msg.From
	}
	var h uint32
	hashed := false
	for i := range *tp {
		g := &(*tp)[i]
		if isServed(served, g.group, g.filter) || !codec.Match(g.match, []byte(msg.Topic)) {
			continue
		}
		if !hashed {
			f := fnv.New32a()
			_, _ = f.Write([]byte(key))
			h, hashed = f.Sum32(), true
		}
		node := g.nodes[int(h%uint32(len(g.nodes)))]
		out := &nats.Msg{Subject: groupSubject(sk.opts.Name, node), Data: msg.Payload, Header: make(nats.Header, len(nm.Header)+3)}
		for k, v := range nm.Header {
			out.Header[k] = v
		}
		out.Header[hdrSubject] = []string{nm.Subject}
		out.Header[hdrShareGroup] = []string{url.QueryEscape(g.group)}
		out.Header[hdrShareFilter] = []string{url.QueryEscape(g.filter)}
		sk.mu.Lock()
		sk.next++
		id := strconv.FormatUint(sk.next, 36)
		sk.pending[id] = &stickySent{group: g.group, filter: g.filter, msg: msg, at: time.Now()}
		sk.mu.Unlock()
		out.Reply = sk.inbox + "." + id
		if err := sk.nc.PublishMsg(out); err != nil {
			sk.answered(id, false)
		}
		served = append(served, g.group, g.filter)
	}
	return served
}

// isServed reports whether served (group, filter pairs) holds group on
// filter.
func isServed(served []string, group, filter string) bool {
	for i := 0; i+1 < len(served); i += 2 {
		if served[i] == group && served[i+1] == filter {
			return true
		}
	}
	return false
}

// start subscribes to the answers and starts the sweep of those
// that do not come.
func (sk *sticky) start() {
	sk.pending = map[string]*stickySent{}
	sk.inbox = sk.nc.NewRespInbox()
	_, err := sk.nc.Subscribe(sk.inbox+".*", func(m *nats.Msg) {
		id := m.Subject[len(sk.inbox)+1:]
		// "1": a member got it; "0", or NATS's no-responders status (no
		// data): none did.
		sk.answered(id, len(m.Data) == 1 && m.Data[0] == '1')
	})
	if err != nil {
		sk.log.Error("cannot hear other nodes' answers for shared groups: messages sent to them may be handed over twice", zap.Error(err))
	}
	sk.goUnlessClosed(func() {
		t := time.NewTicker(stickyTimeout / 4)
		defer t.Stop()
		for {
			select {
			case <-sk.stop:
				return
			case now := <-t.C:
				var late []string
				sk.mu.Lock()
				for id, s := range sk.pending {
					if now.Sub(s.at) > stickyTimeout {
						late = append(late, id)
					}
				}
				sk.mu.Unlock()
				for _, id := range late {
					sk.answered(id, false)
				}
			}
		}
	})
}

// answered ends the wait for message id: unless a member got it,
// it is handed over to the group's members on any node.
func (sk *sticky) answered(id string, got bool) {
	sk.mu.Lock()
	s := sk.pending[id]
	delete(sk.pending, id)
	sk.mu.Unlock()
	if s == nil || got {
		return
	}
	sk.handOver(s.group, s.filter, s.msg)
}

// serve delivers a message another node sent here for one of this
// node's shared groups (on routeLoop, in order with the others) and
// answers whether a member got it.
func (sk *sticky) serve(m *nats.Msg) {
	group, err1 := url.QueryUnescape(m.Header.Get(hdrShareGroup))
	filter, err2 := url.QueryUnescape(m.Header.Get(hdrShareFilter))
	topic, err3 := Topic(sk.opts.SubjectPrefix, m.Header.Get(hdrSubject))
	n := 0
	if err1 == nil && err2 == nil && err3 == nil && group != "" {
		var in incoming
		decodeMsg(&in, topic, m.Data, m.Header)
		n = sk.local.DeliverRemote(group, filter, in.msg)
	}
	answer := []byte{'0'}
	if n > 0 {
		answer[0] = '1'
	}
	_ = m.Respond(answer)
}
