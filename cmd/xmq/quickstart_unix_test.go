//go:build unix

package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/internal/mqtttest"
)

// TestReadmeQuickStart runs the README's quick start as written: the
// broker as `go run ./cmd/xmq` starts it (the same binary, on a free port
// and its own data directory), then its subscriber and its publisher; the
// subscriber prints the message.
func TestReadmeQuickStart(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "## Quick start")
	block := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(text[start:])
	if start < 0 || block == nil {
		t.Fatal("README.md has no Quick start with a sh block")
	}
	var cmds []string
	comment := regexp.MustCompile(`\s+# .*$`) // not the # of a topic filter
	for line := range strings.Lines(block[1]) {
		if c := strings.TrimSpace(comment.ReplaceAllString(strings.TrimRight(line, "\n"), "")); c != "" {
			cmds = append(cmds, c)
		}
	}
	if len(cmds) != 3 || cmds[0] != "go run ./cmd/xmq" || !strings.HasPrefix(cmds[1], "mosquitto_sub ") || !strings.HasPrefix(cmds[2], "mosquitto_pub ") {
		t.Fatalf("the quick start is not the three commands this test runs: %q", cmds)
	}
	_, err1 := exec.LookPath("mosquitto_sub")
	_, err2 := exec.LookPath("mosquitto_pub")
	need(t, "mosquitto_sub and mosquitto_pub", "apt-get install mosquitto-clients, or make deps as root", err1 == nil && err2 == nil)
	p := startBroker(t, t.TempDir())
	_, port, _ := net.SplitHostPort(p.addr)
	onPort := func(cmd string) *exec.Cmd {
		return exec.Command("sh", "-c", strings.Replace(cmd, "-h 127.0.0.1", "-h 127.0.0.1 -p "+port, 1))
	}
	var out mqtttest.Buffer
	sub := onPort(cmds[1] + " -C 1 -W 10")
	sub.Stdout = &out
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sub.Wait() }()
	// Published until the subscriber, which may not have subscribed yet,
	// has it.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), "demo/hello hello"); {
		if time.Now().After(deadline) {
			t.Fatalf("the subscriber printed %q\n%s", out.String(), p.stderr)
		}
		if b, err := onPort(cmds[2]).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", cmds[2], err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Errorf("%s: %v", cmds[1], err)
	}
}
