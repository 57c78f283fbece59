package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/xmq-io/xmq/internal/config"
)

// runConfig is `xmq config print [flags]` and `xmq config env`.
func runConfig(args, env []string, stdout io.Writer) error {
	if len(args) == 0 {
		return config.UsageError{Err: errors.New("usage: xmq config print [flags] | xmq config env (xmq config -h)")}
	}
	switch args[0] {
	case "print":
		show, rest := false, make([]string, 0, len(args)-1)
		for _, a := range args[1:] {
			if a == "-show-secrets" || a == "--show-secrets" {
				show = true
				continue
			}
			rest = append(rest, a)
		}
		cfg, src, err := loadConfigEnv(rest, env)
		switch {
		case errors.Is(err, config.ErrHelp):
			printConfigUsage(stdout)
			return nil
		case errors.Is(err, config.ErrVersion):
			printVersion(stdout)
			return nil
		case err != nil:
			return err
		}
		return config.Print(stdout, cfg, src, show)
	case "env":
		if len(args) > 1 {
			return config.UsageError{Err: fmt.Errorf("config env takes no arguments, got %q", args[1:])}
		}
		config.PrintEnv(stdout)
		return nil
	case "-h", "-help", "--help", "help":
		printConfigUsage(stdout)
		return nil
	}
	return config.UsageError{Err: fmt.Errorf("config: unknown command %q (xmq config -h)", args[0])}
}

func printConfigUsage(w io.Writer) {
	fmt.Fprint(w, `xmq config shows the configuration.

Usage:
  xmq config print [-show-secrets] [flags]
                     print the configuration xmq would run with, given the
                     same flags: defaults, then the file (-c), then the XMQ_
                     environment variables, then the flags. Values set by a
                     variable or a flag are marked with it; secrets
                     (passwords, password and key hashes, the cluster
                     secret) print as "<redacted>" unless -show-secrets is
                     given. The output is a valid configuration file.
  xmq config env     list the environment variable of every key

Environment:
  Every key can be set by a variable: XMQ_ and the key's path in capitals,
  dots as underscores (broker.max_queued: XMQ_BROKER_MAX_QUEUED=5000).
  Values are written as in YAML (10s, true); a list of plain values is
  comma-separated (XMQ_ACME_DOMAINS=a.example.com,b.example.com); an entry
  of a list of sections is numbered from 0 (XMQ_LISTENERS_0_ADDRESS=:1884;
  the number after the last entry adds one); an entry of a map is named
  (XMQ_WEB_API_KEYS_CI_ROLE=viewer). XMQ_LISTENERS, XMQ_BROKER and the other
  sections' variables take YAML flow style: '[{transport: tcp}]'. An
  unknown variable that looks like a key is an error naming the closest.
`)
}
