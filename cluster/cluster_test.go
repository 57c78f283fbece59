package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap/zaptest"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// delivered is one DeliverRemote call.
type delivered struct {
	group         string
	filter, topic string
	payload       []byte
	qos           byte
	retain        bool
	props         *codec.Properties
	expires       time.Time
	from          string
}

// fakeLocal records what the cluster hands the broker.
type fakeLocal struct {
	mu       sync.Mutex
	got      []delivered
	ch       chan delivered
	taken    chan takeOver
	retained map[string]string // topic → payload
	// notAttached is how many more takeovers of a claim find no
	// connection holding it (TakeOver returns false).
	notAttached int
	// sessions are the sessions ExportSession hands out (and forgets);
	// imported receives what ImportSession got.
	sessions map[string]string
	imported chan [2]string
	// pending and dropped are the pending imports and those dropped.
	pending, dropped []string
	// onPending, when set, runs once a pending import is recorded.
	onPending func(clientID string)
	// restored and merged, when set, receive RestoreSession's and
	// MergeSession's calls; stale is what StaleSessions returns.
	restored chan restoredSession
	merged   chan [2]string
	stale    []string
	// replayedLog is what ReplayPending got, replayedAt when each was
	// published.
	replayedLog []string
	replayedAt  []time.Time
	// noMembers makes DeliverRemote find no member of any shared group.
	noMembers atomic.Bool
	// owners are the identities of the sessions here (SessionOwner).
	owners map[string]string
}

// SessionOwner answers from owners.
func (f *fakeLocal) SessionOwner(clientID string) (string, bool, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.owners[clientID]
	return o, ok, ok
}

// ExportSession hands out "subs of S" for session S without take.
func (f *fakeLocal) ExportSession(clientID string, maxBytes int, take bool) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sessions[clientID]
	if !ok || len(s) > maxBytes {
		return nil
	}
	if !take {
		return []byte("subs of " + s)
	}
	delete(f.sessions, clientID)
	return []byte(s)
}

// ImportSession records the pending sessions and sends the final ones
// on imported.
func (f *fakeLocal) ImportSession(clientID string, data []byte, final bool) error {
	if string(data) == "bad" {
		return errors.New("bad session")
	}
	f.mu.Lock()
	if !final {
		f.pending = append(f.pending, clientID+": "+string(data))
		on := f.onPending
		f.mu.Unlock()
		if on != nil {
			on(clientID)
		}
		return nil
	}
	defer f.mu.Unlock()
	f.imported <- [2]string{clientID, string(data)}
	return nil
}

func (f *fakeLocal) DropImport(clientID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropped = append(f.dropped, clientID)
}

type takeOver struct {
	id    string
	claim uint64
	clean bool
}

func newFakeLocal() *fakeLocal {
	return &fakeLocal{ch: make(chan delivered, 10000), taken: make(chan takeOver, 100), retained: map[string]string{},
		sessions: map[string]string{}, imported: make(chan [2]string, 100), owners: map[string]string{}}
}

// TakeOver records takeovers of a claim; those of no claim (claim 0,
// which only end a session left offline here) are not kept.
func (f *fakeLocal) TakeOver(clientID string, claim uint64, endSession bool) bool {
	f.mu.Lock()
	notYet := f.notAttached > 0 && claim != 0
	if notYet {
		f.notAttached--
	}
	f.mu.Unlock()
	if notYet {
		return false // as core answers while the connection is not attached yet
	}
	if claim != 0 {
		f.taken <- takeOver{clientID, claim, endSession}
	}
	return claim != 0
}

func (f *fakeLocal) SetRetained(m codec.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(m.Payload) == 0 {
		delete(f.retained, m.Topic)
		return
	}
	f.retained[m.Topic] = string(m.Payload)
}

// retainedCopy returns the retained messages kept.
func (f *fakeLocal) LocalRetained(fn func(m codec.Message)) {
	for topic, payload := range f.retainedCopy() {
		fn(codec.Message{Topic: topic, Payload: []byte(payload), From: "before"})
	}
}

func (f *fakeLocal) retainedCopy() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.retained)
}

func (f *fakeLocal) DeliverRemote(group, filter string, m codec.Message) int {
	d := delivered{group, filter, m.Topic, m.Payload, m.QoS, m.Retain, m.Props, m.Expires, m.From}
	if group != "" && f.noMembers.Load() {
		return 0
	}
	f.mu.Lock()
	f.got = append(f.got, d)
	f.mu.Unlock()
	f.ch <- d
	return 1
}

// receive waits up to 5s for the next value on ch.
func receive[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		var zero T
		t.Fatalf("no %T within 5s", zero)
		return zero
	}
}

// nothingOn checks that nothing comes on ch for wait.
func nothingOn[T any](t *testing.T, ch <-chan T, wait time.Duration) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("unexpected %+v", v)
	case <-time.After(wait):
	}
}

// next waits for the next delivery.
func (f *fakeLocal) next(t *testing.T) delivered { t.Helper(); return receive(t, f.ch) }

// none checks that nothing is delivered for a while.
func (f *fakeLocal) none(t *testing.T, wait time.Duration) { t.Helper(); nothingOn(t, f.ch, wait) }

// freePorts returns n loopback ports, free a moment ago and distinct.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		ports[i] = mqtttest.FreePort(t)
	}
	return ports
}

type testNode struct {
	*Cluster
	local *fakeLocal
}

// startNodes starts n nodes with embedded NATS servers routed to each
// other, on loopback, and waits until each one's server sees the others.
func startNodes(t *testing.T, n int) []*testNode {
	t.Helper()
	return startNodesOn(t, freePorts(t, n), n)
}

// startNodesOn starts the first n of the nodes whose route ports are
// ports (each routed to all the others).
func startNodesOn(t *testing.T, ports []int, n int) []*testNode {
	t.Helper()
	return startNodesWith(t, ports, n, nil)
}

// startNodesWith is startNodesOn with each node's options changed by
// change (nil: none).
func startNodesWith(t *testing.T, ports []int, n int, change func(*Options)) []*testNode {
	t.Helper()
	nodes := make([]*testNode, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		var routes []string // every other port: nodes not started yet included
		for j, p := range ports {
			if j != i {
				routes = append(routes, fmt.Sprintf("127.0.0.1:%d", p))
			}
		}
		o := Options{Node: fmt.Sprintf("n%d", i+1), Embedded: EmbeddedOptions{
			Listen: fmt.Sprintf("127.0.0.1:%d", ports[i]), ClientListen: "127.0.0.1:0", Routes: routes, Dir: t.TempDir()}}
		if change != nil {
			change(&o)
		}
		wg.Go(func() {
			c, err := New(o, zaptest.NewLogger(t).Named(o.Node))
			if err != nil {
				errs[i] = err
				return
			}
			nodes[i] = &testNode{Cluster: c, local: newFakeLocal()}
			c.Start(nodes[i].local)
		})
	}
	wg.Wait()
	for i, nd := range nodes {
		if nd != nil {
			t.Cleanup(func() { _ = nd.Close() })
		}
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, nd := range nodes {
		for nd.emb.srv.NumRoutes() < n-1 {
			if time.Now().After(deadline) {
				t.Fatalf("node %s has %d routes, want %d", nd.Node(), nd.emb.srv.NumRoutes(), n-1)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nodes
}

// waitInterest waits until a message forwarded by from on topic reaches
// each of to (interest travels between servers asynchronously), then
// drains those probes.
func waitInterest(t *testing.T, from *testNode, topic string, to ...*testNode) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, nd := range to {
		for {
			from.Forward(codec.Message{Topic: topic, Payload: []byte("probe"), From: "probe"}, nil)
			select {
			case d := <-nd.local.ch:
				if d.from != "probe" {
					t.Fatalf("waiting for interest got %+v", d)
				}
			case <-time.After(20 * time.Millisecond):
				if time.Now().After(deadline) {
					t.Fatalf("no interest in %q at %s", topic, nd.Node())
				}
				continue
			}
			break
		}
	}
	time.Sleep(50 * time.Millisecond)
	for _, nd := range to {
	drain:
		for {
			select {
			case <-nd.local.ch:
			default:
				break drain
			}
		}
	}
}

func TestForwardReachesInterestedNodesOnly(t *testing.T) {
	nodes := startNodes(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	b.Interest("", "s/+/t", true)
	waitInterest(t, a, "s/x/t", b)
	before := c.Stats().Received

	p := &codec.Properties{ContentType: []byte("text/plain; x=1"), ResponseTopic: []byte("re ply/x.y"),
		CorrelationData: []byte{0, 1, 2, 255}, User: []codec.UserProperty{{Key: []byte("k=1"), Value: []byte("v\r\n%")}, {Key: []byte("k=1"), Value: []byte("second")}}}
	p.SetNum(codec.PropPayloadFormat, 1)
	exp := time.UnixMilli(time.Now().Add(time.Minute).UnixMilli())
	a.Forward(codec.Message{Topic: "s/x/t", Payload: []byte("hello"), QoS: 2, Retain: true, Props: p, Expires: exp, From: "client one"}, nil)
	d := b.local.next(t)
	want := delivered{filter: "", topic: "s/x/t", payload: []byte("hello"), qos: 2, retain: true, props: p, expires: exp, from: "client one"}
	if d.filter != want.filter || d.topic != want.topic || !bytes.Equal(d.payload, want.payload) || d.qos != 2 || !d.retain ||
		!d.expires.Equal(exp) || d.from != want.from {
		t.Errorf("delivered %+v, want %+v", d, want)
	}
	if d.props == nil || !slices.EqualFunc(d.props.User, p.User, func(x, y codec.UserProperty) bool {
		return bytes.Equal(x.Key, y.Key) && bytes.Equal(x.Value, y.Value)
	}) || string(d.props.ContentType) != string(p.ContentType) || string(d.props.ResponseTopic) != string(p.ResponseTopic) ||
		!bytes.Equal(d.props.CorrelationData, p.CorrelationData) || !d.props.Has(codec.PropPayloadFormat) || d.props.PayloadFormat != 1 {
		t.Errorf("properties %+v, want %+v", d.props, p)
	}
	// A topic b's filter does not match, and nothing at all for c.
	a.Forward(codec.Message{Topic: "s/x/u", Payload: []byte("no")}, nil)
	b.local.none(t, 100*time.Millisecond)
	if got := c.Stats().Received; got != before {
		t.Errorf("node without interest received %d messages", got-before)
	}
	// A node's own messages do not come back to it (it routed them locally).
	b.Forward(codec.Message{Topic: "s/y/t", Payload: []byte("own")}, nil)
	b.local.none(t, 100*time.Millisecond)
}

func TestInterestOnOff(t *testing.T) {
	nodes := startNodes(t, 2)
	a, b := nodes[0], nodes[1]
	b.Interest("", "h/#", true)
	waitInterest(t, a, "h/x", b)
	// "h/#" also matches its parent level.
	a.Forward(codec.Message{Topic: "h", Payload: []byte("parent"), QoS: 1}, nil)
	if d := b.local.next(t); d.topic != "h" || d.filter != "" {
		t.Errorf("got %+v, want topic h, for the whole tree", d)
	}
	// A second filter matching the same topic: NATS brings two copies,
	// the broker gets one, for its whole tree (TestOverlapAcrossNodes).
	b.Interest("", "h/+", true)
	waitInterest(t, a, "h/probe", b)
	a.Forward(codec.Message{Topic: "h/z", Payload: []byte("two")}, nil)
	if d := b.local.next(t); d.topic != "h/z" || d.filter != "" {
		t.Errorf("got %+v, want topic h/z, for the whole tree", d)
	}
	b.local.none(t, 100*time.Millisecond)
	b.Interest("", "h/#", false)
	b.Interest("", "h/+", false)
	mqtttest.WaitWithin(t, 5*time.Second, "interest withdrawn", func() bool { return b.Stats().Interest == 0 })
	time.Sleep(100 * time.Millisecond) // the unsubscription reaches a's server
	a.Forward(codec.Message{Topic: "h/z", Payload: []byte("gone")}, nil)
	b.local.none(t, 100*time.Millisecond)
}

func TestOrderPerPublisher(t *testing.T) {
	nodes := startNodes(t, 2)
	a, b := nodes[0], nodes[1]
	b.Interest("", "o/#", true)
	b.Interest("", "o/1", true)
	waitInterest(t, a, "o/1", b)
	// Two overlapping filters, so two copies of each message from NATS:
	// each message once, in order, QoS 0 and 1 interleaved.
	const n = 2000
	for i := range n {
		a.Forward(codec.Message{Topic: "o/1", Payload: fmt.Appendf(nil, "%d", i), QoS: byte(i % 2), From: "p"}, nil)
	}
	for i := range n {
		if d := b.local.next(t); string(d.payload) != fmt.Sprint(i) || d.filter != "" {
			t.Fatalf("got %s for filter %q, want %d for the whole tree", d.payload, d.filter, i)
		}
	}
	b.local.none(t, 100*time.Millisecond)
}

func TestForeignSubjectDropped(t *testing.T) {
	nodes := startNodes(t, 2)
	a, b := nodes[0], nodes[1]
	b.Interest("", "#", true)
	waitInterest(t, a, "x", b)
	// A NATS application publishing a subject the mapping never makes
	// (an unescaped '+' is not an MQTT topic level): dropped, counted.
	if err := a.nc.Publish("mqtt.a+b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	// A plain NATS message on a mapped subject: QoS 0, no properties.
	if err := a.nc.Publish("mqtt.from%20nats", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	d := b.local.next(t)
	if d.topic != "from nats" || d.qos != 0 || d.props != nil || d.from != "" || string(d.payload) != "hi" {
		t.Errorf("got %+v", d)
	}
	if b.Stats().ReceivedDropped != 1 {
		t.Errorf("dropped %d, want 1", b.Stats().ReceivedDropped)
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		bad  string
	}{
		{"defaults", Options{}, ""},
		{"node with dot", Options{Node: "a.b"}, "Node"},
		{"prefix with wildcard", Options{SubjectPrefix: "a.*"}, "SubjectPrefix"},
		{"prefix with dollar", Options{SubjectPrefix: "$mqtt"}, "SubjectPrefix"},
		{"bad listen", Options{Embedded: EmbeddedOptions{Listen: "nope"}}, "Embedded.Listen"},
		{"bad route", Options{Embedded: EmbeddedOptions{Routes: []string{"nats-route://127.0.0.1:99999"}}}, "Embedded.Routes"},
		{"loopback without secret", Options{Embedded: EmbeddedOptions{Listen: "127.0.0.1:6222", Routes: []string{"localhost:6223", "[::1]:6224"}}}, ""},
		{"listen on all without secret", Options{Embedded: EmbeddedOptions{Listen: ":6222"}}, "Secret"},
		{"route elsewhere without secret", Options{Embedded: EmbeddedOptions{Routes: []string{"10.0.0.2:6222"}}}, "Secret"},
		{"advertise elsewhere without secret", Options{Embedded: EmbeddedOptions{Advertise: "node1.example:6222"}}, "Secret"},
		{"short secret", Options{Secret: "short"}, "Secret"},
		{"secret elsewhere", Options{Secret: "0123456789abcdef", Embedded: EmbeddedOptions{Listen: "10.0.0.1:6222"}}, ""},
		{"tls without ca", Options{Embedded: EmbeddedOptions{TLS: EmbeddedTLS{CertFile: "c", KeyFile: "k"}}}, "Embedded.TLS"},
		{"user without client port", Options{Embedded: EmbeddedOptions{Users: []User{{Name: "a", Password: "p"}}}}, "Embedded.ClientListen"},
		{"user outside the prefix", Options{Embedded: EmbeddedOptions{ClientListen: "127.0.0.1:0", Users: []User{{Name: "a", Password: "p", Subscribe: []string{"$XMQ.>"}}}}}, "Embedded.Users"},
		{"user with everything", Options{Embedded: EmbeddedOptions{ClientListen: "127.0.0.1:0", Users: []User{{Name: "a", Password: "p", Publish: []string{">"}}}}}, "Embedded.Users"},
		{"user within the prefix", Options{Embedded: EmbeddedOptions{ClientListen: "127.0.0.1:0", Users: []User{{Name: "a", Password: "p", Publish: []string{"mqtt.app.*"}}}}}, ""},
		{"user with password and nkey", Options{Embedded: EmbeddedOptions{ClientListen: "127.0.0.1:0", Users: []User{{Name: "a", Password: "p", NKey: "UABC"}}}}, "Embedded.Users"},
		{"max nodes", Options{MaxNodes: 1}, "MaxNodes"},
		{"cert without key", Options{URL: "nats://x", CertFile: "c"}, "CertFile"},
		{"creds and user", Options{URL: "nats://x", CredentialsFile: "c", User: "u"}, "CredentialsFile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.SetDefaults()
			err := tt.o.Validate()
			if tt.bad == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var oe *OptionError
			if err == nil || !errors.As(err, &oe) || oe.Option != tt.bad {
				t.Fatalf("Validate = %v, want a problem with %s", err, tt.bad)
			}
		})
	}
}

// claim is Claim by an anonymous client, with no owner check (the
// ownership tests pass identities).
func (n *testNode) claim(clientID string, clean bool) uint64 {
	c, _ := n.Claim(clientID, "", false, clean)
	return c
}

// waitReady waits until every node's replicated state is in use.
func waitReady(t *testing.T, nodes ...*testNode) {
	t.Helper()
	for _, nd := range nodes {
		mqtttest.WaitWithin(t, 30*time.Second, "node "+nd.Node()+": JetStream state ready", nd.Ready)
	}
}

func (f *fakeLocal) nextTakeOver(t *testing.T) takeOver { t.Helper(); return receive(t, f.taken) }

func (f *fakeLocal) noTakeOver(t *testing.T, d time.Duration) { t.Helper(); nothingOn(t, f.taken, d) }

// TestClaimTakesOver: a client id claimed on one node and then on another
// is taken over on the first, with the first's claim and the second's
// Clean Start; a release of a replaced claim does not delete the newer one.
func TestClaimTakesOver(t *testing.T) {
	nodes := startNodes(t, 3)
	waitReady(t, nodes...)
	a, b, c := nodes[0], nodes[1], nodes[2]
	ca := a.claim("dev/1 ü", false)
	if ca == 0 {
		t.Fatal("claim failed")
	}
	a.local.noTakeOver(t, 100*time.Millisecond) // its own claim
	cb := b.claim("dev/1 ü", true)
	if cb <= ca {
		t.Fatalf("claim on b = %d, want above a's %d", cb, ca)
	}
	if to := a.local.nextTakeOver(t); to != (takeOver{"dev/1 ü", ca, true}) {
		t.Errorf("takeover on a: %+v", to)
	}
	c.local.noTakeOver(t, 50*time.Millisecond)
	a.Release("dev/1 ü", ca, false) // replaced: must not delete b's entry
	cc := c.claim("dev/1 ü", false)
	if to := b.local.nextTakeOver(t); to != (takeOver{"dev/1 ü", cb, false}) {
		t.Errorf("takeover on b: %+v (c claimed %d)", to, cc)
	}
	c.Release("dev/1 ü", cc, false)
	// Released: the next claim creates the entry again, nobody is taken over.
	mqtttest.WaitFor(t, "the entry deleted on release", func() bool {
		_, err := c.state.Load().clients.Get(t.Context(), key("dev/1 ü"))
		return err != nil
	})
	a.claim("dev/1 ü", false)
	for _, nd := range nodes {
		nd.local.noTakeOver(t, 50*time.Millisecond)
	}
	// Ids held per node are not claimed: no takeover between nodes.
	a.opts.NodeLocalIDs, b.opts.NodeLocalIDs = []string{"$bridge:"}, []string{"$bridge:"}
	if a.claim("$bridge:cloud", false) != 0 || b.claim("$bridge:cloud", false) != 0 {
		t.Error("a node-local id was claimed")
	}
	a.local.noTakeOver(t, 100*time.Millisecond)
}

// TestTakeOverBeforeAttach: a claim replaced while its connection is
// still between Claim and CONNACK is taken over once it is attached.
func TestTakeOverBeforeAttach(t *testing.T) {
	nodes := startNodes(t, 2)
	waitReady(t, nodes...)
	a, b := nodes[0], nodes[1]
	ca := a.claim("slow", false)
	a.local.mu.Lock()
	a.local.notAttached = 3
	a.local.mu.Unlock()
	b.claim("slow", false)
	if to := a.local.nextTakeOver(t); to != (takeOver{"slow", ca, false}) {
		t.Errorf("takeover %+v", to)
	}
}

// TestClaimRace: two nodes claiming one client id at the same moment, many
// times: every time exactly one is taken over, by compare-and-set.
func TestClaimRace(t *testing.T) {
	nodes := startNodes(t, 3)
	waitReady(t, nodes...)
	b, c := nodes[1], nodes[2]
	for i := range 20 {
		id := fmt.Sprintf("race-%d", i)
		var cb, cc uint64
		var wg sync.WaitGroup
		wg.Go(func() { cb = b.claim(id, false) })
		wg.Go(func() { cc = c.claim(id, false) })
		wg.Wait()
		if cb == 0 || cc == 0 || cb == cc {
			t.Fatalf("claims %d and %d", cb, cc)
		}
		loser, winner := b, c
		if cb > cc {
			loser, winner = c, b
		}
		to := loser.local.nextTakeOver(t)
		if to.id != id || to.claim != min(cb, cc) {
			t.Fatalf("takeover %+v, want %s with claim %d", to, id, min(cb, cc))
		}
		winner.local.noTakeOver(t, 20*time.Millisecond)
	}
}

// TestClaimHopsBetweenNodes: a persistent client hopping from node to node,
// each connection's release racing the next one's claim (as a client that
// reconnects at once), is claimed every time. The replicated registry
// refuses a write while another of the same key is in flight; claims gave
// up after five quick tries ("key exists") and the session stayed behind.
func TestClaimHopsBetweenNodes(t *testing.T) {
	nodes := startNodes(t, 3)
	waitReady(t, nodes...)
	var claim uint64
	prev := nodes[0]
	for i := range 60 {
		nd := nodes[i%3]
		if claim != 0 {
			prev.Release("hopper", claim, true)
		}
		if claim = nd.claim("hopper", false); claim == 0 {
			t.Fatalf("hop %d: claim on %s failed", i, nd.Node())
		}
		prev = nd
	}
	if n := nodes[0].reg.claimsUnavailable.Load() + nodes[1].reg.claimsUnavailable.Load() + nodes[2].reg.claimsUnavailable.Load(); n != 0 {
		t.Errorf("%d claims held on one node only", n)
	}
}

// TestAwaitInterest: once AwaitInterest returns for an interest change,
// a message another node publishes reaches it at once, with no probing:
// the SUBACK of a client that then has a request published on another
// node (request/response) comes after its subscription is everywhere. A
// change known already is not waited for again.
func TestAwaitInterest(t *testing.T) {
	nodes := startNodes(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	b.Interest("", "warm/up", true) // the routes are up
	waitInterest(t, a, "warm/up", b)
	for i := range 20 {
		f := fmt.Sprintf("reply/%d", i)
		sb := b.Interest("", f, true)
		sc := c.Interest("g", f, true)
		var wg sync.WaitGroup
		for range 3 { // concurrent callers share rounds
			wg.Go(func() { b.AwaitInterest(sb) })
		}
		wg.Wait()
		c.AwaitInterest(sc)
		a.Forward(codec.Message{Topic: f, Payload: []byte("answer"), QoS: 1, From: "server"}, nil)
		if d := b.local.next(t); d.topic != f || d.group != "" {
			t.Fatalf("b got %+v, want the answer on %s", d, f)
		}
		if d := c.local.next(t); d.topic != f || d.group != "g" {
			t.Fatalf("c got %+v, want the answer on %s for group g", d, f)
		}
		if b.interests.confirmed.Load() < sb {
			t.Fatalf("change %d not marked known after its wait", sb)
		}
		start := time.Now()
		b.AwaitInterest(sb)
		if d := time.Since(start); d > 10*time.Millisecond {
			t.Errorf("waiting again for a known change took %v", d)
		}
	}
}

// TestRetainedReplicated: a retained message set on one node is kept on
// every node, cleared on every node, and survives the loss of the node
// that set it: a node joining later gets it, and the others get the
// retained messages that node kept before it joined.
func TestRetainedReplicated(t *testing.T) {
	ports := freePorts(t, 4)
	nodes := startNodesOn(t, ports[:3], 3)
	waitReady(t, nodes...)
	a := nodes[0]
	a.Retain(codec.Message{Topic: "r/1", Payload: []byte("one"), QoS: 1, Props: &codec.Properties{ContentType: []byte("ct")}, From: "pub"})
	a.Retain(codec.Message{Topic: "r/2", Payload: []byte("two"), From: "pub"})
	a.Retain(codec.Message{Topic: "r/2", From: "pub"}) // cleared
	a.Retain(codec.Message{Topic: "r/3", Payload: []byte("three"), From: "pub"})
	want := map[string]string{"r/1": "one", "r/3": "three"}
	waitRetained := func(nd *testNode) {
		t.Helper()
		// 30 s: a node's watch whose consumer was on the node that left
		// resumes once the ordered consumer misses its heartbeats (5 s
		// each), and only then gets what changed meanwhile.
		mqtttest.WaitWithin(t, 30*time.Second, "node "+nd.Node()+" keeps "+fmt.Sprint(want),
			func() bool { return maps.Equal(nd.local.retainedCopy(), want) })
	}
	for _, nd := range nodes {
		waitRetained(nd)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// A new node, routed to the two left, gets them from the replicas.
	o := Options{Node: "n4", Embedded: EmbeddedOptions{Listen: fmt.Sprintf("127.0.0.1:%d", ports[3]), ClientListen: "127.0.0.1:0",
		Routes: []string{fmt.Sprintf("127.0.0.1:%d", ports[1]), fmt.Sprintf("127.0.0.1:%d", ports[2])}, Dir: t.TempDir()}, Replicas: 3}
	d, err := New(o, zaptest.NewLogger(t).Named("n4"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	// It was a broker of its own before, with retained messages: those
	// the cluster knows are replaced by the cluster's (r/1) or cleared
	// (r/2, cleared in the cluster); the one it does not know is uploaded,
	// and every node gets it.
	nd := &testNode{Cluster: d, local: newFakeLocal()}
	maps.Copy(nd.local.retained, map[string]string{"pre/1": "kept before", "r/1": "old", "r/2": "stale"})
	d.Start(nd.local)
	waitReady(t, nd)
	want["pre/1"] = "kept before"
	waitRetained(nd)
	waitRetained(nodes[1])
	waitRetained(nodes[2])
	// An upload of a topic the bucket has meanwhile is refused, and
	// dropped rather than retried: the cluster's value stays.
	if !nd.retained.queueRetain(codec.Message{Topic: "r/1", Payload: []byte("late upload"), From: "before"}, true) {
		t.Fatal("upload not queued")
	}
	mqtttest.WaitWithin(t, 5*time.Second, "the refused upload dropped", func() bool {
		nd.retained.mu.Lock()
		defer nd.retained.mu.Unlock()
		return len(nd.retained.order) == 0
	})
	time.Sleep(300 * time.Millisecond) // a retry would come after 250 ms
	nd.retained.mu.Lock()
	retried := len(nd.retained.order)
	nd.retained.mu.Unlock()
	if retried != 0 {
		t.Error("the refused upload is retried")
	}
	for _, n := range []*testNode{nd, nodes[1], nodes[2]} {
		waitRetained(n)
	}
}

// TestSharedGroupAcrossNodes: a message for a shared group goes to one
// node of those with members, never to one when the publisher's node
// served the group itself; plain interest in the same filter is apart.
func TestSharedGroupAcrossNodes(t *testing.T) {
	nodes := startNodes(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	b.Interest("g", "q/#", true)
	c.Interest("g", "q/#", true)
	c.Interest("", "q/#", true)
	// Probe until both queue subscriptions and the plain one reached a:
	// the group's probes land on b or c at random.
	seen := map[string]bool{}
	deadline := time.Now().Add(5 * time.Second)
	for !seen["b g"] || !seen["c g"] || !seen["c "] {
		if time.Now().After(deadline) {
			t.Fatalf("interest did not reach a: %v", seen)
		}
		a.Forward(codec.Message{Topic: "q/probe", Payload: []byte("probe"), From: "probe"}, nil)
		time.Sleep(5 * time.Millisecond)
		for name, nd := range map[string]*testNode{"b": b, "c": c} {
		drain:
			for {
				select {
				case d := <-nd.local.ch:
					seen[name+" "+d.group] = true
				default:
					break drain
				}
			}
		}
	}
	time.Sleep(50 * time.Millisecond)
	for _, nd := range nodes {
		for len(nd.local.ch) > 0 {
			<-nd.local.ch
		}
	}
	const n = 200
	for i := range n {
		a.Forward(codec.Message{Topic: "q/x", Payload: fmt.Appendf(nil, "%d", i), QoS: 1, From: "p"}, nil)
	}
	groupAt := map[string]int{}
	plain := 0
	for range 2 * n {
		var d delivered
		select {
		case d = <-b.local.ch:
			if d.group == "g" {
				groupAt["b"]++
			}
		case d = <-c.local.ch:
			if d.group == "g" {
				groupAt["c"]++
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("deliveries stopped: group %v, plain %d", groupAt, plain)
		}
		if d.group == "" {
			plain++
		}
	}
	if groupAt["b"]+groupAt["c"] != n || plain != n || groupAt["b"] == 0 || groupAt["c"] == 0 {
		t.Errorf("group deliveries %v (want %d over both nodes), plain %d (want %d)", groupAt, n, plain, n)
	}
	// Served on a's node: only the plain subscription gets it.
	a.Forward(codec.Message{Topic: "q/x", Payload: []byte("served"), QoS: 1, From: "p"}, []string{"g", "q/#"})
	if d := c.local.next(t); d.group != "" || string(d.payload) != "served" {
		t.Errorf("got %+v, want the plain delivery only", d)
	}
	b.local.none(t, 100*time.Millisecond)
	c.local.none(t, 0)

	// Handed over by a (its member left): one member of g gets each,
	// neither the plain subscription nor another group on the filter.
	c.Interest("h", "q/#", true)
	time.Sleep(100 * time.Millisecond) // c's queue subscription for h reaches a
	const handed = 50
	for i := range handed {
		a.HandOver("g", "q/#", codec.Message{Topic: "q/x", Payload: fmt.Appendf(nil, "h%d", i), QoS: 1, From: "p"})
	}
	got := 0
	for got < handed {
		var d delivered
		select {
		case d = <-b.local.ch:
		case d = <-c.local.ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of %d handed-over messages arrived", got, handed)
		}
		if d.group != "g" || d.filter != "q/#" {
			t.Fatalf("handed over to %+v, want group g only", d)
		}
		got++
	}
	b.local.none(t, 100*time.Millisecond)
	c.local.none(t, 0)
	if st := a.Stats(); st.HandedOver != handed {
		t.Errorf("handed over %d, want %d", st.HandedOver, handed)
	}
}

// TestHealthyReflectsMembership: a node with routes configured is not
// healthy (/readyz) until it is routed to another node and its
// replicated state is in use, and is not again when the others are gone.
func TestHealthyReflectsMembership(t *testing.T) {
	ports := freePorts(t, 2)
	first := startNodesOn(t, ports, 1)[0]
	if err := first.Healthy(); err == nil {
		t.Fatal("an isolated node is healthy")
	}
	if !first.Connected() || first.Routes() != 0 {
		t.Errorf("connected %v, routes %d", first.Connected(), first.Routes())
	}
	o := Options{Node: "n2", Embedded: EmbeddedOptions{Listen: fmt.Sprintf("127.0.0.1:%d", ports[1]), ClientListen: "127.0.0.1:0",
		Routes: []string{fmt.Sprintf("127.0.0.1:%d", ports[0])}, Dir: t.TempDir()}}
	second, err := New(o, zaptest.NewLogger(t).Named("n2"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Close() })
	if err := second.Healthy(); err == nil {
		t.Fatal("a node whose replicated state is not in use is healthy")
	}
	second.Start(newFakeLocal())
	mqtttest.WaitWithin(t, 30*time.Second, "routed", func() bool { return first.Healthy() == nil && second.Healthy() == nil })
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	mqtttest.WaitWithin(t, 10*time.Second, "isolated again", func() bool { return first.Healthy() != nil })
	// A node without routes (a cluster of one) is healthy alone.
	alone, err := New(Options{Node: "alone", Embedded: EmbeddedOptions{Listen: "127.0.0.1:0", ClientListen: "127.0.0.1:0"}}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Close()
	alone.Start(newFakeLocal())
	mqtttest.WaitWithin(t, 30*time.Second, "a node without routes healthy", func() bool { return alone.Healthy() == nil })
}

// TestClusterOfOne: a node with no routes (the default) is a cluster of
// one that others may join: its replicated state works with one replica.
func TestClusterOfOne(t *testing.T) {
	nd := startNodes(t, 1)[0]
	waitReady(t, nd)
	if err := nd.Healthy(); err != nil {
		t.Error(err)
	}
	if nd.replicas() != 1 {
		t.Errorf("replicas %d, want 1", nd.replicas())
	}
	if c := nd.claim("solo", true); c == 0 {
		t.Error("claim failed")
	}
	nd.Retain(codec.Message{Topic: "solo/r", Payload: []byte("x")})
	mqtttest.WaitWithin(t, 5*time.Second, "retained message applied", func() bool { return nd.local.retainedCopy()["solo/r"] == "x" })
}

// TestRetainedClearedWhileDown: a node that was down while a retained
// message was cleared clears its own copy (from its store) when it is
// back: the bucket's delete marker is among the watch's initial values.
func TestRetainedClearedWhileDown(t *testing.T) {
	nodes := startNodes(t, 3)
	waitReady(t, nodes...)
	a, c := nodes[0], nodes[2]
	a.Retain(codec.Message{Topic: "gone/1", Payload: []byte("stale"), From: "p"})
	a.Retain(codec.Message{Topic: "kept/1", Payload: []byte("kept"), From: "p"})
	mqtttest.WaitWithin(t, 10*time.Second, "replicated", func() bool { return len(c.local.retainedCopy()) == 2 })
	o := c.opts
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	a.Retain(codec.Message{Topic: "gone/1", From: "p"})
	mqtttest.WaitWithin(t, 30*time.Second, "cleared on a", func() bool { return len(a.local.retainedCopy()) == 1 })
	// c comes back with its data directory and its store's copy.
	back, err := New(o, zaptest.NewLogger(t).Named("n3-back"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = back.Close() })
	local := newFakeLocal()
	local.retained = map[string]string{"gone/1": "stale", "kept/1": "kept"}
	back.Start(local)
	mqtttest.WaitWithin(t, 20*time.Second, "stale copy cleared", func() bool {
		return maps.Equal(local.retainedCopy(), map[string]string{"kept/1": "kept"})
	})
}

// TestSessionMoves: a connection that does not start clean, on another
// node than the one holding its client id's session (connected or left
// offline there), brings the session over before Claim returns; a clean
// one does not, a node that does not answer costs a new session, and a
// node whose client came back meanwhile keeps its session.
func TestSessionMoves(t *testing.T) {
	nodes := startNodes(t, 3)
	waitReady(t, nodes...)
	a, b, c := nodes[0], nodes[1], nodes[2]
	entry := func(id string) string {
		t.Helper()
		e, err := a.state.Load().clients.Get(t.Context(), key(id))
		if err != nil {
			return err.Error()
		}
		return string(e.Value())
	}

	// Left offline on a: the registry says so, b takes it.
	a.local.mu.Lock()
	a.local.sessions["s1"] = "state of s1"
	a.local.mu.Unlock()
	ca := a.claim("s1", false)
	a.Release("s1", ca, true)
	mqtttest.WaitWithin(t, 5*time.Second, "registry entry of the offline session", func() bool { return entry("s1") == "n1 s u" }) // owner "": anonymous
	b.claim("s1", false)
	if got := receive(t, b.local.imported); got != [2]string{"s1", "state of s1"} {
		t.Fatalf("imported %q", got)
	}
	b.local.mu.Lock()
	if !slices.Equal(b.local.pending, []string{"s1: subs of state of s1"}) {
		t.Errorf("pending imports %q, want the subscriptions first", b.local.pending)
	}
	b.local.mu.Unlock()
	if a.Stats().SessionsOut != 1 || b.Stats().SessionsIn != 1 {
		t.Errorf("stats a %+v, b %+v", a.Stats(), b.Stats())
	}
	a.local.noTakeOver(t, 50*time.Millisecond) // an offline session: no claim to take over

	// Connected on b (its claim stands): c takes it over and moves it.
	b.local.mu.Lock()
	b.local.sessions["s1"] = "s1 on b"
	b.local.mu.Unlock()
	c.claim("s1", false)
	if got := receive(t, c.local.imported); got[1] != "s1 on b" {
		t.Fatalf("imported %q", got)
	}

	// Clean Start: nothing moves, the old node ends its session (TakeOver).
	c.local.mu.Lock()
	c.local.sessions["s1"] = "s1 on c"
	c.local.mu.Unlock()
	a.claim("s1", true)
	nothingOn(t, a.local.imported, 100*time.Millisecond)
	if to := c.local.nextTakeOver(t); !to.clean {
		t.Errorf("takeover %+v, want with Clean Start", to)
	}

	// A node that does not answer: a new session, counted.
	if _, err := a.state.Load().clients.Put(t.Context(), key("s2"), []byte("gone s")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if b.claim("s2", false) == 0 {
		t.Fatal("claim failed")
	}
	if d := time.Since(start); d > sessionTimeout+time.Second {
		t.Errorf("claim took %v", d)
	}
	if b.Stats().SessionsLost != 1 {
		t.Errorf("lost %d, want 1", b.Stats().SessionsLost)
	}
	nothingOn(t, b.local.imported, 50*time.Millisecond)

	// A session that cannot be installed: counted as lost.
	a.local.mu.Lock()
	a.local.sessions["s3"] = "bad"
	a.local.mu.Unlock()
	a.Release("s3", a.claim("s3", false), true)
	mqtttest.WaitWithin(t, 5*time.Second, "registry entry of s3", func() bool { return entry("s3") == "n1 s u" }) // owner "": anonymous
	c.claim("s3", false)
	if c.Stats().SessionsLost != 1 {
		t.Errorf("lost %d, want 1", c.Stats().SessionsLost)
	}
	// A session gone from the old node between the two steps: the
	// pending one is dropped.
	a.local.mu.Lock()
	a.local.sessions["s5"] = "s5"
	a.local.mu.Unlock()
	a.Release("s5", a.claim("s5", false), true)
	mqtttest.WaitWithin(t, 5*time.Second, "registry entry of s5", func() bool { return entry("s5") == "n1 s u" }) // owner "": anonymous
	c.local.mu.Lock()
	c.local.onPending = func(string) { // the session ends on a once c's pending import is in
		a.local.mu.Lock()
		delete(a.local.sessions, "s5")
		a.local.mu.Unlock()
	}
	c.local.mu.Unlock()
	c.claim("s5", false)
	c.local.mu.Lock()
	c.local.onPending = nil
	c.local.mu.Unlock()
	c.local.mu.Lock()
	dropped := slices.Clone(c.local.dropped)
	c.local.mu.Unlock()
	if !slices.Equal(dropped, []string{"s3", "s5"}) || c.Stats().SessionsLost != 2 {
		t.Errorf("dropped %q, lost %d; want the pending sessions of s3 (bad) and s5 (gone) dropped", dropped, c.Stats().SessionsLost)
	}

	// A request older than this node's own claim is refused: the session stays.
	a.local.mu.Lock()
	a.local.sessions["s4"] = "s4"
	a.local.mu.Unlock()
	ca = a.claim("s4", false)
	req := &nats.Msg{Subject: sessionSubject(b.opts.Name, "n1"), Data: []byte("s4"), Header: nats.Header{}}
	req.Header.Set(hdrClaim, strconv.FormatUint(ca-1, 10))
	resp, err := b.nc.RequestMsg(req, sessionTimeout)
	if err != nil || resp.Header.Get(hdrError) == "" || len(resp.Data) != 0 {
		t.Fatalf("answer %v, %v: want a refusal", resp, err)
	}
	a.local.mu.Lock()
	_, kept := a.local.sessions["s4"]
	a.local.mu.Unlock()
	if !kept {
		t.Error("the session left on a request older than the node's own claim")
	}

	// A "take" answer lost on the way: the same request again gets the
	// session the first answer carried; another claim's does not.
	a.local.mu.Lock()
	a.local.sessions["s7"] = "s7 on a"
	a.local.mu.Unlock()
	take := func(rev uint64) string {
		t.Helper()
		req := &nats.Msg{Subject: sessionSubject(b.opts.Name, "n1"), Data: []byte("s7"), Header: nats.Header{}}
		req.Header.Set(hdrClaim, strconv.FormatUint(rev, 10))
		req.Header.Set(hdrOp, "take")
		resp, err := b.nc.RequestMsg(req, 2*sessionTimeout)
		if err != nil || resp.Header.Get(hdrError) != "" {
			t.Fatalf("take: %v, %v", resp, err)
		}
		return string(resp.Data)
	}
	const rev = 1 << 40 // newer than any claim of a
	if got := take(rev); got != "s7 on a" {
		t.Fatalf("take: %q", got)
	}
	if got := take(rev); got != "s7 on a" {
		t.Errorf("the same take again: %q, want the session given before", got)
	}
	if got := take(rev + 1); got != "" {
		t.Errorf("another claim's take: %q, want nothing", got)
	}
}
