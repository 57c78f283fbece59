package listeners

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
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
	closeUnblocksAccept(t, l)
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept on a closed listener = %v, want net.ErrClosed", err)
	}
}

func TestParseURL(t *testing.T) {
	tests := []struct {
		url       string
		transport string
		addr      string
		path      string
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
		{url: "mqtts://host", transport: "tls", addr: "host:8883"},
		{url: "ssl://host:8883", transport: "tls", addr: "host:8883"},
		{url: "tls://[::1]", transport: "tls", addr: "[::1]:8883"},
		{url: "ws://host:8083/mqtt", transport: "ws", addr: "host:8083", path: "/mqtt"},
		{url: "ws://host", transport: "ws", addr: "host:8083", path: "/mqtt"},
		{url: "ws://host:80/other/path", transport: "ws", addr: "host:80", path: "/other/path"},
		{url: "wss://host:8084/mqtt", transport: "wss", addr: "host:8084", path: "/mqtt"},
		{url: "wss://host", transport: "wss", addr: "host:8084", path: "/mqtt"},
		{url: "quic://host:14567", transport: "quic", addr: "host:14567"},
		{url: "quic://host", transport: "quic", addr: "host:14567"},
		{url: "localhost", err: "neither a URL nor host:port"},
		{url: "http://host:80", err: `unknown scheme "http"`},
		{url: "mqtt://:1883", err: "no host"},
		{url: "mqtt://host:port:1", err: "bad host"},
		{url: "mqtt://host:abc", err: "invalid port"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			transport, addr, path, err := ParseURL(tt.url)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseURL(%q) error = %v, want one containing %q", tt.url, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseURL(%q): %v", tt.url, err)
			}
			if transport != tt.transport || addr != tt.addr || path != tt.path {
				t.Errorf("ParseURL(%q) = %q, %q, %q; want %q, %q, %q", tt.url, transport, addr, path, tt.transport, tt.addr, tt.path)
			}
		})
	}
}

// TestScheme checks that each transport's scheme reads back as it.
func TestScheme(t *testing.T) {
	for _, tr := range []string{TransportTCP, TransportTLS, TransportWS, TransportWSS, TransportQUIC} {
		if got, _, _, err := ParseURL(Scheme(tr) + "://host"); got != tr || err != nil {
			t.Errorf("ParseURL(Scheme(%q)+\"://host\") = %q, %v", tr, got, err)
		}
	}
	if s := Scheme("udp"); s != "" {
		t.Errorf("Scheme(udp) = %q, want \"\"", s)
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
		url string
		err string
	}{
		{url: "http://127.0.0.1:80", err: "unknown scheme"},
		{url: "nonsense", err: "neither a URL nor host:port"},
		{url: "mqtt://:1883", err: "no host"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			c, err := Dial(context.Background(), tt.url, nil)
			if err == nil {
				_ = c.Close()
				t.Fatalf("Dial(%q) succeeded, want an error", tt.url)
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
	}{
		{"tcp", true},
		{"tls", true},
		{"ws", true},
		{"wss", true},
		{"quic", true},
		{"udp", false},
		{"", false},
	}
	for _, tt := range tests {
		if err := Supported(tt.transport); (err == nil) != tt.ok {
			t.Errorf("Supported(%q) = %v; want ok=%v", tt.transport, err, tt.ok)
		}
	}
}

// closeUnblocksAccept checks that Close is idempotent and that an Accept
// waiting on l returns net.ErrClosed.
func closeUnblocksAccept(t *testing.T, l net.Listener) {
	t.Helper()
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
}
