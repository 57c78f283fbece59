package listeners

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/nettest"
)

// listenLocal starts a TCP listener on a free loopback port, closed at cleanup.
func listenLocal(t *testing.T) Listener {
	t.Helper()
	l, err := ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatalf("ListenTCP: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func TestListenTCP(t *testing.T) {
	l := listenLocal(t)
	if got := l.Transport(); got != TransportTCP {
		t.Errorf("Transport() = %q, want %q", got, TransportTCP)
	}
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		t.Fatalf("Addr() = %T, want *net.TCPAddr", l.Addr())
	}
	if addr.Port == 0 {
		t.Errorf("Addr() = %v: port 0 was not resolved to a real port", addr)
	}
	if !addr.IP.IsLoopback() {
		t.Errorf("Addr() = %v, want a loopback address", addr)
	}
}

func TestListenTCPBadAddress(t *testing.T) {
	for _, addr := range []string{"not-an-address", "127.0.0.1:99999"} {
		if l, err := ListenTCP(addr); err == nil {
			_ = l.Close()
			t.Errorf("ListenTCP(%q) succeeded, want an error", addr)
		}
	}
}

func TestCloseIdempotent(t *testing.T) {
	l, err := ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatalf("ListenTCP: %v", err)
	}
	accepted := make(chan error, 1)
	go func() {
		_, err := l.Accept()
		accepted <- err
	}()
	for i := range 3 {
		if err := l.Close(); err != nil {
			t.Errorf("Close #%d = %v, want nil", i+1, err)
		}
	}
	select {
	case err := <-accepted:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close = %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept did not return after Close")
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept on a closed listener = %v, want net.ErrClosed", err)
	}
}

func TestParseURL(t *testing.T) {
	tests := []struct {
		url       string
		transport string
		addr      string
		err       string // substring of the error; "" = no error
	}{
		{url: "mqtt://127.0.0.1:1883", transport: "tcp", addr: "127.0.0.1:1883"},
		{url: "tcp://broker.example:11883", transport: "tcp", addr: "broker.example:11883"},
		{url: "MQTT://host:1", transport: "tcp", addr: "host:1"},
		{url: "mqtt://host", transport: "tcp", addr: "host:1883"},
		{url: "mqtt://[::1]:1883", transport: "tcp", addr: "[::1]:1883"},
		{url: "mqtt://[::1]", transport: "tcp", addr: "[::1]:1883"},
		{url: "localhost:1883", transport: "tcp", addr: "localhost:1883"},
		{url: "[::1]:1883", transport: "tcp", addr: "[::1]:1883"},
		{url: "mqtts://host:8883", transport: "tls", addr: "host:8883"},
		{url: "ssl://host:8883", transport: "tls", addr: "host:8883"},
		{url: "ws://host:8083/mqtt", transport: "ws", addr: "host:8083"},
		{url: "wss://host:8084/mqtt", transport: "wss", addr: "host:8084"},
		{url: "quic://host:14567", transport: "quic", addr: "host:14567"},
		{url: "localhost", err: "neither a URL nor host:port"},
		{url: "http://host:80", err: `unknown scheme "http"`},
		{url: "mqtt://:1883", err: "no host"},
		{url: "mqtt://host:port:1", err: "bad host"},
		{url: "mqtt://host:abc", err: "invalid port"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			transport, addr, err := parseURL(tt.url)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("parseURL(%q) error = %v, want one containing %q", tt.url, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseURL(%q): %v", tt.url, err)
			}
			if transport != tt.transport || addr != tt.addr {
				t.Errorf("parseURL(%q) = %q, %q; want %q, %q", tt.url, transport, addr, tt.transport, tt.addr)
			}
		})
	}
}

func TestDial(t *testing.T) {
	l := listenLocal(t)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }() // echo
		}
	}()
	hostport := l.Addr().String()
	for _, url := range []string{"mqtt://" + hostport, "tcp://" + hostport, hostport} {
		t.Run(url, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, err := Dial(ctx, url, nil)
			if err != nil {
				t.Fatalf("Dial(%q): %v", url, err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			want := []byte{0x10, 0x00} // any bytes: the conn carries them untouched
			if _, err := c.Write(want); err != nil {
				t.Fatalf("Write: %v", err)
			}
			got := make([]byte, len(want))
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatalf("ReadFull: %v", err)
			}
			if string(got) != string(want) {
				t.Errorf("echo = %x, want %x", got, want)
			}
		})
	}
}

func TestDialErrors(t *testing.T) {
	tests := []struct {
		url      string
		notBuilt bool
		err      string
	}{
		{url: "mqtts://127.0.0.1:8883", notBuilt: true, err: "not built yet"},
		{url: "ssl://127.0.0.1:8883", notBuilt: true, err: "not built yet"},
		{url: "ws://127.0.0.1:8083/mqtt", notBuilt: true, err: "not built yet"},
		{url: "wss://127.0.0.1:8084/mqtt", notBuilt: true, err: "not built yet"},
		{url: "quic://127.0.0.1:14567", notBuilt: true, err: "not built yet"},
		{url: "http://127.0.0.1:80", err: "unknown scheme"},
		{url: "nonsense", err: "neither a URL nor host:port"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			c, err := Dial(context.Background(), tt.url, nil)
			if err == nil {
				_ = c.Close()
				t.Fatalf("Dial(%q) succeeded, want an error", tt.url)
			}
			if got := errors.Is(err, ErrNotBuilt); got != tt.notBuilt {
				t.Errorf("Dial(%q) = %v; errors.Is(err, ErrNotBuilt) = %v, want %v", tt.url, err, got, tt.notBuilt)
			}
			if !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Dial(%q) = %v, want an error containing %q", tt.url, err, tt.err)
			}
		})
	}
}

func TestDialRefusedAndCancelled(t *testing.T) {
	l, err := ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatalf("ListenTCP: %v", err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there now
	if c, err := Dial(context.Background(), "mqtt://"+addr, nil); err == nil {
		_ = c.Close()
		t.Errorf("Dial to a closed port succeeded")
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if c, err := Dial(ctx, "mqtt://"+addr, nil); err == nil {
		_ = c.Close()
		t.Errorf("Dial with a cancelled context succeeded")
	} else if !errors.Is(err, context.Canceled) {
		t.Errorf("Dial with a cancelled context = %v, want context.Canceled", err)
	}
}

func TestSupported(t *testing.T) {
	tests := []struct {
		transport string
		ok        bool
		notBuilt  bool
	}{
		{"tcp", true, false},
		{"tls", false, true},
		{"ws", false, true},
		{"wss", false, true},
		{"quic", false, true},
		{"udp", false, false},
		{"", false, false},
	}
	for _, tt := range tests {
		err := Supported(tt.transport)
		if (err == nil) != tt.ok || errors.Is(err, ErrNotBuilt) != tt.notBuilt {
			t.Errorf("Supported(%q) = %v; want ok=%v notBuilt=%v", tt.transport, err, tt.ok, tt.notBuilt)
		}
	}
}

// TestConnConformance runs x/net's net.Conn conformance suite over a pair
// made of a Dial'd conn and the conn the Listener accepted.
func TestConnConformance(t *testing.T) {
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		l, err := ListenTCP("127.0.0.1:0")
		if err != nil {
			return nil, nil, nil, err
		}
		defer l.Close()
		accepted := make(chan net.Conn, 1)
		acceptErr := make(chan error, 1)
		go func() {
			c, err := l.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			accepted <- c
		}()
		c1, err = Dial(context.Background(), "mqtt://"+l.Addr().String(), nil)
		if err != nil {
			return nil, nil, nil, err
		}
		select {
		case c2 = <-accepted:
		case err = <-acceptErr:
			_ = c1.Close()
			return nil, nil, nil, err
		}
		stop = func() { _ = c1.Close(); _ = c2.Close() }
		return c1, c2, stop, nil
	})
}
