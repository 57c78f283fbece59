package core

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
)

// pipeRoundTrip serves a subscriber to topic and a publisher on it, both
// MQTT 3.1.1 over net.Pipe, and returns roundTrip: one 64-byte QoS 0
// PUBLISH on topic, read back by the subscriber. The pools and buffers are
// warm when it returns, for testing.AllocsPerRun.
func pipeRoundTrip(t *testing.T, topic string) (*Server, func()) {
	t.Helper()
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
	_, _ = sub.Write((&codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{{Filter: []byte(topic)}}}).Append(nil, codec.V311))
	if _, err := sr.ReadPacket(); err != nil { // SUBACK
		t.Fatal(err)
	}
	pub, _ := connect("pub")
	msg := (&codec.Publish{Topic: []byte(topic), Payload: make([]byte, 64)}).Append(nil, codec.V311)
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
	return srv, roundTrip
}

// TestTraceCostsUntracedNothing: with a trace running for another client,
// the publish → deliver path of connections it does not follow allocates
// exactly what it allocates with no trace at all, and they get no tracer.
func TestTraceCostsUntracedNothing(t *testing.T) {
	srv, roundTrip := pipeRoundTrip(t, "t")
	without := testing.AllocsPerRun(500, roundTrip)

	tr, err := srv.StartTrace(TraceSpec{ClientID: "someone-else", Duration: time.Minute, MaxBytes: 1 << 20}, io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Stop()
	srv.mu.Lock()
	for c := range srv.clients {
		if c.trace.Load() != nil {
			t.Errorf("client %s has a tracer for another client's trace", c.id)
		}
	}
	srv.mu.Unlock()
	with := testing.AllocsPerRun(500, roundTrip)
	t.Logf("allocations per publish → deliver: %.2f without a trace, %.2f with one for another client", without, with)
	if with > without {
		t.Errorf("a trace for another client costs untraced connections %.2f allocations per message (%.2f without)", with-without, without)
	}
	if tr.Status().Packets != 0 {
		t.Errorf("the trace wrote %d packets of connections it does not follow", tr.Status().Packets)
	}
}
