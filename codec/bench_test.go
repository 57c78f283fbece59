package codec_test

import (
	"bufio"
	"testing"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/codec/codectest"
)

// benchRead reads raw over and over through a Reader on a bufio.Reader of the
// default size, as a connection's read loop does. The stream never ends, so
// packets straddle buffer refills the way they do on a socket.
func benchRead(b *testing.B, raw []byte, v byte) {
	b.Helper()
	r := codec.NewReader(bufio.NewReader(&repeatReader{data: raw}), 0)
	r.Version = v
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.ReadPacket(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadPublish decodes PUBLISH packets through the Reader.
func BenchmarkReadPublish(b *testing.B) {
	for _, c := range codectest.PublishBenches() {
		b.Run(c.Name, func(b *testing.B) { benchRead(b, c.Raw, c.Version) })
	}
}

// BenchmarkAppendPublish encodes PUBLISH packets into a reused buffer.
func BenchmarkAppendPublish(b *testing.B) {
	for _, c := range codectest.PublishBenches() {
		b.Run(c.Name, func(b *testing.B) {
			buf := make([]byte, 0, 2048)
			b.SetBytes(int64(len(c.Raw)))
			b.ReportAllocs()
			for b.Loop() {
				buf = c.Packet.Append(buf[:0], c.Version)
			}
		})
	}
}

// BenchmarkDecodePublish decodes with Decode from a byte slice, which
// allocates the packet value each time (the Reader reuses one).
func BenchmarkDecodePublish(b *testing.B) {
	for _, c := range codectest.PublishBenches() {
		b.Run(c.Name, func(b *testing.B) {
			b.SetBytes(int64(len(c.Raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := codec.Decode(c.Raw, c.Version); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkReadConnect(b *testing.B) {
	for _, name := range []string{"connect/v4/minimal", "connect/v4/will-user-password", "connect/v5/full"} {
		c := codectest.Get(name)
		b.Run(name, func(b *testing.B) { benchRead(b, c.Raw, c.Version) })
	}
}

func BenchmarkReadSubscribe(b *testing.B) {
	for _, name := range []string{"subscribe/v4/two-filters", "subscribe/v5/options"} {
		c := codectest.Get(name)
		b.Run(name, func(b *testing.B) { benchRead(b, c.Raw, c.Version) })
	}
}

func BenchmarkMatch(b *testing.B) {
	topic := []byte(codectest.BenchTopic)
	for _, filter := range []string{codectest.BenchTopic, "sensors/+/floor-3/temperature", "sensors/#", "sensors/+/floor-4/#"} {
		b.Run(filter, func(b *testing.B) {
			f := []byte(filter)
			for b.Loop() {
				codec.Match(f, topic)
			}
		})
	}
}
