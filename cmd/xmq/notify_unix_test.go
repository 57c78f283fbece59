//go:build unix

package main

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// notifySocket is a fake systemd notification socket.
func notifySocket(t *testing.T) (string, *net.UnixConn) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return path, conn
}

// nextNotice reads one notification datagram.
func nextNotice(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	return string(buf[:n])
}

func TestSdNotify(t *testing.T) {
	if err := sdNotify("", "READY=1"); err != nil {
		t.Errorf("without a socket: %v", err)
	}
	path, conn := notifySocket(t)
	if err := sdNotify(path, "READY=1"); err != nil {
		t.Fatal(err)
	}
	if got := nextNotice(t, conn); got != "READY=1" {
		t.Errorf("received %q", got)
	}
	if err := sdNotify(filepath.Join(t.TempDir(), "none"), "READY=1"); err == nil {
		t.Error("notifying a missing socket succeeded")
	}
}

// TestRunNotifiesSystemd runs the broker as systemd would start a
// Type=notify unit: READY=1 comes once the listener accepts connections,
// STOPPING=1 when it shuts down.
func TestRunNotifiesSystemd(t *testing.T) {
	path, conn := notifySocket(t)
	t.Setenv("NOTIFY_SOCKET", path)
	b := startRun(t, "-listen", "127.0.0.1:0", "-data", "")
	if got := nextNotice(t, conn); !strings.HasPrefix(got, "READY=1\n") {
		t.Errorf("first notification %q, want READY=1", got)
	}
	c, err := net.DialTimeout("tcp", b.addrs[0].String(), 5*time.Second)
	if err != nil {
		t.Fatalf("ready, but the listener does not accept: %v", err)
	}
	_ = c.Close()
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
	if got := nextNotice(t, conn); got != "STOPPING=1" {
		t.Errorf("notification at shutdown %q, want STOPPING=1", got)
	}
}
