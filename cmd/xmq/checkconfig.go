package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/xmq-io/xmq/auth"
	"github.com/xmq-io/xmq/certs"
	"github.com/xmq-io/xmq/internal/config"
	"github.com/xmq-io/xmq/listeners"
)

// runCheckConfig is `xmq check-config [flags]`: it checks everything about
// a configuration that can be checked without serving — keys and values,
// the files it names (readable, parsed, certificates valid and matching
// their keys), the data directory, and the ports (bound and closed at
// once) — and lists every problem. It starts no broker and opens no store.
func runCheckConfig(args, env []string, stdout io.Writer) error {
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			printCheckConfigUsage(stdout)
			return nil
		}
	}
	cfg, o, err := loadConfigOrigin(args, env)
	var all config.Errors
	switch ce, ok := config.AsErrors(err); {
	case ok:
		all = append(all, ce...)
	case errors.Is(err, config.ErrHelp):
		printCheckConfigUsage(stdout)
		return nil
	case errors.Is(err, config.ErrVersion):
		printVersion(stdout)
		return nil
	case err != nil:
		return err
	}
	ps := checkFiles(&cfg)
	ps = append(ps, checkPorts(&cfg)...)
	o.Locate(ps)
	all = append(all, ps...)
	config.SortProblems(all)
	name := cfg.File
	if name == "" {
		name = "the configuration (no file: defaults, XMQ_ environment, flags)"
	}
	if len(all) == 0 {
		fmt.Fprintf(stdout, "%s: ok (%d listeners, data_dir %q)\n", name, len(cfg.Listeners), cfg.DataDir)
		return nil
	}
	fmt.Fprintf(stdout, "%s: %s\n", name, config.CountProblems(len(all)))
	for _, p := range all {
		fmt.Fprintln(stdout, "  "+p.Error())
	}
	return fmt.Errorf("check-config: %s in %s", config.CountProblems(len(all)), name)
}

func printCheckConfigUsage(w io.Writer) {
	fmt.Fprint(w, `xmq check-config checks a configuration without serving.

Usage:
  xmq check-config [-c FILE] [flags]

It takes the broker's flags and XMQ_ environment variables, as xmq does,
and checks: every key and value (unknown keys, durations, ranges, valid
values); the files the configuration names are readable and parse
(certificates valid and matching their keys, client CAs, revocation lists,
password and ACL files); the data directory is a writable directory; and
every listener's port, the web server's and the ACME HTTP port are free:
each is bound and closed at once (a port in use says so). It starts no
broker and opens no store. Every problem is listed, with the file's line
or the variable or flag that set the value; the exit status is 1 when there
is any, 0 when the configuration is good.
`)
}

// checkFiles reports the files of cfg that cannot be read or used, and a
// data directory that cannot be written.
func checkFiles(cfg *config.Config) config.Errors {
	var ps config.Problems
	pair := func(p config.KeyPath, certFile, keyFile string) {
		if certFile == "" || keyFile == "" {
			return // validate has said what is missing
		}
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			ps.Add(p.With("cert_file"), "%s", pairProblem(certFile, keyFile, err))
			return
		}
		now := time.Now()
		switch leaf := pair.Leaf; {
		case leaf == nil:
		case now.After(leaf.NotAfter):
			ps.Add(p.With("cert_file"), "the certificate in %s expired on %s: renew it", certFile, leaf.NotAfter.Format(time.DateOnly))
		case now.Before(leaf.NotBefore):
			ps.Add(p.With("cert_file"), "the certificate in %s is not valid before %s (is this machine's clock right?)", certFile, leaf.NotBefore.Format(time.DateTime))
		}
	}
	pool := func(p config.KeyPath, file string) {
		if file != "" {
			if _, err := certs.LoadPool(file); err != nil {
				ps.AddErr(p, err)
			}
		}
	}
	pair(config.Path("tls"), cfg.TLS.CertFile, cfg.TLS.KeyFile)
	pool(config.Path("acme", "ca_file"), cfg.ACME.CAFile)
	for i, l := range cfg.Listeners {
		lp := config.Path("listeners", i, "tls")
		pair(lp, l.TLS.CertFile, l.TLS.KeyFile)
		pool(lp.With("client_ca_file"), l.TLS.ClientCAFile)
		if l.TLS.ClientCRLFile != "" {
			if err := certs.CheckCRLFile(l.TLS.ClientCRLFile); err != nil {
				ps.AddErr(lp.With("client_crl_file"), err)
			}
		}
	}
	for i, b := range cfg.Bridges {
		bp := config.Path("bridges", i, "tls")
		pair(bp, b.TLS.CertFile, b.TLS.KeyFile)
		pool(bp.With("ca_file"), b.TLS.CAFile)
	}
	hp := config.Path("auth", "http", "tls")
	pair(hp, cfg.Auth.HTTP.TLS.CertFile, cfg.Auth.HTTP.TLS.KeyFile)
	pool(hp.With("ca_file"), cfg.Auth.HTTP.TLS.CAFile)
	if cfg.Auth.PasswordFile != "" {
		ps.AddErr(config.Path("auth", "password_file"), auth.CheckFiles(cfg.Auth.PasswordFile, ""))
	}
	if cfg.Auth.ACLFile != "" {
		ps.AddErr(config.Path("auth", "acl_file"), auth.CheckFiles("", cfg.Auth.ACLFile))
	}
	if jo := cfg.Auth.JWT.Options(); jo.Enabled() {
		ps.AddErr(config.Path("auth", "jwt"), auth.CheckJWT(jo))
	}
	if cfg.DataDir != "" {
		if err := checkWritableDir(cfg.DataDir); err != nil {
			ps.Add(config.Path("data_dir"), "%v", err)
		}
	}
	return ps.List
}

// pairProblem words a certificate/key pair that does not load.
func pairProblem(certFile, keyFile string, err error) string {
	switch {
	case errors.Is(err, os.ErrNotExist), errors.Is(err, os.ErrPermission):
		return fmt.Sprintf("cannot read the certificate or its key: %v", err)
	case strings.Contains(err.Error(), "private key does not match public key"): // crypto/tls has no sentinel for it
		return fmt.Sprintf("the key in %s does not belong to the certificate in %s: give the key the certificate was issued for", keyFile, certFile)
	}
	return fmt.Sprintf("%s and %s are no certificate and key: %v", certFile, keyFile, err)
}

// checkWritableDir reports a data directory that is no directory, or that
// this user cannot create or write in, without touching the store: a
// temporary file is made and removed.
func checkWritableDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		parent := filepath.Dir(filepath.Clean(dir))
		for {
			if pfi, err := os.Stat(parent); err == nil {
				if !pfi.IsDir() {
					return fmt.Errorf("%s cannot be created: %s is not a directory", dir, parent)
				}
				break
			}
			next := filepath.Dir(parent)
			if next == parent {
				break
			}
			parent = next
		}
		f, err := os.CreateTemp(parent, ".xmq-check-*")
		if err != nil {
			return fmt.Errorf("%s does not exist and cannot be created: %v", dir, err)
		}
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	f, err := os.CreateTemp(dir, ".xmq-check-*")
	if err != nil {
		return fmt.Errorf("%s is not writable by this user: %v", dir, err)
	}
	_ = f.Close()
	_ = os.Remove(f.Name())
	return nil
}

// checkPorts binds every address the configuration serves on — the
// listeners (UDP for quic), the web server, ACME's HTTP port — all at
// once, so that two of them on one port conflict as they would in xmq,
// then closes them. A port in use, or one this user may not bind, is a
// problem.
func checkPorts(cfg *config.Config) config.Errors {
	var ps config.Problems
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			_ = c.Close()
		}
	}()
	bind := func(p config.KeyPath, network, addr string) {
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "0" {
			return // validate has said what is wrong; port 0 is always free
		}
		var c io.Closer
		var err error
		if network == "udp" {
			c, err = net.ListenPacket("udp", addr)
		} else {
			c, err = net.Listen("tcp", addr)
		}
		if err != nil {
			ps.Add(p, "%s", bindProblem(network, addr, err))
			return
		}
		closers = append(closers, c)
	}
	for i, l := range cfg.Listeners {
		if listeners.Supported(l.Transport) != nil {
			continue
		}
		network := "tcp"
		if l.Transport == listeners.TransportQUIC {
			network = "udp"
		}
		bind(config.Path("listeners", i, "address"), network, l.Address)
	}
	if cfg.Web.Address != "" {
		bind(config.Path("web", "address"), "tcp", cfg.Web.Address)
	}
	if len(cfg.ACME.Domains) > 0 && cfg.ACME.HTTPAddress != "" {
		bind(config.Path("acme", "http_address"), "tcp", cfg.ACME.HTTPAddress)
	}
	return ps.List
}

// bindProblem says why addr cannot be bound, and what to do.
func bindProblem(network, addr string, err error) string {
	_, port, _ := net.SplitHostPort(addr)
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Sprintf("%s port %s (%s) is in use: another program (or another xmq, or another entry of this configuration) has it; stop it or choose another address", network, port, addr)
	case errors.Is(err, syscall.EACCES), errors.Is(err, os.ErrPermission):
		return fmt.Sprintf("%s port %s (%s) may not be bound by this user: ports below 1024 need root or CAP_NET_BIND_SERVICE (the Debian package's unit has it)", network, port, addr)
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return fmt.Sprintf("%s is not an address of this machine: use one of its interfaces' addresses, or :%s for all of them", addr, port)
	}
	return fmt.Sprintf("cannot bind %s %s: %v", network, addr, err)
}

// bindError is a failed bind worded by bindProblem; it unwraps to the
// system's error.
type bindError struct {
	msg string
	err error
}

func (e *bindError) Error() string { return e.msg }
func (e *bindError) Unwrap() error { return e.err }

// explainBind words err when it is a bind that failed for a reason an
// operator can fix (in use, not allowed, not an address of this
// machine); other errors are returned as they are.
func explainBind(err error, network, addr string) error {
	if errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EADDRNOTAVAIL) {
		return &bindError{msg: bindProblem(network, addr, err), err: err}
	}
	return err
}
