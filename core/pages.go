package core

import (
	"slices"
	"strings"
	"time"
)

// The admin views list retained messages, sessions and subscriptions a
// page at a time, in a stable order, resuming after the last item of the
// previous page (a cursor, not an offset). A page costs its items plus a
// logarithmic seek: nothing copies, sorts or counts the whole set.
// Conditions that no index answers (a user name, a text search) are
// checked item by item in that order, at most Budget items per page; a
// page that ran out of budget comes back short with More set and Next at
// the last item examined, and the next page continues from there.

// DefaultScanBudget is how many items a page examines at most for
// conditions that no index answers (about 10 ms of work).
const DefaultScanBudget = 10_000

// RetainedQuery selects a page of retained messages in topic order,
// level by level (a topic right before its subtopics).
type RetainedQuery struct {
	Filter string // an MQTT topic filter such as a/+/c or a/#; "" for every topic
	Prefix string // only topics that start with Prefix
	After  string // only topics after this one: the previous page's Next
	Limit  int    // items per page, at least 1
	Budget int    // topics examined at most; 0: DefaultScanBudget
}

// RetainedPage is one page of retained messages. Messages are immutable;
// callers must not modify them.
type RetainedPage struct {
	Messages []*Message
	// Stored[i] is when Messages[i] was retained; zero when unknown
	// (restored from a store written before xmq kept the time).
	Stored []time.Time
	// Total counts the matches of every page; -1 when counting them would
	// examine more than the budget (a filter with + over many branches).
	Total int
	More  bool   // a further page may hold matches
	Next  string // with More: the After of the next page
}

// RetainedPage returns a page of retained messages. Without a filter, or
// with a prefix or a filter of literal levels and a final #, the total
// comes from the tree's subtree sizes; the page itself visits only the
// branches its filter can match.
func (s *Server) RetainedPage(q RetainedQuery) RetainedPage {
	budget := q.Budget
	if budget <= 0 {
		budget = DefaultScanBudget
	}
	limit := max(q.Limit, 1)
	r := s.retained
	r.mu.RLock()
	defer r.mu.RUnlock()
	var p RetainedPage
	var exact bool
	if p.Total, exact = r.countMatching(q.Filter, q.Prefix, budget); !exact {
		p.Total = -1
	}
	p.Messages = make([]*Message, 0, min(limit, max(p.Total, 16)))
	p.Stored = make([]time.Time, 0, cap(p.Messages))
	last, done := r.walk(retainedScan{filter: q.Filter, prefix: q.Prefix, after: q.After, budget: budget}, func(e *retainedEntry) bool {
		if len(p.Messages) == limit {
			return false // one more match exists
		}
		p.Messages = append(p.Messages, e.m)
		p.Stored = append(p.Stored, storedTime(e.stored))
		return true
	})
	switch {
	case len(p.Messages) == limit && !done:
		p.More, p.Next = true, p.Messages[limit-1].Topic
	case !done:
		p.More, p.Next = true, last // out of budget
	}
	return p
}

// clientIndex keeps the client ids of Server.sessions in order, so the
// admin views page through sessions without copying or sorting them. It
// is guarded by Server.mu like the map it mirrors: every write to the map
// goes through putSessionLocked and dropSessionLocked.
type clientIndex struct{ t *ostree[string] }

func (x *clientIndex) tree() *ostree[string] {
	if x.t == nil {
		x.t = newOstree(func(id string) string { return id }, strings.Compare)
	}
	return x.t
}

// putSessionLocked makes sess the session of its client id; s.mu is held.
func (s *Server) putSessionLocked(sess *session) {
	s.sessions[sess.id] = sess
	s.clientIDs.tree().set(sess.id)
}

// dropSessionLocked forgets the session of id; s.mu is held.
func (s *Server) dropSessionLocked(id string) {
	delete(s.sessions, id)
	s.clientIDs.tree().delete(id)
}

// idPrefixEnd returns the smallest string above every one that starts
// with prefix (plain byte order); ok is false when there is none.
func idPrefixEnd(prefix string) (_ string, ok bool) {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] < 0xff {
			return prefix[:i] + string([]byte{prefix[i] + 1}), true
		}
	}
	return "", false
}

// sessionsFrom appends to out, in client id order (descending with desc),
// at most cap(out)-len(out) sessions whose ids start with prefix and come
// after from ("" from the first), or at from with inclusive. It takes s.mu
// for the copy only.
func (s *Server) sessionsFrom(prefix, from string, inclusive, desc bool, out []*session) []*session {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.clientIDs.tree()
	take := func(id string) bool {
		if !strings.HasPrefix(id, prefix) || len(out) == cap(out) {
			return false
		}
		if sess := s.sessions[id]; sess != nil {
			out = append(out, sess)
		}
		return true
	}
	if !desc {
		start := prefix
		if from != "" && from >= prefix {
			start = from
		}
		it := t.seek(start)
		if it.valid() && from != "" && !inclusive && it.item() == from {
			it.next()
		}
		for ; it.valid() && take(it.item()); it.next() {
		}
		return out
	}
	i := t.len() // one past the first candidate, walking down
	if end, ok := idPrefixEnd(prefix); ok && prefix != "" {
		i = t.rank(end)
	}
	if from != "" {
		r := t.rank(from)
		if _, ok := t.get(from); ok && inclusive {
			r++
		}
		i = min(i, r)
	}
	for i--; i >= 0 && take(t.at(i)); i-- {
	}
	return out
}

// ClientQuery selects a page of sessions in client id order.
type ClientQuery struct {
	IDPrefix string // only client ids that start with IDPrefix
	After    string // only ids after this one in the page order: the previous page's Next
	Desc     bool   // descending id order
	Limit    int    // items per page, at least 1
	// Match, when set, is a further condition checked on each session in
	// order, at most Budget of them per page (0: DefaultScanBudget).
	Match  func(*ClientInfo) bool
	Budget int
}

// ClientPage is one page of sessions, without their subscriptions.
type ClientPage struct {
	Clients []ClientInfo
	Total   int // sessions of every page; -1 with Match (not counted)
	More    bool
	Next    string // with More: the After of the next page
}

// ClientsPage returns a page of sessions. It holds s.mu only to copy the
// next few session pointers from the index, and each session's lock only
// to read it.
func (s *Server) ClientsPage(q ClientQuery) ClientPage {
	limit, budget := max(q.Limit, 1), q.Budget
	if budget <= 0 {
		budget = DefaultScanBudget
	}
	p := ClientPage{Total: -1}
	if q.Match == nil {
		s.mu.Lock()
		t := s.clientIDs.tree()
		p.Total = t.len()
		if q.IDPrefix != "" {
			if end, ok := idPrefixEnd(q.IDPrefix); ok {
				p.Total = t.rank(end)
			}
			p.Total -= t.rank(q.IDPrefix)
		}
		s.mu.Unlock()
	}
	batch := make([]*session, 0, min(limit+1, 256))
	p.Clients = make([]ClientInfo, 0, min(limit, 64))
	cursor, examined := q.After, 0
	var ci ClientInfo // one variable for every candidate: Match's pointer makes it escape
	for {
		batch = s.sessionsFrom(q.IDPrefix, cursor, false, q.Desc, batch[:0])
		for _, sess := range batch {
			ci = sess.info(false)
			if q.Match == nil || q.Match(&ci) {
				if len(p.Clients) == limit {
					p.More, p.Next = true, p.Clients[limit-1].ClientID
					return p
				}
				p.Clients = append(p.Clients, ci)
			}
			cursor = sess.id
			if examined++; q.Match != nil && examined == budget {
				p.More, p.Next = true, cursor
				return p
			}
		}
		if len(batch) < cap(batch) {
			return p
		}
	}
}

// SubscriptionQuery selects a page of subscriptions in (client id,
// filter) order.
type SubscriptionQuery struct {
	IDPrefix string // only sessions whose client id starts with IDPrefix
	// AfterClient and AfterFilter resume after that subscription (the
	// previous page's NextClient and NextFilter); "" from the first.
	AfterClient, AfterFilter string
	Limit                    int // items per page, at least 1
	// Match, when set, is a further condition checked on each
	// subscription, at most Budget of them per page (0:
	// DefaultScanBudget), whole sessions at a time.
	Match  func(*SubscriptionInfo) bool
	Budget int
}

// SubscriptionPage is one page of subscriptions.
type SubscriptionPage struct {
	Subscriptions []SubscriptionInfo
	// Total counts the subscriptions of every page; -1 with a condition.
	Total                  int
	More                   bool
	NextClient, NextFilter string // with More: where the next page starts
}

// SubscriptionsPage returns a page of subscriptions. Sessions are read in
// client id order from the index; of each, the page takes the smallest
// filters after the cursor, so a session costs its subscription count in
// time and the page its size in memory: nothing copies every
// subscription. The budget is checked between sessions, so a session with
// more subscriptions than the budget is still read whole
// (MaxSubscriptionsPerClient bounds that).
func (s *Server) SubscriptionsPage(q SubscriptionQuery) SubscriptionPage {
	limit, budget := max(q.Limit, 1), q.Budget
	if budget <= 0 {
		budget = DefaultScanBudget
	}
	p := SubscriptionPage{Total: -1}
	if q.Match == nil && q.IDPrefix == "" {
		p.Total = int(s.router.count.Load())
	}
	p.Subscriptions = make([]SubscriptionInfo, 0, min(limit, 64))
	batch := make([]*session, 0, 64)
	heap := make([]storedSub, 0, min(limit+1, 64))
	cursor, inclusive, examined := q.AfterClient, true, 0
	for {
		batch = s.sessionsFrom(q.IDPrefix, cursor, inclusive, false, batch[:0])
		for _, sess := range batch {
			after := ""
			if sess.id == q.AfterClient {
				after = q.AfterFilter
			}
			var n int
			var maxFilter string
			heap, n, maxFilter = sess.smallestSubs(after, limit+1-len(p.Subscriptions), q.Match, heap[:0])
			for _, sub := range heap {
				if len(p.Subscriptions) == limit {
					last := p.Subscriptions[limit-1]
					p.More, p.NextClient, p.NextFilter = true, last.ClientID, last.Filter
					return p
				}
				p.Subscriptions = append(p.Subscriptions, sub.info(sess.id))
			}
			cursor, inclusive = sess.id, false
			if examined += n; q.Match != nil && examined >= budget {
				p.More, p.NextClient, p.NextFilter = true, sess.id, maxFilter
				return p
			}
		}
		if len(batch) < cap(batch) {
			return p
		}
	}
}

// smallestSubs returns, in filter order, the need smallest of the
// session's subscriptions whose filter comes after after ("" from the
// first) and that match (when match is set); how many it examined; and
// the largest filter examined. It keeps at most need subscriptions at a
// time (a max-heap), however many the session has.
func (sess *session) smallestSubs(after string, need int, match func(*SubscriptionInfo) bool, h []storedSub) ([]storedSub, int, string) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	n, maxFilter := 0, after
	var info SubscriptionInfo // one variable for every candidate: match's pointer makes it escape
	for _, sub := range sess.subs {
		if sub.Filter <= after {
			continue
		}
		n++
		maxFilter = max(maxFilter, sub.Filter)
		if match != nil {
			if info = sub.info(sess.id); !match(&info) {
				continue
			}
		}
		switch {
		case len(h) < need:
			h = append(h, sub)
			siftUp(h, len(h)-1)
		case sub.Filter < h[0].Filter:
			h[0] = sub
			siftDown(h, 0)
		}
	}
	slices.SortFunc(h, func(a, b storedSub) int { return strings.Compare(a.Filter, b.Filter) })
	return h, n, maxFilter
}

// siftUp and siftDown keep h a max-heap by filter.
func siftUp(h []storedSub, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p].Filter >= h[i].Filter {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func siftDown(h []storedSub, i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && h[c+1].Filter > h[c].Filter {
			c++
		}
		if h[i].Filter >= h[c].Filter {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
