package loadtest

import (
	"bufio"
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
)

// newTestWorker builds a worker for one publisher and one subscriber of a
// pubsub job against addr, without connecting.
func newTestWorker(tb testing.TB, addr string, qos, payload int) *Worker {
	tb.Helper()
	o := DefaultOptions()
	o.Addr, o.Mode, o.Pubs, o.Subs, o.QoS, o.Payloads = addr, ModePubSub, 1, 1, qos, []int{payload}
	j := Job{Options: o, Payload: payload, PubHi: 1, SubHi: 1, Token: "bench", Alone: true}
	w, err := newWorker(context.Background(), j, nil)
	if err != nil {
		tb.Fatal(err)
	}
	w.build()
	return w
}

func clientsOf(w *Worker) (pub, sub *client) {
	for _, c := range w.clients {
		if c.pub != nil {
			pub = c
		} else {
			sub = c
		}
	}
	return pub, sub
}

func TestHotPathsDoNotAllocate(t *testing.T) {
	w := newTestWorker(t, "127.0.0.1:1", 1, 64)
	pub, sub := clientsOf(w)
	pub.pub.sentAt = make([]atomic.Int64, 2)
	pub.pub.inflight, pub.pub.lowWater = 1, 1
	bw := bufio.NewWriterSize(io.Discard, 64<<10)
	if n := testing.AllocsPerRun(1000, func() {
		pub.pub.sentAt[1].Store(0)
		if err := pub.writePublish(bw, 1); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("writePublish: %.1f allocations per message, want 0", n)
	}
	// The receive path: decode (in place), sequence, time, queue the PUBACK.
	var p codec.Publish
	raw := pub.pub.pkt.Append(nil, codec.V311)
	pkt, _, err := codec.Decode(raw, codec.V311)
	if err != nil {
		t.Fatal(err)
	}
	p = *pkt.(*codec.Publish)
	seq := uint32(0)
	sub.ctl = make([]byte, 0, 1<<16)
	if n := testing.AllocsPerRun(1000, func() {
		putHeader(p.Payload, time.Now().UnixNano(), 0, seq)
		seq++
		sub.onPublish(&p, time.Now().UnixNano())
		sub.queueAck(codec.PUBACK, p.PacketID)
		if len(sub.ctl) > 60000 {
			sub.ctl = sub.ctl[:0]
		}
	}); n != 0 {
		t.Errorf("onPublish + PUBACK: %.1f allocations per message, want 0", n)
	}
	if sub.sub.counts.Unique == 0 || sub.sub.counts.Duplicates != 0 {
		t.Errorf("counts after the run: %+v", sub.sub.counts)
	}
}

// BenchmarkPublishQoS0Loopback is the generator's ceiling: one publisher
// writing 64-byte QoS 0 messages over loopback TCP to a discard sink, the
// broker's work taken out. Run it pinned to one core:
//
//	taskset -c 1 go test -run '^$' -bench PublishQoS0Loopback -cpu 1 ./loadtest
//
// msgs/s is per wall-clock second, the sink's parsing included when it
// shares the core.
func BenchmarkPublishQoS0Loopback(b *testing.B) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var s Sink
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	defer func() { _ = l.Close(); <-done }()
	w := newTestWorker(b, l.Addr().String(), 0, 64)
	pub, _ := clientsOf(w)
	m, _, err := w.connect(context.Background(), pub)
	if err != nil {
		b.Fatal(err)
	}
	defer m.nc.Close()
	b.ReportAllocs()
	b.SetBytes(64)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if err := pub.writePublish(m.bw, 0); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := m.bw.Write(pingreq[:]); err != nil {
		b.Fatal(err)
	}
	if err := m.bw.Flush(); err != nil {
		b.Fatal(err)
	}
	// The sink has read everything when it answers the PINGREQ.
	if p, err := m.rd.ReadPacket(); err != nil || p.Type() != codec.PINGRESP {
		b.Fatalf("barrier: %v, %v", p, err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

// BenchmarkReceive is the subscriber's per-message cost: header, sequence
// tracking, latency histogram.
func BenchmarkReceive(b *testing.B) {
	w := newTestWorker(b, "127.0.0.1:1", 0, 64)
	pub, sub := clientsOf(w)
	raw := pub.pub.pkt.Append(nil, codec.V311)
	pkt, _, _ := codec.Decode(raw, codec.V311)
	p := pkt.(*codec.Publish)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		now := time.Now().UnixNano()
		putHeader(p.Payload, now-50_000, 0, uint32(i))
		sub.onPublish(p, now)
	}
}

func BenchmarkRecorder(b *testing.B) {
	r := NewRecorder(8)
	b.RunParallel(func(pb *testing.PB) {
		v := int64(12345)
		for pb.Next() {
			r.Record(int(v), v)
			v = v*7%1_000_003 + 1000
		}
	})
}
