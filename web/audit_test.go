package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/xmq-io/xmq/core"
)

// auditServer is a test server whose log is observed, with a banned list,
// bridges and a client c1 to act on.
func auditServer(t *testing.T) (*Server, *observer.ObservedLogs) {
	t.Helper()
	obs, logs := observer.New(zap.InfoLevel)
	b := &fakeBroker{clients: []core.ClientInfo{{ClientID: "c1", Connected: true}, {ClientID: "c2"}}}
	s := newTestServer(t, b, func(o *Options) {
		o.Log = zap.New(obs)
		o.Bans = &fakeBans{}
		o.Bridges = &stubBridges{}
		o.Reload = func() (Reloaded, error) { return Reloaded{}, nil }
	})
	return s, logs
}

// TestAuditRecordsActions: each kind of admin action is recorded once,
// with its principal, target and status, refusals included; reads and
// unauthenticated requests are not.
func TestAuditRecordsActions(t *testing.T) {
	s, logs := auditServer(t)
	h := s.Handler()
	adminHdr := map[string]string{"X-API-Key": adminKey}
	viewerHdr := map[string]string{"X-API-Key": viewerKey}
	const secretPayload = "s3cret-payload-do-not-log"
	steps := []struct {
		q                                   req
		status                              int
		action, user, auth, target, outcome string
	}{
		{req{method: "POST", path: "/api/v1/auth/login", body: fmt.Sprintf(`{"username":"admin","password":%q}`, testPassword)},
			200, "login", "admin", "password", "", "ok"},
		{req{method: "POST", path: "/api/v1/auth/login", body: `{"username":"admin","password":"wrong-password-xyz"}`},
			401, "login.failed", "admin", "password", "", "refused"},
		{req{method: "POST", path: "/api/v1/auth/login", body: `{"api_key":"wrong-key-xyz"}`},
			401, "login.failed", "", "api_key", "", "refused"},
		{req{method: "POST", path: "/api/v1/clients/c1/disconnect", header: adminHdr},
			200, "client.disconnect", "key:ops", "api_key", "c1", "ok"},
		{req{method: "DELETE", path: "/api/v1/clients/c2", basic: admin},
			200, "session.delete", "admin", "basic", "c2", "ok"},
		{req{method: "DELETE", path: "/api/v1/clients/nobody", basic: admin},
			404, "session.delete", "admin", "basic", "nobody", "failed"},
		{req{method: "POST", path: "/api/v1/publish", body: `{"topic":"a/b","payload":"` + secretPayload + `"}`, header: adminHdr},
			200, "publish", "key:ops", "api_key", "a/b", "ok"},
		{req{method: "POST", path: "/api/v1/publish", body: `{"topic":"a/b","payload":"` + secretPayload + `"}`, header: viewerHdr},
			403, "publish", "key:ro", "api_key", "", "refused"},
		{req{method: "POST", path: "/api/v1/banned", body: `{"kind":"client_id","value":"bad","reason":"spam"}`, header: adminHdr},
			201, "ban.add", "key:ops", "api_key", "client_id/bad", "ok"},
		{req{method: "DELETE", path: "/api/v1/banned/client_id/bad", header: adminHdr},
			200, "ban.delete", "key:ops", "api_key", "client_id/bad", "ok"},
		{req{method: "POST", path: "/api/v1/bridges/b/start", header: adminHdr},
			200, "bridge.start", "key:ops", "api_key", "b", "ok"},
		{req{method: "POST", path: "/api/v1/bridges/b/stop", header: viewerHdr},
			403, "bridge.stop", "key:ro", "api_key", "b", "refused"},
		{req{method: "POST", path: "/api/v1/reload", header: adminHdr},
			200, "reload", "key:ops", "api_key", "", "ok"},
		{req{method: "POST", path: "/api/v1/traces/t1/stop", header: adminHdr}, // no trace directory: 501
			501, "trace.stop", "key:ops", "api_key", "t1", "failed"},
		{req{method: "POST", path: "/api/v1/auth/tokens", body: `{"role":"viewer"}`, header: viewerHdr},
			201, "token.issue", "key:ro", "api_key", "", "ok"},
		{req{method: "POST", path: "/api/v1/clients/c1/disconnect", remote: "127.0.0.1:5000", host: "127.0.0.1:18083"}, // anonymous loopback is off
			401, "", "", "", "", ""},
		{req{method: "POST", path: "/api/v1/reload", header: map[string]string{"X-API-Key": "wrong"}},
			401, "", "", "", "", ""},
		{req{path: "/api/v1/clients", header: adminHdr},
			200, "", "", "", "", ""},
	}
	for _, st := range steps {
		before := len(s.audit.latest(auditEntries))
		r := call(t, h, st.q)
		if r.status != st.status {
			t.Fatalf("%s %s: %d %s, want %d", st.q.method, st.q.path, r.status, r.body, st.status)
		}
		got := s.audit.latest(auditEntries)
		if st.action == "" {
			if len(got) != before {
				t.Errorf("%s %s (%d) recorded %+v, want nothing", st.q.method, st.q.path, r.status, got[0])
			}
			continue
		}
		if len(got) != before+1 {
			t.Fatalf("%s %s: %d entries, want %d", st.q.method, st.q.path, len(got), before+1)
		}
		e := got[0]
		if e.Action != st.action || e.User != st.user || e.Auth != st.auth || e.Target != st.target ||
			e.Status != st.status || e.Outcome != st.outcome || e.Remote != "192.0.2.1" || e.Time.IsZero() {
			t.Errorf("%s %s recorded %+v, want %s by %q (%s) on %q: %d %s from 192.0.2.1",
				st.q.method, st.q.path, e, st.action, st.user, st.auth, st.target, st.status, st.outcome)
		}
	}

	// Each entry is one "web.audit" log line too; none holds a secret.
	lines := logs.FilterLoggerName("audit").All()
	if n := len(s.audit.latest(auditEntries)); len(lines) != n {
		t.Errorf("%d audit log lines, %d entries", len(lines), n)
	}
	entries, _ := json.Marshal(s.audit.latest(auditEntries))
	all := string(entries)
	for _, l := range logs.All() { // every line of the server's log, not only the audit's
		all += l.Message + fmt.Sprint(l.ContextMap())
	}
	for _, secret := range []string{testPassword, "wrong-password-xyz", "wrong-key-xyz", adminKey, viewerKey, secretPayload} {
		if strings.Contains(all, secret) {
			t.Errorf("%q appears in the audit entries or the log", secret)
		}
	}
}

// TestAuditEndpoint: GET /audit is for admins, newest first, with ?limit.
func TestAuditEndpoint(t *testing.T) {
	s, _ := auditServer(t)
	h := s.Handler()
	for i := range 3 {
		call(t, h, req{method: "POST", path: "/api/v1/publish", body: fmt.Sprintf(`{"topic":"t/%d"}`, i), basic: admin})
	}
	if r := call(t, h, req{path: "/api/v1/audit", header: map[string]string{"X-API-Key": viewerKey}}); r.status != 403 {
		t.Fatalf("a viewer reads the audit log: %d %s", r.status, r.body)
	}
	if r := call(t, h, req{path: "/api/v1/audit"}); r.status != 401 {
		t.Fatalf("no credentials: %d", r.status)
	}
	if r := call(t, h, req{path: "/api/v1/audit?limit=0", basic: admin}); r.status != 400 {
		t.Fatalf("limit=0: %d", r.status)
	}
	r := call(t, h, req{path: "/api/v1/audit?limit=2", basic: admin})
	if r.status != 200 {
		t.Fatalf("GET /audit: %d %s", r.status, r.body)
	}
	var got struct {
		Items []AuditEntry `json:"items"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Items) != 2 || got.Items[0].Target != "t/2" || got.Items[1].Target != "t/1" {
		t.Fatalf("GET /audit?limit=2: %+v, want t/2 then t/1", got.Items)
	}
}

// TestAuditRingBounded: the ring keeps the newest entries only.
func TestAuditRingBounded(t *testing.T) {
	l := newAuditLog(3, zap.NewNop())
	for i := range 7 {
		l.add(AuditEntry{Action: "publish", Target: fmt.Sprint(i)})
	}
	got := l.latest(10)
	if len(got) != 3 || got[0].Target != "6" || got[1].Target != "5" || got[2].Target != "4" {
		t.Fatalf("latest: %+v, want 6, 5, 4", got)
	}
	if got := newAuditLog(3, zap.NewNop()).latest(10); len(got) != 0 {
		t.Fatalf("empty ring: %+v", got)
	}
	long := strings.Repeat("é", maxAuditTarget)
	s, _ := auditServer(t)
	call(t, s.Handler(), req{method: "DELETE", path: "/api/v1/clients/" + long, basic: admin})
	if e := s.audit.latest(1)[0]; len(e.Target) > maxAuditTarget+len("…") || !strings.HasSuffix(e.Target, "…") {
		t.Fatalf("a long target is kept as %d bytes", len(e.Target))
	}
}

// TestAuditSessionCSRF: a dashboard session's request without its CSRF
// token is refused and recorded as the session's user.
func TestAuditSessionCSRF(t *testing.T) {
	s, _ := auditServer(t)
	h := s.Handler()
	r := call(t, h, req{method: "POST", path: "/api/v1/auth/login", body: fmt.Sprintf(`{"username":"admin","password":%q}`, testPassword)})
	var cookie *http.Cookie
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == sessionCookie {
			cookie = c
		}
	}
	if r.status != 200 || cookie == nil {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	if r := call(t, h, req{method: "POST", path: "/api/v1/reload", cookie: cookie}); r.status != 403 {
		t.Fatalf("no CSRF token: %d %s", r.status, r.body)
	}
	e := s.audit.latest(1)[0]
	if e.Action != "reload" || e.User != "admin" || e.Auth != methodSession || e.Status != 403 || e.Outcome != "refused" {
		t.Fatalf("recorded %+v, want reload by admin (session) refused with 403", e)
	}
}
