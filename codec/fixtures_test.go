package codec_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"testing/iotest"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/codec/codectest"
)

func TestDecodeFixtures(t *testing.T) {
	for _, c := range codectest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			p, n, err := codec.Decode(c.Raw, c.Version)
			checkErr(t, "Decode", err, c.Err)
			if !c.Valid() {
				if p != nil || n != 0 {
					t.Errorf("Decode: got packet %s and n %d with an error, want nil and 0", codectest.Format(p), n)
				}
				return
			}
			if n != len(c.Raw) {
				t.Errorf("Decode: got n %d, want %d", n, len(c.Raw))
			}
			checkPacket(t, "Decode", p, c.Packet)

			// A following packet is left alone.
			p, n, err = codec.Decode(append(bytes.Clone(c.Raw), 0xC0, 0), c.Version)
			checkErr(t, "Decode with a packet after it", err, nil)
			if n != len(c.Raw) {
				t.Errorf("Decode with a packet after it: got n %d, want %d", n, len(c.Raw))
			}
			checkPacket(t, "Decode with a packet after it", p, c.Packet)
		})
	}
}

// TestDecodePrefixes checks that every strict prefix of a valid packet asks
// for more bytes rather than failing or, worse, succeeding.
func TestDecodePrefixes(t *testing.T) {
	for _, c := range codectest.Valid() {
		t.Run(c.Name, func(t *testing.T) {
			for i := range len(c.Raw) {
				_, n, err := codec.Decode(c.Raw[:i], c.Version)
				checkErr(t, fmt.Sprintf("Decode(Raw[:%d])", i), err, codec.ErrNeedMore)
				if n != 0 {
					t.Errorf("Decode(Raw[:%d]): got n %d, want 0", i, n)
				}
			}
		})
	}
}

// TestEncodeFixtures checks the encoder against the hand-written bytes.
func TestEncodeFixtures(t *testing.T) {
	for _, c := range codectest.Valid() {
		t.Run(c.Name, func(t *testing.T) {
			got := c.Packet.Append(nil, c.Version)
			if n := c.Packet.Len(c.Version); n != len(got) {
				t.Errorf("Len: got %d, want %d (the length Append wrote)", n, len(got))
			}
			if c.NonCanonical {
				if bytes.Equal(got, c.Raw) {
					t.Errorf("Append reproduced Raw: the case is canonical, drop NonCanonical")
				}
				return
			}
			if !bytes.Equal(got, c.Raw) {
				t.Errorf("Append:\n got  % x\n want % x", got, c.Raw)
			}
			prefix := []byte("prefix")
			got = c.Packet.Append(prefix, c.Version)
			if !bytes.Equal(got[:len(prefix)], []byte("prefix")) || !bytes.Equal(got[len(prefix):], c.Raw) {
				t.Errorf("Append after a prefix:\n got  % x\n want prefix + % x", got, c.Raw)
			}
		})
	}
}

// lossyAt is the error expected when a packet written for one protocol level
// is encoded at level v that cannot express it, or nil when it can.
func lossyAt(c codectest.Case, v byte) error {
	if v == codec.V5 {
		if u, ok := c.Packet.(*codec.Unsuback); ok && len(u.ReasonCodes) == 0 {
			return codec.ErrNoReasonCodes // an MQTT 5 UNSUBACK needs a code per filter
		}
		return nil
	}
	switch p := c.Packet.(type) {
	case *codec.Auth:
		return codec.ErrAuthBeforeV5
	case *codec.Publish:
		if len(p.Topic) == 0 {
			return codec.ErrTopicEmpty // topic aliases are MQTT 5 only
		}
	}
	return nil
}

// TestRoundTrip encodes every valid packet at every protocol level, checks
// Len against what Append wrote, decodes the bytes again and checks the
// result: the same packet at the fixture's own level, and at another level a
// packet that encodes to the same bytes (the level may drop MQTT 5 fields).
func TestRoundTrip(t *testing.T) {
	for _, c := range codectest.Valid() {
		for _, v := range codectest.Versions {
			t.Run(fmt.Sprintf("%s/at-v%d", c.Name, v), func(t *testing.T) {
				b := c.Packet.Append(nil, v)
				if n := c.Packet.Len(v); n != len(b) {
					t.Errorf("Len: got %d, want %d", n, len(b))
				}
				p, n, err := codec.Decode(b, v)
				want := lossyAt(c, v)
				if v == c.Version {
					want = nil
				}
				checkErr(t, "Decode(Append(p))", err, want)
				if err != nil {
					return
				}
				if n != len(b) {
					t.Errorf("Decode(Append(p)): got n %d, want %d", n, len(b))
				}
				if v == c.Version || c.Packet.Type() == codec.CONNECT {
					checkPacket(t, "Decode(Append(p))", p, c.Packet)
				}
				if again := p.Append(nil, v); !bytes.Equal(again, b) {
					t.Errorf("Append(Decode(Append(p))):\n got  % x\n want % x", again, b)
				}
			})
		}
	}
}

func TestReaderFixtures(t *testing.T) {
	for _, c := range codectest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			inputs := map[string]func() io.Reader{
				"whole":    func() io.Reader { return bytes.NewReader(c.Raw) },
				"one-byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(c.Raw)) },
				"chunks-3": func() io.Reader { return &chunkReader{data: c.Raw, sizes: []int{3}} },
				"data-err": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(c.Raw)) },
			}
			for i := 1; i < len(c.Raw); i++ {
				inputs[fmt.Sprintf("split-%d", i)] = func() io.Reader {
					return io.MultiReader(bytes.NewReader(c.Raw[:i]), bytes.NewReader(c.Raw[i:]))
				}
			}
			for name, input := range inputs {
				for _, size := range []int{16, 4096} {
					what := fmt.Sprintf("%s/bufio-%d", name, size)
					r := newReader(input(), size, c.Version)
					p, err := r.ReadPacket()
					checkErr(t, what+": ReadPacket", err, readerErr(c.Err))
					if !c.Valid() {
						continue
					}
					checkPacket(t, what+": ReadPacket", p, c.Packet)
					_, err = r.ReadPacket()
					checkErr(t, what+": ReadPacket at the end", err, io.EOF)
				}
			}
		})
	}
}

// TestReaderStream reads every valid fixture of a level from one stream, as a
// peer would send them, so each packet value the Reader reuses is decoded
// over a previous one of the same type.
func TestReaderStream(t *testing.T) {
	for _, v := range codectest.Versions {
		cases := codectest.ValidAt(v)
		stream := codectest.Stream(cases)
		stream = append(stream, codectest.Stream(cases)...) // twice: the second pass reuses state
		cases = append(cases, cases...)
		inputs := map[string]func() io.Reader{
			"whole":    func() io.Reader { return bytes.NewReader(stream) },
			"one-byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(stream)) },
			"chunks":   func() io.Reader { return &chunkReader{data: stream, sizes: []int{1, 7, 2, 31, 5, 300}} },
		}
		for name, input := range inputs {
			for _, size := range []int{16, 64, 4096} {
				t.Run(fmt.Sprintf("v%d/%s/bufio-%d", v, name, size), func(t *testing.T) {
					r := newReader(input(), size, v)
					for _, c := range cases {
						p, err := r.ReadPacket()
						checkErr(t, c.Name, err, nil)
						if err != nil {
							return
						}
						checkPacket(t, c.Name, p, c.Packet)
					}
					_, err := r.ReadPacket()
					checkErr(t, "ReadPacket at the end", err, io.EOF)
				})
			}
		}
	}
}
