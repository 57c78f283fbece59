package auth

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// PasswordHashes are the hashes of password file entries that
// SetPassword and HashPlaintext write, as xmq passwd -H names them:
// bcrypt, sha512-pbkdf2 (mosquitto_passwd's $7$) and sha512 ($6$).
var PasswordHashes = []string{"bcrypt", "sha512-pbkdf2", "sha512"}

// PasswordSCRAMs are the SCRAM mechanisms whose credentials an entry can
// store besides its hash, as xmq passwd -scram names them.
var PasswordSCRAMs = []string{"sha-256", "sha-1"}

// PasswordOptions choose how SetPassword and HashPlaintext hash.
type PasswordOptions struct {
	// Hash is one of PasswordHashes; "": the hash most of the file's
	// entries use (ties: the first entry's), so a Mosquitto file stays
	// readable by Mosquitto, else bcrypt (SetPassword) or sha512-pbkdf2
	// (HashPlaintext).
	Hash string
	// Cost is the bcrypt cost or PBKDF2 iteration count; 0: that of the
	// file's first entry of the hash, else 10 (bcrypt) or 101 (PBKDF2,
	// mosquitto_passwd's).
	Cost int
	// SCRAM lists the mechanisms (PasswordSCRAMs, any case) whose
	// credentials are stored besides the hash; none when empty.
	SCRAM []string
}

// mechs returns the SCRAM mechanisms o names.
func (o PasswordOptions) mechs() ([]*scramMech, error) {
	var out []*scramMech
	for _, name := range o.SCRAM {
		m := scramMechByName("SCRAM-" + strings.ToUpper(strings.TrimSpace(name)))
		if m == nil {
			return nil, fmt.Errorf("auth: SCRAM mechanism %q: want sha-256 or sha-1", name)
		}
		out = append(out, m)
	}
	return out, nil
}

// SetPassword adds user to the password file at path, or changes its
// password, keeping the other lines, their order and the file's mode; a
// new file gets mode 0600. empty starts from an empty file (xmq passwd
// -c). The file is replaced atomically, and only if the result loads.
func SetPassword(path, user string, password []byte, empty bool, o PasswordOptions) error {
	if err := ValidUsername(user); err != nil {
		return err
	}
	mechs, err := o.mechs()
	if err != nil {
		return err
	}
	return editPasswordFile(path, empty, func(lines []string) ([]string, error) {
		name, c := fileHash(lines, o.Hash, o.Cost, "bcrypt")
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

// DeleteUser removes user's line from the password file at path, as
// SetPassword rewrites it; a user not in the file is an error.
func DeleteUser(path, user string) error {
	if err := ValidUsername(user); err != nil {
		return err
	}
	return editPasswordFile(path, false, func(lines []string) ([]string, error) {
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
			return nil, fmt.Errorf("auth: user %q is not in %s", user, path)
		}
		return out, nil
	})
}

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

// HashPlaintext is xmq passwd -U: it hashes every plain-text USER:PASSWORD
// line of the password file at path in place, as mosquitto_passwd -U does,
// but leaves the lines that already hold a hash (mosquitto_passwd would
// hash the hash). As with mosquitto_passwd, blanks around the user and
// password are trimmed and the password ends at the next ':'.
func HashPlaintext(path string, o PasswordOptions) error {
	mechs, err := o.mechs()
	if err != nil {
		return err
	}
	return editPasswordFile(path, false, func(lines []string) ([]string, error) {
		name, cost := fileHash(lines, o.Hash, o.Cost, "sha512-pbkdf2")
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
		return nil, fmt.Errorf("auth: hash %q: want bcrypt, sha512-pbkdf2 or sha512", hashName)
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
