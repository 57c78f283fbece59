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
)

// TestDocsLinks: every relative link of README.md and docs/*.md names a
// file that exists, and every #anchor a heading (or an <a id>) of its
// file, so the reference split over docs/ stays one document to follow.
func TestDocsLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, filepath.Join(root, "README.md"))
	anchors := map[string]map[string]bool{}
	heading := regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	explicit := regexp.MustCompile(`<a id="([^"]+)">`)
	fence := regexp.MustCompile("(?s)```.*?```")
	slug := func(h string) string {
		h = strings.ToLower(strings.TrimSpace(h))
		h = regexp.MustCompile("[`*_]").ReplaceAllString(h, "")
		h = regexp.MustCompile(`[^\p{L}\p{N}\- ]`).ReplaceAllString(h, "")
		return strings.ReplaceAll(h, " ", "-")
	}
	texts := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := fence.ReplaceAllString(string(b), "")
		texts[f] = text
		set := map[string]bool{}
		for _, m := range heading.FindAllStringSubmatch(text, -1) {
			set[slug(m[1])] = true
		}
		for _, m := range explicit.FindAllStringSubmatch(text, -1) {
			set[m[1]] = true
		}
		anchors[filepath.Clean(f)] = set
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, f := range files {
		for _, m := range link.FindAllStringSubmatch(texts[f], -1) {
			url := m[1]
			if strings.Contains(url, "://") || strings.HasPrefix(url, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(url, "#")
			target := filepath.Clean(f)
			if path != "" {
				target = filepath.Clean(filepath.Join(filepath.Dir(f), path))
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s: link to %s: no such file", f, url)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if set, ok := anchors[target]; ok && !set[anchor] {
				t.Errorf("%s: link to %s: no heading #%s in %s", f, url, anchor, target)
			}
		}
	}
}

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
	var out syncBuffer
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
