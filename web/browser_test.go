package web_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	paho "github.com/eclipse/paho.mqtt.golang"
	"golang.org/x/crypto/bcrypt"

	"github.com/xmq-io/xmq/auth"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/mqtttest"
	"github.com/xmq-io/xmq/internal/testbrowser"
	"github.com/xmq-io/xmq/listeners"
	"github.com/xmq-io/xmq/web"
)

// dashboard is a broker with tcp and ws listeners and its web server.
type dashboard struct {
	srv     *core.Server
	tcpAddr string
	url     string
	bridges *fakeBridges
	noWSURL string // the same broker's dashboard, told of no ws or wss listener
}

// fakeBridges is one bridge that Stop and Start switch.
type fakeBridges struct {
	mu    sync.Mutex
	state string
}

func (f *fakeBridges) Bridges() []web.Bridge {
	f.mu.Lock()
	defer f.mu.Unlock()
	return []web.Bridge{{Name: "cloud", State: f.state, Address: "mqtts://cloud.example:8883", Addresses: []string{"mqtts://cloud.example:8883"},
		Protocol: "5", LoopPrevention: "no_local", MessagesOut: 1234, MessagesIn: 56, Queued: 7,
		Dropped: map[string]int64{"local_queue": 2}, Failures: map[string]int64{},
		Topics: []web.BridgeRule{{Topic: "sensors/#", Direction: "out", QoS: 1, RemotePrefix: "site1/"}}}}
}

func (f *fakeBridges) set(name, state string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name != "cloud" {
		return false, nil
	}
	f.state = state
	return true, nil
}

func (f *fakeBridges) StartBridge(name string) (bool, error) { return f.set(name, "connected") }
func (f *fakeBridges) StopBridge(name string) (bool, error)  { return f.set(name, "stopped") }

// threeNodes are the Peers of node n1 of a cluster of three, n3 cut off.
type threeNodes struct{}

func (threeNodes) Nodes() []web.Node {
	start := time.Now().Add(-time.Hour)
	return []web.Node{
		{Node: "n1", Version: "browser-test", Started: start, Listeners: []string{"tcp://10.0.0.1:1883"}, Clients: 1200,
			Subscriptions: 3400, RateIn: 250.5, RateOut: 990, Routes: 1, Ready: true, LastSeen: time.Now(), Reachable: true, Local: true},
		{Node: "n2", Version: "browser-test", Started: start, Listeners: []string{"tcp://10.0.0.2:1883"}, Clients: 1100,
			OfflineSessions: 7, Routes: 1, Ready: true, LastSeen: time.Now(), Reachable: true},
		{Node: "n3", Version: "browser-test", Started: start, Clients: 900, LastSeen: time.Now().Add(-time.Minute),
			UnreachableSince: time.Now().Add(-time.Minute)},
	}
}

func (threeNodes) Holder(string) (string, bool, error) { return "", false, nil }
func (threeNodes) Ask(string, []byte, time.Duration) ([]byte, error) {
	return nil, errors.New("not in this test")
}

const (
	browserPassword = "browser-test-password"
	probePassword   = "probe-password"
)

// startDashboard runs the broker as cmd/xmq does, with anonymous access
// off: auth with a password file holding the Go test client's user, and
// the dashboard's MQTT logins checked in front of it.
func startDashboard(t *testing.T) *dashboard {
	t.Helper()
	probeHash, err := bcrypt.GenerateFromPassword([]byte(probePassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	passwd := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(passwd, []byte("probe:"+string(probeHash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(auth.Options{PasswordFile: passwd, AllowAnonymous: auth.AnonymousDeny, ReloadInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	tokens := web.NewMQTTTokens()
	authn, authz := tokens.Wrap(a, a)
	srv, err := core.New(core.Options{SysInterval: time.Second}, core.Config{Authenticator: authn, Authorizer: authz})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })

	// The web port first: the ws listener must allow the dashboard's origin.
	webL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	origin := "http://" + webL.Addr().String()
	tcp, err := listeners.Listen(listeners.Options{Name: "tcp", Transport: "tcp", Address: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := listeners.Listen(listeners.Options{Name: "ws", Transport: "ws", Address: "127.0.0.1:0", AllowedOrigins: []string{origin}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(tcp, "tcp") }()
	go func() { _ = srv.Serve(ws, "ws") }()

	hash, err := bcrypt.GenerateFromPassword([]byte(browserPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	fb := &fakeBridges{state: "connected"}
	s, err := web.New(srv, web.Options{
		AdminPasswordHash: hash,
		MQTTTokens:        tokens,
		Bridges:           fb,
		TraceDir:          t.TempDir(),
		Version:           "browser-test",
		Listeners: []web.Listener{
			{Name: "tcp", Transport: "tcp", Address: tcp.Addr().String()},
			{Name: "ws", Transport: "ws", Address: ws.Addr().String(), Path: "/mqtt"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(webL) }()
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })

	// A second web server on the same broker that knows of no ws listener,
	// and is told it is node n1 of a cluster of three, n3 unreachable.
	bare, err := web.New(srv, web.Options{AdminPasswordHash: hash, MQTTTokens: tokens, Version: "browser-test",
		Listeners: []web.Listener{{Name: "tcp", Transport: "tcp", Address: tcp.Addr().String()}},
		Node:      "n1", Peers: threeNodes{}, Cluster: func() web.ClusterStats { return web.ClusterStats{NodesReachable: 2, NodesUnreachable: 1} }})
	if err != nil {
		t.Fatal(err)
	}
	bareL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = bare.Serve(bareL) }()
	t.Cleanup(func() { _ = bare.Shutdown(context.Background()) })
	return &dashboard{srv: srv, tcpAddr: tcp.Addr().String(), url: origin + "/", bridges: fb, noWSURL: "http://" + bareL.Addr().String() + "/"}
}

// openDashboard starts a dashboard and a headless Chromium the size of a
// desktop's window for at most timeout, collecting the page's console
// errors; shots is where screenshots go.
func openDashboard(t *testing.T, timeout time.Duration) (*dashboard, context.Context, *consoleErrors, string) {
	t.Helper()
	testbrowser.Chromium(t)
	d := startDashboard(t)
	shots := screenshotDir(t)
	ctx := testbrowser.Start(t, timeout, chromedp.Flag("hide-scrollbars", true), chromedp.WindowSize(1360, 900))
	console := &consoleErrors{}
	console.listen(ctx)
	return d, ctx, console, shots
}

// consoleErrors collects the page's console errors, uncaught exceptions
// and browser log entries of level error (chromedp.Console reads
// Runtime.consoleAPICalled, Runtime.exceptionThrown and Log.entryAdded).
type consoleErrors struct {
	mu   sync.Mutex
	list []string
}

func (c *consoleErrors) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.list...)
}

func (c *consoleErrors) listen(ctx context.Context) {
	msgs := chromedp.Console(ctx) // subscribes now, before the page loads
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() || m.Type == "assert" {
				c.mu.Lock()
				c.list = append(c.list, m.String())
				c.mu.Unlock()
			}
		}
	}()
}

// screenshotDir is $XMQ_SCREENSHOT_DIR, or the test's temporary directory.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("XMQ_SCREENSHOT_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// waitJS evaluates a JavaScript boolean expression until it is true.
func waitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('main')?.innerText.slice(0, 1500) || document.body.innerText.slice(0, 1500)`))
			t.Fatalf("waiting for %s (%s): err %v\npage text:\n%s", what, expr, err, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func jsText(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q)?.textContent ?? ''`, sel)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func shoot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.scrollTo(0, 0); document.activeElement?.blur(); true`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // let the last refresh paint
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// setValue replaces an input's value and lets the page see the input event.
func setValue(sel, value string) chromedp.Action[chromedp.Void] {
	set := chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const el = document.querySelector(%q); el.value = %q;
		el.dispatchEvent(new Event('input', {bubbles: true})); return true })()`, sel, value))
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := set(ctx, t)
		return chromedp.Void{}, err
	}
}

// choose picks a select's option and lets the page see the change event.
func choose(sel, value string) chromedp.Action[chromedp.Void] {
	set := chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const el = document.querySelector(%q); el.value = %q;
		el.dispatchEvent(new Event('change', {bubbles: true})); return true })()`, sel, value))
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := set(ctx, t)
		return chromedp.Void{}, err
	}
}

// TestDashboardInBrowser drives the dashboard in headless Chromium: log
// in, watch the connection count follow a client that connects, read the
// node card and switch the charts to the hour, publish from the built-in
// MQTT 5 client with properties and see the message arrive (in the page,
// properties included, and at a Go subscriber), get a message from Go,
// disconnect the Go client from the clients table, read a client's
// counters, remove an offline session, read a retained message's detail
// with its time and properties, and see the MQTT page explain a broker
// without a ws listener, all without a console error.
func TestDashboardInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no browser")
	}
	d, ctx, console, shots := openDashboard(t, 50*time.Second)

	// Log in.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(d.url),
		chromedp.WaitVisible(chromedp.CSS("#login-pass")),
		chromedp.SendKeys(chromedp.CSS("#login-pass"), browserPassword),
		chromedp.Click(chromedp.CSS("#login-submit")),
		chromedp.WaitVisible(chromedp.CSS("#stat-connected")),
	); err != nil {
		t.Fatalf("log in: %v", err)
	}
	// The overview's own MQTT connection ($SYS over WebSocket) counts too:
	// it logged in with the session, anonymous access being off.
	waitJS(t, ctx, "the overview's $SYS connection", `document.querySelector('#sys-state')?.classList.contains('on') === true`)
	if ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`!document.querySelector('#nav-nodes')`)); !ok {
		t.Error("a broker outside a cluster shows a Nodes page")
	}
	before := int(d.srv.Stats().Connected)
	if before != 1 {
		t.Fatalf("broker has %d connections, want the dashboard's own one", before)
	}
	if cs := d.srv.ClientsPage(core.ClientQuery{Limit: 10}).Clients; len(cs) != 1 || !strings.HasPrefix(cs[0].Username, web.DashboardUserPrefix+"admin:") {
		t.Fatalf("the dashboard's connection: %+v, want a dashboard admin login", cs)
	}
	// The connection count comes from $SYS (data-source="sys").
	sysCount := func(n int) string {
		return fmt.Sprintf(`(() => { const el = document.querySelector('#stat-connected');
			return el.dataset.source === 'sys' && el.textContent === %q })()`, strconv.Itoa(n))
	}
	waitJS(t, ctx, "the $SYS connection count to show the dashboard's connection", sysCount(before))

	// Anonymous access is off.
	anon := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + d.tcpAddr).SetClientID("anonymous").
		SetAutoReconnect(false).SetConnectRetry(false))
	if tok := anon.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() == nil {
		anon.Disconnect(0)
		t.Fatal("an anonymous client connected; the test wants anonymous access off")
	}

	// A Go client connects: the count goes up by one.
	received := make(chan string, 10)
	lost := make(chan error, 1)
	probe := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + d.tcpAddr).SetClientID("probe-1").
		SetUsername("probe").SetPassword(probePassword).
		SetCleanSession(true).SetAutoReconnect(false).SetConnectRetry(false).
		SetConnectionLostHandler(func(_ paho.Client, err error) { lost <- err }))
	if tok := probe.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("probe connect: %v", tok.Error())
	}
	t.Cleanup(func() { probe.Disconnect(0) })
	if tok := probe.Subscribe("browser/#", 1, func(_ paho.Client, m paho.Message) { received <- string(m.Payload()) }); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("probe subscribe: %v", tok.Error())
	}
	waitJS(t, ctx, fmt.Sprintf("the $SYS connection count to go from %d to %d", before, before+1), sysCount(before+1))
	waitJS(t, ctx, "the $SYS table", `document.querySelectorAll('#sys-state ~ * td.mono, .panel td.mono').length > 3`)
	// A rate measured between two live $SYS updates.
	waitJS(t, ctx, "a $SYS message rate", `document.querySelector('#stat-msgin').dataset.source === 'sys'`)
	// The retained card counts clients' messages: the broker's $SYS topics
	// (retained too) are not user data.
	if n := d.srv.Stats().SysRetained; n < 40 {
		t.Fatalf("the broker holds %d retained $SYS topics, want its whole tree", n)
	}
	waitJS(t, ctx, "no retained messages of clients", `document.querySelector('#stat-retained').textContent === '0'`)
	// The node card: CPU (measured between two refreshes), memory, open
	// files against the limit, goroutines, and the store (in memory here).
	waitJS(t, ctx, "the node card", `/% of a core/.test(document.querySelector('#node-cpu')?.textContent) &&
		/^\d[\d,]* of \d/.test(document.querySelector('#node-files').textContent) && !!document.querySelector('#node-files .meter') &&
		/^\d+$/.test(document.querySelector('#node-goroutines').textContent.replaceAll(',', '')) &&
		document.querySelector('#node-store').textContent.includes('in memory')`)
	waitJS(t, ctx, "no alarms", `document.querySelector('#alarms-count')?.textContent === 'none'`)
	waitJS(t, ctx, "connects per listener", `document.querySelector('tr[data-listener="tcp"] td:nth-child(5)').textContent === '1'`)
	// The charts span the last hour.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`button[data-range="1h"]`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the hour's charts", `document.querySelector('button[data-range="1h"]').classList.contains('primary')`)
	// And the day, from the one-minute points (none yet: a new broker).
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`button[data-range="24h"]`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the day's charts", `document.querySelector('button[data-range="24h"]').classList.contains('primary') &&
		document.querySelector('#chart-connections').chart?.opts.spanMs === 86400000 && !document.querySelector('.toast.err')`)
	// One set of x labels: clock times, no "1 hour ago" and "now" beside them.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`button[data-range="5m"]`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the 5 minutes' charts with points", `document.querySelector('button[data-range="5m"]').classList.contains('primary') &&
		document.querySelector('#chart-messages').chart?.times.length > 3`)
	// Hovering a chart shows the values at that time: a tip with the
	// time and each series' value, gone when the pointer leaves.
	box, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(() => { const c = document.querySelector('#chart-messages'); c.scrollIntoView({ block: 'center' }); const r = c.getBoundingClientRect();
		return [r.right - 30, r.top + r.height / 2, r.bottom + 40] })()`))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.MouseEvent("mouseMoved", box[0], box[1])); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the chart's tip", `(() => { const tip = document.querySelector('#tip-messages');
		if (tip.classList.contains('hidden')) return false;
		const rows = [...tip.querySelectorAll('.tip-row')].map((r) => r.dataset.series + ':' + r.querySelector('b').textContent);
		return /^\d{2}\/\d{2}\/\d{4}, \d{2}:\d{2}:\d{2}$/.test(tip.querySelector('.tip-time').textContent) && rows.length === 3 &&
			rows[0].startsWith('in:') && rows[1].startsWith('out:') && rows[2].startsWith('dropped:') && rows.every((r) => r.endsWith('/s')) })()`)
	shoot(t, ctx, shots, "overview-hover.png")
	if err := chromedp.Do(ctx, chromedp.MouseEvent("mouseMoved", box[0], box[2])); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the tip gone with the pointer", `document.querySelector('#tip-messages').classList.contains('hidden')`)
	shoot(t, ctx, shots, "overview.png")

	// The built-in MQTT client: connect, subscribe with a wildcard, publish.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(d.url+"#/mqtt"),
		chromedp.WaitVisible(chromedp.CSS("#mq-connect")),
	); err != nil {
		t.Fatalf("MQTT page: %v", err)
	}
	// Examples are placeholders, not values to erase; the ws listener's
	// URL is a value, the page found it.
	waitJS(t, ctx, "the MQTT page's empty fields with placeholders", `['#mq-client-id', '#mq-sub-filter', '#mq-pub-topic', '#mq-pub-payload'].every((s) => {
		const el = document.querySelector(s); return el.value === '' && el.placeholder !== '' }) && document.querySelector('#mq-url').value.startsWith('ws://') &&
		document.querySelector('#mq-client-id').placeholder === 'empty: a random id'`)
	if err := chromedp.Do(ctx,
		setValue("#mq-client-id", "web-page-1"),
		chromedp.Click(chromedp.CSS("#mq-connect")),
	); err != nil {
		t.Fatalf("MQTT page: %v", err)
	}
	waitJS(t, ctx, "the page's MQTT connection", `document.querySelector('#mq-status').textContent === 'connected'`)
	if err := chromedp.Do(ctx,
		setValue("#mq-sub-filter", "browser/+/#"),
		chromedp.Click(chromedp.CSS("#mq-sub-btn")),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the subscription", `document.querySelector('#mq-subs').textContent.includes('browser/+/#')`)
	// MQTT 5 (the page's default): a retained QoS 1 message with a content
	// type, a response topic, an expiry and user properties.
	if v, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#mq-version').value`)); v != "5" {
		t.Errorf("the MQTT page connects with protocol %q, want 5", v)
	}
	if err := chromedp.Do(ctx,
		setValue("#mq-pub-topic", "browser/page/hello"),
		setValue("#mq-pub-payload", `{"from": "chromium", "n": 1}`),
		chromedp.SetValue(chromedp.CSS("#mq-pub-qos"), "1"),
		setValue("#mq-pub-content-type", "application/json"),
		setValue("#mq-pub-response-topic", "browser/replies"),
		setValue("#mq-pub-expiry", "3600"),
		setValue("#mq-pub-user-props", "unit=C\nsite=lab"),
		chromedp.Click(chromedp.CSS("#mq-pub-retain")),
		chromedp.Click(chromedp.CSS("#mq-pub-btn")),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the page's own message in its stream", `document.querySelector('#mq-messages').textContent.includes('"from": "chromium"')`)
	// It came back with its properties.
	props := `[...document.querySelectorAll('#mq-messages .prop')].map((e) => e.textContent).join('|')`
	waitJS(t, ctx, "the message's MQTT 5 properties", fmt.Sprintf(`(() => { const p = %s; return p.includes('content type application/json') &&
		p.includes('response topic browser/replies') && p.includes('unit C') && p.includes('site lab') && /expires in (59m|1h)/.test(p) })()`, props))
	select {
	case got := <-received:
		if got != `{"from": "chromium", "n": 1}` {
			t.Errorf("Go subscriber got %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the message published in the browser did not reach the Go subscriber")
	}
	if tok := probe.Publish("browser/go/reply", 0, false, "hello from Go"); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("probe publish: %v", tok.Error())
	}
	waitJS(t, ctx, "the Go client's message in the page", `document.querySelector('#mq-messages').textContent.includes('hello from Go')`)
	shoot(t, ctx, shots, "mqtt-client.png")

	// The clients table: disconnect the Go client.
	if err := chromedp.Do(ctx, chromedp.Navigate(d.url+"#/clients")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "probe-1 in the clients table", `!!document.querySelector('button[data-disconnect="probe-1"]')`)
	shoot(t, ctx, shots, "clients.png")
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`button[data-disconnect="probe-1"]`)),
		chromedp.WaitVisible(chromedp.CSS("#confirm-ok")),
		chromedp.Click(chromedp.CSS("#confirm-ok")),
	); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(5 * time.Second):
		t.Fatal("the Go client was not disconnected")
	}
	waitJS(t, ctx, "probe-1 to leave the table", `!document.querySelector('tr[data-client-id="probe-1"]')`)
	if _, ok := d.srv.Client("probe-1"); ok {
		t.Error("probe-1 (clean session) still has a session after the disconnect")
	}

	// An offline session is listed under Offline and removed from there.
	keeper := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + d.tcpAddr).SetClientID("keeper").
		SetUsername("probe").SetPassword(probePassword).SetCleanSession(false).SetAutoReconnect(false).SetConnectRetry(false))
	if tok := keeper.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("keeper connect: %v", tok.Error())
	}
	if tok := keeper.Subscribe("keep/#", 1, nil); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("keeper subscribe: %v", tok.Error())
	}
	keeper.Disconnect(100)
	if err := chromedp.Do(ctx, choose("#clients-connected", "false")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "keeper among the offline sessions", `!!document.querySelector('button[data-remove="keeper"]') &&
		!document.querySelector('button[data-disconnect]')`)
	shoot(t, ctx, shots, "clients-offline.png")
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`button[data-remove="keeper"]`)),
		chromedp.WaitVisible(chromedp.CSS("#confirm-ok")),
		chromedp.Click(chromedp.CSS("#confirm-ok")),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "keeper to leave the table", `!document.querySelector('tr[data-client-id="keeper"]')`)
	if _, ok := d.srv.Client("keeper"); ok {
		t.Error("keeper's session is still there after Remove")
	}
	if err := chromedp.Do(ctx, choose("#clients-connected", "")); err != nil {
		t.Fatal(err)
	}

	// The client detail page of the page's own MQTT client.
	pageClient, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.parse(sessionStorage.getItem('xmq-mqtt')).clientId`))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(d.url+"#/clients/"+pageClient)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the client detail", `document.querySelector('#client-state')?.textContent === 'online'`)
	waitJS(t, ctx, "its subscription", `document.querySelector('main').textContent.includes('browser/+/#')`)
	// Its counters: it published one message and received two (its own and
	// the Go client's), and has no will and no TLS.
	waitJS(t, ctx, "its traffic", `(() => { const t = document.querySelector('#client-traffic').textContent;
		return /Messages in1 \(\d+ B read\)/.test(t) && /Messages out2 \(\d+ B written\)/.test(t) })()`)
	if got := jsText(t, ctx, "#client-will"); got != "Messagenone" {
		t.Errorf("will panel %q, want none", got)
	}
	shoot(t, ctx, shots, "client.png")

	// The subscriptions list holds the page's own subscription.
	if err := chromedp.Do(ctx, chromedp.Navigate(d.url+"#/subscriptions")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the page's subscription in the list", `!!document.querySelector('main table')?.textContent.includes('browser/+/#')`)

	// The retained list pages by cursor: 60 messages under browser/ret/
	// fill a page of 50 and one of 10, and Prev comes back.
	for i := range 60 {
		if err := d.srv.Publish(fmt.Sprintf("browser/ret/%02d", i), []byte("v"), 0, true); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(d.url+"#/retained"),
		chromedp.WaitVisible(chromedp.CSS("#retained-prefix")),
		setValue("#retained-prefix", "browser/ret/"),
	); err != nil {
		t.Fatal(err)
	}
	rows := func(n int, topic string) string {
		return fmt.Sprintf(`document.querySelectorAll('tr[data-topic]').length === %d && !!document.querySelector('tr[data-topic=%q]')`, n, topic)
	}
	waitJS(t, ctx, "the first page of 50 of 60", `document.querySelector('.pager').textContent.startsWith('1–50 of 60') && `+rows(50, "browser/ret/00"))
	// Clicked from script: the pager sits below the fold of 50 rows and is
	// redrawn by the periodic refresh, which a mouse click can miss.
	next, prev := `document.querySelector('button[data-page="next"]').click(); true`, `document.querySelector('button[data-page="prev"]').click(); true`
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](next)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the second page", rows(10, "browser/ret/59")+` && document.querySelector('.pager').textContent.startsWith('51–60 of 60')`)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](prev)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the first page again", rows(50, "browser/ret/00"))
	if err := chromedp.Do(ctx, setValue("#retained-filter", "browser/ret/+")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the filter's first page", `document.querySelector('#retained-count').textContent === '60 matching' && `+rows(50, "browser/ret/00"))
	shoot(t, ctx, shots, "retained.png")

	// The message the page published retained: its detail has the time it
	// was stored, who published it and its MQTT 5 properties.
	if err := chromedp.Do(ctx, setValue("#retained-filter", ""), setValue("#retained-prefix", "browser/page/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the page's retained message", `!!document.querySelector('tr[data-topic="browser/page/hello"] a')`)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('tr[data-topic="browser/page/hello"] a').click(); true`)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "its detail", fmt.Sprintf(`(() => { const d = document.querySelector('#retained-props')?.textContent || '';
		return /Stored.*\d+s ago/.test(d) && d.includes('Published by%s') && d.includes('Content typeapplication/json') &&
			d.includes('Response topicbrowser/replies') && document.querySelector('#retained-user-props')?.textContent === 'unit=C, site=lab' })()`, pageClient))
	shoot(t, ctx, shots, "retained-detail.png")

	// The bridges page: a bridge, its counters, and Stop.
	if err := chromedp.Do(ctx, chromedp.Navigate(d.url+"#/bridges")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the bridge in the table", `!!document.querySelector('tr[data-bridge="cloud"]')?.textContent.includes('1,234')`)
	shoot(t, ctx, shots, "bridges.png")
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`[...document.querySelectorAll('tr[data-bridge="cloud"] button')].find((b) => b.textContent === 'Stop').click(); true`)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the bridge stopped", `document.querySelector('tr[data-bridge="cloud"]')?.textContent.includes('stopped')`)
	if st := d.bridges.Bridges()[0].State; st != "stopped" {
		t.Errorf("after Stop in the page the bridge is %s", st)
	}

	// The traces page: start a trace of a client, see its packets counted,
	// download its file, stop it.
	if err := chromedp.Do(ctx, chromedp.Navigate(d.url+"#/traces"), chromedp.WaitVisible(chromedp.CSS("#trace-start")),
		choose("#trace-kind", "client_id"), setValue("#trace-value", "traced-1"),
		chromedp.Click(chromedp.CSS("#trace-start"))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the running trace", `!!document.querySelector('#traces-body tr[data-trace] .badge.on')`)
	traced := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + d.tcpAddr).SetClientID("traced-1").
		SetUsername("probe").SetPassword(probePassword).SetAutoReconnect(false).SetConnectRetry(false))
	if tok := traced.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("traced client: %v", tok.Error())
	}
	if tok := traced.Publish("browser/traced", 1, false, "t"); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("traced publish: %v", tok.Error())
	}
	traced.Disconnect(100)
	waitJS(t, ctx, "the trace's packets", `Number(document.querySelector('#traces-body tr[data-trace] td.num')?.textContent.replace(/,/g, '')) >= 5`)
	file, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => {
		const a = [...document.querySelectorAll('#traces-body a')].find((x) => x.textContent === 'Download');
		return (await fetch(a.href)).text(); })()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(file, `"traced-1"`) || !strings.Contains(file, `in PUBLISH topic="browser/traced" qos=1`) {
		t.Errorf("the downloaded trace:\n%s", file)
	}
	shoot(t, ctx, shots, "traces.png")
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`[...document.querySelectorAll('#traces-body button')].find((b) => b.textContent === 'Stop').click(); true`)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the trace stopped", `document.querySelector('#traces-body tr[data-trace]')?.textContent.includes('stopped')`)

	// A phone-sized overview.
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)),
		chromedp.Navigate(d.url+"#/overview"),
		chromedp.WaitVisible(chromedp.CSS("#stat-connected")),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the phone overview", `/^\d+$/.test(document.querySelector('#stat-connected').textContent)`)
	overflow, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
	if err != nil {
		t.Fatal(err)
	}
	if overflow {
		t.Error("the overview is wider than a phone screen (horizontal scrolling)")
	}
	shoot(t, ctx, shots, "overview-phone.png")

	// A dashboard whose broker has no ws or wss listener says so on the
	// MQTT client page and in the overview's $SYS panel.
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1360, 900),
		chromedp.Navigate(d.noWSURL+"#/mqtt"),
		chromedp.WaitVisible(chromedp.CSS("#login-pass")),
		chromedp.SendKeys(chromedp.CSS("#login-pass"), browserPassword),
		chromedp.Click(chromedp.CSS("#login-submit")),
		chromedp.WaitVisible(chromedp.CSS("#mq-connect")),
	); err != nil {
		t.Fatalf("MQTT page without ws: %v", err)
	}
	waitJS(t, ctx, "the no-WebSocket notice", `(() => { const n = document.querySelector('#mq-no-ws');
		return !n.classList.contains('hidden') && n.textContent.includes('no ws or wss listener') && n.textContent.includes('transport: ws') })()`)
	// Nothing to dial: Connect is off and says why; with a URL typed that
	// does not answer, the page names the missing listener, not close
	// code 1006.
	waitJS(t, ctx, "Connect disabled without a ws listener", `(() => { const b = document.querySelector('#mq-connect');
		return b.disabled && b.title === 'no WebSocket listener: add a ws or wss listener to use this page' })()`)
	shoot(t, ctx, shots, "mqtt-no-ws.png")
	nobody := "ws://" + mqtttest.FreeAddr(t) + "/mqtt"
	if err := chromedp.Do(ctx, setValue("#mq-url", nobody), chromedp.Click(chromedp.CSS("#mq-connect"))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the no-listener toast", `[...document.querySelectorAll('.toast.err')].some((e) => e.textContent === 'no WebSocket listener: add a ws or wss listener to use this page') &&
		![...document.querySelectorAll('.toast')].some((e) => e.textContent.includes('1006'))`)
	if err := chromedp.Do(ctx, setValue("#mq-url", "")); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(d.noWSURL+"#/overview")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the overview's $SYS panel without ws", `document.querySelector('#sys-state')?.textContent === 'no ws listener'`)
	// n3 is unreachable: the alarms panel says so, as the alert rule would.
	waitJS(t, ctx, "the unreachable node's alarm", `(() => { const r = document.querySelector('#alarms-body tr[data-rule="XMQClusterNodeUnreachable"]');
		return !!r && r.textContent.includes('critical') && r.textContent.includes('1 other node(s)') &&
			document.querySelector('#alarms-count').textContent === '1 active' })()`)
	shoot(t, ctx, shots, "overview-alarm.png")

	// That server is a node of a cluster: the Nodes page shows the three
	// with their health and load.
	waitJS(t, ctx, "the Nodes entry of a cluster node", `!!document.querySelector('#nav-nodes')`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#nav-nodes"))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the nodes table", `(() => { const rows = document.querySelectorAll('#nodes-body tr');
		const n1 = document.querySelector('tr[data-node="n1"]'), n3 = document.querySelector('tr[data-node="n3"]');
		return rows.length === 3 && n1.textContent.includes('this node') && n1.textContent.includes('1,200') &&
			n1.textContent.includes('251') && n1.textContent.includes('tcp://10.0.0.1:1883') &&
			n3.querySelector('.badge.err')?.textContent === 'unreachable' &&
			document.querySelector('#nodes-count').textContent.includes('1 unreachable') })()`)
	shoot(t, ctx, shots, "nodes.png")

	// Chromium logs the refused WebSocket itself.
	errs := slices.DeleteFunc(console.all(), func(e string) bool { return strings.Contains(e, "WebSocket connection to '"+nobody+"' failed") })
	if len(errs) > 0 {
		t.Errorf("the page logged %d errors:\n  %s", len(errs), strings.Join(errs, "\n  "))
	}
	if err := ctx.Err(); errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("the browser test ran out of time")
	}
}

// TestDashboardUsersInBrowser: an admin adds a viewer on the Users page;
// the viewer logs in, has no Users page, changes its password on the
// Account page, is sent back to the login page and logs in with the new
// password, all without a console error.
func TestDashboardUsersInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no browser")
	}
	d, ctx, console, shots := openDashboard(t, 40*time.Second)
	logIn := func(user, password, then string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("#login-pass")),
			setValue("#login-user", user), setValue("#login-pass", password),
			chromedp.Click(chromedp.CSS("#login-submit")), chromedp.WaitVisible(chromedp.CSS(then))); err != nil {
			t.Fatalf("log in as %s: %v", user, err)
		}
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(d.url+"#/users")); err != nil {
		t.Fatal(err)
	}
	logIn("admin", browserPassword, "#user-form")
	waitJS(t, ctx, "the configured admin in the table", `!!document.querySelector('#user-admin')?.textContent.includes('configured')`)
	if err := chromedp.Do(ctx, setValue("#user-name", "olga"), choose("#user-role", "viewer"),
		setValue("#user-pass", "olga-password-1"), setValue("#user-desc", "night shift"),
		chromedp.Click(chromedp.CSS("#user-add"))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the new user in the table", `(() => { const r = document.querySelector('#user-olga');
		return !!r && r.textContent.includes('night shift') && document.querySelector('#role-olga')?.value === 'viewer' })()`)
	shoot(t, ctx, shots, "users.png")

	// The new viewer logs in: no Users page for it.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#logout"))); err != nil {
		t.Fatal(err)
	}
	logIn("olga", "olga-password-1", "#stat-connected")
	waitJS(t, ctx, "a viewer's menu", `!document.querySelector('#nav-users') && !!document.querySelector('#nav-account') &&
		document.querySelector('.who')?.textContent === 'olga · viewer'`)

	// It changes its password: the session ends, the new password logs in.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#nav-account")), chromedp.WaitVisible(chromedp.CSS("#password-form")),
		setValue("#password-old", "olga-password-1"), setValue("#password-new", "olga-password-2"),
		setValue("#password-again", "olga-password-2")); err != nil {
		t.Fatal(err)
	}
	shoot(t, ctx, shots, "account.png")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#password-submit"))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the login page after the change", `!!document.querySelector('#login-pass')`)
	logIn("olga", "olga-password-2", "#password-form")

	if errs := console.all(); len(errs) > 0 {
		t.Errorf("the page logged %d errors:\n  %s", len(errs), strings.Join(errs, "\n  "))
	}
}
