package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/crypto/bcrypt"
)

// Users of the users tests, created through the API by usersServer.
const (
	veraPassword = "vera-viewer-pass"
	adaPassword  = "ada-admin-pass"
)

var (
	vera = [2]string{"vera", veraPassword} // a viewer
	ada  = [2]string{"ada", adaPassword}   // an admin
)

// usersServer is a test server whose users live in dir's UsersFile (dir
// "": in memory), hashed at the lowest bcrypt cost, with the users vera
// (viewer) and ada (admin) created through the API.
func usersServer(t *testing.T, dir string, opt func(*Options)) *Server {
	t.Helper()
	s := newTestServer(t, &fakeBroker{}, func(o *Options) {
		if dir != "" {
			o.UsersFile = filepath.Join(dir, UsersFile)
		}
		if opt != nil {
			opt(o)
		}
	})
	s.auth.users.cost = bcrypt.MinCost
	for _, u := range []struct{ name, role, pw string }{{"vera", "viewer", veraPassword}, {"ada", "admin", adaPassword}} {
		if _, ok := s.auth.users.get(u.name); ok {
			continue // kept from an earlier server with the same file
		}
		r := call(t, s.Handler(), req{method: "POST", path: "/api/v1/users", header: map[string]string{"X-API-Key": adminKey},
			body: fmt.Sprintf(`{"name":%q,"role":%q,"password":%q,"description":"test user"}`, u.name, u.role, u.pw)})
		if r.status != 201 {
			t.Fatalf("creating %s: %d %s", u.name, r.status, r.body)
		}
	}
	return s
}

// login opens a session for user and password and returns its cookie
// and CSRF token.
func login(t *testing.T, h http.Handler, user, password string) (*http.Cookie, string) {
	t.Helper()
	r := call(t, h, req{method: "POST", path: "/api/v1/auth/login", body: fmt.Sprintf(`{"username":%q,"password":%q}`, user, password)})
	if r.status != 200 {
		t.Fatalf("login as %s: %d %s", user, r.status, r.body)
	}
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == sessionCookie {
			return c, r.json(t)["csrf_token"].(string)
		}
	}
	t.Fatalf("login as %s set no %s cookie", user, sessionCookie)
	return nil, ""
}

// bearerOf issues a bearer token to basic's user.
func bearerOf(t *testing.T, h http.Handler, basic [2]string) map[string]string {
	t.Helper()
	r := call(t, h, req{method: "POST", path: "/api/v1/auth/tokens", body: `{}`, basic: basic})
	if r.status != 201 {
		t.Fatalf("token for %s: %d %s", basic[0], r.status, r.body)
	}
	return map[string]string{"Authorization": "Bearer " + r.json(t)["token"].(string)}
}

// TestUsersAPIRoles: every users endpoint against every kind of caller:
// only admins (users, keys, the configured admin) manage users.
func TestUsersAPIRoles(t *testing.T) {
	const newUser = `{"name":"tom","role":"viewer","password":"tom-password"}`
	type caller struct {
		name   string
		basic  [2]string
		header map[string]string
	}
	callers := []struct {
		caller
		admin bool
	}{
		{caller{name: "nobody"}, false},
		{caller{name: "viewer user", basic: vera}, false},
		{caller{name: "viewer key", header: map[string]string{"X-API-Key": viewerKey}}, false},
		{caller{name: "admin user", basic: ada}, true},
		{caller{name: "configured admin", basic: admin}, true},
		{caller{name: "admin key", header: map[string]string{"X-API-Key": adminKey}}, true},
	}
	endpoints := []struct {
		name, method, path, body string
		status                   int // for an admin
		check                    func(t *testing.T, s *Server, r resp)
	}{
		{"list", "GET", "/api/v1/users", "", 200, func(t *testing.T, s *Server, r resp) {
			var got struct{ Items []userJSON }
			if err := json.Unmarshal(r.body, &got); err != nil || len(got.Items) != 3 ||
				got.Items[0].Name != "ada" || got.Items[1].Name != "admin" || !got.Items[1].Builtin || got.Items[2].Role != RoleViewer {
				t.Errorf("list: %s (%v)", r.body, err)
			}
			if strings.Contains(string(r.body), "$2a$") || strings.Contains(string(r.body), "password") {
				t.Errorf("list shows a password or hash: %s", r.body)
			}
		}},
		{"get", "GET", "/api/v1/users/vera", "", 200, func(t *testing.T, s *Server, r resp) {
			if m := r.json(t); m["name"] != "vera" || m["role"] != "viewer" || m["description"] != "test user" || m["created_at"] == nil {
				t.Errorf("get: %v", m)
			}
		}},
		{"get unknown", "GET", "/api/v1/users/nobody", "", 404, nil},
		{"create", "POST", "/api/v1/users", newUser, 201, func(t *testing.T, s *Server, r resp) {
			if c := call(t, s.Handler(), req{path: "/api/v1/overview", basic: [2]string{"tom", "tom-password"}}); c.status != 200 {
				t.Errorf("the new user cannot log in: %d", c.status)
			}
		}},
		{"create existing", "POST", "/api/v1/users", `{"name":"vera","role":"viewer","password":"12345678"}`, 409, nil},
		{"update role", "PUT", "/api/v1/users/vera", `{"role":"admin"}`, 200, func(t *testing.T, s *Server, r resp) {
			if m := r.json(t); m["role"] != "admin" || m["description"] != "test user" {
				t.Errorf("update kept the description? %v", m)
			}
		}},
		{"reset password", "PUT", "/api/v1/users/vera", `{"password":"reset-password"}`, 200, func(t *testing.T, s *Server, r resp) {
			if c := call(t, s.Handler(), req{path: "/api/v1/overview", basic: [2]string{"vera", "reset-password"}}); c.status != 200 {
				t.Errorf("the new password does not log in: %d", c.status)
			}
		}},
		{"update unknown", "PUT", "/api/v1/users/nobody", `{"description":"x"}`, 404, nil},
		{"delete", "DELETE", "/api/v1/users/vera", "", 200, func(t *testing.T, s *Server, r resp) {
			if _, ok := s.auth.users.get("vera"); ok {
				t.Error("vera is still there")
			}
		}},
		{"delete unknown", "DELETE", "/api/v1/users/nobody", "", 404, nil},
	}
	for _, ep := range endpoints {
		for _, c := range callers {
			t.Run(ep.name+"/"+c.name, func(t *testing.T) {
				s := usersServer(t, "", nil)
				r := call(t, s.Handler(), req{method: ep.method, path: ep.path, body: ep.body, basic: c.basic, header: c.header})
				want := ep.status
				switch {
				case c.name == "nobody":
					want = 401
				case !c.admin:
					want = 403
				}
				if r.status != want {
					t.Fatalf("%s %s: %d %s, want %d", ep.method, ep.path, r.status, r.body, want)
				}
				if want >= 400 {
					if code := r.errCode(t); want == 403 && code != "forbidden" {
						t.Errorf("code %q, want forbidden", code)
					}
					return
				}
				if ep.check != nil {
					ep.check(t, s, r)
				}
			})
		}
	}
}

// TestUsersValidation: what a user may be called and what a password
// must be.
func TestUsersValidation(t *testing.T) {
	s := usersServer(t, "", nil)
	tests := []struct {
		name, method, path, body string
		status                   int
	}{
		{"colon in name", "POST", "/api/v1/users", `{"name":"key:ops","role":"admin","password":"12345678"}`, 400},
		{"anonymous", "POST", "/api/v1/users", `{"name":"anonymous","role":"admin","password":"12345678"}`, 400},
		{"empty name", "POST", "/api/v1/users", `{"name":"","role":"viewer","password":"12345678"}`, 400},
		{"slash", "POST", "/api/v1/users", `{"name":"a/b","role":"viewer","password":"12345678"}`, 400},
		{"configured admin's name", "POST", "/api/v1/users", `{"name":"admin","role":"viewer","password":"12345678"}`, 409},
		{"bad role", "POST", "/api/v1/users", `{"name":"x","role":"root","password":"12345678"}`, 400},
		{"no role", "POST", "/api/v1/users", `{"name":"x","password":"12345678"}`, 400},
		{"short password", "POST", "/api/v1/users", `{"name":"x","role":"viewer","password":"1234567"}`, 400},
		{"password past bcrypt's 72 bytes", "POST", "/api/v1/users", `{"name":"x","role":"viewer","password":"` + strings.Repeat("p", 73) + `"}`, 400},
		{"long description", "POST", "/api/v1/users", `{"name":"x","role":"viewer","password":"12345678","description":"` + strings.Repeat("d", 257) + `"}`, 400},
		{"unknown field", "POST", "/api/v1/users", `{"name":"x","role":"viewer","password":"12345678","admin":true}`, 400},
		{"update bad role", "PUT", "/api/v1/users/vera", `{"role":"root"}`, 400},
		{"update short password", "PUT", "/api/v1/users/vera", `{"password":"short"}`, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, s.Handler(), req{method: tt.method, path: tt.path, body: tt.body, basic: admin})
			if r.status != tt.status {
				t.Fatalf("%d %s, want %d", r.status, r.body, tt.status)
			}
		})
	}
	if got := len(s.auth.users.list()); got != 3 {
		t.Errorf("%d users after refused requests, want 3", got)
	}
}

// TestUsersLastAdmin: the store always keeps an admin, and the configured
// admin is neither deleted nor demoted.
func TestUsersLastAdmin(t *testing.T) {
	key := map[string]string{"X-API-Key": adminKey}
	do := func(h http.Handler, method, path, body string) resp {
		return call(t, h, req{method: method, path: path, body: body, header: key})
	}
	t.Run("configured admin", func(t *testing.T) {
		h := usersServer(t, "", nil).Handler()
		for _, q := range []struct{ method, body string }{{"DELETE", ""}, {"PUT", `{"role":"viewer"}`}, {"PUT", `{"description":"x"}`}} {
			if r := do(h, q.method, "/api/v1/users/admin", q.body); r.status != 409 || r.errCode(t) != "builtin" {
				t.Errorf("%s the configured admin: %d %s, want 409 builtin", q.method, r.status, r.body)
			}
		}
		// With the configured admin there, ada is not the last admin.
		if r := do(h, "PUT", "/api/v1/users/ada", `{"role":"viewer"}`); r.status != 200 {
			t.Errorf("demoting ada beside the configured admin: %d %s", r.status, r.body)
		}
	})
	t.Run("no configured admin", func(t *testing.T) {
		h := usersServer(t, "", func(o *Options) { o.AdminPasswordHash = nil }).Handler()
		for _, q := range []struct{ method, body string }{{"DELETE", ""}, {"PUT", `{"role":"viewer"}`}} {
			if r := do(h, q.method, "/api/v1/users/ada", q.body); r.status != 409 || r.errCode(t) != "last_admin" {
				t.Errorf("%s the last admin: %d %s, want 409 last_admin", q.method, r.status, r.body)
			}
		}
		if r := do(h, "PUT", "/api/v1/users/vera", `{"role":"admin"}`); r.status != 200 {
			t.Fatalf("promoting vera: %d %s", r.status, r.body)
		}
		if r := do(h, "DELETE", "/api/v1/users/ada", ""); r.status != 200 {
			t.Errorf("deleting ada beside another admin: %d %s", r.status, r.body)
		}
		if r := call(t, h, req{method: "DELETE", path: "/api/v1/users/vera", basic: [2]string{"vera", veraPassword}}); r.status != 409 {
			t.Errorf("the last admin deleting herself: %d %s, want 409", r.status, r.body)
		}
	})
}

// TestUserSessionsEnd: a user's sessions, bearer tokens and HTTP Basic
// credentials end when its password changes (by itself or by an admin),
// its role changes, or it is deleted; a description change ends nothing.
func TestUserSessionsEnd(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, h http.Handler, cookie *http.Cookie, csrf string) resp
		ends   bool
		basic  [2]string // what logs in afterwards
	}{
		{"own password", func(t *testing.T, h http.Handler, cookie *http.Cookie, csrf string) resp {
			return call(t, h, req{method: "POST", path: "/api/v1/auth/password", cookie: cookie, header: map[string]string{csrfHeader: csrf},
				body: fmt.Sprintf(`{"old_password":%q,"new_password":"vera-new-pass"}`, veraPassword)})
		}, true, [2]string{"vera", "vera-new-pass"}},
		{"password reset", func(t *testing.T, h http.Handler, _ *http.Cookie, _ string) resp {
			return call(t, h, req{method: "PUT", path: "/api/v1/users/vera", basic: ada, body: `{"password":"vera-reset-pass"}`})
		}, true, [2]string{"vera", "vera-reset-pass"}},
		{"role", func(t *testing.T, h http.Handler, _ *http.Cookie, _ string) resp {
			return call(t, h, req{method: "PUT", path: "/api/v1/users/vera", basic: ada, body: `{"role":"admin"}`})
		}, true, vera},
		{"deleted", func(t *testing.T, h http.Handler, _ *http.Cookie, _ string) resp {
			return call(t, h, req{method: "DELETE", path: "/api/v1/users/vera", basic: ada})
		}, true, [2]string{}},
		{"description", func(t *testing.T, h http.Handler, _ *http.Cookie, _ string) resp {
			return call(t, h, req{method: "PUT", path: "/api/v1/users/vera", basic: ada, body: `{"description":"on call"}`})
		}, false, vera},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := usersServer(t, "", nil)
			h := s.Handler()
			cookie, csrf := login(t, h, "vera", veraPassword)
			bearer := bearerOf(t, h, vera)
			if r := tt.change(t, h, cookie, csrf); r.status != 200 {
				t.Fatalf("change: %d %s", r.status, r.body)
			}
			want := 200
			if tt.ends {
				want = 401
			}
			for what, q := range map[string]req{
				"session":                              {path: "/api/v1/overview", cookie: cookie},
				"token":                                {path: "/api/v1/overview", header: bearer},
				"old basic password (verified lately)": {path: "/api/v1/overview", basic: vera},
			} {
				if tt.name == "role" && what == "old basic password (verified lately)" {
					continue // the password stands; the role is read afresh
				}
				if r := call(t, h, q); r.status != want {
					t.Errorf("%s after the change: %d, want %d", what, r.status, want)
				}
			}
			if tt.basic[0] != "" {
				r := call(t, h, req{path: "/api/v1/auth/me", basic: tt.basic})
				if r.status != 200 {
					t.Fatalf("logging in afterwards: %d %s", r.status, r.body)
				}
				if tt.name == "role" && r.json(t)["role"] != "admin" {
					t.Errorf("after promotion vera is %v", r.json(t)["role"])
				}
			}
		})
	}
}

// TestChangeOwnPassword: the old password is needed and counts as a
// login; API keys and anonymous callers have no password; a viewer may
// change its own.
func TestChangeOwnPassword(t *testing.T) {
	s := usersServer(t, "", func(o *Options) { o.AllowAnonymousLoopback = true })
	h := s.Handler()
	change := func(q req, old, new string) resp {
		q.method, q.path = "POST", "/api/v1/auth/password"
		q.body = fmt.Sprintf(`{"old_password":%q,"new_password":%q}`, old, new)
		return call(t, h, q)
	}
	if r := change(req{basic: vera}, "wrong-old-pass", "vera-new-pass"); r.status != 403 || r.errCode(t) != "wrong_password" {
		t.Errorf("wrong old password: %d %s, want 403 wrong_password", r.status, r.body)
	}
	if r := change(req{basic: vera}, veraPassword, "short"); r.status != 400 {
		t.Errorf("short new password: %d %s, want 400", r.status, r.body)
	}
	if r := change(req{header: map[string]string{"X-API-Key": adminKey}}, "x", "new-password"); r.status != 403 || r.errCode(t) != "not_a_user" {
		t.Errorf("an API key: %d %s, want 403 not_a_user", r.status, r.body)
	}
	keyCookie := (&http.Response{Header: call(t, h, req{method: "POST", path: "/api/v1/auth/login", body: fmt.Sprintf(`{"api_key":%q}`, viewerKey)}).header}).Cookies()[0]
	keyMe := call(t, h, req{path: "/api/v1/auth/me", cookie: keyCookie}).json(t)
	if r := change(req{cookie: keyCookie, header: map[string]string{csrfHeader: keyMe["csrf_token"].(string)}}, "x", "new-password"); r.status != 403 || r.errCode(t) != "not_a_user" {
		t.Errorf("a session of an API key: %d %s, want 403 not_a_user", r.status, r.body)
	}
	me := call(t, h, req{path: "/api/v1/auth/me", remote: "127.0.0.1:5000", host: "127.0.0.1:18083"}).json(t)
	anon := req{remote: "127.0.0.1:5000", host: "127.0.0.1:18083", header: map[string]string{csrfHeader: me["csrf_token"].(string)}}
	if r := change(anon, "x", "new-password"); r.status != 403 || r.errCode(t) != "not_a_user" {
		t.Errorf("anonymous: %d %s, want 403 not_a_user", r.status, r.body)
	}
	// The configured admin changes its password too (kept in memory here).
	if r := change(req{basic: admin}, testPassword, "admin-new-pass"); r.status != 200 {
		t.Fatalf("the configured admin: %d %s", r.status, r.body)
	}
	if r := call(t, h, req{path: "/api/v1/overview", basic: [2]string{"admin", "admin-new-pass"}}); r.status != 200 {
		t.Errorf("the admin's new password: %d", r.status)
	}
	// Guessing the old password through a stolen session is throttled as
	// logins are.
	for range maxFailures {
		change(req{basic: vera, remote: "192.0.2.50:1"}, "guess-old-pass", "vera-new-pass")
	}
	if r := change(req{basic: vera, remote: "192.0.2.50:1"}, veraPassword, "vera-new-pass"); r.status != 429 {
		t.Errorf("after %d wrong old passwords: %d %s, want 429", maxFailures, r.status, r.body)
	}
}

// TestUsersAttacker: a viewer cannot make itself or anyone an admin, and
// a deleted user's cookie and token stay dead, even once the name is
// given to a new user with the same password.
func TestUsersAttacker(t *testing.T) {
	s := usersServer(t, "", nil)
	h := s.Handler()
	cookie, csrf := login(t, h, "vera", veraPassword)
	session := map[string]string{csrfHeader: csrf}
	escalations := []struct {
		name   string
		q      req
		status int
	}{
		{"promote itself", req{method: "PUT", path: "/api/v1/users/vera", body: `{"role":"admin"}`}, 403},
		{"create an admin", req{method: "POST", path: "/api/v1/users", body: `{"name":"eve","role":"admin","password":"eve-password"}`}, 403},
		{"reset the admin's password", req{method: "PUT", path: "/api/v1/users/admin", body: `{"password":"owned-password"}`}, 403},
		{"delete the admin", req{method: "DELETE", path: "/api/v1/users/ada"}, 403},
		{"issue an admin token", req{method: "POST", path: "/api/v1/auth/tokens", body: `{"role":"admin"}`}, 403},
		{"list users", req{path: "/api/v1/users"}, 403},
	}
	for _, e := range escalations {
		for _, how := range []string{"session", "basic"} {
			t.Run(e.name+"/"+how, func(t *testing.T) {
				q := e.q
				if how == "session" {
					q.cookie, q.header = cookie, session
				} else {
					q.basic = vera
				}
				if r := call(t, h, q); r.status != e.status {
					t.Errorf("%d %s, want %d", r.status, r.body, e.status)
				}
			})
		}
	}
	if u, _ := s.auth.users.get("vera"); u.Role != RoleViewer {
		t.Errorf("vera is %s", u.Role)
	}
	if _, ok := s.auth.users.get("eve"); ok {
		t.Error("eve was created")
	}

	// An admin leaves: her cookie and token die with her.
	adaCookie, _ := login(t, h, "ada", adaPassword)
	adaToken := bearerOf(t, h, ada)
	if r := call(t, h, req{method: "DELETE", path: "/api/v1/users/ada", basic: admin}); r.status != 200 {
		t.Fatalf("deleting ada: %d %s", r.status, r.body)
	}
	recreate := req{method: "POST", path: "/api/v1/users", basic: admin,
		body: fmt.Sprintf(`{"name":"ada","role":"admin","password":%q}`, adaPassword)}
	for _, when := range []string{"deleted", "recreated"} {
		for what, q := range map[string]req{
			"cookie": {method: "POST", path: "/api/v1/reload", cookie: adaCookie},
			"token":  {method: "POST", path: "/api/v1/publish", body: `{"topic":"t"}`, header: adaToken},
		} {
			if r := call(t, h, q); r.status != 401 {
				t.Errorf("ada's old %s once %s: %d %s, want 401", what, when, r.status, r.body)
			}
		}
		if when == "deleted" {
			if r := call(t, h, req{path: "/api/v1/overview", basic: ada}); r.status != 401 {
				t.Errorf("ada's password once deleted: %d, want 401", r.status)
			}
			if r := call(t, h, recreate); r.status != 201 {
				t.Fatalf("recreating ada: %d %s", r.status, r.body)
			}
		}
	}
}

// TestUsersPersist: users survive a restart of the web server with the
// same data directory, in files of mode 0600 holding only hashes; the
// configured admin's new password goes to its hash file; without a data
// directory nothing is written.
func TestUsersPersist(t *testing.T) {
	dir := t.TempDir()
	adminFile := filepath.Join(dir, AdminPasswordFile)
	withAdminFile := func(o *Options) { o.AdminPasswordFile = adminFile }
	s := usersServer(t, dir, withAdminFile)
	if r := call(t, s.Handler(), req{method: "PUT", path: "/api/v1/users/vera", basic: ada, body: `{"description":"night shift","password":"vera-second-pass"}`}); r.status != 200 {
		t.Fatalf("update: %d %s", r.status, r.body)
	}
	if r := call(t, s.Handler(), req{method: "POST", path: "/api/v1/auth/password", basic: admin,
		body: fmt.Sprintf(`{"old_password":%q,"new_password":"admin-second-pass"}`, testPassword)}); r.status != 200 {
		t.Fatalf("admin password: %d %s", r.status, r.body)
	}

	for _, f := range []string{filepath.Join(dir, UsersFile), adminFile} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, fi.Mode().Perm())
		}
		data, _ := os.ReadFile(f)
		for _, pw := range []string{veraPassword, adaPassword, "vera-second-pass", "admin-second-pass"} {
			if strings.Contains(string(data), pw) {
				t.Errorf("%s holds a password in clear", f)
			}
		}
	}
	// The next start reads the admin's hash as cmd/xmq does.
	hash, src, err := AdminPassword("", "", dir, nil)
	if err != nil || src != PasswordFromDataDir {
		t.Fatalf("AdminPassword: %s %v", src, err)
	}
	s2 := usersServer(t, dir, func(o *Options) { withAdminFile(o); o.AdminPasswordHash = hash })
	h := s2.Handler()
	for _, c := range []struct {
		basic [2]string
		role  string
	}{{[2]string{"vera", "vera-second-pass"}, "viewer"}, {ada, "admin"}, {[2]string{"admin", "admin-second-pass"}, "admin"}} {
		r := call(t, h, req{path: "/api/v1/auth/me", basic: c.basic})
		if r.status != 200 || r.json(t)["role"] != c.role {
			t.Errorf("%s after a restart: %d %s, want %s", c.basic[0], r.status, r.body, c.role)
		}
	}
	if u, _ := s2.auth.users.get("vera"); u.Description != "night shift" || u.Created.IsZero() || !u.Updated.After(u.Created) {
		t.Errorf("vera after a restart: %+v", u)
	}

	// A password from the environment or the configuration is not the
	// API's to change.
	fixed := usersServer(t, "", func(o *Options) { o.AdminPasswordFixed = true })
	if r := call(t, fixed.Handler(), req{method: "PUT", path: "/api/v1/users/admin", basic: ada, body: `{"password":"admin-third-pass"}`}); r.status != 409 || r.errCode(t) != "password_fixed" {
		t.Errorf("changing a configured admin password: %d %s, want 409 password_fixed", r.status, r.body)
	}

	// In memory: nothing written anywhere.
	mem := t.TempDir()
	t.Chdir(mem)
	usersServer(t, "", nil)
	if entries, _ := os.ReadDir(mem); len(entries) != 0 {
		t.Errorf("memory-only users wrote %v", entries)
	}

	// A damaged file stops the start rather than losing the users.
	if err := os.WriteFile(filepath.Join(dir, UsersFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(&fakeBroker{}, Options{UsersFile: filepath.Join(dir, UsersFile)}); err == nil {
		t.Error("a damaged users file was accepted")
	}
}

// TestUsersThrottleAndAudit: failed logins of any user lock the address
// out as the admin's do, the log names the user tried, and every users
// action is audited without a password.
func TestUsersThrottleAndAudit(t *testing.T) {
	obs, logs := observer.New(zap.InfoLevel)
	s := usersServer(t, "", func(o *Options) { o.Log = zap.New(obs) })
	h := s.Handler()
	for range maxFailures {
		call(t, h, req{method: "POST", path: "/api/v1/auth/login", body: `{"username":"vera","password":"wrong-guess-pass"}`})
	}
	if r := call(t, h, req{method: "POST", path: "/api/v1/auth/login", body: fmt.Sprintf(`{"username":"vera","password":%q}`, veraPassword)}); r.status != 429 {
		t.Errorf("vera's right password after %d failures: %d, want 429", maxFailures, r.status)
	}
	if n := len(logs.FilterMessage("dashboard login failed").FilterField(zap.String("user", "vera")).All()); n != maxFailures {
		t.Errorf("%d failed-login lines name vera, want %d", n, maxFailures)
	}

	steps := []struct {
		q              req
		action, target string
	}{
		{req{method: "POST", path: "/api/v1/users", basic: ada, body: `{"name":"tom","role":"viewer","password":"tom-secret-1"}`}, "user.create", "tom"},
		{req{method: "PUT", path: "/api/v1/users/tom", basic: ada, body: `{"password":"tom-secret-2"}`}, "user.update", "tom"},
		{req{method: "POST", path: "/api/v1/auth/password", basic: [2]string{"tom", "tom-secret-2"},
			body: `{"old_password":"tom-secret-2","new_password":"tom-secret-3"}`}, "password.change", ""},
		{req{method: "DELETE", path: "/api/v1/users/tom", basic: ada}, "user.delete", "tom"},
		{req{method: "PUT", path: "/api/v1/users/ada", basic: vera, body: `{"password":"tom-secret-4"}`}, "user.update", "ada"},
	}
	for _, st := range steps {
		st.q.remote = "192.0.2.2:1" // not the address locked out above
		r := call(t, h, st.q)
		e := s.audit.latest(1)[0]
		if e.Action != st.action || e.Target != st.target || e.User != st.q.basic[0] || e.Status != r.status {
			t.Errorf("%s %s (%d) recorded %+v, want %s on %q by %s", st.q.method, st.q.path, r.status, e, st.action, st.target, st.q.basic[0])
		}
	}
	entries, _ := json.Marshal(s.audit.latest(auditEntries))
	all := string(entries)
	for _, l := range logs.All() {
		all += l.Message + fmt.Sprint(l.ContextMap())
	}
	for i := 1; i <= 4; i++ {
		if pw := fmt.Sprintf("tom-secret-%d", i); strings.Contains(all, pw) {
			t.Errorf("%q appears in the audit entries or the log", pw)
		}
	}
	for _, pw := range []string{"wrong-guess-pass", veraPassword, adaPassword} {
		if strings.Contains(all, pw) {
			t.Errorf("%q appears in the audit entries or the log", pw)
		}
	}
}
