//go:build unix

package logging

import (
	"bytes"
	"encoding/binary"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/internal/config"
)

// fakeDatagramSocket listens on a unix datagram socket, as syslog's
// /dev/log and the journal's socket do, and returns what arrives.
func fakeDatagramSocket(t *testing.T) (string, <-chan []byte) {
	t.Helper()
	// Short: a unix socket path is limited to about 100 bytes.
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "s")
	if len(path) > 100 {
		t.Skipf("temporary path %s too long for a unix socket", path)
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	got := make(chan []byte, 16)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			got <- bytes.Clone(buf[:n])
		}
	}()
	return path, got
}

func receive(t *testing.T, got <-chan []byte) []byte {
	t.Helper()
	select {
	case b := <-got:
		return b
	case <-time.After(5 * time.Second):
		t.Fatal("nothing arrived on the socket")
		return nil
	}
}

// TestSyslogOutput: log.syslog sends each entry to the daemon with its
// priority (daemon facility: warning is <28>), tag xmq and the sentence.
func TestSyslogOutput(t *testing.T) {
	path, got := fakeDatagramSocket(t)
	lg, err := New(&bytes.Buffer{}, config.Log{Level: "info", Format: "auto", Syslog: "unix://" + path})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	lg.Warn("client disconnected", zap.String("client_id", "sensor-7"), zap.Stringer("reason", stringer("keepalive_timeout")))
	msg := string(receive(t, got))
	if !strings.HasPrefix(msg, "<28>") || !strings.Contains(msg, " xmq[") ||
		!strings.HasSuffix(strings.TrimSpace(msg), "client sensor-7 disconnected: keepalive timeout") {
		t.Errorf("syslog message %q", msg)
	}
	lg.Debug("not at info level")
	lg.Error("store: sync failed", zap.String("dir", "/d"))
	if msg := string(receive(t, got)); !strings.HasPrefix(msg, "<27>") || !strings.Contains(msg, `store: sync failed	{"dir": "/d"}`) {
		t.Errorf("syslog message %q", msg)
	}
}

// TestJournalOutput: log.journald writes the native protocol: MESSAGE,
// PRIORITY, SYSLOG_IDENTIFIER and every field as a journal field; a value
// with a newline goes with its length.
func TestJournalOutput(t *testing.T) {
	path, got := fakeDatagramSocket(t)
	old := journalSocket
	journalSocket = path
	t.Cleanup(func() { journalSocket = old })
	lg, err := New(&bytes.Buffer{}, config.Log{Level: "info", Format: "auto", Journald: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	lg.Named("core").Info("client connected", zap.String("client_id", "sensor-7"), zap.String("remote", "10.0.0.5:1"),
		zap.String("transport", "tls"), zap.Uint8("protocol", 5), zap.String("note", "two\nlines"))
	d := receive(t, got)
	fields := parseJournal(t, d)
	for k, v := range map[string]string{
		"PRIORITY": "6", "SYSLOG_IDENTIFIER": "xmq", "XMQ_LOGGER": "core", "CLIENT_ID": "sensor-7",
		"REMOTE": "10.0.0.5:1", "TRANSPORT": "tls", "PROTOCOL": "5", "NOTE": "two\nlines",
	} {
		if fields[k] != v {
			t.Errorf("journal field %s = %q, want %q (all: %q)", k, fields[k], v, fields)
		}
	}
	if !strings.HasPrefix(fields["MESSAGE"], "client sensor-7 connected from 10.0.0.5:1 over tls (MQTT 5, new session)") {
		t.Errorf("MESSAGE %q", fields["MESSAGE"])
	}
}

// parseJournal decodes one native-protocol datagram.
func parseJournal(t *testing.T, d []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	for len(d) > 0 {
		nl := bytes.IndexByte(d, '\n')
		if nl < 0 {
			t.Fatalf("field without newline: %q", d)
		}
		line := string(d[:nl])
		d = d[nl+1:]
		if k, v, ok := strings.Cut(line, "="); ok {
			out[k] = v
			continue
		}
		n := binary.LittleEndian.Uint64(d[:8])
		out[line] = string(d[8 : 8+n])
		d = d[8+n+1:]
	}
	return out
}
