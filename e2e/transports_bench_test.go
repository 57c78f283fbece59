package e2e_test

import (
	"bufio"
	"context"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/listeners"
)

// Transport benchmarks: the same load over tcp, tls, ws, wss and quic, on
// one machine, client and broker sharing its cores. Compare each transport
// with tcp:
//
//	go test -run '^$' -bench 'Transport' -benchtime 2s ./e2e

// benchConn is a codec client for benchmarks.
type benchConn struct {
	w *bufio.Writer
	r *codec.Reader
}

func benchDial(b *testing.B, e endpoint, id string) *benchConn {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := listeners.Dial(ctx, e.url, e.tls)
	if err != nil {
		b.Fatalf("Dial %s: %v", e.url, err)
	}
	b.Cleanup(func() { _ = c.Close() })
	bc := &benchConn{w: bufio.NewWriterSize(c, 32<<10), r: codec.NewReader(bufio.NewReaderSize(c, 32<<10), 0)}
	bc.r.Version = codec.V5
	connect := codec.Connect{ProtocolVersion: codec.V5, CleanStart: true, ClientID: []byte(id)}
	bc.send(b, &connect)
	bc.flush(b)
	if p, err := bc.r.ReadPacket(); err != nil || p.Type() != codec.CONNACK {
		b.Fatalf("CONNACK: %v %v", p, err)
	}
	return bc
}

func (c *benchConn) send(b *testing.B, p codec.Packet) {
	if _, err := c.w.Write(p.Append(nil, codec.V5)); err != nil {
		b.Fatal(err)
	}
}

func (c *benchConn) flush(b *testing.B) {
	if err := c.w.Flush(); err != nil {
		b.Fatal(err)
	}
}

// benchEndpoints are the matrix's transports without the client-certificate duplicate.
func benchEndpoints(b *testing.B) []endpoint {
	tb := startTransportBroker(b)
	var eps []endpoint
	for _, e := range tb.endpoints {
		if e.name != "tls-client-cert" {
			eps = append(eps, e)
		}
	}
	return eps
}

// BenchmarkTransportIngestQoS0 measures how fast one client can publish
// 64-byte QoS 0 messages that the broker reads, decodes and routes (no
// subscriber): writes are buffered as a busy client's would be, and a
// PINGREQ round trip at the end waits until the broker has read them all.
func BenchmarkTransportIngestQoS0(b *testing.B) {
	for _, e := range benchEndpoints(b) {
		b.Run(e.name, func(b *testing.B) {
			c := benchDial(b, e, "ingest-"+e.name)
			pub := codec.Publish{Topic: []byte("bench/ingest"), Payload: make([]byte, 64)}
			pkt := pub.Append(nil, codec.V5)
			b.SetBytes(64)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := c.w.Write(pkt); err != nil {
					b.Fatal(err)
				}
			}
			c.send(b, &codec.Pingreq{})
			c.flush(b)
			if p, err := c.r.ReadPacket(); err != nil || p.Type() != codec.PINGRESP {
				b.Fatalf("PINGRESP: %v %v", p, err)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkTransportLatencyQoS0 measures one 64-byte QoS 0 message from a
// publisher to a subscriber, both on the transport under test: ns/op is
// the delivery round trip through the broker.
func BenchmarkTransportLatencyQoS0(b *testing.B) {
	for _, e := range benchEndpoints(b) {
		b.Run(e.name, func(b *testing.B) {
			sub := benchDial(b, e, "lat-sub-"+e.name)
			sub.send(b, &codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{{Filter: []byte("bench/lat")}}})
			sub.flush(b)
			if p, err := sub.r.ReadPacket(); err != nil || p.Type() != codec.SUBACK {
				b.Fatalf("SUBACK: %v %v", p, err)
			}
			pub := benchDial(b, e, "lat-pub-"+e.name)
			pkt := (&codec.Publish{Topic: []byte("bench/lat"), Payload: make([]byte, 64)}).Append(nil, codec.V5)
			b.ResetTimer()
			for range b.N {
				if _, err := pub.w.Write(pkt); err != nil {
					b.Fatal(err)
				}
				pub.flush(b)
				if p, err := sub.r.ReadPacket(); err != nil || p.Type() != codec.PUBLISH {
					b.Fatalf("PUBLISH: %v %v", p, err)
				}
			}
		})
	}
}
