package auth

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/internal/config/configtest"
)

// copyFixture copies testdata/mosquitto.passwd (mosquitto_passwd's $7$
// and $6$ entries) to a temporary file.
func copyFixture(t *testing.T) string {
	return configtest.CopyFile(t, "testdata/mosquitto.passwd", "passwd")
}

// TestPasswdKeepsFileHash: without a hash asked for (xmq passwd -H), a new
// entry gets the hash the file's entries use, with their cost, so a
// Mosquitto file stays a Mosquitto file ($7$, 101 iterations, 12-byte
// salt); an empty or new file gets bcrypt; Hash and Cost still choose.
func TestPasswdKeepsFileHash(t *testing.T) {
	write := func(t *testing.T, body string) string {
		t.Helper()
		path := filepath.Join(t.TempDir(), "passwd")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	bcryptFile := filepath.Join(t.TempDir(), "bcrypt")
	if err := SetPassword(bcryptFile, "first", []byte("pw"), false, PasswordOptions{Hash: "bcrypt", Cost: 5, SCRAM: PasswordSCRAMs}); err != nil {
		t.Fatal(err)
	}
	sha512Line := strings.Split(string(must(os.ReadFile("testdata/mosquitto.passwd"))), "\n")[2] // carol, $6$
	tests := []struct {
		name  string
		file  string
		opts  PasswordOptions
		check func(h hasher) bool
	}{
		{"mosquitto file: $7$", copyFixture(t), PasswordOptions{}, func(h hasher) bool {
			p, ok := h.(pbkdf2Hash)
			return ok && p.iter == 101 && len(p.salt) == 12 && len(p.hash) == 64
		}},
		{"all $6$: $6$", write(t, sha512Line+"\n"), PasswordOptions{}, func(h hasher) bool { _, ok := h.(sha512Hash); return ok }},
		{"bcrypt file: bcrypt at its cost", bcryptFile, PasswordOptions{}, func(h hasher) bool { return kindOf(h) == "bcrypt" && hashCost(h) == 5 }},
		{"new file: bcrypt", filepath.Join(t.TempDir(), "new"), PasswordOptions{Cost: 4}, func(h hasher) bool { return kindOf(h) == "bcrypt" && hashCost(h) == 4 }},
		{"comments only: bcrypt", write(t, "# nobody yet\n"), PasswordOptions{Cost: 4}, func(h hasher) bool { return kindOf(h) == "bcrypt" }},
		{"-H wins", copyFixture(t), PasswordOptions{Hash: "sha512"}, func(h hasher) bool { _, ok := h.(sha512Hash); return ok }},
		{"-cost wins", copyFixture(t), PasswordOptions{Cost: 7}, func(h hasher) bool { return kindOf(h) == "sha512-pbkdf2" && hashCost(h) == 7 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.SCRAM = PasswordSCRAMs
			if err := SetPassword(tt.file, "dave", []byte("d4ve"), false, tt.opts); err != nil {
				t.Fatal(err)
			}
			e := loadFile(t, tt.file).users["dave"]
			if e == nil || !tt.check(e.hash) || !e.hash.verify([]byte("d4ve")) {
				t.Errorf("dave's hash = %T %+v", e.hash, e.hash)
			}
		})
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestPasswdUpgrade: HashPlaintext (xmq passwd -U) hashes a plain-text file in place like
// mosquitto_passwd -U ($7$ by default), trims blanks, keeps comments and
// lines already hashed, and running it again changes nothing.
func TestPasswdUpgrade(t *testing.T) {
	hashed := strings.Split(string(must(os.ReadFile("testdata/mosquitto.passwd"))), "\n")[1] // bob, $7$
	path := filepath.Join(t.TempDir(), "passwd")
	body := "# plain text, as Mosquitto 1.x allowed\nalice:correct horse\n  zoe : s3cret \n" + hashed + "\n"
	if err := os.WriteFile(path, []byte(body), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := HashPlaintext(path, PasswordOptions{SCRAM: PasswordSCRAMs}); err != nil {
		t.Fatalf("HashPlaintext: %v", err)
	}
	pf := loadFile(t, path)
	for user, pass := range map[string]string{"alice": "correct horse", "zoe": "s3cret", "bob": "hunter2"} {
		e := pf.users[user]
		if e == nil || kindOf(e.hash) != "sha512-pbkdf2" || hashCost(e.hash) != 101 || !e.hash.verify([]byte(pass)) {
			t.Errorf("%s after -U: %+v", user, e)
		}
	}
	after := string(must(os.ReadFile(path)))
	if !strings.HasPrefix(after, "# plain text") || !strings.Contains(after, "\n"+hashed+"\n") {
		t.Errorf("comment or hashed line not kept:\n%s", after)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640 kept", fi.Mode().Perm())
	}
	if err := HashPlaintext(path, PasswordOptions{SCRAM: PasswordSCRAMs}); err != nil {
		t.Fatal(err)
	}
	if again := string(must(os.ReadFile(path))); again != after {
		t.Errorf("a second -U changed the file:\n%s\nwas\n%s", again, after)
	}

	bc := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(bc, []byte("u:p\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := HashPlaintext(bc, PasswordOptions{Hash: "bcrypt", Cost: 4}); err != nil {
		t.Fatal(err)
	}
	if e := loadFile(t, bc).users["u"]; kindOf(e.hash) != "bcrypt" || e.scram != nil || !e.hash.verify([]byte("p")) {
		t.Errorf("-U -H bcrypt: %+v", e)
	}

	for _, tt := range []struct{ name, body, err string }{
		{"no password", "dave\n", "line 1: no password"},
		{"colon in password", "eve:pa:ss\n", "cannot contain ':'"},
		{"damaged hash", "mallory:$7$101$bad\n", "line 1"},
		{"twice", "a:x\na:y\n", "appears twice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "passwd")
			if err := os.WriteFile(p, []byte(tt.body), 0o600); err != nil {
				t.Fatal(err)
			}
			err := HashPlaintext(p, PasswordOptions{SCRAM: PasswordSCRAMs})
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), p) {
				t.Errorf("-U error = %v, want one naming %s and %q", err, p, tt.err)
			}
			if got := string(must(os.ReadFile(p))); got != tt.body {
				t.Errorf("a failed -U changed the file to %q", got)
			}
		})
	}
}

// TestPasswdErrorsNameTarget: a write that fails names the file the user
// gave, never the temporary file beside it.
func TestPasswdErrorsNameTarget(t *testing.T) {
	target := filepath.Join(t.TempDir(), "missing-dir", "passwd")
	err := SetPassword(target, "u", []byte("p"), false, PasswordOptions{Cost: 4, SCRAM: PasswordSCRAMs})
	if err == nil || !strings.Contains(err.Error(), target) || strings.Contains(err.Error(), ".tmp") {
		t.Errorf("error = %v, want one naming %s and no temporary file", err, target)
	}
	dir := t.TempDir()
	err = SetPassword(dir, "u", []byte("p"), false, PasswordOptions{SCRAM: PasswordSCRAMs}) // a directory, not a file
	if err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("error = %v, want one naming %s", err, dir)
	}
}

// TestMosquittoReadsXmqFile: a Mosquitto file that xmq passwd changed is
// still Mosquitto's: mosquitto_passwd edits it, and a real mosquitto
// broker logs in the user xmq added (and refuses a wrong password). Skips
// without Debian's mosquitto package (in CI, CI=true, it fails).
func TestMosquittoReadsXmqFile(t *testing.T) {
	mpasswd, err1 := exec.LookPath("mosquitto_passwd")
	broker, err2 := exec.LookPath("mosquitto")
	if err2 != nil {
		broker, err2 = exec.LookPath("/usr/sbin/mosquitto")
	}
	pub, err3 := exec.LookPath("mosquitto_pub")
	if err1 != nil || err2 != nil || err3 != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("mosquitto, mosquitto_passwd or mosquitto_pub missing; .ci/deps installs mosquitto and mosquitto-clients")
		}
		t.Skip("mosquitto, mosquitto_passwd or mosquitto_pub not installed (apt-get install mosquitto mosquitto-clients)")
	}
	file := copyFixture(t)
	if err := SetPassword(file, "dave", []byte("d4ve"), false, PasswordOptions{SCRAM: PasswordSCRAMs}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, mpasswd, "-b", file, "erin", "3rin").CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_passwd -b on xmq's file: %v\n%s", err, out)
	}
	pf := loadFile(t, file) // and xmq still reads what mosquitto_passwd wrote
	for user, pass := range map[string]string{"alice": mosquittoUsers["alice"], "dave": "d4ve", "erin": "3rin"} {
		if e := pf.users[user]; e == nil || !e.hash.verify([]byte(pass)) {
			t.Errorf("%s: not readable after mosquitto_passwd", user)
		}
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	conf := filepath.Join(t.TempDir(), "mosquitto.conf")
	// user root: the test's files are root's, and mosquitto would drop to
	// an account that cannot read them.
	body := fmt.Sprintf("listener %d 127.0.0.1\npassword_file %s\nallow_anonymous false\nuser %s\n", port, file, currentUser())
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	cmd := exec.CommandContext(ctx, broker, "-c", conf)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(5 * time.Second); ; {
		c, err := net.DialTimeout("tcp", l.Addr().String(), time.Second)
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mosquitto did not listen: %v\n%s", err, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	login := func(user, pass string) error {
		return exec.CommandContext(ctx, pub, "-h", "127.0.0.1", "-p", fmt.Sprint(port), "-u", user, "-P", pass,
			"-t", "github.com/xmq-io/xmq/test", "-m", "hi").Run()
	}
	if err := login("dave", "d4ve"); err != nil {
		t.Errorf("mosquitto refused the user xmq passwd added: %v\n%s", err, log.String())
	}
	if err := login("dave", "wrong"); err == nil {
		t.Error("mosquitto accepted a wrong password")
	}
}

// currentUser is the account mosquitto should keep running as.
func currentUser() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "nobody"
}
