package codectest

import (
	"bytes"
	"fmt"

	"github.com/xmq-io/xmq/codec"
)

// BenchTopic is the topic of the benchmark PUBLISH packets: a realistic
// device topic of 38 bytes.
const BenchTopic = "sensors/building-7/floor-3/temperature"

// BenchPublish returns the PUBLISH packet the benchmarks and allocation
// tests use: BenchTopic, size bytes of payload, packet identifier 4242 when
// qos > 0, and with props the MQTT 5 properties a busy broker sees most, a
// Message Expiry Interval of 3600 and one User Property
// ("trace-id", "4bf92f3577b34da6").
func BenchPublish(qos byte, size int, props bool) *codec.Publish {
	p := &codec.Publish{QoS: qos, Topic: []byte(BenchTopic), Payload: bytes.Repeat([]byte{'p'}, size)}
	if qos > 0 {
		p.PacketID = 4242
	}
	if props {
		p.Props.SetNum(codec.PropMessageExpiry, 3600)
		p.Props.User = []codec.UserProperty{{Key: []byte("trace-id"), Value: []byte("4bf92f3577b34da6")}}
	}
	return p
}

// PublishBench is one PUBLISH benchmark case. Unlike the fixtures, Raw is
// produced by the codec's encoder; the comparison benchmarks in
// bench/codeccompare check that other implementations decode it to the same
// topic, packet identifier and payload.
type PublishBench struct {
	// Name reads "v311/qos0/64B" or "v5-props/qos1/1KiB".
	Name    string
	Version byte
	Packet  *codec.Publish
	Raw     []byte
}

// PublishBenches returns the PUBLISH benchmark matrix: MQTT 3.1.1 without
// and MQTT 5 with properties, QoS 0 and 1, 64-byte and 1 KiB payloads.
func PublishBenches() []PublishBench {
	var out []PublishBench
	for _, v := range []byte{codec.V311, codec.V5} {
		for _, qos := range []byte{0, 1} {
			for _, size := range []int{64, 1024} {
				p := BenchPublish(qos, size, v == codec.V5)
				ver, sz := "v311", fmt.Sprintf("%dB", size)
				if v == codec.V5 {
					ver = "v5-props"
				}
				if size == 1024 {
					sz = "1KiB"
				}
				out = append(out, PublishBench{
					Name: fmt.Sprintf("%s/qos%d/%s", ver, qos, sz), Version: v, Packet: p, Raw: p.Append(nil, v),
				})
			}
		}
	}
	return out
}
