package core

import (
	"bufio"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
)

// TestTopicMetricsAllocations: the publish → deliver path allocates no more
// with MaxTopicMetrics entries registered (exact topics and filters, some
// matching the published topic) than with none.
func TestTopicMetricsAllocations(t *testing.T) {
	srv, err := New(Options{SysInterval: -1}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(t.Context()) })
	connect := func(id string) (net.Conn, *codec.Reader) {
		a, c := net.Pipe()
		t.Cleanup(func() { _ = a.Close() })
		srv.ServeConn(c, "pipe")
		_ = a.SetDeadline(time.Now().Add(time.Minute))
		_, _ = a.Write((&codec.Connect{ProtocolVersion: codec.V311, CleanStart: true, ClientID: []byte(id)}).Append(nil, 0))
		r := codec.NewReader(bufio.NewReaderSize(a, 4096), 0)
		r.Version = codec.V311
		if _, err := r.ReadPacket(); err != nil {
			t.Fatal(err)
		}
		return a, r
	}
	sub, sr := connect("sub")
	_, _ = sub.Write((&codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{{Filter: []byte("a/t")}}}).Append(nil, codec.V311))
	if _, err := sr.ReadPacket(); err != nil { // SUBACK
		t.Fatal(err)
	}
	pub, _ := connect("pub")
	msg := (&codec.Publish{Topic: []byte("a/t"), Payload: make([]byte, 64)}).Append(nil, codec.V311)
	roundTrip := func() {
		if _, err := pub.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := sr.ReadPacket(); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 { // warm the pools and the buffers
		roundTrip()
	}
	without := testing.AllocsPerRun(500, roundTrip)

	for _, f := range []string{"a/t", "a/+", "#", "+/t"} {
		if err := srv.AddTopicMetric(f); err != nil {
			t.Fatal(err)
		}
	}
	for i := 4; i < MaxTopicMetrics; i++ {
		f := fmt.Sprintf("other/%d", i)
		if i%2 == 0 {
			f += "/#"
		}
		if err := srv.AddTopicMetric(f); err != nil {
			t.Fatal(err)
		}
	}
	with := testing.AllocsPerRun(500, roundTrip)
	t.Logf("allocations per publish → deliver: %.2f with no topic metric, %.2f with %d", without, with, MaxTopicMetrics)
	if with > without {
		t.Errorf("topic metrics cost %.2f allocations per message (%.2f without)", with-without, without)
	}
	for _, m := range srv.TopicMetrics()[:4] {
		if m.MessagesIn < 500 || m.MessagesOut < 500 {
			t.Errorf("%q: in %d, out %d, want at least 500 each", m.Topic, m.MessagesIn, m.MessagesOut)
		}
	}
}
