package web

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// fakeBroker is a Broker whose state the test sets.
type fakeBroker struct {
	mu        sync.Mutex
	clients   []core.ClientInfo
	subs      []core.SubscriptionInfo
	retained  map[string]*core.Message
	stored    map[string]time.Time // when a retained message was stored; absent: unknown
	published []string             // "topic qos retain payload"
	kicked    []string
	removed   []string
	topics    []core.TopicMetric
}

func (f *fakeBroker) AddTopicMetric(filter string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.topics {
		if m.Topic == filter {
			return core.ErrTopicMetricExists
		}
	}
	if filter == "" {
		return core.ErrTopicMetricInvalid
	}
	f.topics = append(f.topics, core.TopicMetric{Topic: filter, Created: time.Now()})
	return nil
}
func (f *fakeBroker) RemoveTopicMetric(filter string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, m := range f.topics {
		if m.Topic == filter {
			f.topics = append(f.topics[:i], f.topics[i+1:]...)
			return true
		}
	}
	return false
}
func (f *fakeBroker) TopicMetrics() []core.TopicMetric {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]core.TopicMetric{}, f.topics...)
}

func (f *fakeBroker) Stats() core.Snapshot {
	return core.Snapshot{Connected: 2, Connects: 5, Sessions: 3, Dropped: map[string]int64{"queue_full": 1},
		Disconnects: map[string]int64{"normal": 3}}
}
func (f *fakeBroker) StartTime() time.Time  { return time.Now().Add(-time.Hour) }
func (f *fakeBroker) Options() core.Options { return core.Options{MaxConnections: 100} }

// ClientsPage pages f.clients by the query's contract, reading them all
// (the real one is core's; this one serves the handler tests).
func (f *fakeBroker) ClientsPage(q core.ClientQuery) core.ClientPage {
	f.mu.Lock()
	all := slices.Clone(f.clients)
	f.mu.Unlock()
	slices.SortFunc(all, func(a, b core.ClientInfo) int { return strings.Compare(a.ClientID, b.ClientID) })
	if q.Desc {
		slices.Reverse(all)
	}
	p := core.ClientPage{Total: -1}
	if q.Match == nil {
		p.Total = 0
	}
	for _, c := range all {
		if !strings.HasPrefix(c.ClientID, q.IDPrefix) {
			continue
		}
		if q.Match == nil {
			p.Total++
		}
		if q.After != "" && (c.ClientID <= q.After) != q.Desc || c.ClientID == q.After || q.Match != nil && !q.Match(&c) {
			continue
		}
		if len(p.Clients) == q.Limit {
			p.More, p.Next = true, p.Clients[q.Limit-1].ClientID
			continue
		}
		p.Clients = append(p.Clients, c)
	}
	return p
}
func (f *fakeBroker) Client(id string) (core.ClientInfo, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.clients {
		if c.ClientID == id {
			return c, true
		}
	}
	return core.ClientInfo{}, false
}

// SubscriptionsPage pages f.subs, which the test gives in (client id,
// filter) order.
func (f *fakeBroker) SubscriptionsPage(q core.SubscriptionQuery) core.SubscriptionPage {
	p := core.SubscriptionPage{Total: -1}
	if q.Match == nil && q.IDPrefix == "" {
		p.Total = len(f.subs)
	}
	for _, sub := range f.subs {
		if !strings.HasPrefix(sub.ClientID, q.IDPrefix) || q.AfterClient != "" &&
			(sub.ClientID < q.AfterClient || sub.ClientID == q.AfterClient && sub.Filter <= q.AfterFilter) ||
			q.Match != nil && !q.Match(&sub) {
			continue
		}
		if len(p.Subscriptions) == q.Limit {
			last := p.Subscriptions[q.Limit-1]
			p.More, p.NextClient, p.NextFilter = true, last.ClientID, last.Filter
			break
		}
		p.Subscriptions = append(p.Subscriptions, sub)
	}
	return p
}

// RetainedPage pages f.retained in plain topic order (the tests' topics
// order the same way level by level).
func (f *fakeBroker) RetainedPage(q core.RetainedQuery) core.RetainedPage {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := core.RetainedPage{}
	for _, k := range sortedKeys(f.retained) {
		if !strings.HasPrefix(k, q.Prefix) || q.Filter != "" && !codec.Match([]byte(q.Filter), []byte(k)) {
			continue
		}
		p.Total++
		if q.After != "" && k <= q.After {
			continue
		}
		if len(p.Messages) == q.Limit {
			p.More, p.Next = true, p.Messages[q.Limit-1].Topic
			continue
		}
		p.Messages = append(p.Messages, f.retained[k])
		p.Stored = append(p.Stored, f.stored[k])
	}
	return p
}

func (f *fakeBroker) RetainedMessage(topic string) (*core.Message, time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.retained[topic]
	return m, f.stored[topic], ok
}
func (f *fakeBroker) QueuedBytes() int64 { return 1234 }
func (f *fakeBroker) DeleteRetained(topic string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.retained[topic]
	delete(f.retained, topic)
	return ok
}
func (f *fakeBroker) ConnectionsByListener() map[string]int { return map[string]int{"tcp": 2} }
func (f *fakeBroker) Disconnect(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, c := range f.clients {
		if c.ClientID == id && c.Connected {
			f.clients[i].Connected = false
			f.kicked = append(f.kicked, id)
			return true
		}
	}
	return false
}
func (f *fakeBroker) RemoveSession(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, c := range f.clients {
		if c.ClientID == id {
			f.clients = slices.Delete(f.clients, i, i+1)
			f.removed = append(f.removed, id)
			return true
		}
	}
	return false
}
func (f *fakeBroker) Publish(topic string, payload []byte, qos byte, retain bool) error {
	if err := core.ValidTopic(topic); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.published = append(f.published, fmt.Sprintf("%s %d %v %s", topic, qos, retain, payload))
	return nil
}

// fakeBans is an in-memory BanList.
type fakeBans struct {
	mu   sync.Mutex
	bans []Ban
}

func (b *fakeBans) Ban(kind, value, reason string, until time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bans = append(b.bans, Ban{Kind: kind, Value: value, Reason: reason, Until: until})
	return nil
}

func (b *fakeBans) Unban(kind, value string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, x := range b.bans {
		if x.Kind == kind && x.Value == value {
			b.bans = slices.Delete(b.bans, i, i+1)
			return true, nil
		}
	}
	return false, nil
}

func (b *fakeBans) Bans() []Ban {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.bans)
}

const (
	testPassword = "correct horse battery staple"
	viewerKey    = "viewer-key-0123456789"
	adminKey     = "admin-key-0123456789"
)

// testHash is the bcrypt hash of testPassword at the lowest cost, so the
// tests (each HTTP Basic request checks it) stay fast under -race.
var testHash = sync.OnceValue(func() []byte {
	h, err := bcrypt.GenerateFromPassword([]byte(testPassword), bcrypt.MinCost)
	if err != nil {
		panic(err)
	}
	return h
})

// newTestServer builds a Server over b with the admin user, a viewer and
// an admin API key; opt adjusts the options.
func newTestServer(t *testing.T, b Broker, opt func(*Options)) *Server {
	t.Helper()
	opts := Options{
		AdminPasswordHash: testHash(),
		APIKeys: []APIKey{
			{Name: "ro", SHA256: sha256.Sum256([]byte(viewerKey)), Role: RoleViewer},
			{Name: "ops", SHA256: sha256.Sum256([]byte(adminKey)), Role: RoleAdmin},
		},
		Listeners: []Listener{
			{Name: "tcp", Transport: "tcp", Address: "0.0.0.0:1883"},
			{Name: "ws", Transport: "ws", Address: "[::]:8083", Path: "/mqtt"},
			{Name: "wss", Transport: "wss", Address: "10.1.2.3:8084", Path: "/mqtt"},
		},
		Version: "test",
	}
	if opt != nil {
		opt(&opts)
	}
	s, err := New(b, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// req describes one request; call performs it against the handler.
type req struct {
	method, path, body string
	basic              [2]string // user, password
	header             map[string]string
	cookie             *http.Cookie
	remote             string // default 192.0.2.1:1234 (not loopback)
	host               string
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

// errCode returns the error.code of an error response.
func (r resp) errCode(t *testing.T) string {
	t.Helper()
	e, ok := r.json(t)["error"].(map[string]any)
	if !ok {
		t.Fatalf("body %s has no error object", r.body)
	}
	if int(e["status"].(float64)) != r.status {
		t.Errorf("error.status %v != HTTP status %d", e["status"], r.status)
	}
	return e["code"].(string)
}

func call(t *testing.T, h http.Handler, q req) resp {
	t.Helper()
	if q.method == "" {
		q.method = "GET"
	}
	var body io.Reader
	if q.body != "" {
		body = strings.NewReader(q.body)
	}
	r := httptest.NewRequest(q.method, q.path, body)
	r.RemoteAddr = "192.0.2.1:1234"
	if q.remote != "" {
		r.RemoteAddr = q.remote
	}
	if q.host != "" {
		r.Host = q.host
	}
	if q.body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if q.basic[0] != "" {
		r.SetBasicAuth(q.basic[0], q.basic[1])
	}
	for k, v := range q.header {
		r.Header.Set(k, v)
	}
	if q.cookie != nil {
		r.AddCookie(q.cookie)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return resp{status: w.Code, header: w.Header(), body: w.Body.Bytes()}
}

var admin = [2]string{"admin", testPassword}

func TestAuthMethodsAndRoles(t *testing.T) {
	h := newTestServer(t, &fakeBroker{}, nil).Handler()
	publish := `{"topic":"a/b","payload":"x"}`
	tests := []struct {
		name   string
		req    req
		status int
		code   string
	}{
		{"no credentials", req{path: "/api/v1/overview"}, 401, "unauthorized"},
		{"basic", req{path: "/api/v1/overview", basic: admin}, 200, ""},
		{"basic wrong password", req{path: "/api/v1/overview", basic: [2]string{"admin", "nope"}}, 401, "unauthorized"},
		{"basic wrong user", req{path: "/api/v1/overview", basic: [2]string{"root", testPassword}}, 401, "unauthorized"},
		{"basic may act", req{method: "POST", path: "/api/v1/publish", body: publish, basic: admin}, 200, ""},
		{"viewer key reads", req{path: "/api/v1/clients", header: map[string]string{"X-API-Key": viewerKey}}, 200, ""},
		{"viewer key may not act", req{method: "POST", path: "/api/v1/publish", body: publish, header: map[string]string{"X-API-Key": viewerKey}}, 403, "forbidden"},
		{"admin key acts", req{method: "POST", path: "/api/v1/publish", body: publish, header: map[string]string{"X-API-Key": adminKey}}, 200, ""},
		{"key as bearer", req{path: "/api/v1/overview", header: map[string]string{"Authorization": "Bearer " + viewerKey}}, 200, ""},
		{"unknown key", req{path: "/api/v1/overview", header: map[string]string{"X-API-Key": "guess"}}, 401, "unauthorized"},
		{"unknown bearer", req{path: "/api/v1/overview", header: map[string]string{"Authorization": "Bearer xmqt_guess"}}, 401, "unauthorized"},
		{"other scheme", req{path: "/api/v1/overview", header: map[string]string{"Authorization": "Digest x"}}, 401, "unauthorized"},
		{"anonymous loopback off", req{path: "/api/v1/overview", remote: "127.0.0.1:5000", host: "127.0.0.1:18083"}, 401, "unauthorized"},
		{"health needs nothing", req{path: "/healthz"}, 200, ""},
		{"metrics need nothing", req{path: "/metrics"}, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, h, tt.req)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d; body %s", r.status, tt.status, r.body)
			}
			if tt.code != "" {
				if got := r.errCode(t); got != tt.code {
					t.Errorf("error code %q, want %q", got, tt.code)
				}
			}
			if r.status == 401 && r.header.Get("WWW-Authenticate") != `Bearer realm="xmq"` {
				t.Errorf("401 with WWW-Authenticate %q, want a Bearer challenge (never Basic: browsers would prompt)", r.header.Get("WWW-Authenticate"))
			}
			if ct := r.header.Get("Content-Type"); strings.HasPrefix(tt.req.path, "/api/") && ct != "application/json; charset=utf-8" {
				t.Errorf("Content-Type %q, want JSON", ct)
			}
		})
	}
}

func TestAnonymousLoopback(t *testing.T) {
	h := newTestServer(t, &fakeBroker{}, func(o *Options) { o.AllowAnonymousLoopback = true }).Handler()
	tests := []struct {
		name, remote, host string
		status             int
	}{
		{"loopback v4", "127.0.0.1:5000", "127.0.0.1:18083", 200},
		{"loopback v6", "[::1]:5000", "[::1]:18083", 200},
		{"localhost", "127.0.0.1:5000", "localhost:18083", 200},
		{"remote peer", "192.0.2.7:5000", "127.0.0.1:18083", 401},
		{"DNS rebinding", "127.0.0.1:5000", "evil.example:18083", 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, h, req{path: "/api/v1/clients", remote: tt.remote, host: tt.host})
			if r.status != tt.status {
				t.Errorf("status %d, want %d; body %s", r.status, tt.status, r.body)
			}
		})
	}
	// Anonymous browsers are still protected from CSRF.
	local := req{method: "POST", path: "/api/v1/publish", body: `{"topic":"t"}`, remote: "127.0.0.1:5000", host: "127.0.0.1:18083"}
	if r := call(t, h, local); r.status != 403 || r.errCode(t) != "csrf" {
		t.Errorf("anonymous POST without CSRF token: %d %s, want 403 csrf", r.status, r.body)
	}
	me := call(t, h, req{path: "/api/v1/auth/me", remote: "127.0.0.1:5000", host: "127.0.0.1:18083"}).json(t)
	local.header = map[string]string{"X-CSRF-Token": me["csrf_token"].(string)}
	if r := call(t, h, local); r.status != 200 {
		t.Errorf("anonymous POST with CSRF token: %d %s, want 200", r.status, r.body)
	}
}

func TestSessionLoginCSRFLogout(t *testing.T) {
	b := &fakeBroker{}
	h := newTestServer(t, b, nil).Handler()

	if r := call(t, h, req{path: "/api/v1/auth/me"}); r.status != 200 || r.json(t)["authenticated"] != false {
		t.Fatalf("me without credentials: %d %s, want 200 authenticated false", r.status, r.body)
	}
	if r := call(t, h, req{method: "POST", path: "/api/v1/auth/login", body: `{"username":"admin","password":"wrong"}`}); r.status != 401 {
		t.Fatalf("login with a wrong password: %d, want 401", r.status)
	}
	if r := call(t, h, req{method: "POST", path: "/api/v1/auth/login", body: `{"username":"admin","password":"x"}`,
		header: map[string]string{"Origin": "https://evil.example"}}); r.status != 403 {
		t.Fatalf("cross-origin login: %d, want 403", r.status)
	}
	r := call(t, h, req{method: "POST", path: "/api/v1/auth/login", body: fmt.Sprintf(`{"username":"admin","password":%q}`, testPassword)})
	if r.status != 200 {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	var cookie *http.Cookie
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == sessionCookie {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("login cookie %+v: want an HttpOnly, SameSite=Strict %s cookie", cookie, sessionCookie)
	}
	csrf := r.json(t)["csrf_token"].(string)
	if csrf == "" {
		t.Fatal("login returned no csrf_token")
	}

	publish := func(hdr map[string]string) resp {
		return call(t, h, req{method: "POST", path: "/api/v1/publish", body: `{"topic":"x","payload":"1"}`, cookie: cookie, header: hdr})
	}
	if r := call(t, h, req{path: "/api/v1/clients", cookie: cookie}); r.status != 200 {
		t.Errorf("GET with the session cookie: %d", r.status)
	}
	tests := []struct {
		name   string
		header map[string]string
		status int
	}{
		{"no token", nil, 403},
		{"wrong token", map[string]string{"X-CSRF-Token": "nope"}, 403},
		{"right token, foreign origin", map[string]string{"X-CSRF-Token": csrf, "Origin": "https://evil.example"}, 403},
		{"right token", map[string]string{"X-CSRF-Token": csrf}, 200},
		{"right token, same origin", map[string]string{"X-CSRF-Token": csrf, "Origin": "http://example.com"}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := publish(tt.header)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			if tt.status == 403 && r.errCode(t) != "csrf" {
				t.Errorf("code %q, want csrf", r.errCode(t))
			}
		})
	}
	if len(b.published) != 2 {
		t.Errorf("broker got %d publishes, want the 2 with the right token: %q", len(b.published), b.published)
	}

	me := call(t, h, req{path: "/api/v1/auth/me", cookie: cookie}).json(t)
	if me["user"] != "admin" || me["role"] != "admin" || me["auth"] != "session" || me["csrf_token"] != csrf {
		t.Errorf("me = %v", me)
	}
	if r := call(t, h, req{method: "POST", path: "/api/v1/auth/logout", cookie: cookie}); r.status != 403 {
		t.Errorf("logout without CSRF token: %d, want 403", r.status)
	}
	if r := call(t, h, req{method: "POST", path: "/api/v1/auth/logout", cookie: cookie, header: map[string]string{"X-CSRF-Token": csrf}}); r.status != 200 {
		t.Errorf("logout: %d %s", r.status, r.body)
	}
	if r := call(t, h, req{path: "/api/v1/clients", cookie: cookie}); r.status != 401 {
		t.Errorf("cookie after logout: %d, want 401", r.status)
	}
}

func TestViewerLoginWithAPIKey(t *testing.T) {
	h := newTestServer(t, &fakeBroker{}, nil).Handler()
	r := call(t, h, req{method: "POST", path: "/api/v1/auth/login", body: fmt.Sprintf(`{"api_key":%q}`, viewerKey)})
	if r.status != 200 || r.json(t)["role"] != "viewer" {
		t.Fatalf("login with the viewer key: %d %s", r.status, r.body)
	}
}

func TestSessionExpires(t *testing.T) {
	s := newTestServer(t, &fakeBroker{}, func(o *Options) { o.SessionTTL = time.Hour })
	now := time.Now()
	s.auth.now = func() time.Time { return now }
	r := call(t, s.Handler(), req{method: "POST", path: "/api/v1/auth/login", body: fmt.Sprintf(`{"username":"admin","password":%q}`, testPassword)})
	cookie := (&http.Response{Header: r.header}).Cookies()[0]
	if r := call(t, s.Handler(), req{path: "/api/v1/clients", cookie: cookie}); r.status != 200 {
		t.Fatalf("fresh session: %d", r.status)
	}
	now = now.Add(time.Hour + time.Second)
	if r := call(t, s.Handler(), req{path: "/api/v1/clients", cookie: cookie}); r.status != 401 {
		t.Errorf("session past its TTL: %d, want 401", r.status)
	}
}

func TestBearerTokens(t *testing.T) {
	h := newTestServer(t, &fakeBroker{}, nil).Handler()
	issue := func(auth req, body string) resp {
		auth.method, auth.path, auth.body = "POST", "/api/v1/auth/tokens", body
		return call(t, h, auth)
	}
	r := issue(req{basic: admin}, `{"role":"viewer","ttl":"10m"}`)
	if r.status != 201 {
		t.Fatalf("issue: %d %s", r.status, r.body)
	}
	tok := r.json(t)["token"].(string)
	bearer := map[string]string{"Authorization": "Bearer " + tok}
	if r := call(t, h, req{path: "/api/v1/clients", header: bearer}); r.status != 200 {
		t.Errorf("GET with the token: %d", r.status)
	}
	if r := call(t, h, req{method: "POST", path: "/api/v1/publish", body: `{"topic":"x"}`, header: bearer}); r.status != 403 {
		t.Errorf("viewer token publishing: %d, want 403", r.status)
	}
	if r := issue(req{header: map[string]string{"X-API-Key": viewerKey}}, `{"role":"admin"}`); r.status != 403 {
		t.Errorf("viewer issuing an admin token: %d, want 403", r.status)
	}
	if r := issue(req{basic: admin}, `{"ttl":"10y"}`); r.status != 400 {
		t.Errorf("bad ttl: %d, want 400", r.status)
	}
	if r := issue(req{basic: admin}, `{"role":"root"}`); r.status != 400 {
		t.Errorf("bad role: %d, want 400", r.status)
	}
}

func TestLoginThrottle(t *testing.T) {
	h := newTestServer(t, &fakeBroker{}, nil).Handler()
	bad := req{path: "/api/v1/overview", basic: [2]string{"admin", "guess"}}
	for i := range maxFailures {
		if r := call(t, h, bad); r.status != 401 {
			t.Fatalf("failure %d: %d, want 401", i+1, r.status)
		}
	}
	good := req{path: "/api/v1/overview", basic: admin}
	if r := call(t, h, good); r.status != 429 || r.errCode(t) != "too_many_failures" {
		t.Errorf("after %d failures the right password gets %d %s, want 429", maxFailures, r.status, r.body)
	}
	good.remote = "192.0.2.99:1"
	if r := call(t, h, good); r.status != 200 {
		t.Errorf("another address: %d, want 200", r.status)
	}
}

func TestErrorsAreJSON(t *testing.T) {
	h := newTestServer(t, &fakeBroker{}, nil).Handler()
	tests := []struct {
		name   string
		req    req
		status int
		code   string
	}{
		{"unknown endpoint", req{path: "/api/v1/nope", basic: admin}, 404, "not_found"},
		{"unknown version", req{path: "/api/v2/clients"}, 404, "not_found"},
		{"wrong method", req{method: "PUT", path: "/api/v1/clients", basic: admin}, 405, "method_not_allowed"},
		{"bad JSON", req{method: "POST", path: "/api/v1/publish", body: `{"topic":`, basic: admin}, 400, "bad_request"},
		{"unknown field", req{method: "POST", path: "/api/v1/publish", body: `{"topik":"a"}`, basic: admin}, 400, "bad_request"},
		{"not JSON", req{method: "POST", path: "/api/v1/publish", basic: admin, header: map[string]string{"Content-Type": "text/plain"}}, 415, "unsupported_media_type"},
		{"bad topic", req{method: "POST", path: "/api/v1/publish", body: `{"topic":"a/#"}`, basic: admin}, 400, "bad_request"},
		{"bad qos", req{method: "POST", path: "/api/v1/publish", body: `{"topic":"a","qos":3}`, basic: admin}, 400, "bad_request"},
		{"both payloads", req{method: "POST", path: "/api/v1/publish", body: `{"topic":"a","payload":"x","payload_base64":"eA=="}`, basic: admin}, 400, "bad_request"},
		{"bad base64", req{method: "POST", path: "/api/v1/publish", body: `{"topic":"a","payload_base64":"!!"}`, basic: admin}, 400, "bad_request"},
		{"bad limit", req{path: "/api/v1/clients?limit=0", basic: admin}, 400, "bad_request"},
		{"huge limit", req{path: "/api/v1/clients?limit=100000", basic: admin}, 400, "bad_request"},
		{"bad offset", req{path: "/api/v1/clients?offset=-1", basic: admin}, 400, "bad_request"},
		{"bad sort", req{path: "/api/v1/clients?sort=password", basic: admin}, 400, "bad_request"},
		{"bad order", req{path: "/api/v1/clients?order=up", basic: admin}, 400, "bad_request"},
		{"bad version", req{path: "/api/v1/clients?protocol_version=9", basic: admin}, 400, "bad_request"},
		{"bad filter", req{path: "/api/v1/retained?filter=a/%23/b", basic: admin}, 400, "bad_request"},
		{"bad topic search", req{path: "/api/v1/subscriptions?topic=a/%2B", basic: admin}, 400, "bad_request"},
		{"unknown client", req{path: "/api/v1/clients/ghost", basic: admin}, 404, "not_found"},
		{"unknown client action", req{method: "POST", path: "/api/v1/clients/c1/explode", basic: admin}, 404, "not_found"},
		{"no retained", req{path: "/api/v1/retained/none", basic: admin}, 404, "not_found"},
		{"bans without auth module", req{path: "/api/v1/banned", basic: admin}, 501, "not_implemented"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, h, tt.req)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			if code := r.errCode(t); code != tt.code {
				t.Errorf("code %q, want %q", code, tt.code)
			}
			if tt.status == 405 && r.header.Get("Allow") != "GET" {
				t.Errorf("Allow %q, want GET", r.header.Get("Allow"))
			}
		})
	}
}

// manyClients is a broker with n clients: c000…, every third offline, every
// fourth over ws, usernames alice/bob alternating, protocol 4 or 5.
func manyClients(n int) *fakeBroker {
	b := &fakeBroker{}
	for i := range n {
		ci := core.ClientInfo{ClientID: fmt.Sprintf("c%03d", i), Username: []string{"alice", "bob"}[i%2],
			ProtocolVersion: byte(4 + i%2), Queued: n - i}
		if i%3 != 0 {
			ci.Connected, ci.Listener, ci.Remote = true, "tcp", fmt.Sprintf("192.0.2.%d:1000", i)
			ci.KeepAlive, ci.ConnectedAt = 30*time.Second, time.Unix(int64(1e9+i), 0)
			if i%4 == 0 {
				ci.Listener = "ws"
			}
		}
		b.clients = append(b.clients, ci)
	}
	return b
}

type clientPage struct {
	Total *int
	Limit int
	Items []clientJSON
	Next  string
}

func getClients(t *testing.T, h http.Handler, query string) clientPage {
	t.Helper()
	r := call(t, h, req{path: "/api/v1/clients?" + query, basic: admin})
	if r.status != 200 {
		t.Fatalf("GET clients?%s: %d %s", query, r.status, r.body)
	}
	var p clientPage
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func ids(p clientPage) []string {
	var out []string
	for _, c := range p.Items {
		out = append(out, c.ClientID)
	}
	return out
}

func TestClientsPagingFilters(t *testing.T) {
	h := newTestServer(t, manyClients(120), nil).Handler()
	tests := []struct {
		query   string
		total   int // -1: not counted
		len     int
		firstID string
	}{
		{query: "", total: 120, len: 50, firstID: "c000"},
		{query: "offset=0&limit=10", total: 120, len: 10, firstID: "c000"},
		{query: "client_id=c10", total: 10, len: 10, firstID: "c100"},
		{query: "username=alice&limit=1000", total: -1, len: 60, firstID: "c000"},
		{query: "listener=ws&limit=1000", total: -1, len: 20, firstID: "c004"},
		{query: "protocol_version=5&limit=1000", total: -1, len: 60, firstID: "c001"},
		{query: "connected=false&limit=1000", total: -1, len: 40, firstID: "c000"},
		{query: "connected=true&username=bob&client_id=c0", total: -1, len: 33, firstID: "c001"},
		{query: "q=192.0.2.11:", total: -1, len: 1, firstID: "c011"},
		{query: "sort=client_id&order=desc&limit=3", total: 120, len: 3, firstID: "c119"},
		{query: "order=desc&client_id=c00&limit=3", total: 10, len: 3, firstID: "c009"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			p := getClients(t, h, tt.query)
			if total := -1; p.Total != nil {
				total = *p.Total
				if total != tt.total || len(p.Items) != tt.len {
					t.Fatalf("total %d, %d items; want %d, %d: %v", total, len(p.Items), tt.total, tt.len, ids(p))
				}
			} else if tt.total != -1 || len(p.Items) != tt.len {
				t.Fatalf("no total, %d items; want %d, %d: %v", len(p.Items), tt.total, tt.len, ids(p))
			}
			if tt.len > 0 && p.Items[0].ClientID != tt.firstID {
				t.Errorf("first %s, want %s: %v", p.Items[0].ClientID, tt.firstID, ids(p))
			}
		})
	}
	// Following next covers the list exactly once, in order, either way.
	for _, order := range []string{"asc", "desc"} {
		var all []string
		q := "limit=7&order=" + order
		for range 100 {
			p := getClients(t, h, q)
			all = append(all, ids(p)...)
			if p.Next == "" {
				break
			}
			q = "limit=7&order=" + order + "&after=" + url.QueryEscape(p.Next)
		}
		want := ids(getClients(t, h, "limit=1000&order="+order))
		if !slices.Equal(all, want) || len(all) != 120 {
			t.Errorf("paging by 7 (%s) saw %d clients, want the 120 in order", order, len(all))
		}
	}
	c := getClients(t, h, "client_id=c004").Items[0]
	if c.Transport != "ws" || c.Protocol != "3.1.1" || c.KeepAlive != 30 || !c.Connected {
		t.Errorf("c004 = %+v: want transport ws, protocol 3.1.1, keepalive 30", c)
	}
	// What would read every session, or is not a cursor, is refused.
	for _, q := range []string{"sort=queued", "sort=username", "offset=50", "after=bm90IGEgY3Vyc29y", "after=!!", "after=" + encodeCursor('r', "c001")} {
		if r := call(t, h, req{path: "/api/v1/clients?" + q, basic: admin}); r.status != 400 || r.errCode(t) != "bad_request" {
			t.Errorf("clients?%s: %d %s, want 400", q, r.status, r.body)
		}
	}
}

func TestClientDetailAndDisconnect(t *testing.T) {
	b := manyClients(4)
	b.clients = append(b.clients, core.ClientInfo{ClientID: "dev/ice 1%", Connected: true, Listener: "tcp",
		Traffic: core.Traffic{MessagesIn: 7, MessagesOut: 9, BytesIn: 700, BytesOut: 900}, QueuedBytes: 64,
		Will:          &core.WillInfo{Topic: "wills/dev", QoS: 1, Size: 4, Delay: 30, Expiry: time.Minute},
		TLS:           &core.TLSInfo{Version: "TLS 1.3", CertSubject: "CN=dev", CertIdentity: "dev"},
		Subscriptions: []core.SubscriptionInfo{{ClientID: "dev/ice 1%", Filter: "a/#", QoS: 1}}})
	h := newTestServer(t, b, nil).Handler()
	esc := "/api/v1/clients/" + url.PathEscape("dev/ice 1%")
	r := call(t, h, req{path: esc, basic: admin})
	if r.status != 200 {
		t.Fatalf("detail: %d %s", r.status, r.body)
	}
	var c clientJSON
	_ = json.Unmarshal(r.body, &c)
	if c.ClientID != "dev/ice 1%" || len(c.Subscriptions) != 1 || c.Subscriptions[0].Filter != "a/#" {
		t.Errorf("detail = %+v", c)
	}
	if c.MessagesIn != 7 || c.MessagesOut != 9 || c.BytesIn != 700 || c.BytesOut != 900 || c.QueuedBytes != 64 ||
		c.Will == nil || *c.Will != (willJSON{Topic: "wills/dev", QoS: 1, Size: 4, DelaySeconds: 30, ExpirySeconds: 60}) ||
		c.TLS == nil || c.TLS.Version != "TLS 1.3" || c.TLS.CertIdentity != "dev" {
		t.Errorf("detail counters, will, TLS: %s", r.body)
	}
	if r := call(t, h, req{method: "POST", path: esc + "/disconnect", header: map[string]string{"X-API-Key": viewerKey}}); r.status != 403 {
		t.Errorf("viewer disconnect: %d, want 403", r.status)
	}
	if r := call(t, h, req{method: "POST", path: esc + "/disconnect", basic: admin}); r.status != 200 {
		t.Fatalf("disconnect: %d %s", r.status, r.body)
	}
	if !slices.Equal(b.kicked, []string{"dev/ice 1%"}) {
		t.Errorf("broker disconnected %q", b.kicked)
	}
	if r := call(t, h, req{method: "POST", path: esc + "/disconnect", basic: admin}); r.status != 409 || r.errCode(t) != "not_connected" {
		t.Errorf("disconnect again: %d %s, want 409 not_connected", r.status, r.body)
	}
	if r := call(t, h, req{method: "POST", path: "/api/v1/clients/ghost/disconnect", basic: admin}); r.status != 404 {
		t.Errorf("disconnect unknown: %d, want 404", r.status)
	}
	// DELETE removes the session, whoever owns it; admins only.
	if r := call(t, h, req{method: "DELETE", path: esc, header: map[string]string{"X-API-Key": viewerKey}}); r.status != 403 {
		t.Errorf("viewer remove: %d, want 403", r.status)
	}
	if r := call(t, h, req{method: "DELETE", path: esc, basic: admin}); r.status != 200 || !slices.Equal(b.removed, []string{"dev/ice 1%"}) {
		t.Errorf("remove: %d %s, removed %q", r.status, r.body, b.removed)
	}
	if r := call(t, h, req{method: "DELETE", path: esc, basic: admin}); r.status != 404 {
		t.Errorf("remove again: %d, want 404", r.status)
	}
}

func TestSubscriptionsSearch(t *testing.T) {
	b := &fakeBroker{subs: []core.SubscriptionInfo{
		{ClientID: "a", Filter: "$share/g/sensors/+/temp", QoS: 1},
		{ClientID: "a", Filter: "sensors/#"},
		{ClientID: "b", Filter: "other"},
		{ClientID: "b", Filter: "sensors/1/temp"},
	}}
	h := newTestServer(t, b, nil).Handler()
	list := func(query string) cursorPage[core.SubscriptionInfo] {
		t.Helper()
		r := call(t, h, req{path: "/api/v1/subscriptions?" + strings.ReplaceAll(query, "+", "%2B"), basic: admin})
		var p cursorPage[core.SubscriptionInfo]
		if err := json.Unmarshal(r.body, &p); err != nil || r.status != 200 {
			t.Fatalf("%s: %d %s", query, r.status, r.body)
		}
		return p
	}
	filters := func(p cursorPage[core.SubscriptionInfo]) []string {
		var got []string
		for _, s := range p.Items {
			got = append(got, s.Filter)
		}
		return got
	}
	tests := []struct {
		query string
		want  []string
	}{
		{"", []string{"$share/g/sensors/+/temp", "sensors/#", "other", "sensors/1/temp"}},
		{"filter=temp", []string{"$share/g/sensors/+/temp", "sensors/1/temp"}},
		{"topic=sensors/1/temp", []string{"$share/g/sensors/+/temp", "sensors/#", "sensors/1/temp"}},
		{"topic=sensors/2/hum", []string{"sensors/#"}},
		{"client_id=b", []string{"other", "sensors/1/temp"}},
		{"limit=1&after=" + encodeCursor('s', "a", "$share/g/sensors/+/temp"), []string{"sensors/#"}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			if got := filters(list(tt.query)); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	p := list("limit=3")
	if p.Total == nil || *p.Total != 4 || p.Next == "" {
		t.Fatalf("first page of 3: total %v, next %q", p.Total, p.Next)
	}
	if got := filters(list("limit=3&after=" + p.Next)); !slices.Equal(got, []string{"sensors/1/temp"}) {
		t.Errorf("second page: %q", got)
	}
	if p := list("filter=temp"); p.Total != nil {
		t.Errorf("a text search counted its matches: total %d", *p.Total)
	}
}

func TestRetained(t *testing.T) {
	props := &codec.Properties{ContentType: []byte("application/json"), ResponseTopic: []byte("replies/1"),
		CorrelationData: []byte{1, 2}, User: []codec.UserProperty{{Key: []byte("unit"), Value: []byte("C")}}}
	props.SetNum(codec.PropPayloadFormat, 1)
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	b := &fakeBroker{retained: map[string]*core.Message{
		"/lead/slash":        {Message: codec.Message{Topic: "/lead/slash", Payload: []byte("x")}},
		"bin":                {Message: codec.Message{Topic: "bin", Payload: []byte{0xff, 0x00}, QoS: 1}},
		"sensors/1":          {Message: codec.Message{Topic: "sensors/1", Payload: []byte(strings.Repeat("é", 100))}},
		"sensors/2":          {Message: codec.Message{Topic: "sensors/2", Payload: []byte("22.5"), Props: props, From: "dev-2"}},
		"$SYS/broker/uptime": {Message: codec.Message{Topic: "$SYS/broker/uptime", Payload: []byte("5 seconds")}},
	}, stored: map[string]time.Time{"sensors/2": at}}
	h := newTestServer(t, b, nil).Handler()
	list := func(q string) cursorPage[retainedJSON] {
		r := call(t, h, req{path: "/api/v1/retained?" + q, basic: admin})
		var p cursorPage[retainedJSON]
		if err := json.Unmarshal(r.body, &p); err != nil || r.status != 200 {
			t.Fatalf("list %s: %d %s", q, r.status, r.body)
		}
		return p
	}
	// The broker's $SYS topics are not clients' data: left out unless asked for.
	if p := list(""); *p.Total != 4 || len(p.Items) != 4 || p.Next != "" {
		t.Errorf("list all: total %d, %d items, next %q", *p.Total, len(p.Items), p.Next)
	}
	if p := list("prefix=$SYS/"); *p.Total != 1 || p.Items[0].Topic != "$SYS/broker/uptime" {
		t.Errorf("list $SYS/: %+v", p)
	}
	if p := list("prefix=sensors/2"); len(p.Items) != 1 || !p.Items[0].Stored.Equal(at) || p.Items[0].From != "dev-2" ||
		p.Items[0].ContentType != "application/json" || p.Items[0].UserProperties != nil {
		t.Errorf("list sensors/2: %+v, want stored_at %v, from dev-2, no properties but the content type in a list", p.Items, at)
	}
	p := list("filter=sensors/%2B")
	if *p.Total != 2 || p.Items[0].Topic != "sensors/1" {
		t.Fatalf("filter sensors/+: %+v", p)
	}
	if pv := *p.Items[0].Payload; !strings.HasSuffix(pv, "…") || len([]rune(pv)) > previewLen {
		t.Errorf("preview %q: want it cut at a rune boundary with an ellipsis", pv)
	}
	if p := list("prefix=bi"); *p.Total != 1 || p.Items[0].Payload != nil {
		t.Errorf("binary payload previewed as text: %+v", p.Items)
	}
	p = list("limit=3")
	if len(p.Items) != 3 || p.Next == "" {
		t.Fatalf("page of 3: %d items, next %q", len(p.Items), p.Next)
	}
	if p := list("limit=3&after=" + p.Next); len(p.Items) != 1 || p.Items[0].Topic != "sensors/2" || p.Next != "" {
		t.Errorf("second page: %+v", p)
	}
	for _, q := range []string{"q=bin", "offset=2", "filter=a/%23/b", "after=" + encodeCursor('c', "bin")} {
		if r := call(t, h, req{path: "/api/v1/retained?" + q, basic: admin}); r.status != 400 {
			t.Errorf("retained?%s: %d %s, want 400", q, r.status, r.body)
		}
	}
	r := call(t, h, req{path: "/api/v1/retained//lead/slash", basic: admin})
	if r.status != 200 || r.json(t)["payload"] != "x" || r.json(t)["payload_base64"] != "eA==" || r.json(t)["stored_at"] != nil {
		t.Errorf("read /lead/slash: %d %s", r.status, r.body)
	}
	r = call(t, h, req{path: "/api/v1/retained/sensors/2", basic: admin})
	var detail retainedJSON
	if err := json.Unmarshal(r.body, &detail); err != nil || r.status != 200 {
		t.Fatalf("read sensors/2: %d %s", r.status, r.body)
	}
	if !detail.Stored.Equal(at) || detail.ResponseTopic != "replies/1" || detail.CorrelationData != "AQI=" ||
		detail.PayloadFormat == nil || *detail.PayloadFormat != 1 || len(detail.UserProperties) != 1 || detail.UserProperties[0] != (userProperty{"unit", "C"}) {
		t.Errorf("sensors/2 detail: %s", r.body)
	}
	if r := call(t, h, req{method: "DELETE", path: "/api/v1/retained/sensors/2", header: map[string]string{"X-API-Key": viewerKey}}); r.status != 403 {
		t.Errorf("viewer delete: %d, want 403", r.status)
	}
	if r := call(t, h, req{method: "DELETE", path: "/api/v1/retained/sensors/2", basic: admin}); r.status != 200 {
		t.Errorf("delete: %d %s", r.status, r.body)
	}
	if r := call(t, h, req{method: "DELETE", path: "/api/v1/retained/sensors/2", basic: admin}); r.status != 404 {
		t.Errorf("delete again: %d, want 404", r.status)
	}
}

func TestBannedList(t *testing.T) {
	bans := &fakeBans{}
	h := newTestServer(t, &fakeBroker{}, func(o *Options) { o.Bans = bans }).Handler()
	add := func(body string) resp {
		return call(t, h, req{method: "POST", path: "/api/v1/banned", body: body, basic: admin})
	}
	if r := add(`{"kind":"ip","value":"203.0.113.0/24","reason":"scanner","duration":"1h"}`); r.status != 201 {
		t.Fatalf("ban: %d %s", r.status, r.body)
	}
	if r := add(`{"kind":"client_id","value":"a/b"}`); r.status != 201 {
		t.Fatalf("ban: %d %s", r.status, r.body)
	}
	for _, bad := range []string{`{"kind":"mac","value":"x"}`, `{"kind":"ip","value":"300.1.1.1"}`, `{"kind":"username"}`,
		`{"kind":"username","value":"x","duration":"-1h"}`} {
		if r := add(bad); r.status != 400 {
			t.Errorf("ban %s: %d, want 400", bad, r.status)
		}
	}
	r := call(t, h, req{path: "/api/v1/banned", header: map[string]string{"X-API-Key": viewerKey}})
	var p paged[Ban]
	if err := json.Unmarshal(r.body, &p); err != nil || p.Total != 2 || p.Items[0].Kind != "client_id" {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	if until := p.Items[1].Until; until.Before(time.Now().Add(59*time.Minute)) || until.After(time.Now().Add(time.Hour)) {
		t.Errorf("1h ban until %v", until)
	}
	if r := call(t, h, req{method: "DELETE", path: "/api/v1/banned/ip/203.0.113.0/24", basic: admin}); r.status != 200 {
		t.Errorf("unban: %d %s", r.status, r.body)
	}
	if r := call(t, h, req{method: "DELETE", path: "/api/v1/banned/client_id/a/b", basic: admin}); r.status != 200 {
		t.Errorf("unban a/b: %d %s", r.status, r.body)
	}
	if r := call(t, h, req{method: "DELETE", path: "/api/v1/banned/ip/203.0.113.0/24", basic: admin}); r.status != 404 {
		t.Errorf("unban again: %d, want 404", r.status)
	}
	// A flapping ban (set by the broker) is lifted by its listed kind and value.
	bans.bans = append(bans.bans, Ban{Kind: "client_id+username", Value: "sensor-1@bob", Reason: "flapping"})
	if r := call(t, h, req{method: "DELETE", path: "/api/v1/banned/client_id+username/sensor-1@bob", basic: admin}); r.status != 200 {
		t.Errorf("unban a flapping ban: %d %s", r.status, r.body)
	}
	if r := add(`{"kind":"client_id+username","value":"sensor-1@bob"}`); r.status != 400 {
		t.Errorf("setting a flapping ban by hand: %d, want 400", r.status)
	}
}

func TestPublish(t *testing.T) {
	b := &fakeBroker{}
	h := newTestServer(t, b, nil).Handler()
	for _, body := range []string{
		`{"topic":"a/b","payload":"hi","qos":1,"retain":true}`,
		`{"topic":"bin","payload_base64":"AAE="}`,
		`{"topic":"empty"}`,
	} {
		if r := call(t, h, req{method: "POST", path: "/api/v1/publish", body: body, basic: admin}); r.status != 200 {
			t.Errorf("publish %s: %d %s", body, r.status, r.body)
		}
	}
	want := []string{"a/b 1 true hi", "bin 0 false \x00\x01", "empty 0 false "}
	if !slices.Equal(b.published, want) {
		t.Errorf("published %q, want %q", b.published, want)
	}
}

func TestOverview(t *testing.T) {
	end := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	h := newTestServer(t, &fakeBroker{}, func(o *Options) {
		o.Listeners[2].CertNotAfter = func() time.Time { return end }
		o.Listeners[2].HandshakeFailures = func() map[string]int64 { return map[string]int64{"not_tls": 4, "timeout": 0} }
		o.Store = func() StoreUsage { return StoreUsage{DiskBytes: 1 << 20, BudgetBytes: 8 << 20} }
	}).Handler()
	r := call(t, h, req{path: "/api/v1/overview", basic: admin, host: "broker.example:18083"})
	var ov struct {
		Version   string
		Uptime    int64 `json:"uptime_seconds"`
		Listeners []listenerJSON
		Totals    totalsJSON
		History   []point
		Step      int `json:"history_step"`
		Span      int `json:"history_seconds"`
		Node      nodeJSON
	}
	if err := json.Unmarshal(r.body, &ov); err != nil {
		t.Fatal(err)
	}
	if ov.Step != 1 || ov.Span != 3600 {
		t.Errorf("history step %d over %d s, want 1 over an hour", ov.Step, ov.Span)
	}
	// The node card: what the process uses, and the store against its budget.
	n := ov.Node
	if n.Goroutines == 0 || n.CPUs == 0 || n.HeapBytes == 0 || n.StoreBytes == nil || *n.StoreBytes != 1<<20 || n.StoreBudget != 8<<20 {
		t.Errorf("node %+v", n)
	}
	if runtime.GOOS == "linux" && (n.RSSBytes == nil || n.OpenFiles == nil || n.MaxFiles == nil || *n.OpenFiles > *n.MaxFiles || n.CPUSeconds == nil) {
		t.Errorf("node on Linux: rss %v, files %v of %v, cpu %v", n.RSSBytes, n.OpenFiles, n.MaxFiles, n.CPUSeconds)
	}
	time.Sleep(250 * time.Millisecond)
	var again struct{ Node nodeJSON }
	if err := json.Unmarshal(call(t, h, req{path: "/api/v1/overview?history=0", basic: admin}).body, &again); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "linux" && (again.Node.CPUPercent == nil || *again.Node.CPUPercent < 0) {
		t.Errorf("second overview: cpu percent %v, want a rate since the first", again.Node.CPUPercent)
	}
	wss := ov.Listeners[2]
	if !wss.CertNotAfter.Equal(end) || !maps.Equal(wss.HandshakeFailures, map[string]int64{"not_tls": 4}) {
		t.Errorf("wss listener: certificate until %v, failures %v", wss.CertNotAfter, wss.HandshakeFailures)
	}
	for _, q := range []string{"history=721", "history=-1", "step=0", "step=3601", "history=721&step=5", "history=360&step=11"} {
		if r := call(t, h, req{path: "/api/v1/overview?" + q, basic: admin}); r.status != 400 {
			t.Errorf("overview?%s: %d, want 400", q, r.status)
		}
	}
	if r := call(t, h, req{path: "/api/v1/overview?history=240&step=15", basic: admin}); r.status != 200 {
		t.Errorf("an hour in 15 s steps: %d %s", r.status, r.body)
	}
	if ov.Version != "test" || ov.Uptime < 3599 || ov.Totals.Connected != 2 || ov.Totals.Dropped != 1 || ov.Totals.Disconnects["normal"] != 3 {
		t.Errorf("overview = %+v", ov)
	}
	urls := map[string]string{}
	for _, l := range ov.Listeners {
		urls[l.Name] = l.URL
	}
	want := map[string]string{"tcp": "", "ws": "ws://broker.example:8083/mqtt", "wss": "wss://10.1.2.3:8084/mqtt"}
	if !maps.Equal(urls, want) {
		t.Errorf("listener URLs %v, want %v", urls, want)
	}
	if ov.Listeners[0].Connections != 2 {
		t.Errorf("tcp connections %d, want 2", ov.Listeners[0].Connections)
	}
}

func TestHealthAndReady(t *testing.T) {
	var notReady error = fmt.Errorf("store not open")
	var mu sync.Mutex
	h := newTestServer(t, &fakeBroker{}, func(o *Options) {
		o.Ready = func() error { mu.Lock(); defer mu.Unlock(); return notReady }
	}).Handler()
	if r := call(t, h, req{path: "/healthz"}); r.status != 200 || r.json(t)["status"] != "ok" {
		t.Errorf("healthz: %d %s", r.status, r.body)
	}
	if r := call(t, h, req{path: "/readyz"}); r.status != 503 || r.json(t)["reason"] != "store not open" {
		t.Errorf("readyz not ready: %d %s", r.status, r.body)
	}
	mu.Lock()
	notReady = nil
	mu.Unlock()
	if r := call(t, h, req{path: "/readyz"}); r.status != 200 {
		t.Errorf("readyz ready: %d %s", r.status, r.body)
	}
}

func TestStaticFiles(t *testing.T) {
	h := newTestServer(t, &fakeBroker{}, nil).Handler()
	for _, tt := range []struct{ path, ctype, contains string }{
		{"/", "text/html", `<script type="module" src="/static/app.js">`},
		{"/static/app.js", "text/javascript", "import { MQTTClient }"},
		{"/static/mqtt.js", "text/javascript", "export class MQTTClient"},
		{"/static/app.css", "text/css", ":root"},
		{"/favicon.ico", "image/svg+xml", "<svg"},
	} {
		r := call(t, h, req{path: tt.path})
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), tt.ctype) || !strings.Contains(string(r.body), tt.contains) {
			t.Errorf("GET %s: %d %s", tt.path, r.status, r.header.Get("Content-Type"))
		}
		if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: CSP %q", tt.path, csp)
		}
	}
	if r := call(t, h, req{path: "/nope"}); r.status != 404 {
		t.Errorf("GET /nope: %d", r.status)
	}
}

func TestAdminPassword(t *testing.T) {
	dir := t.TempDir()
	// The environment wins, then the configuration.
	h, src, err := AdminPassword("from-env", string(testHash()), dir, nil)
	if err != nil || src != PasswordFromEnv || !checkHash(h, "from-env") {
		t.Errorf("env: %s %v", src, err)
	}
	h, src, err = AdminPassword("", string(testHash()), dir, nil)
	if err != nil || src != PasswordFromConfig || !checkHash(h, testPassword) {
		t.Errorf("config: %s %v", src, err)
	}
	if _, _, err := AdminPassword("", "plaintext", dir, nil); err == nil {
		t.Error("a config hash that is not bcrypt was accepted")
	}
	// Neither: generated once, stored as a hash, reused.
	h1, src, err := AdminPassword("", "", dir, nil)
	if err != nil || src != PasswordGenerated {
		t.Fatalf("generate: %s %v", src, err)
	}
	file := filepath.Join(dir, AdminPasswordFile)
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("hash file: %v %v", fi, err)
	}
	h2, src, err := AdminPassword("", "", dir, nil)
	if err != nil || src != PasswordFromDataDir || string(h1) != string(h2) {
		t.Errorf("second start: %s %v, same hash %v", src, err, string(h1) == string(h2))
	}
	// No data directory: memory only.
	mem := t.TempDir()
	if _, src, err := AdminPassword("", "", "", nil); err != nil || src != PasswordGeneratedTemp {
		t.Errorf("memory only: %s %v", src, err)
	}
	if entries, _ := os.ReadDir(mem); len(entries) != 0 {
		t.Errorf("memory-only run wrote %v", entries)
	}
}

func checkHash(h []byte, pw string) bool {
	a := newAuthenticator(&Options{AdminUser: "u", AdminPasswordHash: h})
	_, _, ok := a.checkPassword("u", pw)
	return ok
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{
		{SessionTTL: time.Second},
		{AdminPasswordHash: []byte("nope")},
		{APIKeys: []APIKey{{Name: "", Role: RoleAdmin}}},
		{APIKeys: []APIKey{{Name: "a", Role: RoleAdmin}, {Name: "a", Role: RoleViewer}}},
		{APIKeys: []APIKey{{Name: "a", Role: "root"}}},
	} {
		if _, err := New(&fakeBroker{}, o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
	if _, err := ParseAPIKeyHash("abc"); err == nil {
		t.Error("ParseAPIKeyHash accepted a short hash")
	}
	key, sum := NewAPIKey()
	got, err := ParseAPIKeyHash("sha256:" + sum)
	if err != nil || got != sha256.Sum256([]byte(key)) {
		t.Errorf("NewAPIKey/ParseAPIKeyHash round trip: %v", err)
	}
}

func TestServeAndShutdown(t *testing.T) {
	s := newTestServer(t, &fakeBroker{}, func(o *Options) { o.Address = "127.0.0.1:0" })
	l, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	res, err := http.Get("http://" + l.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("healthz over TCP: %d", res.StatusCode)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve after Shutdown: %v", err)
	}
}

// TestDashboardMQTTLogin: /auth/mqtt gives each principal an MQTT login
// with its own role, which the same MQTTTokens accept.
func TestDashboardMQTTLogin(t *testing.T) {
	tokens := NewMQTTTokens()
	s := newTestServer(t, &fakeBroker{}, func(o *Options) { o.MQTTTokens = tokens })
	h := s.Handler()
	if r := call(t, h, req{path: "/api/v1/auth/mqtt"}); r.status != 401 {
		t.Errorf("without credentials: %d", r.status)
	}
	for _, tt := range []struct {
		name string
		q    req
		user string
		role Role
	}{
		{"viewer key", req{path: "/api/v1/auth/mqtt", header: map[string]string{"X-API-Key": viewerKey}}, "$dashboard:viewer:key:ro", RoleViewer},
		{"admin", req{path: "/api/v1/auth/mqtt", basic: [2]string{"admin", testPassword}}, "$dashboard:admin:admin", RoleAdmin},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, h, tt.q)
			if r.status != 200 {
				t.Fatalf("%d %s", r.status, r.body)
			}
			if r.header.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", r.header.Get("Cache-Control"))
			}
			m := r.json(t)
			user, pass := m["username"].(string), m["password"].(string)
			if user != tt.user || m["role"] != string(tt.role) {
				t.Errorf("user %q role %v, want %q %s", user, m["role"], tt.user, tt.role)
			}
			exp, err := time.Parse(time.RFC3339, m["expires_at"].(string))
			if err != nil || time.Until(exp) > DashboardMQTTTTL || time.Until(exp) < DashboardMQTTTTL-5*time.Second {
				t.Errorf("expires_at %v (%v), want in %v", m["expires_at"], err, DashboardMQTTTTL)
			}
			if role, err := tokens.Check(user, []byte(pass)); err != nil || role != tt.role {
				t.Errorf("Check: %v %v", role, err)
			}
		})
	}
}
