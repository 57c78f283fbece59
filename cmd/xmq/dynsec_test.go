//go:build unix

package main

import (
	"bytes"
	"crypto/pbkdf2"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/mosquitto"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// dynsecPlugin is Debian's build of Mosquitto's dynamic security plugin.
const dynsecPlugin = "/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so"

// dynsecClient is a client entry with its password hashed as the plugin
// does (PBKDF2, SHA-512, 101 iterations, a 12-byte salt).
func dynsecClient(user, pass string, roles, groups []string) map[string]any {
	salt := []byte("salt-" + user + "-1234")[:12]
	hash, err := pbkdf2.Key(sha512.New, pass, salt, 101, 64)
	if err != nil {
		panic(err)
	}
	c := map[string]any{"username": user, "password": base64.StdEncoding.EncodeToString(hash),
		"salt": base64.StdEncoding.EncodeToString(salt), "iterations": 101}
	var rs, gs []map[string]any
	for _, r := range roles {
		rs = append(rs, map[string]any{"rolename": r})
	}
	for _, g := range groups {
		gs = append(gs, map[string]any{"groupname": g})
	}
	c["roles"], c["groups"] = rs, gs
	return c
}

func acl(typ, topic string, prio int, allow bool) map[string]any {
	return map[string]any{"acltype": typ, "topic": topic, "priority": prio, "allow": allow}
}

// testDynsec is a dynamic security file with a client of each kind: one
// with its own role, one through a group, an administrator, and one whose
// rules an ACL file cannot say (an allow of higher priority inside a deny).
func testDynsec(t *testing.T) string {
	t.Helper()
	d := map[string]any{
		"defaultACLAccess": map[string]bool{"publishClientSend": false, "publishClientReceive": true, "subscribe": false, "unsubscribe": true},
		"clients": []any{
			dynsecClient("alice", "alice-pw", []string{"sensor"}, nil),
			dynsecClient("bob", "bob-pw", nil, nil),
			dynsecClient("admin", "admin-pw", []string{"admin"}, nil),
			dynsecClient("carol", "carol-pw", []string{"conflict"}, nil),
		},
		"groups": []any{map[string]any{"groupname": "readers", "roles": []any{map[string]any{"rolename": "reader"}},
			"clients": []any{map[string]any{"username": "bob"}}}},
		"roles": []any{
			map[string]any{"rolename": "sensor", "acls": []any{acl(mosquitto.DynsecPublish, "sensors/#", 0, true), acl(mosquitto.DynsecSubPattern, "cmd/#", 0, true)}},
			map[string]any{"rolename": "reader", "acls": []any{acl(mosquitto.DynsecReceive, "sensors/secret", 5, false), acl(mosquitto.DynsecSubPattern, "sensors/#", 0, true)}},
			map[string]any{"rolename": "admin", "acls": []any{acl(mosquitto.DynsecPublish, "#", 0, true), acl(mosquitto.DynsecSubPattern, "#", 0, true)}},
			map[string]any{"rolename": "conflict", "acls": []any{acl(mosquitto.DynsecPublish, "a/b", 5, true), acl(mosquitto.DynsecPublish, "a/#", 1, false),
				acl(mosquitto.DynsecPublish, "c/#", 0, true)}},
		},
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, string(b))
}

// TestDynsecConvert: the files written and the differences reported.
func TestDynsecConvert(t *testing.T) {
	dir := t.TempDir()
	pw, aclFile := filepath.Join(dir, "passwd"), filepath.Join(dir, "acl")
	var stderr bytes.Buffer
	if err := runImport([]string{"-dynsec", testDynsec(t), "-passwd", pw, "-acl", aclFile}, &bytes.Buffer{}, &stderr); err != nil {
		t.Fatal(err)
	}
	report := stderr.String()
	// The one decision an ACL file cannot keep: carol's allow of a/b
	// comes before the deny of a/#; in an ACL file the deny wins.
	if !strings.Contains(report, "user carol, publish to a/b: Mosquitto allows, xmq refuses") {
		t.Errorf("the report misses carol's a/b:\n%s", report)
	}
	if strings.Contains(report, "user alice") || strings.Contains(report, "user bob") || strings.Contains(report, "user admin") {
		t.Errorf("differences reported for rules an ACL file can say:\n%s", report)
	}
	pwText, _ := os.ReadFile(pw)
	if n := strings.Count(string(pwText), "$7$101$"); n != 4 {
		t.Errorf("password file holds %d $7$ entries, want 4:\n%s", n, pwText)
	}
	aclText, _ := os.ReadFile(aclFile)
	for _, want := range []string{"user alice\ntopic write sensors/#\ntopic read cmd/#", "user bob\ntopic deny sensors/secret\ntopic read sensors/#"} {
		if !strings.Contains(string(aclText), want) {
			t.Errorf("ACL file lacks %q:\n%s", want, aclText)
		}
	}
	if err := runImport([]string{"-dynsec", testDynsec(t)}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Error("-dynsec without -passwd and -acl succeeded")
	}
}

// TestDynsecSideBySide runs Mosquitto with the dynamic security plugin and
// xmq with the files import made from the same JSON, and checks every
// client's logins, publishes, subscriptions and deliveries agree, but for
// the decisions the import reported as differing (which must differ).
func TestDynsecSideBySide(t *testing.T) {
	if _, err := os.Stat(dynsecPlugin); err != nil {
		if _, ok := os.LookupEnv("CI"); ok {
			t.Fatalf("Debian's mosquitto ships %s; .ci/deps installs it: %v", dynsecPlugin, err)
		}
		t.Skip("no dynamic security plugin:", err)
	}
	if _, err := exec.LookPath("mosquitto"); err != nil {
		if _, err := os.Stat("/usr/sbin/mosquitto"); err != nil {
			t.Skip("mosquitto is not installed")
		}
	}
	src := testDynsec(t)
	dir := t.TempDir()
	pw, aclFile := filepath.Join(dir, "passwd"), filepath.Join(dir, "acl")
	var report bytes.Buffer
	if err := runImport([]string{"-dynsec", src, "-passwd", pw, "-acl", aclFile}, &bytes.Buffer{}, &report); err != nil {
		t.Fatal(err)
	}
	// The plugin rewrites its file: give it a copy.
	mine := filepath.Join(dir, "dynsec.json")
	b, _ := os.ReadFile(src)
	if err := os.WriteFile(mine, b, 0o600); err != nil {
		t.Fatal(err)
	}
	m := startMosquitto(t, fmt.Sprintf("plugin %s\nplugin_opt_config_file %s\n", dynsecPlugin, mine))
	x := startRun(t, "-listen", "127.0.0.1:0", "-data", "", "-password-file", pw,
		"-c", writeFile(t, "auth:\n  allow_anonymous: false\n  acl_file: "+aclFile+"\n"))
	urls := map[string]string{"mosquitto": "mqtt://" + m.tcp, "xmq": "mqtt://" + x.addrs[0].String()}
	login := func(user string) func(*codec.Connect) {
		return func(cp *codec.Connect) {
			cp.UsernameFlag, cp.Username, cp.PasswordFlag, cp.Password = true, []byte(user), true, []byte(user+"-pw")
		}
	}
	// decisions[broker][probe] = allowed, probes named as the import's
	// report names them.
	topics := []string{"sensors/t", "sensors/secret", "cmd/x", "a/b", "a/c", "c/d", "other"}
	filters := []string{"#", "sensors/#", "cmd/#", "a/b", "a/#", "c/#", "sensors/secret"}
	decisions := map[string]map[string]bool{}
	for broker, url := range urls {
		d := map[string]bool{}
		decisions[broker] = d
		admin := mqtttest.Dial(t, url, "ds-admin-tx", codec.V5, login("admin"))
		for _, user := range []string{"alice", "bob", "carol"} {
			c := mqtttest.Dial(t, url, "ds-"+user, codec.V5, login(user))
			for _, topic := range topics {
				rc := c.Publish(&codec.Publish{Topic: []byte(topic), Payload: []byte("p"), QoS: 1})
				d[fmt.Sprintf("user %s, publish to %s", user, topic)] = !rc.IsError()
			}
			// Subscribed to every filter of the rules (whatever each SUBACK
			// says), the user receives what both brokers let through.
			addr := strings.TrimPrefix(url, "mqtt://")
			rx := mqtttest.Dial(t, url, "ds-rx-"+user, codec.V5, login(user))
			for _, f := range filters {
				_ = subackOf(t, addr, codec.V5, user, user+"-pw", f) // a separate session: only its code
				rx.Send(&codec.Subscribe{PacketID: 7, Subscriptions: []codec.Subscription{{Filter: []byte(f), QoS: 1}}})
			}
			time.Sleep(200 * time.Millisecond) // the SUBACKs
			for _, topic := range topics {
				admin.Pub(topic, topic, 1, false)
			}
			got := map[string]bool{}
			for quiet := time.After(time.Second); ; {
				select {
				case p := <-rx.Msgs:
					got[string(p.Payload)] = true
					continue
				case <-quiet:
				}
				break
			}
			for _, topic := range topics {
				d[fmt.Sprintf("user %s, receive from %s", user, topic)] = got[topic]
			}
			c.Close()
			rx.Close()
		}
	}
	reported := report.String()
	same := 0
	for probe, mosq := range decisions["mosquitto"] {
		if mosq == decisions["xmq"][probe] {
			same++
		} else {
			t.Logf("differs, as the import said: %s", probe)
		}
	}
	t.Logf("%d of %d decisions the same on both brokers", same, len(decisions["mosquitto"]))
	for probe, mosq := range decisions["mosquitto"] {
		xmq := decisions["xmq"][probe]
		said := strings.Contains(reported, probe+":")
		switch {
		case mosq != xmq && !said:
			t.Errorf("%s: Mosquitto %v, xmq %v, and the import did not say so", probe, mosq, xmq)
		case mosq == xmq && said:
			t.Errorf("%s: the import reports a difference the brokers do not show", probe)
		}
	}
	if t.Failed() {
		t.Logf("import report:\n%s\nACL file:\n%s", reported, readFileString(aclFile))
	}
}

func readFileString(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
