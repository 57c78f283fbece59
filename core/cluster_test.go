package core_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// fakeCluster records what core tells the cluster.
type fakeCluster struct {
	mu       sync.Mutex
	interest map[string]int // net on − off per filter
	events   []string
	fwd      []fwdMsg
	retained []fwdMsg
	handed   []fwdMsg // HandOver: served holds group and filter
	claims   uint64
	seq      uint64 // Interest's numbers
}

type fwdMsg struct {
	topic, payload, from string
	qos                  byte
	retain               bool
	expires              time.Time
	props                *codec.Properties
	served               []string
}

func newFakeCluster() *fakeCluster { return &fakeCluster{interest: map[string]int{}} }

func (f *fakeCluster) Interest(group, filter string, on bool) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	if group != "" {
		filter = "$share/" + group + "/" + filter
	}
	if on {
		f.interest[filter]++
		f.events = append(f.events, "+"+filter)
	} else {
		f.interest[filter]--
		f.events = append(f.events, "-"+filter)
	}
	return f.seq
}

func (f *fakeCluster) Forward(m codec.Message, served []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fwd = append(f.fwd, fwdMsg{m.Topic, string(m.Payload), m.From, m.QoS, m.Retain, m.Expires, m.Props, served})
}

func (f *fakeCluster) Retain(m codec.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retained = append(f.retained, fwdMsg{m.Topic, string(m.Payload), m.From, m.QoS, true, m.Expires, m.Props, nil})
}

func (f *fakeCluster) HandOver(group, filter string, m codec.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handed = append(f.handed, fwdMsg{m.Topic, string(m.Payload), m.From, m.QoS, m.Retain, m.Expires, m.Props, []string{group, filter}})
}

func (f *fakeCluster) AwaitInterest(seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, fmt.Sprintf("await %d", seq))
}

func (f *fakeCluster) handedOver() []fwdMsg {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.handed)
}

func (f *fakeCluster) Claim(clientID, _ string, _, clean bool) (uint64, codec.ReasonCode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims++
	f.events = append(f.events, fmt.Sprintf("claim %s %v %d", clientID, clean, f.claims))
	return f.claims, 0
}

func (f *fakeCluster) Release(clientID string, claim uint64, session bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, fmt.Sprintf("release %s %d %v", clientID, claim, session))
}

func (f *fakeCluster) forwarded() []fwdMsg {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.fwd)
}

// eventList returns the events whose text starts with one of prefixes.
func (f *fakeCluster) eventList(prefixes ...string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.events {
		for _, p := range prefixes {
			if strings.HasPrefix(e, p) {
				out = append(out, e)
				break
			}
		}
	}
	return out
}

// TestClusterInterestOncePerFilter: the cluster hears of a filter when
// its first plain subscriber comes and when its last goes, however many
// sessions use it, and of a shared group when its first member comes and
// its last goes; a SUBACK that announced interest waits for the cluster.
func TestClusterInterestOncePerFilter(t *testing.T) {
	fc := newFakeCluster()
	srv := newServer(t, core.Options{}, core.Config{Cluster: fc})
	a := client(t, srv, codec.V5, "a")
	b := client(t, srv, codec.V5, "b")
	a.Subscribe(1, "x/#")
	b.Subscribe(0, "x/#")
	a.Subscribe(1, "x/#") // a replaced subscription is no new interest
	b.Subscribe(1, "$share/g/y")
	a.Subscribe(1, "$share/g/y") // a second member: the group's interest exists already
	a.Send(&codec.Unsubscribe{PacketID: 77, Filters: [][]byte{[]byte("x/#")}})
	expect[*codec.Unsuback](a)
	if got, want := fc.eventList("+", "-"), []string{"+x/#", "+$share/g/y"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	// Each SUBACK waits until the change that announced its filter is
	// known to the other nodes (AwaitInterest), whichever SUBSCRIBE made
	// it: a second subscriber of a filter announced an instant before
	// must not get its SUBACK first.
	if got, want := fc.eventList("+", "await"), []string{"+x/#", "await 1", "await 1", "await 1", "+$share/g/y", "await 2", "await 2"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	b.Close() // a clean session ends: its subscriptions go
	waitFor(t, "interest withdrawn", func() bool {
		return slices.Equal(fc.eventList("+", "-"), []string{"+x/#", "+$share/g/y", "-x/#"})
	})
	a.Close()
	waitFor(t, "group withdrawn", func() bool {
		return slices.Equal(fc.eventList("+", "-"), []string{"+x/#", "+$share/g/y", "-x/#", "-$share/g/y"})
	})
}

// TestClusterHandOver: a shared-group member that goes away with messages
// unacknowledged hands them to another member of this node when there is
// one, and to the group on the other nodes (HandOver) when there is none,
// where before they were lost for the group.
func TestClusterHandOver(t *testing.T) {
	fc := newFakeCluster()
	srv := newServer(t, core.Options{}, core.Config{Cluster: fc})
	pub := client(t, srv, codec.V5, "pub")
	m1 := client(t, srv, codec.V5, "m1")
	m2 := client(t, srv, codec.V5, "m2")
	m1.Subscribe(1, "$share/g/q/#")
	m2.Subscribe(1, "$share/g/q/#")
	// m1 and m2 take turns (round robin, the default); neither
	// acknowledges.
	for i := range 4 {
		pub.Pub(fmt.Sprintf("q/%d", i), "m", 1)
	}
	for range 2 {
		m1.ExpectPublish()
		m2.ExpectPublish()
	}
	m1.Close() // its messages go to m2, on this node
	for range 2 {
		if p := m2.ExpectPublish(); !strings.HasPrefix(string(p.Topic), "q/") {
			t.Fatalf("m2 got %q", p.Topic)
		}
	}
	if h := fc.handedOver(); len(h) != 0 {
		t.Fatalf("handed over %+v while m2 was here", h)
	}
	m2.Close() // the last member here: its messages go to the group elsewhere
	waitFor(t, "hand-over", func() bool { return len(fc.handedOver()) == 4 })
	for _, h := range fc.handedOver() {
		if !slices.Equal(h.served, []string{"g", "q/#"}) || !strings.HasPrefix(h.topic, "q/") || h.payload != "m" || h.qos != 1 || h.from != "pub" {
			t.Errorf("handed over %+v", h)
		}
	}
}

// TestClusterForward: each message published on this node goes to the
// cluster once, after local routing, whether or not a local subscriber
// matched, with what the other nodes need; $SYS stays local.
func TestClusterForward(t *testing.T) {
	fc := newFakeCluster()
	srv := newServer(t, core.Options{}, core.Config{Cluster: fc})
	pub := client(t, srv, codec.V5, "pub")
	local := client(t, srv, codec.V5, "local")
	local.Subscribe(2, "f/local")
	p := &codec.Publish{Topic: []byte("f/none"), Payload: []byte("1"), QoS: 1, Retain: true}
	p.Props.SetNum(codec.PropMessageExpiry, 30)
	p.Props.ContentType = []byte("ct")
	p.Props.SetNum(codec.PropTopicAlias, 1) // per connection: not forwarded
	if rc := pub.Publish(p); rc != codec.Success {
		t.Errorf("PUBACK %s, want Success: subscribers on other nodes are not known here", rc)
	}
	pub.Publish(&codec.Publish{Topic: []byte("f/local"), Payload: []byte("2"), QoS: 2})
	if got := local.ExpectPublish(); string(got.Payload) != "2" {
		t.Errorf("local subscriber got %q", got.Payload)
	}
	if err := srv.Publish("$SYS/x", []byte("sys"), 0, false); err != nil {
		t.Fatal(err)
	}
	if err := srv.Publish("admin/x", []byte("3"), 0, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "three forwards", func() bool { return len(fc.forwarded()) == 3 })
	got := fc.forwarded()
	first := got[0]
	if first.topic != "f/none" || first.payload != "1" || first.qos != 1 || !first.retain || first.from != "pub" ||
		first.props == nil || string(first.props.ContentType) != "ct" || first.props.Has(codec.PropTopicAlias) {
		t.Errorf("forwarded %+v", first)
	}
	if left := time.Until(first.expires); left < 25*time.Second || left > 30*time.Second {
		t.Errorf("expires in %v, want about 30s", left)
	}
	if got[1].topic != "f/local" || got[1].qos != 2 || got[2].topic != "admin/x" || got[2].from != "" {
		t.Errorf("forwarded %+v", got[1:])
	}
}

// TestDeliverRemote: a message from another node reaches this node's
// subscribers of the filter that brought it, with the rules of a local
// PUBLISH, and is neither forwarded again nor retained.
func TestDeliverRemote(t *testing.T) {
	fc := newFakeCluster()
	srv := newServer(t, core.Options{}, core.Config{Cluster: fc})
	s := client(t, srv, codec.V5, "s")
	subscribe := &codec.Subscribe{Subscriptions: []codec.Subscription{
		{Filter: []byte("r/#"), QoS: 1, RetainAsPublished: true},
		{Filter: []byte("nl/#"), QoS: 2, NoLocal: true},
	}}
	subscribe.Props.SubscriptionIDs = []uint32{7}
	s.SubscribePacket(subscribe)
	other := client(t, srv, codec.V311, "other")
	other.Subscribe(0, "r/+")

	props := &codec.Properties{User: []codec.UserProperty{{Key: []byte("k"), Value: []byte("v")}}}
	exp := time.Now().Add(10 * time.Second)
	if n := srv.DeliverRemote("", "r/#", codec.Message{Topic: "r/a", Payload: []byte("p"), QoS: 2, Retain: true, Props: props, Expires: exp, From: "elsewhere"}); n != 1 {
		t.Errorf("DeliverRemote through r/# made %d deliveries, want 1 (r/+ is another filter)", n)
	}
	got := s.ExpectPublish()
	s.Ack(got)
	if got.QoS != 1 || !got.Retain || string(got.Topic) != "r/a" || !slices.Equal(got.Props.SubscriptionIDs, []uint32{7}) ||
		len(got.Props.User) != 1 || string(got.Props.User[0].Value) != "v" {
		t.Errorf("got %+v", got)
	}
	if e := got.Props.MessageExpiry; e < 9 || e > 10 {
		t.Errorf("message expiry %d, want the 10s left", e)
	}
	other.ExpectNothing(quiet)
	srv.DeliverRemote("", "r/+", codec.Message{Topic: "r/a", Payload: []byte("q"), QoS: 1, Retain: true, From: "elsewhere"})
	if got := other.ExpectPublish(); got.QoS != 0 || got.Retain || string(got.Payload) != "q" {
		t.Errorf("3.1.1 subscriber got %+v (retain is not as published for it)", got)
	}
	// No Local holds against the client id of the publisher on another node.
	if n := srv.DeliverRemote("", "nl/#", codec.Message{Topic: "nl/x", Payload: []byte("mine"), QoS: 1, From: "s"}); n != 0 {
		t.Errorf("No Local: %d deliveries, want 0", n)
	}
	// Expired in transit: dropped.
	if n := srv.DeliverRemote("", "r/#", codec.Message{Topic: "r/a", Payload: []byte("old"), QoS: 1, Expires: time.Now().Add(-time.Second), From: "x"}); n != 0 {
		t.Errorf("expired: %d deliveries", n)
	}
	s.ExpectNothing(quiet)
	// Nothing received from another node is forwarded again or retained.
	if fwd := fc.forwarded(); len(fwd) != 0 {
		t.Errorf("forwarded %+v", fwd)
	}
	late := client(t, srv, codec.V5, "late")
	late.Subscribe(1, "r/#")
	late.ExpectNothing(quiet)
}

// TestDeliverRemoteOverlap: a message from another node matched against
// the whole tree (filter "") is delivered as a local PUBLISH is — the
// twin of TestOverlappingSubscriptions: a 3.1.1 client whose
// subscriptions overlap gets one copy at the highest QoS granted
// [MQTT-3.3.5-1], an MQTT 5 client one per subscription with its
// identifier; a shared group is not served by it (its copy comes through
// the group's own interest), whatever the QoS.
func TestDeliverRemoteOverlap(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{Cluster: newFakeCluster()})
	v3 := client(t, srv, codec.V311, "ov3")
	v3.Subscribe(0, "ov/#")
	v3.Subscribe(2, "ov/+/c")
	v3.Subscribe(1, "ov/b/c")
	v3low := client(t, srv, codec.V311, "ov3low")
	v3low.Subscribe(0, "ov/#")
	v3low.Subscribe(1, "ov/+/c")
	v5 := client(t, srv, codec.V5, "ov5")
	for i, f := range []string{"ov/#", "ov/+/c", "ov/b/c"} {
		sp := &codec.Subscribe{Subscriptions: []codec.Subscription{sub(f, byte(i))}}
		sp.Props.SubscriptionIDs = []uint32{uint32(10 + i)}
		v5.SubscribePacket(sp)
	}
	member := client(t, srv, codec.V311, "member")
	member.Subscribe(2, "$share/g/ov/#")
	for qos := byte(0); qos <= 2; qos++ {
		payload := fmt.Sprint("q", qos)
		if n := srv.DeliverRemote("", "", codec.Message{Topic: "ov/b/c", Payload: []byte(payload), QoS: qos, From: "elsewhere"}); n != 5 {
			t.Errorf("QoS %d: %d deliveries, want 5 (3.1.1: one per client; MQTT 5: one per subscription)", qos, n)
		}
		for _, c := range []struct {
			name string
			c    *tconn
			top  byte
		}{{"3.1.1", v3, 2}, {"3.1.1, QoS 1 granted", v3low, 1}} {
			got := c.c.Recv(1)
			if string(got[0].Payload) != payload || got[0].QoS != min(qos, c.top) {
				t.Errorf("%s: got %q at QoS %d, want %q at QoS %d", c.name, got[0].Payload, got[0].QoS, payload, min(qos, c.top))
			}
			c.c.ExpectNothing(quiet)
		}
		qosByID := map[uint32]byte{}
		for _, m := range v5.Recv(3) {
			if len(m.Props.SubscriptionIDs) != 1 {
				t.Fatalf("MQTT 5: copy with subscription ids %v, want one", m.Props.SubscriptionIDs)
			}
			qosByID[m.Props.SubscriptionIDs[0]] = m.QoS
		}
		if want := map[uint32]byte{10: 0, 11: min(qos, 1), 12: min(qos, 2)}; !maps.Equal(qosByID, want) {
			t.Errorf("MQTT 5: QoS per subscription id %v, want %v", qosByID, want)
		}
		v5.ExpectNothing(quiet)
	}
	member.ExpectNothing(quiet)
}

// TestClusterClaimAndTakeOver: each connection claims its client id
// before its session is attached and releases it when it ends; a claim
// from another node closes the local connection that held the id with
// Session taken over, but not a newer local connection.
func TestClusterClaimAndTakeOver(t *testing.T) {
	fc := newFakeCluster()
	srv := newServer(t, core.Options{}, core.Config{Cluster: fc})
	a := client(t, srv, codec.V5, "dev", persistent)
	a.Subscribe(1, "keep/#")
	if got := fc.eventList("claim"); !slices.Equal(got, []string{"claim dev false 1"}) {
		t.Fatalf("claims %v", got)
	}
	if srv.TakeOver("dev", 99, false) {
		t.Error("TakeOver of a claim the connection does not hold closed it")
	}
	a.ExpectNothing(quiet)
	if !srv.TakeOver("dev", 1, false) {
		t.Fatal("TakeOver did nothing")
	}
	a.ExpectDisconnect(codec.SessionTakenOver)
	waitFor(t, "release", func() bool { return slices.Equal(fc.eventList("release"), []string{"release dev 1 true"}) })
	// The session stays here, offline, with its subscription.
	info, ok := srv.Client("dev")
	if !ok || info.Connected || len(info.Subscriptions) != 1 {
		t.Fatalf("session after takeover: %+v, %v", info, ok)
	}
	// A clean connection elsewhere ends the offline session here.
	if !srv.TakeOver("dev", 0, true) {
		t.Fatal("TakeOver with endSession did nothing")
	}
	if _, ok := srv.Client("dev"); ok {
		t.Fatal("session still here after a clean takeover elsewhere")
	}
	// 3.1.1: the connection is closed.
	b := client(t, srv, codec.V311, "old")
	if !srv.TakeOver("old", 2, true) {
		t.Fatal("TakeOver did nothing")
	}
	b.ExpectClosed()
}

// TestClusterWillOnRemoteTakeover: a will with a delay is not sent when
// the client came back on another node; one without is, as on one node.
func TestClusterWillOnRemoteTakeover(t *testing.T) {
	fc := newFakeCluster()
	srv := newServer(t, core.Options{}, core.Config{Cluster: fc})
	watcher := client(t, srv, codec.V5, "watcher")
	watcher.Subscribe(0, "will/#")
	for i, delay := range []uint32{5, 0} {
		id := fmt.Sprintf("w%d", i)
		c := client(t, srv, codec.V5, id, persistent, func(p *codec.Connect) {
			p.WillFlag, p.WillTopic, p.WillPayload = true, []byte("will/"+id), []byte("gone")
			p.WillProps.SetNum(codec.PropWillDelay, delay)
		})
		claims := fc.eventList("claim " + id)
		var claim uint64
		if _, err := fmt.Sscanf(claims[0], "claim "+id+" false %d", &claim); err != nil {
			t.Fatal(err)
		}
		srv.TakeOver(id, claim, false)
		c.ExpectDisconnect(codec.SessionTakenOver)
		if delay > 0 {
			watcher.ExpectNothing(quiet)
		} else if got := watcher.ExpectPublish(); string(got.Topic) != "will/"+id {
			t.Errorf("got %s", got.Topic)
		}
	}
}

// TestClusterRetained: a retained message set here goes to the cluster;
// one set elsewhere is kept here, for new subscribers, without being
// delivered, sent back, or forwarded.
func TestClusterRetained(t *testing.T) {
	fc := newFakeCluster()
	srv := newServer(t, core.Options{}, core.Config{Cluster: fc})
	pub := client(t, srv, codec.V5, "pub")
	pub.PubRetained("ret/a", "here", 1)
	if err := srv.Publish("$SYS/r", []byte("sys"), 0, true); err != nil {
		t.Fatal(err)
	}
	early := client(t, srv, codec.V5, "early")
	early.Subscribe(1, "ret/#")
	early.ExpectPublish()
	srv.SetRetained(codec.Message{Topic: "ret/b", Payload: []byte("there"), QoS: 1, From: "x"})
	early.ExpectNothing(quiet)
	late := client(t, srv, codec.V5, "late")
	late.Subscribe(1, "ret/b")
	if got := late.ExpectPublish(); string(got.Payload) != "there" || !got.Retain {
		t.Errorf("got %+v", got)
	}
	srv.SetRetained(codec.Message{Topic: "ret/b", From: "x"})
	if _, _, ok := srv.RetainedMessage("ret/b"); ok {
		t.Error("an empty retained message from another node did not clear it")
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if len(fc.retained) != 1 || fc.retained[0].topic != "ret/a" || fc.retained[0].payload != "here" {
		t.Errorf("sent to the cluster: %+v", fc.retained)
	}
}

// TestClusterShared: a message a local member of a shared group got is
// forwarded saying so; one from another node for a group goes to exactly
// one member of it here, and not to the plain subscribers of the filter.
func TestClusterShared(t *testing.T) {
	fc := newFakeCluster()
	srv := newServer(t, core.Options{}, core.Config{Cluster: fc})
	m1 := client(t, srv, codec.V5, "m1")
	m2 := client(t, srv, codec.V5, "m2")
	plain := client(t, srv, codec.V5, "plain")
	m1.Subscribe(1, "$share/g/sh/#")
	m2.Subscribe(1, "$share/g/sh/#")
	plain.Subscribe(1, "sh/#")
	pub := client(t, srv, codec.V5, "pub")
	pub.Pub("sh/1", "local", 1)
	waitFor(t, "forward", func() bool { return len(fc.forwarded()) == 1 })
	if got := fc.forwarded()[0].served; !slices.Equal(got, []string{"g", "sh/#"}) {
		t.Errorf("served %q, want [g sh/#]", got)
	}
	plain.ExpectPublish()
	for i := range 4 {
		if n := srv.DeliverRemote("g", "sh/#", codec.Message{Topic: "sh/2", Payload: []byte(fmt.Sprint(i)), QoS: 1, From: "x"}); n != 1 {
			t.Fatalf("DeliverRemote to the group: %d deliveries, want 1", n)
		}
	}
	got := len(m1.Recv(3)) + len(m2.Recv(2)) // round robin: the local one, then the remote four alternate
	if got != 5 {
		t.Errorf("members got %d messages, want 5", got)
	}
	plain.ExpectNothing(quiet)
	if n := srv.DeliverRemote("other", "sh/#", codec.Message{Topic: "sh/2", Payload: []byte("x"), QoS: 1, From: "x"}); n != 0 {
		t.Errorf("a group this node does not have: %d deliveries", n)
	}
}

// TestSessionExportImport: a persistent session taken out of one node
// (connected: its connection is taken over) and installed on another
// resumes there with Session Present: its subscriptions, its messages
// still in flight (QoS 1 sent again with DUP, a QoS 2 past PUBREC owed
// only its PUBREL) and its queued messages in order, while nothing of it
// stays on the first node.
func TestSessionExportImport(t *testing.T) {
	for _, tc := range persistentVersions {
		t.Run(tc.name, func(t *testing.T) {
			a := newServer(t, core.Options{}, core.Config{})
			b := newServer(t, core.Options{}, core.Config{})
			s := client(t, a, tc.v, "mv", persistent)
			s.Subscribe(1, "m/#")
			s.Subscribe(2, "q/#")
			pub := client(t, a, tc.v, "pub")
			for _, m := range seq("m", 3) {
				pub.Pub("m/x", m, 1)
			}
			pub.Pub("q/x", "q0", 2)
			got := []*codec.Publish{s.ExpectPublish(), s.ExpectPublish(), s.ExpectPublish(), s.ExpectPublish()}
			wantPayloads(t, got, "m0", "m1", "m2", "q0")
			s.Ack(got[0])
			s.Ack(got[3]) // PUBREC: only the PUBREL is owed
			s.ExpectAck(codec.PUBREL, got[3].PacketID)

			if a.ExportSession("mv", 10, true) != nil {
				t.Fatal("exported past maxBytes")
			}
			s.ExpectNothing(quiet) // and left alone
			data := a.ExportSession("mv", 0, true)
			if data == nil {
				t.Fatal("nothing exported")
			}
			if tc.v == codec.V5 {
				s.ExpectDisconnect(codec.SessionTakenOver)
			} else {
				s.ExpectClosed()
			}
			if _, ok := a.Client("mv"); ok {
				t.Fatal("the session stays on the node it left")
			}
			pub.Pub("m/x", "gone", 1) // no subscriber here any more
			if a.ExportSession("mv", 0, true) != nil {
				t.Fatal("exported twice")
			}

			if err := b.ImportSession("mv", data, true); err != nil {
				t.Fatal(err)
			}
			c := dial(t, b, tc.v)
			cp := connectPacket(tc.v, "mv")
			persistent(cp)
			if ack := c.Connect(cp); !ack.SessionPresent {
				t.Fatal("session present 0 on the node it moved to")
			}
			for _, want := range []string{"m1", "m2"} {
				p := c.ExpectPublish()
				if string(p.Payload) != want || !p.Dup || p.QoS != 1 {
					t.Fatalf("got %q dup %v qos %d, want %q again with DUP", p.Payload, p.Dup, p.QoS, want)
				}
				c.Ack(p)
			}
			c.ExpectAck(codec.PUBREL, got[3].PacketID)
			c.Send(&codec.Ack{Kind: codec.PUBCOMP, PacketID: got[3].PacketID})
			c.ExpectNothing(quiet)
			bpub := client(t, b, tc.v, "pub-b")
			bpub.Pub("m/y", "here", 1)
			bpub.Pub("q/y", "here2", 2)
			wantPayloads(t, c.Recv(2), "here", "here2")
		})
	}
}

// TestSessionExportOffline: an offline session's queued messages move in
// order, as first deliveries; a will waiting for its delay is not sent
// (the client is back elsewhere); a session already offline on the
// receiving node is replaced, one connected there is not; a damaged
// export is refused.
func TestSessionExportOffline(t *testing.T) {
	a := newServer(t, core.Options{}, core.Config{})
	b := newServer(t, core.Options{}, core.Config{})
	watcher := client(t, a, codec.V5, "watcher")
	watcher.Subscribe(0, "will/#")
	s := client(t, a, codec.V5, "off", persistent, func(p *codec.Connect) {
		p.WillFlag, p.WillTopic, p.WillPayload = true, []byte("will/off"), []byte("gone")
		p.WillProps.SetNum(codec.PropWillDelay, 1)
	})
	s.Subscribe(1, "o/#")
	s.Close()
	waitFor(t, "offline", func() bool { info, ok := a.Client("off"); return ok && !info.Connected })
	pub := client(t, a, codec.V5, "pub")
	for _, m := range seq("o", 4) {
		pub.Pub("o/x", m, 1)
	}
	stale := client(t, b, codec.V5, "off", persistent) // an older session of the id on b
	stale.Subscribe(1, "stale/#")
	stale.disconnect()
	waitFor(t, "stale offline", func() bool { info, ok := b.Client("off"); return ok && !info.Connected })

	data := a.ExportSession("off", 0, true)
	if data == nil {
		t.Fatal("nothing exported")
	}
	if err := b.ImportSession("off", data[:len(data)-1], true); err == nil {
		t.Fatal("a truncated export was imported")
	}
	if err := b.ImportSession("off", data, true); err != nil {
		t.Fatal(err)
	}
	c := resume(t, b, "off")
	got := c.Recv(4)
	wantPayloads(t, got, seq("o", 4)...)
	for _, p := range got {
		if p.Dup {
			t.Errorf("%q has DUP: it was never sent", p.Payload)
		}
	}
	info, _ := b.Client("off")
	if len(info.Subscriptions) != 1 || info.Subscriptions[0].Filter != "o/#" {
		t.Errorf("subscriptions %+v, want the moved session's only", info.Subscriptions)
	}
	if err := b.ImportSession("off", data, true); err == nil {
		t.Error("imported over a session connected here")
	}
	watcher.ExpectNothing(1500 * time.Millisecond) // past the will delay
}

// TestSessionImportInTwoSteps: while a session moves, the node it moves
// to installs its subscriptions first (pending) and queues what comes;
// the session's own messages then go before those, which come with DUP
// (they may have reached the other node too); the cluster's interest in
// its filters never lapses. A failed move drops the pending session.
func TestSessionImportInTwoSteps(t *testing.T) {
	a := newServer(t, core.Options{}, core.Config{})
	fc := newFakeCluster()
	b := newServer(t, core.Options{}, core.Config{Cluster: fc})
	s := client(t, a, codec.V5, "two", persistent)
	s.Subscribe(1, "t/#")
	s.Close()
	waitFor(t, "offline", func() bool { info, ok := a.Client("two"); return ok && !info.Connected })
	pubA := client(t, a, codec.V5, "pub-a")
	pubA.Pub("t/x", "a0", 1)

	subs := a.ExportSession("two", 0, false)
	if subs == nil {
		t.Fatal("nothing exported")
	}
	if info, ok := a.Client("two"); !ok || len(info.Subscriptions) != 1 {
		t.Fatalf("exporting the subscriptions changed the session: %+v, %v", info, ok)
	}
	if err := b.ImportSession("two", subs, false); err != nil {
		t.Fatal(err)
	}
	pubB := client(t, b, codec.V5, "pub-b")
	pubA.Pub("t/x", "a1", 1) // reaches the session on a
	pubB.Pub("t/x", "b0", 1) // reaches the pending one on b
	data := a.ExportSession("two", 0, true)
	if err := b.ImportSession("two", data, true); err != nil {
		t.Fatal(err)
	}
	if got := fc.eventList("+t/#", "-t/#"); !slices.Equal(got, []string{"+t/#"}) {
		t.Errorf("interest %v, want it announced once and kept", got)
	}
	c := resume(t, b, "two")
	got := c.Recv(3)
	wantPayloads(t, got, "a0", "a1", "b0")
	if got[0].Dup || got[1].Dup || !got[2].Dup {
		t.Errorf("DUP %v %v %v, want only on the message queued while moving", got[0].Dup, got[1].Dup, got[2].Dup)
	}
	pubB.Pub("t/y", "b1", 1)
	wantPayloads(t, c.Recv(1), "b1")

	// A move that fails: the pending session goes, with its interest.
	if err := b.ImportSession("gone", subs, false); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Client("gone"); !ok {
		t.Fatal("no pending session")
	}
	b.DropImport("gone")
	if _, ok := b.Client("gone"); ok {
		t.Fatal("the pending session stays after DropImport")
	}
	b.DropImport("two") // not pending: left alone
	if _, ok := b.Client("two"); !ok {
		t.Fatal("DropImport ended a session that is not pending")
	}
}

// TestDrain: Drain closes every connection with Server shutting down,
// takes no new one, and leaves the sessions and the store in use: a
// message for a drained persistent session still queues, and the session
// counts as drained until another node takes it (ExportSession).
func TestDrain(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	persist := client(t, srv, codec.V5, "stays", persistent)
	persist.Subscribe(1, "t")
	plain := client(t, srv, codec.V5, "goes")
	if err := srv.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	persist.ExpectDisconnect(codec.ServerShuttingDown)
	plain.ExpectDisconnect(codec.ServerShuttingDown)
	if n := srv.DrainedSessions(); n != 1 {
		t.Fatalf("drained sessions %d, want the persistent one", n)
	}
	dial(t, srv, codec.V5).ExpectClosed() // not served
	if n := srv.DeliverRemote("", "", codec.Message{Topic: "t", Payload: []byte("after"), QoS: 1, From: "other"}); n != 1 {
		t.Fatalf("a message for the drained session: %d deliveries", n)
	}
	if b := srv.ExportSession("stays", 1<<20, true); len(b) == 0 {
		t.Fatal("the drained session could not be taken")
	}
	if n := srv.DrainedSessions(); n != 0 {
		t.Fatalf("drained sessions %d after the move, want 0", n)
	}
}
