package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/auth"
	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/config"
	"github.com/xmq-io/xmq/internal/mqtttest"
	"github.com/xmq-io/xmq/web"
)

// TestExampleWebIsDefault: the example's web section, and the defaults
// internal/config restates (it does not import web), are web's defaults.
func TestExampleWebIsDefault(t *testing.T) {
	want := config.Web{Address: web.DefaultAddress, AdminUser: web.DefaultAdminUser, SessionTTL: web.DefaultSessionTTL}
	if got := config.Default().Web; !reflect.DeepEqual(got, want) {
		t.Errorf("config's web defaults\n  %+v\nwant web's\n  %+v", got, want)
	}
	got := mustLoad(t, "-c", examplePath)
	if !reflect.DeepEqual(got.Web, want) {
		t.Errorf("example web section gives\n  %+v\nwant the defaults\n  %+v", got.Web, want)
	}
}

// TestWebHTTPAuthStatsCopiesEveryField: web's copy of the HTTP auth
// service's counters has every field of auth's, copied; a field added to
// auth.HTTPStats or auth.HTTPCounts fails here until web has it too.
func TestWebHTTPAuthStatsCopiesEveryField(t *testing.T) {
	var src auth.HTTPStats
	n := 0
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		for i := range v.NumField() {
			switch f := v.Field(i); f.Kind() {
			case reflect.Struct:
				fill(f)
			default:
				n++
				f.SetInt(int64(n))
			}
		}
	}
	fill(reflect.ValueOf(&src).Elem())
	got, want := reflect.ValueOf(*webHTTPAuthStats(&src)), reflect.ValueOf(src)
	var compare func(got, want reflect.Value, path string)
	compare = func(got, want reflect.Value, path string) {
		for i := range want.NumField() {
			name := want.Type().Field(i).Name
			g := got.FieldByName(name)
			switch {
			case !g.IsValid():
				t.Errorf("web lacks %s%s", path, name)
			case want.Field(i).Kind() == reflect.Struct:
				compare(g, want.Field(i), path+name+".")
			case g.Int() != want.Field(i).Int():
				t.Errorf("%s%s copied as %d, want %d", path, name, g.Int(), want.Field(i).Int())
			}
		}
	}
	compare(got, want, "")
	if webHTTPAuthStats(nil) != nil {
		t.Error("no service: web gets counters")
	}
}

func TestWebConfig(t *testing.T) {
	key, sum := web.NewAPIKey()
	_ = key
	cfg := mustLoad(t, "-c", writeFile(t, "web:\n  address: ':0'\n  api_keys:\n    grafana: {sha256: 'sha256:"+sum+"', role: viewer}\n"), "-web", "127.0.0.1:9999")
	if cfg.Web.Address != "127.0.0.1:9999" {
		t.Errorf("-web did not override the file: %q", cfg.Web.Address)
	}
	keys, err := apiKeys(&cfg.Web)
	if err != nil || len(keys) != 1 || keys[0].Name != "grafana" || keys[0].Role != web.RoleViewer {
		t.Errorf("api keys %+v, %v", keys, err)
	}
	if cfg := mustLoad(t, "-web", ""); cfg.Web.Address != "" {
		t.Errorf(`-web "" gives address %q`, cfg.Web.Address)
	}
	for _, tt := range []struct{ name, file, err string }{
		{"bad address", "web:\n  address: nowhere\n", "web.address"},
		{"short hash", "web:\n  api_keys:\n    a: {sha256: abc, role: admin}\n", "web.api_keys.a"},
		{"bad role", "web:\n  api_keys:\n    a: {sha256: " + sum + ", role: root}\n", "role"},
		{"short session", "web:\n  session_ttl: 1s\n", "session ttl"},
		{"not bcrypt", "web:\n  admin_password_hash: secret\n", "admin password hash"},
		{"no admin", "web:\n  admin_user: ''\n", "admin_user"},
		{"unknown key", "web:\n  adress: x\n", `web.adress: unknown key (did you mean "address"?)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig([]string{"-c", writeFile(t, tt.file)})
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("error %v, want one containing %q", err, tt.err)
			}
		})
	}
}

// webRunConfig serves MQTT over tcp and ws on free loopback ports.
const webRunConfig = `
listeners:
  - name: tcp
    address: 127.0.0.1:0
  - name: ws
    transport: ws
    address: 127.0.0.1:0
`

// startWebRun starts run with the web server on a free port and returns
// the broker and the web server's base URL.
func startWebRun(t *testing.T, args ...string) (*broker, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &broker{stderr: &mqtttest.Buffer{}, cancel: cancel, done: make(chan error, 1)}
	ready := make(chan []net.Addr, 1)
	webAddr := make(chan net.Addr, 1)
	args = append([]string{"-c", writeFile(t, webRunConfig), "-web", "127.0.0.1:0", "-log-format", "json"}, args...)
	go func() {
		b.done <- run(ctx, args, io.Discard, b.stderr, withReady(func(a []net.Addr) { ready <- a }),
			func(o *runOptions) { o.webReady = func(a net.Addr) { webAddr <- a } })
	}()
	select {
	case b.addrs = <-ready:
	case err := <-b.done:
		cancel()
		t.Fatalf("run returned before it was ready: %v\n%s", err, b.stderr)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatalf("run not ready after 10s\n%s", b.stderr)
	}
	t.Cleanup(func() { cancel(); <-b.done })
	return b, "http://" + (<-webAddr).String()
}

func getJSON(t *testing.T, url, user, pass string) (int, map[string]any) {
	t.Helper()
	return requestJSON(t, "GET", url, user, pass)
}

// requestJSON makes a request without a body, with HTTP Basic credentials
// when user is set, and decodes the JSON answer.
func requestJSON(t *testing.T, method, url, user, pass string) (int, map[string]any) {
	t.Helper()
	return sendJSON(t, method, url, user, pass, "")
}

// sendJSON is requestJSON with a JSON body ("": none).
func sendJSON(t *testing.T, method, url, user, pass, body string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m
}

func TestRunServesWeb(t *testing.T) {
	t.Setenv(config.AdminPasswordEnv, "s3cret-from-env")
	b, base := startWebRun(t, "-data", "")

	if code, _ := getJSON(t, base+"/healthz", "", ""); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
	if code, m := getJSON(t, base+"/readyz", "", ""); code != 200 {
		t.Errorf("/readyz: %d %v", code, m)
	}
	if code, _ := getJSON(t, base+"/api/v1/overview", "admin", "wrong"); code != 401 {
		t.Errorf("wrong password: %d, want 401", code)
	}
	code, ov := getJSON(t, base+"/api/v1/overview", "admin", "s3cret-from-env")
	if code != 200 {
		t.Fatalf("overview: %d %v", code, ov)
	}
	var wsURL string
	for _, l := range ov["listeners"].([]any) {
		l := l.(map[string]any)
		if l["name"] == "ws" {
			wsURL, _ = l["url"].(string)
		}
	}
	if want := "ws://" + b.addrs[1].String() + "/mqtt"; wsURL != want {
		t.Errorf("overview gives the ws listener as %q, want %q", wsURL, want)
	}

	// The ws listener trusts the dashboard's page like a local client:
	// anonymous from loopback. Another page connects too, but as a foreign
	// one, which must log in.
	if status, rc := wsConnack(t, wsURL, base, "", ""); status != 101 || rc != codec.Success {
		t.Errorf("anonymous from the dashboard's origin %s: upgrade %d, CONNACK %v; want 101, Success", base, status, rc)
	}
	if status, rc := wsConnack(t, wsURL, "http://evil.example", "", ""); status != 101 || rc != codec.NotAuthorized {
		t.Errorf("anonymous from a foreign origin: upgrade %d, CONNACK %v; want 101, Not authorized", status, rc)
	}

	// The banned list is auth's.
	req, _ := http.NewRequest("POST", base+"/api/v1/banned", strings.NewReader(`{"kind":"client_id","value":"bad-device","reason":"test"}`))
	req.SetBasicAuth("admin", "s3cret-from-env")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != 201 {
		t.Fatalf("ban: %d", res.StatusCode)
	}
	code, bans := getJSON(t, base+"/api/v1/banned", "admin", "s3cret-from-env")
	items, _ := bans["items"].([]any)
	if code != 200 || len(items) != 1 || items[0].(map[string]any)["kind"] != "client_id" || items[0].(map[string]any)["value"] != "bad-device" {
		t.Errorf("banned list: %d %v", code, bans)
	}

	res, err = http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if !strings.Contains(string(metrics), `xmq_connections{listener="ws",transport="ws"}`) {
		t.Errorf("/metrics lacks the ws listener's connections:\n%.2000s", metrics)
	}
	if err := b.stop(t); err != nil {
		t.Errorf("run: %v", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("the web server still answers after run returned")
	}
}

func TestRunGeneratesAdminPassword(t *testing.T) {
	t.Setenv(config.AdminPasswordEnv, "")
	dir := t.TempDir()
	b, _ := startWebRun(t, "-data", dir)
	if err := b.stop(t); err != nil {
		t.Fatalf("run: %v", err)
	}
	log := b.stderr.String()
	if !strings.Contains(log, "generated the dashboard's admin password") {
		t.Fatalf("first start did not log a generated password:\n%s", log)
	}
	i := strings.Index(log, `"password":"`)
	password := log[i+len(`"password":"`):]
	password = password[:strings.IndexByte(password, '"')]
	if _, err := os.Stat(filepath.Join(dir, web.AdminPasswordFile)); err != nil {
		t.Fatalf("hash not stored: %v", err)
	}

	// The second start reuses the stored hash and prints nothing.
	b, base := startWebRun(t, "-data", dir)
	if code, _ := getJSON(t, base+"/api/v1/auth/me", "admin", password); code != 200 {
		t.Errorf("the generated password does not work after a restart: %d", code)
	}
	if log := b.stderr.String(); strings.Contains(log, "generated the dashboard's admin password") {
		t.Errorf("second start generated another password:\n%s", log)
	}
}

// TestRunDashboardUsers: with a data directory, a dashboard user an admin
// adds and the generated admin password changed through the API survive a
// restart, in files of mode 0600; an admin password from the environment
// is not the API's to change.
func TestRunDashboardUsers(t *testing.T) {
	t.Setenv(config.AdminPasswordEnv, "")
	dir := t.TempDir()
	b, base := startWebRun(t, "-data", dir)
	log := b.stderr.String()
	i := strings.Index(log, `"password":"`)
	if i < 0 {
		t.Fatalf("no generated password in the log:\n%s", log)
	}
	password := log[i+len(`"password":"`):]
	password = password[:strings.IndexByte(password, '"')]
	if code, m := sendJSON(t, "POST", base+"/api/v1/users", "admin", password,
		`{"name":"alice","role":"viewer","password":"alice-password","description":"on call"}`); code != 201 {
		t.Fatalf("create alice: %d %v", code, m)
	}
	if code, m := sendJSON(t, "POST", base+"/api/v1/auth/password", "admin", password,
		fmt.Sprintf(`{"old_password":%q,"new_password":"admin-chosen-password"}`, password)); code != 200 {
		t.Fatalf("change the admin's password: %d %v", code, m)
	}
	if err := b.stop(t); err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, f := range []string{web.UsersFile, web.AdminPasswordFile} {
		fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil || runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", f, fi, err)
		}
	}

	b, base = startWebRun(t, "-data", dir)
	if code, m := getJSON(t, base+"/api/v1/auth/me", "alice", "alice-password"); code != 200 || m["role"] != "viewer" {
		t.Errorf("alice after a restart: %d %v", code, m)
	}
	if code, _ := getJSON(t, base+"/api/v1/auth/me", "admin", "admin-chosen-password"); code != 200 {
		t.Errorf("the admin's changed password after a restart: %d", code)
	}
	if code, _ := getJSON(t, base+"/api/v1/users", "alice", "alice-password"); code != 403 {
		t.Errorf("a viewer listing users: %d, want 403", code)
	}
	if err := b.stop(t); err != nil {
		t.Fatalf("run: %v", err)
	}

	t.Setenv(config.AdminPasswordEnv, "from-the-environment")
	_, base = startWebRun(t, "-data", dir)
	if code, m := sendJSON(t, "PUT", base+"/api/v1/users/admin", "admin", "from-the-environment", `{"password":"not-this-one"}`); code != 409 {
		t.Errorf("changing a password from XMQ_ADMIN_PASSWORD: %d %v, want 409", code, m)
	}
}

func TestRunServesWebOverTLS(t *testing.T) {
	t.Setenv(config.AdminPasswordEnv, "pw")
	_, base := startWebRun(t, "-data", "", "-c", writeFile(t, "listeners:\n  - address: 127.0.0.1:0\nweb:\n  tls: true\n"))
	base = strings.Replace(base, "http://", "https://", 1)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // the development CA
	res, err := client.Get(base + "/healthz")
	if err != nil {
		t.Fatalf("HTTPS: %v", err)
	}
	_ = res.Body.Close()
	if res.StatusCode != 200 || res.TLS == nil || res.Header.Get("Strict-Transport-Security") == "" {
		t.Errorf("GET /healthz over TLS: %d, TLS %v, HSTS %q", res.StatusCode, res.TLS != nil, res.Header.Get("Strict-Transport-Security"))
	}
	// Plain HTTP gets Go's "Client sent an HTTP request to an HTTPS server".
	if res, err := http.Get(strings.Replace(base, "https://", "http://", 1) + "/healthz"); err == nil {
		_ = res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP on the TLS port: %d, want 400", res.StatusCode)
		}
	}
}

// TestRunDashboardMQTT: with anonymous access off, the dashboard's MQTT
// user name and password from /api/v1/auth/mqtt log in to the broker, the
// password is never logged, and /metrics counts it all.
func TestRunDashboardMQTT(t *testing.T) {
	t.Setenv(config.AdminPasswordEnv, "pw")
	b, base := startWebRun(t, "-data", "", "-c", writeFile(t, webRunConfig+"auth:\n  allow_anonymous: false\n"))
	addr := b.addrs[0].String()
	if rc := connack(t, addr, "", ""); rc != codec.NotAuthorized {
		t.Errorf("anonymous CONNACK %v, want Not Authorized", rc)
	}
	if code, _ := getJSON(t, base+"/api/v1/auth/mqtt", "", ""); code != 401 {
		t.Errorf("/api/v1/auth/mqtt without credentials: %d, want 401", code)
	}
	code, m := getJSON(t, base+"/api/v1/auth/mqtt", "admin", "pw")
	user, _ := m["username"].(string)
	pass, _ := m["password"].(string)
	if code != 200 || user != web.DashboardMQTTUser(web.RoleAdmin, "admin") || pass == "" || m["role"] != "admin" {
		t.Fatalf("/api/v1/auth/mqtt: %d %v", code, m)
	}
	if rc := connack(t, addr, user, pass); rc != codec.Success {
		t.Errorf("dashboard login CONNACK %v, want Success", rc)
	}
	if rc := connack(t, addr, user, pass+"x"); rc != codec.BadUserNameOrPassword {
		t.Errorf("dashboard login with a wrong password: CONNACK %v", rc)
	}

	want := []string{
		`xmq_dashboard_mqtt_logins_total{result="accepted"} 1`,
		`xmq_dashboard_mqtt_logins_total{result="refused"} 1`,
		`xmq_auth_refused_total{cause="anonymous"} 1`,
		`xmq_auth_logins_total 0`,
		// Counted when the refused connection has ended, a moment after
		// its CONNACK: the scrape is repeated until then.
		`xmq_disconnects_total{reason="auth_failure"} 2`,
		`xmq_store_sync_seconds_bucket{le="+Inf"}`,
		`xmq_queued_messages 0`,
		`xmq_inflight_messages 0`,
		`xmq_shared_groups 0`,
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		res, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		metrics, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		missing := slices.DeleteFunc(slices.Clone(want), func(w string) bool { return strings.Contains(string(metrics), w) })
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("/metrics lacks %q", missing)
			break
		}
	}
	if code, m := getJSON(t, base+"/readyz", "", ""); code != 200 {
		t.Errorf("/readyz: %d %v", code, m)
	}
	if err := b.stop(t); err != nil {
		t.Errorf("run: %v", err)
	}
	if log := b.stderr.String(); strings.Contains(log, pass) || strings.Contains(log, strings.SplitN(pass, ".", 3)[2]) {
		t.Errorf("the dashboard's MQTT password is in the log:\n%s", log)
	}
}

// fakeHealth is a StoreHealthy with a settable answer.
type fakeHealth struct{ err error }

func (f *fakeHealth) StoreHealthy() error { return f.err }

func TestReadiness(t *testing.T) {
	cfg := mustLoad(t, "-c", writeFile(t, webRunConfig))
	st := &fakeHealth{}
	r := newReadiness(&cfg, st)
	if err := r.check(); err != nil {
		t.Errorf("everything up: %v", err)
	}
	st.err = errors.New("store: sync failed")
	if err := r.check(); err == nil || err.Error() != "store: sync failed" {
		t.Errorf("failing store: %v", err)
	}
	st.err = nil
	r.stopped(1)
	if err := r.check(); err == nil || !strings.Contains(err.Error(), "listener ws") {
		t.Errorf("a listener stopped: %v, want one naming ws", err)
	}
}

// TestRunExportsOperatorMetrics: run wires what only the composition root
// knows into /metrics: each TLS listener's certificate end, each
// listener's handshake failures, the store's disk use against its budget,
// and the connection limit.
func TestRunExportsOperatorMetrics(t *testing.T) {
	t.Setenv(config.AdminPasswordEnv, "pw")
	cfg := `
listeners:
  - name: plain
    address: 127.0.0.1:0
  - name: secure
    transport: tls
    address: 127.0.0.1:0
store:
  max_disk_bytes: 67108864
broker:
  max_connections: 100
`
	b, base := startWebRun(t, "-data", t.TempDir(), "-c", writeFile(t, cfg))
	// Plain MQTT on the TLS port.
	c, err := net.Dial("tcp", b.addrs[1].String())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write([]byte("\x10\x0c\x00\x04MQTT\x04\x02\x00\x3c\x00\x00"))
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.ReadAll(c)
	_ = c.Close()

	want := []string{
		`xmq_handshake_failures_total{listener="secure",reason="not_tls",transport="tls"} 1`,
		`xmq_handshake_failures_total{listener="plain",reason="max_connections",transport="tcp"} 0`,
		`xmq_store_disk_budget_bytes 6.7108864e+07`,
		`xmq_max_connections 100`,
		`xmq_connects_total{listener="secure",transport="tls"} 0`,
	}
	var metrics string
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		metrics = string(body)
		missing := slices.DeleteFunc(slices.Clone(want), func(w string) bool { return strings.Contains(metrics, w) })
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %q", missing)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The development CA's server certificate lasts months; the store's
	// usage is a number.
	for _, name := range []string{`xmq_certificate_expiry_seconds{listener="secure",transport="tls"} `, "xmq_store_disk_bytes "} {
		i := strings.Index(metrics, "\n"+name)
		if i < 0 {
			t.Errorf("/metrics lacks %s", name)
			continue
		}
		line, _, _ := strings.Cut(metrics[i+1+len(name):], "\n")
		v, err := strconv.ParseFloat(line, 64)
		if err != nil || v < 0 || strings.HasPrefix(name, "xmq_certificate") && v < 30*86400 {
			t.Errorf("%s%s: want a positive value (a certificate: over 30 days)", name, line)
		}
	}
	if strings.Contains(metrics, `xmq_certificate_expiry_seconds{listener="plain"`) {
		t.Error("a certificate expiry for the plain TCP listener")
	}
}

// TestRunTraces: a run keeps its traces in <data_dir>/traces: a trace
// started through the API follows a client over TCP into its file there.
func TestRunTraces(t *testing.T) {
	t.Setenv(config.AdminPasswordEnv, "s3cret-from-env")
	data := t.TempDir()
	b, base := startWebRun(t, "-data", data)
	req, _ := http.NewRequest("POST", base+"/api/v1/traces", strings.NewReader(`{"name":"ip","ip":"127.0.0.1","duration":"1m"}`))
	req.Header.Set("Content-Type", "application/json")
	req.SetBasicAuth("admin", "s3cret-from-env")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != 201 {
		t.Fatalf("POST /api/v1/traces: %d", res.StatusCode)
	}
	c, _, err := dialMQTT(t, b.addrs[0].String(), "over-tcp", 4, true)
	if err != nil {
		t.Fatal(err)
	}
	c.Send(&codec.Pingreq{})
	mqtttest.Expect[*codec.Pingresp](c)
	file := filepath.Join(data, "traces", "ip.log")
	waitUntil(t, "the PINGRESP in the trace file", func() bool {
		b, _ := os.ReadFile(file)
		return strings.Contains(string(b), `"over-tcp" 127.0.0.1:`) && strings.Contains(string(b), " out PINGRESP")
	})
}
