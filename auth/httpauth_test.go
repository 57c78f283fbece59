package auth

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log"
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

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/xmq-io/xmq/certs/certstest"
	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// bufferLog is a logger writing text lines to buf, for tests that read
// what auth logged.
func bufferLog(buf *bytes.Buffer) *zap.Logger {
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(buf)), zap.DebugLevel))
}

// service is an HTTP auth service for tests, on loopback. Its answer
// function may block: it gets the request, whose context ends when the
// broker gives up.
type service struct {
	*httptest.Server
	requests atomic.Int64 // requests received
	inflight atomic.Int64 // requests being answered now
	peak     atomic.Int64 // most requests answered at once

	mu     sync.Mutex
	bodies []map[string]string
}

const (
	allowJSON  = `{"result":"allow","is_superuser":false}`
	denyJSON   = `{"result":"deny"}`
	ignoreJSON = `{"result":"ignore"}`
)

func newService(t testing.TB, answer func(r *http.Request, req map[string]string) (int, string)) *service {
	t.Helper()
	s := &service{}
	s.Server = httptest.NewServer(s.handler(answer))
	t.Cleanup(s.Close)
	return s
}

func (s *service) handler(answer func(r *http.Request, req map[string]string) (int, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		n := s.inflight.Add(1)
		defer s.inflight.Add(-1)
		for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
		}
		var req map[string]string
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" ||
			json.NewDecoder(r.Body).Decode(&req) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.bodies = append(s.bodies, req)
		s.mu.Unlock()
		status, body := answer(r, req)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// last returns the last request's body.
func (s *service) last() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bodies) == 0 {
		return nil
	}
	return s.bodies[len(s.bodies)-1]
}

// byUser answers by user name: allowed, denied, or else ignore.
func byUser(allowed, denied []string) func(*http.Request, map[string]string) (int, string) {
	return func(_ *http.Request, req map[string]string) (int, string) {
		for _, u := range allowed {
			if req["username"] == u {
				return 200, allowJSON
			}
		}
		for _, u := range denied {
			if req["username"] == u {
				return 200, denyJSON
			}
		}
		return 200, ignoreJSON
	}
}

// hang answers nothing until the broker gives up or release is closed
// (at most 20 s, so a broker that never gives up fails a test rather than
// hanging it), then ignore.
func hang(release <-chan struct{}) func(*http.Request, map[string]string) (int, string) {
	return func(r *http.Request, _ map[string]string) (int, string) {
		select {
		case <-r.Context().Done():
		case <-release:
		case <-time.After(20 * time.Second):
		}
		return 200, ignoreJSON
	}
}

// TestHTTPConnect: what the service's answers do to a CONNECT, what it is
// sent, and what it is never asked.
func TestHTTPConnect(t *testing.T) {
	svc := newService(t, byUser([]string{"svc-allow"}, []string{"svc-deny", "certbad"}))
	file := writeUsers(t, 4, map[string]string{"alice": "wonderland"})
	opts := func(pw string) Options {
		return Options{PasswordFile: pw, CertListeners: []string{"mtls"},
			HTTP: HTTPOptions{URL: svc.URL + "/mqtt/auth", Timeout: 5 * time.Second}}
	}
	withFile, noFile := newAuth(t, opts(file)), newAuth(t, opts(""))
	local, far := tcpAddr("127.0.0.1:5000"), tcpAddr("198.51.100.7:5000")
	for _, tt := range []struct {
		name           string
		a              *Auth
		user, password string
		remote         net.Addr
		listener       string
		want           codec.ReasonCode
		asked          bool
	}{
		{"allowed", withFile, "svc-allow", "anything", far, "tcp", codec.Success, true},
		{"denied", withFile, "svc-deny", "x", far, "tcp", codec.BadUserNameOrPassword, true},
		{"ignored: the file admits", withFile, "alice", "wonderland", far, "tcp", codec.Success, true},
		{"ignored: the file refuses a wrong password", withFile, "alice", "wonderlant", far, "tcp", codec.BadUserNameOrPassword, true},
		{"ignored: not in the file", withFile, "mallory", "x", far, "tcp", codec.BadUserNameOrPassword, true},
		{"ignored on a certificate listener: the certificate admits", withFile, "certuser", "", far, "mtls", codec.Success, true},
		{"denied on a certificate listener", withFile, "certbad", "", far, "mtls", codec.BadUserNameOrPassword, true},
		{"anonymous, local: never asked", withFile, "", "", local, "tcp", codec.Success, false},
		{"anonymous, far: never asked", withFile, "", "", far, "tcp", codec.NotAuthorized, false},
		{"no password file: allowed", noFile, "svc-allow", "x", far, "tcp", codec.Success, true},
		{"no password file: ignored, nobody vouches for the name", noFile, "alice", "wonderland", local, "tcp", codec.BadUserNameOrPassword, true},
		{"a password that is not UTF-8: never asked, the file decides", withFile, "svc-allow", "\xff\xfe", far, "tcp", codec.BadUserNameOrPassword, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := svc.requests.Load()
			err := tt.a.Authenticate("dev-1", tt.user, []byte(tt.password), tt.remote, tt.listener, "")
			if got := reasonOf(err); got != tt.want {
				t.Errorf("%v (%v), want %v", got, err, tt.want)
			}
			if asked := svc.requests.Load() > before; asked != tt.asked {
				t.Errorf("service asked: %v, want %v", asked, tt.asked)
			}
			if err != nil && strings.Contains(err.Error(), tt.password) && tt.password != "" {
				t.Errorf("refusal %q holds the password", err)
			}
		})
	}

	// What the service is sent.
	if err := withFile.Authenticate("dev-7", "svc-allow", []byte("s3cret pass"), far, "tcp", ""); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"clientid": "dev-7", "username": "svc-allow", "password": "s3cret pass", "peerhost": "198.51.100.7", "listener": "tcp"}
	if got := svc.last(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("request body %v, want %v", got, want)
	}
	if err := withFile.Authenticate("dev-8", "certuser", nil, far, "mtls", ""); err != nil {
		t.Fatal(err)
	}
	if got := svc.last(); got["cert_identity"] != "certuser" || got["listener"] != "mtls" {
		t.Errorf("certificate listener: request body %v, want cert_identity certuser", got)
	}
	st := withFile.Stats().HTTP
	if st == nil || st.Connect.Allow != 2 || st.Connect.Deny != 2 || st.Connect.Ignore != 5 || st.Connect.Errors != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestHTTPDenialsCountAsFailures: the service's denials lock a source out
// like wrong passwords, and a locked-out source is not sent to the
// service at all.
func TestHTTPDenialsCountAsFailures(t *testing.T) {
	svc := newService(t, byUser([]string{"good"}, []string{"bad"}))
	a := newAuth(t, Options{HTTP: HTTPOptions{URL: svc.URL}, Limits: Limits{MaxFailedLogins: 3}})
	src := tcpAddr("203.0.113.5:1")
	for i := range 3 {
		if rc := reasonOf(a.Authenticate("c", "bad", []byte(fmt.Sprint("guess", i)), src, "tcp", "")); rc != codec.BadUserNameOrPassword {
			t.Fatalf("guess %d: %v", i, rc)
		}
	}
	before := svc.requests.Load()
	if rc := reasonOf(a.Authenticate("c", "good", []byte("x"), src, "tcp", "")); rc != codec.NotAuthorized {
		t.Errorf("locked-out source: %v, want Not Authorized", rc)
	}
	if svc.requests.Load() != before {
		t.Error("a locked-out source's login was sent to the service")
	}
	if rc := reasonOf(a.Authenticate("c", "good", []byte("x"), tcpAddr("203.0.113.6:1"), "tcp", "")); rc != codec.Success {
		t.Errorf("another source: %v, want Success", rc)
	}
}

// TestHTTPFailClosed: every way the service can fail to answer refuses
// the CONNECT with Server Unavailable (or a PUBLISH with a denial), never
// admits it; with fail_open the files decide instead. Failures are logged
// once a second per kind, without the password.
func TestHTTPFailClosed(t *testing.T) {
	file := writeUsers(t, 4, map[string]string{"alice": "wonderland"})
	aclFile := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(aclFile, []byte("user alice\ntopic write ok/#\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := newService(t, byUser([]string{"alice"}, nil))
	for _, tt := range []struct {
		name   string
		answer func(*http.Request, map[string]string) (int, string)
		want   string // the counter that grows
	}{
		{"status 500", func(*http.Request, map[string]string) (int, string) { return 500, allowJSON }, "error"},
		{"status 204", func(*http.Request, map[string]string) (int, string) { return 204, "" }, "error"},
		{"status 403", func(*http.Request, map[string]string) (int, string) { return 403, allowJSON }, "error"},
		{"garbage", func(*http.Request, map[string]string) (int, string) { return 200, "<html>allow</html>" }, "error"},
		{"unknown result", func(*http.Request, map[string]string) (int, string) { return 200, `{"result":"maybe"}` }, "error"},
		{"no result", func(*http.Request, map[string]string) (int, string) { return 200, `{"is_superuser":true}` }, "error"},
		{"result of another type", func(*http.Request, map[string]string) (int, string) { return 200, `{"result":true}` }, "error"},
		{"huge", func(*http.Request, map[string]string) (int, string) {
			return 200, `{"result":"allow","pad":"` + strings.Repeat("x", maxHTTPBody) + `"}`
		}, "error"},
		{"redirect to a service that would allow", func(r *http.Request, _ map[string]string) (int, string) {
			return 307, "" // Location is set below
		}, "error"},
		{"slower than the timeout", func(r *http.Request, _ map[string]string) (int, string) {
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second): // an answer after all, for a broker that waits too long
			}
			return 200, allowJSON
		}, "timeout"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			svc := &service{}
			h := svc.handler(tt.answer)
			svc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Location", other.URL)
				h(w, r)
			}))
			t.Cleanup(svc.Close)
			for _, failOpen := range []bool{false, true} {
				var log bytes.Buffer
				a := newAuth(t, Options{PasswordFile: file, ACLFile: aclFile, Log: bufferLog(&log),
					HTTP: HTTPOptions{URL: svc.URL, ACLURL: svc.URL, Timeout: 300 * time.Millisecond, FailOpen: failOpen}})
				for i := range 3 {
					err := a.Authenticate(fmt.Sprint("c", i), "alice", []byte("wonderland"), tcpAddr("198.51.100.9:1"), "tcp", "")
					want := codec.ServerUnavailable
					if failOpen {
						want = codec.Success // the password file decides
					}
					if rc := reasonOf(err); rc != want {
						t.Fatalf("fail_open %v: %v (%v), want %v", failOpen, rc, err, want)
					}
				}
				if got, want := a.CanPublish("c", "alice", "ok/1"), failOpen; got != want {
					t.Errorf("fail_open %v: PUBLISH allowed by the file: %v, want %v", failOpen, got, want)
				}
				if a.CanPublish("c", "alice", "other/1") {
					t.Errorf("fail_open %v: PUBLISH the file refuses was allowed", failOpen)
				}
				st := a.Stats().HTTP
				n := st.Connect.Errors
				if tt.want == "timeout" {
					n = st.Connect.Timeouts
				}
				if n != 3 || st.Connect.Allow != 0 || st.ACL.Allow != 0 {
					t.Errorf("fail_open %v: stats %+v, want 3 of %s", failOpen, st, tt.want)
				}
				if closed := st.Connect.FailedClosed; (closed == 3) == failOpen || !failOpen && st.ACL.FailedClosed != 2 {
					t.Errorf("fail_open %v: failed closed %d connect, %d acl", failOpen, closed, st.ACL.FailedClosed)
				}
				lines := strings.Count(log.String(), "HTTP auth service gave no usable answer")
				if lines < 2 || lines > 4 { // one a second per kind: connect and acl, maybe on a second's edge
					t.Errorf("fail_open %v: %d log lines about failures:\n%s", failOpen, lines, log.String())
				}
				if strings.Contains(log.String(), "wonderland") {
					t.Errorf("the log holds the password:\n%s", log.String())
				}
			}
		})
	}
}

// TestHTTPSlowServiceBrokerResponsive: with the service hanging on some
// logins, those fail closed at the timeout while other logins complete at
// once: anonymous ones from loopback (never sent), password-file users
// whose ignore answer is cached, and new ones that find a slot free.
func TestHTTPSlowServiceBrokerResponsive(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	slow := hang(release)
	svc := newService(t, func(r *http.Request, req map[string]string) (int, string) {
		if req["username"] == "slow" {
			return slow(r, req)
		}
		return 200, ignoreJSON
	})
	file := writeUsers(t, 4, map[string]string{"alice": "wonderland", "erin": "builder"})
	const timeout = 1500 * time.Millisecond
	a := newAuth(t, Options{PasswordFile: file, HTTP: HTTPOptions{URL: svc.URL, Timeout: timeout, MaxInflight: 8}})
	alice := tcpAddr("192.0.2.1:1")
	if err := a.Authenticate("dev", "alice", []byte("wonderland"), alice, "tcp", ""); err != nil {
		t.Fatalf("alice: %v", err)
	}

	results := make(chan error, 7)
	start := time.Now()
	for i := range 7 { // distinct sources, distinct passwords: 7 of the 8 slots
		go func() {
			results <- a.Authenticate("s", "slow", []byte(fmt.Sprint(i)), tcpAddr(fmt.Sprintf("198.51.100.%d:1", i+1)), "tcp", "")
		}()
	}
	mqtttest.WaitWithin(t, 10*time.Second, "7 requests hang", func() bool { return svc.inflight.Load() == 7 })
	for _, l := range []struct {
		name, user, pass string
		remote           net.Addr
	}{
		{"anonymous from loopback", "", "", tcpAddr("127.0.0.1:9")},
		{"alice again (ignore cached)", "alice", "wonderland", alice},
		{"erin (a free slot, ignore)", "erin", "builder", tcpAddr("192.0.2.2:1")},
	} {
		t0 := time.Now()
		if err := a.Authenticate("dev", l.user, []byte(l.pass), l.remote, "tcp", ""); err != nil {
			t.Errorf("%s: %v", l.name, err)
		}
		if d := time.Since(t0); d > 300*time.Millisecond {
			t.Errorf("%s took %v with the service hanging on others", l.name, d)
		}
	}
	for range 7 {
		err := <-results
		if rc := reasonOf(err); rc != codec.ServerUnavailable {
			t.Errorf("hanging login: %v (%v), want Server Unavailable", rc, err)
		}
	}
	if d := time.Since(start); d < timeout || d > timeout+3*time.Second {
		t.Errorf("hanging logins refused after %v, want about the timeout %v", d, timeout)
	}
	if st := a.Stats().HTTP.Connect; st.Timeouts != 7 || st.FailedClosed != 7 || st.CacheHits != 1 {
		t.Errorf("stats %+v, want 7 timeouts failed closed and 1 cache hit", st)
	}
}

// TestHTTPBoundedPool: at most max_inflight requests reach the service;
// the next login waits queue_wait for a slot, then gets Server Busy. One
// source never holds more slots than the failures it has left: an
// attacker's hanging logins leave slots to everyone else.
func TestHTTPBoundedPool(t *testing.T) {
	release := make(chan struct{})
	svc := newService(t, hang(release))
	const wait = 300 * time.Millisecond
	a := newAuth(t, Options{PasswordFile: writeUsers(t, 4, map[string]string{"u": "p"}),
		HTTP:   HTTPOptions{URL: svc.URL, Timeout: 20 * time.Second, QueueWait: wait, MaxInflight: 3},
		Limits: Limits{MaxFailedLogins: 2}})
	results := make(chan error, 10)
	login := func(src string, i int) {
		results <- a.Authenticate("c", "u", []byte(fmt.Sprint(i)), tcpAddr(src+":1"), "tcp", "")
	}
	// The attacker's source: 4 logins, 2 in flight (its budget).
	for i := range 4 {
		go login("203.0.113.66", i)
	}
	mqtttest.WaitWithin(t, 10*time.Second, "the attacker's 2 requests", func() bool { return svc.inflight.Load() == 2 })
	go login("192.0.2.1", 10)
	mqtttest.WaitWithin(t, 10*time.Second, "another source's request", func() bool { return svc.inflight.Load() == 3 })

	// The pool is full: the next login waits, then is busy.
	t0 := time.Now()
	err := a.Authenticate("c", "u", []byte("late"), tcpAddr("192.0.2.2:1"), "tcp", "")
	if rc, d := reasonOf(err), time.Since(t0); rc != codec.ServerBusy || d < wait-50*time.Millisecond || d > wait+2*time.Second {
		t.Errorf("login with the pool full: %v (%v) after %v, want Server Busy after about %v", rc, err, d, wait)
	}
	if n := svc.requests.Load(); n != 3 {
		t.Errorf("%d requests reached the service, want 3 (max_inflight)", n)
	}
	// The attacker's 2 waiting logins were refused too, never sent.
	for range 2 {
		if rc := reasonOf(<-results); rc != codec.ServerBusy {
			t.Errorf("the attacker's waiting login: %v, want Server Busy", rc)
		}
	}
	// Five logins alike while the pool is full share one wait: all busy
	// after queue_wait, not one after the other.
	t0 = time.Now()
	alike := make(chan error, 5)
	for range 5 {
		go func() { alike <- a.Authenticate("c", "u", []byte("same"), tcpAddr("192.0.2.3:1"), "tcp", "") }()
	}
	for range 5 {
		if rc := reasonOf(<-alike); rc != codec.ServerBusy {
			t.Errorf("a login alike with the pool full: %v, want Server Busy", rc)
		}
	}
	if d := time.Since(t0); d > wait+700*time.Millisecond {
		t.Errorf("5 logins alike took %v, want about one queue_wait (%v)", d, wait)
	}
	close(release)
	for range 3 {
		<-results // ignored by the service, checked against the file: wrong passwords
	}
	if st := a.Stats().HTTP.Connect; st.Busy != 8 || st.FailedClosed != 8 || svc.peak.Load() != 3 || svc.requests.Load() != 3 {
		t.Errorf("stats %+v, %d requests, peak %d in flight; want 8 busy and 3 requests", st, svc.requests.Load(), svc.peak.Load())
	}
}

// TestHTTPLoginStorm: a reconnect storm of 15,000 clients with a few
// credentials costs one request per distinct credential within the TTL,
// however many arrive while the first is in flight.
func TestHTTPLoginStorm(t *testing.T) {
	const n = 15000
	for _, tt := range []struct {
		key  HTTPCacheKey
		want int64
		who  func(i int) (clientID string, remote net.Addr)
	}{
		// Distinct clients from distinct addresses sharing 5 credentials.
		{HTTPCacheCredentials, 5, func(i int) (string, net.Addr) {
			return fmt.Sprint("dev-", i), tcpAddr(fmt.Sprintf("10.%d.%d.%d:1", i>>16&255, i>>8&255, i&255))
		}},
		// The default key: each of 40 clients (client id and address)
		// reconnecting, with the same 5 credentials among them.
		{HTTPCacheClient, 40, func(i int) (string, net.Addr) {
			c := i % 40
			return fmt.Sprint("dev-", c), tcpAddr(fmt.Sprintf("10.0.0.%d:%d", c, 1000+i%7))
		}},
	} {
		t.Run(string(tt.key), func(t *testing.T) {
			svc := newService(t, func(*http.Request, map[string]string) (int, string) {
				time.Sleep(20 * time.Millisecond) // the storm piles up on requests in flight
				return 200, allowJSON
			})
			a := newAuth(t, Options{HTTP: HTTPOptions{URL: svc.URL, CacheKey: tt.key}})
			got := loginAll(t, a, n, 200, func(i int) error {
				id, remote := tt.who(i)
				user := fmt.Sprint("fleet-", i%5)
				return a.Authenticate(id, user, []byte("pw-"+user), remote, "tcp", "")
			})
			if got[codec.Success] != n {
				t.Fatalf("storm: %v, want %d successes", got, n)
			}
			st := a.Stats().HTTP
			if r := svc.requests.Load(); r != tt.want || st.Connect.Allow != tt.want || st.Connect.CacheHits != n-tt.want {
				t.Errorf("%d requests for %d logins (stats %+v), want %d", r, n, st, tt.want)
			}
		})
	}
}

// TestHTTPConnectCache: what a cached answer admits and what it never
// does.
func TestHTTPConnectCache(t *testing.T) {
	clk := newClock()
	svc := newService(t, byUser([]string{"alice", "bob"}, []string{"mallory"}))
	file := writeUsers(t, 4, map[string]string{"carol": "pw"})
	a := newAuth(t, Options{PasswordFile: file, now: clk.now, HTTP: HTTPOptions{URL: svc.URL, CacheTTL: time.Minute}})
	src := tcpAddr("192.0.2.7:1")
	asks := func(what string, want int64, client, user, pass string, remote net.Addr) {
		t.Helper()
		before := svc.requests.Load()
		_ = a.Authenticate(client, user, []byte(pass), remote, "tcp", "")
		if got := svc.requests.Load() - before; got != want {
			t.Errorf("%s: %d requests, want %d", what, got, want)
		}
	}
	asks("first login", 1, "c1", "alice", "pw1", src)
	asks("the same login", 0, "c1", "alice", "pw1", src)
	asks("another password", 1, "c1", "alice", "pw2", src)
	asks("another client id", 1, "c2", "alice", "pw1", src)
	asks("another address", 1, "c1", "alice", "pw1", tcpAddr("192.0.2.8:1"))
	asks("the same address, another port", 0, "c1", "alice", "pw1", tcpAddr("192.0.2.7:2"))
	asks("a denial", 1, "c1", "mallory", "x", src)
	asks("a denial again: never cached", 1, "c1", "mallory", "x", src)
	asks("ignore", 1, "c1", "carol", "pw", src)
	asks("ignore again: cached", 0, "c1", "carol", "pw", src)
	if rc := reasonOf(a.Authenticate("c1", "carol", []byte("wrong"), src, "tcp", "")); rc != codec.BadUserNameOrPassword {
		t.Errorf("ignored user with a wrong password: %v", rc)
	}
	clk.advance(time.Minute)
	asks("after the TTL", 1, "c1", "alice", "pw1", src)

	b := newAuth(t, Options{HTTP: HTTPOptions{URL: svc.URL, CacheTTL: -1}})
	for range 2 {
		before := svc.requests.Load()
		_ = b.Authenticate("c1", "alice", []byte("pw1"), src, "tcp", "")
		if svc.requests.Load() == before {
			t.Error("cache_ttl negative: a login was answered from a cache")
		}
	}
}

// TestHTTPACL: PUBLISH, wills and SUBSCRIBE through acl_url: allow and deny
// decide, ignore leaves it to the ACL file; answers are cached per client
// and topic for the TTL; deliveries are never sent.
func TestHTTPACL(t *testing.T) {
	clk := newClock()
	svc := newService(t, func(_ *http.Request, req map[string]string) (int, string) {
		switch {
		case strings.Contains(req["topic"], "allowed/"):
			return 200, allowJSON
		case strings.Contains(req["topic"], "denied/"):
			return 200, denyJSON
		case strings.Contains(req["topic"], "broken/"):
			return 502, ""
		}
		return 200, ignoreJSON
	})
	aclFile := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(aclFile, []byte("user alice\ntopic readwrite file/ok\ntopic read allowed/public\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := newAuth(t, Options{ACLFile: aclFile, HTTP: HTTPOptions{ACLURL: svc.URL + "/acl", CacheTTL: time.Minute}})
	start := clk.now()
	a.http.elapsed = func() time.Duration { return clk.now().Sub(start) }
	for _, tt := range []struct {
		name   string
		check  func(clientID, username, topic string) bool
		topic  string
		want   bool
		action string // "" when the service must not be asked
	}{
		{"publish allowed", a.CanPublish, "allowed/x", true, "publish"},
		{"publish allowed, cached", a.CanPublish, "allowed/x", true, ""},
		{"publish denied", a.CanPublish, "denied/x", false, "publish"},
		{"publish denied, cached", a.CanPublish, "denied/x", false, ""},
		{"publish ignored, the file allows", a.CanPublish, "file/ok", true, "publish"},
		{"publish ignored, the file refuses", a.CanPublish, "file/no", false, "publish"},
		{"publish, the service fails", a.CanPublish, "broken/x", false, "publish"},
		{"publish, the service fails again: not cached", a.CanPublish, "broken/x", false, "publish"},
		{"will denied", a.CanWill, "denied/will", false, "publish"},
		{"subscribe allowed", a.CanSubscribe, "allowed/#", true, "subscribe"},
		{"subscribe denied", a.CanSubscribe, "denied/#", false, "subscribe"},
		{"subscribe ignored, the file refuses", a.CanSubscribe, "other/#", false, "subscribe"},
		{"shared subscription, as subscribed", a.CanSubscribe, "$share/g/allowed/y", true, "subscribe"},
		{"delivery: the file decides, never the service", a.CanRead, "allowed/x", false, ""},
		{"delivery the file allows", a.CanRead, "allowed/public", true, ""},
	} {
		before := svc.requests.Load()
		if got := tt.check("c1", "alice", tt.topic); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
		asked := svc.requests.Load() > before
		if asked != (tt.action != "") {
			t.Errorf("%s: service asked %v", tt.name, asked)
		} else if asked {
			want := map[string]string{"clientid": "c1", "username": "alice", "action": tt.action, "topic": tt.topic}
			if got := svc.last(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: request %v, want %v", tt.name, got, want)
			}
		}
	}
	// A filter the service allowed reads everything it matches (the file
	// alone would not let alice read allowed/x); one it did not, per file.
	if !a.ReadsAll("c1", "alice", "allowed/#") || a.ReadsAll("c1", "alice", "denied/#") || a.ReadsAll("c1", "alice", "other/#") {
		t.Error("ReadsAll does not follow the service's SUBSCRIBE answers")
	}
	// Even past the TTL: the answer stands for the subscription made.
	clk.advance(2 * time.Minute)
	if !a.ReadsAll("c1", "alice", "allowed/#") {
		t.Error("ReadsAll forgot the service's answer after the TTL")
	}
	before := svc.requests.Load()
	if !a.CanPublish("c1", "alice", "allowed/x") || svc.requests.Load() != before+1 {
		t.Error("after the TTL the service was not asked again")
	}
	if !a.CanPublish("c2", "alice", "allowed/x") || svc.requests.Load() != before+2 {
		t.Error("another client was answered from c1's cache")
	}
	st := a.Stats()
	if st.PublishDenied != 5 || st.WillDenied != 1 || st.SubscribeDenied != 2 || st.DeliveryDenied != 1 ||
		st.HTTP.ACL.Errors != 2 || st.HTTP.ACL.FailedClosed != 2 || st.HTTP.ACL.Allow != 5 || st.HTTP.ACL.CacheHits != 2 {
		t.Errorf("stats %+v, http %+v", st, st.HTTP)
	}
}

// TestHTTPTLS: an https service that wants the broker's client
// certificate, verified with the configured CA.
func TestHTTPTLS(t *testing.T) {
	ca := certstest.NewCA(t)
	svc := &service{}
	svc.Server = httptest.NewUnstartedServer(svc.handler(byUser([]string{"alice"}, nil)))
	svc.TLS = ca.ServerConfig()
	svc.TLS.ClientAuth = tls.RequireAndVerifyClientCert
	svc.TLS.ClientCAs = ca.Pool()
	svc.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	svc.StartTLS()
	t.Cleanup(svc.Close)
	certFile, keyFile := ca.WriteNodeFiles("broker")
	caFile := ca.WriteCAFile()
	src := tcpAddr("192.0.2.9:1")
	for _, tt := range []struct {
		name string
		o    HTTPOptions
		want codec.ReasonCode
	}{
		{"CA and client certificate", HTTPOptions{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}, codec.Success},
		{"no client certificate", HTTPOptions{CAFile: caFile}, codec.ServerUnavailable},
		{"the system's roots do not know the CA", HTTPOptions{CertFile: certFile, KeyFile: keyFile}, codec.ServerUnavailable},
		{"another server name", HTTPOptions{CAFile: caFile, CertFile: certFile, KeyFile: keyFile, ServerName: "elsewhere.example"}, codec.ServerUnavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.URL, tt.o.Timeout = svc.URL, 5*time.Second
			a := newAuth(t, Options{HTTP: tt.o})
			if rc := reasonOf(a.Authenticate("c", "alice", []byte("x"), src, "tcp", "")); rc != tt.want {
				t.Errorf("%v, want %v", rc, tt.want)
			}
		})
	}
	if _, err := New(Options{HTTP: HTTPOptions{URL: svc.URL, CAFile: filepath.Join(t.TempDir(), "missing.pem")}}); err == nil {
		t.Error("New with a missing ca_file: no error")
	}
}

// TestHTTPPlainWarning: passwords sent in clear to another machine are
// warned about at start; to loopback they are not.
func TestHTTPPlainWarning(t *testing.T) {
	for _, tt := range []struct {
		url  string
		warn bool
	}{{"http://192.0.2.1/auth", true}, {"http://auth.example/auth", true}, {"http://127.0.0.1:8080/auth", false},
		{"http://localhost/auth", false}, {"http://[::1]/auth", false}, {"https://auth.example/auth", false}} {
		var log bytes.Buffer
		newAuth(t, Options{Log: bufferLog(&log), HTTP: HTTPOptions{URL: tt.url}})
		if got := strings.Contains(log.String(), "passwords cross the network in clear"); got != tt.warn {
			t.Errorf("%s: warned %v, want %v\n%s", tt.url, got, tt.warn, log.String())
		}
	}
}

// TestHTTPOptionsValidate: mistakes in auth.http are refused at start.
func TestHTTPOptionsValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		o    HTTPOptions
		err  string
	}{
		{"not a URL", HTTPOptions{URL: "auth.example:80"}, "http.url"},
		{"no host", HTTPOptions{URL: "http:///auth"}, "want an http:// or https:// URL"},
		{"ftp", HTTPOptions{ACLURL: "ftp://auth.example/"}, "acl_url"},
		{"credentials in the URL", HTTPOptions{URL: "https://broker:s3cret@auth.example/"}, "no user or password in the URL"},
		{"negative timeout", HTTPOptions{URL: "http://127.0.0.1/", Timeout: -time.Second}, "must not be negative"},
		{"cache key", HTTPOptions{URL: "http://127.0.0.1/", CacheKey: "user"}, "want client or credentials"},
		{"cert without key", HTTPOptions{URL: "https://auth.example/", CertFile: "c.pem"}, "go together"},
		{"tls for plain http", HTTPOptions{URL: "http://auth.example/", CAFile: "ca.pem"}, "neither url nor acl_url is https"},
		{"negative max_inflight", HTTPOptions{URL: "http://127.0.0.1/", MaxInflight: -1}, "max_inflight"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{HTTP: tt.o}
			o.SetDefaults()
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("error %v, want one containing %q", err, tt.err)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q quotes the password", err)
			}
		})
	}
	o := Options{HTTP: HTTPOptions{URL: "https://auth.example/mqtt", ACLURL: "http://127.0.0.1:8080/acl"}}
	o.SetDefaults()
	if err := o.Validate(); err != nil {
		t.Errorf("valid options: %v", err)
	}
	if o.HTTP.Timeout != DefaultHTTPTimeout || o.HTTP.QueueWait != DefaultHTTPTimeout || o.HTTP.CacheTTL != DefaultHTTPCacheTTL ||
		o.HTTP.MaxInflight != DefaultHTTPMaxInflight || o.HTTP.CacheKey != HTTPCacheClient || o.HTTP.FailOpen {
		t.Errorf("defaults %+v", o.HTTP)
	}
}

// BenchmarkHTTPLogin is a CONNECT decided by the service: cached (a
// reconnect within cache_ttl: an HMAC and a map lookup) and uncached (a
// POST to a service on loopback that answers at once, over a kept-alive
// connection).
func BenchmarkHTTPLogin(b *testing.B) {
	svc := newService(b, byUser([]string{"alice"}, nil))
	src := tcpAddr("192.0.2.1:1")
	for _, bb := range []struct {
		name string
		ttl  time.Duration
	}{{"cached", time.Hour}, {"uncached", -1}} {
		b.Run(bb.name, func(b *testing.B) {
			a, err := New(Options{ReloadInterval: -1, HTTP: HTTPOptions{URL: svc.URL, CacheTTL: bb.ttl}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = a.Close() })
			pw := []byte("wonderland")
			b.ReportAllocs()
			for b.Loop() {
				if err := a.Authenticate("dev-1", "alice", pw, src, "tcp", ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHTTPPublish is a PUBLISH decided by the service: cached (the
// message path with acl_url) and uncached.
func BenchmarkHTTPPublish(b *testing.B) {
	svc := newService(b, func(*http.Request, map[string]string) (int, string) { return 200, allowJSON })
	for _, bb := range []struct {
		name string
		ttl  time.Duration
	}{{"cached", time.Hour}, {"uncached", -1}} {
		b.Run(bb.name, func(b *testing.B) {
			a, err := New(Options{ReloadInterval: -1, HTTP: HTTPOptions{ACLURL: svc.URL, CacheTTL: bb.ttl}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = a.Close() })
			topic := []byte("sensors/room1/temp")
			b.ReportAllocs()
			for b.Loop() {
				if !a.CanPublish("client-1", "alice", unsafeString(topic)) {
					b.Fatal("denied")
				}
			}
		})
	}
}
