// Package testbrowser starts Debian's headless Chromium for the tests that
// drive a real browser (the dashboard, MQTT.js pages). Tests only import
// it, so chromedp never reaches a binary that ships.
package testbrowser

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium finds Debian's headless Chromium. Without it the test skips,
// except in CI (CI=true), where a missing browser is a failure: .ci/deps
// installs it.
func Chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed; CI must have it (.ci/deps installs the Debian package chromium)")
	}
	t.Skip("chromium is not installed (apt-get install chromium, or make deps as root): skipping the browser test")
	return ""
}

// Start runs a headless Chromium for the test, closed at cleanup, and
// returns its context with timeout. extra adds allocator options (window
// size, …). The flags keep it from reaching the network: this machine's is
// closed, and the tests talk to loopback only.
func Start(t *testing.T, timeout time.Duration, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(opts, extra...)...)
	t.Cleanup(cancelAlloc)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(cancelCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(cancelTimeout)
	return ctx
}
