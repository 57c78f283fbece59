package core_test

import (
	"slices"
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
}

type fwdMsg struct {
	topic, payload, from string
	qos                  byte
	retain               bool
	expires              time.Time
	props                *codec.Properties
}

func newFakeCluster() *fakeCluster { return &fakeCluster{interest: map[string]int{}} }

func (f *fakeCluster) Interest(filter string, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if on {
		f.interest[filter]++
		f.events = append(f.events, "+"+filter)
	} else {
		f.interest[filter]--
		f.events = append(f.events, "-"+filter)
	}
}

func (f *fakeCluster) Forward(topic string, payload []byte, qos byte, retain bool, props *codec.Properties, expires time.Time, from string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fwd = append(f.fwd, fwdMsg{topic, string(payload), from, qos, retain, expires, props})
}

func (f *fakeCluster) forwarded() []fwdMsg {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.fwd)
}

func (f *fakeCluster) eventList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

// TestClusterInterestOncePerFilter: the cluster hears of a filter when
// its first plain subscriber comes and when its last goes, however many
// sessions use it; shared subscriptions are not announced.
func TestClusterInterestOncePerFilter(t *testing.T) {
	fc := newFakeCluster()
	srv := newServer(t, core.Options{}, core.Config{Cluster: fc})
	a := client(t, srv, codec.V5, "a")
	b := client(t, srv, codec.V5, "b")
	a.subscribe(1, "x/#")
	b.subscribe(0, "x/#")
	a.subscribe(1, "x/#") // a replaced subscription is no new interest
	b.subscribe(1, "$share/g/y")
	a.send(&codec.Unsubscribe{PacketID: 77, Filters: [][]byte{[]byte("x/#")}})
	expect[*codec.Unsuback](a)
	if got, want := fc.eventList(), []string{"+x/#"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	b.close() // a clean session ends: its subscriptions go
	waitFor(t, "interest withdrawn", func() bool { return slices.Equal(fc.eventList(), []string{"+x/#", "-x/#"}) })
}

// TestClusterForward: each message published on this node goes to the
// cluster once, after local routing, whether or not a local subscriber
// matched, with what the other nodes need; $SYS stays local.
func TestClusterForward(t *testing.T) {
	fc := newFakeCluster()
	srv := newServer(t, core.Options{}, core.Config{Cluster: fc})
	pub := client(t, srv, codec.V5, "pub")
	local := client(t, srv, codec.V5, "local")
	local.subscribe(2, "f/local")
	p := &codec.Publish{Topic: []byte("f/none"), Payload: []byte("1"), QoS: 1, Retain: true}
	p.Props.SetNum(codec.PropMessageExpiry, 30)
	p.Props.ContentType = []byte("ct")
	p.Props.SetNum(codec.PropTopicAlias, 1) // per connection: not forwarded
	if rc := pub.publish(p); rc != codec.NoMatchingSubscribers {
		t.Errorf("PUBACK %s, want No matching subscribers (none on this node)", rc)
	}
	pub.publish(&codec.Publish{Topic: []byte("f/local"), Payload: []byte("2"), QoS: 2})
	if got := local.expectPublish(); string(got.Payload) != "2" {
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
	s.subscribePacket(subscribe)
	other := client(t, srv, codec.V311, "other")
	other.subscribe(0, "r/+")

	props := &codec.Properties{User: []codec.UserProperty{{Key: []byte("k"), Value: []byte("v")}}}
	exp := time.Now().Add(10 * time.Second)
	if n := srv.DeliverRemote("r/#", "r/a", []byte("p"), 2, true, props, exp, "elsewhere"); n != 1 {
		t.Errorf("DeliverRemote through r/# made %d deliveries, want 1 (r/+ is another filter)", n)
	}
	got := s.expectPublish()
	s.ack(got)
	if got.QoS != 1 || !got.Retain || string(got.Topic) != "r/a" || !slices.Equal(got.Props.SubscriptionIDs, []uint32{7}) ||
		len(got.Props.User) != 1 || string(got.Props.User[0].Value) != "v" {
		t.Errorf("got %+v", got)
	}
	if e := got.Props.MessageExpiry; e < 9 || e > 10 {
		t.Errorf("message expiry %d, want the 10s left", e)
	}
	other.expectNothing(quiet)
	srv.DeliverRemote("r/+", "r/a", []byte("q"), 1, true, nil, time.Time{}, "elsewhere")
	if got := other.expectPublish(); got.QoS != 0 || got.Retain || string(got.Payload) != "q" {
		t.Errorf("3.1.1 subscriber got %+v (retain is not as published for it)", got)
	}
	// No Local holds against the client id of the publisher on another node.
	if n := srv.DeliverRemote("nl/#", "nl/x", []byte("mine"), 1, false, nil, time.Time{}, "s"); n != 0 {
		t.Errorf("No Local: %d deliveries, want 0", n)
	}
	// Expired in transit: dropped.
	if n := srv.DeliverRemote("r/#", "r/a", []byte("old"), 1, false, nil, time.Now().Add(-time.Second), "x"); n != 0 {
		t.Errorf("expired: %d deliveries", n)
	}
	s.expectNothing(quiet)
	// Nothing received from another node is forwarded again or retained.
	if fwd := fc.forwarded(); len(fwd) != 0 {
		t.Errorf("forwarded %+v", fwd)
	}
	late := client(t, srv, codec.V5, "late")
	late.subscribe(1, "r/#")
	late.expectNothing(quiet)
}
