package core

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// handshake reads and answers CONNECT. It returns false when the
// connection was refused or lost.
func (c *client) handshake() bool {
	srv := c.srv
	connectTimeout := time.Duration(srv.live.connectTimeout.Load())
	_ = c.conn.SetReadDeadline(time.Now().Add(connectTimeout))
	// Until CONNACK the client is nobody: its packets are bounded by
	// MaxConnectSize, and what they need beyond the read buffer comes from
	// the budget all such connections share.
	c.r.MaxPacketSize = srv.opts.MaxConnectSize
	c.r.SetBudget(&srv.preLogin)
	p, err := c.r.ReadPacket()
	if err != nil {
		var ce *codec.Error
		switch {
		case errors.Is(err, codec.ErrBudget):
			srv.stats.preLogin.Add(1)
			srv.warnRarely(&srv.preLoginWarn, "refusing connections: connections that have not logged in hold the whole pre-login memory budget",
				zap.Int64("pre_login_memory", srv.opts.PreLoginMemory), zap.String("remote", c.remoteAddr()))
			c.close(CloseBusy, 0)
			return false
		case errors.Is(err, codec.ErrPacketTooLarge):
			c.log(zap.WarnLevel, "refusing connection: CONNECT larger than max_connect_size", zap.Int("max_connect_size", srv.opts.MaxConnectSize))
			c.close(ClosePacketTooLarge, 0)
			return false
		}
		if errors.As(err, &ce) {
			c.log(zap.WarnLevel, "refusing connection: bad CONNECT", zap.Error(err))
			if ce.Code == codec.UnsupportedProtocolVersion {
				// Answer in the oldest form, which every client can read [MQTT-3.1.2-2].
				c.version = codec.V311
				c.send(&codec.Connack{ReasonCode: codec.UnsupportedProtocolVersion})
				c.close(CloseRefused, 0)
				return false
			}
			c.close(CloseMalformed, 0)
			return false
		}
		if isTimeout(err) {
			c.log(zap.InfoLevel, "closing connection: no CONNECT in time", zap.Duration("timeout", connectTimeout))
			c.close(CloseConnectTimeout, 0)
			return false
		}
		c.close(ClosePeerGone, 0)
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
	v5 := c.version == codec.V5

	// cp aliases the read buffer, which an enhanced-auth exchange reuses:
	// what the log needs is copied now.
	logID, logUser := string(cp.ClientID), string(cp.Username)
	cleanStart := cp.CleanStart
	refuse := func(rc codec.ReasonCode, reason CloseReason, why string) bool {
		c.log(zap.InfoLevel, "refusing connection", zap.String("client_id", logID),
			zap.String("username", logUser), zap.Stringer("reason_code", rc), zap.String("why", why))
		ack := &codec.Connack{ReasonCode: rc}
		if reason != CloseAuthFailed && reason != CloseNotAuthorized { // tell an unauthorized peer nothing more than the code
			ack.Props.ReasonString = []byte(why)
		}
		if reason == CloseAuthFailed {
			srv.stats.authFailures.Add(1) // before CONNACK: a client that reads it sees the count
		}
		c.send(ack)
		c.close(reason, 0)
		return false
	}

	c.keepAlive = time.Duration(cp.KeepAlive) * time.Second
	serverKA := -1
	// Only MQTT 5 can tell a client its keepalive changed (Server Keep Alive).
	if m := uint16(srv.live.maxKeepAlive.Load()); m > 0 && v5 && (cp.KeepAlive == 0 || cp.KeepAlive > m) {
		c.keepAlive = time.Duration(m) * time.Second
		serverKA = int(m)
	}

	// Client identifier [MQTT-3.1.3-3] .. [MQTT-3.1.3-9].
	c.id = string(cp.ClientID)
	assigned := false
	if c.id == "" {
		if !v5 && (!cp.CleanStart || c.version == codec.V31) {
			return refuse(codec.ClientIdentifierNotValid, CloseRefused, "empty client id without clean session [MQTT-3.1.3-8]")
		}
		c.id = newClientID()
		assigned = true
	}
	c.username = string(cp.Username)
	if id, ok := transportUsername(c.conn); ok {
		c.username = id // the client certificate's identity, not what CONNECT says
	}
	traces := c.matchTrace(c.id, c.username)
	if t := c.trace.Load(); t != nil {
		t.in(c, cp)
	}

	// connected already counts this connection (ServeConn added it).
	if max := srv.live.maxConnections.Load(); max > 0 && srv.stats.connected.Load() > max {
		return refuse(codec.ServerBusy, CloseRefused, "max connections reached")
	}
	authMethod := string(cp.Props.AuthMethod)
	authData := clone(cp.Props.AuthData)
	enhanced, _ := srv.auth.(EnhancedAuthenticator)
	if authMethod != "" && enhanced == nil {
		return refuse(codec.BadAuthenticationMethod, CloseAuthFailed, "enhanced authentication is not configured")
	}
	if srv.auth != nil && authMethod == "" {
		if err := c.login(cp.Password, crossOrigin(c.conn)); err != nil {
			return refuse(authReason(err), CloseAuthFailed, err.Error())
		}
	}

	// Will message.
	willOK := cp.WillFlag
	if cp.WillFlag && brokerTopic(string(cp.WillTopic)) {
		srv.stats.willRefused.Add(1)
		if !cp.Bridge {
			return refuse(codec.NotAuthorized, CloseNotAuthorized, "will topic "+string(cp.WillTopic)+" is the broker's")
		}
		// A Mosquitto bridge announces its state on
		// $SYS/broker/connection/… (its notifications, on by default): it
		// connects, without that will, rather than not at all.
		c.log(zap.InfoLevel, "bridge connects without its will: the will topic is the broker's",
			zap.String("client_id", logID), zap.ByteString("will_topic", cp.WillTopic))
		willOK = false
	}
	if willOK {
		if cp.WillRetain && srv.opts.RetainDisabled {
			return refuse(codec.RetainNotSupported, CloseRefused, "will retain with retain disabled")
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
	}

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

	expiry := uint32(0)
	if v5 {
		expiry = srv.capExpiry(cp.Props.SessionExpiry)
	} else if !cp.CleanStart {
		expiry = neverExpires
	}

	requestedExpiry := cp.Props.SessionExpiry
	ack := &codec.Connack{}
	if authMethod != "" {
		// Last step before the session: the exchange reads more packets,
		// after which cp is no longer valid.
		user, reply, err := c.enhancedAuth(enhanced, authMethod, authData)
		if err != nil {
			return refuse(authReason(err), CloseAuthFailed, err.Error())
		}
		c.username = user
		c.more().authMethod = authMethod
		ack.Props.AuthMethod = []byte(authMethod)
		ack.Props.AuthData = reply
	}
	// The will needs the rights of the user now known: as in
	// Mosquitto, a will the client could not publish is refused at CONNECT.
	if will := c.rare().will; will != nil && srv.authz != nil && !srv.authz.CanWill(c.id, c.username, will.Topic) {
		srv.stats.willRefused.Add(1)
		return refuse(codec.NotAuthorized, CloseNotAuthorized, "will topic "+will.Topic+" not allowed")
	}
	if v5 {
		ack.Props.SetNum(codec.PropReceiveMaximum, uint32(srv.opts.ReceiveMaximum))
		ack.Props.SetNum(codec.PropMaximumPacketSize, uint32(srv.opts.MaxPacketSize))
		ack.Props.SetNum(codec.PropTopicAliasMaximum, uint32(srv.opts.TopicAliasMaximum))
		if srv.opts.RetainDisabled {
			ack.Props.SetNum(codec.PropRetainAvailable, 0)
		}
		if assigned {
			ack.Props.AssignedClientID = []byte(c.id)
		}
		if serverKA >= 0 {
			ack.Props.SetNum(codec.PropServerKeepAlive, uint32(serverKA))
		}
		if expiry != requestedExpiry {
			ack.Props.SetNum(codec.PropSessionExpiry, expiry)
		}
	}
	c.connectedAt = time.Now().UnixNano()
	c.r.MaxPacketSize = srv.opts.MaxPacketSize // logged in: the full size, and no share of the budget
	c.r.SetBudget(nil)
	if srv.cluster != nil {
		// The client id is this connection's cluster-wide before the
		// session is: a connection on another node is taken over.
		// The identity checks hold cluster-wide: the node holding the id
		// decides (Cluster.Claim), before anything there changes.
		claim, rc := srv.cluster.Claim(c.id, c.username, !srv.opts.AnySessionOwner, cleanStart)
		if claim != 0 {
			c.more().claim = claim
		}
		switch {
		case rc == codec.NotAuthorized:
			srv.stats.ownerRefused.Add(1)
			return refuse(rc, CloseNotAuthorized, "the session of client id "+c.id+" on another node belongs to another user")
		case rc != 0:
			return refuse(rc, CloseRefused, "client id "+c.id+" connected on another node after this CONNECT was sent")
		}
	}
	_, present, err := srv.attach(c, cleanStart, expiry)
	if err != nil {
		if claim := c.rare().claim; claim != 0 {
			srv.cluster.Release(c.id, claim, true) // the other user's session stays here
		}
		srv.stats.ownerRefused.Add(1)
		return refuse(codec.NotAuthorized, CloseNotAuthorized, "the session of client id "+c.id+" belongs to another user")
	}
	// The session is on disk: CONNACK now. connected is set with CONNACK
	// queued, under c.mu: the writer takes deliveries only once it sees
	// connected, and a close that comes after the client could have read
	// CONNACK always sends its DISCONNECT.
	ack.SessionPresent = present // [MQTT-3.2.2-2] [MQTT-3.2.2-3]
	c.mu.Lock()
	c.connected = true
	c.ctrl = ack.Append(c.ctrl, c.version)
	c.mu.Unlock()
	if srv.traces.Load() != traces {
		c.matchTrace(c.id, c.username) // a trace started or stopped meanwhile: retraceLocked skipped c
	}
	srv.stats.ctrlOut.Add(1)
	srv.stats.connects.Add(1) // before the writer can send CONNACK
	srv.byListener.connected(c.listener)
	c.wake()
	transport := zap.Skip() // ServeConn without Serve: not known
	if t, ok := srv.transports.Load(c.listener); ok {
		transport = zap.String("transport", t.(string))
	}
	c.log(zap.InfoLevel, "client connected", zap.String("username", c.username), zap.Uint8("protocol", c.version), transport,
		zap.Bool("clean_start", cleanStart), zap.Bool("session_present", ack.SessionPresent),
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
