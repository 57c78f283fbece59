package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/xmq-io/xmq/internal/config"
)

// consoleLine logs one entry through the console encoder (no terminal)
// and returns the line without its time and level.
func consoleLine(t *testing.T, msg string, fields ...zap.Field) string {
	t.Helper()
	var buf bytes.Buffer
	lg, err := newLogger(&buf, config.Log{Level: "debug", Format: "console"})
	if err != nil {
		t.Fatal(err)
	}
	lg.Named("core").Info(msg, fields...)
	line := strings.TrimSpace(buf.String())
	// 2026-01-02 15:04:05.000	INFO	core	client …
	parts := strings.SplitN(line, "\t", 4)
	if len(parts) != 4 {
		t.Fatalf("console line %q", line)
	}
	return parts[3]
}

// TestLogSentences: on the console the broker's connection events read as
// sentences, Mosquitto's way; the fields a sentence does not use follow it,
// and other messages are written as before.
func TestLogSentences(t *testing.T) {
	tests := []struct {
		name   string
		msg    string
		fields []zap.Field
		want   string
	}{
		{"connected", "client connected", []zap.Field{zap.String("username", "alice"), zap.Uint8("protocol", 5),
			zap.String("transport", "tls"), zap.Bool("clean_start", true), zap.Bool("session_present", false),
			zap.Duration("keepalive", 60*time.Second), zap.Bool("bridge", false), zap.String("remote", "10.0.0.5:51234"),
			zap.String("listener", "tls"), zap.String("client_id", "sensor-7")},
			"client sensor-7 connected from 10.0.0.5:51234 over tls as alice (MQTT 5, keepalive 60, clean start)"},
		{"resumed over a named listener", "client connected", []zap.Field{zap.String("username", ""), zap.Uint8("protocol", 4),
			zap.String("transport", "tcp"), zap.Bool("clean_start", false), zap.Bool("session_present", true),
			zap.Duration("keepalive", 0), zap.Bool("bridge", false), zap.String("remote", "192.0.2.1:4000"),
			zap.String("listener", "lan"), zap.String("client_id", "meter")},
			"client meter connected from 192.0.2.1:4000 over tcp (listener lan) (MQTT 3.1.1, no keepalive, session resumed)"},
		{"disconnected", "client disconnected", []zap.Field{zap.Stringer("reason", stringer("keepalive_timeout")),
			zap.Duration("connected_for", 3723*time.Second+400*time.Millisecond), zap.String("remote", "10.0.0.5:51234"),
			zap.String("listener", "tls"), zap.String("client_id", "sensor-7")},
			"client sensor-7 disconnected: keepalive timeout (connected for 1h2m3s)"},
		{"refused", "refusing connection", []zap.Field{zap.String("client_id", "sensor-7"), zap.String("username", "mallory"),
			zap.Stringer("reason_code", stringer("Bad User Name or Password")), zap.String("why", "auth: wrong password"),
			zap.String("remote", "203.0.113.9:1000"), zap.String("listener", "tcp")},
			"client sensor-7 refused from 203.0.113.9:1000 on listener tcp as mallory: Bad User Name or Password (auth: wrong password)"},
		{"closing", "closing connection: bad packet", []zap.Field{zap.String("client_id", "x"), zap.Error(os.ErrInvalid),
			zap.String("remote", "127.0.0.1:9"), zap.String("listener", "tcp")},
			"client x from 127.0.0.1:9 on listener tcp: closing connection, bad packet: invalid argument"},
		{"other messages unchanged", "store opened", []zap.Field{zap.String("dir", "/d")},
			`store opened	{"dir": "/d"}`},
		{"unused fields kept", "client disconnected", []zap.Field{zap.Stringer("reason", stringer("normal")),
			zap.String("client_id", "c"), zap.Int("extra", 3)},
			`client c disconnected: sent DISCONNECT	{"extra": 3}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := consoleLine(t, tt.msg, tt.fields...); got != tt.want {
				t.Errorf("console line\n  %s\nwant\n  %s", got, tt.want)
			}
		})
	}
}

type stringer string

func (s stringer) String() string { return string(s) }

// TestLogJSONUnchanged: piped (JSON), the events keep their message and
// fields: the sentences are only for people.
func TestLogJSONUnchanged(t *testing.T) {
	var buf bytes.Buffer
	lg, err := newLogger(&buf, config.Log{Level: "info", Format: "auto"})
	if err != nil {
		t.Fatal(err)
	}
	lg.Info("client connected", zap.String("client_id", "sensor-7"), zap.String("transport", "tls"))
	if got := buf.String(); !strings.Contains(got, `"msg":"client connected"`) || !strings.Contains(got, `"client_id":"sensor-7"`) {
		t.Errorf("JSON line %s", got)
	}
}

// TestRunLogsSentences: a broker run with -log-format console logs a
// client's connection and disconnection as sentences.
func TestRunLogsSentences(t *testing.T) {
	b := startRun(t, "-listen", "127.0.0.1:0", "-data", "", "-log-format", "console")
	c, _, err := dialMQTT(t, b.addrs[0].String(), "sensor-7", 5, true)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	waitUntil(t, "the disconnect", func() bool {
		return strings.Contains(b.stderr.String(), "client sensor-7 disconnected: connection lost")
	})
	if log := b.stderr.String(); !strings.Contains(log, "client sensor-7 connected from 127.0.0.1:") ||
		!strings.Contains(log, " over tcp (MQTT 5, no keepalive, clean start)") {
		t.Errorf("no connection sentence:\n%s", log)
	}
}

// TestLogFileRotation: log.file rotates at max_size_mb and keeps
// max_backups old files.
func TestLogFileRotation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "xmq.log")
	lg, err := newLogger(&bytes.Buffer{}, config.Log{Level: "info", Format: "auto", File: file, MaxSizeMB: 1, MaxBackups: 2})
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Repeat("x", 1000)
	for range 3500 { // about 3.6 MB: three rotations
		lg.Info("filler", zap.String("x", line))
	}
	lg.close()
	// lumberjack removes the backups beyond max_backups on a goroutine
	// of its own: wait for it.
	var matches []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		matches, _ = filepath.Glob(filepath.Join(filepath.Dir(file), "xmq-*.log"))
		if len(matches) == 2 || time.Now().After(deadline) {
			break
		}
	}
	if len(matches) != 2 {
		t.Errorf("rotated files %v, want max_backups 2", matches)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Size() > 1<<20 {
		t.Errorf("current file %v %v, want at most 1 MB", fi, err)
	}
	// Readable by the group, the current file and the rotated ones.
	for _, f := range append(matches, file) {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != logFileMode {
			t.Errorf("%s: mode %v, want %v", f, fi.Mode().Perm(), os.FileMode(logFileMode))
		}
	}
	data, _ := os.ReadFile(file)
	if !strings.HasPrefix(string(data), `{"level":"info"`) {
		t.Errorf("a file gets JSON with format auto: %.80s", data)
	}
}

// TestLogFileUnwritable: a log file that cannot be opened stops the start.
func TestLogFileUnwritable(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := newLogger(&bytes.Buffer{}, config.Log{Level: "info", Format: "auto", File: filepath.Join(blocker, "xmq.log"), MaxSizeMB: 1})
	if err == nil || !strings.Contains(err.Error(), "log.file") {
		t.Errorf("log file under a file: %v", err)
	}
}

var _ zapcore.Core = (*sinkCore)(nil)
