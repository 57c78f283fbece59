package core_test

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

var versions = []struct {
	name string
	v    byte
}{{"v3.1", codec.V31}, {"v3.1.1", codec.V311}, {"v5", codec.V5}}

// [MQTT-3.2.0-1] [MQTT-3.2.2-2]: a valid CONNECT is accepted, with no
// session present for a clean start, at every protocol level.
func TestConnectAccepted(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	for _, tc := range versions {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, srv, tc.v)
			ack := c.Connect(connectPacket(tc.v, "c-"+tc.name))
			if ack.SessionPresent {
				t.Fatalf("session present on a clean start")
			}
			if tc.v == codec.V5 {
				for _, id := range []codec.PropID{codec.PropReceiveMaximum, codec.PropMaximumPacketSize, codec.PropTopicAliasMaximum} {
					if !ack.Props.Has(id) {
						t.Errorf("CONNACK lacks property %#x", id)
					}
				}
			}
			c.Send(&codec.Pingreq{})
			expect[*codec.Pingresp](c)
		})
	}
}

// rawConnect builds a CONNECT by hand: protocol name, level, flags (clean
// session), keepalive 0, client id "x".
func rawConnect(name string, level byte) []byte {
	body := []byte{0, byte(len(name))}
	body = append(body, name...)
	body = append(body, level, 0x02, 0, 0, 0, 1, 'x')
	return append([]byte{0x10, byte(len(body))}, body...)
}

// [MQTT-3.1.2-2] (3.1.1: CONNACK 0x01 then close; 5.0 allows CONNACK 0x84
// then close): the broker cannot know what an unknown level reads, so it
// answers in the 3.1.1 form every client can read.
func TestConnectUnsupportedProtocolLevel(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	for _, tc := range []struct {
		name  string
		proto string
		level byte
	}{
		{"MQTT-level-6", "MQTT", 6},
		{"MQTT-level-3", "MQTT", 3},
		{"MQIsdp-level-4", "MQIsdp", 4},
		{"MQTT-level-0", "MQTT", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, srv, codec.V311)
			c.SendRaw(rawConnect(tc.proto, tc.level))
			raw, err := c.NextRaw(waitTimeout)
			if err != nil {
				t.Fatalf("want CONNACK: %v", err)
			}
			if want := []byte{0x20, 0x02, 0x00, 0x01}; !bytes.Equal(raw, want) {
				t.Fatalf("got % x, want CONNACK % x", raw, want)
			}
			c.ExpectClosed()
		})
	}
}

// [MQTT-3.1.2-1]: an unknown protocol name closes the connection.
func TestConnectBadProtocolName(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	c := dial(t, srv, codec.V311)
	c.SendRaw(rawConnect("MQTX", 4))
	// A CONNACK 0x01 is allowed before the close; nothing else is.
	for _, raw := range c.DrainUntilClosed() {
		if !bytes.Equal(raw, []byte{0x20, 0x02, 0x00, 0x01}) {
			t.Fatalf("got % x before the close", raw)
		}
	}
}

// [MQTT-3.1.0-1]: the first packet must be CONNECT; anything else closes
// the connection without an answer.
func TestFirstPacketNotConnect(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	for _, tc := range []struct {
		name string
		p    codec.Packet
	}{
		{"pingreq", &codec.Pingreq{}},
		{"publish", &codec.Publish{Topic: []byte("a"), Payload: []byte("x")}},
		{"subscribe", &codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{sub("a", 0)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, srv, codec.V311)
			c.Send(tc.p)
			c.ExpectClosed()
		})
	}
}

// [MQTT-3.1.0-2]: a second CONNECT is a protocol violation: 3.1.1 closes,
// 5.0 sends DISCONNECT Protocol Error first.
func TestSecondConnect(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	for _, tc := range versions {
		t.Run(tc.name, func(t *testing.T) {
			c := client(t, srv, tc.v, "twice-"+tc.name)
			c.Send(connectPacket(tc.v, "twice-"+tc.name))
			if tc.v == codec.V5 {
				c.ExpectDisconnect(codec.ProtocolError)
			} else {
				c.ExpectClosed()
			}
		})
	}
}

// [MQTT-3.1.3-6] [MQTT-3.1.3-7] [MQTT-3.1.3-8]: an empty client id is
// assigned by the server in 5.0 (Assigned Client Identifier), accepted with
// Clean Session 1 in 3.1.1, refused with code 2 otherwise.
func TestEmptyClientID(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	t.Run("v5-assigned", func(t *testing.T) {
		for _, clean := range []bool{true, false} {
			c := dial(t, srv, codec.V5)
			p := connectPacket(codec.V5, "")
			p.CleanStart = clean
			ack := c.Connect(p)
			if len(ack.Props.AssignedClientID) == 0 {
				t.Fatalf("clean=%v: no Assigned Client Identifier in CONNACK", clean)
			}
		}
	})
	t.Run("v3.1.1-clean", func(t *testing.T) {
		c := dial(t, srv, codec.V311)
		c.Connect(connectPacket(codec.V311, ""))
		c.Send(&codec.Pingreq{})
		expect[*codec.Pingresp](c)
	})
	for _, tc := range []struct {
		name  string
		v     byte
		clean bool
	}{{"v3.1.1-persistent", codec.V311, false}, {"v3.1", codec.V31, true}} {
		t.Run(tc.name+"-refused", func(t *testing.T) {
			c := dial(t, srv, tc.v)
			p := connectPacket(tc.v, "")
			p.CleanStart = tc.clean
			c.Send(p)
			raw, err := c.NextRaw(waitTimeout)
			if err != nil {
				t.Fatalf("want CONNACK: %v", err)
			}
			if want := []byte{0x20, 0x02, 0x00, 0x02}; !bytes.Equal(raw, want) {
				t.Fatalf("got % x, want CONNACK identifier rejected % x", raw, want)
			}
			c.ExpectClosed()
		})
	}
}

// A connection that sends no CONNECT within ConnectTimeout is closed.
func TestConnectTimeout(t *testing.T) {
	t.Parallel()
	srv := newServer(t, core.Options{ConnectTimeout: 100 * time.Millisecond}, core.Config{})
	c := dial(t, srv, codec.V311)
	start := time.Now()
	c.ExpectClosed()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("closed after %v, want about 100ms", d)
	}
	waitFor(t, "connect_timeout counted", func() bool { return srv.Stats().Disconnects["connect_timeout"] == 1 })
}

// A client with keepalive 0 has no read deadline: the CONNECT deadline
// must not stay on the connection [MQTT-3.1.2-10 (3.1.1)].
func TestKeepAliveZeroStaysConnected(t *testing.T) {
	t.Parallel()
	srv := newServer(t, core.Options{ConnectTimeout: 100 * time.Millisecond}, core.Config{})
	c := client(t, srv, codec.V311, "idle")
	time.Sleep(400 * time.Millisecond)
	c.Send(&codec.Pingreq{})
	expect[*codec.Pingresp](c)
}

// [MQTT-3.1.2-24] (3.1.1 [MQTT-3.1.2-24]): no packet within 1.5 × keepalive
// closes the connection, 5.0 with DISCONNECT Keep Alive Timeout, and the
// will is published.
func TestKeepAliveTimeoutPublishesWill(t *testing.T) {
	t.Parallel()
	srv := newServer(t, core.Options{}, core.Config{})
	for _, tc := range []struct {
		name string
		v    byte
	}{{"v3.1.1", codec.V311}, {"v5", codec.V5}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			topic := "will/ka/" + tc.name
			w := client(t, srv, codec.V311, "watch-ka-"+tc.name)
			w.Subscribe(0, topic)
			c := client(t, srv, tc.v, "ka-"+tc.name, func(p *codec.Connect) {
				p.KeepAlive = 1
				p.WillFlag, p.WillTopic, p.WillPayload = true, []byte(topic), []byte("gone")
			})
			start := time.Now()
			// A ping within the keepalive keeps the connection.
			time.Sleep(700 * time.Millisecond)
			c.Send(&codec.Pingreq{})
			expect[*codec.Pingresp](c)
			mark := time.Now()
			if tc.v == codec.V5 {
				c.ExpectDisconnect(codec.KeepAliveTimeout)
			} else {
				c.ExpectClosed()
			}
			if d := time.Since(mark); d < 1200*time.Millisecond || d > 2500*time.Millisecond {
				t.Fatalf("closed %v after the last packet (%v after connect), want about 1.5s", d, time.Since(start))
			}
			wantPayloads(t, w.Recv(1), "gone")
		})
	}
}

// Server Keep Alive (5.0 3.2.2.3.14): a client asking for more than
// MaxKeepAlive is told the cap and held to it.
func TestServerKeepAlive(t *testing.T) {
	t.Parallel()
	srv := newServer(t, core.Options{MaxKeepAlive: 1}, core.Config{})
	c := dial(t, srv, codec.V5)
	p := connectPacket(codec.V5, "ska")
	p.KeepAlive = 600
	ack := c.Connect(p)
	if ka, ok := ack.Props.Num(codec.PropServerKeepAlive); !ok || ka != 1 {
		t.Fatalf("Server Keep Alive %d (present %v), want 1", ka, ok)
	}
	c.ExpectDisconnect(codec.KeepAliveTimeout)
}

// errAuth is an Authenticator that refuses with err.
type errAuth struct{ err error }

func (a errAuth) Authenticate(clientID, username string, password []byte, remote net.Addr, listener, crossOrigin string) error {
	if username == "good" {
		return nil
	}
	return a.err
}

// [MQTT-3.1.4-2] 3.2.2.3: an Authenticator's refusal becomes the CONNACK
// code (5.0: 0x86 / 0x87; 3.1.1: 4 / 5), and the connection is closed.
func TestAuthenticatorRefusal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		v      byte
		wantV5 codec.ReasonCode
		wantV3 byte
	}{
		{"bad-password-v5", codec.BadUserNameOrPassword, codec.V5, codec.BadUserNameOrPassword, 0},
		{"not-authorized-v5", codec.NotAuthorized, codec.V5, codec.NotAuthorized, 0},
		{"other-error-v5", errors.New("nope"), codec.V5, codec.NotAuthorized, 0},
		{"banned-v5", codec.Banned, codec.V5, codec.Banned, 0},
		{"bad-password-v3.1.1", codec.BadUserNameOrPassword, codec.V311, 0, 4},
		{"not-authorized-v3.1.1", codec.NotAuthorized, codec.V311, 0, 5},
		{"other-error-v3.1.1", errors.New("nope"), codec.V311, 0, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, core.Options{}, core.Config{Authenticator: errAuth{tc.err}})
			c := dial(t, srv, tc.v)
			p := connectPacket(tc.v, "auth")
			p.UsernameFlag, p.Username = true, []byte("bad")
			p.PasswordFlag, p.Password = true, []byte("pw")
			c.Send(p)
			raw, err := c.NextRaw(waitTimeout)
			if err != nil {
				t.Fatalf("want CONNACK: %v", err)
			}
			if tc.v == codec.V5 {
				ack, _, err := codec.Decode(raw, codec.V5)
				if err != nil {
					t.Fatalf("decoding % x: %v", raw, err)
				}
				if rc := ack.(*codec.Connack).ReasonCode; rc != tc.wantV5 {
					t.Fatalf("CONNACK %s, want %s", rc, tc.wantV5)
				}
			} else if want := []byte{0x20, 0x02, 0x00, tc.wantV3}; !bytes.Equal(raw, want) {
				t.Fatalf("got % x, want % x", raw, want)
			}
			c.ExpectClosed()
			waitFor(t, "auth failure counted", func() bool { return srv.Stats().AuthFailures == 1 })

			ok := dial(t, srv, tc.v)
			p = connectPacket(tc.v, "auth-ok")
			p.UsernameFlag, p.Username = true, []byte("good")
			ok.Connect(p)
		})
	}
}

// MaxConnections refuses the connection over the limit with Server Busy
// (3.1.1: 3 Server unavailable), and counts only live connections.
func TestMaxConnections(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    byte
	}{{"v3.1.1", codec.V311}, {"v5", codec.V5}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, core.Options{MaxConnections: 2}, core.Config{})
			a := client(t, srv, tc.v, "a")
			client(t, srv, tc.v, "b")
			c := dial(t, srv, tc.v)
			c.Send(connectPacket(tc.v, "c"))
			raw, err := c.NextRaw(waitTimeout)
			if err != nil {
				t.Fatalf("want CONNACK: %v", err)
			}
			if tc.v == codec.V5 {
				p, _, err := codec.Decode(raw, codec.V5)
				ack, ok := p.(*codec.Connack)
				if err != nil || !ok || ack.ReasonCode != codec.ServerBusy || string(ack.Props.ReasonString) != "max connections reached" {
					t.Fatalf("got % x (%v), want CONNACK Server busy with a Reason String", raw, err)
				}
			} else if want := []byte{0x20, 0x02, 0x00, 0x03}; !bytes.Equal(raw, want) {
				t.Fatalf("got % x, want % x", raw, want)
			}
			c.ExpectClosed()
			a.Close()
			waitFor(t, "a's connection to end", func() bool { return srv.Stats().Connected == 1 })
			client(t, srv, tc.v, "d")
		})
	}
}

// Shutdown tells MQTT 5 clients Server Shutting Down, closes every
// connection and returns; Serve and ServeConn then refuse.
func TestShutdown(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	c5 := client(t, srv, codec.V5, "s5")
	c3 := client(t, srv, codec.V311, "s3")
	raw := dial(t, srv, codec.V311) // not yet connected
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(t.Context()) }()
	c5.ExpectDisconnect(codec.ServerShuttingDown)
	c3.ExpectClosed()
	raw.ExpectClosed()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("Shutdown did not return")
	}
	late := dial(t, srv, codec.V311)
	late.ExpectClosed()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := srv.Serve(l, "tcp"); !errors.Is(err, core.ErrServerClosed) {
		t.Fatalf("Serve after Shutdown: %v, want ErrServerClosed", err)
	}
	if err := srv.Shutdown(t.Context()); !errors.Is(err, core.ErrServerClosed) {
		t.Fatalf("second Shutdown: %v, want ErrServerClosed", err)
	}
}

// Serve over a real listener returns ErrServerClosed after Shutdown.
func TestServeListener(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l, "tcp") }()
	conn, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(waitTimeout))
	if _, err := conn.Write(connectPacket(codec.V311, "tcp").Append(nil, codec.V311)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := conn.Read(buf); err != nil || !bytes.Equal(buf, []byte{0x20, 2, 0, 0}) {
		t.Fatalf("CONNACK % x, %v", buf, err)
	}
	shutdown(t, srv)
	select {
	case err := <-served:
		if !errors.Is(err, core.ErrServerClosed) {
			t.Fatalf("Serve: %v, want ErrServerClosed", err)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("Serve did not return")
	}
}

// Options.Validate refuses out-of-range values.
func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts core.Options
		want string
	}{
		{"negative-max-connections", core.Options{MaxConnections: -1}, "max connections"},
		{"small-packet", core.Options{MaxPacketSize: 10}, "max packet size"},
		{"overflow", core.Options{QueueOverflow: "block"}, "overflow"},
		{"strategy", core.Options{SharedStrategy: "sticky"}, "strategy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := core.New(tc.opts, core.Config{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error about %q", err, tc.want)
			}
		})
	}
}
