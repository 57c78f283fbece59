package mqtttest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
)

// step is one exchange of a scripted server: it reads one packet from the
// client (want 0: none) and answers with packets.
type step struct {
	want   codec.Type // the packet the client must send first; 0: none
	answer []codec.Packet
}

// scripted returns a Conn whose server runs steps and then closes.
func scripted(t *testing.T, v byte, steps ...step) *Conn {
	t.Helper()
	cli, srv := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer srv.Close()
		br := bufio.NewReader(srv)
		for i, s := range steps {
			if s.want != 0 {
				raw, err := ReadFrame(br)
				if err != nil {
					t.Errorf("step %d: %v", i, err)
					return
				}
				p, _, err := codec.Decode(raw, v)
				if err != nil || p.Type() != s.want {
					t.Errorf("step %d: got %v (%v), want %s", i, p, err, s.want)
					return
				}
			}
			for _, a := range s.answer {
				if _, err := srv.Write(a.Append(nil, v)); err != nil {
					t.Errorf("step %d: %v", i, err)
					return
				}
			}
		}
	}()
	t.Cleanup(func() { <-done }) // after the Conn's Close, which ends a read the server waits in
	return NewConn(t, cli, v)
}

// TestReadFrame: whole packets are framed however long their remaining
// length; a truncated packet and a fifth length byte are errors.
func TestReadFrame(t *testing.T) {
	var stream []byte
	payloads := [][]byte{nil, bytes.Repeat([]byte("x"), 200), bytes.Repeat([]byte("y"), 20000)}
	for _, p := range payloads {
		stream = (&codec.Publish{Topic: []byte("t"), Payload: p}).Append(stream, codec.V5)
	}
	br := bufio.NewReader(bytes.NewReader(stream))
	for i, want := range payloads {
		raw, err := ReadFrame(br)
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		p, n, err := codec.Decode(raw, codec.V5)
		if err != nil || n != len(raw) || !bytes.Equal(p.(*codec.Publish).Payload, want) {
			t.Fatalf("packet %d: %v, %d of %d bytes", i, err, n, len(raw))
		}
	}
	if _, err := ReadFrame(br); !errors.Is(err, io.EOF) {
		t.Fatalf("at the end: %v, want EOF", err)
	}
	for _, bad := range [][]byte{stream[:len(stream)-1], {0x30, 0x80, 0x80, 0x80, 0x80, 0x01}} {
		br := bufio.NewReader(bytes.NewReader(bad))
		var err error
		for err == nil {
			_, err = ReadFrame(br)
		}
		if errors.Is(err, io.EOF) {
			t.Errorf("% x…: a clean EOF, want an error", bad[:2])
		}
	}
}

// TestSubscribeKeepsEarlyPublish: a PUBLISH the server sends before the
// SUBACK (3.8.4 allows it) is kept for Next, ahead of what follows.
func TestSubscribeKeepsEarlyPublish(t *testing.T) {
	c := scripted(t, codec.V5,
		step{want: codec.SUBSCRIBE, answer: []codec.Packet{
			&codec.Publish{Topic: []byte("a/1"), Payload: []byte("early")},
			&codec.Suback{PacketID: 1, ReasonCodes: []codec.ReasonCode{1}},
			&codec.Publish{Topic: []byte("a/2"), Payload: []byte("late")},
		}})
	c.Subscribe(1, "a/#")
	WantPayloads(t, []*codec.Publish{c.ExpectPublish(), c.ExpectPublish()}, "early", "late")
	c.ExpectClosed()
}

// TestPublishFlows: QoS 1 ends at the PUBACK; QoS 2 answers PUBREC with
// PUBREL and ends at the PUBCOMP; a refusing PUBREC ends the flow with
// its reason code.
func TestPublishFlows(t *testing.T) {
	c := scripted(t, codec.V5,
		step{want: codec.PUBLISH, answer: []codec.Packet{&codec.Ack{Kind: codec.PUBACK, PacketID: 1}}},
		step{want: codec.PUBLISH, answer: []codec.Packet{&codec.Ack{Kind: codec.PUBREC, PacketID: 2}}},
		step{want: codec.PUBREL, answer: []codec.Packet{&codec.Ack{Kind: codec.PUBCOMP, PacketID: 2}}},
		step{want: codec.PUBLISH, answer: []codec.Packet{&codec.Ack{Kind: codec.PUBREC, PacketID: 3, ReasonCode: codec.QuotaExceeded}}},
	)
	c.Pub("t", "one", 1)
	c.Pub("t", "two", 2)
	if rc := c.Publish(&codec.Publish{Topic: []byte("t"), QoS: 2}); rc != codec.QuotaExceeded {
		t.Fatalf("refused QoS 2: %s", rc)
	}
	c.ExpectClosed()
}

// TestRecv: Recv acknowledges QoS 1 and completes QoS 2 deliveries.
func TestRecv(t *testing.T) {
	c := scripted(t, codec.V311,
		step{answer: []codec.Packet{
			&codec.Publish{Topic: []byte("t"), QoS: 1, PacketID: 5, Payload: []byte("a")},
			&codec.Publish{Topic: []byte("t"), QoS: 2, PacketID: 6, Payload: []byte("b")},
		}},
		step{want: codec.PUBACK},
		step{want: codec.PUBREC, answer: []codec.Packet{&codec.Ack{Kind: codec.PUBREL, PacketID: 6}}},
		step{want: codec.PUBCOMP, answer: []codec.Packet{&codec.Pingresp{}}},
	)
	WantPayloads(t, c.Recv(2), "a", "b")
	Expect[*codec.Pingresp](c)
	c.ExpectClosed()
}

// TestNothingAndPause: ExpectNothing passes on a quiet open conn; a paused
// conn reads nothing, so a server's write blocks until Resume.
func TestNothingAndPause(t *testing.T) {
	cli, srv := net.Pipe()
	t.Cleanup(func() { _ = srv.Close() })
	c := NewConn(t, cli, codec.V5)
	c.ExpectNothing(20 * time.Millisecond)
	c.Pause()
	// The reader may already be blocked in a read from before Pause: one
	// write gets through, the next blocks.
	_, _ = srv.Write((&codec.Pingresp{}).Append(nil, codec.V5))
	_ = srv.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := srv.Write((&codec.Pingresp{}).Append(nil, codec.V5)); err == nil {
		t.Fatal("a paused conn read a second packet")
	}
	_ = srv.SetWriteDeadline(time.Time{})
	c.Resume()
	Expect[*codec.Pingresp](c)
}

// TestTryDial: a refusing CONNACK, a server that closes and an address
// nobody listens on are errors, not failures; an accepting server gives
// a Conn.
func TestTryDial(t *testing.T) {
	l := Listen(t)
	answers := []codec.Packet{&codec.Connack{ReasonCode: codec.NotAuthorized}, nil, &codec.Connack{}}
	go func() {
		for _, a := range answers {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if _, err := ReadFrame(bufio.NewReader(c)); err == nil && a != nil {
				_, _ = c.Write(a.Append(nil, codec.V5))
			}
			if a != nil && a.(*codec.Connack).ReasonCode == codec.Success {
				t.Cleanup(func() { _ = c.Close() })
				continue
			}
			_ = c.Close()
		}
	}()
	url := "mqtt://" + l.Addr().String()
	if _, ack, err := TryDial(t, url, nil, ConnectPacket(codec.V5, "refused")); err == nil || ack == nil || ack.ReasonCode != codec.NotAuthorized {
		t.Fatalf("refused: CONNACK %+v, %v", ack, err)
	}
	if _, _, err := TryDial(t, url, nil, ConnectPacket(codec.V5, "dropped")); err == nil {
		t.Fatal("dropped: no error")
	}
	c, ack, err := TryDial(t, url, nil, ConnectPacket(codec.V5, "accepted"))
	if err != nil || ack.ReasonCode != codec.Success {
		t.Fatalf("accepted: %+v, %v", ack, err)
	}
	c.Send(&codec.Pingreq{})
	c.ExpectNothing(10 * time.Millisecond)
	if _, _, err := TryDial(t, "mqtt://"+FreeAddr(t), nil, ConnectPacket(codec.V5, "nobody")); err == nil {
		t.Fatal("nobody listening: no error")
	}
}
