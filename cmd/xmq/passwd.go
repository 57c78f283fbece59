package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/term"

	"github.com/xmq-io/xmq/auth"
	"github.com/xmq-io/xmq/internal/config"
)

// errPasswdUsage is wrapped by passwdMain's errors about its command line,
// which runPasswd makes usage errors (exit 2).
var errPasswdUsage = errors.New("usage")

const passwdUsage = `Usage:
  xmq passwd [-H HASH] [-scram LIST] FILE USER        add USER or change its password (asks for it)
  xmq passwd [-H HASH] [-scram LIST] -b FILE USER PASSWORD   the same, password on the command line
  xmq passwd -D FILE USER                               delete USER
  xmq passwd -U [-H HASH] [-scram LIST] FILE           hash a plain-text file's passwords in place

FILE is created (mode 0600) when missing; -c empties it first, as with
mosquitto_passwd. Without -b the password is read twice from the terminal
without echo, or once from standard input when that is not a terminal.

  -H HASH, -hash HASH
              bcrypt, sha512-pbkdf2 (mosquitto_passwd's $7$) or sha512 ($6$).
              Default: the hash the file's entries already use, so a
              Mosquitto file stays readable by Mosquitto (after a rollback,
              too); bcrypt for a new or empty file; sha512-pbkdf2 for -U.
  -cost N     bcrypt cost or PBKDF2 iterations. Default: those of the file's
              entries of that hash, else 10 (bcrypt) or 101 (mosquitto_passwd's).
  -scram LIST SCRAM credentials stored besides the hash, for MQTT 5 enhanced
              authentication: sha-256,sha-1 (default), sha-256, or none.
              Mosquitto ignores them.
  -U          like mosquitto_passwd -U: every line USER:PASSWORD whose
              password is not a hash yet is replaced by USER:HASH; lines
              already hashed are kept, so running it twice is harmless.
`

// runPasswd is `xmq passwd`.
func runPasswd(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	err := passwdMain(args, stdin, stdout, stderr)
	if errors.Is(err, errPasswdUsage) {
		return config.UsageError{Err: err}
	}
	return err
}

// passwdMain adds, changes or deletes a user in a password file, or
// hashes a plain-text one (-U), through auth's file functions. args
// excludes "passwd". Errors about the command line wrap errPasswdUsage.
func passwdMain(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("passwd", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	batch := fl.Bool("b", false, "")
	del := fl.Bool("D", false, "")
	create := fl.Bool("c", false, "")
	upgrade := fl.Bool("U", false, "")
	var o auth.PasswordOptions
	fl.StringVar(&o.Hash, "H", "", "")
	fl.StringVar(&o.Hash, "hash", "", "")
	fl.IntVar(&o.Cost, "cost", 0, "")
	scramList := fl.String("scram", "sha-256,sha-1", "")
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, passwdUsage)
			return nil
		}
		return fmt.Errorf("%w: %v\n%s", errPasswdUsage, err, passwdUsage)
	}
	if o.Hash != "" && !slices.Contains(auth.PasswordHashes, o.Hash) {
		return fmt.Errorf("%w: -H %q: want bcrypt, sha512-pbkdf2 or sha512", errPasswdUsage, o.Hash)
	}
	var err error
	if o.SCRAM, err = parseScramList(*scramList); err != nil {
		return fmt.Errorf("%w: %v", errPasswdUsage, err)
	}
	if *upgrade {
		if fl.NArg() != 1 || *batch || *del || *create {
			return fmt.Errorf("%w: -U takes one FILE and no -b, -c or -D\n%s", errPasswdUsage, passwdUsage)
		}
		return auth.HashPlaintext(fl.Arg(0), o)
	}
	want := 2
	if *batch {
		want = 3
	}
	if fl.NArg() != want || *batch && *del {
		return fmt.Errorf("%w: wrong arguments\n%s", errPasswdUsage, passwdUsage)
	}
	file, user := fl.Arg(0), fl.Arg(1)
	if err := auth.ValidUsername(user); err != nil {
		return err
	}
	if *del {
		return auth.DeleteUser(file, user)
	}
	var password []byte
	if *batch {
		password = []byte(fl.Arg(2))
	} else if password, err = readPassword(stdin, stderr); err != nil {
		return err
	}
	return auth.SetPassword(file, user, password, *create, o)
}

// parseScramList parses -scram: mechanisms of auth.PasswordSCRAMs, any
// case, separated by commas; none for "none" or "".
func parseScramList(s string) ([]string, error) {
	if s == "none" || s == "" {
		return nil, nil
	}
	var out []string
	for name := range strings.SplitSeq(s, ",") {
		upper := strings.ToUpper(strings.TrimSpace(name))
		if !slices.ContainsFunc(auth.PasswordSCRAMs, func(m string) bool { return strings.ToUpper(m) == upper }) {
			return nil, fmt.Errorf("-scram %q: want sha-256, sha-1 or none", name)
		}
		out = append(out, name)
	}
	return out, nil
}

// readPassword asks for the password twice on a terminal (no echo), or
// reads one line from a non-terminal stdin.
func readPassword(stdin io.Reader, prompt io.Writer) ([]byte, error) {
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(prompt, "Password: ")
		p1, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(prompt)
		if err != nil {
			return nil, fmt.Errorf("auth: reading the password: %w", err)
		}
		fmt.Fprint(prompt, "Reenter password: ")
		p2, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(prompt)
		if err != nil {
			return nil, fmt.Errorf("auth: reading the password: %w", err)
		}
		if !bytes.Equal(p1, p2) {
			return nil, errors.New("auth: passwords do not match")
		}
		return p1, nil
	}
	line, err := bufio.NewReader(stdin).ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("auth: reading the password: %w", err)
	}
	return bytes.TrimRight(line, "\r\n"), nil
}
