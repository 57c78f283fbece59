package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/xmq-io/xmq/internal/config"
	"github.com/xmq-io/xmq/internal/mosquitto"
)

// runImport is `xmq import [-o FILE] mosquitto.conf`: it converts a
// Mosquitto configuration into an xmq one, written from the config struct
// that -c reads, with a comment for every Mosquitto option: the key it
// became, or why it has none.
func runImport(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("xmq import", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("o", "", "write the configuration to FILE instead of standard output")
	dynsec := fs.String("dynsec", "", "convert this dynamic security plugin file instead")
	passwdOut := fs.String("passwd", "", "with -dynsec: the password file to write")
	aclOut := fs.String("acl", "", "with -dynsec: the ACL file to write")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printImportUsage(stdout)
			return nil
		}
		return config.UsageError{Err: fmt.Errorf("import: %w (xmq import -h)", err)}
	}
	if *dynsec != "" {
		if fs.NArg() != 0 {
			return config.UsageError{Err: errors.New("import: -dynsec takes no Mosquitto configuration file")}
		}
		return runImportDynsec(*dynsec, *passwdOut, *aclOut, stderr)
	}
	if fs.NArg() != 1 {
		return config.UsageError{Err: errors.New("import: want one Mosquitto configuration file (xmq import mosquitto.conf > xmq.yaml)")}
	}
	mc, err := mosquitto.ReadConf(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	im := mosquitto.Convert(mc, fs.Arg(0), version)
	if *out == "" {
		err = im.Render(stdout)
	} else {
		err = renderFile(im, *out)
	}
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	dest := "the configuration above"
	if *out != "" {
		dest = *out
	}
	fmt.Fprintf(stderr, "xmq import: %d Mosquitto option lines carried over, %d not (each with a comment saying why) in %s; start it with xmq -c FILE\n",
		im.Carried(), im.Skipped(), dest)
	return nil
}

// renderFile writes the import to path (mode 0600 when it makes it), in
// place as os.WriteFile would, streamed rather than held in memory.
func renderFile(im *mosquitto.Import, path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = im.Render(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func printImportUsage(w io.Writer) {
	fmt.Fprint(w, `xmq import converts a Mosquitto configuration into an xmq one.

Usage:
  xmq import [-o FILE] mosquitto.conf > xmq.yaml
  xmq import -dynsec dynamic-security.json -passwd FILE -acl FILE

It reads the file (and its include_dir files) as Mosquitto 2.0 does and
writes YAML for xmq -c: listeners (mqtt, websockets, TLS files, client
certificates), password_file, acl_file, allow_anonymous (per listener with
per_listener_settings), queue and inflight limits, message_size_limit,
max_keepalive, persistence, sys_interval, retain_available and more. Each
key carries a comment naming the Mosquitto line it came from; every option
that has no xmq equivalent is listed at the top with the reason. Password
and ACL files are used as they are: xmq reads Mosquitto's formats.
docs/migrating-from-mosquitto.md covers every option. It reads 16 MiB at
most, the file and its include_dir files together.

The second form converts the dynamic security plugin's clients, groups
and roles into a password file and an ACL file (mode 0600) for
auth.password_file and auth.acl_file, then checks them: it compares the
plugin's decisions with xmq's for every client on the topics of the rules
and lists each that differs (the plugin's first matching rule wins, where
an ACL file's deny wins; xmq has one read access for subscribing and
receiving), and what an ACL file cannot say (a client tied to one client
id, UNSUBSCRIBE rules).

Flags:
  -o FILE          write to FILE (mode 0600) instead of standard output.
  -dynsec FILE     convert a dynamic security plugin file (dynamic-security.json).
  -passwd FILE     with -dynsec: the password file to write.
  -acl FILE        with -dynsec: the ACL file to write.
`)
}

// runImportDynsec is `xmq import -dynsec FILE -passwd P -acl A`.
func runImportDynsec(src, passwdOut, aclOut string, stderr io.Writer) error {
	if passwdOut == "" || aclOut == "" {
		return config.UsageError{Err: errors.New("import: -dynsec needs -passwd FILE and -acl FILE to write")}
	}
	d, err := mosquitto.ReadDynsec(src)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	im, err := mosquitto.ConvertDynsec(d)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	for path, data := range map[string][]byte{passwdOut: im.Passwd, aclOut: im.ACL} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return fmt.Errorf("import: %w", err)
		}
	}
	fmt.Fprintf(stderr, "xmq import: %d clients, %d groups, %d roles from %s → %s and %s (auth.password_file, auth.acl_file)\n",
		len(d.Clients), len(d.Groups), len(d.Roles), src, passwdOut, aclOut)
	for _, n := range im.Notes {
		fmt.Fprintln(stderr, "  note:", n)
	}
	if len(im.Differ) == 0 {
		fmt.Fprintln(stderr, "  every decision checked is the same in xmq")
		return nil
	}
	fmt.Fprintf(stderr, "  %d decisions differ (the plugin's first matching rule wins, an ACL file's deny wins; xmq has one read access for subscribing and receiving):\n", len(im.Differ))
	for i, l := range im.Differ {
		if i == 50 {
			fmt.Fprintf(stderr, "    … and %d more\n", len(im.Differ)-50)
			break
		}
		fmt.Fprintln(stderr, "   ", l)
	}
	return nil
}
