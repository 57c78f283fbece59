package core_test

// Tests of the trust boundaries between users who share the broker:
// sessions belong to their owner, authorization holds at every use
// (subscribe, delivery, will, retain), and nothing before login can
// exhaust the broker.

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// ruleAuthz is an Authorizer whose rules a test changes: each user name
// may not touch the topics under its denied prefixes (read or write), and
// Generation moves with every change.
type ruleAuthz struct {
	mu    sync.Mutex
	deny  map[string][]string
	gen   atomic.Uint64
	reads atomic.Int64 // CanRead calls
}

func newRuleAuthz(deny map[string][]string) *ruleAuthz {
	z := &ruleAuthz{deny: deny}
	z.gen.Store(1)
	return z
}

func (z *ruleAuthz) set(user string, prefixes ...string) {
	z.mu.Lock()
	z.deny[user] = prefixes
	z.mu.Unlock()
	z.gen.Add(1)
}

func (z *ruleAuthz) denied(user, topic string) bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	for _, p := range z.deny[user] {
		if strings.HasPrefix(topic, p) {
			return true
		}
	}
	return false
}

func (z *ruleAuthz) CanPublish(_, user, topic string) bool { return !z.denied(user, topic) }
func (z *ruleAuthz) CanWill(_, user, topic string) bool    { return !z.denied(user, topic) }
func (z *ruleAuthz) CanSubscribe(_, user, filter string) bool {
	return !z.denied(user, filter) // a filter inside a denied prefix reaches nothing readable
}

// ReadsAll is true only for a user without denied prefixes.
func (z *ruleAuthz) ReadsAll(_, user, _ string) bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	return len(z.deny[user]) == 0
}

func (z *ruleAuthz) CanRead(_, user, topic string) bool {
	z.reads.Add(1)
	return !z.denied(user, topic)
}

func (z *ruleAuthz) Generation() uint64 { return z.gen.Load() }

// as makes a CONNECT carry a user name.
func as(user string) func(*codec.Connect) {
	return func(p *codec.Connect) { p.UsernameFlag, p.Username = user != "", []byte(user) }
}

// TestSessionOwner: a client id's session belongs to the user who created
// it. Another user may not resume it, take it over while it is online, or
// wipe it with Clean Start: CONNACK Not authorized, and the owner's queued
// messages and live connection are untouched. With AnySessionOwner the
// broker behaves as Mosquitto.
func TestSessionOwner(t *testing.T) {
	for _, v := range []byte{codec.V311, codec.V5} {
		t.Run(fmt.Sprint("level ", v), func(t *testing.T) {
			srv := newServer(t, core.Options{}, core.Config{})
			alice := client(t, srv, v, "dev1", persistent, as("alice"))
			alice.Subscribe(1, "alice/#")
			alice.Close()
			waitFor(t, "alice offline", func() bool { return srv.Stats().Connected == 0 })
			pub := client(t, srv, codec.V5, "pub", as("alice"))
			pub.Pub("alice/a", "queued", 1)

			for _, tc := range []struct {
				name string
				mod  func(*codec.Connect)
			}{
				{"resume", persistent},
				{"wipe with clean start", func(p *codec.Connect) {}},
				{"anonymous resume", persistent},
			} {
				user := "bob"
				if strings.HasPrefix(tc.name, "anonymous") {
					user = ""
				}
				bob := dial(t, srv, v)
				p := connectPacket(v, "dev1")
				tc.mod(p)
				as(user)(p)
				if ack := bob.ConnectRC(p); ack.ReasonCode != codec.NotAuthorized || ack.SessionPresent {
					t.Fatalf("%s: CONNACK %s present %v, want Not authorized", tc.name, ack.ReasonCode, ack.SessionPresent)
				}
				bob.ExpectClosed()
			}
			// Alice online: bob cannot take the connection over either.
			alice = client(t, srv, v, "dev1", persistent, as("alice"))
			wantPayloads(t, alice.Recv(1), "queued")
			bob := dial(t, srv, v)
			p := connectPacket(v, "dev1")
			as("bob")(p)
			if ack := bob.ConnectRC(p); ack.ReasonCode != codec.NotAuthorized {
				t.Fatalf("takeover: CONNACK %s, want Not authorized", ack.ReasonCode)
			}
			pub.Pub("alice/b", "live", 1)
			wantPayloads(t, alice.Recv(1), "live")
			// A refused connection is counted once it has ended.
			waitFor(t, "4 refusals counted", func() bool {
				st := srv.Stats()
				return st.SessionOwnerRefused == 4 && st.Disconnects["not_authorized"] == 4
			})
			// The owner itself may still take over and wipe.
			again := client(t, srv, v, "dev1", as("alice"))
			alice.DrainUntilClosed()
			again.Close()
		})
	}
}

func TestSessionOwnerOffMeansAnyone(t *testing.T) {
	srv := newServer(t, core.Options{AnySessionOwner: true}, core.Config{})
	alice := client(t, srv, codec.V311, "dev1", persistent, as("alice"))
	alice.Subscribe(1, "t")
	alice.Close()
	waitFor(t, "alice offline", func() bool { return srv.Stats().Connected == 0 })
	bob := dial(t, srv, codec.V311)
	p := connectPacket(codec.V311, "dev1")
	persistent(p)
	as("bob")(p)
	if ack := bob.Connect(p); !ack.SessionPresent {
		t.Error("Mosquitto's behaviour: bob resumes alice's session")
	}
}

// TestSessionOwnerSurvivesRestart: the owner is stored with the session.
func TestSessionOwnerSurvivesRestart(t *testing.T) {
	st := core.NewMemStore()
	srv := newServer(t, core.Options{}, core.Config{Store: st})
	c := client(t, srv, codec.V5, "dev1", persistent, as("alice"))
	c.Close()
	waitFor(t, "offline", func() bool { return srv.Stats().Connected == 0 })
	srv = restart(t, srv, core.Options{}, st)
	bob := dial(t, srv, codec.V5)
	p := connectPacket(codec.V5, "dev1")
	persistent(p)
	as("bob")(p)
	if ack := bob.ConnectRC(p); ack.ReasonCode != codec.NotAuthorized {
		t.Fatalf("CONNACK %s after a restart, want Not authorized", ack.ReasonCode)
	}
	if ack := client(t, srv, codec.V5, "dev1", persistent, as("alice")); ack == nil {
		t.Fatal("owner refused")
	}
}

// TestRemoveSession: an operator removes any session, online or not.
func TestRemoveSession(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	alice := client(t, srv, codec.V5, "dev1", persistent, as("alice"))
	alice.Subscribe(1, "t")
	if !srv.RemoveSession("dev1") {
		t.Fatal("RemoveSession found nothing")
	}
	alice.ExpectDisconnect(codec.AdministrativeAction)
	waitFor(t, "session gone", func() bool { return srv.Stats().Sessions == 0 })
	bob := dial(t, srv, codec.V5)
	p := connectPacket(codec.V5, "dev1")
	persistent(p)
	as("bob")(p)
	if ack := bob.Connect(p); ack.SessionPresent {
		t.Error("the removed session came back")
	}
	if srv.RemoveSession("ghost") {
		t.Error("RemoveSession of an unknown id reported a session")
	}
}

// TestDeliveryAuthorized: with Mosquitto's semantics a subscription to #
// is granted and each message is checked on delivery, including retained
// messages on subscribe; a change of the rules applies to subscriptions
// made before it, and to a session resumed after it.
func TestDeliveryAuthorized(t *testing.T) {
	z := newRuleAuthz(map[string][]string{"bob": {"secret/"}})
	srv := newServer(t, core.Options{}, core.Config{Authorizer: z})
	pub := client(t, srv, codec.V5, "pub", as("alice"))
	pub.PubRetained("secret/r", "retained secret", 1)
	pub.PubRetained("public/r", "retained public", 1)

	bob := client(t, srv, codec.V5, "bob1", persistent, as("bob"))
	bob.Subscribe(1, "#")
	wantPayloads(t, bob.Recv(1), "retained public")
	bob.ExpectNothing(quiet)
	pub.Pub("secret/x", "no", 1)
	pub.Pub("public/x", "yes", 1)
	wantPayloads(t, bob.Recv(1), "yes")
	if st := srv.Stats(); st.Dropped["not_readable"] != 2 {
		t.Errorf("not_readable drops %d, want 2", st.Dropped["not_readable"])
	}

	// Bob loses public/: his existing subscription stops delivering it.
	z.set("bob", "secret/", "public/")
	pub.Pub("public/x", "not any more", 1)
	pub.Pub("other/x", "still", 1)
	wantPayloads(t, bob.Recv(1), "still")
	bob.Close()
	waitFor(t, "bob offline", func() bool { return srv.Stats().Connected == 1 })

	// Offline, then resumed: what was queued before the rules allowed it
	// is checked again when it is queued; the resumed subscription too.
	pub.Pub("other/y", "queued", 1)
	pub.Pub("public/y", "denied while offline", 1)
	bob = client(t, srv, codec.V5, "bob1", persistent, as("bob"))
	wantPayloads(t, bob.Recv(1), "queued")
	z.set("bob")
	pub.Pub("public/z", "allowed again", 1)
	wantPayloads(t, bob.Recv(1), "allowed again")
}

// TestDeliveryCheckCostsNothingWhenAllReadable: a subscription whose whole
// filter is readable is not checked per message.
func TestDeliveryCheckCostsNothingWhenAllReadable(t *testing.T) {
	z := newRuleAuthz(map[string][]string{})
	srv := newServer(t, core.Options{}, core.Config{Authorizer: z})
	sub := client(t, srv, codec.V5, "s", as("carol"))
	sub.Subscribe(0, "#")
	pub := client(t, srv, codec.V5, "p", as("carol"))
	for range 20 {
		pub.Pub("t", "x", 1)
	}
	sub.Recv(20)
	if n := z.reads.Load(); n != 0 {
		t.Errorf("CanRead asked %d times for a filter the rules let read entirely", n)
	}
}

// TestWillAuthorized: a will is the client's publication: it may not name
// a broker topic or one the rules refuse (CONNACK Not authorized), and it
// is checked again when it is due.
func TestWillAuthorized(t *testing.T) {
	z := newRuleAuthz(map[string][]string{"bob": {"alice/"}})
	srv := newServer(t, core.Options{RetainDisabled: false}, core.Config{Authorizer: z})
	watch := client(t, srv, codec.V5, "watch", as("root"))
	watch.Subscribe(1, "#", "$SYS/#")
	will := func(topic string) func(*codec.Connect) {
		return func(p *codec.Connect) {
			p.WillFlag, p.WillQoS, p.WillRetain, p.WillTopic, p.WillPayload = true, 1, true, []byte(topic), []byte("forged")
		}
	}
	for _, tc := range []struct {
		name, user, topic string
		v                 byte
	}{
		{"$SYS will", "bob", "$SYS/broker/clients/connected", codec.V5},
		{"$SYS will 3.1.1", "bob", "$SYS/broker/version", codec.V311},
		{"$share will", "bob", "$share/g/t", codec.V5},
		{"another user's topic", "bob", "alice/status", codec.V5},
		{"another user's topic 3.1.1", "bob", "alice/status", codec.V311},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, srv, tc.v)
			p := connectPacket(tc.v, "w-"+tc.name)
			as(tc.user)(p)
			will(tc.topic)(p)
			if ack := c.ConnectRC(p); ack.ReasonCode != codec.NotAuthorized {
				t.Fatalf("CONNACK %s, want Not authorized", ack.ReasonCode)
			}
		})
	}
	// Allowed at CONNECT, refused by the time it is due.
	c := client(t, srv, codec.V5, "w-ok", as("bob"), will("bob/status"))
	z.set("bob", "alice/", "bob/")
	c.Close()
	watch.ExpectNothing(quiet)
	if st := srv.Stats(); st.WillsRefused != 6 {
		t.Errorf("wills refused %d, want 6", st.WillsRefused)
	}
	// A retained $SYS PUBLISH is refused too, and nothing is retained.
	bob := client(t, srv, codec.V5, "bob-pub", as("bob"))
	if rc := bob.Publish(&codec.Publish{Topic: []byte("$SYS/broker/version"), Payload: []byte("x"), QoS: 1, Retain: true}); rc != codec.NotAuthorized {
		t.Errorf("PUBACK %s for a $SYS publish, want Not authorized", rc)
	}
	late := client(t, srv, codec.V5, "late", as("root"))
	late.Subscribe(1, "$SYS/#")
	late.ExpectNothing(quiet)
}

// TestConnectSizeLimit: a CONNECT over MaxConnectSize is refused from its
// fixed header, before its body is read or held.
func TestConnectSizeLimit(t *testing.T) {
	srv := newServer(t, core.Options{MaxConnectSize: 1024}, core.Config{})
	c := dial(t, srv, codec.V5)
	p := connectPacket(codec.V5, "big")
	p.Props.User = make([]codec.UserProperty, 300) // 1.5 KiB of empty pairs
	c.SendRaw(p.Append(nil, codec.V5))
	c.ExpectClosed()
	// Counted once the broker has finished with the connection, which
	// may be after the client saw it closed.
	waitFor(t, "one packet_too_large disconnect", func() bool { return srv.Stats().Disconnects["packet_too_large"] == 1 })
	client(t, srv, codec.V5, "small") // a normal client still gets in
}

// TestUserPropertyLimit: a packet with more user properties than
// MaxUserProperties is refused, before and after login.
func TestUserPropertyLimit(t *testing.T) {
	srv := newServer(t, core.Options{MaxUserProperties: 10}, core.Config{})
	c := dial(t, srv, codec.V5)
	p := connectPacket(codec.V5, "many")
	p.Props.User = make([]codec.UserProperty, 11)
	c.SendRaw(p.Append(nil, codec.V5))
	c.ExpectClosed()

	ok := client(t, srv, codec.V5, "ok")
	pub := &codec.Publish{Topic: []byte("t"), Payload: []byte("x")}
	pub.Props.User = make([]codec.UserProperty, 11)
	ok.Send(pub)
	ok.ExpectDisconnect(codec.QuotaExceeded)
}

// TestPreLoginBudget: connections that have not logged in share
// PreLoginMemory for CONNECT bodies beyond their read buffer; once it is
// spent a new one is refused, and a client with an ordinary CONNECT still
// logs in at once.
func TestPreLoginBudget(t *testing.T) {
	srv := newServer(t, core.Options{MaxConnectSize: 64 << 10, PreLoginMemory: 64 << 10, ReadBufferSize: 1024}, core.Config{})
	big := connectPacket(codec.V5, "big")
	big.Props.User = []codec.UserProperty{{Key: []byte("k"), Value: bytes.Repeat([]byte("v"), 40_000)}}
	raw := big.Append(nil, codec.V5)
	// Each slow client sends all of its CONNECT but the last byte, so its
	// body buffer is held while the broker waits for the rest.
	var slow []net.Conn
	for range 3 {
		cli, srvSide := net.Pipe()
		t.Cleanup(func() { _ = cli.Close() })
		srv.ServeConn(srvSide, "pipe")
		go func() { _, _ = cli.Write(raw[:len(raw)-1]) }()
		slow = append(slow, cli)
	}
	waitFor(t, "a refusal for the budget", func() bool { return srv.Stats().PreLoginRefused >= 1 })
	start := time.Now()
	client(t, srv, codec.V5, "good")
	if d := time.Since(start); d > time.Second {
		t.Errorf("a good client took %v to log in", d)
	}
	for _, c := range slow {
		_ = c.Close()
	}
}

// TestSharedGroupReadRights: a shared group's message goes to a member
// that may read it, whatever the strategy: a member who may not (bob,
// denied x/) takes no share, so the one who may gets all 20; a message no
// member may read goes to none and is counted as not readable.
func TestSharedGroupReadRights(t *testing.T) {
	for _, strategy := range []core.SharedStrategy{core.SharedRoundRobin, core.SharedRandom, core.SharedLeastInflight,
		core.SharedHashTopic, core.SharedHashClient} {
		t.Run(string(strategy), func(t *testing.T) {
			z := newRuleAuthz(map[string][]string{"bob": {"x/", "y/"}, "alice": {"y/"}})
			srv := newServer(t, core.Options{SharedStrategy: strategy}, core.Config{Authorizer: z})
			alice := client(t, srv, codec.V5, "alice1", as("alice"))
			alice.Subscribe(1, "$share/g/#")
			bob := client(t, srv, codec.V5, "bob1", as("bob"))
			bob.Subscribe(1, "$share/g/#")
			pub := client(t, srv, codec.V5, "pub", as("carol"))
			for i := range 20 {
				pub.Pub(fmt.Sprintf("x/%d", i), fmt.Sprint(i), 1)
			}
			got := alice.Recv(20)
			for _, p := range got {
				alice.Ack(p)
			}
			bob.ExpectNothing(quiet)
			pub.Pub("y/1", "nobody", 1)
			alice.ExpectNothing(quiet)
			if n := srv.Stats().Dropped["not_readable"]; n != 1 {
				t.Errorf("not_readable drops %d, want 1 (the message no member may read)", n)
			}
		})
	}
}
