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
	"slices"
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

// PasswdMain is "xmq passwd": it adds, changes or deletes a user in a
// password file, or hashes a plain-text one (-U). args excludes "passwd".
// Errors about the command line wrap ErrUsage.
func PasswdMain(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("passwd", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	batch := fl.Bool("b", false, "")
	del := fl.Bool("D", false, "")
	create := fl.Bool("c", false, "")
	upgrade := fl.Bool("U", false, "")
	var hashName string
	fl.StringVar(&hashName, "H", "", "")
	fl.StringVar(&hashName, "hash", "", "")
	cost := fl.Int("cost", 0, "")
	scramList := fl.String("scram", "sha-256,sha-1", "")
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, passwdUsage)
			return nil
		}
		return fmt.Errorf("%w: %v\n%s", ErrUsage, err, passwdUsage)
	}
	if hashName != "" && !slices.Contains(hashNames, hashName) {
		return fmt.Errorf("%w: -H %q: want bcrypt, sha512-pbkdf2 or sha512", ErrUsage, hashName)
	}
	mechs, err := parseScramList(*scramList)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if *upgrade {
		if fl.NArg() != 1 || *batch || *del || *create {
			return fmt.Errorf("%w: -U takes one FILE and no -b, -c or -D\n%s", ErrUsage, passwdUsage)
		}
		return upgradePasswordFile(fl.Arg(0), hashName, *cost, mechs)
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
	var password []byte
	if *batch {
		password = []byte(fl.Arg(2))
	} else if password, err = readPassword(stdin, stderr); err != nil {
		return err
	}
	return editPasswordFile(file, *create, func(lines []string) ([]string, error) {
		name, c := fileHash(lines, hashName, *cost, "bcrypt")
		e, err := newEntry(password, name, c, mechs)
		if err != nil {
			return nil, err
		}
		line := formatLine(user, e)
		for i, l := range lines {
			if lineUser(l) == user {
				lines[i] = line
				return lines, nil
			}
		}
		return append(lines, line), nil
	})
}

// hashNames are the -H values, in newEntry's spelling.
var hashNames = []string{"bcrypt", "sha512-pbkdf2", "sha512"}

// kindOf names a hasher's kind as -H does.
func kindOf(h hasher) string {
	switch h.(type) {
	case bcryptHash:
		return "bcrypt"
	case pbkdf2Hash:
		return "sha512-pbkdf2"
	case sha512Hash:
		return "sha512"
	}
	return ""
}

// hashCost is a hasher's bcrypt cost or PBKDF2 iteration count; 0 for $6$.
func hashCost(h hasher) int {
	switch h := h.(type) {
	case bcryptHash:
		c, _ := bcrypt.Cost(h.h)
		return c
	case pbkdf2Hash:
		return h.iter
	}
	return 0
}

// fileHash picks the hash and cost of a new entry: -H and -cost when
// given, else the kind most of the file's entries use (ties: the first
// entry's) at the cost of the first entry of that kind, else def. So a
// file mosquitto_passwd wrote gets $7$ with its 101 iterations and stays
// readable by Mosquitto.
func fileHash(lines []string, name string, cost int, def string) (string, int) {
	count := map[string]int{}
	first := map[string]int{}
	var order []string
	for _, l := range lines {
		_, e, err := parseLine(l)
		if err != nil || e == nil {
			continue
		}
		k := kindOf(e.hash)
		if count[k] == 0 {
			order = append(order, k)
			first[k] = hashCost(e.hash)
		}
		count[k]++
	}
	if name == "" {
		name = def
		best := 0
		for _, k := range order {
			if count[k] > best {
				name, best = k, count[k]
			}
		}
	}
	if cost == 0 {
		cost = first[name] // 0 when the file has none: newEntry's default
	}
	return name, cost
}

// upgradePasswordFile is -U: it hashes every plain-text USER:PASSWORD line
// of path in place, as mosquitto_passwd -U does, but leaves the lines that
// already hold a hash (mosquitto_passwd would hash the hash). As with
// mosquitto_passwd, blanks around the user and password are trimmed and
// the password ends at the next ':'.
func upgradePasswordFile(path, name string, cost int, mechs []*scramMech) error {
	return editPasswordFile(path, false, func(lines []string) ([]string, error) {
		name, cost := fileHash(lines, name, cost, "sha512-pbkdf2")
		seen := map[string]bool{}
		for i, l := range lines {
			if t := strings.TrimSpace(l); t == "" || t[0] == '#' {
				continue
			}
			if _, e, err := parseLine(l); err == nil && e != nil {
				seen[lineUser(l)] = true
				continue
			}
			user, pass, ok := strings.Cut(l, ":")
			user, pass = strings.TrimSpace(user), strings.TrimSpace(pass)
			if !ok || pass == "" {
				return nil, fmt.Errorf("auth: %s line %d: no password after the user name (want USER:PASSWORD)", path, i+1)
			}
			for _, p := range []string{"$2a$", "$2b$", "$2y$", "$7$", "$6$"} {
				if strings.HasPrefix(pass, p) {
					// A damaged hash, not a password: hashing it would
					// lock the user out for good.
					_, _, err := parseLine(l)
					return nil, fmt.Errorf("auth: %s line %d: %w", path, i+1, err)
				}
			}
			if strings.Contains(pass, ":") {
				return nil, fmt.Errorf("auth: %s line %d: user %q: a plain-text password cannot contain ':' (mosquitto_passwd would cut it there)", path, i+1, user)
			}
			if err := ValidUsername(user); err != nil {
				return nil, fmt.Errorf("auth: %s line %d: %w", path, i+1, err)
			}
			if seen[user] {
				return nil, fmt.Errorf("auth: %s line %d: user %q appears twice", path, i+1, user)
			}
			seen[user] = true
			e, err := newEntry([]byte(pass), name, cost, mechs)
			if err != nil {
				return nil, fmt.Errorf("auth: %s line %d: user %q: %w", path, i+1, user, err)
			}
			lines[i] = formatLine(user, e)
		}
		return lines, nil
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
		return fmt.Errorf("auth: reading %s: %w", path, unwrapPath(err))
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
	// The temporary file is an implementation detail: every error names
	// path, the file the user asked to change.
	fail := func(err error) error {
		return fmt.Errorf("auth: writing %s: %w", path, unwrapPath(err))
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fail(err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, there is nothing to remove
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fail(err)
	}
	if _, err := tmp.WriteString(out); err != nil {
		tmp.Close()
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fail(err)
	}
	return nil
}

// unwrapPath drops the path of an *fs.PathError when the caller names it.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
