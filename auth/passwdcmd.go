package auth

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/term"
)

// ErrUsage is wrapped by PasswdMain's errors about its command line; the
// caller exits 2 for them.
var ErrUsage = errors.New("usage")

const passwdUsage = `Usage:
  xmq passwd [-H HASH] [-scram LIST] FILE USER        add USER or change its password (asks for it)
  xmq passwd [-H HASH] [-scram LIST] -b FILE USER PASSWORD   the same, password on the command line
  xmq passwd -D FILE USER                               delete USER

FILE is created (mode 0600) when missing; -c empties it first, as with
mosquitto_passwd. Without -b the password is read twice from the terminal
without echo, or once from standard input when that is not a terminal.

  -H HASH     bcrypt (default), sha512-pbkdf2 (mosquitto_passwd's $7$, so
              Mosquitto can read the file too) or sha512 ($6$)
  -cost N     bcrypt cost (default 10) or PBKDF2 iterations (default 101)
  -scram LIST SCRAM credentials stored besides the hash, for MQTT 5 enhanced
              authentication: sha-256,sha-1 (default), sha-256, or none
`

// PasswdMain is "xmq passwd": it adds, changes or deletes a user in a
// password file. args excludes "passwd". Errors about the command line
// wrap ErrUsage.
func PasswdMain(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("passwd", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	batch := fl.Bool("b", false, "")
	del := fl.Bool("D", false, "")
	create := fl.Bool("c", false, "")
	hashName := fl.String("H", "bcrypt", "")
	cost := fl.Int("cost", 0, "")
	scramList := fl.String("scram", "sha-256,sha-1", "")
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, passwdUsage)
			return nil
		}
		return fmt.Errorf("%w: %v\n%s", ErrUsage, err, passwdUsage)
	}
	want := 2
	if *batch {
		want = 3
	}
	if fl.NArg() != want || *batch && *del {
		return fmt.Errorf("%w: wrong arguments\n%s", ErrUsage, passwdUsage)
	}
	file, user := fl.Arg(0), fl.Arg(1)
	if err := ValidUsername(user); err != nil {
		return err
	}
	if *del {
		return editPasswordFile(file, false, func(lines []string) ([]string, error) {
			out := lines[:0]
			found := false
			for _, l := range lines {
				if lineUser(l) == user {
					found = true
					continue
				}
				out = append(out, l)
			}
			if !found {
				return nil, fmt.Errorf("auth: user %q is not in %s", user, file)
			}
			return out, nil
		})
	}
	mechs, err := parseScramList(*scramList)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	var password []byte
	if *batch {
		password = []byte(fl.Arg(2))
	} else if password, err = readPassword(stdin, stderr); err != nil {
		return err
	}
	e, err := newEntry(password, *hashName, *cost, mechs)
	if err != nil {
		return err
	}
	line := formatLine(user, e)
	return editPasswordFile(file, *create, func(lines []string) ([]string, error) {
		for i, l := range lines {
			if lineUser(l) == user {
				lines[i] = line
				return lines, nil
			}
		}
		return append(lines, line), nil
	})
}

// newEntry hashes a password: the login hash and the SCRAM credentials.
func newEntry(password []byte, hashName string, cost int, mechs []*scramMech) (*entry, error) {
	if len(password) == 0 {
		return nil, errors.New("auth: empty password")
	}
	var h hasher
	var err error
	switch hashName {
	case "bcrypt":
		if cost == 0 {
			cost = bcrypt.DefaultCost
		}
		if len(password) > 72 {
			return nil, errors.New("auth: bcrypt passwords are at most 72 bytes; use -H sha512-pbkdf2 for longer ones")
		}
		h, err = newBcrypt(password, cost)
	case "sha512-pbkdf2":
		if cost == 0 {
			cost = 101 // mosquitto_passwd's count
		}
		h, err = newPBKDF2(password, cost)
	case "sha512":
		h = newSHA512(password)
	default:
		return nil, fmt.Errorf("%w: -H %q: want bcrypt, sha512-pbkdf2 or sha512", ErrUsage, hashName)
	}
	if err != nil {
		return nil, fmt.Errorf("auth: hashing: %w", err)
	}
	e := &entry{hash: h}
	for _, m := range mechs {
		c, err := newScramCred(m, password, randomBytes(16), DefaultScramIterations)
		if err != nil {
			return nil, fmt.Errorf("auth: %s: %w", m.name, err)
		}
		if e.scram == nil {
			e.scram = map[*scramMech]scramCred{}
		}
		e.scram[m] = c
	}
	return e, nil
}

func parseScramList(s string) ([]*scramMech, error) {
	if s == "none" || s == "" {
		return nil, nil
	}
	var out []*scramMech
	for name := range strings.SplitSeq(s, ",") {
		m := scramMechByName("SCRAM-" + strings.ToUpper(strings.TrimSpace(name)))
		if m == nil {
			return nil, fmt.Errorf("-scram %q: want sha-256, sha-1 or none", name)
		}
		out = append(out, m)
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

// editPasswordFile rewrites a password file through edit, atomically (a
// temporary file renamed over it) and keeping its mode; a new file gets
// 0600. empty starts from no lines (-c). The result must parse.
func editPasswordFile(path string, empty bool, edit func(lines []string) ([]string, error)) error {
	mode := fs.FileMode(0o600)
	var lines []string
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if fi, err := os.Stat(path); err == nil {
			mode = fi.Mode().Perm()
		}
		if !empty {
			lines = splitLines(data)
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return fmt.Errorf("auth: %w", err)
	}
	lines, err = edit(lines)
	if err != nil {
		return err
	}
	out := strings.Join(lines, "\n")
	if out != "" {
		out += "\n"
	}
	if _, err := parsePasswordFile([]byte(out)); err != nil {
		return fmt.Errorf("auth: %s would not load: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, there is nothing to remove
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("auth: %w", err)
	}
	if _, err := tmp.WriteString(out); err != nil {
		tmp.Close()
		return fmt.Errorf("auth: writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("auth: writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("auth: writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	return nil
}
