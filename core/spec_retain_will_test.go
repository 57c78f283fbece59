package core_test

import (
	"slices"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// retainedOn subscribes a fresh client to filter and returns the retained
// messages it gets, sorted by payload.
func retainedOn(t *testing.T, srv *core.Server, v byte, id, filter string, qos byte) []*codec.Publish {
	t.Helper()
	c := client(t, srv, v, id)
	c.Subscribe(qos, filter)
	got := c.collect()
	slices.SortFunc(got, func(a, b *codec.Publish) int { return slices.Compare(a.Payload, b.Payload) })
	return got
}

// [MQTT-3.3.1-5] [MQTT-3.3.1-6] [MQTT-3.3.1-7] [MQTT-3.3.1-10]
// [MQTT-3.3.1-11]: the broker keeps the last retained message per topic,
// replaces it, clears it with an empty payload, and sends it with RETAIN=1
// to new subscriptions at the lower QoS; live deliveries to existing
// subscriptions have RETAIN=0 [MQTT-3.3.1-9].
func TestRetainedMessages(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	live := client(t, srv, codec.V311, "live")
	live.Subscribe(2, "ret/#")
	p := client(t, srv, codec.V311, "pub")
	p.PubRetained("ret/a", "a1", 1)
	p.PubRetained("ret/a", "a2", 2)
	p.PubRetained("ret/b", "b", 0)
	p.PubRetained("ret/c", "c", 1)
	p.PubRetained("ret/c", "", 1)
	for _, m := range live.Recv(5) {
		if m.Retain {
			t.Errorf("live delivery %q has RETAIN=1 [MQTT-3.3.1-9]", m.Payload)
		}
	}

	got := retainedOn(t, srv, codec.V311, "new", "ret/#", 1)
	wantPayloads(t, got, "a2", "b")
	for _, m := range got {
		if !m.Retain {
			t.Errorf("retained %q sent with RETAIN=0 [MQTT-3.3.1-8]", m.Payload)
		}
	}
	if got[0].QoS != 1 || got[1].QoS != 0 {
		t.Errorf("retained QoS %d and %d, want 1 (min of 2 and 1) and 0", got[0].QoS, got[1].QoS)
	}
	wantPayloads(t, retainedOn(t, srv, codec.V5, "exact", "ret/a", 0), "a2")
	wantPayloads(t, retainedOn(t, srv, codec.V5, "cleared", "ret/c", 0))
	if n := srv.Stats().Retained; n != 2 {
		t.Fatalf("Stats().Retained %d, want 2", n)
	}
}

// 5.0 3.8.3.1 Retain Handling: 0 sends retained messages at every
// subscribe, 1 only when the subscription is new, 2 never
// [MQTT-3.3.1-9] [MQTT-3.3.1-10] [MQTT-3.3.1-11].
func TestRetainHandling(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	client(t, srv, codec.V5, "pub").PubRetained("rh/x", "kept", 1)
	for _, tc := range []struct {
		rh           byte
		first, again int
	}{{0, 1, 1}, {1, 1, 0}, {2, 0, 0}} {
		t.Run(string(rune('0'+tc.rh)), func(t *testing.T) {
			c := client(t, srv, codec.V5, "rh"+string(rune('0'+tc.rh)))
			s := codec.Subscription{Filter: []byte("rh/#"), QoS: 1, RetainHandling: tc.rh}
			c.SubscribePacket(&codec.Subscribe{Subscriptions: []codec.Subscription{s}})
			if got := c.collect(); len(got) != tc.first {
				t.Fatalf("first subscribe: %d retained, want %d", len(got), tc.first)
			}
			c.SubscribePacket(&codec.Subscribe{Subscriptions: []codec.Subscription{s}})
			if got := c.collect(); len(got) != tc.again {
				t.Fatalf("repeated subscribe: %d retained, want %d", len(got), tc.again)
			}
		})
	}
}

// 5.0 3.8.3.1 Retain As Published [MQTT-3.3.1-12] [MQTT-3.3.1-13]: with it
// live deliveries keep the RETAIN flag they were published with.
func TestRetainAsPublished(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	rap := client(t, srv, codec.V5, "rap")
	rap.SubscribePacket(&codec.Subscribe{Subscriptions: []codec.Subscription{{Filter: []byte("rap/#"), QoS: 1, RetainAsPublished: true}}})
	plain := client(t, srv, codec.V5, "plain")
	plain.Subscribe(1, "rap/#")
	p := client(t, srv, codec.V5, "pub")
	p.PubRetained("rap/x", "r", 1)
	p.Pub("rap/x", "n", 1)
	got := rap.Recv(2)
	if !got[0].Retain || got[1].Retain {
		t.Fatalf("retain-as-published RETAIN flags %v %v, want true false", got[0].Retain, got[1].Retain)
	}
	for _, m := range plain.Recv(2) {
		if m.Retain {
			t.Fatalf("RETAIN=1 on a live delivery without Retain As Published")
		}
	}
}

// 5.0 3.3.2.3.3: a retained message past its expiry is no longer sent.
func TestRetainedMessageExpiry(t *testing.T) {
	t.Parallel()
	srv := newServer(t, core.Options{}, core.Config{})
	m := &codec.Publish{Topic: []byte("rexp/x"), Retain: true, QoS: 1, Payload: []byte("brief")}
	m.Props.SetNum(codec.PropMessageExpiry, 1)
	client(t, srv, codec.V5, "pub").Publish(m)
	got := retainedOn(t, srv, codec.V5, "early", "rexp/#", 1)
	wantPayloads(t, got, "brief")
	if e, ok := got[0].Props.Num(codec.PropMessageExpiry); !ok || e != 1 {
		t.Fatalf("retained expiry %d (present %v), want 1", e, ok)
	}
	time.Sleep(1100 * time.Millisecond)
	wantPayloads(t, retainedOn(t, srv, codec.V5, "late", "rexp/#", 1))
}

// RetainDisabled: CONNACK says Retain Available 0 and a retained PUBLISH is
// refused with DISCONNECT Retain not supported [MQTT-3.3.1-?] (3.2.2.3.5).
func TestRetainDisabled(t *testing.T) {
	srv := newServer(t, core.Options{RetainDisabled: true}, core.Config{})
	c := dial(t, srv, codec.V5)
	ack := c.Connect(connectPacket(codec.V5, "no-retain"))
	if ra, ok := ack.Props.Num(codec.PropRetainAvailable); !ok || ra != 0 {
		t.Fatalf("Retain Available %d (present %v), want 0", ra, ok)
	}
	c.Send(&codec.Publish{Topic: []byte("x"), Retain: true, Payload: []byte("r")})
	c.ExpectDisconnect(codec.RetainNotSupported)
}

// withWill sets a will on topic.
func withWill(topic, payload string, qos byte) func(*codec.Connect) {
	return func(p *codec.Connect) {
		p.WillFlag, p.WillTopic, p.WillPayload, p.WillQoS = true, []byte(topic), []byte(payload), qos
	}
}

// [MQTT-3.1.2-8] [MQTT-3.1.2-10] (5.0 3.1.2.5, 3.14.2.1): the will is
// published when the connection ends without DISCONNECT, not after a
// normal DISCONNECT, and after a 5.0 DISCONNECT with reason 0x04.
func TestWill(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	for _, tc := range []struct {
		name string
		v    byte
		end  func(c *tconn)
		want bool
	}{
		{"abrupt-v3.1.1", codec.V311, func(c *tconn) { c.Close() }, true},
		{"abrupt-v5", codec.V5, func(c *tconn) { c.Close() }, true},
		{"abrupt-v3.1", codec.V31, func(c *tconn) { c.Close() }, true},
		{"disconnect-v3.1.1", codec.V311, func(c *tconn) { c.disconnect() }, false},
		{"disconnect-normal-v5", codec.V5, func(c *tconn) { c.disconnect() }, false},
		{"disconnect-with-will-v5", codec.V5, func(c *tconn) {
			c.Send(&codec.Disconnect{ReasonCode: codec.DisconnectWithWillMessage})
			c.ExpectClosed()
		}, true},
		{"protocol-error-v5", codec.V5, func(c *tconn) {
			c.Send(connectPacket(codec.V5, "again"))
			c.ExpectDisconnect(codec.ProtocolError)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "will/" + tc.name
			w := client(t, srv, codec.V5, "watch-"+tc.name)
			w.Subscribe(1, topic)
			c := client(t, srv, tc.v, tc.name, withWill(topic, "bye", 1))
			tc.end(c)
			if tc.want {
				got := w.Recv(1)
				wantPayloads(t, got, "bye")
				if got[0].QoS != 1 {
					t.Errorf("will QoS %d, want 1", got[0].QoS)
				}
			} else {
				waitConnected(t, srv, 1)
				w.ExpectNothing(quiet)
			}
		})
	}
}

// [MQTT-3.1.2-17]: a will with Will Retain is published retained.
func TestWillRetained(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	c := client(t, srv, codec.V311, "wr", func(p *codec.Connect) {
		withWill("wr/status", "offline", 1)(p)
		p.WillRetain = true
	})
	c.Close()
	waitConnected(t, srv, 0)
	got := retainedOn(t, srv, codec.V311, "late", "wr/status", 1)
	wantPayloads(t, got, "offline")
}

// 5.0 will properties: a will's Message Expiry counts from when the will is
// published, not from CONNECT (3.1.3.2.4), and its properties (content
// type, user properties) reach subscribers.
func TestWillPropertiesAndExpiry(t *testing.T) {
	t.Parallel()
	srv := newServer(t, core.Options{}, core.Config{})
	w := client(t, srv, codec.V5, "watch")
	w.Subscribe(1, "wp")
	c := client(t, srv, codec.V5, "wp", func(p *codec.Connect) {
		withWill("wp", "bye", 1)(p)
		p.WillProps.SetNum(codec.PropMessageExpiry, 1)
		p.WillProps.ContentType = []byte("text/plain")
		p.WillProps.User = []codec.UserProperty{{Key: []byte("k"), Value: []byte("v")}}
	})
	time.Sleep(1200 * time.Millisecond) // longer than the will's expiry
	c.Close()
	got := w.Recv(1)[0]
	if string(got.Props.ContentType) != "text/plain" || len(got.Props.User) != 1 {
		t.Fatalf("will properties %+v, want content type and one user property", got.Props)
	}
	if e, ok := got.Props.Num(codec.PropMessageExpiry); !ok || e != 1 {
		t.Fatalf("will expiry %d (present %v), want 1", e, ok)
	}
}

// [MQTT-3.1.3-9] 5.0 3.1.3.2.2: with a Will Delay Interval the will waits;
// a reconnect within the delay cancels it, otherwise it is published when
// the delay passes.
func TestWillDelay(t *testing.T) {
	t.Parallel()
	srv := newServer(t, core.Options{}, core.Config{})
	delayed := func(topic string) func(*codec.Connect) {
		return func(p *codec.Connect) {
			persistent(p)
			withWill(topic, "late", 0)(p)
			p.WillProps.SetNum(codec.PropWillDelay, 1)
		}
	}
	w := client(t, srv, codec.V5, "watch")
	w.Subscribe(0, "wd/#")

	// Reconnect within the delay: no will.
	c := client(t, srv, codec.V5, "back", delayed("wd/back"))
	c.Close()
	time.Sleep(300 * time.Millisecond)
	again := dial(t, srv, codec.V5)
	p := connectPacket(codec.V5, "back")
	persistent(p)
	again.Connect(p)

	// Stay away: the will goes after about a second.
	gone := client(t, srv, codec.V5, "gone", delayed("wd/gone"))
	gone.Close()
	start := time.Now()
	w.ExpectNothing(500 * time.Millisecond)
	got := w.Recv(1)
	if string(got[0].Topic) != "wd/gone" {
		t.Fatalf("will on %q, want wd/gone", got[0].Topic)
	}
	if d := time.Since(start); d < 800*time.Millisecond || d > 2500*time.Millisecond {
		t.Fatalf("will after %v, want about 1s", d)
	}
	w.ExpectNothing(600 * time.Millisecond) // "back"'s will never comes
}

// 5.0 3.1.3.2.2: the will goes when the session ends if that is before the
// Will Delay Interval.
func TestWillDelayLongerThanSession(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	w := client(t, srv, codec.V5, "watch")
	w.Subscribe(0, "wds")
	c := client(t, srv, codec.V5, "short", func(p *codec.Connect) {
		withWill("wds", "now", 0)(p)
		p.WillProps.SetNum(codec.PropWillDelay, 60) // session expiry 0: ends now
	})
	c.Close()
	wantPayloads(t, w.Recv(1), "now")
}

// 5.0 3.1.4: a session taken over publishes the old connection's will when
// it has no delay.
func TestWillOnTakeover(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	w := client(t, srv, codec.V5, "watch")
	w.Subscribe(0, "wt")
	old := client(t, srv, codec.V5, "dup", withWill("wt", "replaced", 0))
	client(t, srv, codec.V5, "dup")
	old.ExpectDisconnect(codec.SessionTakenOver)
	wantPayloads(t, w.Recv(1), "replaced")
}

// 5.0 3.1.2.5 and [MQTT-3.1.3-9]: a will with a delay is not sent when a
// new connection resumes the session within the delay, and is sent at once
// when the new connection's Clean Start ends the session.
func TestWillDelayOnTakeover(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	for _, tc := range []struct {
		name  string
		clean bool
		want  bool
	}{{"resume", false, false}, {"clean-start", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "wdt/" + tc.name
			w := client(t, srv, codec.V5, "watch-"+tc.name)
			w.Subscribe(0, topic)
			old := client(t, srv, codec.V5, "wdt-"+tc.name, func(p *codec.Connect) {
				persistent(p)
				withWill(topic, "bye", 0)(p)
				p.WillProps.SetNum(codec.PropWillDelay, 30)
			})
			c := dial(t, srv, codec.V5)
			p := connectPacket(codec.V5, "wdt-"+tc.name)
			p.CleanStart = tc.clean
			p.Props.SetNum(codec.PropSessionExpiry, 30)
			c.Connect(p)
			old.ExpectDisconnect(codec.SessionTakenOver)
			if tc.want {
				wantPayloads(t, w.Recv(1), "bye")
			} else {
				w.ExpectNothing(quiet)
			}
		})
	}
}

// [MQTT-4.7.2-1] for retained messages: "#" and "+/…" do not bring back
// retained "$…" topics; a retained message sent on subscribe carries the
// subscription's identifier (3.3.4).
func TestRetainedDollarTopicsAndSubscriptionID(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	p := client(t, srv, codec.V5, "pub")
	p.PubRetained("$internal/x", "hidden", 0)
	p.PubRetained("public/x", "shown", 0)
	c := client(t, srv, codec.V5, "all")
	sp := &codec.Subscribe{Subscriptions: []codec.Subscription{sub("#", 1), sub("+/x", 1)}}
	sp.Props.SubscriptionIDs = []uint32{7}
	c.SubscribePacket(sp)
	got := c.collect()
	wantPayloads(t, got, "shown", "shown")
	for _, m := range got {
		if !slices.Equal(m.Props.SubscriptionIDs, []uint32{7}) {
			t.Fatalf("retained delivery with subscription ids %v, want [7]", m.Props.SubscriptionIDs)
		}
	}
	wantPayloads(t, retainedOn(t, srv, codec.V5, "dollar", "$internal/#", 0), "hidden")
}

// 5.0 3.1.3.2.2: a client gone with a will delay pending whose session a
// Clean Start connection ends: the session is over, so the will goes now,
// not when the delay runs out.
func TestWillDelayEndedByCleanStart(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	w := client(t, srv, codec.V5, "watch")
	w.Subscribe(0, "wdc")
	c := client(t, srv, codec.V5, "cs", func(p *codec.Connect) {
		persistent(p)
		withWill("wdc", "ended", 0)(p)
		p.WillProps.SetNum(codec.PropWillDelay, 60)
	})
	c.Close()
	w.ExpectNothing(quiet)         // the delay is running
	client(t, srv, codec.V5, "cs") // Clean Start: the old session ends
	wantPayloads(t, w.Recv(1), "ended")
}
