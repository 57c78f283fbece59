// Command loadtest is xmq's load generator: it measures any MQTT broker
// over any transport xmq speaks, reproduces the published load tests by
// name and writes reports people can compare. `loadtest -h` lists every
// flag; `loadtest agent` serves a controller that splits the load.
//
// main is thin: it turns SIGINT/SIGTERM into a cancelled context and hands
// over to run, the composition root, which tests call directly.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"xmq/internal/buildinfo"
)

// version, commit and date are stamped by make from git, as xmq's are;
// left empty, they come from what Go recorded in the binary.
var version, commit, date string

// build describes this binary.
func build() buildinfo.Info { return buildinfo.Get(version, commit, date) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
