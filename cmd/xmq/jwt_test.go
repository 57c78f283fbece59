package main

// JWT authentication (auth.jwt) end to end, as a web backend's dashboard
// uses it: the broker as run starts it, tokens made with go-jose under a
// secret file, MQTT.js in headless Chromium over ws and wss, mosquitto_pub
// and mosquitto_sub with the token as -P, and the reserved names a token
// must not claim.

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/testbrowser"
)

// jwtSecret is the HMAC secret of these tests, as `openssl rand -hex 32`
// writes it.
const jwtSecret = "6f1d0c3b8a9e4f27c5b1a0d9e8f7c6b5a4938271605f4e3d2c1b0a9f8e7d6c5b"

// jwtRunConfig serves tcp, ws and wss with auth.jwt and no anonymous
// access; %s is the secret file.
const jwtRunConfig = `
listeners:
  - {name: tcp, transport: tcp, address: "127.0.0.1:0"}
  - {name: ws, transport: ws, address: "127.0.0.1:0"}
  - {name: wss, transport: wss, address: "127.0.0.1:0"}
auth:
  reload_interval: -1s
  allow_anonymous: false
  jwt:
    secret_file: %s
    issuer: https://backend.example
    audience: xmq
`

// startJWTRun starts the broker with jwtRunConfig.
func startJWTRun(t *testing.T) *broker {
	t.Helper()
	secret := filepath.Join(t.TempDir(), "jwt.secret")
	if err := os.WriteFile(secret, []byte(jwtSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return startRun(t, "-c", writeFile(t, fmt.Sprintf(jwtRunConfig, secret)), "-data", t.TempDir())
}

// backendToken is what the web backend issues: a token for user, valid
// for ttl, whose ACL claim lets it use topics under its own prefix.
func backendToken(t *testing.T, user string, ttl time.Duration, prefix string) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(jwtSecret)}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(map[string]any{
		"sub": user, "iss": "https://backend.example", "aud": "xmq",
		"iat": time.Now().Unix(), "exp": time.Now().Add(ttl).Unix(),
		"acl": map[string]any{"all": []string{prefix + "/#"}},
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// jwtPage is mqttJSPage for a token: the password with the user name the
// query gives, else with an empty one (MQTT.js sends no password without a
// user name; xmq takes the token's user for "").
var jwtPage = strings.Replace(mqttJSPage,
	`if (q.get("user")) { opts.username = q.get("user"); opts.password = q.get("pass"); }`,
	`if (q.get("pass")) { opts.username = q.get("user") || ""; opts.password = q.get("pass"); }`, 1)

// TestJWTMQTTjs: a page from another origin (the dashboard of a web
// backend) connects with MQTT.js in Chromium over ws and wss with the
// token its backend issued, with and without a user name, and gets its own
// message back; an expired token is refused (Bad user name or password,
// 134).
func TestJWTMQTTjs(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no browser")
	}
	if jwtPage == mqttJSPage {
		t.Fatal("jwtPage did not replace the credentials line of mqttJSPage")
	}
	js := mqttJS(t)
	// The wss listener's certificate is from the development CA, which
	// this browser profile does not know.
	ctx := testbrowser.Start(t, 60*time.Second, chromedp.Flag("ignore-certificate-errors", true))
	b := startJWTRun(t)
	page := mqttJSServer(t, js, jwtPage)
	ws, wss := "ws://"+b.addrs[1].String()+"/mqtt", "wss://"+b.addrs[2].String()+"/mqtt"
	for _, tc := range []struct {
		name, url, user, token, want string
	}{
		{"ws with user name", ws, "alice", backendToken(t, "alice", time.Hour, "js"), "message: js/hello from a page on " + page.URL},
		{"wss empty user name", wss, "", backendToken(t, "alice", time.Hour, "js"), "message: js/hello from a page on " + page.URL},
		{"ws expired token", ws, "", backendToken(t, "alice", -time.Minute, "js"), "error: 134"},
		{"wss other user name", wss, "bob", backendToken(t, "alice", time.Hour, "js"), "error: 134"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := page.URL + "/?" + url.Values{"url": {tc.url}, "user": {tc.user}, "pass": {tc.token}}.Encode()
			got := pageResult(t, ctx, u)
			if !strings.HasPrefix(got, tc.want) {
				t.Fatalf("page says %q, want %q\nbroker log:\n%s", got, tc.want, b.stderr)
			}
		})
	}
}

// TestJWTMosquitto: mosquitto_sub and mosquitto_pub log in with -P TOKEN
// (MQTT 3.1.1 with the token's user name, and MQTT 5); the token's ACL
// claim lets them use mosq/# only, and a forged token is refused.
func TestJWTMosquitto(t *testing.T) {
	sub, err1 := exec.LookPath("mosquitto_sub")
	pub, err2 := exec.LookPath("mosquitto_pub")
	need(t, "mosquitto_sub and mosquitto_pub", "apt-get install mosquitto-clients, or make deps as root", err1 == nil && err2 == nil)
	b := startJWTRun(t)
	_, port, _ := net.SplitHostPort(b.addrs[0].String())
	token := backendToken(t, "device-7", time.Hour, "mosq")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var subOut strings.Builder
	subCmd := exec.CommandContext(ctx, sub, "-h", "127.0.0.1", "-p", port, "-V", "5", "-P", token,
		"-t", "mosq/#", "-C", "1", "-v")
	subCmd.Stdout, subCmd.Stderr = &subOut, &subOut
	if err := subCmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- subCmd.Wait() }()
	publish := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, pub, append([]string{"-h", "127.0.0.1", "-p", port, "-q", "1"}, args...)...).CombinedOutput()
		return string(out), err
	}
	// Refused: a topic outside the claim (MQTT 5 reports the PUBACK code),
	// and a token signed with another secret.
	forged := strings.Split(token, ".")
	forged[2] = strings.Repeat("A", len(forged[2]))
	if out, err := publish("-u", "device-7", "-P", strings.Join(forged, "."), "-t", "mosq/x", "-m", "forged"); err == nil {
		t.Errorf("mosquitto_pub with a forged token succeeded: %s", out)
	} else if !strings.Contains(strings.ToLower(out), "bad user name or password") {
		t.Errorf("mosquitto_pub with a forged token: %v: %s", err, out)
	}
	if out, err := publish("-V", "5", "-P", token, "-t", "other/x", "-m", "outside"); err == nil && !strings.Contains(strings.ToLower(out), "not authorized") {
		t.Logf("mosquitto_pub outside the claim: %v %s", err, out) // the PUBACK refusal, shown by newer clients only
	}
	for i := 0; ; i++ {
		out, err := publish("-u", "device-7", "-P", token, "-t", "mosq/test", "-m", "hello with a token")
		if err != nil {
			t.Fatalf("mosquitto_pub: %v\n%s\nbroker log:\n%s", err, out, b.stderr)
		}
		select {
		case err := <-done:
			if err != nil || !strings.Contains(subOut.String(), "mosq/test hello with a token") {
				t.Fatalf("mosquitto_sub: %v: %q\nbroker log:\n%s", err, subOut.String(), b.stderr)
			}
			if strings.Contains(subOut.String(), "outside") {
				t.Error("mosquitto_sub got the message outside the claim")
			}
			return
		case <-time.After(200 * time.Millisecond):
			if i == 50 {
				t.Fatalf("mosquitto_sub got nothing: %q\nbroker log:\n%s", subOut.String(), b.stderr)
			}
		}
	}
}

// TestJWTReservedNames: a token whose user is a bridge's or a dashboard
// session's reserved name is refused (Not authorized), though its
// signature is good: only the bridges and the dashboard may use them, and
// the ACL trusts them.
func TestJWTReservedNames(t *testing.T) {
	b := startJWTRun(t)
	addr := b.addrs[0].String()
	for _, user := range []string{"$bridge:cloud", "$dashboard:admin:admin"} {
		c := codec.Connect{ProtocolVersion: codec.V5, CleanStart: true, ClientID: []byte("reserved"),
			PasswordFlag: true, Password: []byte(backendToken(t, user, time.Hour, "x"))}
		if rc := connackOf(t, addr, c); rc != codec.NotAuthorized {
			t.Errorf("token for %s: CONNACK %v, want Not authorized", user, rc)
		}
	}
	c := codec.Connect{ProtocolVersion: codec.V5, CleanStart: true, ClientID: []byte("ok"),
		PasswordFlag: true, Password: []byte(backendToken(t, "alice", time.Hour, "x"))}
	if rc := connackOf(t, addr, c); rc != codec.Success {
		t.Errorf("token for alice: CONNACK %v, want Success\n%s", rc, b.stderr)
	}
}

// TestJWTConfig: the auth.jwt keys reach auth.JWTOptions, and a
// configuration that cannot work is refused with the key named.
func TestJWTConfig(t *testing.T) {
	cfg := mustLoad(t, "-c", writeFile(t, `
auth:
  jwt:
    jwks_url: https://idp.example/.well-known/jwks.json
    jwks_refresh: 1m
    username_claim: preferred_username
    acl_claim: mqtt_acl
    issuer: https://idp.example
    audience: xmq
`))
	o := cfg.AuthOptions().JWT
	if o.JWKSURL != "https://idp.example/.well-known/jwks.json" || o.JWKSRefresh != time.Minute ||
		o.UsernameClaim != "preferred_username" || o.ACLClaim != "mqtt_acl" || o.Issuer != "https://idp.example" || o.Audience != "xmq" {
		t.Errorf("options %+v", o)
	}
	for _, tt := range []struct{ yaml, want string }{
		{"auth:\n  jwt:\n    issuer: x\n", "auth.jwt: "},
		{"auth:\n  jwt:\n    jwks_url: ftp://idp.example/jwks\n", "auth.jwt: "},
	} {
		if _, err := loadConfig([]string{"-c", writeFile(t, tt.yaml)}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want an error naming %q", tt.yaml, err, tt.want)
		}
	}
	short := filepath.Join(t.TempDir(), "short")
	if err := os.WriteFile(short, []byte("tooshort"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	err := run(context.Background(), []string{"check-config", "-c", writeFile(t, "auth:\n  jwt:\n    secret_file: "+short+"\n")}, &out, &out)
	if err == nil || !strings.Contains(out.String()+err.Error(), "at least 32") {
		t.Errorf("check-config with a short secret: %v\n%s", err, out.String())
	}
}
