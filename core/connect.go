package core

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// handshake reads and answers CONNECT, stage by stage; each stage may
// refuse the connection, and false means it was refused or lost:
//
//   - readConnect: the CONNECT itself, within connect_timeout and the
//     pre-login budget;
//   - identify: keepalive, client id, user name, traces;
//   - admit: the connection limit;
//   - authenticate: password login (or the enhanced method's check);
//   - takeWill: the will's topic and retain;
//   - negotiate: rate limits, windows, topic aliases, session expiry;
//   - authenticateEnhanced: an enhanced-auth exchange, after which the
//     CONNECT's bytes are gone;
//   - authorizeWill: the will against the rights of the user now known;
//   - loggedIn: CONNACK's properties, and the full packet size;
//   - claim: the client id cluster-wide;
//   - takeSession: attach (take over or resume the session);
//   - connack: CONNACK queued, the connection counted and logged.
func (c *client) handshake() bool {
	h := connecting{c: c, serverKA: -1}
	return h.readConnect() &&
		h.identify() &&
		h.admit() &&
		h.authenticate() &&
		h.takeWill() &&
		h.negotiate() &&
		h.authenticateEnhanced() &&
		h.authorizeWill() &&
		h.loggedIn() &&
		h.claim() &&
		h.takeSession() &&
		h.connack()
}

// connecting is one CONNECT handshake: its stages, and what they hand on
// to each other. It lives on the handshake's stack.
type connecting struct {
	c *client
	// cp is the CONNECT. It aliases the read buffer: valid until
	// authenticateEnhanced, which reads more packets.
	cp              *codec.Connect
	logID, logUser  string // for the log, copied from cp
	cleanStart      bool
	assigned        bool   // the client id is the server's [MQTT-3.1.3-6]
	serverKA        int    // Server Keep Alive to announce, -1 for none
	expiry          uint32 // the session expiry granted
	requestedExpiry uint32
	authMethod      string // enhanced authentication's, "" for none
	authData        []byte
	enhanced        EnhancedAuthenticator
	traces          *traceSet // the traces matched (Server.traces when matched)
	ack             codec.Connack
}

// readConnect reads the CONNECT, within connect_timeout and, until
// CONNACK, the pre-login budget.
func (h *connecting) readConnect() bool {
	c, srv := h.c, h.c.srv
	connectTimeout := time.Duration(srv.live.connectTimeout.Load())
	_ = c.conn.SetReadDeadline(time.Now().Add(connectTimeout))
	// Until CONNACK the client is nobody: its packets are bounded by
	// MaxConnectSize, and what they need beyond the read buffer comes from
	// the budget all such connections share.
	c.r.MaxPacketSize = srv.opts.MaxConnectSize
	c.r.SetBudget(&srv.preLogin)
	p, err := c.r.ReadPacket()
	if err != nil {
		h.badConnect(err, connectTimeout)
		return false
	}
	cp, ok := p.(*codec.Connect)
	if !ok {
		c.log(zap.WarnLevel, "closing connection: first packet is not CONNECT [MQTT-3.1.0-1]", zap.Stringer("type", p.Type()))
		c.close(CloseProtocolError, 0)
		return false
	}
	srv.stats.connectsIn.Add(1)
	c.version = cp.ProtocolVersion
	c.r.Version = cp.ProtocolVersion
	c.bridge = cp.Bridge
	// cp aliases the read buffer, which an enhanced-auth exchange reuses:
	// what the log needs is copied now.
	h.cp, h.logID, h.logUser, h.cleanStart = cp, string(cp.ClientID), string(cp.Username), cp.CleanStart
	return true
}

// badConnect closes a connection whose CONNECT could not be read (err),
// with the reason that fits.
func (h *connecting) badConnect(err error, connectTimeout time.Duration) {
	c, srv := h.c, h.c.srv
	var ce *codec.Error
	switch {
	case errors.Is(err, codec.ErrBudget):
		srv.stats.preLogin.Add(1)
		srv.warnRarely(&srv.warned.preLogin, "refusing connections: connections that have not logged in hold the whole pre-login memory budget",
			zap.Int64("pre_login_memory", srv.opts.PreLoginMemory), zap.String("remote", c.remoteAddr()))
		c.close(CloseBusy, 0)
	case errors.Is(err, codec.ErrPacketTooLarge):
		c.log(zap.WarnLevel, "refusing connection: CONNECT larger than max_connect_size", zap.Int("max_connect_size", srv.opts.MaxConnectSize))
		c.close(ClosePacketTooLarge, 0)
	case errors.As(err, &ce):
		c.log(zap.WarnLevel, "refusing connection: bad CONNECT", zap.Error(err))
		if ce.Code == codec.UnsupportedProtocolVersion {
			// Answer in the oldest form, which every client can read [MQTT-3.1.2-2].
			c.version = codec.V311
			c.send(&codec.Connack{ReasonCode: codec.UnsupportedProtocolVersion})
			c.close(CloseRefused, 0)
			return
		}
		c.close(CloseMalformed, 0)
	case isTimeout(err):
		c.log(zap.InfoLevel, "closing connection: no CONNECT in time", zap.Duration("timeout", connectTimeout))
		c.close(CloseConnectTimeout, 0)
	default:
		c.close(ClosePeerGone, 0)
	}
}

// refuse answers CONNECT with CONNACK rc and closes the connection for
// reason; it returns false, for the stage that refuses.
func (h *connecting) refuse(rc codec.ReasonCode, reason CloseReason, why string) bool {
	c := h.c
	c.log(zap.InfoLevel, "refusing connection", zap.String("client_id", h.logID),
		zap.String("username", h.logUser), zap.Stringer("reason_code", rc), zap.String("why", why))
	ack := &codec.Connack{ReasonCode: rc}
	if reason != CloseAuthFailed && reason != CloseNotAuthorized { // tell an unauthorized peer nothing more than the code
		ack.Props.ReasonString = []byte(why)
	}
	if reason == CloseAuthFailed {
		c.srv.stats.authFailures.Add(1) // before CONNACK: a client that reads it sees the count
	}
	c.send(ack)
	c.close(reason, 0)
	return false
}

// identify takes the keepalive, the client id [MQTT-3.1.3-3] ..
// [MQTT-3.1.3-9] and the user name, and matches the traces.
func (h *connecting) identify() bool {
	c := h.c
	cp, v5 := h.cp, c.version == codec.V5
	c.keepAlive = time.Duration(cp.KeepAlive) * time.Second
	// Only MQTT 5 can tell a client its keepalive changed (Server Keep Alive).
	if m := uint16(c.srv.live.maxKeepAlive.Load()); m > 0 && v5 && (cp.KeepAlive == 0 || cp.KeepAlive > m) {
		c.keepAlive = time.Duration(m) * time.Second
		h.serverKA = int(m)
	}
	c.id = string(cp.ClientID)
	if c.id == "" {
		if !v5 && (!cp.CleanStart || c.version == codec.V31) {
			return h.refuse(codec.ClientIdentifierNotValid, CloseRefused, "empty client id without clean session [MQTT-3.1.3-8]")
		}
		c.id = newClientID()
		h.assigned = true
	}
	c.username = string(cp.Username)
	if id, ok := transportUsername(c.conn); ok {
		c.username = id // the client certificate's identity, not what CONNECT says
	}
	h.traces = c.matchTrace(c.id, c.username)
	if t := c.trace.Load(); t != nil {
		t.in(c, cp)
	}
	return true
}

// admit refuses a connection over max_connections.
func (h *connecting) admit() bool {
	c := h.c
	// connected already counts this connection (ServeConn added it).
	if max := c.srv.live.maxConnections.Load(); max > 0 && c.srv.stats.connected.Load() > max {
		return h.refuse(codec.ServerBusy, CloseRefused, "max connections reached")
	}
	return true
}

// authenticate logs in with the password, or checks that the enhanced
// method asked for can be run (authenticateEnhanced runs it).
func (h *connecting) authenticate() bool {
	c, srv, cp := h.c, h.c.srv, h.cp
	h.authMethod = string(cp.Props.AuthMethod)
	h.authData = clone(cp.Props.AuthData)
	h.enhanced, _ = srv.auth.(EnhancedAuthenticator)
	if h.authMethod != "" && h.enhanced == nil {
		return h.refuse(codec.BadAuthenticationMethod, CloseAuthFailed, "enhanced authentication is not configured")
	}
	if srv.auth != nil && h.authMethod == "" {
		if err := c.login(cp.Password, crossOrigin(c.conn)); err != nil {
			return h.refuse(authReason(err), CloseAuthFailed, err.Error())
		}
	}
	return true
}

// takeWill checks the will's topic and retain flag, and keeps the will.
func (h *connecting) takeWill() bool {
	c, srv, cp := h.c, h.c.srv, h.cp
	willOK := cp.WillFlag
	if cp.WillFlag && brokerTopic(string(cp.WillTopic)) {
		srv.stats.willRefused.Add(1)
		if !cp.Bridge {
			return h.refuse(codec.NotAuthorized, CloseNotAuthorized, "will topic "+string(cp.WillTopic)+" is the broker's")
		}
		// A Mosquitto bridge announces its state on
		// $SYS/broker/connection/… (its notifications, on by default): it
		// connects, without that will, rather than not at all.
		c.log(zap.InfoLevel, "bridge connects without its will: the will topic is the broker's",
			zap.String("client_id", h.logID), zap.ByteString("will_topic", cp.WillTopic))
		willOK = false
	}
	if !willOK {
		return true
	}
	if cp.WillRetain && srv.opts.RetainDisabled {
		return h.refuse(codec.RetainNotSupported, CloseRefused, "will retain with retain disabled")
	}
	wp := codec.Publish{QoS: cp.WillQoS, Retain: cp.WillRetain, Payload: cp.WillPayload, Props: cp.WillProps}
	x := c.more()
	x.will = newMessage(&wp, cp.WillTopic, c.id)
	x.willDelay = cp.WillProps.WillDelay
	// The will's Message Expiry runs from when it is published, not
	// from now (3.1.3.2.4): publishWill sets Expires.
	x.will.Expires = time.Time{}
	if cp.WillProps.Has(codec.PropMessageExpiry) {
		x.willExpiry = time.Duration(cp.WillProps.MessageExpiry) * time.Second
	}
	return true
}

// negotiate sets what the connection may send and receive: the rate
// limits, the window and packet size the client accepts, topic aliases,
// and the session expiry granted.
func (h *connecting) negotiate() bool {
	c, srv, cp, v5 := h.c, h.c.srv, h.cp, h.c.version == codec.V5
	if msgRate, byteRate := srv.live.maxMessageRate.Load(), srv.live.maxByteRate.Load(); msgRate > 0 || byteRate > 0 {
		c.limiter = new(rateLimiter) // most brokers set no limit: 56 B not held per connection
		c.limiter.init(int(msgRate), int(byteRate))
	}
	// What the client accepts from us.
	c.window = int(srv.live.maxInflight.Load())
	if v5 {
		if rm, ok := cp.Props.Num(codec.PropReceiveMaximum); ok && int(rm) < c.window {
			c.window = int(rm)
		}
		c.maxOut = cp.Props.MaximumPacketSize
		c.aliasMaxOut = cp.Props.TopicAliasMaximum
		c.more().inAliases = make([]string, srv.opts.TopicAliasMaximum+1)
	}
	if v5 {
		h.expiry = srv.capExpiry(cp.Props.SessionExpiry)
	} else if !cp.CleanStart {
		h.expiry = neverExpires
	}
	h.requestedExpiry = cp.Props.SessionExpiry
	return true
}

// authenticateEnhanced runs the enhanced-auth exchange, if one was asked
// for: the last step before the session. It reads more packets, after
// which h.cp is no longer valid.
func (h *connecting) authenticateEnhanced() bool {
	c := h.c
	h.cp = nil
	if h.authMethod == "" {
		return true
	}
	user, reply, err := c.enhancedAuth(h.enhanced, h.authMethod, h.authData)
	if err != nil {
		return h.refuse(authReason(err), CloseAuthFailed, err.Error())
	}
	c.username = user
	c.more().authMethod = h.authMethod
	h.ack.Props.AuthMethod = []byte(h.authMethod)
	h.ack.Props.AuthData = reply
	return true
}

// authorizeWill checks the will against the rights of the user now known:
// as in Mosquitto, a will the client could not publish is refused at
// CONNECT.
func (h *connecting) authorizeWill() bool {
	c, srv := h.c, h.c.srv
	if will := c.rare().will; will != nil && srv.authz != nil && !srv.authz.CanWill(c.id, c.username, will.Topic) {
		srv.stats.willRefused.Add(1)
		return h.refuse(codec.NotAuthorized, CloseNotAuthorized, "will topic "+will.Topic+" not allowed")
	}
	return true
}

// loggedIn sets CONNACK's properties, and lifts the pre-login bounds:
// the full packet size, and no share of the budget.
func (h *connecting) loggedIn() bool {
	c, srv, ack := h.c, h.c.srv, &h.ack
	if c.version == codec.V5 {
		ack.Props.SetNum(codec.PropReceiveMaximum, uint32(srv.opts.ReceiveMaximum))
		ack.Props.SetNum(codec.PropMaximumPacketSize, uint32(srv.opts.MaxPacketSize))
		ack.Props.SetNum(codec.PropTopicAliasMaximum, uint32(srv.opts.TopicAliasMaximum))
		if srv.opts.RetainDisabled {
			ack.Props.SetNum(codec.PropRetainAvailable, 0)
		}
		if h.assigned {
			ack.Props.AssignedClientID = []byte(c.id)
		}
		if h.serverKA >= 0 {
			ack.Props.SetNum(codec.PropServerKeepAlive, uint32(h.serverKA))
		}
		if h.expiry != h.requestedExpiry {
			ack.Props.SetNum(codec.PropSessionExpiry, h.expiry)
		}
	}
	c.connectedAt = time.Now().UnixNano()
	c.r.MaxPacketSize = srv.opts.MaxPacketSize
	c.r.SetBudget(nil)
	return true
}

// claim makes the client id this connection's cluster-wide before the
// session is: a connection on another node is taken over. The identity
// checks hold cluster-wide: the node holding the id decides
// (Cluster.Claim), before anything there changes.
func (h *connecting) claim() bool {
	c, srv := h.c, h.c.srv
	if srv.cluster == nil {
		return true
	}
	claim, rc := srv.cluster.Claim(c.id, c.username, !srv.opts.AnySessionOwner, h.cleanStart)
	if claim != 0 {
		c.more().claim = claim
	}
	switch {
	case rc == codec.NotAuthorized:
		srv.stats.ownerRefused.Add(1)
		return h.refuse(rc, CloseNotAuthorized, "the session of client id "+c.id+" on another node belongs to another user")
	case rc != 0:
		return h.refuse(rc, CloseRefused, "client id "+c.id+" connected on another node after this CONNECT was sent")
	}
	return true
}

// takeSession attaches the session: a new one, or the one the client id
// had, taken over from its connection if it has one.
func (h *connecting) takeSession() bool {
	c, srv := h.c, h.c.srv
	_, present, err := srv.attach(c, h.cleanStart, h.expiry)
	if err != nil {
		if claim := c.rare().claim; claim != 0 {
			srv.cluster.Release(c.id, claim, true) // the other user's session stays here
		}
		srv.stats.ownerRefused.Add(1)
		return h.refuse(codec.NotAuthorized, CloseNotAuthorized, "the session of client id "+c.id+" belongs to another user")
	}
	h.ack.SessionPresent = present // [MQTT-3.2.2-2] [MQTT-3.2.2-3]
	return true
}

// connack queues CONNACK, counts the connection and logs it. The session
// is on disk: connected is set with CONNACK queued, under c.mu: the
// writer takes deliveries only once it sees connected, and a close that
// comes after the client could have read CONNACK always sends its
// DISCONNECT.
func (h *connecting) connack() bool {
	c, srv := h.c, h.c.srv
	c.mu.Lock()
	c.connected = true
	c.ctrl = h.ack.Append(c.ctrl, c.version)
	c.mu.Unlock()
	if srv.tracing.set.Load() != h.traces {
		c.matchTrace(c.id, c.username) // a trace started or stopped meanwhile: retraceLocked skipped c
	}
	srv.stats.ctrlOut.Add(1)
	srv.stats.connects.Add(1) // before the writer can send CONNACK
	srv.byListener.connected(c.listener)
	c.wake()
	transport := zap.Skip() // ServeConn without Serve: not known
	if t, ok := srv.byListener.transports.Load(c.listener); ok {
		transport = zap.String("transport", t.(string))
	}
	c.log(zap.InfoLevel, "client connected", zap.String("username", c.username), zap.Uint8("protocol", c.version), transport,
		zap.Bool("clean_start", h.cleanStart), zap.Bool("session_present", h.ack.SessionPresent),
		zap.Duration("keepalive", c.keepAlive), zap.Bool("bridge", c.bridge))
	return true
}

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

// newClientID makes a server-assigned client identifier [MQTT-3.1.3-6].
func newClientID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "xmq-" + base64.RawURLEncoding.EncodeToString(b[:])
}

func (c *client) connectedFor() time.Duration { return time.Since(time.Unix(0, c.connectedAt)) }

// finish runs after the connection ends: it waits for the writer, detaches
// the session, publishes the will when due and logs the disconnect.
func (c *client) finish() {
	if len(c.dirty) > 0 {
		c.flushDirty() // the subscribers of a burst cut short are owed their wake-up
	}
	c.close(ClosePeerGone, 0) // no-op when a reason was set already
	if t := c.rare().expiry; t != nil {
		t.Stop()
	}
	<-c.done
	_ = c.conn.Close()
	c.stopParking()
	c.r.Close() // the read buffer back to the pool
	srv := c.srv
	reason := c.closeReason()
	if c.sess != nil {
		if claim := c.rare().claim; claim != 0 {
			c.sess.mu.Lock()
			kept := c.sess.persistent() && !c.sess.moved
			c.sess.mu.Unlock()
			srv.cluster.Release(c.id, claim, kept)
		}
		srv.detach(c, reason)
		c.log(zap.InfoLevel, "client disconnected", zap.Stringer("reason", reason),
			zap.Duration("connected_for", c.connectedFor()))
	}
	srv.stats.closeReasons[reason].Add(1)
	if obs, ok := srv.auth.(ConnectionObserver); ok && c.sess != nil {
		obs.ClientDisconnected(c.id, c.username, c.conn.RemoteAddr(), c.listener, c.connectedFor(), reason.String())
	}
	srv.connDone(c)
}
