//go:build linux

package listeners

import (
	"bytes"
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// wsNowPair returns the server's wsConn and the client's websocket.Conn of
// one connection to a ws listener.
func wsNowPair(t *testing.T) (*wsConn, *websocket.Conn) {
	t.Helper()
	l := listen(t, Options{Transport: TransportWS, HandshakeTimeout: 5 * time.Second})
	var client *websocket.Conn
	server := acceptOne(t, l, func() net.Conn {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d := websocket.Dialer{Subprotocols: []string{"mqtt"}}
		ws, _, err := d.DialContext(ctx, dialURL("ws", l), nil)
		if err != nil {
			t.Fatal(err)
		}
		client = ws
		return ws.NetConn()
	})
	c, ok := server.(*wsConn)
	if !ok {
		t.Fatalf("accepted %T, want *wsConn", server)
	}
	if !c.WritesNow() {
		t.Fatal("a ws conn over TCP cannot write in place")
	}
	return c, client
}

// readMessage reads the client's next message within a few seconds.
func readMessage(t *testing.T, ws *websocket.Conn) []byte {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	typ, b, err := ws.ReadMessage()
	if err != nil {
		t.Fatalf("client read: %v", err)
	}
	if typ != websocket.BinaryMessage {
		t.Fatalf("message type %d, want binary", typ)
	}
	return b
}

// TestWSWriteNowFrames: a frame written in place is one binary message to
// a standard client, for every header length (7-, 16- and 64-bit sizes).
func TestWSWriteNowFrames(t *testing.T) {
	server, client := wsNowPair(t)
	for _, size := range []int{1, 125, 126, 127, 65535, 65536, 200000} {
		p := bytes.Repeat([]byte{byte(size)}, size)
		p[0] = 0x30
		n, err := server.WriteNow(p)
		if err != nil {
			t.Fatalf("WriteNow(%d bytes): %v", size, err)
		}
		done := make(chan error, 1)
		go func() { // the rest, as the broker's writer does
			rest := p[n:]
			if n == len(p) {
				rest = []byte("next")
			}
			_, err := server.Write(rest)
			done <- err
		}()
		if got := readMessage(t, client); !bytes.Equal(got, p) {
			t.Fatalf("%d bytes written in place (%d at once): client read %d bytes, not the same", size, n, len(got))
		}
		if n == len(p) {
			if got := readMessage(t, client); string(got) != "next" {
				t.Fatalf("after an in-place frame: %q, want \"next\"", got)
			}
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestWSWriteNowPartialFrame: when the socket takes part of a frame, the
// next Write finishes it before anything else, and a ping answered
// meanwhile does not cut into it (the pong is dropped, the stream stays
// valid).
func TestWSWriteNowPartialFrame(t *testing.T) {
	server, client := wsNowPair(t)
	if err := server.sock.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4096)
	}); err != nil {
		t.Fatal(err)
	}
	// The server reads, so that it answers pings as a broker's reader does.
	go func() {
		var b [64]byte
		for {
			if _, err := server.Read(b[:]); err != nil {
				return
			}
		}
	}()
	p := make([]byte, 4<<20)
	for i := range p {
		p[i] = byte(i / 251)
	}
	n, err := server.WriteNow(p)
	if err != nil {
		t.Fatal(err)
	}
	if n >= len(p) {
		t.Fatalf("the socket took all of %d bytes at once: the test needs a partial frame", len(p))
	}
	if server.owedPayload == 0 {
		t.Fatal("a partial frame owes nothing")
	}
	// Nothing else may start while the frame is half written.
	if m, err := server.WriteNow([]byte("other")); m != 0 || err != nil {
		t.Fatalf("WriteNow during a half-written frame = %d, %v; want 0, nil", m, err)
	}
	if err := client.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the server's reader answers the ping now, if it would
	done := make(chan error, 1)
	go func() {
		_, err := server.Write(p[n:])
		if err == nil {
			_, err = server.Write([]byte("after"))
		}
		done <- err
	}()
	if got := readMessage(t, client); !bytes.Equal(got, p) {
		t.Fatalf("client read %d bytes, want the %d written (%d of them in place)", len(got), len(p), n)
	}
	if got := readMessage(t, client); string(got) != "after" {
		t.Fatalf("next message %q, want \"after\"", got)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if server.owedPayload != 0 || len(server.owedHeader) != 0 {
		t.Errorf("after the frame: owes %d payload bytes and %d header bytes", server.owedPayload, len(server.owedHeader))
	}
}

// TestWSSWritesNowNot: under TLS the bytes on the socket are TLS's, so a
// wss conn never writes in place.
func TestWSSWritesNowNot(t *testing.T) {
	c := &wsConn{} // a wss conn has no socket of its own (sock nil)
	if c.WritesNow() {
		t.Error("a conn without its socket writes in place")
	}
	if n, err := c.WriteNow([]byte("x")); n != 0 || err != nil {
		t.Errorf("WriteNow without a socket = %d, %v; want 0, nil", n, err)
	}
}
