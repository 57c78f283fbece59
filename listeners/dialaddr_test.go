package listeners

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

func TestDialBindsLocalIP(t *testing.T) {
	l, err := ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(WithLocalIP(ctx, net.IPv4(127, 0, 0, 2)), "mqtt://"+l.Addr().String(), nil)
	if err != nil {
		t.Fatalf("Dial from 127.0.0.2: %v", err)
	}
	defer c.Close()
	select {
	case sc := <-accepted:
		defer sc.Close()
		if ip := sc.RemoteAddr().(*net.TCPAddr).IP; !ip.Equal(net.IPv4(127, 0, 0, 2)) {
			t.Errorf("server sees the client at %v, want 127.0.0.2", ip)
		}
	case <-ctx.Done():
		t.Fatal("nothing accepted")
	}
	if _, err := Dial(WithLocalIP(ctx, net.IPv4(127, 0, 0, 2)), "quic://127.0.0.1:1", nil); !errors.Is(err, ErrLocalIPQUIC) {
		t.Errorf("quic with a source address: %v, want ErrLocalIPQUIC", err)
	}
}
