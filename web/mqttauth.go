package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// The dashboard's own MQTT connections (the overview's $SYS feed and the
// MQTT client page) log in to the broker with the dashboard user's
// session, so they work from another machine with anonymous access off.
// GET /api/v1/auth/mqtt gives the page a user name and a short-lived
// password:
//
//	user name  $dashboard:ROLE:USER            e.g. $dashboard:admin:admin, $dashboard:viewer:key:grafana
//	password   xmqd1.EXPIRY.MAC                EXPIRY in Unix seconds, MAC the base64url HMAC-SHA256
//	                                           of the user name and EXPIRY under a per-process random key
//
// MQTTTokens.Wrap puts the check of these passwords in front of the
// broker's Authenticator and Authorizer. User names starting with
// DashboardUserPrefix are reserved: they are accepted with a valid
// password only and never reach the wrapped authenticator, so the role in
// the user name can be trusted when the Authorizer sees it.

// DashboardUserPrefix starts the MQTT user names of dashboard sessions.
const DashboardUserPrefix = "$dashboard:"

// DashboardMQTTTTL is how long a dashboard MQTT password may be used to
// CONNECT; a connection outlives it.
const DashboardMQTTTTL = 2 * time.Minute

const mqttPasswordPrefix = "xmqd1."

// Errors of a dashboard MQTT login; each wraps the CONNACK code and never
// holds the password.
var (
	errMQTTPasswordForm    = fmt.Errorf("web: malformed dashboard MQTT password: %w", codec.BadUserNameOrPassword)
	errMQTTPasswordExpired = fmt.Errorf("web: dashboard MQTT password expired: %w", codec.BadUserNameOrPassword)
	errMQTTPasswordWrong   = fmt.Errorf("web: wrong dashboard MQTT password: %w", codec.BadUserNameOrPassword)
	errMQTTReservedName    = fmt.Errorf("web: user names starting with %q are the dashboard's: %w", DashboardUserPrefix, codec.NotAuthorized)
)

// MQTTTokens issues the dashboard's MQTT passwords and checks them at
// CONNECT. The key is made at random by NewMQTTTokens and never leaves
// the process, so passwords die with it. Safe for concurrent use.
type MQTTTokens struct {
	key [32]byte
	now func() time.Time

	accepted, refused atomic.Int64 // CONNECTs with a dashboard user name
}

// NewMQTTTokens returns an issuer with a fresh random key.
func NewMQTTTokens() *MQTTTokens {
	t := &MQTTTokens{now: time.Now}
	_, _ = rand.Read(t.key[:]) // never fails on supported platforms
	return t
}

// DashboardMQTTUser is the MQTT user name of a dashboard principal.
func DashboardMQTTUser(role Role, user string) string {
	return DashboardUserPrefix + string(role) + ":" + user
}

// dashboardRole returns the role a reserved user name carries; "" when the
// name is malformed.
func dashboardRole(username string) Role {
	rest, ok := strings.CutPrefix(username, DashboardUserPrefix)
	if !ok {
		return ""
	}
	role, _, _ := strings.Cut(rest, ":")
	switch Role(role) {
	case RoleViewer, RoleAdmin:
		return Role(role)
	}
	return ""
}

func (t *MQTTTokens) mac(username string, expiry int64) []byte {
	m := hmac.New(sha256.New, t.key[:])
	m.Write([]byte(username))
	m.Write([]byte{0})
	m.Write(strconv.AppendInt(nil, expiry, 10))
	return m.Sum(nil)
}

// Issue returns the MQTT user name and password of user with role, good
// for CONNECTs until ttl has passed.
func (t *MQTTTokens) Issue(role Role, user string, ttl time.Duration) (username, password string, expires time.Time) {
	username = DashboardMQTTUser(role, user)
	expires = t.now().Add(ttl).Truncate(time.Second)
	exp := expires.Unix()
	password = mqttPasswordPrefix + strconv.FormatInt(exp, 10) + "." + base64.RawURLEncoding.EncodeToString(t.mac(username, exp))
	return username, password, expires
}

// Check verifies a dashboard user name's password and returns its role.
func (t *MQTTTokens) Check(username string, password []byte) (Role, error) {
	role := dashboardRole(username)
	rest, ok := strings.CutPrefix(string(password), mqttPasswordPrefix)
	expStr, macStr, ok2 := strings.Cut(rest, ".")
	if role == "" || !ok || !ok2 {
		return "", errMQTTPasswordForm
	}
	exp, err := strconv.ParseInt(expStr, 10, 64)
	if err != nil {
		return "", errMQTTPasswordForm
	}
	got, err := base64.RawURLEncoding.DecodeString(macStr)
	if err != nil {
		return "", errMQTTPasswordForm
	}
	if !hmac.Equal(got, t.mac(username, exp)) {
		return "", errMQTTPasswordWrong
	}
	if t.now().Unix() >= exp {
		return "", errMQTTPasswordExpired
	}
	return role, nil
}

// Logins returns the CONNECTs with a dashboard user name accepted and
// refused so far.
func (t *MQTTTokens) Logins() (accepted, refused int64) {
	return t.accepted.Load(), t.refused.Load()
}

// Wrap returns authn and authz with the dashboard's logins in front:
//
//   - a CONNECT whose user name starts with DashboardUserPrefix is
//     accepted with a valid password (Check) and refused otherwise,
//     without asking authn;
//   - a dashboard viewer may subscribe to $SYS/# only and publish nothing;
//     a dashboard admin may publish and subscribe anything (the MQTT
//     client page);
//   - everything else goes to authn and authz unchanged; nil ones allow
//     everything, as in core.Config.
//
// authn's optional capabilities are found by authAs, on authn or behind
// it through Unwrap. The returned Authenticator implements
// core.EnhancedAuthenticator exactly when authn has one (core refuses an
// authentication method at once without it), and core.LoginAuthenticator
// and core.ConnectionObserver always: Login is Authenticate when authn has
// none, and a disconnect goes to authn's observer, if any. An enhanced
// exchange or a login that ends with a reserved user name is refused. Both
// wrappers have Unwrap, which returns authn and authz.
func (t *MQTTTokens) Wrap(authn core.Authenticator, authz core.Authorizer) (core.Authenticator, core.Authorizer) {
	a := &tokenAuthn{t: t, inner: authn}
	a.login, _ = authAs[core.LoginAuthenticator](authn)
	a.observer, _ = authAs[core.ConnectionObserver](authn)
	z := tokenAuthz{inner: authz}
	if ea, ok := authAs[core.EnhancedAuthenticator](authn); ok {
		return enhancedAuthn{a, ea}, z
	}
	return a, z
}

// authAs finds the optional capability T of an Authenticator or Authorizer:
// a itself, else what it wraps, unwrapped until one has T or one has no
// Unwrap, as net/http's ResponseController finds a Flusher behind any
// ResponseWriter wrapper. So a wrapper forwards Unwrap, not each optional
// interface, and implements only the capabilities whose answers it changes
// (a wrapper that filters user names implements Login and AuthStep, or
// they are found behind it, unfiltered). nil has none.
func authAs[T any](a any) (T, bool) {
	for a != nil {
		if t, ok := a.(T); ok {
			return t, true
		}
		u, ok := a.(interface{ Unwrap() any })
		if !ok {
			break
		}
		a = u.Unwrap()
	}
	var none T
	return none, false
}

// tokenAuthn is the wrapping Authenticator; enhancedAuthn adds AuthStep
// when the wrapped one has it. login, observer and enhanced are the wrapped
// one's capabilities (authAs), nil when it has none.
type tokenAuthn struct {
	t        *MQTTTokens
	inner    core.Authenticator
	login    core.LoginAuthenticator
	observer core.ConnectionObserver
}

type enhancedAuthn struct {
	*tokenAuthn
	enhanced core.EnhancedAuthenticator
}

var (
	_ core.LoginAuthenticator    = (*tokenAuthn)(nil)
	_ core.ConnectionObserver    = (*tokenAuthn)(nil)
	_ core.EnhancedAuthenticator = enhancedAuthn{}
	_ interface{ Unwrap() any }  = (*tokenAuthn)(nil)
	_ interface{ Unwrap() any }  = tokenAuthz{}
)

// Unwrap returns the wrapped Authenticator, for authAs.
func (a *tokenAuthn) Unwrap() any { return a.inner }

// Authenticate implements core.Authenticator.
func (a *tokenAuthn) Authenticate(clientID, username string, password []byte, remote net.Addr, listener, crossOrigin string) error {
	if strings.HasPrefix(username, DashboardUserPrefix) {
		if _, err := a.t.Check(username, password); err != nil {
			a.t.refused.Add(1)
			return err
		}
		a.t.accepted.Add(1)
		return nil
	}
	if a.inner == nil {
		return nil
	}
	return a.inner.Authenticate(clientID, username, password, remote, listener, crossOrigin)
}

// Login implements core.LoginAuthenticator: without one in the wrapped
// authenticator it is Authenticate, which core would have called. A login
// that names a reserved user (a token's claim) is refused: only Check
// admits those names.
func (a *tokenAuthn) Login(clientID, username string, password []byte, remote net.Addr, listener, crossOrigin string) (
	string, time.Time, error) {
	if a.login == nil || strings.HasPrefix(username, DashboardUserPrefix) {
		return "", time.Time{}, a.Authenticate(clientID, username, password, remote, listener, crossOrigin)
	}
	user, expires, err := a.login.Login(clientID, username, password, remote, listener, crossOrigin)
	if err == nil && strings.HasPrefix(user, DashboardUserPrefix) {
		return "", time.Time{}, errMQTTReservedName
	}
	return user, expires, err
}

// ClientDisconnected implements core.ConnectionObserver: the wrapped
// authenticator's observer hears of its own clients, never of a dashboard
// session (it never saw one log in); without an observer it is a no-op.
func (a *tokenAuthn) ClientDisconnected(clientID, username string, remote net.Addr, listener string, connectedFor time.Duration, reason string) {
	if a.observer == nil || strings.HasPrefix(username, DashboardUserPrefix) {
		return
	}
	a.observer.ClientDisconnected(clientID, username, remote, listener, connectedFor, reason)
}

// AuthStep implements core.EnhancedAuthenticator.
func (a enhancedAuthn) AuthStep(method, clientID string, state any, data []byte, remote net.Addr, listener string) (
	[]byte, any, bool, string, error) {
	reply, next, done, user, err := a.enhanced.AuthStep(method, clientID, state, data, remote, listener)
	if err == nil && done && strings.HasPrefix(user, DashboardUserPrefix) {
		return nil, nil, false, "", errMQTTReservedName
	}
	return reply, next, done, user, err
}

// tokenAuthz is the wrapping Authorizer. A reserved user name on a
// connection means the password was checked (tokenAuthn), so its role
// decides.
type tokenAuthz struct{ inner core.Authorizer }

// Unwrap returns the wrapped Authorizer, for authAs.
func (z tokenAuthz) Unwrap() any { return z.inner }

// CanPublish implements core.Authorizer.
func (z tokenAuthz) CanPublish(clientID, username, topic string) bool {
	if strings.HasPrefix(username, DashboardUserPrefix) {
		return dashboardRole(username) == RoleAdmin
	}
	return z.inner == nil || z.inner.CanPublish(clientID, username, topic)
}

// CanWill implements core.Authorizer: as CanPublish.
func (z tokenAuthz) CanWill(clientID, username, topic string) bool {
	if strings.HasPrefix(username, DashboardUserPrefix) {
		return dashboardRole(username) == RoleAdmin
	}
	return z.inner == nil || z.inner.CanWill(clientID, username, topic)
}

// CanSubscribe implements core.Authorizer.
func (z tokenAuthz) CanSubscribe(clientID, username, filter string) bool {
	if strings.HasPrefix(username, DashboardUserPrefix) {
		return dashboardReads(username, filter)
	}
	return z.inner == nil || z.inner.CanSubscribe(clientID, username, filter)
}

// ReadsAll implements core.Authorizer: a dashboard principal reads all it
// may subscribe to.
func (z tokenAuthz) ReadsAll(clientID, username, filter string) bool {
	if strings.HasPrefix(username, DashboardUserPrefix) {
		return dashboardReads(username, filter)
	}
	return z.inner == nil || z.inner.ReadsAll(clientID, username, filter)
}

// CanRead implements core.Authorizer.
func (z tokenAuthz) CanRead(clientID, username, topic string) bool {
	if strings.HasPrefix(username, DashboardUserPrefix) {
		return dashboardReads(username, topic)
	}
	return z.inner == nil || z.inner.CanRead(clientID, username, topic)
}

// Generation implements core.Authorizer: the dashboard's rules never change.
func (z tokenAuthz) Generation() uint64 {
	if z.inner == nil {
		return 0
	}
	return z.inner.Generation()
}

// dashboardReads reports whether a dashboard user name may read a topic or
// filter: an admin anything, a viewer $SYS only.
func dashboardReads(username, topicOrFilter string) bool {
	switch dashboardRole(username) {
	case RoleAdmin:
		return true
	case RoleViewer:
		return topicOrFilter == "$SYS" || strings.HasPrefix(topicOrFilter, "$SYS/")
	}
	return false
}
