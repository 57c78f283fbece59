package core

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
)

// BenchmarkRouterMatch measures one match against a tree of n
// subscriptions, for an exact topic with one subscriber and for a topic that
// a wildcard filter covers.
func BenchmarkRouterMatch(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		r := newRouter(SharedRoundRobin)
		for i := 0; i < n; i++ {
			s := newSession(nil, fmt.Sprint("c", i))
			r.subscribe(s, fmt.Sprintf("site/%d/dev/%d/temp", i%100, i), "", subOpts{qos: 1})
		}
		w := newSession(nil, "wild")
		r.subscribe(w, "site/+/dev/+/humidity", "", subOpts{})
		r.subscribe(w, "alerts/#", "", subOpts{})
		for _, tc := range []struct{ name, topic string }{
			{"exact", fmt.Sprintf("site/%d/dev/%d/temp", 42%100, 42)},
			{"wildcard", "site/7/dev/99/humidity"},
			{"hash", "alerts/site/7/fire"},
		} {
			b.Run(fmt.Sprintf("subs=%d/%s", n, tc.name), func(b *testing.B) {
				b.ReportAllocs()
				out := make([]match, 0, 8)
				for i := 0; i < b.N; i++ {
					out = r.match(tc.topic, "", out[:0])
				}
				if len(out) != 1 {
					b.Fatalf("%d matches, want 1", len(out))
				}
			})
		}
	}
}

// BenchmarkPublishDeliver measures PUBLISH → deliveries end to end through
// ServeConn over net.Pipe: one QoS 0 publisher, n subscribers on the same
// topic, 64-byte payloads. One op is one published message, delivered n times.
func BenchmarkPublishDeliver(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("subs=%d", n), func(b *testing.B) {
			benchPublishDeliver(b, n, Config{}, nil)
		})
	}
	// The same with every topic metric slot taken: the published topic
	// matches one exact entry and one filter; the others are filters
	// that do not match (each a codec.Match call) and exact topics.
	b.Run("subs=1/topic-metrics=512", func(b *testing.B) {
		benchTopicMetrics = true
		defer func() { benchTopicMetrics = false }()
		benchPublishDeliver(b, 1, Config{}, nil)
	})
}

// benchTopicMetrics makes benchPublishDeliver register MaxTopicMetrics
// topic metrics first.
var benchTopicMetrics bool

// BenchmarkPublishCluster measures what the cluster seam adds to
// BenchmarkPublishDeliver with one subscriber: "forward", a PUBLISH also
// handed to a cluster that keeps nothing (Cluster.Forward); "remote", a
// message from another node (Server.DeliverRemote) instead of a PUBLISH.
func BenchmarkPublishCluster(b *testing.B) {
	b.Run("forward", func(b *testing.B) { benchPublishDeliver(b, 1, Config{Cluster: nopCluster{}}, nil) })
	b.Run("remote", func(b *testing.B) {
		payload := make([]byte, 64)
		benchPublishDeliver(b, 1, Config{Cluster: nopCluster{}}, func(srv *Server) {
			srv.DeliverRemote("", "", codec.Message{Topic: "bench/t", Payload: payload, From: "pub"})
		})
	})
}

// nopCluster is a cluster with no other node.
type nopCluster struct{}

func (nopCluster) Interest(string, string, bool) uint64                        { return 0 }
func (nopCluster) Forward(codec.Message, []string)                             {}
func (nopCluster) Retain(codec.Message)                                        {}
func (nopCluster) Claim(string, string, bool, bool) (uint64, codec.ReasonCode) { return 0, 0 }
func (nopCluster) AwaitInterest(uint64)                                        {}
func (nopCluster) HandOver(string, string, codec.Message)                      {}
func (nopCluster) Release(string, uint64, bool)                                {}

// benchPublishDeliver publishes b.N messages to n subscribers of
// bench/t: QoS 0 PUBLISH packets of a client, or with remote, b.N calls
// of remote.
func benchPublishDeliver(b *testing.B, n int, cfg Config, remote func(*Server)) {
	srv, err := New(Options{SysInterval: -1, MaxQueued: 1 << 20}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = srv.Shutdown(b.Context()) }()
	if benchTopicMetrics {
		for i := range MaxTopicMetrics {
			f := fmt.Sprintf("other/%d/+", i)
			switch i {
			case 0:
				f = "bench/t"
			case 1:
				f = "bench/#"
			default:
				if i%2 == 0 {
					f = fmt.Sprintf("other/%d", i)
				}
			}
			if err := srv.AddTopicMetric(f); err != nil {
				b.Fatal(err)
			}
		}
	}
	connect := func(id string) (net.Conn, *codec.Reader) {
		a, c := net.Pipe()
		srv.ServeConn(c, "pipe")
		_, _ = a.Write((&codec.Connect{ProtocolVersion: codec.V311, CleanStart: true, ClientID: []byte(id)}).Append(nil, 0))
		r := codec.NewReader(bufio.NewReaderSize(a, 64<<10), 0)
		r.Version = codec.V311
		if _, err := r.ReadPacket(); err != nil {
			b.Fatal(err)
		}
		return a, r
	}
	var got atomic.Int64
	want := int64(b.N) * int64(n)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		conn, r := connect(fmt.Sprint("sub", i))
		_, _ = conn.Write((&codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{{Filter: []byte("bench/t")}}}).Append(nil, codec.V311))
		if _, err := r.ReadPacket(); err != nil { // SUBACK
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				p, err := r.ReadPacket()
				if err != nil {
					return
				}
				if _, ok := p.(*codec.Publish); ok && got.Add(1) == want {
					close(done)
				}
			}
		}()
		defer conn.Close()
	}
	pub, _ := connect("pub")
	defer pub.Close()
	w := bufio.NewWriterSize(pub, 64<<10)
	msg := (&codec.Publish{Topic: []byte("bench/t"), Payload: make([]byte, 64)}).Append(nil, codec.V311)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		if remote != nil {
			for i := 0; i < b.N; i++ {
				remote(srv)
			}
			return
		}
		for i := 0; i < b.N; i++ {
			_, _ = w.Write(msg)
		}
		_ = w.Flush()
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		b.Fatalf("delivered %d of %d (dropped %d)", got.Load(), want, srv.Stats().TotalDropped())
	}
	b.StopTimer()
	b.ReportMetric(float64(want)/b.Elapsed().Seconds(), "deliveries/s")
	_, _ = io.Copy(io.Discard, io.LimitReader(pub, 0))
}

// BenchmarkSharedPick measures one match of a topic that a shared group
// of 10 online members covers: without an Authorizer, and with one whose
// every member may read everything (the cached verdict: what the
// strategy pays to pass over members that may not read).
func BenchmarkSharedPick(b *testing.B) {
	for _, authz := range []bool{false, true} {
		r := newRouter(SharedRoundRobin)
		for i := range 10 {
			s := newSession(nil, fmt.Sprint("m", i))
			s.isOnline.Store(true)
			o := subOpts{qos: 1}
			if authz {
				o.acl = &subACL{filter: "jobs/#"}
				o.acl.verdict.Store(&aclVerdict{gen: 1, all: true})
			}
			r.subscribe(s, "jobs/#", "g", o)
		}
		if authz {
			srv := &Server{}
			r.readable = func(m subscriber, topic string) bool { return srv.canRead(m.s, m.opts.acl, topic, 1) }
		}
		b.Run(fmt.Sprintf("authorizer=%v", authz), func(b *testing.B) {
			b.ReportAllocs()
			out := make([]match, 0, 8)
			for i := 0; i < b.N; i++ {
				out = r.match("jobs/42", "", out[:0])
			}
			if len(out) != 1 {
				b.Fatalf("%d matches, want 1", len(out))
			}
		})
	}
}
