package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmq-io/xmq/auth"
	"github.com/xmq-io/xmq/internal/config"
)

// passwdCLI runs passwdMain and returns its stdout.
func passwdCLI(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := passwdMain(args, strings.NewReader(stdin), &out, &errOut)
	return out.String(), err
}

// passwdLine returns user's line of the password file, "" without one.
func passwdLine(t *testing.T, file, user string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.SplitSeq(string(data), "\n") {
		if strings.HasPrefix(l, user+":") {
			return l
		}
	}
	return ""
}

// loginOK reports whether auth, reading file, lets user in with pass.
func loginOK(t *testing.T, file, user, pass string) bool {
	t.Helper()
	a, err := auth.New(auth.Options{PasswordFile: file})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	return a.Authenticate("c", user, []byte(pass), &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, "tcp", "") == nil
}

// TestPasswdCLI: xmq passwd's flags reach the password file: the hash,
// cost and SCRAM credentials asked for, a password from standard input,
// -D, -c and -h; the comment, order and mode of the file stay.
func TestPasswdCLI(t *testing.T) {
	dir := t.TempDir()
	file := passwordFile(t) // Mosquitto's, with a comment that must stay
	fixture, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, append([]byte("# team\n"), fixture...), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o640); err != nil { // WriteFile keeps the file's 0600
		t.Fatal(err)
	}
	steps := []struct {
		name  string
		stdin string
		args  []string
		check func(t *testing.T)
	}{
		{"add bcrypt", "", []string{"-b", "-H", "bcrypt", "-cost", "4", file, "dave", "d4ve"}, func(t *testing.T) {
			l := passwdLine(t, file, "dave")
			if !strings.HasPrefix(l, "dave:$2a$04$") || !strings.Contains(l, ":$scram-sha-256$") || !strings.Contains(l, ":$scram-sha-1$") {
				t.Errorf("dave's line %q", l)
			}
			if !loginOK(t, file, "dave", "d4ve") {
				t.Error("dave cannot log in")
			}
		}},
		{"change from stdin", "n3w\n", []string{"-hash", "bcrypt", "-cost", "4", "-scram", "none", file, "alice"}, func(t *testing.T) {
			if l := passwdLine(t, file, "alice"); !strings.HasPrefix(l, "alice:$2a$04$") || strings.Contains(l, "scram") {
				t.Errorf("alice's line %q", l)
			}
			if !loginOK(t, file, "alice", "n3w") || !loginOK(t, file, "bob", "hunter2") {
				t.Error("alice not changed, or bob changed")
			}
		}},
		{"mosquitto hash", "", []string{"-b", "-H", "sha512-pbkdf2", "-scram", "sha-256", file, "erin", "3rin"}, func(t *testing.T) {
			l := passwdLine(t, file, "erin")
			if !strings.HasPrefix(l, "erin:$7$101$") || !strings.Contains(l, ":$scram-sha-256$") || strings.Contains(l, "scram-sha-1") {
				t.Errorf("erin's line %q", l)
			}
			if !loginOK(t, file, "erin", "3rin") {
				t.Error("erin cannot log in")
			}
		}},
		{"delete", "", []string{"-D", file, "bob"}, func(t *testing.T) {
			if l := passwdLine(t, file, "bob"); l != "" {
				t.Errorf("bob not deleted: %q", l)
			}
		}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if _, err := passwdCLI(t, s.stdin, s.args...); err != nil {
				t.Fatalf("passwd %q: %v", s.args, err)
			}
			s.check(t)
		})
	}
	data, _ := os.ReadFile(file)
	if !strings.HasPrefix(string(data), "# team\nalice:$2a$") || strings.Count(string(data), "\n") != 5 {
		t.Errorf("comment, order or users lost:\n%s", data)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640 kept", fi.Mode().Perm())
	}
	if _, err := passwdCLI(t, "", "-b", "-c", "-cost", "4", file, "only", "one"); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(file); !strings.HasPrefix(string(data), "only:$2a$04$") || strings.Count(string(data), "\n") != 1 {
		t.Errorf("-c kept other lines:\n%s", data)
	}
	newFile := filepath.Join(dir, "new")
	if _, err := passwdCLI(t, "", "-b", "-cost", "4", newFile, "u", "p"); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(newFile); fi.Mode().Perm() != 0o600 {
		t.Errorf("new file mode %v, want 0600", fi.Mode().Perm())
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("zoe:s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := passwdCLI(t, "", "-U", "-H", "bcrypt", "-cost", "4", "-scram", "none", plain); err != nil {
		t.Fatal(err)
	}
	if l := passwdLine(t, plain, "zoe"); !strings.HasPrefix(l, "zoe:$2a$04$") || strings.Contains(l, "scram") || !loginOK(t, plain, "zoe", "s3cret") {
		t.Errorf("-U -H bcrypt: zoe's line %q", l)
	}
	if out, err := passwdCLI(t, "", "-h"); err != nil || out != passwdUsage || !strings.Contains(out, "xmq passwd -D FILE USER") {
		t.Errorf("-h: %v\n%s", err, out)
	}
}

// TestPasswdCLIErrors: mistakes on the command line are usage errors
// (xmq exits 2), the others not; none creates the file.
func TestPasswdCLIErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "passwd")
	tests := []struct {
		name  string
		args  []string
		err   string
		usage bool
	}{
		{"no args", nil, "wrong arguments", true},
		{"batch without password", []string{"-b", file, "u"}, "wrong arguments", true},
		{"batch delete", []string{"-b", "-D", file, "u", "p"}, "wrong arguments", true},
		{"bad flag", []string{"-x", file, "u"}, "not defined", true},
		{"bad hash", []string{"-b", "-H", "md5", file, "u", "p"}, `-H "md5": want bcrypt, sha512-pbkdf2 or sha512`, true},
		{"bad scram", []string{"-b", "-scram", "sha-512", file, "u", "p"}, `-scram "sha-512": want sha-256, sha-1 or none`, true},
		{"-U with -b", []string{"-U", "-b", file}, "-U takes one FILE", true},
		{"-U with two files", []string{"-U", file, file}, "-U takes one FILE", true},
		{"colon in name", []string{"-b", file, "a:b", "p"}, "user name", false},
		{"empty password", []string{"-b", file, "u", ""}, "empty password", false},
		{"long bcrypt", []string{"-b", file, "u", strings.Repeat("x", 73)}, "72 bytes", false},
		{"delete missing", []string{"-D", file, "nobody"}, "not in", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := passwdCLI(t, "", tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("error = %v, want one containing %q", err, tt.err)
			}
			if errors.Is(err, errPasswdUsage) != tt.usage {
				t.Errorf("a usage error: %v, want %v", !tt.usage, tt.usage)
			}
			var ue config.UsageError
			if err := run(context.Background(), append([]string{"passwd"}, tt.args...), &bytes.Buffer{}, &bytes.Buffer{}); errors.As(err, &ue) != tt.usage {
				t.Errorf("xmq passwd: %v, a usage error: %v, want %v", err, !tt.usage, tt.usage)
			}
		})
	}
	if _, err := os.Stat(file); err == nil {
		t.Error("a failed command created the file")
	}
}
