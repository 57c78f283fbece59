package main

import (
	"net"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/auth"
	"github.com/xmq-io/xmq/bridge"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/bridgelocal"
)

// newBridges makes the bridge manager of a run over srv; Apply starts the
// configured bridges.
func newBridges(srv *core.Server, log *zap.Logger) *bridge.Manager {
	o := srv.Options()
	return bridge.NewManager(bridge.Options{Local: bridgelocal.Local{Server: srv}, ReceiveMaximum: o.ReceiveMaximum,
		MaxPacketSize: o.MaxPacketSize, Log: log.Named("bridge")})
}

// bridgeAuth puts the bridges' reserved logins in front of auth: a
// CONNECT whose client id or user name starts with bridge.UserPrefix is
// decided by the bridge manager (a bridge of this process, on its
// in-process connection, with the process's secret) and never reaches
// auth; such a session may publish and subscribe to anything, as
// Mosquitto's bridges may. Everything else goes to auth unchanged.
// Embedding *auth.Auth keeps its optional interfaces (enhanced
// authentication, logins, the disconnect observer), which bridgeAuth
// overrides only to keep reserved names out of them; Unwrap gives the
// capabilities it does not override to an Unwrap walk (web's Wrap).
type bridgeAuth struct {
	*auth.Auth
	// bridges is set once the broker exists, before any connection.
	bridges *bridge.Manager
}

var (
	_ core.Authenticator         = (*bridgeAuth)(nil)
	_ core.Authorizer            = (*bridgeAuth)(nil)
	_ core.EnhancedAuthenticator = (*bridgeAuth)(nil)
	_ core.ConnectionObserver    = (*bridgeAuth)(nil)
	_ core.LoginAuthenticator    = (*bridgeAuth)(nil)
	_ interface{ Unwrap() any }  = (*bridgeAuth)(nil)
)

// Unwrap returns the wrapped *auth.Auth.
func (b *bridgeAuth) Unwrap() any { return b.Auth }

// Authenticate implements core.Authenticator.
func (b *bridgeAuth) Authenticate(clientID, username string, password []byte, remote net.Addr, listener, crossOrigin string) error {
	if bridge.Reserved(clientID, username) {
		if b.bridges == nil {
			return bridge.ErrReservedName
		}
		return b.bridges.CheckLogin(clientID, username, password, listener)
	}
	return b.Auth.Authenticate(clientID, username, password, remote, listener, crossOrigin)
}

// Login implements core.LoginAuthenticator: as Authenticate, and no login
// gets a bridge's name from its credentials (a token's claim). Without it
// core would call the embedded Auth's Login and skip the check above.
func (b *bridgeAuth) Login(clientID, username string, password []byte, remote net.Addr, listener, crossOrigin string) (
	string, time.Time, error) {
	if bridge.Reserved(clientID, username) {
		return "", time.Time{}, b.Authenticate(clientID, username, password, remote, listener, crossOrigin)
	}
	user, expires, err := b.Auth.Login(clientID, username, password, remote, listener, crossOrigin)
	if err == nil && bridge.Reserved("", user) {
		return "", time.Time{}, bridge.ErrReservedName
	}
	return user, expires, err
}

// AuthStep implements core.EnhancedAuthenticator: no enhanced exchange
// gets a bridge's name.
func (b *bridgeAuth) AuthStep(method, clientID string, state any, data []byte, remote net.Addr, listener string) (
	[]byte, any, bool, string, error) {
	if bridge.Reserved(clientID, "") {
		return nil, nil, false, "", bridge.ErrReservedName
	}
	reply, next, done, user, err := b.Auth.AuthStep(method, clientID, state, data, remote, listener)
	if err == nil && done && bridge.Reserved("", user) {
		return nil, nil, false, "", bridge.ErrReservedName
	}
	return reply, next, done, user, err
}

// ClientDisconnected implements core.ConnectionObserver: a bridge's local
// connection is none of auth's business (flapping bans).
func (b *bridgeAuth) ClientDisconnected(clientID, username string, remote net.Addr, listener string, connectedFor time.Duration, reason string) {
	if bridge.Reserved(clientID, username) {
		return
	}
	b.Auth.ClientDisconnected(clientID, username, remote, listener, connectedFor, reason)
}

// isBridge reports a session of a bridge: only CheckLogin lets its name in.
func isBridge(username string) bool { return strings.HasPrefix(username, bridge.UserPrefix) }

// CanPublish implements core.Authorizer.
func (b *bridgeAuth) CanPublish(clientID, username, topic string) bool {
	return isBridge(username) || b.Auth.CanPublish(clientID, username, topic)
}

// CanWill implements core.Authorizer; a bridge sets no will.
func (b *bridgeAuth) CanWill(clientID, username, topic string) bool {
	return !isBridge(username) && b.Auth.CanWill(clientID, username, topic)
}

// CanSubscribe implements core.Authorizer.
func (b *bridgeAuth) CanSubscribe(clientID, username, filter string) bool {
	return isBridge(username) || b.Auth.CanSubscribe(clientID, username, filter)
}

// ReadsAll implements core.Authorizer.
func (b *bridgeAuth) ReadsAll(clientID, username, filter string) bool {
	return isBridge(username) || b.Auth.ReadsAll(clientID, username, filter)
}

// CanRead implements core.Authorizer.
func (b *bridgeAuth) CanRead(clientID, username, topic string) bool {
	return isBridge(username) || b.Auth.CanRead(clientID, username, topic)
}
