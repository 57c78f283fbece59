package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/xmq-io/xmq/auth"
	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/config"
	"github.com/xmq-io/xmq/internal/mqtttest"
	"github.com/xmq-io/xmq/web"
)

// bridgeYAML is a bridge to the broker at %s: sensors out under site1/,
// commands in under cloud/.
const bridgeYAML = `
bridges:
  - name: up
    addresses: [mqtt://%s]
    backoff_min: 20ms
    backoff_max: 200ms
    topics:
      - {topic: "sensors/#", direction: out, qos: 1, remote_prefix: site1/}
      - {topic: "cmd/#", direction: in, qos: 1, local_prefix: cloud/}
`

func postJSON(t *testing.T, url, user, pass string) (int, map[string]any) {
	t.Helper()
	return requestJSON(t, "POST", url, user, pass)
}

// TestRunBridge: a run with a bridge to another run forwards both ways;
// nobody outside can log in with a bridge's reserved names; the admin API
// lists, stops and starts it, /metrics shows it, and POST /api/v1/reload
// applies an edited bridges section (a removed bridge's session goes).
func TestRunBridge(t *testing.T) {
	t.Setenv(config.AdminPasswordEnv, "pw")
	remote := startRun(t, "-listen", "127.0.0.1:0", "-data", "", "-web", "")
	raddr := remote.addrs[0].String()
	cfgPath := writeFile(t, webRunConfig+fmt.Sprintf(bridgeYAML, raddr))
	local, base := startWebRun(t, "-data", t.TempDir(), "-c", cfgPath)
	laddr := local.addrs[0].String()
	state := func(name string) any {
		_, m := getJSON(t, base+"/api/v1/bridges/"+name, "admin", "pw")
		return m["state"]
	}
	waitUntil(t, "the bridge to connect", func() bool { return state("up") == "connected" })

	rsub, _, err := dialMQTT(t, raddr, "rsub", codec.V5, true)
	if err != nil {
		t.Fatal(err)
	}
	rsub.Send(&codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{{Filter: []byte("site1/#"), QoS: 1}}})
	mqtttest.Expect[*codec.Suback](rsub)
	lsub, _, err := dialMQTT(t, laddr, "lsub", codec.V5, true)
	if err != nil {
		t.Fatal(err)
	}
	lsub.Send(&codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{{Filter: []byte("cloud/#"), QoS: 1}}})
	mqtttest.Expect[*codec.Suback](lsub)
	lpub, _, err := dialMQTT(t, laddr, "lpub", codec.V5, true)
	if err != nil {
		t.Fatal(err)
	}
	lpub.Send(&codec.Publish{QoS: 1, PacketID: 1, Topic: []byte("sensors/t"), Payload: []byte("21.5")})
	if p := mqtttest.Expect[*codec.Publish](rsub); string(p.Topic) != "site1/sensors/t" || string(p.Payload) != "21.5" {
		t.Errorf("out: got %q %q", p.Topic, p.Payload)
	}
	rpub, _, err := dialMQTT(t, raddr, "rpub", codec.V5, true)
	if err != nil {
		t.Fatal(err)
	}
	rpub.Send(&codec.Publish{QoS: 1, PacketID: 1, Topic: []byte("cmd/reboot"), Payload: []byte("now")})
	if p := mqtttest.Expect[*codec.Publish](lsub); string(p.Topic) != "cloud/cmd/reboot" {
		t.Errorf("in: got %q", p.Topic)
	}

	// The bridge's reserved names are refused from outside, whatever the
	// anonymous policy.
	if rc := connack(t, laddr, "$bridge:up", "guess"); rc != codec.NotAuthorized {
		t.Errorf("CONNACK %s for user $bridge:up from outside, want Not authorized", rc)
	}
	if c, _, err := dialMQTT(t, laddr, "$bridge:up", codec.V5, false); err == nil {
		c.Close()
		t.Error("an outside client took the bridge's client id")
	}

	scrape := func() string {
		res, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		metrics, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		return string(metrics)
	}
	// The bridge counts a message in once its local publish returns, which
	// may be after the subscriber above has it.
	in := `xmq_bridge_messages_total{bridge="up",direction="in"} 1`
	mqtttest.WaitFor(t, "the bridge to count the message in", func() bool { return strings.Contains(scrape(), in) })
	metrics := scrape()
	for _, want := range []string{
		`xmq_bridge_connected{bridge="up"} 1`,
		`xmq_bridge_messages_total{bridge="up",direction="out"} 1`,
		in,
		`xmq_bridge_queued_messages{bridge="up"} 0`,
		`xmq_bridge_dropped_total{bridge="up",cause="local_queue"} 0`,
		`xmq_bridge_reconnects_total{bridge="up"} 0`,
		`xmq_bridge_backoff_seconds{bridge="up"} 0`,
		`xmq_bridge_connect_failures_total{bridge="up",cause="auth"} 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	if code, m := postJSON(t, base+"/api/v1/bridges/up/stop", "admin", "pw"); code != 200 {
		t.Errorf("stop: %d %v", code, m)
	}
	if s := state("up"); s != "stopped" {
		t.Errorf("state %v after stop", s)
	}
	if code, _ := postJSON(t, base+"/api/v1/bridges/nope/stop", "admin", "pw"); code != 404 {
		t.Errorf("stop of an unknown bridge: %d, want 404", code)
	}
	if code, _ := postJSON(t, base+"/api/v1/bridges/up/start", "admin", "pw"); code != 200 {
		t.Errorf("start: %d", code)
	}
	waitUntil(t, "the bridge to come back", func() bool { return state("up") == "connected" })

	// Edit the file: a second bridge, disabled; then no bridges at all.
	edited := webRunConfig + fmt.Sprintf(bridgeYAML, raddr) +
		"  - {name: two, enabled: false, addresses: [mqtt://" + raddr + "], topics: [{topic: x}]}\n"
	if err := os.WriteFile(cfgPath, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	code, m := postJSON(t, base+"/api/v1/reload", "admin", "pw")
	if added, _ := m["bridges"].(map[string]any)["added"].([]any); code != 200 || len(added) != 1 || added[0] != "two" {
		t.Errorf("reload: %d %v", code, m)
	}
	if s := state("two"); s != "stopped" {
		t.Errorf("a disabled bridge is %v", s)
	}
	if err := os.WriteFile(cfgPath, []byte(webRunConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, m := postJSON(t, base+"/api/v1/reload", "admin", "pw"); code != 200 {
		t.Errorf("reload: %d %v", code, m)
	}
	if code, _ := getJSON(t, base+"/api/v1/clients/$bridge:up", "admin", "pw"); code != 404 {
		t.Errorf("a removed bridge's local session: %d, want 404", code)
	}
	if code, m := getJSON(t, base+"/api/v1/bridges", "viewer-less", "pw"); code != 401 {
		t.Errorf("bridges without credentials: %d %v", code, m)
	}
}

// TestAuthChainUnwraps: the run's Authenticator and Authorizer (the
// dashboard's logins, web.MQTTTokens.Wrap, in front of bridgeAuth in front
// of auth) have Unwrap at every link down to the *auth.Auth, so an Unwrap
// walk sees through each wrapper, and the chain keeps auth's optional
// interfaces for core.
func TestAuthChainUnwraps(t *testing.T) {
	a, err := auth.New(auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	ba := &bridgeAuth{Auth: a}
	authn, authz := web.NewMQTTTokens().Wrap(ba, ba)
	for _, x := range []any{authn, authz} {
		var links []string
		for x != nil && x != any(a) {
			links = append(links, fmt.Sprintf("%T", x))
			u, ok := x.(interface{ Unwrap() any })
			if !ok {
				t.Fatalf("%s: %T has no Unwrap", strings.Join(links, " → "), x)
			}
			x = u.Unwrap()
		}
		if x != any(a) {
			t.Errorf("%s ends in %v, not the *auth.Auth", strings.Join(links, " → "), x)
		}
	}
	_, enhanced := authn.(core.EnhancedAuthenticator)
	_, login := authn.(core.LoginAuthenticator)
	_, observer := authn.(core.ConnectionObserver)
	if !enhanced || !login || !observer {
		t.Errorf("the chain is enhanced %v, login %v, observer %v; auth is all three", enhanced, login, observer)
	}
}
