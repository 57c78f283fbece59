package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/internal/mqtttest"
	"github.com/xmq-io/xmq/loadtest"
)

// TestFlagPlaceholders: the help shows what each flag takes in words a
// reader understands (-rate N, -duration DURATION), never Go's type names.
func TestFlagPlaceholders(t *testing.T) {
	var v flagValues
	fs := newFlagSet(&v, io.Discard)
	goTypes := regexp.MustCompile(`^(int|uint|float|float64|duration|string|value)$`)
	fs.VisitAll(func(f *flag.Flag) {
		name, _ := flag.UnquoteUsage(f)
		if goTypes.MatchString(name) {
			t.Errorf("-%s shows the placeholder %q: name what it takes (N, DURATION, FILE …)", f.Name, name)
		}
		if _, isBool := f.Value.(interface{ IsBoolFlag() bool }); !isBool && name == "" {
			t.Errorf("-%s has no placeholder", f.Name)
		}
	})
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-rate N", "-duration DURATION", "-cafile FILE", "-pubs N", "Ctrl-C"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

// TestDurationZeroRunsUntilStop: -duration 0 publishes, with a live
// progress line, until the first Ctrl-C (stop), then drains and reports
// every message delivered; the remaining cases are not run.
func TestDurationZeroRunsUntilStop(t *testing.T) {
	addr := startBroker(t)
	stop := make(chan struct{})
	var stdout bytes.Buffer
	stderr := &mqtttest.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- runWith(context.Background(), stop, []string{"-addr", addr, "-mode", "pubsub", "-pubs", "2", "-subs", "1",
			"-rate", "100", "-qos", "1", "-duration", "0", "-payload", "64,128", "-json"}, &stdout, stderr)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), "running") || !strings.Contains(stderr.String(), "Ctrl-C") {
		if time.Now().After(deadline) {
			t.Fatalf("no live progress line while running:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(1200 * time.Millisecond) // two publishers at 100 msg/s: well over 100 messages
	close(stop)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v\n%s", err, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the run did not end after stop")
	}
	var rep loadtest.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("-json: %v", err)
	}
	if len(rep.Cases) != 1 {
		t.Fatalf("%d cases reported, want the one stopped", len(rep.Cases))
	}
	c := rep.Cases[0]
	if c.Published < 100 || c.Unique != c.Expected || c.LostMessages != 0 {
		t.Errorf("published %d, delivered %d of %d: want everything published until stop delivered", c.Published, c.Unique, c.Expected)
	}
	if notes := strings.Join(rep.Notes, "\n"); !strings.Contains(notes, "stopped (Ctrl-C) after case 64 B: 1 more not run") {
		t.Errorf("notes:\n%s", notes)
	}

	err := run(context.Background(), []string{"-addr", addr, "-duration", "0", "-agents", "127.0.0.1:1"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "agents") {
		t.Errorf("-duration 0 with agents: %v", err)
	}
}

// TestCompareCommand: two -json runs of the same command, tcp against
// ws, become one comparison on stdout and one page, with the flags after
// the files as the issue writes them.
func TestCompareCommand(t *testing.T) {
	addr := startBroker(t)
	dir := t.TempDir()
	var files []string
	for _, name := range []string{"a", "b"} {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"-addr", addr, "-mode", "pubsub", "-pubs", "2", "-subs", "1", "-rate", "50",
			"-qos", "1", "-duration", "300ms", "-json", "-progress=false"}, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, name+".json")
		if err := os.WriteFile(f, out.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	page := filepath.Join(dir, "out.html")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"compare", files[0], files[1], "-html", page, "-labels", "before,after"}, &out, io.Discard); err != nil {
		t.Fatalf("compare: %v", err)
	}
	if !strings.Contains(out.String(), "after vs before") || !strings.Contains(out.String(), "delivered/s") {
		t.Errorf("comparison:\n%s", out.String())
	}
	if b, err := os.ReadFile(page); err != nil || !strings.Contains(string(b), "by percentile") {
		t.Errorf("page: %v", err)
	}
	for _, args := range [][]string{{"compare", files[0]}, {"compare", files[0], files[1], "-labels", "one"}, {"compare", "-x", files[0], files[1]}} {
		var ue usageError
		if err := run(context.Background(), args, io.Discard, io.Discard); !errors.As(err, &ue) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	if err := run(context.Background(), []string{"compare", files[0], filepath.Join(dir, "missing.json")}, io.Discard, io.Discard); err == nil {
		t.Error("a missing report was accepted")
	}
	out.Reset()
	if err := run(context.Background(), []string{"compare", "-h"}, &out, io.Discard); err != nil || !strings.Contains(out.String(), "side by side") {
		t.Errorf("compare -h: %v\n%s", err, out.String())
	}
}
