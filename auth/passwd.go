package auth

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"
)

// Password file line formats. One user per line:
//
//	USER:HASH[:SCRAM]...
//
// HASH is one of
//
//	$2a$COST$...                         bcrypt (what xmq passwd writes; $2b$ and $2y$ are read too)
//	$7$ITERATIONS$SALT$HASH              PBKDF2-HMAC-SHA512, 64-byte hash (mosquitto_passwd 2.x)
//	$6$SALT$HASH                         SHA-512(password || salt) (mosquitto_passwd 1.x)
//
// and each optional SCRAM field is
//
//	$scram-sha-256$ITERATIONS$SALT$STOREDKEY$SERVERKEY
//	$scram-sha-1$ITERATIONS$SALT$STOREDKEY$SERVERKEY
//
// with SALT, HASH and the keys in standard base64 with padding. Mosquitto
// reads only up to the second ':', so a file whose entries are $6$ or $7$
// serves both brokers. Blank lines and lines starting with '#' are ignored
// and kept by xmq passwd.

// Errors of the password file.
var (
	ErrBadUsername = errors.New("auth: user name must be non-empty UTF-8 without ':', control characters or a leading '#'")
	errBadHash     = errors.New("unrecognised password hash (plain text? xmq passwd -U FILE hashes a plain-text file)")
)

// hasher verifies a password against one stored hash. verify runs the full
// slow hash whatever the outcome and compares in constant time.
type hasher interface {
	verify(password []byte) bool
	encode() string
	// twin returns a hash of the same kind and cost that no password
	// matches: the stand-in for unknown users, so they cost the same.
	twin() (hasher, error)
}

// bcryptHash is a bcrypt hash ($2a$, $2b$, $2y$).
type bcryptHash struct{ h []byte }

func (b bcryptHash) verify(password []byte) bool {
	return bcrypt.CompareHashAndPassword(b.h, password) == nil
}
func (b bcryptHash) encode() string { return string(b.h) }
func (b bcryptHash) twin() (hasher, error) {
	cost, err := bcrypt.Cost(b.h)
	if err != nil {
		return nil, err
	}
	return newBcrypt(randomBytes(24), cost)
}

func newBcrypt(password []byte, cost int) (hasher, error) {
	h, err := bcrypt.GenerateFromPassword(password, cost)
	if err != nil {
		return nil, err
	}
	return bcryptHash{h}, nil
}

// pbkdf2Hash is mosquitto's $7$: PBKDF2-HMAC-SHA512.
type pbkdf2Hash struct {
	iter       int
	salt, hash []byte
}

func (p pbkdf2Hash) verify(password []byte) bool {
	got, err := pbkdf2.Key(sha512.New, string(password), p.salt, p.iter, len(p.hash))
	return err == nil && subtle.ConstantTimeCompare(got, p.hash) == 1
}
func (p pbkdf2Hash) encode() string {
	return "$7$" + strconv.Itoa(p.iter) + "$" + b64(p.salt) + "$" + b64(p.hash)
}
func (p pbkdf2Hash) twin() (hasher, error) {
	return pbkdf2Hash{iter: p.iter, salt: randomBytes(len(p.salt)), hash: randomBytes(len(p.hash))}, nil
}

func newPBKDF2(password []byte, iter int) (hasher, error) {
	salt := randomBytes(12)
	h, err := pbkdf2.Key(sha512.New, string(password), salt, iter, sha512.Size)
	if err != nil {
		return nil, err
	}
	return pbkdf2Hash{iter: iter, salt: salt, hash: h}, nil
}

// sha512Hash is mosquitto's older $6$: SHA-512 over the password then the salt.
type sha512Hash struct{ salt, hash []byte }

func (s sha512Hash) verify(password []byte) bool {
	h := sha512.New()
	h.Write(password)
	h.Write(s.salt)
	return subtle.ConstantTimeCompare(h.Sum(nil), s.hash) == 1
}
func (s sha512Hash) encode() string { return "$6$" + b64(s.salt) + "$" + b64(s.hash) }
func (s sha512Hash) twin() (hasher, error) {
	return sha512Hash{salt: randomBytes(len(s.salt)), hash: randomBytes(sha512.Size)}, nil
}

func newSHA512(password []byte) hasher {
	s := sha512Hash{salt: randomBytes(12)}
	h := sha512.New()
	h.Write(password)
	h.Write(s.salt)
	s.hash = h.Sum(nil)
	return s
}

// parseHash decodes the HASH field of a password file line.
func parseHash(s string) (hasher, error) {
	switch {
	case strings.HasPrefix(s, "$2a$"), strings.HasPrefix(s, "$2b$"), strings.HasPrefix(s, "$2y$"):
		if _, err := bcrypt.Cost([]byte(s)); err != nil {
			return nil, fmt.Errorf("bcrypt hash: %w", err)
		}
		return bcryptHash{[]byte(s)}, nil
	case strings.HasPrefix(s, "$7$"):
		f := strings.Split(s[3:], "$")
		if len(f) != 3 {
			return nil, fmt.Errorf("$7$ hash: want $7$ITERATIONS$SALT$HASH")
		}
		iter, err := strconv.Atoi(f[0])
		if err != nil || iter < 1 {
			return nil, errors.New("$7$ hash: bad iteration count")
		}
		salt, err1 := unb64(f[1])
		hash, err2 := unb64(f[2])
		if err1 != nil || err2 != nil || len(salt) == 0 || len(hash) != sha512.Size {
			return nil, fmt.Errorf("$7$ hash: bad salt or hash encoding")
		}
		return pbkdf2Hash{iter: iter, salt: salt, hash: hash}, nil
	case strings.HasPrefix(s, "$6$"):
		f := strings.Split(s[3:], "$")
		if len(f) != 2 {
			return nil, fmt.Errorf("$6$ hash: want $6$SALT$HASH")
		}
		salt, err1 := unb64(f[0])
		hash, err2 := unb64(f[1])
		if err1 != nil || err2 != nil || len(salt) == 0 || len(hash) != sha512.Size {
			return nil, fmt.Errorf("$6$ hash: bad salt or hash encoding")
		}
		return sha512Hash{salt: salt, hash: hash}, nil
	case s == "":
		return nil, errors.New("empty password hash (a plain-text file? convert it with xmq passwd -U or mosquitto_passwd -U)")
	}
	return nil, errBadHash
}

// entry is one user of the password file.
type entry struct {
	hash  hasher
	scram map[*scramMech]scramCred
}

// passwordFile is a parsed password file.
type passwordFile struct {
	users  map[string]*entry
	dummy  hasher      // same kind and cost as the first entry; verified for unknown users
	logins *loginCache // logins proved against this load of the file; nil: off
}

// parsePasswordFile reads a whole password file. Errors name the line but
// never quote a hash, nor the user of a line that is no USER:HASH line: a
// file given as the password file by mistake (an environment file, a
// token) is not echoed into logs or xmq check-config's report.
func parsePasswordFile(data []byte) (*passwordFile, error) {
	pf := &passwordFile{users: map[string]*entry{}}
	for n, line := range splitLines(data) {
		user, e, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		if e == nil {
			continue
		}
		if _, dup := pf.users[user]; dup {
			return nil, fmt.Errorf("line %d: user %q appears twice", n+1, user)
		}
		pf.users[user] = e
		if pf.dummy == nil {
			d, err := e.hash.twin()
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n+1, err)
			}
			pf.dummy = d
		}
	}
	if pf.dummy == nil {
		d, err := newBcrypt(randomBytes(24), bcrypt.DefaultCost)
		if err != nil {
			return nil, err
		}
		pf.dummy = d
	}
	return pf, nil
}

// splitLines splits data into lines without their line endings.
func splitLines(data []byte) []string {
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// lineUser returns the user of a password file line, "" for a blank or
// comment line.
func lineUser(line string) string {
	t := strings.TrimSpace(line)
	if t == "" || t[0] == '#' {
		return ""
	}
	user, _, _ := strings.Cut(line, ":")
	return user
}

// parseLine parses one line; a blank or comment line gives a nil entry.
func parseLine(line string) (string, *entry, error) {
	user := lineUser(line)
	if user == "" {
		if t := strings.TrimSpace(line); t != "" && t[0] != '#' {
			return "", nil, ErrBadUsername
		}
		return "", nil, nil
	}
	if err := ValidUsername(user); err != nil {
		return "", nil, err
	}
	if len(line) == len(user) {
		return "", nil, errors.New("no password hash (want USER:HASH)")
	}
	fields := strings.Split(strings.TrimRight(line[len(user)+1:], " \t"), ":")
	h, err := parseHash(fields[0])
	if err != nil {
		return "", nil, err // before a hash, the line may be anything: its user is not named
	}
	e := &entry{hash: h}
	for _, f := range fields[1:] {
		m, c, err := parseScramField(f)
		if err != nil {
			return "", nil, fmt.Errorf("user %q: %w", user, err)
		}
		if e.scram == nil {
			e.scram = map[*scramMech]scramCred{}
		}
		e.scram[m] = c
	}
	return user, e, nil
}

// formatLine is the inverse of parseLine.
func formatLine(user string, e *entry) string {
	var b strings.Builder
	b.WriteString(user)
	b.WriteByte(':')
	b.WriteString(e.hash.encode())
	for _, m := range scramMechs { // a fixed order
		if c, ok := e.scram[m]; ok {
			b.WriteByte(':')
			b.WriteString(c.encode(m))
		}
	}
	return b.String()
}

// ValidUsername reports whether name can be stored in a password file: not
// empty, valid UTF-8, no ':' (the field separator), no control characters,
// not starting with '#' (a comment).
func ValidUsername(name string) error {
	if name == "" || len(name) > 65535 || !utf8.ValidString(name) || strings.ContainsRune(name, ':') || name[0] == '#' {
		return ErrBadUsername
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return ErrBadUsername
		}
	}
	return nil
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func unb64(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}
