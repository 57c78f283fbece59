package core_test

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// challengeAuth is a two-step enhanced authentication method "TEST": the
// client says "hello", the server answers "challenge", the client must
// answer "response". It also allows every plain CONNECT and records
// disconnects, as a ConnectionObserver.
type challengeAuth struct {
	mu     sync.Mutex
	closed []string
}

func (a *challengeAuth) Authenticate(string, string, []byte, net.Addr, string, string) error {
	return nil
}

func (a *challengeAuth) AuthStep(method, clientID string, state any, data []byte, _ net.Addr, _ string) ([]byte, any, bool, string, error) {
	switch {
	case method != "TEST":
		return nil, nil, false, "", codec.BadAuthenticationMethod
	case state == nil && bytes.Equal(data, []byte("hello")):
		return []byte("challenge"), "sent", false, "", nil
	case state == "sent" && bytes.Equal(data, []byte("response")):
		return []byte("ok"), nil, true, "alice", nil
	}
	return nil, nil, false, "", codec.BadUserNameOrPassword
}

func (a *challengeAuth) ClientDisconnected(clientID, username string, _ net.Addr, _ string, _ time.Duration, reason string) {
	a.mu.Lock()
	a.closed = append(a.closed, clientID+"/"+username+"/"+reason)
	a.mu.Unlock()
}

func authPacket(rc codec.ReasonCode, data string) *codec.Auth {
	a := &codec.Auth{ReasonCode: rc}
	a.Props.AuthMethod = []byte("TEST")
	a.Props.AuthData = []byte(data)
	return a
}

func withAuth(data string) func(*codec.Connect) {
	return func(p *codec.Connect) {
		p.Props.AuthMethod = []byte("TEST")
		p.Props.AuthData = []byte(data)
	}
}

// TestEnhancedAuthentication covers 4.12: the CONNECT-time exchange, its
// refusals, and re-authentication on a live connection.
func TestEnhancedAuthentication(t *testing.T) {
	auth := &challengeAuth{}
	srv := newServer(t, core.Options{}, core.Config{Authenticator: auth})

	t.Run("exchange", func(t *testing.T) {
		c := dial(t, srv, codec.V5)
		p := connectPacket(codec.V5, "enh")
		withAuth("hello")(p)
		c.Send(p)
		if a := expect[*codec.Auth](c); a.ReasonCode != codec.ContinueAuthentication || string(a.Props.AuthData) != "challenge" {
			t.Fatalf("AUTH %s %q, want continue authentication with the challenge", a.ReasonCode, a.Props.AuthData)
		}
		c.Send(authPacket(codec.ContinueAuthentication, "response"))
		ack := expect[*codec.Connack](c)
		if ack.ReasonCode != codec.Success || string(ack.Props.AuthMethod) != "TEST" || string(ack.Props.AuthData) != "ok" {
			t.Fatalf("CONNACK %s method %q data %q, want success with method TEST and data ok", ack.ReasonCode, ack.Props.AuthMethod, ack.Props.AuthData)
		}

		// Re-authentication on the same connection (4.12.1).
		c.Send(authPacket(codec.ReAuthenticate, "hello"))
		if a := expect[*codec.Auth](c); a.ReasonCode != codec.ContinueAuthentication {
			t.Fatalf("re-auth: AUTH %s, want continue authentication", a.ReasonCode)
		}
		c.Send(authPacket(codec.ContinueAuthentication, "response"))
		if a := expect[*codec.Auth](c); a.ReasonCode != codec.Success || string(a.Props.AuthData) != "ok" {
			t.Fatalf("re-auth: AUTH %s %q, want success", a.ReasonCode, a.Props.AuthData)
		}
		c.Subscribe(0, "still/works") // the connection carries on

		// A failed re-authentication ends the connection.
		c.Send(authPacket(codec.ReAuthenticate, "wrong"))
		c.ExpectDisconnect(codec.NotAuthorized)
		waitFor(t, "disconnect observed", func() bool {
			auth.mu.Lock()
			defer auth.mu.Unlock()
			return len(auth.closed) == 1 && auth.closed[0] == "enh/alice/auth_failure"
		})
	})

	t.Run("wrong response", func(t *testing.T) {
		c := dial(t, srv, codec.V5)
		p := connectPacket(codec.V5, "enh-bad")
		withAuth("hello")(p)
		c.Send(p)
		expect[*codec.Auth](c)
		c.Send(authPacket(codec.ContinueAuthentication, "nope"))
		if ack := expect[*codec.Connack](c); ack.ReasonCode != codec.BadUserNameOrPassword {
			t.Fatalf("CONNACK %s, want bad user name or password", ack.ReasonCode)
		}
		c.ExpectClosed()
	})

	t.Run("unknown method", func(t *testing.T) {
		c := dial(t, srv, codec.V5)
		p := connectPacket(codec.V5, "enh-method")
		p.Props.AuthMethod = []byte("OTHER")
		if ack := c.ConnectRC(p); ack.ReasonCode != codec.BadAuthenticationMethod {
			t.Fatalf("CONNACK %s, want bad authentication method", ack.ReasonCode)
		}
	})

	t.Run("AUTH without a method agreed at CONNECT", func(t *testing.T) {
		c := client(t, srv, codec.V5, "enh-none")
		c.Send(authPacket(codec.ReAuthenticate, "hello"))
		c.ExpectDisconnect(codec.ProtocolError)
	})
}

func TestEnhancedAuthenticationNotConfigured(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	c := dial(t, srv, codec.V5)
	p := connectPacket(codec.V5, "x")
	withAuth("hello")(p)
	if ack := c.ConnectRC(p); ack.ReasonCode != codec.BadAuthenticationMethod {
		t.Fatalf("CONNACK %s, want bad authentication method (0x8C)", ack.ReasonCode)
	}
}

func TestMaxSubscriptionsPerClient(t *testing.T) {
	srv := newServer(t, core.Options{MaxSubscriptionsPerClient: 2}, core.Config{})
	for _, v := range []byte{codec.V311, codec.V5} {
		c := client(t, srv, v, "subs-"+string('0'+v))
		ack := c.SubscribePacket(&codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{sub("a", 0), sub("b", 1), sub("c", 0)}})
		want := []codec.ReasonCode{codec.GrantedQoS0, codec.GrantedQoS1, codec.QuotaExceeded}
		if v != codec.V5 {
			want[2] = codec.UnspecifiedError // 0x80 Failure in 3.1.1
		}
		if !equalCodes(ack.ReasonCodes, want) {
			t.Fatalf("v%d SUBACK %v, want %v", v, ack.ReasonCodes, want)
		}
		// Replacing an existing subscription is not a new one.
		ack = c.SubscribePacket(&codec.Subscribe{PacketID: 2, Subscriptions: []codec.Subscription{sub("a", 1)}})
		if !equalCodes(ack.ReasonCodes, []codec.ReasonCode{codec.GrantedQoS1}) {
			t.Fatalf("v%d SUBACK for a replaced subscription %v, want granted QoS 1", v, ack.ReasonCodes)
		}
	}
}

func equalCodes(a, b []codec.ReasonCode) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestMaxMessageRate: QoS 0 over the rate is dropped and counted; QoS 1 is
// slowed, never dropped.
func TestMaxMessageRate(t *testing.T) {
	srv := newServer(t, core.Options{MaxMessageRate: 5}, core.Config{})
	s := client(t, srv, codec.V311, "rate-sub")
	s.Subscribe(1, "rate/#")
	p := client(t, srv, codec.V311, "rate-pub")
	for i := 0; i < 20; i++ {
		p.Pub("rate/0", "x", 0)
	}
	start := time.Now()
	for i := 0; i < 8; i++ {
		p.Pub("rate/1", "y", 1) // waits for each PUBACK
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Errorf("8 QoS 1 messages over a 5/s limit took %v, want them slowed to about 1.6 s", d)
	}
	dropped := int(srv.Stats().Dropped["rate_limited"])
	if dropped < 10 || dropped > 15 { // 5 fit the burst; a slow machine may refill one or two
		t.Errorf("rate_limited drops = %d, want about 15 of 20", dropped)
	}
	got := s.Recv(20 - dropped + 8)
	n1 := 0
	for _, m := range got {
		if m.QoS == 1 {
			n1++
		}
	}
	if n1 != 8 {
		t.Errorf("%d QoS 1 messages delivered, want all 8", n1)
	}
	s.ExpectNothing(quiet)
}

// loginAuth is a LoginAuthenticator: every login is user "token-user",
// ending after ttl, and it allows publishing only to that user's topics,
// so the test sees which user name core holds.
type loginAuth struct{ ttl time.Duration }

func (a loginAuth) Authenticate(string, string, []byte, net.Addr, string, string) error { return nil }
func (a loginAuth) Login(string, string, []byte, net.Addr, string, string) (string, time.Time, error) {
	return "token-user", time.Now().Add(a.ttl), nil
}
func (loginAuth) CanPublish(_, username, topic string) bool { return topic == "u/"+username }
func (loginAuth) CanWill(string, string, string) bool       { return true }
func (loginAuth) CanSubscribe(string, string, string) bool  { return true }
func (loginAuth) ReadsAll(string, string, string) bool      { return true }
func (loginAuth) CanRead(string, string, string) bool       { return true }
func (loginAuth) Generation() uint64                        { return 0 }

// TestLoginAuthenticator: core takes the user name a Login names (the
// CONNECT had none) and closes the connection when the login ends, with
// DISCONNECT Maximum connect time.
func TestLoginAuthenticator(t *testing.T) {
	a := loginAuth{ttl: 300 * time.Millisecond}
	srv := newServer(t, core.Options{}, core.Config{Authenticator: a, Authorizer: a})
	c := dial(t, srv, codec.V5)
	p := connectPacket(codec.V5, "dev")
	p.PasswordFlag, p.Password = true, []byte("a token")
	start := time.Now()
	c.Connect(p)
	c.Send(&codec.Publish{Topic: []byte("u/token-user"), QoS: 1, PacketID: 1})
	if ack := expect[*codec.Ack](c); ack.ReasonCode.IsError() {
		t.Errorf("PUBACK %s: the user name is not the login's", ack.ReasonCode)
	}
	if d := expect[*codec.Disconnect](c); d.ReasonCode != codec.MaximumConnectTime {
		t.Fatalf("DISCONNECT %s, want Maximum connect time", d.ReasonCode)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("closed after %v, before the login ended", d)
	}
}

// changingAuthz reads all it allows, or checks each message and refuses
// t/secret; which one is set between logins, as a token's ACL claim
// changes between two logins with the same user name.
type changingAuthz struct{ readsAll atomic.Bool }

func (*changingAuthz) CanPublish(string, string, string) bool   { return true }
func (*changingAuthz) CanWill(string, string, string) bool      { return true }
func (*changingAuthz) CanSubscribe(string, string, string) bool { return true }
func (z *changingAuthz) ReadsAll(string, string, string) bool   { return z.readsAll.Load() }
func (*changingAuthz) CanRead(_, _, topic string) bool          { return topic != "t/secret" }
func (*changingAuthz) Generation() uint64                       { return 1 }

// TestReadsAllAskedAtEachLogin: a resumed session's subscriptions ask
// ReadsAll again at each login, though the user name and the rules'
// Generation are the same: the new login may read less.
func TestReadsAllAskedAtEachLogin(t *testing.T) {
	z := &changingAuthz{}
	z.readsAll.Store(true)
	srv := newServer(t, core.Options{}, core.Config{Authorizer: z})
	login := func() *tconn {
		c := dial(t, srv, codec.V5)
		p := connectPacket(codec.V5, "sub")
		p.CleanStart = false
		p.Props.SetNum(codec.PropSessionExpiry, 300)
		p.UsernameFlag, p.Username = true, []byte("alice")
		c.Connect(p)
		return c
	}
	sub := login()
	sub.Subscribe(0, "t/#")
	pub := dial(t, srv, codec.V5)
	pub.Connect(connectPacket(codec.V5, "pub"))
	pub.Pub("t/secret", "first login reads all", 0)
	if p := sub.ExpectPublish(); string(p.Payload) != "first login reads all" {
		t.Fatalf("got %q", p.Payload)
	}
	sub.Send(&codec.Disconnect{})
	sub.ExpectClosed()
	z.readsAll.Store(false)
	sub = login()
	pub.Pub("t/secret", "refused", 0)
	pub.Pub("t/open", "allowed", 0)
	if p := sub.ExpectPublish(); string(p.Payload) != "allowed" {
		t.Fatalf("second login got %q on %s: the first login's ReadsAll answer was kept", p.Payload, p.Topic)
	}
}
