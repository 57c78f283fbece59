package mqtttest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"
)

// WaitFor polls cond until it holds, failing the test after Timeout.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	WaitWithin(t, Timeout, what, cond)
}

// WaitWithin polls cond until it holds, failing the test after limit.
func WaitWithin(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (%v)", what, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var (
	handedMu sync.Mutex
	handed   = map[int]bool{} // ports FreePort returned
)

// FreePort is a TCP port free on 127.0.0.1 a moment ago, for a server or
// process started next to bind. It is taken below Linux's ephemeral range
// (32768–60999): a port from that range can go to any outgoing connection
// on the machine before the server binds it, which made cluster nodes
// fail to listen for routes ("address already in use") under a full test
// run. A port is handed out once per test binary.
func FreePort(t testing.TB) int {
	t.Helper()
	handedMu.Lock()
	defer handedMu.Unlock()
	for range 200 {
		p := 20000 + rand.IntN(12000)
		if handed[p] {
			continue // given to an earlier caller, which may not have bound it yet
		}
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			_ = l.Close()
			handed[p] = true
			return p
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// FreeAddr is "127.0.0.1:port" for a FreePort: nothing listens there
// right now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", FreePort(t))
}

// Server is what Serve runs: a *core.Server (the kit may not import core).
type Server interface {
	Serve(l net.Listener, name string) error
	Shutdown(ctx context.Context) error
}

// Serve has srv serve l as listener name until the test ends; then it shuts
// srv down and fails the test if Shutdown fails or Serve returns an error
// other than closed (core.ErrServerClosed). The test may shut srv down
// itself before (Shutdown's closed is no failure). It returns l's address.
// The cleanup runs after those the test registers later, such as its
// clients'.
func Serve(t testing.TB, srv Server, l net.Listener, name string, closed error) string {
	t.Helper()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l, name) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, closed) {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, closed) {
			t.Errorf("Serve: %v, want %v", err, closed)
		}
	})
	return l.Addr().String()
}

// Listen listens on a free loopback TCP port; the listener is closed when
// the test ends (a server that serves it closes it first).
func Listen(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}
