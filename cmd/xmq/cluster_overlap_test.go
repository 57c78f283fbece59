//go:build unix

package main

import (
	"fmt"
	"testing"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// TestClusterOverlap: a client whose subscriptions overlap gets what one
// node gives it, wherever the publisher connected — the cross-node twin
// of core's TestOverlappingSubscriptions. A 3.1.1 client gets one copy at
// the highest QoS granted [MQTT-3.3.5-1], an MQTT 5 client one copy per
// subscription with its identifier (3.3.4), a shared group one copy; in
// order, QoS 0, 1 and 2 interleaved. NATS delivers the node of the
// subscribers one copy per filter: it must not multiply deliveries.
func TestClusterOverlap(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two brokers")
	}
	nodes := clusterNodes(t, 2)
	url := func(i int) string { return "mqtt://" + nodes[i].addr }
	for _, layout := range []struct {
		name string
		pub  int // the publisher's node; the subscribers are on the second
	}{{"same node", 1}, {"cross node", 0}} {
		t.Run(layout.name, func(t *testing.T) {
			p := fmt.Sprintf("ov%d", layout.pub) // topics and client ids of this layout
			v3 := mqtttest.Dial(t, url(1), p+"-v3", codec.V311)
			v3.Subscribe(p+"/#", 0)
			v3.Subscribe(p+"/+/c", 2)
			v3.Subscribe(p+"/b/c", 1)
			v3low := mqtttest.Dial(t, url(1), p+"-v3low", codec.V311) // granted at most QoS 1
			v3low.Subscribe(p+"/#", 0)
			v3low.Subscribe(p+"/+/c", 1)
			v5 := mqtttest.Dial(t, url(1), p+"-v5", codec.V5)
			for i, f := range []string{p + "/#", p + "/+/c", p + "/b/c"} {
				s := &codec.Subscribe{Subscriptions: []codec.Subscription{{Filter: []byte(f), QoS: byte(i)}}}
				s.Props.SubscriptionIDs = []uint32{uint32(10 + i)}
				v5.SubscribePacket(s)
			}
			shared := mqtttest.Dial(t, url(1), p+"-shared", codec.V311)
			shared.Subscribe("$share/g/"+p+"/#", 2)
			pub := mqtttest.Dial(t, url(layout.pub), p+"-pub", codec.V311)

			const n = 9
			for i := range n {
				pub.Pub(p+"/b/c", fmt.Sprint(i), byte(i%3), false)
			}
			// each checks that c gets the n messages once each, in order,
			// message i at QoS min(i%3, top).
			each := func(name string, c *mqtttest.Client, top byte) {
				t.Helper()
				got := c.Expect(n)
				for i, m := range got {
					if string(m.Payload) != fmt.Sprint(i) || m.QoS != min(byte(i%3), top) {
						t.Fatalf("%s: message %d is %q at QoS %d, want %q at QoS %d (all: %q)", name, i, m.Payload, m.QoS,
							fmt.Sprint(i), min(byte(i%3), top), mqtttest.Payloads(got))
					}
				}
				c.Nothing()
			}
			each("3.1.1", v3, 2)
			each("3.1.1, QoS 1 granted", v3low, 1)
			each("shared", shared, 2)

			// MQTT 5: per subscription identifier, the n messages in
			// order at min(i%3, the subscription's QoS).
			bySub := map[uint32][]*codec.Publish{}
			for _, m := range v5.Expect(3 * n) {
				if len(m.Props.SubscriptionIDs) != 1 {
					t.Fatalf("MQTT 5: copy %q with subscription ids %v, want one", m.Payload, m.Props.SubscriptionIDs)
				}
				id := m.Props.SubscriptionIDs[0]
				bySub[id] = append(bySub[id], m)
			}
			v5.Nothing()
			for id := uint32(10); id < 13; id++ {
				ms := bySub[id]
				if len(ms) != n {
					t.Fatalf("MQTT 5: %d copies with subscription id %d, want %d", len(ms), id, n)
				}
				for i, m := range ms {
					if want := min(byte(i%3), byte(id-10)); string(m.Payload) != fmt.Sprint(i) || m.QoS != want {
						t.Fatalf("MQTT 5, subscription %d: message %d is %q at QoS %d, want %q at QoS %d", id, i, m.Payload, m.QoS,
							fmt.Sprint(i), want)
					}
				}
			}
		})
	}
}
