package auth

import (
	"crypto/pbkdf2"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/xmq-io/xmq/codec"
)

// The test vectors of RFC 5802 section 5 (SCRAM-SHA-1) and RFC 7677
// section 3 (SCRAM-SHA-256): user "user", password "pencil".
var scramVectors = []struct {
	mech                                  *scramMech
	salt                                  string // base64
	serverNonce                           string // the server's part of the nonce
	clientFirst, serverFirst, clientFinal string
	serverFinal                           string
}{
	{
		mech: scramSHA1, salt: "QSXCR+Q6sek8bf92", serverNonce: "3rfcNHYJY1ZVvWVs7j",
		clientFirst: "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
		serverFirst: "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
		clientFinal: "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
		serverFinal: "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
	},
	{
		mech: scramSHA256, salt: "W22ZaJ0SNY7soEsUEjb6gQ==", serverNonce: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
		clientFirst: "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
		serverFirst: "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
		clientFinal: "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
		serverFinal: "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
	},
}

// vectorAuth serves "user" with the vectors' salts.
func vectorAuth(t *testing.T) *Auth {
	t.Helper()
	e := &entry{scram: map[*scramMech]scramCred{}}
	h, err := newBcrypt([]byte("pencil"), 4)
	if err != nil {
		t.Fatal(err)
	}
	e.hash = h
	for _, v := range scramVectors {
		salt, _ := unb64(v.salt)
		c, err := newScramCred(v.mech, []byte("pencil"), salt, 4096)
		if err != nil {
			t.Fatal(err)
		}
		e.scram[v.mech] = c
	}
	file := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(file, []byte(formatLine("user", e)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return newAuth(t, Options{PasswordFile: file})
}

var remote = &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 40000}

func TestScramVectors(t *testing.T) {
	a := vectorAuth(t)
	for _, v := range scramVectors {
		t.Run(v.mech.name, func(t *testing.T) {
			a.nonce = func() string { return v.serverNonce }
			reply, state, done, _, err := a.AuthStep(v.mech.name, "c1", nil, []byte(v.clientFirst), remote, "tcp")
			if err != nil || done {
				t.Fatalf("first step: done=%v err=%v", done, err)
			}
			if string(reply) != v.serverFirst {
				t.Fatalf("server-first-message\n got %s\nwant %s", reply, v.serverFirst)
			}
			reply, next, done, user, err := a.AuthStep(v.mech.name, "c1", state, []byte(v.clientFinal), remote, "tcp")
			if err != nil || !done || next != nil || user != "user" {
				t.Fatalf("final step: done=%v user=%q err=%v", done, user, err)
			}
			if string(reply) != v.serverFinal {
				t.Fatalf("server-final-message\n got %s\nwant %s", reply, v.serverFinal)
			}
		})
	}
}

// scramClient is a minimal SCRAM client for the tests.
type scramClient struct {
	mech              *scramMech
	user, password    string
	nonce             string
	clientFirstBare   string
	authMessage       string
	saltedPassword    []byte
	expectedServerSig string
}

func (c *scramClient) first() []byte {
	c.clientFirstBare = "n=" + strings.NewReplacer("=", "=3D", ",", "=2C").Replace(c.user) + ",r=" + c.nonce
	return []byte("n,," + c.clientFirstBare)
}

func (c *scramClient) final(serverFirst []byte) ([]byte, error) {
	attrs := strings.Split(string(serverFirst), ",")
	if len(attrs) != 3 || !strings.HasPrefix(attrs[0], "r="+c.nonce) {
		return nil, errors.New("bad server-first-message " + string(serverFirst))
	}
	salt, err := unb64(strings.TrimPrefix(attrs[1], "s="))
	if err != nil {
		return nil, err
	}
	iter, err := strconv.Atoi(strings.TrimPrefix(attrs[2], "i="))
	if err != nil {
		return nil, err
	}
	c.saltedPassword, err = pbkdf2.Key(c.mech.newHash, c.password, salt, iter, c.mech.size)
	if err != nil {
		return nil, err
	}
	withoutProof := "c=biws," + attrs[0]
	c.authMessage = c.clientFirstBare + "," + string(serverFirst) + "," + withoutProof
	ck := c.mech.hmac(c.saltedPassword, "Client Key")
	h := c.mech.newHash()
	h.Write(ck)
	sig := c.mech.hmac(h.Sum(nil), c.authMessage)
	for i := range ck {
		ck[i] ^= sig[i]
	}
	c.expectedServerSig = "v=" + b64(c.mech.hmac(c.mech.hmac(c.saltedPassword, "Server Key"), c.authMessage))
	return []byte(withoutProof + ",p=" + b64(ck)), nil
}

// scramLogin runs a whole exchange; it returns the user name and error of
// the last step.
func scramLogin(t *testing.T, a *Auth, mech, user, password, clientID string, addr net.Addr) (string, error) {
	t.Helper()
	c := &scramClient{mech: scramMechByName(mech), user: user, password: password, nonce: b64(randomBytes(12))}
	if c.mech == nil {
		c.mech = scramSHA256
	}
	reply, state, _, _, err := a.AuthStep(mech, clientID, nil, c.first(), addr, "tcp")
	if err != nil {
		return "", err
	}
	msg, err := c.final(reply)
	if err != nil {
		t.Fatal(err)
	}
	reply, _, done, got, err := a.AuthStep(mech, clientID, state, msg, addr, "tcp")
	if err != nil {
		return "", err
	}
	if !done || string(reply) != c.expectedServerSig {
		t.Fatalf("done=%v, server signature %q, want %q", done, reply, c.expectedServerSig)
	}
	return got, nil
}

func reasonOf(err error) codec.ReasonCode {
	var rc codec.ReasonCode
	if errors.As(err, &rc) {
		return rc
	}
	return 0
}

func TestScramLogin(t *testing.T) {
	file := filepath.Join(t.TempDir(), "passwd")
	if err := SetPassword(file, "alice", []byte("wonder,land="), false, PasswordOptions{Cost: 4, SCRAM: PasswordSCRAMs}); err != nil {
		t.Fatal(err)
	}
	if err := SetPassword(file, "bob", []byte("builder"), false, PasswordOptions{Cost: 4}); err != nil {
		t.Fatal(err)
	}
	if err := SetPassword(file, "we,ird=name", []byte("x"), false, PasswordOptions{Cost: 4, SCRAM: PasswordSCRAMs}); err != nil {
		t.Fatal(err)
	}
	a := newAuth(t, Options{PasswordFile: file, Limits: Limits{MaxFailedLogins: -1}})
	tests := []struct {
		name, mech, user, password string
		want                       codec.ReasonCode
	}{
		{"sha-256", "SCRAM-SHA-256", "alice", "wonder,land=", codec.Success},
		{"sha-1", "SCRAM-SHA-1", "alice", "wonder,land=", codec.Success},
		{"escaped user name", "SCRAM-SHA-256", "we,ird=name", "x", codec.Success},
		{"wrong password", "SCRAM-SHA-256", "alice", "wonderland", codec.BadUserNameOrPassword},
		{"unknown user", "SCRAM-SHA-256", "mallory", "x", codec.BadUserNameOrPassword},
		{"no SCRAM credentials", "SCRAM-SHA-256", "bob", "builder", codec.BadUserNameOrPassword},
		{"unknown method", "SCRAM-SHA-512", "alice", "x", codec.BadAuthenticationMethod},
		{"lower case method", "scram-sha-256", "alice", "x", codec.BadAuthenticationMethod},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			user, err := scramLogin(t, a, tt.mech, tt.user, tt.password, "c-"+tt.name, remote)
			if got := reasonOf(err); got != tt.want {
				t.Fatalf("reason %v (%v), want %v", got, err, tt.want)
			}
			if tt.want == codec.Success && user != tt.user {
				t.Errorf("user %q, want %q", user, tt.user)
			}
		})
	}
	// An unknown user gets the same salt every time, like a real one.
	salt := func(user string) string {
		reply, _, _, _, err := a.AuthStep("SCRAM-SHA-256", "probe", nil, []byte("n,,n="+user+",r=abc"), remote, "tcp")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(string(reply), ",")[1]
	}
	if salt("mallory") != salt("mallory") || salt("mallory") == salt("trudy") {
		t.Error("fake salts are not stable per user")
	}
	if st := a.Stats(); st.Logins != 3 || st.LoginFailures != 3 {
		t.Errorf("stats %+v, want 3 logins and 3 failures", st)
	}
}

func TestScramMalformed(t *testing.T) {
	a := vectorAuth(t)
	v := scramVectors[1]
	tests := []struct {
		name, first, final string
	}{
		{"channel binding", "p=tls-unique,,n=user,r=abc", ""},
		{"bad cbind flag", "x,,n=user,r=abc", ""},
		{"no gs2 header", "n=user,r=abc", ""},
		{"mandatory extension", "n,,m=ext,n=user,r=abc", ""},
		{"authzid differs", "n,a=admin,n=user,r=abc", ""},
		{"bad escape", "n,,n=us=er,r=abc", ""},
		{"empty nonce", "n,,n=user,r=", ""},
		{"no proof", v.clientFirst, "c=biws,r=x"},
		{"nonce mismatch", v.clientFirst, "c=biws,r=rOprNGfwEbeRWgbNEkqOother,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="},
		{"cbind mismatch", v.clientFirst, "c=eSws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="},
		{"short proof", v.clientFirst, "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=AAAA"},
	}
	a.nonce = func() string { return v.serverNonce }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, state, _, _, err := a.AuthStep(v.mech.name, "c", nil, []byte(tt.first), remote, "tcp")
			if tt.final == "" {
				if err == nil {
					t.Fatal("first step accepted")
				}
				return
			}
			if err != nil {
				t.Fatalf("first step: %v", err)
			}
			_, _, done, _, err := a.AuthStep(v.mech.name, "c", state, []byte(tt.final), remote, "tcp")
			if err == nil || done {
				t.Fatal("final step accepted")
			}
		})
	}
	if _, _, _, _, err := a.AuthStep(v.mech.name, "c", "bogus state", nil, remote, "tcp"); reasonOf(err) != codec.ProtocolError {
		t.Errorf("foreign state: %v", err)
	}
}

func TestScramNeedsPasswordFile(t *testing.T) {
	a := newAuth(t, Options{})
	if _, _, _, _, err := a.AuthStep("SCRAM-SHA-256", "c", nil, []byte("n,,n=u,r=x"), remote, "tcp"); reasonOf(err) != codec.BadAuthenticationMethod {
		t.Errorf("without a password file: %v, want Bad Authentication Method", err)
	}
}
