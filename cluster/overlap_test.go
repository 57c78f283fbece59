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

func (l *countLocal) DeliverRemote(group, filter, topic string, payload []byte, qos byte, retain bool, props *codec.Properties,
	expires time.Time, from string) int {
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
	if err := c.syncInterest(5 * time.Second); err != nil {
		b.Fatal(err)
	}
	subj := Subject(c.opts.SubjectPrefix, "bench/t")
	var subs []*nats.Subscription // those whose subject matches subj, as NATS would deliver
	c.subsMu.RLock()
	for s := range c.subs {
		if s.Subject == Subject(c.opts.SubjectPrefix, "bench")+".>" || s.Subject == Subject(c.opts.SubjectPrefix, "bench")+".*" {
			subs = append(subs, s)
		}
	}
	c.subsMu.RUnlock()
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
				h := encodeHeader("n2", 1, false, nil, time.Time{}, "p")
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
