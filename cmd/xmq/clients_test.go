package main

// Third-party clients that reach the broker from elsewhere than Go:
// paho-mqtt for Python over ws and wss, and MQTT.js in a browser page
// served from another origin. Both ran into the WebSocket origin rules.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/xmq-io/xmq/internal/testbrowser"
)

// need finds a tool a test runs; it skips without it, except in CI
// (CI=true), where .ci/deps installs it and its absence is a failure.
func need(t *testing.T, what, hint string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not installed; CI must have it (%s)", what, hint)
	}
	t.Skipf("%s is not installed (%s): skipping", what, hint)
}

// pahoPython is a paho-mqtt (Python) client: it connects over WebSocket
// with the library's defaults, which send "Origin: https://HOST:PORT" even
// over plain ws, subscribes, publishes and waits for its own message.
const pahoPython = `
import ssl, sys, threading
import paho.mqtt.client as mqtt
scheme, host, port, ca = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
got = threading.Event()
refused = []
c = mqtt.Client(client_id="py-" + scheme, transport="websockets")
c.ws_set_options(path="/mqtt")
if scheme == "wss":
    c.tls_set(ca_certs=ca)
def on_connect(c, userdata, flags, rc):
    if rc != 0:
        refused.append(rc); got.set(); return
    c.subscribe("py/#", qos=1)
def on_subscribe(c, userdata, mid, granted):
    c.publish("py/hello", "from python over " + scheme, qos=1)
def on_message(c, userdata, msg):
    print(msg.topic, msg.payload.decode()); got.set()
c.on_connect, c.on_subscribe, c.on_message = on_connect, on_subscribe, on_message
c.connect(host, port, keepalive=30)
c.loop_start()
ok = got.wait(10)
c.disconnect(); c.loop_stop()
if refused or not ok:
    print("refused" if refused else "timed out", refused); sys.exit(1)
`

// TestPahoPythonOverWebSocket: paho-mqtt for Python over ws and wss
// against the default configuration (dashboard on, allowed_origins empty,
// anonymous access from loopback).
func TestPahoPythonOverWebSocket(t *testing.T) {
	python := "/usr/bin/python3" // Debian's, where python3-paho-mqtt installs
	has := exec.Command(python, "-c", "import paho.mqtt.client").Run() == nil
	need(t, "paho-mqtt for Python", "apt-get install python3-paho-mqtt, or make deps as root", has)
	data := t.TempDir()
	b := startRun(t, "-c", writeFile(t, wsRunConfig), "-data", data)
	ca := filepath.Join(data, "certs", "ca.pem")
	for i, scheme := range []string{"ws", "wss"} {
		t.Run(scheme, func(t *testing.T) {
			_, port, _ := net.SplitHostPort(b.addrs[i].String())
			out, err := exec.Command(python, "-c", pahoPython, scheme, "localhost", port, ca).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "py/hello from python over "+scheme) {
				t.Fatalf("paho-mqtt over %s: %v\n%s\nbroker log:\n%s", scheme, err, out, b.stderr)
			}
		})
	}
}

// mqttJSVersion is the MQTT.js release the browser test loads.
const mqttJSVersion = "5.16.0"

// mqttJS returns MQTT.js's browser bundle, fetched once with npm into the
// user's cache directory.
func mqttJS(t *testing.T) []byte {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "xmq-test", "mqttjs-"+mqttJSVersion)
	file := filepath.Join(dir, "node_modules", "mqtt", "dist", "mqtt.min.js")
	if js, err := os.ReadFile(file); err == nil {
		return js
	}
	_, err = exec.LookPath("npm")
	need(t, "npm", "apt-get install npm, or make deps as root", err == nil)
	if out, err := exec.Command("npm", "install", "--prefix", dir, "--no-audit", "--no-fund", "--silent",
		"mqtt@"+mqttJSVersion).CombinedOutput(); err != nil {
		need(t, "MQTT.js (npm install mqtt@"+mqttJSVersion+")", string(out), false)
	}
	js, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// mqttJSPage connects with MQTT.js to the broker's WebSocket URL given in
// the page's query, with the user name and password given there, and
// writes what happened into #result: "message: TOPIC PAYLOAD" after its
// own message came back, "error: …" when the broker refused it.
const mqttJSPage = `<!doctype html><meta charset="utf-8"><title>MQTT.js</title>
<script src="/mqtt.min.js"></script>
<pre id="result">connecting</pre>
<script>
const q = new URLSearchParams(location.search);
const out = (s) => { document.getElementById("result").textContent = s; };
const opts = { protocolVersion: 5, reconnectPeriod: 0, connectTimeout: 5000, clientId: "js-" + Math.random().toString(16).slice(2) };
if (q.get("user")) { opts.username = q.get("user"); opts.password = q.get("pass"); }
const client = mqtt.connect(q.get("url"), opts);
client.on("connect", () => client.subscribe("js/#", { qos: 1 }, (err) => {
  if (err) { out("error: subscribe " + err); return; }
  client.publish("js/hello", "from a page on " + location.origin, { qos: 1 });
}));
client.on("message", (topic, payload) => { out("message: " + topic + " " + payload); client.end(); });
client.on("error", (err) => { out("error: " + (err.code !== undefined ? err.code + " " : "") + err.message); client.end(); });
</script>`

// mqttJSServer serves page at / and MQTT.js at /mqtt.min.js, from an
// origin of its own.
func mqttJSServer(t *testing.T, js []byte, page string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/mqtt.min.js" {
			w.Header().Set("Content-Type", "text/javascript")
			_, _ = w.Write(js)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, page)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// pageResult opens u in the browser and returns what the page writes into
// #result once it is past "connecting" (within 15 s).
func pageResult(t *testing.T, ctx context.Context, u string) string {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(u)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	var got string
	for time.Now().Before(deadline) {
		got, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("result").textContent`))
		if got != "connecting" && got != "" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return got
}

// TestMQTTjsFromAnotherOrigin: a page served from another origin connects
// with MQTT.js in headless Chromium over ws with credentials and gets its
// own message back; the same page without credentials is refused (Not
// authorized, 135), though anonymous access from loopback is on: a page
// from a foreign origin never gets that privilege.
func TestMQTTjsFromAnotherOrigin(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no browser")
	}
	js := mqttJS(t)
	ctx := testbrowser.Start(t, 40*time.Second)
	b := startRun(t, "-c", writeFile(t, wsRunConfig), "-data", t.TempDir(), "-password-file", passwordFile(t))
	page := mqttJSServer(t, js, mqttJSPage)
	wsURL := "ws://" + b.addrs[0].String() + "/mqtt"
	for _, tc := range []struct {
		name, user, pass, want string
	}{
		{"with credentials", "alice", "correct horse battery staple", "message: js/hello from a page on " + page.URL},
		{"anonymous", "", "", "error: 135"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := page.URL + "/?" + url.Values{"url": {wsURL}, "user": {tc.user}, "pass": {tc.pass}}.Encode()
			got := pageResult(t, ctx, u)
			if !strings.HasPrefix(got, tc.want) {
				t.Fatalf("page says %q, want %q\nbroker log:\n%s", got, tc.want, b.stderr)
			}
		})
	}
}
