package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/mqtttest"
	"github.com/xmq-io/xmq/listeners"
	"github.com/xmq-io/xmq/loadtest"
)

func TestPublishedCommandsParse(t *testing.T) {
	base := []string{"-addr", "HOST:1883", "-user", "U", "-pass", "P"}
	tests := []struct {
		args  []string
		check func(o loadtest.Options) bool
	}{
		{[]string{"-mode", "conn", "-levels", "1000,10000,30000,50000", "-hold", "3s", "-dial-concurrency", "200"},
			func(o loadtest.Options) bool {
				return o.Mode == loadtest.ModeConn && reflect.DeepEqual(o.Levels, []int{1000, 10000, 30000, 50000}) &&
					o.Hold == 3*time.Second && o.DialConcurrency == 200
			}},
		{[]string{"-mode", "conn", "-levels", "1000", "-hold", "1s", "-wake", "20", "-wake-idle", "250ms"},
			func(o loadtest.Options) bool {
				return o.Mode == loadtest.ModeConn && o.Wake == 20 && o.WakeIdle == 250*time.Millisecond
			}},
		{[]string{"-mode", "conn", "-wake", "20"},
			func(o loadtest.Options) bool { return o.Wake == 20 && o.WakeIdle == 300*time.Millisecond }},
		{[]string{"-mode", "pub", "-pubs", "10", "-qos", "0", "-payload", "64", "-duration", "10s"},
			func(o loadtest.Options) bool {
				return o.Mode == loadtest.ModePub && o.Pubs == 10 && o.QoS == 0 && reflect.DeepEqual(o.Payloads, []int{64}) &&
					o.Duration == 10*time.Second && o.Rate == 0 && o.Inflight == 64
			}},
		{[]string{"-mode", "pubsub", "-subs", "10", "-pubs", "10", "-qos", "0", "-rate", "100", "-payload", "64", "-duration", "10s"},
			func(o loadtest.Options) bool {
				return o.Mode == loadtest.ModePubSub && o.Subs == 10 && o.Pubs == 10 && o.Rate == 100 && o.Duration == 10*time.Second
			}},
	}
	for _, tt := range tests {
		v, _, err := parseArgs(append(append([]string{}, base...), tt.args...), io.Discard)
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		o := v.o
		if o.Addr != "HOST:1883" || o.User != "U" || o.Pass != "P" || o.MQTT != "5" || !o.Clean {
			t.Errorf("%q: target/session %+v", tt.args, o)
		}
		if !tt.check(o) {
			t.Errorf("%q: options %+v", tt.args, o)
		}
	}
}

func TestEveryFlagParses(t *testing.T) {
	args := []string{"-addr", "wss://b:8084/mqtt", "-transport", "wss", "-insecure", "-tls-resume", "-cafile", "ca.pem", "-cert", "c.pem",
		"-key", "k.pem", "-ws-path", "/x", "-mqtt", "5", "-clean=false", "-keepalive", "30s", "-connect-timeout", "3s",
		"-id-prefix", "run1", "-mode", "p2p", "-pubs", "7", "-subs", "3", "-qos", "2", "-payload", "16,256",
		"-duration", "2s", "-rate", "0.5", "-inflight", "8", "-topic", "a/%i/b", "-sub-topic", "a/%i/b", "-loop",
		"-churn", "5s", "-drain", "1s", "-src-ips", "127.0.0.2-3", "-conn-rate", "100", "-levels", "5",
		"-hold", "1s", "-wake-idle", "100ms", "-dial-concurrency", "9", "-json", "-report", "r.md", "-html", "r.html", "-metrics-url", "http://m/metrics",
		"-broker-pid", "42", "-assert", "p99<5ms", "-agents", "a:9090,b:9090", "-progress=false"}
	v, _, err := parseArgs(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o := v.o
	want := loadtest.Options{
		Target: loadtest.Target{Addr: "wss://b:8084/mqtt", Transport: "wss", WSPath: "/x", Insecure: true, TLSResume: true,
			CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem", SrcIPs: []string{"127.0.0.2", "127.0.0.3"}},
		Session: loadtest.Session{MQTT: "5", Clean: false, KeepAlive: 30 * time.Second, ConnectTimeout: 3 * time.Second, IDPrefix: "run1"},
		Mode:    loadtest.ModeP2P,
		Levels:  []int{5}, Hold: time.Second, WakeIdle: 100 * time.Millisecond, DialConcurrency: 9, ConnRate: 100, Pubs: 7, Subs: 3, QoS: 2,
		Payloads: []int{16, 256}, Duration: 2 * time.Second, Rate: 0.5, Inflight: 8, Topic: "a/%i/b", SubTopic: "a/%i/b",
		Loop: true, Churn: 5 * time.Second, Drain: time.Second}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("options\n got %+v\nwant %+v", o, want)
	}
	if !v.jsonOut || v.report != "r.md" || v.htmlOut != "r.html" || v.metricsURL != "http://m/metrics" ||
		v.brokerPID != 42 || v.asserts != "p99<5ms" || v.agents != "a:9090,b:9090" || v.progress {
		t.Errorf("report flags %+v", v)
	}
}

func TestModeDefaultsAndScenarios(t *testing.T) {
	v, _, err := parseArgs([]string{"-mode", "p2p"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if v.o.QoS != 1 || v.o.Rate != 1 || v.o.Clean {
		t.Errorf("p2p defaults: qos %d rate %v clean %v; want 1, 1, false", v.o.QoS, v.o.Rate, v.o.Clean)
	}
	v, _, err = parseArgs([]string{"-mode", "p2p", "-qos", "0", "-clean"}, io.Discard)
	if err != nil || v.o.QoS != 0 || !v.o.Clean {
		t.Errorf("p2p with -qos 0 -clean: %+v, %v", v.o, err)
	}
	v, scArgs, err := parseArgs([]string{"-scenario", "sharesub-50K-500-50K-50K", "-scale", "0.01", "-duration", "2s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o := v.o
	if o.Mode != loadtest.ModeFanIn || o.Pubs != 500 || o.Subs != 5 || o.QoS != 1 || o.Rate != 1 || o.Payloads[0] != 16 ||
		o.SubTopic != "$share/benchmark/test/#" || o.Duration != 2*time.Second || len(scArgs) == 0 {
		t.Errorf("scenario options %+v (args %q)", o, scArgs)
	}
	// Every scenario parses and validates at a small scale.
	for name := range loadtest.Scenarios {
		if _, _, err := parseArgs([]string{"-scenario", name, "-scale", "0.0001"}, io.Discard); err != nil {
			t.Errorf("scenario %s: %v", name, err)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-nope"}, {"-levels", "10,x", "-mode", "conn"}, {"-payload", ""}, {"-scenario", "nope"},
		{"-scenario", "p2p-persistent", "-scale", "0"}, {"-mode", "storm"}, {"extra"}, {"-qos", "3"},
		{"-assert", "p99<soon"}, {"-src-ips", "nowhere"}, {"-addr", "http://x"}, {"-pubs", "0"},
	} {
		err := run(context.Background(), args, io.Discard, io.Discard)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("run(%q) = %v, want a usage error", args, err)
		}
	}
}

func TestHelpListsEveryFlag(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, &out, io.Discard); err != nil {
		t.Fatalf("-h: %v", err)
	}
	help := out.String()
	var v flagValues
	newFlagSet(&v, io.Discard).VisitAll(func(f *flag.Flag) {
		if !strings.Contains(help, "-"+f.Name) {
			t.Errorf("help does not document -%s", f.Name)
		}
	})
	for _, want := range []string{"conn", "pubsub", "fanin", "p2p", "sharesub-50K-500-50K-50K", "ws-conn-unique-topic",
		"delivered", "loadtest agent"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

// startBroker runs an in-process xmq on 127.0.0.1:0 and returns its address.
func startBroker(t *testing.T) string {
	t.Helper()
	l, err := listeners.ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := core.New(core.Options{SysInterval: -1}, core.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return mqtttest.Serve(t, srv, l, "test", core.ErrServerClosed)
}

func TestRunWritesEveryReport(t *testing.T) {
	addr := startBroker(t)
	dir := t.TempDir()
	md, page := filepath.Join(dir, "r.md"), filepath.Join(dir, "r.html")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"-addr", addr, "-mode", "pubsub", "-pubs", "2", "-subs", "2", "-rate", "50",
		"-qos", "1", "-duration", "500ms", "-json", "-report", md, "-html", page, "-assert", "loss=0,delivered>=1,errors=0",
		"-progress=false"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	var rep loadtest.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("-json output: %v\n%s", err, stdout.String())
	}
	if len(rep.Cases) != 1 || rep.Cases[0].Unique == 0 || len(rep.Asserts) != 3 || len(rep.AssertFailures()) != 0 {
		t.Errorf("report: %+v", rep)
	}
	if rep.Options.Pass != "" || strings.Join(rep.Command, " ") == "" {
		t.Errorf("command %q", rep.Command)
	}
	for _, f := range []string{md, page} {
		b, err := os.ReadFile(f)
		if err != nil || len(b) < 500 {
			t.Errorf("%s: %d bytes, %v", f, len(b), err)
		}
	}
}

// TestRunEndedEarlyOnce: a run that stops on an error states it once, in
// the report's notes; run returns it as endedEarly, which main prints as
// one line pointing at them.
func TestRunEndedEarlyOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	var stdout, stderr bytes.Buffer
	err = run(context.Background(), []string{"-addr", addr, "-pubs", "1", "-duration", "200ms", "-progress=false"}, &stdout, &stderr)
	var early endedEarly
	if !errors.As(err, &early) {
		t.Fatalf("run: %v, want endedEarly", err)
	}
	out := stdout.String() + stderr.String()
	if n := strings.Count(out, "connection refused"); n != 1 {
		t.Errorf("the error is in the output %d times, want once:\n%s", n, out)
	}
}

func TestMissedObjectiveFails(t *testing.T) {
	addr := startBroker(t)
	var stdout bytes.Buffer
	err := run(context.Background(), []string{"-addr", addr, "-mode", "conn", "-levels", "5", "-hold", "0s",
		"-assert", "p99<1ns,established>=1", "-progress=false"}, &stdout, io.Discard)
	var ae assertError
	if !errors.As(err, &ae) || len(ae.failed) != 1 || ae.failed[0].Assertion != "p99<1ns" {
		t.Fatalf("run = %v, want the p99 objective missed", err)
	}
	if !strings.Contains(stdout.String(), "assert FAIL p99<1ns") || !strings.Contains(stdout.String(), "assert PASS established>=1") {
		t.Errorf("tables:\n%s", stdout.String())
	}
}

// serve runs a subcommand until the test ends and waits for its port.
func serve(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, io.Discard, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%q: %v", args, err)
		}
	})
	addr := args[len(args)-1]
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			return
		}
	}
	t.Fatalf("%q did not listen", args)
}

func TestAgentAndSinkSubcommands(t *testing.T) {
	addr := startBroker(t)
	agent := mqtttest.FreeAddr(t)
	serve(t, "agent", "-listen", agent)
	var stdout bytes.Buffer
	if err := run(context.Background(), []string{"-addr", addr, "-agents", agent, "-mode", "pubsub", "-pubs", "2",
		"-subs", "2", "-qos", "1", "-rate", "50", "-duration", "400ms", "-assert", "loss=0", "-progress=false"},
		&stdout, io.Discard); err != nil {
		t.Fatalf("controller with an agent: %v\n%s", err, stdout.String())
	}
	if !strings.Contains(stdout.String(), "1 process(es)") {
		t.Errorf("controller output:\n%s", stdout.String())
	}

	sink := mqtttest.FreeAddr(t)
	serve(t, "sink", "-listen", sink)
	stdout.Reset()
	if err := run(context.Background(), []string{"-addr", sink, "-mode", "pub", "-pubs", "1", "-qos", "1",
		"-duration", "300ms", "-assert", "rate>0", "-progress=false"}, &stdout, io.Discard); err != nil {
		t.Fatalf("pub against the sink: %v\n%s", err, stdout.String())
	}
}

func TestRunVersion(t *testing.T) {
	want := "loadtest " + build().String() + "\n"
	for _, args := range [][]string{{"version"}, {"-version"}, {"--version"}} {
		var out bytes.Buffer
		if err := run(context.Background(), args, &out, io.Discard); err != nil {
			t.Fatalf("run %q: %v", args, err)
		}
		if out.String() != want {
			t.Errorf("run %q printed %q, want %q", args, out.String(), want)
		}
	}
	var ue usageError
	if err := run(context.Background(), []string{"version", "x"}, io.Discard, io.Discard); !errors.As(err, &ue) {
		t.Errorf("version x: %v, want a usage error", err)
	}
}
