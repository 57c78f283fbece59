package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/xmq-io/xmq/internal/config"
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
		if f.configFile == "" {
			// Run from a shell on a packaged install, health asks the
			// service's broker, not whatever answers on the default port.
			var err error
			if f.configFile, env, err = serviceFiles(env); err != nil {
				return err
			}
		}
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

// The packaged service's files (packaging/xmq.service): its configuration
// and its EnvironmentFile. Variables for tests.
var (
	serviceConfig  = "/etc/xmq/xmq.yaml"
	serviceEnvFile = "/etc/default/xmq"
)

// serviceFiles returns the service's configuration file when it exists
// ("" when not), and env with the service's EnvironmentFile added under
// it: a variable set in env wins, as systemd's own environment would not,
// but a shell's explicit XMQ_ setting should.
func serviceFiles(env []string) (configFile string, _ []string, err error) {
	if _, err := os.Stat(serviceConfig); err == nil {
		configFile = serviceConfig
	}
	b, err := os.ReadFile(serviceEnvFile)
	if errors.Is(err, fs.ErrNotExist) {
		return configFile, env, nil
	} else if err != nil {
		return "", nil, fmt.Errorf("health: %w", err)
	}
	set := map[string]bool{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") || !strings.HasPrefix(k, "XMQ_") || set[k] {
			continue
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		out = append(out, k+"="+v)
	}
	return configFile, append(out, env...), nil
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
func healthURL(w config.Web) (string, error) {
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
        (":18083") is asked on loopback. Default: the packaged service's
        /etc/xmq/xmq.yaml when it exists, with the XMQ_ settings of
        /etc/default/xmq (the service's EnvironmentFile) under the
        environment's own.
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
// an argument is a config.UsageError that says where the flags are listed.
func parseSubcommand(name string, fs *flag.FlagSet, args []string, usage func(io.Writer), stdout io.Writer) (helped bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return true, nil
		}
		return false, config.UsageError{Err: fmt.Errorf("%s: %w (xmq %s -h lists the flags)", name, err, name)}
	}
	if fs.NArg() > 0 {
		return false, config.UsageError{Err: fmt.Errorf("%s: unexpected argument %q (xmq %s -h lists the flags)", name, fs.Arg(0), name)}
	}
	return false, nil
}
