package cluster

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/xmq-io/xmq/codec"
)

// countLocal is a Local that only counts DeliverRemote's calls, for
// benchmarks.
type countLocal struct {
	*fakeLocal
	n atomic.Int64
}

func (l *countLocal) DeliverRemote(string, string, codec.Message) int {
	l.n.Add(1)
	return 1
}

// BenchmarkRoute: what a node spends routing a QoS 1 message from another
// node (route: headers, topic, the broker's DeliverRemote, which counts
// here), per message published, with one NATS copy of it (one filter
// matches) and with two (two overlapping filters: NATS delivers one copy
// per subscription), 64-byte payloads.
func BenchmarkRoute(b *testing.B) {
	o := Options{Node: "b1", Embedded: EmbeddedOptions{Listen: "127.0.0.1:0", ClientListen: "127.0.0.1:0", Dir: b.TempDir()}}
	c, err := New(o, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	local := &countLocal{fakeLocal: newFakeLocal()}
	c.Start(local)
	c.Interest("", "bench/#", true)
	c.Interest("", "bench/+", true)
	if err := c.interests.syncInterest(5 * time.Second); err != nil {
		b.Fatal(err)
	}
	subj := Subject(c.opts.SubjectPrefix, "bench/t")
	var subs []*nats.Subscription // those whose subject matches subj, as NATS would deliver
	c.interests.subsMu.RLock()
	for s := range c.interests.subs {
		if s.Subject == Subject(c.opts.SubjectPrefix, "bench")+".>" || s.Subject == Subject(c.opts.SubjectPrefix, "bench")+".*" {
			subs = append(subs, s)
		}
	}
	c.interests.subsMu.RUnlock()
	if len(subs) != 2 {
		b.Fatalf("%d subscriptions for %s", len(subs), subj)
	}
	payload := make([]byte, 64)
	seq := uint64(time.Now().UnixNano())
	for _, copies := range []int{1, 2} {
		b.Run(fmt.Sprintf("copies%d", copies), func(b *testing.B) {
			// Messages as NATS hands them over: each copy its own
			// nats.Msg, numbered as publishNumbered numbers them.
			const ring = 1024
			msgs := make([][]*nats.Msg, ring)
			for i := range msgs {
				h := encodeHeader("n2", &codec.Message{QoS: 1, From: "p"})
				seq++
				h[hdrSeq] = []string{strconv.FormatUint(seq, 36)}
				for _, s := range subs[:copies] {
					msgs[i] = append(msgs[i], &nats.Msg{Subject: subj, Data: payload, Header: h, Sub: s})
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				for _, m := range msgs[i%ring] {
					c.route(m)
				}
				i++
			}
			b.ReportMetric(float64(local.n.Swap(0))/float64(i), "delivers/msg")
		})
	}
}

// TestOverlapAcrossNodes: NATS delivers a node one copy of a message per
// subscription of the node that matches it, so one per overlapping filter
// (ov/#, ov/+/c, ov/b/c); the node hands the broker each message once, to
// be matched against its whole subscription tree (filter ""), as a local
// PUBLISH is, whatever the QoS, in order; a shared group on one of the
// filters still gets its own copy, once.
func TestOverlapAcrossNodes(t *testing.T) {
	nodes := startNodes(t, 2)
	n1, n2 := nodes[0], nodes[1]
	for _, f := range []string{"ov/#", "ov/+/c", "ov/b/c"} {
		n2.Interest("", f, true)
	}
	n2.Interest("g", "ov/#", true)
	waitInterest(t, n1, "ov/b/c", n2)
	const n = 9
	for i := range n {
		n1.Forward(codec.Message{Topic: "ov/b/c", Payload: []byte(strconv.Itoa(i)), QoS: byte(i % 3), From: "p"}, nil)
	}
	var plain, group []delivered
	for range 2 * n {
		d := n2.local.next(t)
		if d.group == "" {
			plain = append(plain, d)
		} else {
			group = append(group, d)
		}
	}
	n2.local.none(t, 200*time.Millisecond)
	for _, ds := range []struct {
		name  string
		got   []delivered
		group string
	}{{"plain", plain, ""}, {"shared", group, "g"}} {
		if len(ds.got) != n {
			t.Fatalf("%s: %d deliveries, want %d: %+v", ds.name, len(ds.got), n, ds.got)
		}
		for i, d := range ds.got {
			wantFilter := "" // the whole tree
			if ds.group != "" {
				wantFilter = "ov/#"
			}
			if string(d.payload) != strconv.Itoa(i) || d.qos != byte(i%3) || d.group != ds.group || d.filter != wantFilter || d.topic != "ov/b/c" {
				t.Fatalf("%s: delivery %d is %+v, want %d at QoS %d to group %q filter %q", ds.name, i, d, i, i%3, ds.group, wantFilter)
			}
		}
	}
}

// TestRouteCopies: which of the copies NATS delivers reach the broker,
// and how (route called as routeLoop calls it, with the copies NATS
// would deliver): the first copy of a message numbered by its node
// (Xmq-Seq for QoS 1/2, Xmq-Id for QoS 0) is matched against the whole
// tree and the others are dropped, even with another node's messages in
// between; a message without a number (a NATS application's) goes to each
// filter that brought it; the messages a rejoin's replay brought are
// dropped whichever filter brings their first copy.
func TestRouteCopies(t *testing.T) {
	nd := startNodes(t, 1)[0]
	for _, f := range []string{"ov/#", "ov/+/c", "x/#"} {
		nd.Interest("", f, true)
	}
	if err := nd.interests.syncInterest(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	sub := func(filter string) *nats.Subscription {
		nd.interests.subsMu.RLock()
		defer nd.interests.subsMu.RUnlock()
		return nd.interests.filters[interest{"", filter}][0] // the wildcard subject: FilterSubjects' first
	}
	all, plus, x := sub("ov/#"), sub("ov/+/c"), sub("x/#")
	// msg is the copy through s of a message on topic from node numbered
	// with header hdr (none when node is "").
	msg := func(s *nats.Subscription, topic, payload, node, hdr, num string) *nats.Msg {
		m := &nats.Msg{Subject: Subject(nd.opts.SubjectPrefix, topic), Data: []byte(payload), Sub: s, Header: nats.Header{}}
		if node != "" {
			m.Header = encodeHeader(node, &codec.Message{QoS: 1, From: "p"})
			m.Header[hdr] = []string{num}
		}
		return m
	}
	type want struct{ payload, filter string }
	for _, tc := range []struct {
		name   string
		copies []*nats.Msg
		want   []want
	}{
		{"QoS 1/2, with another node's between", []*nats.Msg{
			msg(all, "ov/b/c", "a", "n2", hdrSeq, "k1"),
			msg(all, "ov/b/c", "b", "n3", hdrSeq, "k1"),
			msg(plus, "ov/b/c", "a", "n2", hdrSeq, "k1"),
			msg(plus, "ov/b/c", "b", "n3", hdrSeq, "k1"),
		}, []want{{"a", ""}, {"b", ""}}},
		{"QoS 0", []*nats.Msg{
			msg(plus, "ov/b/c", "c", "n2", hdrID, "k2"),
			msg(all, "ov/b/c", "c", "n2", hdrID, "k2"),
			msg(all, "ov/b/c", "c", "n2", hdrID, "k3"), // the same again: another message
		}, []want{{"c", ""}, {"c", ""}}},
		{"a QoS 0 id is not a QoS 1/2 number", []*nats.Msg{
			msg(all, "ov/b/c", "d", "n2", hdrSeq, "k4"),
			msg(all, "ov/b/c", "e", "n2", hdrID, "k4"),
		}, []want{{"d", ""}, {"e", ""}}},
		{"no number", []*nats.Msg{
			msg(all, "ov/b/c", "f", "", "", ""),
			msg(plus, "ov/b/c", "f", "", "", ""),
		}, []want{{"f", "ov/#"}, {"f", "ov/+/c"}}},
	} {
		for _, m := range tc.copies {
			nd.route(m)
		}
		for _, w := range tc.want {
			if d := nd.local.next(t); string(d.payload) != w.payload || d.filter != w.filter || d.group != "" {
				t.Fatalf("%s: got %q to filter %q, want %q to filter %q", tc.name, d.payload, d.filter, w.payload, w.filter)
			}
		}
		nd.local.none(t, 20*time.Millisecond)
	}

	// A rejoin replayed n2's messages up to 100 on ov/# to every plain
	// subscriber then: those arriving live are dropped, whichever filter
	// brings them first; one on a topic no replayed filter matches is not.
	nd.replay.rejoined, nd.replay.rejoinedFilters = map[string]uint64{"n2": 100}, map[string]bool{"ov/#": true}
	for _, m := range []*nats.Msg{
		msg(x, "x/y", "not replayed", "n2", hdrSeq, strconv.FormatUint(99, 36)),
		msg(plus, "ov/b/c", "replayed", "n2", hdrSeq, strconv.FormatUint(100, 36)),
		msg(all, "ov/b/c", "replayed", "n2", hdrSeq, strconv.FormatUint(100, 36)),
		msg(plus, "ov/b/c", "after", "n2", hdrSeq, strconv.FormatUint(101, 36)),
		msg(all, "ov/b/c", "after", "n2", hdrSeq, strconv.FormatUint(101, 36)),
	} {
		nd.route(m)
	}
	for _, w := range []string{"not replayed", "after"} {
		if d := nd.local.next(t); string(d.payload) != w || d.filter != "" {
			t.Fatalf("after a rejoin: got %q to filter %q, want %q to the whole tree", d.payload, d.filter, w)
		}
	}
	nd.local.none(t, 20*time.Millisecond)
}
