package core_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// [MQTT-4.3.3-10] (3.1.1 4.3.3 method B): a QoS 2 PUBLISH sent again with
// the same packet id before PUBREL is acknowledged again but delivered only
// once; PUBREL gets PUBCOMP; after it the id starts a new message.
func TestQoS2InboundExactlyOnce(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	for _, tc := range persistentVersions {
		t.Run(tc.name, func(t *testing.T) {
			topic := "eo/" + tc.name
			s := client(t, srv, tc.v, "sub-"+topic)
			s.Subscribe(2, topic)
			p := client(t, srv, tc.v, "pub-"+topic)
			pub := &codec.Publish{Topic: []byte(topic), QoS: 2, PacketID: 7, Payload: []byte("once")}
			p.Send(pub)
			p.ExpectAck(codec.PUBREC, 7)
			pub.Dup = true
			p.Send(pub)
			p.ExpectAck(codec.PUBREC, 7)
			p.Send(&codec.Ack{Kind: codec.PUBREL, PacketID: 7})
			p.ExpectAck(codec.PUBCOMP, 7)
			wantPayloads(t, s.Recv(1), "once")
			s.ExpectNothing(quiet)

			// A PUBREL for an id no longer known still gets PUBCOMP (5.0: 0x92).
			p.Send(&codec.Ack{Kind: codec.PUBREL, PacketID: 7})
			if a := p.ExpectAck(codec.PUBCOMP, 7); tc.v == codec.V5 && a.ReasonCode != codec.PacketIdentifierNotFound {
				t.Fatalf("PUBCOMP %s, want Packet Identifier not found", a.ReasonCode)
			}
			// The id is free again: a new message.
			p.Send(&codec.Publish{Topic: []byte(topic), QoS: 2, PacketID: 7, Payload: []byte("twice")})
			p.ExpectAck(codec.PUBREC, 7)
			wantPayloads(t, s.Recv(1), "twice")
		})
	}
}

// [MQTT-3.8.4-6] (3.1.1 [MQTT-3.8.4-6], 5.0 3.8.4): a message is delivered
// at the lower of its QoS and the subscription's.
func TestQoSDowngrade(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	for pubQoS := byte(0); pubQoS <= 2; pubQoS++ {
		for subQoS := byte(0); subQoS <= 2; subQoS++ {
			t.Run(fmt.Sprintf("pub%d-sub%d", pubQoS, subQoS), func(t *testing.T) {
				topic := fmt.Sprintf("qos/%d/%d", pubQoS, subQoS)
				s := client(t, srv, codec.V5, "s-"+topic)
				s.Subscribe(subQoS, topic)
				client(t, srv, codec.V5, "p-"+topic).Pub(topic, "x", pubQoS)
				got := s.Recv(1)[0]
				if want := min(pubQoS, subQoS); got.QoS != want {
					t.Fatalf("delivered at QoS %d, want %d", got.QoS, want)
				}
			})
		}
	}
}

// [MQTT-3.3.5-1]: a 3.1.1 client whose subscriptions overlap gets one copy
// at the highest QoS; 5.0 (3.3.4) sends one copy per subscription, each
// with that subscription's identifier.
func TestOverlappingSubscriptions(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	t.Run("v3.1.1", func(t *testing.T) {
		s := client(t, srv, codec.V311, "ov3")
		s.Subscribe(0, "ov3/#")
		s.Subscribe(2, "ov3/+/c")
		s.Subscribe(1, "ov3/b/c")
		client(t, srv, codec.V311, "ov3-pub").Pub("ov3/b/c", "x", 2)
		got := s.Recv(1)
		if got[0].QoS != 2 {
			t.Fatalf("single copy at QoS %d, want 2", got[0].QoS)
		}
		s.ExpectNothing(quiet)
	})
	t.Run("v5", func(t *testing.T) {
		s := client(t, srv, codec.V5, "ov5")
		for i, f := range []string{"ov5/#", "ov5/+/c", "ov5/b/c"} {
			sp := &codec.Subscribe{Subscriptions: []codec.Subscription{sub(f, byte(i%3))}}
			sp.Props.SubscriptionIDs = []uint32{uint32(10 + i)}
			s.SubscribePacket(sp)
		}
		client(t, srv, codec.V5, "ov5-pub").Pub("ov5/b/c", "x", 2)
		got := s.Recv(3)
		var ids []uint32
		qos := map[uint32]byte{}
		for _, m := range got {
			if len(m.Props.SubscriptionIDs) != 1 {
				t.Fatalf("copy with subscription ids %v, want one", m.Props.SubscriptionIDs)
			}
			ids = append(ids, m.Props.SubscriptionIDs[0])
			qos[m.Props.SubscriptionIDs[0]] = m.QoS
		}
		slices.Sort(ids)
		if !slices.Equal(ids, []uint32{10, 11, 12}) {
			t.Fatalf("subscription ids %v, want 10 11 12", ids)
		}
		if qos[10] != 0 || qos[11] != 1 || qos[12] != 2 {
			t.Fatalf("QoS per subscription %v, want 10:0 11:1 12:2", qos)
		}
		s.ExpectNothing(quiet)
	})
}

// [MQTT-4.7.2-1]: filters starting with a wildcard do not match topics
// starting with '$'; an explicit "$..." filter does.
func TestDollarTopicsNotMatchedByWildcards(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	wild := client(t, srv, codec.V311, "wild")
	wild.Subscribe(0, "#", "+/x", "+/+")
	dollar := client(t, srv, codec.V311, "dollar")
	dollar.Subscribe(0, "$app/#", "$app/+")
	p := client(t, srv, codec.V311, "p")
	p.Pub("$app/x", "dollar", 0)
	p.Pub("app/x", "plain", 0)
	wantPayloads(t, dollar.Recv(1), "dollar") // one copy: two overlapping 3.1.1 subscriptions
	dollar.ExpectNothing(quiet)
	wantPayloads(t, wild.Recv(1), "plain")
	wild.ExpectNothing(quiet)
}

// Topic matching through the broker: '+' one level, '#' the parent and
// everything below [MQTT-4.7.1-2] [MQTT-4.7.1-3].
func TestWildcardMatching(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	p := client(t, srv, codec.V311, "p")
	for _, tc := range []struct {
		filter string
		match  []string
		miss   []string
	}{
		{"sport/#", []string{"sport", "sport/tennis", "sport/tennis/player1", "sport/"}, []string{"sports", "x/sport"}},
		{"sport/+", []string{"sport/tennis", "sport/"}, []string{"sport", "sport/tennis/p"}},
		{"+/+", []string{"a/b", "/b", "a/"}, []string{"a", "a/b/c"}},
		{"/+", []string{"/finance"}, []string{"finance"}},
		{"+", []string{"a"}, []string{"/a", "a/b"}},
		{"a/+/c/#", []string{"a/b/c", "a/x/c/d/e"}, []string{"a/c", "a/b/d"}},
	} {
		t.Run(tc.filter, func(t *testing.T) {
			s := client(t, srv, codec.V311, "s-"+tc.filter)
			s.Subscribe(0, tc.filter)
			for _, topic := range append(slices.Clone(tc.miss), tc.match...) {
				p.Pub(topic, topic, 0)
			}
			wantPayloads(t, s.Recv(len(tc.match)), tc.match...)
			s.ExpectNothing(quiet)
			s.disconnect()
		})
	}
}

// 3.9.3: SUBACK has one code per filter, in order: the granted QoS, Topic
// Filter invalid (0x8F) for a bad filter in 5.0, 0x80 Failure in 3.1.1.
func TestSubackCodes(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	for _, tc := range []struct {
		name string
		v    byte
		bad  codec.ReasonCode
	}{{"v3.1.1", codec.V311, codec.UnspecifiedError}, {"v5", codec.V5, codec.TopicFilterInvalid}} {
		t.Run(tc.name, func(t *testing.T) {
			c := client(t, srv, tc.v, "suback-"+tc.name)
			ack := c.SubscribePacket(&codec.Subscribe{Subscriptions: []codec.Subscription{
				sub("a/b", 1), sub("a/#/b", 0), sub("$share/g/a", 2), sub("a+", 1), sub("$share/g", 0), sub("#", 0),
			}})
			want := []codec.ReasonCode{codec.GrantedQoS1, tc.bad, codec.GrantedQoS2, tc.bad, tc.bad, codec.GrantedQoS0}
			if !slices.Equal(ack.ReasonCodes, want) {
				t.Fatalf("SUBACK codes %v, want %v", ack.ReasonCodes, want)
			}
			c.Send(&codec.Pingreq{})
			expect[*codec.Pingresp](c)
		})
	}
}

// [MQTT-3.8.3-4]: No Local on a shared subscription is a Protocol Error.
func TestSharedNoLocalIsProtocolError(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	c := client(t, srv, codec.V5, "nl-shared")
	c.Send(&codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{
		{Filter: []byte("$share/g/x"), QoS: 1, NoLocal: true}}})
	c.ExpectDisconnect(codec.ProtocolError)
}

// 3.10.4 / 3.11.3: UNSUBSCRIBE stops deliveries; 5.0 UNSUBACK answers each
// filter with Success or No subscription existed (0x11).
func TestUnsubscribe(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	for _, tc := range persistentVersions {
		t.Run(tc.name, func(t *testing.T) {
			topic := "unsub/" + tc.name
			s := client(t, srv, tc.v, "s-"+topic)
			s.Subscribe(1, topic, "$share/g/"+topic)
			u := &codec.Unsubscribe{PacketID: 9, Filters: [][]byte{[]byte(topic), []byte("never/subscribed"), []byte("$share/g/" + topic), []byte("a/#/b")}}
			s.Send(u)
			ack := expect[*codec.Unsuback](s)
			if ack.PacketID != 9 {
				t.Fatalf("UNSUBACK id %d, want 9 [MQTT-3.10.4-4]", ack.PacketID)
			}
			if tc.v == codec.V5 {
				want := []codec.ReasonCode{codec.Success, codec.NoSubscriptionExisted, codec.Success, codec.TopicFilterInvalid}
				if !slices.Equal(ack.ReasonCodes, want) {
					t.Fatalf("UNSUBACK codes %v, want %v", ack.ReasonCodes, want)
				}
			}
			client(t, srv, tc.v, "p-"+topic).Pub(topic, "x", 1)
			s.ExpectNothing(quiet)
		})
	}
}

// 3.3.1.2 / 5.0 3.3.2.3.4: No Local stops a client's own messages coming
// back through that subscription.
func TestNoLocal(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	me := client(t, srv, codec.V5, "me")
	me.SubscribePacket(&codec.Subscribe{Subscriptions: []codec.Subscription{{Filter: []byte("nl"), QoS: 1, NoLocal: true}}})
	other := client(t, srv, codec.V5, "other")
	other.Subscribe(1, "nl")
	me.Send(&codec.Publish{Topic: []byte("nl"), QoS: 1, PacketID: 1, Payload: []byte("mine")})
	me.ExpectAck(codec.PUBACK, 1)
	wantPayloads(t, other.Recv(1), "mine")
	me.ExpectNothing(quiet)
	other.Pub("nl", "theirs", 0)
	wantPayloads(t, me.Recv(1), "theirs")
}

// [MQTT-3.3.2-12] [MQTT-3.3.2-3] (5.0 3.3.2.3.4): a Topic Alias set with a
// topic name stands for it in later PUBLISH packets with an empty topic;
// an alias above the maximum is Topic Alias invalid, an unknown one or 0 a
// Protocol Error.
func TestTopicAliasInbound(t *testing.T) {
	srv := newServer(t, core.Options{TopicAliasMaximum: 4}, core.Config{})
	s := client(t, srv, codec.V5, "alias-sub")
	s.Subscribe(1, "alias/#")
	p := client(t, srv, codec.V5, "alias-pub")
	withAlias := func(topic string, alias uint16, payload string) *codec.Publish {
		m := &codec.Publish{Topic: []byte(topic), QoS: 1, Payload: []byte(payload)}
		m.Props.SetNum(codec.PropTopicAlias, uint32(alias))
		return m
	}
	p.Publish(withAlias("alias/one", 1, "set"))
	p.Publish(withAlias("", 1, "used"))
	p.Publish(withAlias("alias/two", 1, "reset"))
	p.Publish(withAlias("", 1, "used-again"))
	got := s.Recv(4)
	for i, want := range []string{"alias/one", "alias/one", "alias/two", "alias/two"} {
		if string(got[i].Topic) != want {
			t.Fatalf("delivery %d on %q, want %q", i, got[i].Topic, want)
		}
	}

	for _, tc := range []struct {
		name  string
		topic string
		alias uint16
		want  []codec.ReasonCode
	}{
		{"above-maximum", "alias/x", 5, []codec.ReasonCode{codec.TopicAliasInvalid}},
		{"unknown", "", 3, []codec.ReasonCode{codec.ProtocolError, codec.TopicAliasInvalid}},
		// [MQTT-3.3.2-8] 0 is never valid: the codec refuses it while
		// decoding, as a Protocol Error; Topic Alias invalid would do too.
		{"zero", "alias/x", 0, []codec.ReasonCode{codec.ProtocolError, codec.TopicAliasInvalid}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := client(t, srv, codec.V5, "alias-"+tc.name)
			m := &codec.Publish{Topic: []byte(tc.topic), Payload: []byte("x")}
			if tc.alias == 0 {
				// SetNum would encode it; write the property by hand.
				raw := []byte{0x30, 0, 0x00, 0x07}
				raw = append(raw, "alias/x"...)
				raw = append(raw, 0x03, 0x23, 0x00, 0x00, 'x')
				raw[1] = byte(len(raw) - 2)
				c.SendRaw(raw)
			} else {
				m.Props.SetNum(codec.PropTopicAlias, uint32(tc.alias))
				c.Send(m)
			}
			d := expect[*codec.Disconnect](c)
			if !slices.Contains(tc.want, d.ReasonCode) {
				t.Fatalf("DISCONNECT %s, want one of %v", d.ReasonCode, tc.want)
			}
			c.ExpectClosed()
		})
	}
	s.ExpectNothing(quiet)
}

// 5.0 3.3.2.3.4: towards a client that announced Topic Alias Maximum, the
// broker sends the topic with a new alias once, then the alias alone.
func TestTopicAliasOutbound(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	s := client(t, srv, codec.V5, "out-alias", func(p *codec.Connect) {
		p.Props.SetNum(codec.PropTopicAliasMaximum, 2)
	})
	s.Subscribe(0, "oa/#")
	p := client(t, srv, codec.V5, "oa-pub")
	for _, topic := range []string{"oa/a", "oa/a", "oa/b", "oa/c", "oa/a", "oa/b", "oa/c"} {
		p.Pub(topic, topic, 0)
	}
	got := s.Recv(7)
	aliases := map[uint16]string{}
	for i, m := range got {
		alias, hasAlias := m.Props.Num(codec.PropTopicAlias)
		topic := string(m.Topic)
		if hasAlias {
			if alias == 0 || alias > 2 {
				t.Fatalf("delivery %d: alias %d outside 1..2 [MQTT-3.3.2-10]", i, alias)
			}
			if topic == "" {
				topic = aliases[uint16(alias)]
			} else {
				aliases[uint16(alias)] = topic
			}
		}
		if topic != string(m.Payload) {
			t.Fatalf("delivery %d resolves to topic %q, want %q", i, topic, m.Payload)
		}
	}
	if len(got[1].Topic) != 0 {
		t.Errorf("second message on oa/a carries the topic %q, want the alias alone", got[1].Topic)
	}
	none := client(t, srv, codec.V5, "no-alias")
	none.Subscribe(0, "oa/#")
	p.Pub("oa/a", "oa/a", 0)
	p.Pub("oa/a", "oa/a", 0)
	for _, m := range none.Recv(2) {
		if m.Props.Has(codec.PropTopicAlias) {
			t.Errorf("alias sent to a client with Topic Alias Maximum 0 [MQTT-3.3.2-9]")
		}
	}
}

// 5.0 3.3.2.3.3: a message whose expiry passes while queued for an offline
// session is not delivered; one delivered later carries the remaining
// interval [MQTT-3.3.2-5] [MQTT-3.3.2-6].
func TestMessageExpiry(t *testing.T) {
	t.Parallel()
	srv := newServer(t, core.Options{}, core.Config{})
	s := client(t, srv, codec.V5, "expiry", persistent)
	s.Subscribe(1, "exp/#")
	s.disconnect()
	waitConnected(t, srv, 0)
	p := client(t, srv, codec.V5, "exp-pub")
	for _, m := range []struct {
		payload string
		expiry  uint32
	}{{"short", 1}, {"long", 10}, {"none", 0}} {
		pub := &codec.Publish{Topic: []byte("exp/x"), QoS: 1, Payload: []byte(m.payload)}
		if m.expiry > 0 {
			pub.Props.SetNum(codec.PropMessageExpiry, m.expiry)
		}
		p.Publish(pub)
	}
	time.Sleep(1200 * time.Millisecond)
	c := dial(t, srv, codec.V5)
	cp := connectPacket(codec.V5, "expiry")
	persistent(cp)
	c.Connect(cp)
	got := c.Recv(2)
	wantPayloads(t, got, "long", "none")
	if e, ok := got[0].Props.Num(codec.PropMessageExpiry); !ok || e >= 10 || e < 8 {
		t.Fatalf("forwarded expiry %d (present %v), want 8 or 9 after 1.2s of 10", e, ok)
	}
	if got[1].Props.Has(codec.PropMessageExpiry) {
		t.Fatalf("expiry added to a message that had none")
	}
	waitFor(t, "expired drop counted", func() bool { return srv.Stats().Dropped["expired"] == 1 })
}

// [MQTT-3.3.4-9]: the broker never has more unacknowledged QoS 1/2
// PUBLISH packets towards a client than the client's Receive Maximum.
func TestClientReceiveMaximum(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	s := client(t, srv, codec.V5, "rm", func(p *codec.Connect) {
		p.Props.SetNum(codec.PropReceiveMaximum, 2)
	})
	s.Subscribe(1, "rm")
	p := client(t, srv, codec.V5, "rm-pub")
	for _, m := range seq("m", 6) {
		p.Pub("rm", m, 1)
	}
	var got []string
	for len(got) < 6 {
		a, b := s.ExpectPublish(), s.ExpectPublish()
		s.ExpectNothing(quiet) // the window is full
		got = append(got, string(a.Payload), string(b.Payload))
		s.Ack(a)
		s.Ack(b)
	}
	if !slices.Equal(got, seq("m", 6)) {
		t.Fatalf("payloads %q, want m0..m5 in order", got)
	}
	s.ExpectNothing(quiet)
}

// [MQTT-3.3.4-8]: a client sending more unacknowledged QoS 2 PUBLISH
// packets than the broker's Receive Maximum is disconnected with 0x93.
func TestServerReceiveMaximum(t *testing.T) {
	srv := newServer(t, core.Options{ReceiveMaximum: 2}, core.Config{})
	c := dial(t, srv, codec.V5)
	ack := c.Connect(connectPacket(codec.V5, "flood"))
	if rm, ok := ack.Props.Num(codec.PropReceiveMaximum); !ok || rm != 2 {
		t.Fatalf("CONNACK Receive Maximum %d (present %v), want 2", rm, ok)
	}
	for id := uint16(1); id <= 2; id++ {
		c.Send(&codec.Publish{Topic: []byte("f"), QoS: 2, PacketID: id})
		c.ExpectAck(codec.PUBREC, id)
	}
	c.Send(&codec.Publish{Topic: []byte("f"), QoS: 2, PacketID: 3})
	c.ExpectDisconnect(codec.ReceiveMaximumExceeded)
}

// [MQTT-3.1.2-24] [MQTT-3.1.2-25]: a message larger than the client's
// Maximum Packet Size is not sent to it (and is dropped, not retried).
func TestClientMaximumPacketSize(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	s := client(t, srv, codec.V5, "small", func(p *codec.Connect) {
		p.Props.SetNum(codec.PropMaximumPacketSize, 64)
	})
	s.Subscribe(1, "mps/#")
	p := client(t, srv, codec.V5, "mps-pub")
	p.Pub("mps/a", strings.Repeat("x", 100), 1)
	p.Pub("mps/a", "small", 1)
	got := s.Recv(1)
	wantPayloads(t, got, "small")
	s.ExpectNothing(quiet)
	waitFor(t, "too_large drop counted", func() bool { return srv.Stats().Dropped["too_large"] == 1 })
}

// A message dropped for the client's Maximum Packet Size must not consume
// a topic alias the client never learned: the next message on that topic
// carries the topic name (5.0 3.3.2.3.4, [MQTT-3.3.4-?] receiver must know
// the alias).
func TestClientMaximumPacketSizeWithTopicAlias(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	s := client(t, srv, codec.V5, "small-alias", func(p *codec.Connect) {
		p.Props.SetNum(codec.PropMaximumPacketSize, 64)
		p.Props.SetNum(codec.PropTopicAliasMaximum, 4)
	})
	s.Subscribe(0, "mpa/#")
	p := client(t, srv, codec.V5, "mpa-pub")
	p.Pub("mpa/a", strings.Repeat("x", 100), 0)
	p.Pub("mpa/a", "first", 0)
	p.Pub("mpa/a", "second", 0)
	got := s.Recv(2)
	wantPayloads(t, got, "first", "second")
	if string(got[0].Topic) != "mpa/a" {
		t.Fatalf("first delivered message has topic %q and alias props %v: the client cannot resolve it", got[0].Topic, got[0].Props.TopicAlias)
	}
}

// [MQTT-3.3.2-15] [MQTT-3.3.2-16] [MQTT-3.3.2-17] [MQTT-3.3.2-18]
// [MQTT-3.3.2-19] [MQTT-3.3.2-20]: Response Topic, Correlation Data,
// Content Type, Payload Format and User Properties reach subscribers
// unchanged, user properties in order.
func TestRequestResponsePropertiesForwarded(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	s := client(t, srv, codec.V5, "responder")
	s.Subscribe(1, "req/#")
	p := client(t, srv, codec.V5, "requester")
	m := &codec.Publish{Topic: []byte("req/1"), QoS: 1, Payload: []byte("ping")}
	m.Props.ResponseTopic = []byte("resp/requester")
	m.Props.CorrelationData = []byte{0, 1, 2, 0xff}
	m.Props.ContentType = []byte("text/plain")
	m.Props.SetNum(codec.PropPayloadFormat, 1)
	m.Props.User = []codec.UserProperty{
		{Key: []byte("k"), Value: []byte("1")}, {Key: []byte("a"), Value: []byte("2")}, {Key: []byte("k"), Value: []byte("3")},
	}
	p.Publish(m)
	got := s.Recv(1)[0]
	if !bytes.Equal(got.Props.ResponseTopic, m.Props.ResponseTopic) || !bytes.Equal(got.Props.CorrelationData, m.Props.CorrelationData) ||
		!bytes.Equal(got.Props.ContentType, m.Props.ContentType) || got.Props.PayloadFormat != 1 || !got.Props.Has(codec.PropPayloadFormat) {
		t.Fatalf("properties %+v, want those published", got.Props)
	}
	var users []string
	for _, u := range got.Props.User {
		users = append(users, string(u.Key)+"="+string(u.Value))
	}
	if want := []string{"k=1", "a=2", "k=3"}; !slices.Equal(users, want) {
		t.Fatalf("user properties %v, want %v", users, want)
	}
	// A 3.1.1 subscriber gets the same message without properties.
	old := client(t, srv, codec.V311, "old")
	old.Subscribe(0, "req/#")
	p.Publish(m)
	wantPayloads(t, old.Recv(1), "ping")
}

// $SYS topics are published by the broker every SysInterval, retained, and
// clients may not publish to them.
func TestSysTopics(t *testing.T) {
	srv := newServer(t, core.Options{SysInterval: 50 * time.Millisecond, Version: "test"}, core.Config{})
	c := client(t, srv, codec.V5, "sys")
	// The ticks go on while the broker subscribes: a PUBLISH may come
	// before the SUBACK, which the specification allows (3.8.4).
	seen := subscribeCollect(t, c, "$SYS/broker/version", "$SYS/broker/clients/connected")
	if v := seen["$SYS/broker/version"]; string(v.Payload) != "xmq version test" {
		t.Fatalf("version %q, want %q", v.Payload, "xmq version test")
	}
	w := client(t, srv, codec.V5, "sys-writer") // no subscription: nothing arrives among its acks
	if rc := w.Publish(&codec.Publish{Topic: []byte("$SYS/broker/version"), QoS: 1, Payload: []byte("fake")}); rc != codec.NotAuthorized {
		t.Fatalf("PUBACK %s for a client's $SYS publish, want Not authorized", rc)
	}
	// A fresh subscriber gets the retained values at once.
	n := client(t, srv, codec.V311, "sys-late")
	if m := subscribeCollect(t, n, "$SYS/broker/uptime")["$SYS/broker/uptime"]; !m.Retain || !strings.HasSuffix(string(m.Payload), " seconds") {
		t.Fatalf("uptime %q retain %v, want a retained \"N seconds\"", m.Payload, m.Retain)
	}
}

// subscribeCollect subscribes c to filters (topics without wildcards) at
// QoS 0 and returns the first PUBLISH of each, accepting them before or
// after the SUBACK.
func subscribeCollect(t *testing.T, c *tconn, filters ...string) map[string]*codec.Publish {
	t.Helper()
	s := &codec.Subscribe{PacketID: c.NextID()}
	for _, f := range filters {
		s.Subscriptions = append(s.Subscriptions, sub(f, 0))
	}
	c.Send(s)
	seen := map[string]*codec.Publish{}
	acked := false
	for !acked || len(seen) < len(filters) {
		switch p := c.Next().(type) {
		case *codec.Suback:
			acked = true
			for i, rc := range p.ReasonCodes {
				if rc != codec.Success {
					t.Fatalf("SUBACK %s for %q", rc, filters[i])
				}
			}
		case *codec.Publish:
			if seen[string(p.Topic)] == nil {
				seen[string(p.Topic)] = p
			}
		default:
			t.Fatalf("got %T, want SUBACK or PUBLISH", p)
		}
	}
	return seen
}

// denyAuthz refuses every topic or filter starting with "deny".
type denyAuthz struct{}

func (denyAuthz) CanPublish(clientID, username, topic string) bool {
	return !strings.HasPrefix(topic, "deny")
}

func (denyAuthz) CanWill(clientID, username, topic string) bool {
	return !strings.HasPrefix(topic, "deny")
}

func (denyAuthz) CanSubscribe(clientID, username, filter string) bool {
	return !strings.HasPrefix(filter, "deny")
}

// ReadsAll is false for filters that can reach deny... topics.
func (denyAuthz) ReadsAll(clientID, username, filter string) bool {
	return !strings.HasPrefix(filter, "deny") && !strings.HasPrefix(filter, "+") && !strings.HasPrefix(filter, "#")
}

func (denyAuthz) CanRead(clientID, username, topic string) bool {
	return !strings.HasPrefix(topic, "deny")
}

func (denyAuthz) Generation() uint64 { return 1 }

// The Authorizer: a refused PUBLISH gets PUBACK Not authorized in 5.0
// (3.4.2.1) and a plain PUBACK in 3.1.1 [MQTT-3.3.5-2], and is not
// delivered; a refused filter gets SUBACK 0x87 / 0x80 [MQTT-3.9.3-1].
func TestAuthorizer(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{Authorizer: denyAuthz{}})
	watch := client(t, srv, codec.V311, "watch")
	watch.Subscribe(1, "#")
	for _, tc := range []struct {
		name   string
		v      byte
		wantRC codec.ReasonCode
		subRC  codec.ReasonCode
	}{
		{"v5", codec.V5, codec.NotAuthorized, codec.NotAuthorized},
		{"v3.1.1", codec.V311, codec.Success, codec.UnspecifiedError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := client(t, srv, tc.v, "authz-"+tc.name)
			if rc := c.Publish(&codec.Publish{Topic: []byte("deny/x"), QoS: 1, Payload: []byte("no")}); rc != tc.wantRC {
				t.Fatalf("PUBACK %s, want %s", rc, tc.wantRC)
			}
			if rc := c.Publish(&codec.Publish{Topic: []byte("deny/y"), QoS: 2, Payload: []byte("no")}); rc != tc.wantRC {
				t.Fatalf("PUBREC %s, want %s", rc, tc.wantRC)
			}
			c.Pub("allow/x", "yes-"+tc.name, 1)
			wantPayloads(t, watch.Recv(1), "yes-"+tc.name)
			ack := c.SubscribePacket(&codec.Subscribe{Subscriptions: []codec.Subscription{sub("deny/#", 1), sub("allow/#", 1)}})
			if want := []codec.ReasonCode{tc.subRC, codec.GrantedQoS1}; !slices.Equal(ack.ReasonCodes, want) {
				t.Fatalf("SUBACK %v, want %v", ack.ReasonCodes, want)
			}
		})
	}
	watch.ExpectNothing(quiet)
}

// MaxTopicLevels: a topic with more levels is refused (PUBACK Topic Name
// invalid in 5.0), a filter with more levels gets SUBACK Topic Filter
// invalid.
func TestMaxTopicLevels(t *testing.T) {
	srv := newServer(t, core.Options{MaxTopicLevels: 3}, core.Config{})
	c := client(t, srv, codec.V5, "levels")
	ack := c.SubscribePacket(&codec.Subscribe{Subscriptions: []codec.Subscription{sub("a/b/c", 1), sub("a/b/c/d", 1), sub("a/+/+/#", 1)}})
	if want := []codec.ReasonCode{codec.GrantedQoS1, codec.TopicFilterInvalid, codec.TopicFilterInvalid}; !slices.Equal(ack.ReasonCodes, want) {
		t.Fatalf("SUBACK %v, want %v", ack.ReasonCodes, want)
	}
	p := client(t, srv, codec.V5, "levels-pub")
	// "///" is four empty levels in three bytes: the most levels a topic
	// of its length can have.
	for _, topic := range []string{"a/b/c/d", "///"} {
		if rc := p.Publish(&codec.Publish{Topic: []byte(topic), QoS: 1}); rc != codec.TopicNameInvalid {
			t.Fatalf("PUBACK %s for %q, want Topic Name invalid", rc, topic)
		}
	}
	p.Pub("a/b/c", "ok", 1)
	wantPayloads(t, c.Recv(1), "ok")
}

// Inbound MaxPacketSize: a larger packet ends the connection (5.0:
// DISCONNECT Packet too large [MQTT-3.2.2-15] 4.13; 3.1.1: close), and the
// other clients carry on.
func TestMaxPacketSize(t *testing.T) {
	srv := newServer(t, core.Options{MaxPacketSize: 128}, core.Config{})
	watch := client(t, srv, codec.V5, "watch")
	watch.Subscribe(0, "big/#")
	for _, tc := range persistentVersions {
		t.Run(tc.name, func(t *testing.T) {
			c := client(t, srv, tc.v, "big-"+tc.name)
			if err := c.Write((&codec.Publish{Topic: []byte("big/x"), Payload: make([]byte, 200)}).Append(nil, tc.v)); err != nil {
				t.Logf("write: %v (the broker may close before reading the body)", err)
			}
			if tc.v == codec.V5 {
				c.ExpectDisconnect(codec.PacketTooLarge)
			} else {
				c.ExpectClosed()
			}
			other := client(t, srv, tc.v, "fine-"+tc.name)
			other.Pub("big/y", "fits-"+tc.name, 0)
			wantPayloads(t, watch.Recv(1), "fits-"+tc.name)
		})
	}
	waitFor(t, "packet_too_large counted", func() bool { return srv.Stats().Disconnects["packet_too_large"] == 2 })
}

// 4.13 / [MQTT-4.8.0-1]: a malformed packet ends the connection (5.0:
// DISCONNECT Malformed Packet first), and only that connection.
func TestMalformedPacket(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	watch := client(t, srv, codec.V5, "watch")
	watch.Subscribe(0, "mal/#")
	for _, tc := range []struct {
		name string
		v    byte
		raw  []byte
		rc   codec.ReasonCode
	}{
		{"qos3-v5", codec.V5, []byte{0x36, 0x06, 0x00, 0x01, 'a', 0x00, 0x01, 0x00}, codec.MalformedPacket},
		{"dup-qos0-v5", codec.V5, []byte{0x38, 0x04, 0x00, 0x01, 'a', 0x00}, codec.MalformedPacket},
		{"bad-utf8-topic-v5", codec.V5, []byte{0x30, 0x04, 0x00, 0x01, 0xff, 0x00}, codec.MalformedPacket},
		{"reserved-type-v5", codec.V5, []byte{0x00, 0x00}, codec.MalformedPacket},
		{"subscribe-bad-flags-v5", codec.V5, []byte{0x80, 0x06, 0x00, 0x01, 0x00, 0x00, 0x01, 'a', 0x00}, codec.MalformedPacket},
		{"qos3-v3.1.1", codec.V311, []byte{0x36, 0x05, 0x00, 0x01, 'a', 0x00, 0x01}, 0},
		{"varint-too-long-v3.1.1", codec.V311, []byte{0x30, 0xff, 0xff, 0xff, 0xff, 0x01}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := client(t, srv, tc.v, "mal-"+tc.name)
			_ = c.Write(tc.raw)
			if tc.v == codec.V5 {
				c.ExpectDisconnect(tc.rc)
			} else {
				c.ExpectClosed()
			}
			other := client(t, srv, codec.V311, "ok-"+tc.name)
			other.Pub("mal/x", tc.name, 0)
			wantPayloads(t, watch.Recv(1), tc.name)
		})
	}
}

// [MQTT-3.3.1-2] … broker rules: a PUBLISH to a topic with no subscriber
// gets 5.0 PUBACK No matching subscribers (0x10), a success code.
func TestNoMatchingSubscribers(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	c := client(t, srv, codec.V5, "lonely")
	if rc := c.Publish(&codec.Publish{Topic: []byte("nobody/home"), QoS: 1}); rc != codec.NoMatchingSubscribers {
		t.Fatalf("PUBACK %s, want No matching subscribers", rc)
	}
	if rc := c.Publish(&codec.Publish{Topic: []byte("nobody/home"), QoS: 2}); rc != codec.NoMatchingSubscribers {
		t.Fatalf("PUBREC %s, want No matching subscribers", rc)
	}
}

// [MQTT-3.2.0-?] 4.8 / 3.1.2-?: packets only a server sends, and AUTH
// without an agreed method, are protocol errors from a client.
func TestClientSendsServerPacket(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	for _, tc := range []struct {
		name string
		p    codec.Packet
	}{
		{"connack", &codec.Connack{}},
		{"suback", &codec.Suback{PacketID: 1, ReasonCodes: []codec.ReasonCode{0}}},
		{"unsuback", &codec.Unsuback{PacketID: 1, ReasonCodes: []codec.ReasonCode{0}}},
		{"pingresp", &codec.Pingresp{}},
		{"auth", &codec.Auth{ReasonCode: codec.ReAuthenticate}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := client(t, srv, codec.V5, "srvpkt-"+tc.name)
			c.Send(tc.p)
			c.ExpectDisconnect(codec.ProtocolError)
		})
	}
}

// 4.12: enhanced authentication is not configured, so a CONNECT with an
// Authentication Method is refused with Bad authentication method.
func TestConnectAuthMethodRefused(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	c := dial(t, srv, codec.V5)
	p := connectPacket(codec.V5, "scram")
	p.Props.AuthMethod = []byte("SCRAM-SHA-1")
	if ack := c.ConnectRC(p); ack.ReasonCode != codec.BadAuthenticationMethod {
		t.Fatalf("CONNACK %s, want Bad authentication method", ack.ReasonCode)
	}
	c.ExpectClosed()
}

// 4.3.3 / 3.5.2.1: a PUBREC with an error code ends the QoS 2 flow (no
// PUBREL) and frees the slot in the client's Receive Maximum; an unknown
// PUBREC gets PUBREL Packet Identifier not found.
func TestPubrecErrorEndsFlow(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	s := client(t, srv, codec.V5, "refuser", func(p *codec.Connect) {
		p.Props.SetNum(codec.PropReceiveMaximum, 1)
	})
	s.Subscribe(2, "pr")
	p := client(t, srv, codec.V5, "pr-pub")
	p.Pub("pr", "refused", 2)
	p.Pub("pr", "next", 2)
	m := s.ExpectPublish()
	s.ExpectNothing(quiet) // window of one
	s.Send(&codec.Ack{Kind: codec.PUBREC, PacketID: m.PacketID, ReasonCode: codec.UnspecifiedError})
	wantPayloads(t, s.Recv(1), "next")
	s.Send(&codec.Ack{Kind: codec.PUBREC, PacketID: 999})
	if a := s.ExpectAck(codec.PUBREL, 999); a.ReasonCode != codec.PacketIdentifierNotFound {
		t.Fatalf("PUBREL %s, want Packet Identifier not found", a.ReasonCode)
	}
}

// 3.1.2.5 with RetainDisabled: a will with Will Retain is refused with
// CONNACK Retain not supported.
func TestWillRetainWithRetainDisabled(t *testing.T) {
	srv := newServer(t, core.Options{RetainDisabled: true}, core.Config{})
	c := dial(t, srv, codec.V5)
	p := connectPacket(codec.V5, "wr")
	p.WillFlag, p.WillTopic, p.WillRetain = true, []byte("w"), true
	if ack := c.ConnectRC(p); ack.ReasonCode != codec.RetainNotSupported {
		t.Fatalf("CONNACK %s, want Retain not supported", ack.ReasonCode)
	}
	c.ExpectClosed()
}

// TestPublishWithSubscriptionIDRefused: a client must not send a
// Subscription Identifier [MQTT-3.3.4-6].
func TestPublishWithSubscriptionIDRefused(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	c := client(t, srv, codec.V5, "subid-pub")
	p := &codec.Publish{Topic: []byte("a"), Payload: []byte("x")}
	p.Props.SubscriptionIDs = []uint32{1}
	c.Send(p)
	c.ExpectDisconnect(codec.ProtocolError)
}

// TestDisconnectCarriesReasonString: a server DISCONNECT says why in its
// Reason String, for the operator reading the client's log.
func TestDisconnectCarriesReasonString(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	c := client(t, srv, codec.V5, "why")
	p := &codec.Publish{Topic: []byte("a"), Payload: []byte("x")}
	p.Props.SubscriptionIDs = []uint32{1}
	c.Send(p)
	d := expect[*codec.Disconnect](c)
	if d.ReasonCode != codec.ProtocolError || !strings.Contains(string(d.Props.ReasonString), "MQTT-3.3.4-6") {
		t.Fatalf("DISCONNECT %s %q, want protocol error naming [MQTT-3.3.4-6]", d.ReasonCode, d.Props.ReasonString)
	}
}

// TestPartialPacketDoesNotHoldBack: the bytes after a PUBLISH may be the
// start of a packet whose rest comes later. What the PUBLISH owes (its
// PUBACK, the subscriber's copy) goes out before the broker waits for them.
func TestPartialPacketDoesNotHoldBack(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	sub := client(t, srv, codec.V311, "sub")
	sub.Subscribe(0, "t")
	pub := client(t, srv, codec.V311, "pub")
	first := (&codec.Publish{Topic: []byte("t"), Payload: []byte("one"), QoS: 1, PacketID: 7}).Append(nil, codec.V311)
	second := (&codec.Publish{Topic: []byte("t"), Payload: []byte("two")}).Append(nil, codec.V311)
	pub.SendRaw(append(first, second[:3]...))
	wantPayloads(t, sub.Recv(1), "one")
	pub.ExpectAck(codec.PUBACK, 7)
	pub.SendRaw(second[3:])
	wantPayloads(t, sub.Recv(1), "two")
}
