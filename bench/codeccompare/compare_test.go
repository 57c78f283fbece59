package codeccompare

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"

	paho "github.com/eclipse/paho.golang/packets"
	mochi "github.com/mochi-mqtt/server/v2/packets"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/codec/codectest"
)

// repeatReader returns data over and over, forever, without allocating.
type repeatReader struct {
	data []byte
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m := copy(p[n:], r.data[r.off:])
		n += m
		r.off = (r.off + m) % len(r.data)
	}
	return n, nil
}

func caseName(c codectest.PublishBench) string { return "case=" + strings.ReplaceAll(c.Name, "/", "-") }

// mochiReader decodes as mochi's server does (Client.ReadFixedHeader and
// ReadPacket), but into a reused body buffer.
type mochiReader struct {
	br   *bufio.Reader
	body []byte
	v    byte
}

func (m *mochiReader) read() (mochi.Packet, error) {
	var fh mochi.FixedHeader
	hb, err := m.br.ReadByte()
	if err != nil {
		return mochi.Packet{}, err
	}
	if err := fh.Decode(hb); err != nil {
		return mochi.Packet{}, err
	}
	if fh.Remaining, _, err = mochi.DecodeLength(m.br); err != nil {
		return mochi.Packet{}, err
	}
	if cap(m.body) < fh.Remaining {
		m.body = make([]byte, fh.Remaining)
	}
	body := m.body[:fh.Remaining]
	if _, err := io.ReadFull(m.br, body); err != nil {
		return mochi.Packet{}, err
	}
	pk := mochi.Packet{ProtocolVersion: m.v, FixedHeader: fh}
	err = pk.PublishDecode(body)
	return pk, err
}

func mochiPacket(c codectest.PublishBench) mochi.Packet {
	p := c.Packet
	pk := mochi.Packet{
		ProtocolVersion: c.Version,
		FixedHeader:     mochi.FixedHeader{Type: mochi.Publish, Qos: p.QoS},
		TopicName:       string(p.Topic),
		PacketID:        p.PacketID,
		Payload:         p.Payload,
	}
	if exp, ok := p.Props.Num(codec.PropMessageExpiry); ok {
		pk.Properties.MessageExpiryInterval = exp
	}
	for _, u := range p.Props.User {
		pk.Properties.User = append(pk.Properties.User, mochi.UserProperty{Key: string(u.Key), Val: string(u.Value)})
	}
	return pk
}

func pahoPacket(c codectest.PublishBench) *paho.Publish {
	p := c.Packet
	pub := &paho.Publish{QoS: p.QoS, Topic: string(p.Topic), PacketID: p.PacketID, Payload: p.Payload, Properties: &paho.Properties{}}
	if exp, ok := p.Props.Num(codec.PropMessageExpiry); ok {
		pub.Properties.MessageExpiry = &exp
	}
	for _, u := range p.Props.User {
		pub.Properties.User = append(pub.Properties.User, paho.User{Key: string(u.Key), Value: string(u.Value)})
	}
	return pub
}

// TestSameMeaning checks that the three libraries agree on the benchmark
// bytes, so the benchmarks compare the same work.
func TestSameMeaning(t *testing.T) {
	for _, c := range codectest.PublishBenches() {
		t.Run(c.Name, func(t *testing.T) {
			p := c.Packet
			wantExp, _ := p.Props.Num(codec.PropMessageExpiry)

			m := &mochiReader{br: bufio.NewReader(bytes.NewReader(c.Raw)), v: c.Version}
			mp, err := m.read()
			if err != nil {
				t.Fatalf("mochi decode: %v", err)
			}
			if mp.TopicName != string(p.Topic) || mp.PacketID != p.PacketID || mp.FixedHeader.Qos != p.QoS ||
				!bytes.Equal(mp.Payload, p.Payload) || mp.Properties.MessageExpiryInterval != wantExp ||
				len(mp.Properties.User) != len(p.Props.User) {
				t.Errorf("mochi decoded %+v", mp)
			}
			var buf bytes.Buffer
			pk := mochiPacket(c)
			if err := pk.PublishEncode(&buf); err != nil {
				t.Fatalf("mochi encode: %v", err)
			}
			checkOurs(t, "mochi", buf.Bytes(), c)

			if c.Version != codec.V5 {
				return
			}
			cp, err := paho.ReadPacket(bytes.NewReader(c.Raw))
			if err != nil {
				t.Fatalf("paho decode: %v", err)
			}
			pp := cp.Content.(*paho.Publish)
			if pp.Topic != string(p.Topic) || pp.PacketID != p.PacketID || pp.QoS != p.QoS || !bytes.Equal(pp.Payload, p.Payload) ||
				pp.Properties.MessageExpiry == nil || *pp.Properties.MessageExpiry != wantExp || len(pp.Properties.User) != len(p.Props.User) {
				t.Errorf("paho decoded %v", pp)
			}
			buf.Reset()
			if _, err := pahoPacket(c).WriteTo(&buf); err != nil {
				t.Fatalf("paho encode: %v", err)
			}
			checkOurs(t, "paho", buf.Bytes(), c)
		})
	}
}

func checkOurs(t *testing.T, who string, b []byte, c codectest.PublishBench) {
	t.Helper()
	got, n, err := codec.Decode(b, c.Version)
	if err != nil || n != len(b) || !codectest.Equal(got, c.Packet) {
		t.Errorf("%s encoding % x decodes to %s, %v; want %s", who, b, codectest.Format(got), err, codectest.Format(c.Packet))
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, c := range codectest.PublishBenches() {
		b.Run(caseName(c)+"/impl=xmq", func(b *testing.B) {
			r := codec.NewReader(bufio.NewReader(&repeatReader{data: c.Raw}), 0)
			r.Version = c.Version
			b.SetBytes(int64(len(c.Raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.ReadPacket(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(caseName(c)+"/impl=mochi", func(b *testing.B) {
			m := &mochiReader{br: bufio.NewReader(&repeatReader{data: c.Raw}), v: c.Version}
			b.SetBytes(int64(len(c.Raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.read(); err != nil {
					b.Fatal(err)
				}
			}
		})
		if c.Version != codec.V5 {
			continue
		}
		b.Run(caseName(c)+"/impl=paho", func(b *testing.B) {
			br := bufio.NewReader(&repeatReader{data: c.Raw})
			b.SetBytes(int64(len(c.Raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := paho.ReadPacket(br); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEncode(b *testing.B) {
	for _, c := range codectest.PublishBenches() {
		b.Run(caseName(c)+"/impl=xmq", func(b *testing.B) {
			buf := make([]byte, 0, 2048)
			b.SetBytes(int64(len(c.Raw)))
			b.ReportAllocs()
			for b.Loop() {
				buf = c.Packet.Append(buf[:0], c.Version)
			}
		})
		b.Run(caseName(c)+"/impl=mochi", func(b *testing.B) {
			var buf bytes.Buffer
			buf.Grow(2048)
			pk := mochiPacket(c)
			b.SetBytes(int64(len(c.Raw)))
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				if err := pk.PublishEncode(&buf); err != nil {
					b.Fatal(err)
				}
			}
		})
		if c.Version != codec.V5 {
			continue
		}
		b.Run(caseName(c)+"/impl=paho", func(b *testing.B) {
			var buf bytes.Buffer
			buf.Grow(2048)
			pub := pahoPacket(c)
			b.SetBytes(int64(len(c.Raw)))
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				if _, err := pub.WriteTo(&buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
