package listeners

import (
	"bytes"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/xmq-io/xmq/certs/certstest"
)

// TestWebSocketPingFloodKeepsReadDeadline floods a ws and a wss conn with
// pings and never reads: the pongs fill the sockets, and the server's
// reader, which answers pings, must not wait in a pong write past its read
// deadline, nor Close in its courtesy writes (close frame, close_notify).
// The server side does what core does before CONNECT: a read deadline,
// Read until an error, Close.
func TestWebSocketPingFloodKeepsReadDeadline(t *testing.T) {
	ca := certstest.NewCA(t)
	const readDeadline = time.Second
	for _, tc := range []struct {
		name string
		opts Options
		tls  *tls.Config
	}{
		{"ws", Options{Transport: TransportWS}, nil},
		{"wss", Options{Transport: TransportWSS, TLS: ca.ServerConfig()}, ca.ClientConfig()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := listen(t, tc.opts)
			accepted := make(chan net.Conn, 1)
			go func() {
				if c, err := l.Accept(); err == nil {
					accepted <- c
				}
			}()
			flooder := dialFlooder(t, tc.name+"://"+l.Addr().String()+"/mqtt", tc.tls)
			var server net.Conn
			select {
			case server = <-accepted:
			case <-time.After(5 * time.Second):
				t.Fatal("nothing accepted")
			}
			start := time.Now()
			_ = server.SetReadDeadline(start.Add(readDeadline))
			readDone := make(chan error, 1)
			closed := make(chan time.Duration, 1)
			go func() {
				buf := make([]byte, 64)
				for {
					if _, err := server.Read(buf); err != nil {
						readDone <- err
						start := time.Now()
						_ = server.Close()
						closed <- time.Since(start)
						return
					}
				}
			}()
			go floodPings(flooder)
			select {
			case err := <-readDone:
				if took := time.Since(start); took > readDeadline+time.Second {
					t.Errorf("the server's Read returned %v after %v, want about %v", err, took, readDeadline)
				}
			case <-time.After(readDeadline + 3*time.Second):
				t.Fatalf("the server's Read is still busy %v past its read deadline: a pong write without a deadline holds it",
					time.Since(start)-readDeadline)
			}
			select {
			case took := <-closed:
				if took > closeWriteTimeout+500*time.Millisecond {
					t.Errorf("Close took %v with the peer reading nothing, want at most about %v", took, closeWriteTimeout)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("Close still busy after 3s with the peer reading nothing")
			}
		})
	}
}

// dialFlooder opens a WebSocket and returns the conn under it (TLS for
// wss), on which the test writes frames of its own and never reads. It is
// closed at cleanup.
func dialFlooder(t *testing.T, url string, conf *tls.Config) net.Conn {
	t.Helper()
	d := websocket.Dialer{
		Subprotocols:     []string{"mqtt"},
		TLSClientConfig:  conf,
		HandshakeTimeout: 5 * time.Second,
	}
	ws, _, err := d.Dial(url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { _ = ws.NetConn().Close() })
	return ws.NetConn()
}

// floodPings writes masked ping frames of the largest size (125 bytes)
// to c until a write fails.
func floodPings(c net.Conn) {
	// FIN + ping, MASK + 125, a zero masking key: the payload goes as is.
	frame := append([]byte{0x89, 0x80 | 125, 0, 0, 0, 0}, bytes.Repeat([]byte{'p'}, 125)...)
	burst := bytes.Repeat(frame, 64)
	for {
		if _, err := c.Write(burst); err != nil {
			return
		}
	}
}

// TestTLSSocketBoundsCloseNotify: crypto/tls writes close_notify under a
// write deadline of 5s of its own; once the conn is closing, the socket
// under it cuts that to closeWriteTimeout, so closing a TLS conn whose peer
// reads nothing does not take 5s (TestWebSocketPingFloodKeepsReadDeadline
// shows it over wss).
func TestTLSSocketBoundsCloseNotify(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.Dial("tcp", ln.Addr().String()) // reads nothing
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sock := &tlsSocket{TCPConn: c.(*net.TCPConn)}
	sock.closing.Store(true)
	start := time.Now()
	_ = sock.SetWriteDeadline(start.Add(5 * time.Second)) // what crypto/tls asks for close_notify
	chunk := make([]byte, 256<<10)
	for {
		if _, err := sock.Write(chunk); err != nil {
			break
		}
		if time.Since(start) > 3*time.Second {
			t.Fatal("writes to a peer that reads nothing still go on after 3s")
		}
	}
	if took := time.Since(start); took > closeWriteTimeout+500*time.Millisecond {
		t.Errorf("a closing socket's writes failed after %v, want about %v", took, closeWriteTimeout)
	}
}

// TestWebSocketRefusalsHaveWriteDeadline sends request after request that
// the ws listener refuses, and reads no answer: once the answers fill the
// sockets, the listener closes the connection within its handshake
// timeout instead of waiting in a write for ever.
func TestWebSocketRefusalsHaveWriteDeadline(t *testing.T) {
	const timeout = 500 * time.Millisecond
	l := listen(t, Options{Transport: TransportWS, HandshakeTimeout: timeout})
	c, err := net.DialTimeout("tcp", l.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Each refusal names the path: long paths make long answers.
	req := []byte("GET /" + strings.Repeat("x", 8<<10) + " HTTP/1.1\r\nHost: x\r\n\r\n")
	closed := make(chan error, 1)
	go func() {
		for {
			if _, err := c.Write(req); err != nil {
				closed <- err
				return
			}
		}
	}()
	select {
	case <-closed:
	case <-time.After(timeout + 5*time.Second):
		t.Fatal("the listener still holds a connection that reads none of its answers")
	}
}
