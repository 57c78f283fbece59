// Command loadtest is xmq's load generator: it measures any MQTT broker
// over any transport xmq speaks, reproduces the published load tests by
// name and writes reports people can compare. `loadtest -h` lists every
// flag; `loadtest agent` serves a controller that splits the load.
//
// main is thin: it turns the first SIGINT/SIGTERM into a graceful stop
// (publishing ends, the case drains and is reported) and the second into
// a cancelled context, and hands over to run, the composition root, which
// tests call directly.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/xmq-io/xmq/internal/buildinfo"
)

// version, commit and date are stamped by make from git, as xmq's are;
// left empty, they come from what Go recorded in the binary.
var version, commit, date string

// build describes this binary.
func build() buildinfo.Info { return buildinfo.Get(version, commit, date) }

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	stop := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		close(stop)
		fmt.Fprintln(os.Stderr, "\nloadtest: stopping: draining and reporting (Ctrl-C again to abort)")
		<-sigs
		cancel()
	}()
	err := runWith(ctx, stop, os.Args[1:], os.Stdout, os.Stderr)
	signal.Stop(sigs)
	cancel()
	var early endedEarly
	switch {
	case errors.As(err, &early):
		fmt.Fprintln(os.Stderr, "loadtest: run ended early; the report's notes say why")
		os.Exit(1)
	case err != nil:
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
