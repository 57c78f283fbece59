package core

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
)

func newPagesServer(tb testing.TB) *Server {
	tb.Helper()
	srv, err := New(Options{SysInterval: -1}, Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return srv
}

// randomTopics returns n distinct topics built from levels that differ in
// the ways that matter to compareTopics: prefixes of one another, bytes
// below and above '/', empty levels and $ topics.
func randomTopics(rng *rand.Rand, n int) []string {
	lv := []string{"a", "b", "ab", "a-b", "a.b", "a0", "", "0", "z"}
	seen := map[string]bool{}
	var out []string
	for len(out) < n {
		var parts []string
		for d := rng.IntN(4) + 1; d > 0; d-- {
			parts = append(parts, lv[rng.IntN(len(lv))])
		}
		if rng.IntN(10) == 0 {
			parts[0] = "$s"
		}
		t := strings.Join(parts, "/")
		if t == "" || seen[t] {
			continue
		}
		seen[t] = true
		out = append(out, t)
	}
	return out
}

func randomFilter(rng *rand.Rand) string {
	lv := []string{"a", "b", "ab", "a-b", "", "0", "+", "+", "$s"}
	var parts []string
	for d := rng.IntN(4) + 1; d > 0; d-- {
		parts = append(parts, lv[rng.IntN(len(lv))])
	}
	if rng.IntN(3) == 0 {
		parts = append(parts, "#")
	}
	return strings.Join(parts, "/")
}

// expected returns the topics that match filter ("" any) and start with
// prefix, in compareTopics order, by reading them all.
func expected(topics []string, filter, prefix string) []string {
	var out []string
	for _, t := range topics {
		if strings.HasPrefix(t, prefix) && (filter == "" || codec.Match([]byte(filter), []byte(t))) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, compareTopics)
	return out
}

func topicsOf(ms []*Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Topic
	}
	return out
}

// pageAll follows RetainedPage's cursor to the end and returns every topic.
func pageAll(t *testing.T, srv *Server, q RetainedQuery) []string {
	t.Helper()
	var out []string
	for range 10_000 {
		p := srv.RetainedPage(q)
		if len(p.Messages) > q.Limit {
			t.Fatalf("page of %d for limit %d", len(p.Messages), q.Limit)
		}
		out = append(out, topicsOf(p.Messages)...)
		if !p.More {
			return out
		}
		q.After = p.Next
	}
	t.Fatal("paging does not end")
	return nil
}

// readAll reads the retained messages matching filter as a stream does,
// batch at a time, each read resuming where the last one stopped.
func readAll(r *retainedStore, filter string, batch int, now time.Time) []*Message {
	var out, buf []*Message
	after := ""
	for done := false; !done; {
		buf, after, done = r.read(filter, after, batch, now, buf[:0])
		out = append(out, buf...)
	}
	return out
}

// TestRetainedAgainstBruteForce compares the retained set's filter walk,
// counts and pages with codec.Match over every topic, for random topics
// and filters.
func TestRetainedAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	srv := newPagesServer(t)
	topics := randomTopics(rng, 1500)
	for _, tp := range topics {
		srv.retained.set(&Message{Message: codec.Message{Topic: tp, Payload: []byte("x")}}, 0)
	}
	now := time.Now()
	filters := []string{"#", "+", "+/#", "a/#", "$s/#", "+/+", "a/+/b", "/#", "+/", "a//+"}
	for range 300 {
		filters = append(filters, randomFilter(rng))
	}
	for _, f := range filters {
		if codec.ValidFilter([]byte(f)) != nil {
			continue
		}
		want := expected(topics, f, "")
		for _, batch := range []int{1, 3, maxBatch} {
			if got := topicsOf(readAll(srv.retained, f, batch, now)); !slices.Equal(got, want) {
				t.Fatalf("read(%q) in batches of %d = %q, want %q", f, batch, got, want)
			}
		}
		srv.retained.mu.RLock()
		n, exact := srv.retained.countMatching(f, "", 1<<30)
		srv.retained.mu.RUnlock()
		if !exact || n != len(want) {
			t.Fatalf("countMatching(%q) = %d %v, want %d", f, n, exact, len(want))
		}
		p := srv.RetainedPage(RetainedQuery{Filter: f, Limit: 1})
		if p.Total != len(want) && p.Total != -1 {
			t.Fatalf("RetainedPage(%q).Total = %d, want %d", f, p.Total, len(want))
		}
		// Pages of 7 with a small budget, resumed from their cursors,
		// give every match exactly once.
		if got := pageAll(t, srv, RetainedQuery{Filter: f, Limit: 7, Budget: 5}); !slices.Equal(got, want) {
			t.Fatalf("paging %q: %q, want %q", f, got, want)
		}
	}
	for _, prefix := range []string{"a", "a/", "a-", "a.", "$", "$s/", "/", "z/z", "\xff"} {
		want := expected(topics, "", prefix)
		if got := pageAll(t, srv, RetainedQuery{Prefix: prefix, Limit: 50}); !slices.Equal(got, want) {
			t.Fatalf("prefix %q: %q, want %q", prefix, got, want)
		}
		if p := srv.RetainedPage(RetainedQuery{Prefix: prefix, Limit: 1}); p.Total != len(want) {
			t.Fatalf("prefix %q: total %d, want %d", prefix, p.Total, len(want))
		}
		wantF := expected(topics, "+/#", prefix)
		if got := pageAll(t, srv, RetainedQuery{Filter: "+/#", Prefix: prefix, Limit: 3}); !slices.Equal(got, wantF) {
			t.Fatalf("prefix %q filter +/#: %q, want %q", prefix, got, wantF)
		}
	}
	all := expected(topics, "", "")
	if got := pageAll(t, srv, RetainedQuery{Limit: 1000}); !slices.Equal(got, all) {
		t.Fatalf("paging everything: %d topics, want %d", len(got), len(all))
	}
}

// TestCompareTopicsKeepsBranchesTogether: a topic, its subtopics and
// then its siblings that merely start with the same text.
func TestCompareTopicsKeepsBranchesTogether(t *testing.T) {
	in := []string{"a0", "a-b", "a//x", "a/b", "a", "a/", "a.b/c", "a/b/c", "/a", "$SYS/x", "b"}
	slices.SortFunc(in, compareTopics)
	want := []string{"/a", "$SYS/x", "a", "a/", "a//x", "a/b", "a/b/c", "a-b", "a.b/c", "a0", "b"}
	if !slices.Equal(in, want) {
		t.Errorf("order %q, want %q", in, want)
	}
}

// costItems is how many retained messages or sessions the cost tests
// hold: 200,000, or 50,000 under the race detector. The bounds they check
// do not depend on it.
func costItems() int {
	if raceEnabled {
		return 50_000
	}
	return 200_000
}

// manyRetained is a server with n retained messages under
// site/{0..99}/dev/{i}/temp and ten under alerts/.
func manyRetained(tb testing.TB, n int) *Server {
	tb.Helper()
	srv := newPagesServer(tb)
	payload := []byte("21.5")
	for i := range n {
		srv.retained.set(&Message{Message: codec.Message{Topic: fmt.Sprintf("site/%d/dev/%d/temp", i%100, i), Payload: payload}}, 0)
	}
	for i := range 10 {
		srv.retained.set(&Message{Message: codec.Message{Topic: fmt.Sprintf("alerts/%d", i), Payload: payload}}, 0)
	}
	return srv
}

// TestRetainedCostIsPerPage: with 200,000 retained messages, a page of one
// allocates a handful of objects and takes microseconds, and a filter's
// walk examines its matches plus a few seeks, not the other topics.
func TestRetainedCostIsPerPage(t *testing.T) {
	n := costItems()
	srv := manyRetained(t, n)
	queries := []struct {
		q    RetainedQuery
		slow bool // the total is counted by walking n/100 matches (within the budget)
	}{
		{q: RetainedQuery{Limit: 1}},
		{q: RetainedQuery{Limit: 1, After: "site/5/dev/10005/temp"}},
		{q: RetainedQuery{Limit: 1, Prefix: "site/42/"}},
		{q: RetainedQuery{Limit: 1, Filter: "site/42/#"}},
		{q: RetainedQuery{Limit: 1, Filter: "alerts/+"}},
		{q: RetainedQuery{Limit: 1, Filter: "+/7/dev/+/temp"}, slow: true},
	}
	for _, tc := range queries {
		q := tc.q
		allocs := testing.AllocsPerRun(100, func() { srv.RetainedPage(q) })
		if allocs > 6 {
			t.Errorf("%+v: %.0f allocations per page of one", q, allocs)
		}
		start := time.Now()
		for range 100 {
			if p := srv.RetainedPage(q); len(p.Messages) != 1 || !p.More {
				t.Fatalf("%+v: %d messages, more %v", q, len(p.Messages), p.More)
			}
		}
		// A few µs each; the bound is generous for -race and a busy machine.
		if d := time.Since(start) / 100; d > 2*time.Millisecond && !tc.slow {
			t.Errorf("%+v: %v per page of one", q, d)
		}
	}
	if p := srv.RetainedPage(RetainedQuery{Limit: 1}); p.Total != n+10 {
		t.Errorf("total %d", p.Total)
	}
	if p := srv.RetainedPage(RetainedQuery{Limit: 1, Filter: "site/+/dev/+/temp"}); p.Total != -1 || !p.More {
		t.Errorf("%d matches under + counted within the budget: total %d", n, p.Total)
	}
	// The walks examine only the matching branches.
	for _, tc := range []struct {
		filter   string
		examined int
	}{
		{"alerts/#", 11},                 // 10 matches, then the first topic past the branch
		{"+/3/dev/3003/temp", 7},         // a few seeks under alerts/ and site/, then past the end
		{"site/7/dev/+/temp", n/100 + 3}, // its matches, a seek to site/7/ and one past it
		{"#", n + 11},                    // every one
	} {
		srv.retained.mu.RLock()
		n := 0
		_, done := srv.retained.walk(retainedScan{filter: tc.filter, budget: tc.examined}, func(*retainedEntry) bool { n++; return true })
		srv.retained.mu.RUnlock()
		if !done {
			t.Errorf("walk(%q) did not end within %d topics examined (%d matches)", tc.filter, tc.examined, n)
		}
	}
}

// addSession adds a session with subscriptions, as a restored one would
// be, without a connection.
func addSession(s *Server, id string, filters ...string) *session {
	sess := newSession(s, id)
	s.mu.Lock()
	s.putSessionLocked(sess)
	s.mu.Unlock()
	sess.mu.Lock()
	for _, f := range filters {
		if sess.subs == nil {
			sess.subs = map[string]storedSub{}
		}
		sess.subs[f] = storedSub{Filter: f, QoS: 1}
	}
	sess.mu.Unlock()
	for _, f := range filters {
		group, filter, _, _ := codec.ParseShared([]byte(f))
		s.router.subscribe(sess, string(filter), string(group), subOpts{qos: 1})
	}
	return sess
}

func clientIDsOf(cs []ClientInfo) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ClientID
	}
	return out
}

func TestClientsPage(t *testing.T) {
	srv := newPagesServer(t)
	var ids []string
	for i := range 300 {
		id := fmt.Sprintf("c%03d", i)
		if i%3 == 0 {
			id = fmt.Sprintf("d%03d", i)
		}
		ids = append(ids, id)
		addSession(srv, id)
	}
	slices.Sort(ids)
	all := func(q ClientQuery) ([]string, int) {
		var out []string
		total := -2
		for range 1000 {
			p := srv.ClientsPage(q)
			if total == -2 {
				total = p.Total
			}
			out = append(out, clientIDsOf(p.Clients)...)
			if !p.More {
				return out, total
			}
			q.After = p.Next
		}
		t.Fatal("paging does not end")
		return nil, 0
	}
	filter := func(keep func(string) bool) []string {
		var out []string
		for _, id := range ids {
			if keep(id) {
				out = append(out, id)
			}
		}
		return out
	}
	desc := slices.Clone(ids)
	slices.Reverse(desc)
	dOnly := filter(func(id string) bool { return id[0] == 'd' })
	dDesc := slices.Clone(dOnly)
	slices.Reverse(dDesc)
	odd := func(ci *ClientInfo) bool { return ci.ClientID[len(ci.ClientID)-1]%2 == 1 }
	for _, tc := range []struct {
		name  string
		q     ClientQuery
		want  []string
		total int
	}{
		{"all", ClientQuery{Limit: 7}, ids, 300},
		{"desc", ClientQuery{Limit: 7, Desc: true}, desc, 300},
		{"prefix", ClientQuery{Limit: 7, IDPrefix: "d"}, dOnly, 100},
		{"prefix desc", ClientQuery{Limit: 1000, IDPrefix: "d", Desc: true}, dDesc, 100},
		{"prefix none", ClientQuery{Limit: 7, IDPrefix: "e"}, nil, 0},
		{"match", ClientQuery{Limit: 7, Match: odd, Budget: 10}, filter(func(id string) bool { return id[len(id)-1]%2 == 1 }), -1},
		{"match desc", ClientQuery{Limit: 5, Match: odd, Budget: 3, Desc: true, IDPrefix: "c"},
			filter(func(id string) bool { return id[0] == 'c' && id[len(id)-1]%2 == 1 }), -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, total := all(tc.q)
			want := tc.want
			if tc.q.Desc && tc.name == "match desc" {
				want = slices.Clone(want)
				slices.Reverse(want)
			}
			if !slices.Equal(got, want) || total != tc.total {
				t.Errorf("got %d ids (total %d), want %d (total %d): %q", len(got), total, len(want), tc.total, got)
			}
		})
	}
}

func TestSubscriptionsPage(t *testing.T) {
	srv := newPagesServer(t)
	type pair struct{ client, filter string }
	var want []pair
	for i := range 40 {
		id := fmt.Sprintf("s%02d", i)
		var fs []string
		for j := range i % 5 { // some sessions have none
			fs = append(fs, fmt.Sprintf("f/%d/%d", j, i))
		}
		if i%7 == 0 {
			fs = append(fs, "$share/g/f/#")
		}
		addSession(srv, id, fs...)
		slices.Sort(fs)
		for _, f := range fs {
			want = append(want, pair{id, f})
		}
	}
	all := func(q SubscriptionQuery) ([]pair, int) {
		var out []pair
		total := -2
		for range 1000 {
			p := srv.SubscriptionsPage(q)
			if total == -2 {
				total = p.Total
			}
			for _, s := range p.Subscriptions {
				out = append(out, pair{s.ClientID, s.Filter})
			}
			if !p.More {
				return out, total
			}
			q.AfterClient, q.AfterFilter = p.NextClient, p.NextFilter
		}
		t.Fatal("paging does not end")
		return nil, 0
	}
	for _, limit := range []int{1, 3, 1000} {
		if got, total := all(SubscriptionQuery{Limit: limit}); !slices.Equal(got, want) || total != len(want) {
			t.Errorf("limit %d: %d subscriptions (total %d), want %d", limit, len(got), total, len(want))
		}
	}
	shared := func(s *SubscriptionInfo) bool { return strings.HasPrefix(s.Filter, "$share/") }
	var wantShared []pair
	for _, p := range want {
		if strings.HasPrefix(p.filter, "$share/") {
			wantShared = append(wantShared, p)
		}
	}
	if got, total := all(SubscriptionQuery{Limit: 2, Match: shared, Budget: 4}); !slices.Equal(got, wantShared) || total != -1 {
		t.Errorf("shared: %v (total %d), want %v", got, total, wantShared)
	}
	var want3 []pair
	for _, p := range want {
		if strings.HasPrefix(p.client, "s3") {
			want3 = append(want3, p)
		}
	}
	if got, _ := all(SubscriptionQuery{Limit: 4, IDPrefix: "s3"}); !slices.Equal(got, want3) {
		t.Errorf("prefix s3: %v, want %v", got, want3)
	}
}

// TestClientAndSubscriptionPagesCost: with 200,000 sessions of one
// subscription each, a page of one allocates a handful of objects.
func TestClientAndSubscriptionPagesCost(t *testing.T) {
	srv := newPagesServer(t)
	for i := range costItems() {
		addSession(srv, fmt.Sprintf("client-%06d", i), fmt.Sprintf("t/%d", i))
	}
	for _, tc := range []struct {
		name string
		page func()
	}{
		{"clients", func() { srv.ClientsPage(ClientQuery{Limit: 1}) }},
		{"clients after", func() { srv.ClientsPage(ClientQuery{Limit: 1, After: "client-010000"}) }},
		{"clients desc", func() { srv.ClientsPage(ClientQuery{Limit: 1, Desc: true, IDPrefix: "client-1"}) }},
		{"subscriptions", func() { srv.SubscriptionsPage(SubscriptionQuery{Limit: 1}) }},
		{"subscriptions after", func() {
			srv.SubscriptionsPage(SubscriptionQuery{Limit: 1, AfterClient: "client-100000", AfterFilter: "t/100000"})
		}},
	} {
		if allocs := testing.AllocsPerRun(100, tc.page); allocs > 6 {
			t.Errorf("%s: %.0f allocations per page of one", tc.name, allocs)
		}
		start := time.Now()
		for range 100 {
			tc.page()
		}
		if d := time.Since(start) / 100; d > 2*time.Millisecond {
			t.Errorf("%s: %v per page of one", tc.name, d)
		}
	}
}
