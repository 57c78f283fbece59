package core

import (
	"errors"
	"net"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// The interfaces in this file are optional extensions an Authenticator may
// implement; core finds them by type assertion. Like Authenticator they take
// only plain parameters, so package auth satisfies them without importing core.

// EnhancedAuthenticator runs MQTT 5 enhanced authentication (4.12): a
// CONNECT carrying an Authentication Method, then AUTH packets both ways.
// Core calls AuthStep once with the CONNECT's Authentication Data (state nil),
// then once per AUTH from the client, passing back the state the previous
// step returned. A step returns the data to send to the client and either
// done (the client is authenticated as username) or not done (core sends
// AUTH Continue authentication and waits), or an error to refuse: a
// codec.ReasonCode error is sent as is, anything else as Not Authorized.
// The same steps serve re-authentication (AUTH Re-authenticate) later on
// the connection.
type EnhancedAuthenticator interface {
	AuthStep(method, clientID string, state any, data []byte, remote net.Addr, listener string) (
		reply []byte, next any, done bool, username string, err error)
}

// LoginAuthenticator is an Authenticator whose logins can name the user and
// end: a JWT names the user in a claim and expires at its exp. Core calls
// Login in place of Authenticate (with the same arguments and refusals). A
// non-empty user is the client's user name from then on, for the ACL and the
// session's owner (the CONNECT may have none); a non-zero expires is when the
// login ends, and core then closes the connection: MQTT 5 clients get
// DISCONNECT Maximum connect time (0xA0), the code EMQX sends when a token
// expires, and earlier versions a closed connection. A wrapper that screens
// user names (reserved names) must check user too.
type LoginAuthenticator interface {
	Login(clientID, username string, password []byte, remote net.Addr, listener, crossOrigin string) (
		user string, expires time.Time, err error)
}

// ConnectionObserver is told when a connection that passed CONNECT ends, so
// an authenticator can detect flapping clients. reason is a CloseReason name.
type ConnectionObserver interface {
	ClientDisconnected(clientID, username string, remote net.Addr, listener string, connectedFor time.Duration, reason string)
}

// login runs the Authenticator for a CONNECT without enhanced
// authentication: Login when it has one (LoginAuthenticator), else
// Authenticate. It sets the user name a login names and arms the close at
// its end.
func (c *client) login(password []byte, crossOrigin string) error {
	la, ok := c.srv.auth.(LoginAuthenticator)
	if !ok {
		return c.srv.auth.Authenticate(c.id, c.username, password, c.conn.RemoteAddr(), c.listener, crossOrigin)
	}
	user, expires, err := la.Login(c.id, c.username, password, c.conn.RemoteAddr(), c.listener, crossOrigin)
	if err != nil {
		return err
	}
	if user != "" {
		c.username = user
	}
	if !expires.IsZero() {
		// A timer per expiring login, stopped when the connection ends
		// (finish): few connections carry one, and its moment is exact,
		// which the keepalive wheel's ticks are not.
		c.more().expiry = time.AfterFunc(time.Until(expires), func() {
			c.log(zap.InfoLevel, "closing connection: its login expired", zap.Time("expired", expires))
			c.closeWhy(CloseLoginExpired, codec.MaximumConnectTime, "login expired")
		})
	}
	return nil
}

// authReason is the CONNACK or DISCONNECT code for an authentication error.
func authReason(err error) codec.ReasonCode {
	var rc codec.ReasonCode
	if errors.As(err, &rc) && rc.IsError() {
		return rc
	}
	return codec.NotAuthorized
}

// enhancedAuth runs the CONNECT-time exchange (4.12.1): AuthStep, and
// while it is not done, AUTH Continue authentication to the client and its
// AUTH back, all within the CONNECT deadline.
func (c *client) enhancedAuth(ea EnhancedAuthenticator, method string, data []byte) (string, []byte, error) {
	var state any
	for {
		reply, next, done, user, err := ea.AuthStep(method, c.id, state, data, c.conn.RemoteAddr(), c.listener)
		if err != nil {
			return "", nil, err
		}
		if done {
			return user, reply, nil
		}
		state = next
		c.sendAuth(codec.ContinueAuthentication, method, reply)
		p, err := c.r.ReadPacket()
		if err != nil {
			return "", nil, err
		}
		a, ok := p.(*codec.Auth)
		if !ok || a.ReasonCode != codec.ContinueAuthentication || string(a.Props.AuthMethod) != method {
			return "", nil, codec.ProtocolError // [MQTT-4.12.0-1] .. [MQTT-4.12.0-4]
		}
		data = clone(a.Props.AuthData)
	}
}

func (c *client) sendAuth(rc codec.ReasonCode, method string, data []byte) {
	a := &codec.Auth{ReasonCode: rc}
	a.Props.AuthMethod = []byte(method)
	a.Props.AuthData = data
	c.send(a)
}

// handleAuth runs re-authentication (4.12.1): AUTH Re-authenticate starts
// it, AUTH Continue authentication carries it on; the method must be the
// one agreed at CONNECT [MQTT-4.12.1-1]. A failure ends the connection.
func (c *client) handleAuth(p *codec.Auth) bool {
	x := c.extra
	if x == nil || x.authMethod == "" || string(p.Props.AuthMethod) != x.authMethod {
		return c.protocolError("AUTH without the authentication method agreed at CONNECT [MQTT-4.12.0-7]", codec.ProtocolError)
	}
	switch {
	case p.ReasonCode == codec.ReAuthenticate && !x.reauthing:
		x.reauth, x.reauthing = nil, true
	case p.ReasonCode == codec.ContinueAuthentication && x.reauthing:
	default:
		return c.protocolError("unexpected AUTH reason code", codec.ProtocolError)
	}
	ea := c.srv.auth.(EnhancedAuthenticator) // authMethod is set only when it is one
	reply, next, done, _, err := ea.AuthStep(x.authMethod, c.id, x.reauth, p.Props.AuthData, c.conn.RemoteAddr(), c.listener)
	if err != nil {
		c.log(zap.InfoLevel, "closing connection: re-authentication failed", zap.Error(err))
		c.close(CloseAuthFailed, codec.NotAuthorized) // the DISCONNECT code set has no Bad user name or password
		return false
	}
	if done {
		x.reauth, x.reauthing = nil, false
		c.sendAuth(codec.Success, x.authMethod, reply)
		return true
	}
	x.reauth = next
	c.sendAuth(codec.ContinueAuthentication, x.authMethod, reply)
	return true
}
