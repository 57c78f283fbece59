// Command xmq runs the xmq MQTT broker.
//
// main is thin: it turns SIGINT/SIGTERM into a cancelled context and hands
// over to run, the composition root, which tests call directly.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/xmq-io/xmq/internal/buildinfo"
	"github.com/xmq-io/xmq/internal/config"
)

// version, commit and date are stamped by make from git (-ldflags
// "-X main.version=v0.1.0 -X main.commit=… -X main.date=…"); left empty by
// a plain go build or go install, they come from what Go recorded in the
// binary (internal/buildinfo).
var version, commit, date string

// build describes this binary.
func build() buildinfo.Info { return buildinfo.Get(version, commit, date) }

// printVersion is `xmq version`, -version and --version: version, commit,
// date, Go version and platform on one line.
func printVersion(w io.Writer) { fmt.Fprintln(w, "xmq", build()) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "xmq:", err)
		var ue config.UsageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
