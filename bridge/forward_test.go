package bridge_test

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/xmq-io/xmq/bridge"
	"github.com/xmq-io/xmq/certs/certstest"
	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/mqtttest"
	"github.com/xmq-io/xmq/listeners"
)

// rules of the forwarding tests: out with a remote prefix, in with a
// local prefix, and both ways unchanged.
var testRules = []bridge.Rule{
	{Topic: "out/#", Direction: bridge.Out, QoS: 2, RemotePrefix: "site/"},
	{Topic: "in/#", Direction: bridge.In, QoS: 2, LocalPrefix: "cloud/"},
	{Topic: "both/#", Direction: bridge.Both, QoS: 2},
}

// TestForward: xmq bridged to another xmq, MQTT 5 and 3.1.1, each QoS,
// each direction: topics mapped by the prefixes, QoS and payload kept,
// retain as published, and nothing comes back.
func TestForward(t *testing.T) {
	for _, proto := range []string{bridge.ProtocolV5, bridge.ProtocolV311} {
		t.Run("mqtt"+proto, func(t *testing.T) {
			remote := tcpBroker(t, core.Options{}, core.Config{})
			local := tcpBroker(t, core.Options{}, core.Config{})
			m := local.bridges(t, nil, fast(bridge.Config{Name: "up", Addresses: []string{remote.url}, Protocol: proto, Topics: testRules}))
			st := waitState(t, m, "up", bridge.StateConnected)
			if want := map[string]string{"5": "no_local", "3.1.1": "bridge_bit"}[proto]; st.LoopPrevention != want {
				t.Errorf("loop prevention %q, want %q", st.LoopPrevention, want)
			}
			lsub := dialClient(t, local, "lsub", codec.V5)
			lsub.Subscribe("#", 2)
			rsub := dialClient(t, remote, "rsub", codec.V5)
			rsub.Subscribe("#", 2, rap)
			lpub := dialClient(t, local, "lpub", codec.V5)
			rpub := dialClient(t, remote, "rpub", codec.V5)
			for qos := byte(0); qos <= 2; qos++ {
				payload := fmt.Sprint("q", qos)
				lpub.Pub("out/x", payload, qos, false)
				lsub.Expect(1)
				if p := rsub.Expect(1)[0]; string(p.Topic) != "site/out/x" || string(p.Payload) != payload || p.QoS != qos {
					t.Errorf("out at QoS %d: got %q %q QoS %d", qos, p.Topic, p.Payload, p.QoS)
				}
				rpub.Pub("in/y", payload, qos, false)
				rsub.Expect(1)
				if p := lsub.Expect(1)[0]; string(p.Topic) != "cloud/in/y" || string(p.Payload) != payload || p.QoS != qos {
					t.Errorf("in at QoS %d: got %q %q QoS %d", qos, p.Topic, p.Payload, p.QoS)
				}
				lpub.Pub("both/l", payload, qos, false)
				rpub.Pub("both/r", payload, qos, false)
				for _, s := range []*mqtttest.Client{lsub, rsub} {
					got := payloads(s.Expect(2))
					if !slices.Equal(got, []string{payload, payload}) {
						t.Errorf("both at QoS %d: got %q", qos, got)
					}
				}
			}
			// Topics no rule covers stay where they are.
			lpub.Pub("in/z", "stays", 1, false)
			rpub.Pub("out/z", "stays", 1, false)
			lsub.Expect(1)
			rsub.Expect(1)
			// A live retained message keeps its flag, and the far side keeps it.
			lpub.Pub("out/r", "kept", 1, true)
			lsub.Expect(1)
			if p := rsub.Expect(1)[0]; !p.Retain || string(p.Topic) != "site/out/r" {
				t.Errorf("retained out: got %q retain %v", p.Topic, p.Retain)
			}
			late := dialClient(t, remote, "late", codec.V5)
			late.Subscribe("site/out/r", 1)
			if p := late.Expect(1)[0]; !p.Retain || string(p.Payload) != "kept" {
				t.Errorf("the remote did not keep the retained message: %q retain %v", p.Payload, p.Retain)
			}
			lsub.Nothing()
			rsub.Nothing()
			st, _ = m.Bridge("up")
			// out/x ×3, both/l ×3, out/r out; in/y ×3, both/r ×3 in.
			if st.MessagesOut != 7 || st.MessagesIn != 6 {
				t.Errorf("counted %d out, %d in; want 7 and 6", st.MessagesOut, st.MessagesIn)
			}
		})
	}
}

// TestForwardProperties: the MQTT 5 properties of a message cross the
// bridge unchanged both ways, and the message expiry counts the time it
// waited.
func TestForwardProperties(t *testing.T) {
	remote := tcpBroker(t, core.Options{}, core.Config{})
	local := tcpBroker(t, core.Options{}, core.Config{})
	m := local.bridges(t, nil, fast(bridge.Config{Name: "up", Addresses: []string{remote.url}, Topics: testRules}))
	waitState(t, m, "up", bridge.StateConnected)
	lsub := dialClient(t, local, "lsub", codec.V5)
	lsub.Subscribe("cloud/#", 1)
	rsub := dialClient(t, remote, "rsub", codec.V5)
	rsub.Subscribe("site/#", 1)
	lpub := dialClient(t, local, "lpub", codec.V5)
	rpub := dialClient(t, remote, "rpub", codec.V5)
	msg := func(topic string) *codec.Publish {
		p := &codec.Publish{Topic: []byte(topic), QoS: 1, Payload: []byte{0, 1, 2, 0xff}}
		p.Props.SetNum(codec.PropPayloadFormat, 0)
		p.Props.SetNum(codec.PropMessageExpiry, 3600)
		p.Props.ContentType = []byte("application/octet-stream")
		p.Props.ResponseTopic = []byte("reply/here")
		p.Props.CorrelationData = []byte{9, 8, 7}
		p.Props.User = []codec.UserProperty{{Key: []byte("k"), Value: []byte("v1")}, {Key: []byte("k"), Value: []byte("v2")}}
		return p
	}
	check := func(dir string, p *codec.Publish) {
		t.Helper()
		want := msg("")
		if !bytes.Equal(p.Payload, want.Payload) || string(p.Props.ContentType) != string(want.Props.ContentType) ||
			string(p.Props.ResponseTopic) != "reply/here" || !bytes.Equal(p.Props.CorrelationData, want.Props.CorrelationData) ||
			!p.Props.Has(codec.PropPayloadFormat) || len(p.Props.User) != 2 || string(p.Props.User[1].Value) != "v2" {
			t.Errorf("%s: properties %+v, payload % x", dir, p.Props, p.Payload)
		}
		if !p.Props.Has(codec.PropMessageExpiry) || p.Props.MessageExpiry > 3600 || p.Props.MessageExpiry < 3590 {
			t.Errorf("%s: message expiry %d (present %v), want just under 3600", dir, p.Props.MessageExpiry, p.Props.Has(codec.PropMessageExpiry))
		}
	}
	lpub.Publish(msg("out/p"))
	check("out", rsub.Expect(1)[0])
	rpub.Publish(msg("in/p"))
	check("in", lsub.Expect(1)[0])
}

// TestTransports: the bridge reaches the remote over TLS (verified with
// the configured CA) and WebSocket as over TCP.
func TestTransports(t *testing.T) {
	ca := certstest.NewCA(t)
	for _, tr := range []string{listeners.TransportTLS, listeners.TransportWS, listeners.TransportWSS} {
		t.Run(tr, func(t *testing.T) {
			lo := listeners.Options{Transport: tr}
			cfg := bridge.Config{Name: "up", Topics: testRules}
			if tr != listeners.TransportWS {
				lo.TLS = ca.ServerConfig()
				cfg.TLS.CAFile = ca.WriteCAFile()
			}
			remote := newBroker(t, core.Options{}, core.Config{}, lo)
			local := tcpBroker(t, core.Options{}, core.Config{})
			cfg.Addresses = []string{remote.url}
			m := local.bridges(t, nil, fast(cfg))
			waitState(t, m, "up", bridge.StateConnected)
			rsub := pipeClient(t, remote, "rsub", codec.V5)
			rsub.Subscribe("site/#", 1)
			lpub := dialClient(t, local, "lpub", codec.V5)
			lpub.Pub("out/t", tr, 1, false)
			if p := rsub.Expect(1)[0]; string(p.Payload) != tr {
				t.Errorf("got %q", p.Payload)
			}
		})
	}
}

// TestPlainProtocolOriginTracking: a 3.1.1 link without the bridge bit
// (a remote that refuses it, here forced with PlainProtocol) on a topic
// that goes both ways: the remote sends the bridge's messages back, and
// origin tracking drops them.
func TestPlainProtocolOriginTracking(t *testing.T) {
	remote := tcpBroker(t, core.Options{}, core.Config{})
	local := tcpBroker(t, core.Options{}, core.Config{})
	m := local.bridges(t, nil, fast(bridge.Config{Name: "up", Addresses: []string{remote.url}, Protocol: bridge.ProtocolV311,
		PlainProtocol: true, Topics: []bridge.Rule{{Topic: "#", Direction: bridge.Both, QoS: 1}}}))
	if st := waitState(t, m, "up", bridge.StateConnected); st.LoopPrevention != "origin_tracking" {
		t.Fatalf("loop prevention %q", st.LoopPrevention)
	}
	lsub := dialClient(t, local, "lsub", codec.V5)
	lsub.Subscribe("t/#", 1)
	rsub := dialClient(t, remote, "rsub", codec.V5)
	rsub.Subscribe("t/#", 1)
	lpub := dialClient(t, local, "lpub", codec.V5)
	rpub := dialClient(t, remote, "rpub", codec.V5)
	for i := range 5 {
		lpub.Pub("t/l", fmt.Sprint("l", i), 1, false)
		rpub.Pub("t/r", fmt.Sprint("r", i), 1, false)
	}
	for _, s := range []*mqtttest.Client{lsub, rsub} {
		got := payloads(s.Expect(10))
		slices.Sort(got)
		if want := []string{"l0", "l1", "l2", "l3", "l4", "r0", "r1", "r2", "r3", "r4"}; !slices.Equal(got, want) {
			t.Errorf("got %q, want each message once", got)
		}
		s.Nothing()
	}
	mqtttest.WaitFor(t, "the echoes", func() bool { st, _ := m.Bridge("up"); return st.LoopsPrevented == 5 })
}

// TestBothWaysNoLoop: two xmq brokers bridged both ways on #: one message
// published on each side arrives once on each side, and the bridge
// forwards each once.
func TestBothWaysNoLoop(t *testing.T) {
	for _, proto := range []string{bridge.ProtocolV5, bridge.ProtocolV311} {
		t.Run("mqtt"+proto, func(t *testing.T) {
			a := tcpBroker(t, core.Options{}, core.Config{})
			b := tcpBroker(t, core.Options{}, core.Config{})
			m := a.bridges(t, nil, fast(bridge.Config{Name: "ab", Addresses: []string{b.url}, Protocol: proto,
				Topics: []bridge.Rule{{Topic: "#", Direction: bridge.Both, QoS: 1}}}))
			waitState(t, m, "ab", bridge.StateConnected)
			asub := dialClient(t, a, "asub", codec.V311)
			asub.Subscribe("#", 1)
			bsub := dialClient(t, b, "bsub", codec.V311)
			bsub.Subscribe("#", 1)
			dialClient(t, a, "apub", codec.V311).Pub("from/a", "A", 1, false)
			dialClient(t, b, "bpub", codec.V311).Pub("from/b", "B", 1, false)
			for _, s := range []*mqtttest.Client{asub, bsub} {
				got := payloads(s.Expect(2))
				slices.Sort(got)
				if !slices.Equal(got, []string{"A", "B"}) {
					t.Errorf("got %q", got)
				}
				s.Nothing()
			}
			if st, _ := m.Bridge("ab"); st.MessagesOut != 1 || st.MessagesIn != 1 {
				t.Errorf("forwarded %d out and %d in, want 1 and 1", st.MessagesOut, st.MessagesIn)
			}
		})
	}
}

// TestOverlappingRules: a message two out rules match goes out once, by
// the first rule.
func TestOverlappingRules(t *testing.T) {
	remote := tcpBroker(t, core.Options{}, core.Config{})
	local := tcpBroker(t, core.Options{}, core.Config{})
	m := local.bridges(t, nil, fast(bridge.Config{Name: "up", Addresses: []string{remote.url}, Topics: []bridge.Rule{
		{Topic: "a/#", QoS: 1, RemotePrefix: "first/"}, {Topic: "a/b/#", QoS: 2, RemotePrefix: "second/"}}}))
	waitState(t, m, "up", bridge.StateConnected)
	rsub := dialClient(t, remote, "rsub", codec.V5)
	rsub.Subscribe("#", 2)
	dialClient(t, local, "lpub", codec.V5).Pub("a/b/c", "once", 2, false)
	if p := rsub.Expect(1)[0]; string(p.Topic) != "first/a/b/c" || p.QoS != 1 {
		t.Errorf("got %q at QoS %d, want first/a/b/c at QoS 1", p.Topic, p.QoS)
	}
	rsub.Nothing()
}

// settle gives a bridge time to forward what is in flight.
func settle() { time.Sleep(50 * time.Millisecond) }
