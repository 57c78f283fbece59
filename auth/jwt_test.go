package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// Test keys, made once: an RSA key takes a while.
var (
	testRSA = sync.OnceValue(func() *rsa.PrivateKey {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		return k
	})
	testEC = sync.OnceValue(func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	})
	testEd = sync.OnceValue(func() ed25519.PrivateKey {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	})
)

// testSecret is a 32-byte HMAC secret as a file holds it (with a newline).
const testSecret = "0123456789abcdef0123456789abcdef\n"

// signJWT makes a token of claims signed with key by alg, with kid ("" for
// none) in its header.
func signJWT(t testing.TB, alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// unsignedJWT makes an alg none token.
func unsignedJWT(claims map[string]any) string {
	h, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT"})
	p, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p) + "."
}

func writeTestFile(t testing.TB, name, content string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// publicPEM encodes a public key as a PUBLIC KEY block.
func publicPEM(t testing.TB, key any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// jwksJSON encodes public keys as a JWK Set, kid i for key i.
func jwksJSON(t testing.TB, keys map[string]any) string {
	t.Helper()
	var set jose.JSONWebKeySet
	for kid, k := range keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k, KeyID: kid, Use: "sig"})
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// jwtAuthFor makes an Auth with the clock c and JWT options o.
func jwtAuthFor(t *testing.T, c *clock, o JWTOptions, more ...func(*Options)) *Auth {
	t.Helper()
	opts := Options{JWT: o, now: c.now, AllowAnonymous: AnonymousDeny}
	for _, f := range more {
		f(&opts)
	}
	return newAuth(t, opts)
}

func claimsAt(c *clock, extra map[string]any) map[string]any {
	m := map[string]any{"sub": "alice", "iat": c.now().Unix(), "exp": c.now().Add(time.Hour).Unix()}
	for k, v := range extra {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	return m
}

// TestJWTRefusals is the attacker's test: every forged, stale, misdirected
// or malformed token is refused with Bad User Name or Password, counts as a
// failed login of its source, and the refusal's text never holds it.
func TestJWTRefusals(t *testing.T) {
	c := newClock()
	rsaKey, ecKey := testRSA(), testEC()
	otherEC, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rsaPEM := publicPEM(t, &rsaKey.PublicKey)
	secret := writeTestFile(t, "secret", testSecret)
	pub := writeTestFile(t, "pub.pem", rsaPEM)
	jwks := writeTestFile(t, "jwks.json", jwksJSON(t, map[string]any{"ec1": &ecKey.PublicKey}))
	withSecret := jwtAuthFor(t, c, JWTOptions{SecretFile: secret, Issuer: "https://issuer.example", Audience: "mqtt"})
	withPublic := jwtAuthFor(t, c, JWTOptions{PublicKeyFile: pub})
	withJWKS := jwtAuthFor(t, c, JWTOptions{JWKSFile: jwks})
	withBoth := jwtAuthFor(t, c, JWTOptions{SecretFile: secret, PublicKeyFile: pub})
	key := []byte(strings.TrimSpace(testSecret))
	good := map[string]any{"iss": "https://issuer.example", "aud": "mqtt"}
	hs := func(extra map[string]any) string {
		m := claimsAt(c, good)
		for k, v := range extra {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return signJWT(t, jose.HS256, key, "", m)
	}
	huge := make([]string, 2000)
	for i := range huge {
		huge[i] = "topic/number/" + strings.Repeat("x", 3)
	}
	tests := []struct {
		name, user, token string
		a                 *Auth
	}{
		{"expired", "", hs(map[string]any{"exp": c.now().Add(-time.Second).Unix()}), withSecret},
		{"expires now", "", hs(map[string]any{"exp": c.now().Unix()}), withSecret},
		{"not valid yet", "", hs(map[string]any{"nbf": c.now().Add(time.Minute).Unix()}), withSecret},
		{"issued in the future", "", hs(map[string]any{"iat": c.now().Add(time.Minute).Unix()}), withSecret},
		{"wrong issuer", "", hs(map[string]any{"iss": "https://evil.example"}), withSecret},
		{"no issuer", "", hs(map[string]any{"iss": nil}), withSecret},
		{"wrong audience", "", hs(map[string]any{"aud": []string{"web", "api"}}), withSecret},
		{"no audience", "", hs(map[string]any{"aud": nil}), withSecret},
		{"bad signature", "", signJWT(t, jose.HS256, []byte("another secret of thirty-two byte"), "", claimsAt(c, good)), withSecret},
		{"tampered payload", "", tamper(hs(nil)), withSecret},
		{"alg none", "", unsignedJWT(claimsAt(c, good)), withSecret},
		{"alg none against public keys", "", unsignedJWT(claimsAt(c, nil)), withPublic},
		{"HMAC keyed with the public key", "", signJWT(t, jose.HS256, []byte(rsaPEM), "", claimsAt(c, nil)), withPublic},
		{"HMAC keyed with the public key's DER", "", signJWT(t, jose.HS256, x509.MarshalPKCS1PublicKey(&rsaKey.PublicKey), "", claimsAt(c, nil)), withPublic},
		{"HMAC keyed with the public key, secret too", "", signJWT(t, jose.HS256, []byte(rsaPEM), "", claimsAt(c, nil)), withBoth},
		{"RS256 signed with the secret's owner's HMAC", "", signJWT(t, jose.HS256, []byte("a different secret, 32 bytes long!"), "", claimsAt(c, nil)), withBoth},
		{"RSA token, secret only", "", signJWT(t, jose.RS256, rsaKey, "", claimsAt(c, good)), withSecret},
		{"unknown kid", "", signJWT(t, jose.ES256, otherEC, "ec2", claimsAt(c, nil)), withJWKS},
		{"known kid, other key", "", signJWT(t, jose.ES256, otherEC, "ec1", claimsAt(c, nil)), withJWKS},
		{"no kid in a JWK Set", "", signJWT(t, jose.ES256, ecKey, "", claimsAt(c, nil)), withJWKS},
		{"oversize token", "", hs(map[string]any{"acl": map[string]any{"pub": huge}}), withSecret},
		{"other user name", "bob", hs(nil), withSecret},
		{"no user claim", "", hs(map[string]any{"sub": nil}), withSecret},
		{"user claim not a string", "", hs(map[string]any{"sub": 42}), withSecret},
		{"acl rule xmq cannot check", "", hs(map[string]any{"acl": []any{map[string]any{"permission": "allow", "action": "publish", "topic": "t", "qos": []int{1}}}}), withSecret},
		{"acl eq topic", "", hs(map[string]any{"acl": []any{map[string]any{"permission": "allow", "action": "subscribe", "topic": "eq t/#"}}}), withSecret},
		{"acl unknown list", "", hs(map[string]any{"acl": map[string]any{"publish": []string{"t"}}}), withSecret},
		{"acl bad filter", "", hs(map[string]any{"acl": map[string]any{"pub": []string{"a/#/b"}}}), withSecret},
		{"acl unknown placeholder", "", hs(map[string]any{"acl": map[string]any{"pub": []string{"a/${cert_common_name}"}}}), withSecret},
		{"not a token, no password file", "alice", "correct horse battery staple", withSecret},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "oversize token" && len(tt.token) <= MaxTokenSize {
				t.Fatalf("token of %d bytes is not oversize", len(tt.token))
			}
			remote := tcpAddr(fmt.Sprintf("198.51.100.%d:5000", i+1)) // each its own: failures lock a source out
			user, _, err := tt.a.Login("c1", tt.user, []byte(tt.token), remote, "tcp", "")
			if reasonOf(err) != codec.BadUserNameOrPassword || user != "" {
				t.Fatalf("Login = %q, %v; want Bad User Name or Password", user, err)
			}
			if err2 := tt.a.Authenticate("c1", tt.user, []byte(tt.token), remote, "tcp", ""); reasonOf(err2) != codec.BadUserNameOrPassword {
				t.Fatalf("Authenticate = %v; want Bad User Name or Password", err2)
			}
			if len(tt.token) > 20 && strings.Contains(err.Error(), tt.token[len(tt.token)-20:]) {
				t.Errorf("refusal %q holds the token", err)
			}
			t.Log(err)
		})
	}
	if st := withSecret.Stats(); st.LoginFailures == 0 || st.HashChecks != 0 || st.Logins != 0 {
		t.Errorf("stats %+v: want failures, no hash checked, no login", st)
	}
}

// tamper changes the payload of a token and keeps its signature.
func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	p, _ := base64.RawURLEncoding.DecodeString(parts[1])
	p = []byte(strings.Replace(string(p), `"alice"`, `"admin"`, 1))
	parts[1] = base64.RawURLEncoding.EncodeToString(p)
	return strings.Join(parts, ".")
}

// TestJWTAccepted: each key kind, the user name from the claim or checked
// against it, the leeway for a clock ahead of ours, and the expiry.
func TestJWTAccepted(t *testing.T) {
	c := newClock()
	rsaKey, ecKey, edKey := testRSA(), testEC(), testEd()
	secret := writeTestFile(t, "secret", testSecret)
	pub := writeTestFile(t, "pub.pem", publicPEM(t, &rsaKey.PublicKey)+publicPEM(t, edKey.Public()))
	jwks := writeTestFile(t, "jwks.json", jwksJSON(t, map[string]any{"ec1": &ecKey.PublicKey, "rsa1": &rsaKey.PublicKey}))
	a := jwtAuthFor(t, c, JWTOptions{SecretFile: secret, PublicKeyFile: pub, JWKSFile: jwks, UsernameClaim: "username"})
	key := []byte(strings.TrimSpace(testSecret))
	claims := claimsAt(c, map[string]any{"username": "alice", "sub": "ignored"})
	exp := time.Unix(claims["exp"].(int64), 0)
	tests := []struct {
		name, user, token string
	}{
		{"HS256", "", signJWT(t, jose.HS256, key, "", claims)},
		{"HS256 with the user name", "alice", signJWT(t, jose.HS256, key, "", claims)},
		{"RS256 PEM", "", signJWT(t, jose.RS256, rsaKey, "", claims)},
		{"PS256 PEM", "", signJWT(t, jose.PS256, rsaKey, "", claims)},
		{"EdDSA PEM", "", signJWT(t, jose.EdDSA, edKey, "", claims)},
		{"ES256 JWK Set by kid", "", signJWT(t, jose.ES256, ecKey, "ec1", claims)},
		{"RS256 JWK Set by kid", "", signJWT(t, jose.RS256, rsaKey, "rsa1", claims)},
		{"RS256 kid not in the set: PEM keys", "", signJWT(t, jose.RS256, rsaKey, "elsewhere", claims)},
		{"nbf within the leeway", "", signJWT(t, jose.HS256, key, "", claimsAt(c, map[string]any{"username": "alice", "nbf": c.now().Add(3 * time.Second).Unix()}))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			user, expires, err := a.Login("c-"+tt.name, tt.user, []byte(tt.token), tcpAddr("198.51.100.7:5000"), "tcp", "")
			if err != nil || user != "alice" {
				t.Fatalf("Login = %q, %v; want alice", user, err)
			}
			if tt.name != "nbf within the leeway" && !expires.Equal(exp) {
				t.Errorf("expires %v, want %v", expires, exp)
			}
		})
	}
	// Without exp, the login does not end.
	user, expires, err := a.Login("c", "", []byte(signJWT(t, jose.HS256, key, "", claimsAt(c, map[string]any{"username": "alice", "exp": nil}))), tcpAddr("198.51.100.7:5000"), "tcp", "")
	if err != nil || user != "alice" || !expires.IsZero() {
		t.Errorf("token without exp: %q %v %v", user, expires, err)
	}
	if st := a.Stats(); st.HashChecks != 0 || st.Logins != int64(len(tests)+1) {
		t.Errorf("stats %+v", st)
	}
}

// TestJWTPasswordsStillWork: with auth.jwt and a password file, passwords
// go to the file, including one with dots; a user name without a token and
// without a password file is refused, anonymous clients follow the policy.
func TestJWTPasswordsStillWork(t *testing.T) {
	c := newClock()
	secret := writeTestFile(t, "secret", testSecret)
	withFile := jwtAuthFor(t, c, JWTOptions{SecretFile: secret}, func(o *Options) { o.PasswordFile = writePasswd(t) })
	jwtOnly := jwtAuthFor(t, c, JWTOptions{SecretFile: secret}, func(o *Options) { o.AllowAnonymous = AnonymousLoopback })
	far, local := tcpAddr("198.51.100.7:5000"), tcpAddr("127.0.0.1:5000")
	for _, tt := range []struct {
		name     string
		a        *Auth
		user, pw string
		remote   net.Addr
		want     codec.ReasonCode
	}{
		{"password", withFile, "dave", "wonderland", far, codec.Success},
		{"wrong password", withFile, "dave", "wonder.land.x", far, codec.BadUserNameOrPassword},
		{"user name, no token, no file", jwtOnly, "dave", "wonderland", local, codec.BadUserNameOrPassword},
		{"anonymous from loopback", jwtOnly, "", "", local, codec.Success},
		{"anonymous from afar", jwtOnly, "", "", far, codec.NotAuthorized},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := tt.a.Login("c", tt.user, []byte(tt.pw), tt.remote, "tcp", "")
			if reasonOf(err) != tt.want || (err == nil) != (tt.want == codec.Success) {
				t.Fatalf("Login = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestJWTFailuresLockOut: bad tokens count toward the failed-login limit
// of their source, which then refuses even a good token before checking
// it; another source logs in meanwhile.
func TestJWTFailuresLockOut(t *testing.T) {
	c := newClock()
	a := jwtAuthFor(t, c, JWTOptions{SecretFile: writeTestFile(t, "secret", testSecret)},
		func(o *Options) { o.Limits.MaxFailedLogins = 3 })
	key := []byte(strings.TrimSpace(testSecret))
	good := signJWT(t, jose.HS256, key, "", claimsAt(c, nil))
	bad := signJWT(t, jose.HS256, []byte("not the secret, but long enough to sign"), "", claimsAt(c, nil))
	attacker, other := tcpAddr("203.0.113.9:4000"), tcpAddr("198.51.100.7:5000")
	for range 3 {
		if _, _, err := a.Login("x", "", []byte(bad), attacker, "tcp", ""); reasonOf(err) != codec.BadUserNameOrPassword {
			t.Fatalf("bad token: %v", err)
		}
	}
	if _, _, err := a.Login("x", "", []byte(good), attacker, "tcp", ""); reasonOf(err) != codec.NotAuthorized {
		t.Fatalf("good token from a locked-out source: %v, want Not authorized", err)
	}
	if _, _, err := a.Login("y", "", []byte(good), other, "tcp", ""); err != nil {
		t.Fatalf("good token from another source: %v", err)
	}
	if st := a.Stats(); st.LockedOut != 1 || st.LoginFailures != 3 {
		t.Errorf("stats %+v", st)
	}
	// A banned user is refused though the CONNECT named none.
	if err := a.Ban(Ban{Kind: BanUsername, Value: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Login("y", "", []byte(good), other, "tcp", ""); reasonOf(err) != codec.Banned {
		t.Fatalf("banned user's token: %v, want Banned", err)
	}
}

// TestJWTACLClaim: both claim shapes with their placeholders, how they
// combine with the ACL file, and that decisions follow each login's token:
// two clients of one user with different tokens, and one client id logging
// in again with another token, never share a decision.
func TestJWTACLClaim(t *testing.T) {
	c := newClock()
	secret := writeTestFile(t, "secret", testSecret)
	key := []byte(strings.TrimSpace(testSecret))
	aclFile := writeTestFile(t, "acl", "pattern readwrite shared/%u/#\nuser alice\ntopic readwrite file/#\n")
	withFile := jwtAuthFor(t, c, JWTOptions{SecretFile: secret}, func(o *Options) { o.ACLFile = aclFile })
	noFile := jwtAuthFor(t, c, JWTOptions{SecretFile: secret})
	remote := tcpAddr("198.51.100.7:5000")
	login := func(a *Auth, clientID string, acl any) {
		t.Helper()
		tok := signJWT(t, jose.HS256, key, "", claimsAt(c, map[string]any{"acl": acl}))
		if _, _, err := a.Login(clientID, "", []byte(tok), remote, "tcp", ""); err != nil {
			t.Fatalf("Login: %v", err)
		}
	}
	whitelist := map[string]any{"pub": []string{"up/%u/%c"}, "sub": []string{"down/${username}/#"}, "all": []string{"both/+"}}
	rules := []any{
		map[string]any{"permission": "deny", "action": "all", "topic": "secret/#"},
		map[string]any{"permission": "allow", "action": "publish", "topic": "t/${clientid}"},
		map[string]any{"permission": "allow", "action": "subscribe", "topic": "news/#"},
	}
	login(withFile, "w1", whitelist)
	login(withFile, "r1", rules)
	login(noFile, "w1", whitelist)
	login(noFile, "r1", rules)
	type check struct {
		what             string // pub, sub, read
		clientID, topic  string
		withFile, noFile bool
	}
	for _, tt := range []check{
		// The whitelist: what it names, nothing else, the ACL file unasked.
		{"pub", "w1", "up/alice/w1", true, true},
		{"pub", "w1", "up/alice/w2", false, false},
		{"pub", "w1", "up/bob/w1", false, false},
		{"pub", "w1", "down/alice/x", false, false},
		{"sub", "w1", "down/alice/#", true, true},
		{"sub", "w1", "down/alice/x/+", true, true},
		{"sub", "w1", "down/#", false, false},
		{"read", "w1", "down/alice/x", true, true},
		{"pub", "w1", "both/x", true, true},
		{"sub", "w1", "both/x", true, true},
		{"pub", "w1", "file/x", false, false},
		{"sub", "w1", "$share/g/both/+", true, true},
		// The rules: first match decides, no match goes to the ACL file.
		{"pub", "r1", "t/r1", true, true},
		{"pub", "r1", "t/w1", false, true},
		{"pub", "r1", "secret/x", false, false},
		{"sub", "r1", "secret/#", false, false},
		{"read", "r1", "secret/x", false, false},
		{"sub", "r1", "news/#", true, true},
		{"read", "r1", "news/today", true, true},
		{"pub", "r1", "file/x", true, true},
		{"pub", "r1", "shared/alice/x", true, true},
		{"sub", "r1", "other/#", false, true},
	} {
		for _, a := range []struct {
			name string
			a    *Auth
			want bool
		}{{"acl file", withFile, tt.withFile}, {"no acl file", noFile, tt.noFile}} {
			var got bool
			switch tt.what {
			case "pub":
				got = a.a.CanPublish(tt.clientID, "alice", tt.topic)
			case "sub":
				got = a.a.CanSubscribe(tt.clientID, "alice", tt.topic)
			case "read":
				got = a.a.CanRead(tt.clientID, "alice", tt.topic)
			}
			if got != a.want {
				t.Errorf("%s: %s %s %s = %v, want %v", a.name, tt.clientID, tt.what, tt.topic, got, a.want)
			}
		}
	}
	// The file reads all of file/# to alice, but with a claim each delivery
	// is checked: the claim ends with the connection, the answer would not.
	if !withFile.ReadsAll("x1", "alice", "file/#") || withFile.ReadsAll("r1", "alice", "file/#") || withFile.ReadsAll("r1", "alice", "news/#") {
		t.Error("ReadsAll with a claim ACL: want false (each delivery is checked)")
	}
	// The file's decisions for file/x were cached for r1: a client of the
	// same user whose token has a whitelist is not allowed by that cache,
	// and w1 logging in again with the rules token gets the rules at once.
	if withFile.CanPublish("w1", "alice", "file/x") {
		t.Error("w1 shares r1's decision")
	}
	login(withFile, "w1", rules)
	if !withFile.CanPublish("w1", "alice", "file/x") || withFile.CanPublish("w1", "alice", "up/alice/w1") {
		t.Error("w1's new token did not replace its ACL")
	}
	// A login without an ACL claim, then one with a password: the file alone.
	login(withFile, "w1", nil)
	if !withFile.CanPublish("w1", "alice", "file/x") || withFile.CanPublish("w1", "alice", "t/w1") {
		t.Error("a token without an ACL claim kept the old claim")
	}
	// The connection's end drops its claim; another connection's does not.
	withFile.ClientDisconnected("r1", "alice", tcpAddr("198.51.100.7:5001"), "tcp", time.Second, "taken_over")
	if withFile.CanPublish("r1", "alice", "t/r1") == false {
		t.Error("another connection's end dropped r1's claim")
	}
	withFile.ClientDisconnected("r1", "alice", remote, "tcp", time.Second, "normal")
	if withFile.CanPublish("r1", "alice", "t/r1") || !withFile.CanPublish("r1", "alice", "file/x") {
		t.Error("the claim outlived its connection")
	}
	// Once the token has expired, its claim refuses everything, then is swept.
	login(noFile, "e1", rules)
	c.advance(time.Hour)
	if noFile.CanPublish("e1", "alice", "t/e1") || noFile.CanSubscribe("e1", "alice", "news/#") || noFile.CanRead("e1", "alice", "other") {
		t.Error("an expired token's claim allowed something")
	}
	noFile.maintainJWT(c.now())
	if n := noFile.jwt.grants.len(); n != 0 {
		t.Errorf("%d grants after the sweep, want 0", n)
	}
}

// TestJWTACLPlaceholderNames: a client id or user name with '+', '#' or
// '/' never matches a placeholder, and a deny rule with one refuses it
// everything, as with ACL file patterns.
func TestJWTACLPlaceholderNames(t *testing.T) {
	c := newClock()
	key := []byte(strings.TrimSpace(testSecret))
	a := jwtAuthFor(t, c, JWTOptions{SecretFile: writeTestFile(t, "secret", testSecret)})
	for _, tt := range []struct {
		clientID string
		acl      any
		topic    string
		want     bool
	}{
		{"ok", map[string]any{"pub": []string{"d/%c/x"}}, "d/ok/x", true},
		{"a/+", map[string]any{"pub": []string{"d/%c/x"}}, "d/a/+/x", false},
		{"#", map[string]any{"pub": []string{"d/%c"}}, "d/#", false},
		{"a/b", []any{map[string]any{"permission": "deny", "action": "all", "topic": "priv/%c"},
			map[string]any{"permission": "allow", "action": "all", "topic": "pub/#"}}, "pub/x", false},
		{"ab", []any{map[string]any{"permission": "deny", "action": "all", "topic": "priv/%c"},
			map[string]any{"permission": "allow", "action": "all", "topic": "pub/#"}}, "pub/x", true},
	} {
		tok := signJWT(t, jose.HS256, key, "", claimsAt(c, map[string]any{"acl": tt.acl}))
		if _, _, err := a.Login(tt.clientID, "", []byte(tok), tcpAddr("198.51.100.7:5000"), "tcp", ""); err != nil {
			t.Fatal(err)
		}
		if got := a.CanPublish(tt.clientID, "alice", tt.topic); got != tt.want {
			t.Errorf("client %q publish %q = %v, want %v", tt.clientID, tt.topic, got, tt.want)
		}
	}
}

// TestJWKSURL: the JWK Set is fetched at start and refreshed, so a rotated
// key is taken; a fetch that fails, is oversize or holds no usable key
// leaves the keys in force.
func TestJWKSURL(t *testing.T) {
	k1, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	k2, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	var body atomic.Value
	var fetches atomic.Int64
	body.Store(jwksJSON(t, map[string]any{"k1": &k1.PublicKey}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		b := body.Load().(string)
		if b == "" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(b))
	}))
	t.Cleanup(srv.Close)
	a := newAuth(t, Options{ReloadInterval: 10 * time.Millisecond, AllowAnonymous: AnonymousDeny,
		JWT: JWTOptions{JWKSURL: srv.URL + "/jwks.json", JWKSRefresh: 20 * time.Millisecond}})
	now := time.Now()
	claims := map[string]any{"sub": "alice", "exp": now.Add(time.Hour).Unix()}
	t1, t2 := signJWT(t, jose.ES256, k1, "k1", claims), signJWT(t, jose.ES384, k2, "k2", claims)
	login := func(tok string) error {
		_, _, err := a.Login("c", "", []byte(tok), tcpAddr("198.51.100.7:5000"), "tcp", "")
		return err
	}
	if err := login(t1); err != nil {
		t.Fatalf("k1 after the first fetch: %v", err)
	}
	if err := login(t2); err == nil {
		t.Fatal("k2 accepted before it was published")
	}
	for _, bad := range []string{"", `{"keys": [{"kty": "oct", "k": "c2VjcmV0IHNlY3JldCBzZWNyZXQgc2VjcmV0IHNlY3JldA"}]}`,
		`{"keys": [` + strings.Repeat(" ", maxKeyFile) + `]}`, "not json"} {
		n := fetches.Load()
		body.Store(bad)
		mqtttest.WaitFor(t, "a fetch", func() bool { return fetches.Load() > n+1 })
		if err := login(t1); err != nil {
			t.Fatalf("k1 after a bad fetch (%.20q): %v", bad, err)
		}
	}
	body.Store(jwksJSON(t, map[string]any{"k2": &k2.PublicKey}))
	mqtttest.WaitFor(t, "k2 taken", func() bool { return login(t2) == nil })
	if err := login(t1); err == nil {
		t.Error("k1 still accepted after it left the set")
	}
}

// TestJWTReload: the key files are read again on Reload, and a file that
// does not load leaves the keys in force.
func TestJWTReload(t *testing.T) {
	c := newClock()
	secret := writeTestFile(t, "secret", testSecret)
	a := jwtAuthFor(t, c, JWTOptions{SecretFile: secret})
	old := signJWT(t, jose.HS256, []byte(strings.TrimSpace(testSecret)), "", claimsAt(c, nil))
	newSecret := "fedcba9876543210fedcba9876543210"
	fresh := signJWT(t, jose.HS256, []byte(newSecret), "", claimsAt(c, nil))
	login := func(tok string) error {
		_, _, err := a.Login("c", "", []byte(tok), tcpAddr("198.51.100.7:5000"), "tcp", "")
		return err
	}
	if err := os.WriteFile(secret, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err == nil || !strings.Contains(err.Error(), "secret_file") {
		t.Fatalf("Reload with a short secret: %v", err)
	}
	if err := login(old); err != nil {
		t.Fatalf("old secret after a failed reload: %v", err)
	}
	if err := os.WriteFile(secret, []byte(newSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if login(old) == nil || login(fresh) != nil {
		t.Error("Reload did not swap the secret")
	}
}

// TestJWTOptionsErrors: a configuration that cannot work is refused at
// start, naming the file and what is wrong with it.
func TestJWTOptionsErrors(t *testing.T) {
	rsaKey := testRSA()
	privDER, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	for _, tt := range []struct {
		name string
		o    JWTOptions
		want string
	}{
		{"short secret", JWTOptions{SecretFile: writeTestFile(t, "s", "tooshort\n")}, "at least 32"},
		{"missing secret", JWTOptions{SecretFile: filepath.Join(t.TempDir(), "none")}, "secret_file"},
		{"private key", JWTOptions{PublicKeyFile: writeTestFile(t, "k", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER})))}, "private key"},
		{"small RSA key", JWTOptions{PublicKeyFile: writeTestFile(t, "k", publicPEM(t, &small.PublicKey))}, "2048"},
		{"no PEM", JWTOptions{PublicKeyFile: writeTestFile(t, "k", "hello")}, "no PEM"},
		{"JWK Set of secrets", JWTOptions{JWKSFile: writeTestFile(t, "j", `{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}`)}, "no usable"},
		{"bad URL", JWTOptions{JWKSURL: "ftp://example.com/jwks"}, "http or https"},
		{"issuer without a key", JWTOptions{Issuer: "x"}, "need a key"},
		{"same claims", JWTOptions{SecretFile: writeTestFile(t, "s", testSecret), UsernameClaim: "acl"}, "both"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Options{JWT: tt.o})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, want an error containing %q", err, tt.want)
			}
			if err2 := CheckJWT(tt.o); err2 == nil && !strings.Contains(tt.name, "URL") {
				t.Errorf("CheckJWT found nothing wrong")
			}
		})
	}
}

// TestJWTClaimCheckAllocs: a PUBLISH decided by a token's claim allocates
// nothing, like one decided by the cached ACL file.
func TestJWTClaimCheckAllocs(t *testing.T) {
	c := newClock()
	a := jwtAuthFor(t, c, JWTOptions{SecretFile: writeTestFile(t, "secret", testSecret)})
	tok := signJWT(t, jose.HS256, []byte(strings.TrimSpace(testSecret)), "", claimsAt(c, map[string]any{
		"acl": map[string]any{"pub": []string{"up/%u/%c/#"}}}))
	if _, _, err := a.Login("dev1", "", []byte(tok), tcpAddr("198.51.100.7:5000"), "tcp", ""); err != nil {
		t.Fatal(err)
	}
	topic := []byte("up/alice/dev1/temperature")
	if n := testing.AllocsPerRun(1000, func() {
		if !a.CanPublish("dev1", "alice", unsafeString(topic)) {
			t.Fatal("refused")
		}
	}); n != 0 {
		t.Errorf("CanPublish by a claim: %v allocations, want 0", n)
	}
}

// BenchmarkJWTLogin is the cost of a login by token, per algorithm: the
// signature check and the claims; no hash, no queue.
func BenchmarkJWTLogin(b *testing.B) {
	now := time.Now()
	claims := map[string]any{"sub": "alice", "exp": now.Add(time.Hour).Unix(),
		"acl": map[string]any{"pub": []string{"up/%u/#"}, "sub": []string{"down/%u/#"}}}
	rsaKey, ecKey, edKey := testRSA(), testEC(), testEd()
	dir := b.TempDir()
	secret := filepath.Join(dir, "secret")
	pub := filepath.Join(dir, "pub.pem")
	_ = os.WriteFile(secret, []byte(testSecret), 0o600)
	_ = os.WriteFile(pub, []byte(publicPEM(b, &rsaKey.PublicKey)+publicPEM(b, &ecKey.PublicKey)+publicPEM(b, edKey.Public())), 0o600)
	a, err := New(Options{ReloadInterval: -1, JWT: JWTOptions{SecretFile: secret, PublicKeyFile: pub}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = a.Close() })
	for _, tc := range []struct {
		alg jose.SignatureAlgorithm
		key any
	}{{jose.HS256, []byte(strings.TrimSpace(testSecret))}, {jose.ES256, ecKey}, {jose.EdDSA, edKey}, {jose.RS256, rsaKey}} {
		tok := []byte(signJWT(b, tc.alg, tc.key, "", claims))
		b.Run(string(tc.alg), func(b *testing.B) {
			remote := tcpAddr("198.51.100.7:5000")
			for b.Loop() {
				if _, _, err := a.Login("c", "", tok, remote, "tcp", ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestJWTCore runs token logins through core: the user name comes from the
// token when CONNECT has none (its ACL's %u is the token's user), and the
// connection is closed when the token expires: MQTT 5 with DISCONNECT
// Maximum connect time, MQTT 3.1.1 by closing it.
func TestJWTCore(t *testing.T) {
	a := newAuth(t, Options{AllowAnonymous: AnonymousDeny,
		JWT: JWTOptions{SecretFile: writeTestFile(t, "secret", testSecret)}})
	srv := startCore(t, a)
	key := []byte(strings.TrimSpace(testSecret))
	// exp is in whole seconds: 2s from now is 1 to 2s away.
	token := func(exp time.Duration) string {
		return signJWT(t, jose.HS256, key, "", map[string]any{"sub": "alice", "exp": time.Now().Add(exp).Unix(),
			"acl": map[string]any{"pub": []string{"up/%u/%c"}}})
	}
	for _, v := range []byte{codec.V5, codec.V311} {
		t.Run(map[byte]string{codec.V5: "MQTT 5", codec.V311: "MQTT 3.1.1"}[v], func(t *testing.T) {
			p := dialCore(t, srv, "198.51.100.7:5000", v)
			cp := &codec.Connect{ProtocolVersion: v, CleanStart: true, KeepAlive: 60, ClientID: []byte("dev1"),
				PasswordFlag: true, Password: []byte(token(2 * time.Second))}
			if v == codec.V311 { // 3.1.1 has no password without a user name [MQTT-3.1.2-22]
				cp.UsernameFlag, cp.Username = true, []byte("alice")
			}
			start := time.Now()
			p.Send(cp)
			if ack, ok := p.Next().(*codec.Connack); !ok || ack.ReasonCode != codec.Success {
				t.Fatalf("CONNACK %+v", ack)
			}
			for i, tc := range []struct {
				topic string
				ok    bool
			}{{"up/alice/dev1", true}, {"up/bob/dev1", false}} {
				p.Send(&codec.Publish{Topic: []byte(tc.topic), QoS: 1, PacketID: uint16(i + 1)})
				ack, ok := p.Next().(*codec.Ack)
				if !ok || v == codec.V5 && ack.ReasonCode.IsError() == tc.ok {
					t.Errorf("PUBLISH %s: %+v, want allowed %v", tc.topic, ack, tc.ok)
				}
			}
			if v == codec.V311 {
				p.ExpectClosed()
			} else if d, ok := p.Next().(*codec.Disconnect); !ok || d.ReasonCode != codec.MaximumConnectTime {
				t.Fatalf("got %+v, want DISCONNECT Maximum connect time", d)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("closed after %v, want at exp (at most 2s)", d)
			}
			// The claim went with the connection.
			deadline := time.Now().Add(5 * time.Second)
			for a.jwt.grants.len() != 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := a.jwt.grants.len(); n != 0 {
				t.Errorf("%d grants after the connection ended", n)
			}
		})
	}
	// An expired token is refused at CONNECT.
	p := dialCore(t, srv, "198.51.100.8:5000", codec.V5)
	if rc := p.connect("dev2", "alice", token(-time.Second)); rc != codec.BadUserNameOrPassword {
		t.Errorf("expired token: %v", rc)
	}
	if st := srv.Stats(); st.Disconnects["login_expired"] != 2 {
		t.Errorf("disconnects %v", st.Disconnects)
	}
}
