package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/mosquitto.passwd was written by Debian's mosquitto_passwd 2.0.11:
//
//	mosquitto_passwd -b -c mosquitto.passwd alice 'correct horse battery staple'
//	mosquitto_passwd -b mosquitto.passwd bob hunter2
//	mosquitto_passwd -H sha512 -b mosquitto.passwd carol 'pa:ss w0rd'
var mosquittoUsers = map[string]string{
	"alice": "correct horse battery staple", // $7$
	"bob":   "hunter2",                      // $7$
	"carol": "pa:ss w0rd",                   // $6$
}

func readFixture(t *testing.T) *passwordFile {
	t.Helper()
	data, err := os.ReadFile("testdata/mosquitto.passwd")
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parsePasswordFile(data)
	if err != nil {
		t.Fatalf("parsePasswordFile: %v", err)
	}
	return pf
}

func TestMosquittoPasswdFixture(t *testing.T) {
	pf := readFixture(t)
	if len(pf.users) != len(mosquittoUsers) {
		t.Fatalf("%d users, want %d", len(pf.users), len(mosquittoUsers))
	}
	kinds := map[string]string{"alice": "$7$", "bob": "$7$", "carol": "$6$"}
	for user, pass := range mosquittoUsers {
		e := pf.users[user]
		if e == nil {
			t.Fatalf("user %s missing", user)
		}
		if got := e.hash.encode()[:3]; got != kinds[user] {
			t.Errorf("%s: hash kind %s, want %s", user, got, kinds[user])
		}
		if !e.hash.verify([]byte(pass)) {
			t.Errorf("%s: right password refused", user)
		}
		for _, wrong := range []string{"", pass + "x", strings.ToUpper(pass), pass[:len(pass)-1]} {
			if e.hash.verify([]byte(wrong)) {
				t.Errorf("%s: wrong password %q accepted", user, wrong)
			}
		}
	}
	// The stand-in for unknown users is of the first entry's kind and cost.
	d, ok := pf.dummy.(pbkdf2Hash)
	if !ok || d.iter != 101 || len(d.salt) != 12 {
		t.Errorf("dummy = %T %+v, want a $7$ twin with 101 iterations", pf.dummy, pf.dummy)
	}
	if pf.dummy.verify([]byte("")) || pf.dummy.verify([]byte("hunter2")) {
		t.Error("dummy hash verified a password")
	}
}

// TestFormatRoundTrip writes every hash kind and reads it back.
func TestFormatRoundTrip(t *testing.T) {
	tests := []struct {
		hash  string
		cost  int
		mechs []*scramMech
	}{
		{"bcrypt", 4, scramMechs},
		{"bcrypt", 4, nil},
		{"sha512-pbkdf2", 0, []*scramMech{scramSHA256}},
		{"sha512", 0, []*scramMech{scramSHA1}},
	}
	for _, tt := range tests {
		t.Run(tt.hash, func(t *testing.T) {
			e, err := newEntry([]byte("s3cret"), tt.hash, tt.cost, tt.mechs)
			if err != nil {
				t.Fatal(err)
			}
			line := formatLine("dave", e)
			user, got, err := parseLine(line)
			if err != nil || user != "dave" {
				t.Fatalf("parseLine(%q) = %q, %v", line, user, err)
			}
			if formatLine(user, got) != line {
				t.Errorf("round trip changed the line:\n %s\n %s", line, formatLine(user, got))
			}
			if !got.hash.verify([]byte("s3cret")) || got.hash.verify([]byte("s3cret ")) {
				t.Error("verify after round trip is wrong")
			}
			if len(got.scram) != len(tt.mechs) {
				t.Errorf("%d SCRAM credentials, want %d", len(got.scram), len(tt.mechs))
			}
		})
	}
}

func TestParsePasswordFileErrors(t *testing.T) {
	good := "alice:$6$5dUC1/h6g5vGpxQH$d4FFHyKbybM6XVEqykVvv6Lu6zNnlw09bb9TxOwt2RhgXPBTkll1YEb1E9lbY5NKJKn3+sAAfUwxuRGRWgnjiw=="
	tests := []struct {
		name, file, err string
	}{
		{"plain text", "alice:secret\n", "unrecognised password hash"},
		{"no hash", "alice\n", "no password hash"},
		{"empty hash", "alice:\n", "plain-text file"},
		{"empty user", ":$6$abc$def\n", "user name"},
		{"bad $7$", "alice:$7$x$abc$def\n", "iteration count"},
		{"short $7$ hash", "alice:$7$101$YWJj$YWJj\n", "bad salt or hash"},
		{"bad $6$", "alice:$6$onlyone\n", "want $6$SALT$HASH"},
		{"bad bcrypt", "alice:$2a$xx\n", "bcrypt hash"},
		{"duplicate", good + "\n" + good + "\n", "appears twice"},
		{"bad extra", good + ":$scram-sha-512$1$a$b$c\n", "unrecognised extra field"},
		{"short scram", good + ":$scram-sha-256$4096$YWJj$YWJj$YWJj\n", "bad salt or key"},
		{"line number", "# users\n\n" + good + "\nbob:nope\n", "line 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parsePasswordFile([]byte(tt.file))
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("error = %v, want one containing %q", err, tt.err)
			}
			if strings.Contains(err.Error(), "d4FFHy") {
				t.Errorf("error quotes a hash: %v", err)
			}
		})
	}
	pf, err := parsePasswordFile([]byte("# comment\r\n\r\n" + good + "\r\n"))
	if err != nil || len(pf.users) != 1 {
		t.Errorf("comments, blank lines and CRLF: %v, %d users", err, len(pf.users))
	}
}

func TestValidUsername(t *testing.T) {
	for _, name := range []string{"alice", "Zoë", "a b", "dev/42", "x#y"} {
		if err := ValidUsername(name); err != nil {
			t.Errorf("ValidUsername(%q) = %v", name, err)
		}
	}
	for _, name := range []string{"", "a:b", "#root", "tab\there", "nul\x00", "\xff"} {
		if ValidUsername(name) == nil {
			t.Errorf("ValidUsername(%q) accepted", name)
		}
	}
}

func loadFile(t *testing.T, path string) *passwordFile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parsePasswordFile(data)
	if err != nil {
		t.Fatal(err)
	}
	return pf
}

// TestSetPassword adds, changes and deletes users of a Mosquitto file
// (xmq passwd's library half; cmd/xmq tests its command line): each
// entry gets the hash, cost and SCRAM credentials asked for, the others,
// the comment, the order and the mode stay.
func TestSetPassword(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "passwd")
	// Start from mosquitto's file plus a comment: SetPassword keeps both.
	fixture, _ := os.ReadFile("testdata/mosquitto.passwd")
	if err := os.WriteFile(file, append([]byte("# team\n"), fixture...), 0o640); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name  string
		do    func() error
		check func(t *testing.T, pf *passwordFile)
	}{
		{"add bcrypt", func() error {
			return SetPassword(file, "dave", []byte("d4ve"), false, PasswordOptions{Hash: "bcrypt", Cost: 4, SCRAM: PasswordSCRAMs})
		}, func(t *testing.T, pf *passwordFile) {
			e := pf.users["dave"]
			if _, ok := e.hash.(bcryptHash); !ok || !e.hash.verify([]byte("d4ve")) || len(e.scram) != 2 {
				t.Errorf("dave = %+v", e)
			}
		}},
		{"change", func() error {
			return SetPassword(file, "alice", []byte("n3w"), false, PasswordOptions{Hash: "bcrypt", Cost: 4})
		}, func(t *testing.T, pf *passwordFile) {
			e := pf.users["alice"]
			if !e.hash.verify([]byte("n3w")) || e.scram != nil {
				t.Errorf("alice not changed: %+v", e)
			}
			if !pf.users["bob"].hash.verify([]byte("hunter2")) {
				t.Error("bob changed")
			}
		}},
		{"mosquitto hash", func() error {
			return SetPassword(file, "erin", []byte("3rin"), false, PasswordOptions{Hash: "sha512-pbkdf2", SCRAM: []string{"SHA-256"}})
		}, func(t *testing.T, pf *passwordFile) {
			e := pf.users["erin"]
			if p, ok := e.hash.(pbkdf2Hash); !ok || p.iter != 101 || !e.hash.verify([]byte("3rin")) || len(e.scram) != 1 {
				t.Errorf("erin = %+v", e)
			}
		}},
		{"delete", func() error { return DeleteUser(file, "bob") }, func(t *testing.T, pf *passwordFile) {
			if pf.users["bob"] != nil || len(pf.users) != 4 {
				t.Errorf("bob not deleted: %d users", len(pf.users))
			}
		}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if err := s.do(); err != nil {
				t.Fatal(err)
			}
			s.check(t, loadFile(t, file))
		})
	}
	data, _ := os.ReadFile(file)
	if !strings.HasPrefix(string(data), "# team\nalice:$2a$") {
		t.Errorf("comment or order lost:\n%s", data)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640 kept", fi.Mode().Perm())
	}
	if err := SetPassword(file, "only", []byte("one"), true, PasswordOptions{Cost: 4, SCRAM: PasswordSCRAMs}); err != nil {
		t.Fatal(err)
	}
	if pf := loadFile(t, file); len(pf.users) != 1 {
		t.Errorf("-c kept %d users, want 1", len(pf.users))
	}
	newFile := filepath.Join(dir, "new")
	if err := SetPassword(newFile, "u", []byte("p"), false, PasswordOptions{Cost: 4, SCRAM: PasswordSCRAMs}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(newFile); fi.Mode().Perm() != 0o600 {
		t.Errorf("new file mode %v, want 0600", fi.Mode().Perm())
	}
}

// TestSetPasswordErrors: a refused change leaves no file behind.
func TestSetPasswordErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "passwd")
	tests := []struct {
		name string
		do   func() error
		err  string
	}{
		{"colon in name", func() error { return SetPassword(file, "a:b", []byte("p"), false, PasswordOptions{}) }, "user name"},
		{"empty password", func() error { return SetPassword(file, "u", nil, false, PasswordOptions{}) }, "empty password"},
		{"long bcrypt", func() error { return SetPassword(file, "u", []byte(strings.Repeat("x", 73)), false, PasswordOptions{}) }, "72 bytes"},
		{"unknown hash", func() error { return SetPassword(file, "u", []byte("p"), false, PasswordOptions{Hash: "md5"}) }, `hash "md5"`},
		{"unknown SCRAM", func() error {
			return SetPassword(file, "u", []byte("p"), false, PasswordOptions{SCRAM: []string{"sha-512"}})
		}, `SCRAM mechanism "sha-512"`},
		{"delete missing", func() error { return DeleteUser(file, "nobody") }, "not in"},
		{"delete bad name", func() error { return DeleteUser(file, "a:b") }, "user name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.do(); err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("error = %v, want one containing %q", err, tt.err)
			}
		})
	}
	if _, err := os.Stat(file); err == nil {
		t.Error("a failed change created the file")
	}
}
