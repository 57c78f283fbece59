package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// runHealth is `xmq health`: it asks a running broker's web server for
// /healthz and succeeds when it answers 200. It is the container image's
// HEALTHCHECK, which has no curl. The address is web.address from the
// same file and XMQ_ environment as the broker's (an unspecified host is
// asked on loopback); -url names another.
func runHealth(ctx context.Context, args, env []string, stdout io.Writer) error {
	var f healthFlags
	fs := newHealthFlagSet(&f)
	if helped, err := parseSubcommand("health", fs, args, printHealthUsage, stdout); helped || err != nil {
		return err
	}
	url := f.url
	if url == "" {
		var cargs []string
		if f.configFile != "" {
			cargs = []string{"-c", f.configFile}
		}
		cfg, _, err := loadConfigEnv(cargs, env)
		if err != nil {
			return err
		}
		if url, err = healthURL(cfg.Web); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	// The probe asks this machine's broker on loopback, by an address its
	// certificate (issued for its public names) need not cover.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health: %s: %s", url, resp.Status)
	}
	fmt.Fprintf(stdout, "%s: %s", url, body)
	return nil
}

// healthFlags are the flags of `xmq health`.
type healthFlags struct {
	configFile, url string
	timeout         time.Duration
}

func newHealthFlagSet(f *healthFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("xmq health", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.configFile, "c", "", "configuration file (YAML): its web section")
	fs.StringVar(&f.configFile, "config", "", "configuration file (YAML): its web section")
	fs.StringVar(&f.url, "url", "", "ask this URL instead")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	return fs
}

// healthURL is /healthz on the web server's address, asked on loopback
// when the server listens on every interface.
func healthURL(w webConfig) (string, error) {
	if w.Address == "" {
		return "", errors.New(`health: the web server is off (web.address ""), so there is no /healthz to ask`)
	}
	host, port, err := net.SplitHostPort(w.Address)
	if err != nil {
		return "", fmt.Errorf("health: web.address %q: %w", w.Address, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	scheme := "http"
	if w.TLS {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/healthz", nil
}

func printHealthUsage(w io.Writer) {
	fmt.Fprint(w, `xmq health asks a running broker's web server for /healthz and exits 0
when it answers 200 OK, 1 otherwise: the container image's HEALTHCHECK.

Usage:
  xmq health [flags]

Flags:
  -c FILE, -config FILE
        the broker's configuration file: health asks its web.address (the
        XMQ_ environment applies as for the broker). An unspecified host
        (":18083") is asked on loopback.
  -url URL
        ask this URL instead, e.g. http://127.0.0.1:18083/healthz.
  -timeout DURATION
        how long to wait for the answer. Default 5s.
  -h, -help
        print this help and exit.
`)
}

// parseSubcommand parses the flags of `xmq name`, which takes no other
// arguments. With -h it prints the usage and reports helped; a bad flag or
// an argument is a usageError that says where the flags are listed.
func parseSubcommand(name string, fs *flag.FlagSet, args []string, usage func(io.Writer), stdout io.Writer) (helped bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return true, nil
		}
		return false, usageError{fmt.Errorf("%s: %w (xmq %s -h lists the flags)", name, err, name)}
	}
	if fs.NArg() > 0 {
		return false, usageError{fmt.Errorf("%s: unexpected argument %q (xmq %s -h lists the flags)", name, fs.Arg(0), name)}
	}
	return false, nil
}
