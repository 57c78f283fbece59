package web

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

func TestMQTTTokens(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	tk := NewMQTTTokens()
	tk.now = func() time.Time { return now }
	user, pass, exp := tk.Issue(RoleViewer, "key:grafana", time.Minute)
	if user != "$dashboard:viewer:key:grafana" || !exp.Equal(now.Add(time.Minute)) {
		t.Fatalf("Issue: user %q, expires %v", user, exp)
	}
	if role, err := tk.Check(user, []byte(pass)); err != nil || role != RoleViewer {
		t.Fatalf("Check of a fresh password: %v, %v", role, err)
	}

	other := NewMQTTTokens() // another process: another key
	other.now = tk.now
	_, otherPass, _ := other.Issue(RoleViewer, "key:grafana", time.Minute)
	expStr, mac, _ := strings.Cut(strings.TrimPrefix(pass, mqttPasswordPrefix), ".")
	later := mqttPasswordPrefix + "1800000000." + mac // a later expiry with the old MAC
	for _, tt := range []struct {
		name, user, pass string
		want             error
	}{
		{"another key", user, otherPass, errMQTTPasswordWrong},
		{"role raised", "$dashboard:admin:key:grafana", pass, errMQTTPasswordWrong},
		{"other user", "$dashboard:viewer:admin", pass, errMQTTPasswordWrong},
		{"expiry moved", user, later, errMQTTPasswordWrong},
		{"unknown role", "$dashboard:root:key:grafana", pass, errMQTTPasswordForm},
		{"no prefix", user, strings.TrimPrefix(pass, mqttPasswordPrefix), errMQTTPasswordForm},
		{"bad expiry", user, mqttPasswordPrefix + "x." + mac, errMQTTPasswordForm},
		{"bad mac", user, mqttPasswordPrefix + expStr + ".!!", errMQTTPasswordForm},
		{"empty", user, "", errMQTTPasswordForm},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tk.Check(tt.user, []byte(tt.pass))
			if !errors.Is(err, tt.want) {
				t.Errorf("Check: %v, want %v", err, tt.want)
			}
			var rc codec.ReasonCode
			if !errors.As(err, &rc) || rc != codec.BadUserNameOrPassword {
				t.Errorf("Check: %v does not carry Bad User Name or Password", err)
			}
		})
	}

	now = now.Add(time.Minute)
	if _, err := tk.Check(user, []byte(pass)); !errors.Is(err, errMQTTPasswordExpired) {
		t.Errorf("Check at expiry: %v, want expired", err)
	}
}

// innerAuth records what reaches the wrapped authenticator and authorizer.
type innerAuth struct {
	calls atomic.Int64
}

func (a *innerAuth) Authenticate(_, username string, password []byte, _ net.Addr, _, _ string) error {
	a.calls.Add(1)
	if username == "alice" && string(password) == "pw" {
		return nil
	}
	return codec.BadUserNameOrPassword
}
func (a *innerAuth) CanPublish(_, username, topic string) bool {
	a.calls.Add(1)
	return topic == "alice/out"
}
func (a *innerAuth) CanWill(_, username, topic string) bool {
	a.calls.Add(1)
	return topic == "alice/out"
}
func (a *innerAuth) CanSubscribe(_, username, filter string) bool {
	a.calls.Add(1)
	return filter == "alice/in"
}
func (a *innerAuth) ReadsAll(_, username, filter string) bool {
	a.calls.Add(1)
	return filter == "alice/in"
}
func (a *innerAuth) CanRead(_, username, topic string) bool {
	a.calls.Add(1)
	return topic == "alice/in"
}
func (a *innerAuth) Generation() uint64 { return 7 }

// fullAuth is an innerAuth with both optional interfaces.
type fullAuth struct {
	innerAuth
	steps, disconnects atomic.Int64
	stepUser           string
}

func (a *fullAuth) AuthStep(method, clientID string, state any, data []byte, remote net.Addr, listener string) (
	[]byte, any, bool, string, error) {
	a.steps.Add(1)
	return []byte("ok"), nil, true, a.stepUser, nil
}
func (a *fullAuth) ClientDisconnected(clientID, username string, remote net.Addr, listener string, connectedFor time.Duration, reason string) {
	a.disconnects.Add(1)
}

// enhancedOnly and observerOnly have one optional interface each.
type enhancedOnly struct{ f *fullAuth }

func (a enhancedOnly) Authenticate(c, u string, p []byte, r net.Addr, l, o string) error {
	return a.f.Authenticate(c, u, p, r, l, o)
}
func (a enhancedOnly) AuthStep(m, c string, s any, d []byte, r net.Addr, l string) ([]byte, any, bool, string, error) {
	return a.f.AuthStep(m, c, s, d, r, l)
}

type observerOnly struct{ f *fullAuth }

func (a observerOnly) Authenticate(c, u string, p []byte, r net.Addr, l, o string) error {
	return a.f.Authenticate(c, u, p, r, l, o)
}
func (a observerOnly) ClientDisconnected(c, u string, r net.Addr, l string, d time.Duration, why string) {
	a.f.ClientDisconnected(c, u, r, l, d, why)
}

// unwrapping wraps an Authenticator, forwarding Authenticate and Unwrap
// only, as a wrapper does whose other capabilities are found behind it.
type unwrapping struct{ inner core.Authenticator }

func (u unwrapping) Authenticate(c, us string, p []byte, r net.Addr, l, o string) error {
	return u.inner.Authenticate(c, us, p, r, l, o)
}
func (u unwrapping) Unwrap() any { return u.inner }

// TestWrapKeepsOptionalInterfaces: core finds EnhancedAuthenticator by
// type assertion, so the wrapper has it exactly when the wrapped
// authenticator has one, itself or behind wrappers with Unwrap (authAs);
// it is a ConnectionObserver always, telling the wrapped one's observer if
// there is one; and Unwrap gives back what it wraps.
func TestWrapKeepsOptionalInterfaces(t *testing.T) {
	tk := NewMQTTTokens()
	full := &fullAuth{}
	for _, tt := range []struct {
		name               string
		inner              core.Authenticator
		enhanced, observer bool // the wrapped one's
	}{
		{"nil", nil, false, false},
		{"plain", &full.innerAuth, false, false},
		{"enhanced", enhancedOnly{full}, true, false},
		{"observer", observerOnly{full}, false, true},
		{"both", full, true, true},
		{"both, behind a wrapper", unwrapping{full}, true, true},
		{"plain, behind two wrappers", unwrapping{unwrapping{&full.innerAuth}}, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			full.disconnects.Store(0)
			a, _ := tk.Wrap(tt.inner, nil)
			_, enhanced := a.(core.EnhancedAuthenticator)
			obs, observer := a.(core.ConnectionObserver)
			if enhanced != tt.enhanced || !observer {
				t.Fatalf("wrapper: enhanced %v observer %v, want %v true", enhanced, observer, tt.enhanced)
			}
			obs.ClientDisconnected("c", "alice", nil, "tcp", time.Second, "peer_gone")
			if n := full.disconnects.Load(); n != map[bool]int64{true: 1}[tt.observer] {
				t.Errorf("the wrapped observer heard of %d disconnects, want %v", n, tt.observer)
			}
			if u := a.(interface{ Unwrap() any }).Unwrap(); u != any(tt.inner) {
				t.Errorf("Unwrap() = %v, want %v", u, tt.inner)
			}
		})
	}
	if _, ok := authAs[core.EnhancedAuthenticator](nil); ok {
		t.Error("authAs found a capability on nil")
	}
	_, z := tk.Wrap(nil, &full.innerAuth)
	if u := z.(interface{ Unwrap() any }).Unwrap(); u != any(&full.innerAuth) {
		t.Errorf("the Authorizer's Unwrap() = %v, want the wrapped one", u)
	}

	// Forwarding, and the reserved names kept from the wrapped one.
	a, _ := tk.Wrap(full, nil)
	ea := a.(core.EnhancedAuthenticator)
	if _, _, done, user, err := ea.AuthStep("SCRAM-SHA-256", "c", nil, nil, nil, "tcp"); err != nil || !done || user != "" || full.steps.Load() != 1 {
		t.Errorf("AuthStep: done %v user %q err %v, steps %d", done, user, err, full.steps.Load())
	}
	full.stepUser = DashboardMQTTUser(RoleAdmin, "admin")
	if _, _, done, _, err := ea.AuthStep("SCRAM-SHA-256", "c", nil, nil, nil, "tcp"); !errors.Is(err, codec.NotAuthorized) || done {
		t.Errorf("AuthStep ending as %q: done %v err %v, want Not Authorized", full.stepUser, done, err)
	}
	obs := a.(core.ConnectionObserver)
	obs.ClientDisconnected("c", "alice", nil, "tcp", time.Second, "peer_gone")
	obs.ClientDisconnected("d", DashboardMQTTUser(RoleAdmin, "admin"), nil, "ws", time.Second, "peer_gone")
	if n := full.disconnects.Load(); n != 1 {
		t.Errorf("wrapped observer told of %d disconnects, want alice's only", n)
	}
}

// TestWrapThroughCore connects real sessions over net.Pipe: dashboard
// passwords are accepted or refused without the wrapped authenticator,
// the roles' ACLs apply, and everyone else meets the wrapped one.
func TestWrapThroughCore(t *testing.T) {
	tk := NewMQTTTokens()
	inner := &innerAuth{}
	authn, authz := tk.Wrap(inner, inner)
	logs, observed := observer.New(zap.DebugLevel)
	srv, err := core.New(core.Options{SysInterval: -1}, core.Config{Authenticator: authn, Authorizer: authz, Log: zap.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	var w, r atomic.Int64
	connect := func(id, user, pass string) (*mqtttest.Conn, codec.ReasonCode) {
		t.Helper()
		return dial(t, srv, "ws", codec.Connect{ProtocolVersion: codec.V5, CleanStart: true, ClientID: []byte(id),
			UsernameFlag: user != "", Username: []byte(user), PasswordFlag: pass != "", Password: []byte(pass)}, &w, &r)
	}
	subscribe := func(c *mqtttest.Conn, id uint16, filter string) codec.ReasonCode {
		t.Helper()
		c.Send(&codec.Subscribe{PacketID: id, Subscriptions: []codec.Subscription{{Filter: []byte(filter), QoS: 1}}})
		ack, ok := c.Next().(*codec.Suback)
		if !ok || len(ack.ReasonCodes) != 1 {
			t.Fatalf("SUBSCRIBE %s: no SUBACK", filter)
		}
		return ack.ReasonCodes[0]
	}
	publish := func(c *mqtttest.Conn, id uint16, topic string) codec.ReasonCode {
		t.Helper()
		c.Send(&codec.Publish{Topic: []byte(topic), QoS: 1, PacketID: id, Payload: []byte("x")})
		for {
			switch p := c.Next().(type) {
			case *codec.Ack:
				return p.ReasonCode
			case *codec.Publish: // its own subscription's copy
				c.Send(&codec.Ack{Kind: codec.PUBACK, PacketID: p.PacketID})
			default:
				t.Fatalf("PUBLISH %s: got %T", topic, p)
			}
		}
	}

	vUser, vPass, _ := tk.Issue(RoleViewer, "key:grafana", time.Minute)
	aUser, aPass, _ := tk.Issue(RoleAdmin, "admin", time.Minute)
	tk.now = func() time.Time { return time.Now().Add(-time.Hour) }
	oldUser, oldPass, _ := tk.Issue(RoleAdmin, "admin", time.Minute)
	tk.now = time.Now

	// Refused: expired, forged (a viewer's password under an admin's name), wrong.
	for _, tt := range []struct{ name, user, pass string }{
		{"expired", oldUser, oldPass},
		{"forged role", DashboardMQTTUser(RoleAdmin, "key:grafana"), vPass},
		{"not a token", aUser, "admin-password"},
		{"no password", aUser, ""},
	} {
		if _, rc := connect("bad-"+tt.name, tt.user, tt.pass); rc != codec.BadUserNameOrPassword {
			t.Errorf("%s: CONNACK %v, want Bad User Name or Password", tt.name, rc)
		}
	}
	if n := inner.calls.Load(); n != 0 {
		t.Errorf("the wrapped authenticator saw %d dashboard logins, want none", n)
	}

	// The viewer: $SYS only, no publishing.
	viewer, rc := connect("viewer", vUser, vPass)
	if rc != codec.Success {
		t.Fatalf("viewer CONNACK %v", rc)
	}
	for _, tt := range []struct {
		filter string
		want   codec.ReasonCode
	}{
		{"$SYS/#", codec.GrantedQoS1},
		{"$SYS/broker/clients/connected", codec.GrantedQoS1},
		{"#", codec.NotAuthorized},
		{"sensors/+/temp", codec.NotAuthorized},
		{"$share/g/$SYS/#", codec.NotAuthorized},
	} {
		if got := subscribe(viewer, 1, tt.filter); got != tt.want {
			t.Errorf("viewer SUBSCRIBE %s: %v, want %v", tt.filter, got, tt.want)
		}
	}
	if got := publish(viewer, 2, "sensors/1/temp"); got != codec.NotAuthorized {
		t.Errorf("viewer PUBLISH: %v, want Not Authorized", got)
	}
	if got := publish(viewer, 3, "$SYS/broker/fake"); got != codec.NotAuthorized {
		t.Errorf("viewer PUBLISH to $SYS: %v, want Not Authorized", got)
	}

	// The admin: anything.
	admin, rc := connect("admin", aUser, aPass)
	if rc != codec.Success {
		t.Fatalf("admin CONNACK %v", rc)
	}
	for _, f := range []string{"#", "$SYS/#", "sensors/+/temp"} {
		if got := subscribe(admin, 1, f); got != codec.GrantedQoS1 {
			t.Errorf("admin SUBSCRIBE %s: %v", f, got)
		}
	}
	if got := publish(admin, 2, "sensors/1/temp"); got != codec.Success {
		t.Errorf("admin PUBLISH: %v", got)
	}
	if n := inner.calls.Load(); n != 0 {
		t.Errorf("the wrapped authorizer was asked %d times about dashboard users, want never", n)
	}

	// Everyone else: the wrapped authenticator and authorizer decide.
	if _, rc := connect("mallory", "mallory", "pw"); rc != codec.BadUserNameOrPassword {
		t.Errorf("mallory: CONNACK %v", rc)
	}
	alice, rc := connect("alice", "alice", "pw")
	if rc != codec.Success {
		t.Fatalf("alice CONNACK %v", rc)
	}
	if got := subscribe(alice, 1, "alice/in"); got != codec.GrantedQoS1 {
		t.Errorf("alice SUBSCRIBE alice/in: %v", got)
	}
	if got := subscribe(alice, 2, "$SYS/#"); got != codec.NotAuthorized {
		t.Errorf("alice SUBSCRIBE $SYS/#: %v", got)
	}
	if got := publish(alice, 3, "alice/out"); got != codec.Success {
		t.Errorf("alice PUBLISH alice/out: %v", got)
	}
	if got := publish(alice, 4, "elsewhere"); got != codec.NotAuthorized {
		t.Errorf("alice PUBLISH elsewhere: %v", got)
	}
	if inner.calls.Load() == 0 {
		t.Error("the wrapped authenticator and authorizer were never asked")
	}
	// The wrapped one has no enhanced authentication, so neither has the wrapper.
	scram := codec.Connect{ProtocolVersion: codec.V5, CleanStart: true, ClientID: []byte("scram")}
	scram.Props.AuthMethod = []byte("SCRAM-SHA-256")
	if _, rc := dial(t, srv, "ws", scram, &w, &r); rc != codec.BadAuthenticationMethod {
		t.Errorf("CONNECT with an authentication method: %v, want Bad Authentication Method", rc)
	}

	if ok, refused := tk.Logins(); ok != 2 || refused != 4 {
		t.Errorf("Logins: %d accepted, %d refused; want 2 and 4", ok, refused)
	}
	// No password in any log line.
	for _, e := range observed.All() {
		line := e.Message
		for _, f := range e.Context {
			line += " " + f.String
			if f.Interface != nil {
				if err, ok := f.Interface.(error); ok {
					line += " " + err.Error()
				}
			}
		}
		for _, p := range []string{vPass, aPass, oldPass} {
			if strings.Contains(line, p) || strings.Contains(line, strings.TrimPrefix(p, mqttPasswordPrefix)) {
				t.Errorf("a log line holds a dashboard password: %s", line)
			}
		}
	}
}

// loginAuth is an innerAuth with core.LoginAuthenticator: its logins name
// loginUser.
type loginAuth struct {
	innerAuth
	loginUser string
}

func (a *loginAuth) Login(c, u string, p []byte, r net.Addr, l, o string) (string, time.Time, error) {
	return a.loginUser, time.Unix(1e9, 0), nil
}

// TestWrapLogin: the wrapper is always a core.LoginAuthenticator: it
// forwards a wrapped Login's user name and expiry, refuses one that names a
// dashboard user (a token's claim must not become a dashboard role), and is
// Authenticate when the wrapped authenticator has no Login, itself or
// behind Unwrap.
func TestWrapLogin(t *testing.T) {
	tk := NewMQTTTokens()
	inner := &loginAuth{loginUser: "alice"}
	a, _ := tk.Wrap(inner, nil)
	la, ok := a.(core.LoginAuthenticator)
	if !ok {
		t.Fatal("the wrapper is no LoginAuthenticator")
	}
	if user, exp, err := la.Login("c", "", []byte("token"), nil, "tcp", ""); err != nil || user != "alice" || exp.Unix() != 1e9 {
		t.Errorf("Login = %q %v %v", user, exp, err)
	}
	inner.loginUser = DashboardMQTTUser(RoleAdmin, "admin")
	if user, _, err := la.Login("c", "", []byte("token"), nil, "tcp", ""); !errors.Is(err, codec.NotAuthorized) || user != "" {
		t.Errorf("Login naming %q: %q %v, want Not Authorized", inner.loginUser, user, err)
	}
	behind, _ := tk.Wrap(unwrapping{inner}, nil) // found through Unwrap
	if user, _, err := behind.(core.LoginAuthenticator).Login("c", "", []byte("token"), nil, "tcp", ""); !errors.Is(err, codec.NotAuthorized) || user != "" {
		t.Errorf("Login behind a wrapper naming %q: %q %v, want Not Authorized", inner.loginUser, user, err)
	}
	plain, _ := tk.Wrap(&inner.innerAuth, nil)
	if user, exp, err := plain.(core.LoginAuthenticator).Login("c", "alice", []byte("pw"), nil, "tcp", ""); err != nil || user != "" || !exp.IsZero() {
		t.Errorf("Login without a wrapped Login = %q %v %v, want Authenticate's answer", user, exp, err)
	}
}
