package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/config"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// broker is a run in progress.
type broker struct {
	addrs  []net.Addr
	stderr *mqtttest.Buffer
	cancel context.CancelFunc
	done   chan error
}

// startRun starts run with args and waits until its listeners are bound.
// The run is stopped at cleanup if the test has not stopped it.
func startRun(t *testing.T, args ...string) *broker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &broker{stderr: &mqtttest.Buffer{}, cancel: cancel, done: make(chan error, 1)}
	ready := make(chan []net.Addr, 1)
	// A free port for the dashboard, so runs never fight over 18083; a
	// test's own -web comes later and wins.
	args = append([]string{"-web", "127.0.0.1:0"}, args...)
	go func() {
		b.done <- run(ctx, args, io.Discard, b.stderr, withReady(func(a []net.Addr) { ready <- a }))
	}()
	select {
	case b.addrs = <-ready:
	case err := <-b.done:
		cancel()
		t.Fatalf("run(%q) returned before it was ready: %v\n%s", args, err, b.stderr)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatalf("run(%q) not ready after 10s\n%s", args, b.stderr)
	}
	t.Cleanup(func() { cancel(); <-b.done })
	return b
}

// stop cancels run's context and returns what run returned.
func (b *broker) stop(t *testing.T) error {
	t.Helper()
	b.cancel()
	select {
	case err := <-b.done:
		b.done <- err // for the cleanup
		return err
	case <-time.After(15 * time.Second):
		t.Fatalf("run did not return after its context was cancelled\n%s", b.stderr)
		return nil
	}
}

func TestRunServesMQTT(t *testing.T) {
	tests := []struct {
		name    string
		version byte
	}{
		{"MQTT 3.1.1", codec.V311},
		{"MQTT 5", codec.V5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := startRun(t, "-listen", "127.0.0.1:0", "-data", "", "-log-format", "json")
			if len(b.addrs) != 1 {
				t.Fatalf("ready reported %v, want one address", b.addrs)
			}
			addr := b.addrs[0].String()
			if strings.HasSuffix(addr, ":0") {
				t.Fatalf("ready reported %s: port 0 not resolved", addr)
			}
			if log := b.stderr.String(); !strings.Contains(log, `"address":"`+addr+`"`) {
				t.Errorf("start log does not name the bound address %s:\n%s", addr, log)
			}

			c := mqtttest.DialConn(t, "mqtt://"+addr, nil, tt.version)
			c.Timeout = 10 * time.Second
			c.Connect(mqtttest.ConnectPacket(tt.version, "run-test", func(p *codec.Connect) { p.KeepAlive = 30 }))

			if err := b.stop(t); err != nil {
				t.Errorf("run returned %v after a clean shutdown, want nil", err)
			}
			// The broker told the client it was going away (MQTT 5) and closed the connection.
			p, _, err := c.NextWithin(c.Timeout)
			if tt.version == codec.V5 {
				d, ok := p.(*codec.Disconnect)
				if err != nil || !ok || d.ReasonCode != codec.ServerShuttingDown {
					t.Errorf("after shutdown read %v, %v; want DISCONNECT Server Shutting Down", p, err)
				}
				_, _, err = c.NextWithin(c.Timeout)
			}
			if !errors.Is(err, io.EOF) {
				t.Errorf("after shutdown read error %v, want EOF", err)
			}
			log := b.stderr.String()
			for _, want := range []string{`"msg":"xmq started"`, `"msg":"xmq stopping"`, `"msg":"xmq stopped"`} {
				if !strings.Contains(log, want) {
					t.Errorf("log lacks %s:\n%s", want, log)
				}
			}
		})
	}
}

func TestRunSeveralListeners(t *testing.T) {
	b := startRun(t, "-listen", "127.0.0.1:0,127.0.0.1:0", "-data", "")
	if len(b.addrs) != 2 || b.addrs[0].String() == b.addrs[1].String() {
		t.Fatalf("ready reported %v, want two distinct addresses", b.addrs)
	}
	for _, a := range b.addrs {
		c, err := net.DialTimeout("tcp", a.String(), 5*time.Second)
		if err != nil {
			t.Errorf("dial %s: %v", a, err)
			continue
		}
		_ = c.Close()
	}
	if err := b.stop(t); err != nil {
		t.Errorf("run: %v", err)
	}
}

func TestRunCreatesDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "data")
	b := startRun(t, "-listen", "127.0.0.1:0", "-data", dir)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Errorf("data directory %s not created: %v", dir, err)
	}
	if log := b.stderr.String(); !strings.Contains(log, "store opened") {
		t.Errorf("log does not say the store was opened:\n%s", log)
	}
	if fi, err := os.Stat(filepath.Join(dir, "store")); err != nil || !fi.IsDir() {
		t.Errorf("store directory not created in %s: %v", dir, err)
	}
	if err := b.stop(t); err != nil {
		t.Errorf("run: %v", err)
	}
}

func TestRunErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = busy.Close() })
	tests := []struct {
		name  string
		args  []string
		err   string
		usage bool
	}{
		{name: "address in use", args: []string{"-listen", "127.0.0.1:0," + busy.Addr().String(), "-data", ""}, err: "is in use"},
		{name: "core rejects option", args: []string{"-c", writeFile(t, "broker:\n  max_inflight: 70000\n"), "-listen", "127.0.0.1:0", "-data", ""}, err: "max inflight"},
		{name: "bad flag", args: []string{"-nope"}, err: "-nope", usage: true},
		{name: "version with argument", args: []string{"version", "x"}, err: "no arguments", usage: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			err := run(ctx, tt.args, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("run(%q) = %v, want an error containing %q", tt.args, err, tt.err)
			}
			var ue config.UsageError
			if errors.As(err, &ue) != tt.usage {
				t.Errorf("run(%q) = %v: usage error %v, want %v", tt.args, err, !tt.usage, tt.usage)
			}
		})
	}
}

// TestRunVersion checks every way to ask for the version, and that the
// line holds version, Go version and platform (the commit and date show
// when make stamps them or Go records them: internal/buildinfo's tests).
func TestRunVersion(t *testing.T) {
	want := "xmq " + build().String() + "\n"
	if !strings.Contains(want, runtime.Version()) || !strings.Contains(want, runtime.GOOS+"/"+runtime.GOARCH) {
		t.Fatalf("version line %q lacks the Go version or the platform", want)
	}
	for _, args := range [][]string{{"version"}, {"-version"}, {"--version"}, {"-data", "", "-version"}} {
		var out bytes.Buffer
		if err := run(context.Background(), args, &out, io.Discard); err != nil {
			t.Fatalf("run %q: %v", args, err)
		}
		if got := out.String(); got != want {
			t.Errorf("run %q printed %q, want %q", args, got, want)
		}
	}
}

func TestRunHelp(t *testing.T) {
	fs := config.Flags()
	for _, arg := range []string{"-h", "--help", "-help"} {
		t.Run(arg, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if err := run(context.Background(), []string{arg}, &out, &errOut); err != nil {
				t.Fatalf("run %s: %v", arg, err)
			}
			if errOut.Len() > 0 {
				t.Errorf("run %s wrote to stderr: %q", arg, errOut.String())
			}
			help := out.String()
			fs.VisitAll(func(fl *flag.Flag) {
				if !regexp.MustCompile(`(?m)^  -` + fl.Name + `\b|, -` + fl.Name + `\b`).MatchString(help) {
					t.Errorf("help does not document -%s:\n%s", fl.Name, help)
				}
			})
			for _, want := range []string{"xmq version", "xmq.example.yaml", "xmq store check", "survive a restart", "in memory"} {
				if !strings.Contains(help, want) {
					t.Errorf("help lacks %q", want)
				}
			}
		})
	}
}

// waitUntil polls cond until it holds, failing the test after 15 s: a
// broker process takes longer than mqtttest.Timeout to do some things
// under the race detector.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	mqtttest.WaitWithin(t, 15*time.Second, what, cond)
}

// dialMQTT connects to the broker at addr as client id at protocol level
// v, with a persistent session unless clean. It returns the error of a
// broker that is down, crashing or refusing rather than failing t.
func dialMQTT(t testing.TB, addr, id string, v byte, clean bool) (*mqtttest.Conn, *codec.Connack, error) {
	t.Helper()
	mods := []func(*codec.Connect){}
	if !clean {
		mods = append(mods, mqtttest.Persistent)
	}
	return mqtttest.TryDial(t, "mqtt://"+addr, nil, mqtttest.ConnectPacket(v, id, mods...))
}
