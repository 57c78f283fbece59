package codec_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/codec/codectest"
)

var errReadPastHeader = errors.New("test: the Reader asked for bytes past the fixed header")

// headerOnly supplies a fixed header, one byte per Read, and then fails
// every further Read: a Reader that returns ErrPacketTooLarge from it has
// decided from the header alone, without waiting for or reading the body.
type headerOnly struct {
	hdr       []byte
	readsPast int
}

func (h *headerOnly) Read(p []byte) (int, error) {
	if len(h.hdr) == 0 {
		h.readsPast++
		return 0, errReadPastHeader
	}
	p[0] = h.hdr[0]
	h.hdr = h.hdr[1:]
	return 1, nil
}

func TestReaderMaxPacketSizeBeforeBody(t *testing.T) {
	tests := []struct {
		name  string
		max   int
		hdr   []byte
		want  error
		reads int // Reads past the header
	}{
		{"protocol maximum announced, limit 1 KiB", 1024, []byte{0x30, 0xFF, 0xFF, 0xFF, 0x7F}, codec.ErrPacketTooLarge, 0},
		{"one byte over the limit", 100, []byte{0x30, 99}, codec.ErrPacketTooLarge, 0}, // 2 + 99 bytes
		{"exactly the limit reads the body", 100, []byte{0x30, 98}, nil, 1},
		{"two-byte length one over the limit", 130, []byte{0x30, 0x80, 0x01}, codec.ErrPacketTooLarge, 0}, // 3 + 128 bytes
		{"two-byte length exactly the limit", 131, []byte{0x30, 0x80, 0x01}, nil, 1},
		{"SUBSCRIBE over the limit", 16, []byte{0x82, 15}, codec.ErrPacketTooLarge, 0},
		{"no limit means the protocol maximum", 0, []byte{0x30, 0xFF, 0xFF, 0xFF, 0x7F}, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &headerOnly{hdr: bytes.Clone(tt.hdr)}
			r := codec.NewReader(bufio.NewReaderSize(src, 64), tt.max)
			r.Version = codec.V311
			_, err := r.ReadPacket()
			if tt.reads > 0 {
				// The body was asked for: the source's error comes back as is.
				if !errors.Is(err, errReadPastHeader) {
					t.Errorf("ReadPacket: got error %v, want %v", err, errReadPastHeader)
				}
			} else {
				checkErr(t, "ReadPacket", err, tt.want)
			}
			if (src.readsPast > 0) != (tt.reads > 0) {
				t.Errorf("Reads past the header: got %d, want %d", src.readsPast, tt.reads)
			}
		})
	}
}

// TestReaderMaxPacketSizeBoundary checks the limit against whole packets
// that arrive in full: a packet of exactly MaxPacketSize bytes is read, one
// byte more is refused.
func TestReaderMaxPacketSizeBoundary(t *testing.T) {
	for _, size := range []int{16, 4096} {
		for _, total := range []int{10, 127, 128, 130, 5000} {
			p := &codec.Publish{Topic: []byte("t"), Payload: make([]byte, 0, total)}
			for p.Len(codec.V311) < total {
				p.Payload = append(p.Payload, 'x')
			}
			if p.Len(codec.V311) != total {
				continue // no payload makes exactly total bytes (varint boundary)
			}
			raw := p.Append(nil, codec.V311)
			for _, max := range []int{total - 1, total, total + 1} {
				t.Run(fmt.Sprintf("bufio-%d/packet-%d/max-%d", size, total, max), func(t *testing.T) {
					r := codec.NewReader(bufio.NewReaderSize(bytes.NewReader(raw), size), max)
					r.Version = codec.V311
					got, err := r.ReadPacket()
					if max < total {
						checkErr(t, "ReadPacket", err, codec.ErrPacketTooLarge)
						return
					}
					checkErr(t, "ReadPacket", err, nil)
					checkPacket(t, "ReadPacket", got, p)
				})
			}
		}
	}
}

// TestReaderHugeAnnouncementCostsNothing checks that the body buffer grows as
// bytes arrive, not by the announced length: a peer announcing 256 MiB and
// sending 10 bytes must not make the Reader allocate 256 MiB.
func TestReaderHugeAnnouncementCostsNothing(t *testing.T) {
	raw := append([]byte{0x30, 0xFF, 0xFF, 0xFF, 0x7F}, make([]byte, 10)...)
	r := newReader(bytes.NewReader(raw), 4096, codec.V311)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := r.ReadPacket()
	runtime.ReadMemStats(&after)
	checkErr(t, "ReadPacket", err, io.ErrUnexpectedEOF)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("allocated %d bytes for a 10-byte body, want under 1 MiB", grew)
	}
}

// TestReaderLargeBody reads packets bigger than the bufio buffer, which go
// through the Reader's own body buffer, interleaved with small ones.
func TestReaderLargeBody(t *testing.T) {
	big := func(n int, c byte) *codec.Publish {
		return &codec.Publish{QoS: 1, PacketID: uint16(n), Topic: []byte("big/topic"), Payload: bytes.Repeat([]byte{c}, n)}
	}
	packets := []codec.Packet{
		big(5000, 'a'),
		&codec.Pingreq{},
		big(100<<10, 'b'), // beyond what the Reader keeps between packets
		big(10, 'c'),
		big(70000, 'd'),
		big(70000, 'e'),
		&codec.Subscribe{PacketID: 3, Subscriptions: []codec.Subscription{{Filter: bytes.Repeat([]byte("ab/"), 3000)[:8999]}}},
	}
	var stream []byte
	for _, p := range packets {
		stream = p.Append(stream, codec.V311)
	}
	for _, size := range []int{16, 4096} {
		for name, src := range map[string]func() io.Reader{
			"whole":  func() io.Reader { return bytes.NewReader(stream) },
			"chunks": func() io.Reader { return &chunkReader{data: stream, sizes: []int{1000, 1, 4097, 3}} },
		} {
			t.Run(fmt.Sprintf("%s/bufio-%d", name, size), func(t *testing.T) {
				r := newReader(src(), size, codec.V311)
				for i, want := range packets {
					got, err := r.ReadPacket()
					checkErr(t, fmt.Sprintf("packet %d", i), err, nil)
					if err != nil {
						return
					}
					checkPacket(t, fmt.Sprintf("packet %d", i), got, want)
				}
				_, err := r.ReadPacket()
				checkErr(t, "ReadPacket at the end", err, io.EOF)
			})
		}
	}
}

func TestReaderEOF(t *testing.T) {
	ping := []byte{0xC0, 0}
	pub := codectest.Get("publish/v4/qos1").Raw
	big := (&codec.Publish{Topic: []byte("t"), Payload: make([]byte, 300)}).Append(nil, codec.V311)
	tests := []struct {
		name    string
		stream  []byte
		packets int
		want    error
	}{
		{"empty stream", nil, 0, io.EOF},
		{"after one packet", ping, 1, io.EOF},
		{"after two packets", append(bytes.Clone(ping), pub...), 2, io.EOF},
		{"inside the first byte", []byte{0xC0}, 0, io.ErrUnexpectedEOF},
		{"inside the remaining length", []byte{0x30, 0x80}, 0, io.ErrUnexpectedEOF},
		{"inside a four-byte remaining length", []byte{0x30, 0x80, 0x80, 0x80}, 0, io.ErrUnexpectedEOF},
		{"inside the body", pub[:len(pub)-1], 0, io.ErrUnexpectedEOF},
		{"inside the second packet", append(bytes.Clone(ping), pub[:3]...), 1, io.ErrUnexpectedEOF},
		{"inside a body larger than the buffer", big[:200], 0, io.ErrUnexpectedEOF},
		{"after a body larger than the buffer", big, 1, io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, src := range []io.Reader{bytes.NewReader(tt.stream), iotest.OneByteReader(bytes.NewReader(tt.stream))} {
				r := newReader(src, 16, codec.V311)
				for i := range tt.packets {
					_, err := r.ReadPacket()
					checkErr(t, fmt.Sprintf("packet %d", i), err, nil)
				}
				_, err := r.ReadPacket()
				checkErr(t, "ReadPacket", err, tt.want)
				if tt.want != io.EOF && errors.Is(err, io.EOF) {
					t.Errorf("ReadPacket: got io.EOF mid-packet, want io.ErrUnexpectedEOF")
				}
			}
		})
	}
}

// TestReaderSourceError checks that an error from the stream other than EOF
// (a deadline, a reset) comes back as is, whether it arrives in the header,
// in a buffered body or in a large one.
func TestReaderSourceError(t *testing.T) {
	big := (&codec.Publish{Topic: []byte("t"), Payload: make([]byte, 300)}).Append(nil, codec.V311)
	pub := codectest.Get("publish/v4/qos1").Raw
	for _, cut := range [][]byte{pub[:1], pub[:5], big[:100]} {
		src := io.MultiReader(bytes.NewReader(cut), iotest.ErrReader(iotest.ErrTimeout))
		r := newReader(src, 16, codec.V311)
		_, err := r.ReadPacket()
		if !errors.Is(err, iotest.ErrTimeout) {
			t.Errorf("after %d bytes: got error %v, want %v", len(cut), err, iotest.ErrTimeout)
		}
	}
}

func TestReaderAuthNeedsV5(t *testing.T) {
	raw := codectest.Get("auth/v5/continue").Raw
	for _, v := range []byte{0, codec.V31, codec.V311, codec.V5} {
		t.Run(fmt.Sprintf("level-%d", v), func(t *testing.T) {
			// Only the header is supplied: the Reader must refuse from it.
			src := &headerOnly{hdr: raw[:2]}
			if v == codec.V5 {
				src = &headerOnly{hdr: raw}
			}
			r := codec.NewReader(bufio.NewReaderSize(src, 16), 0)
			r.Version = v
			p, err := r.ReadPacket()
			if v != codec.V5 {
				checkErr(t, "ReadPacket", err, codec.ErrAuthBeforeV5)
				if src.readsPast != 0 {
					t.Errorf("Reads past the header: got %d, want 0", src.readsPast)
				}
				// Decode agrees, from the header alone too.
				_, _, err = codec.Decode(raw[:2], v)
				checkErr(t, "Decode(header)", err, codec.ErrAuthBeforeV5)
				return
			}
			checkErr(t, "ReadPacket", err, nil)
			checkPacket(t, "ReadPacket", p, codectest.Get("auth/v5/continue").Packet)
		})
	}
}

func TestReaderBuffered(t *testing.T) {
	a, b := codectest.Get("publish/v4/qos1").Raw, codectest.Get("pingreq/v4").Raw
	r := newReader(bytes.NewReader(append(bytes.Clone(a), b...)), 4096, codec.V311)
	if n := r.Buffered(); n != 0 {
		t.Errorf("Buffered before reading: got %d, want 0", n)
	}
	if _, err := r.ReadPacket(); err != nil {
		t.Fatalf("ReadPacket: got error %v, want none", err)
	}
	if n := r.Buffered(); n != len(b) {
		t.Errorf("Buffered after the first packet: got %d, want %d", n, len(b))
	}
	if _, err := r.ReadPacket(); err != nil {
		t.Fatalf("ReadPacket: got error %v, want none", err)
	}
	if n := r.Buffered(); n != 0 {
		t.Errorf("Buffered after the last packet: got %d, want 0", n)
	}
}

// chunks returns its byte slices one per Read, as a socket delivers
// segments.
type chunks [][]byte

func (c *chunks) Read(p []byte) (int, error) {
	if len(*c) == 0 {
		return 0, io.EOF
	}
	n := copy(p, (*c)[0])
	(*c)[0] = (*c)[0][n:]
	if len((*c)[0]) == 0 {
		*c = (*c)[1:]
	}
	return n, nil
}

// TestReaderComplete: after the first packet of a read, Complete tells
// whether the next one is already whole in the buffer.
func TestReaderComplete(t *testing.T) {
	pub, ping := codectest.Get("publish/v4/qos1").Raw, codectest.Get("pingreq/v4").Raw
	big := (&codec.Publish{Topic: []byte("t"), Payload: make([]byte, 200)}).Append(nil, codec.V311)
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, tc := range []struct {
		name string
		read []byte // what the first Read returns after the first packet
		want bool
	}{
		{"nothing after it", nil, false},
		{"a whole packet", ping, true},
		{"two whole packets", cat(ping, pub), true},
		{"one byte of a header", pub[:1], false},
		{"a header without its body", pub[:2], false},
		{"all but the last byte", pub[:len(pub)-1], false},
		{"a remaining length cut inside", []byte{0x30, 0x80}, false},
		{"a reserved packet type", []byte{0x00, 0x00}, true},
		{"a packet larger than the buffer", big[:100], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := chunks{cat(pub, tc.read), []byte("rest")}
			r := codec.NewReader(bufio.NewReaderSize(&src, 128), 0)
			r.Version = codec.V311
			if r.Complete() {
				t.Fatal("Complete before the first read: got true")
			}
			if _, err := r.ReadPacket(); err != nil {
				t.Fatalf("ReadPacket: %v", err)
			}
			if got := r.Complete(); got != tc.want {
				t.Errorf("Complete with % x buffered: got %v, want %v", tc.read, got, tc.want)
			}
		})
	}
}

// TestReaderPacketReuse documents the aliasing contract: the Reader returns
// the same packet value for the same type, refilled by the next read.
func TestReaderPacketReuse(t *testing.T) {
	one := codectest.Get("publish/v5/qos1-properties")
	two := codectest.Get("publish/v5/qos0")
	r := newReader(bytes.NewReader(append(bytes.Clone(one.Raw), two.Raw...)), 4096, codec.V5)
	p1, err := r.ReadPacket()
	checkErr(t, "first ReadPacket", err, nil)
	p2, err := r.ReadPacket()
	checkErr(t, "second ReadPacket", err, nil)
	if p1 != p2 {
		t.Errorf("ReadPacket returned a new *Publish for the second PUBLISH, want the reused one")
	}
	checkPacket(t, "second ReadPacket", p2, two.Packet)
}

func TestParseHeader(t *testing.T) {
	tests := []struct {
		raw       []byte
		typ       codec.Type
		flags     byte
		remaining int
		n         int
		err       error
	}{
		{[]byte{0x30, 0}, codec.PUBLISH, 0, 0, 2, nil},
		{[]byte{0x3B, 0x7F}, codec.PUBLISH, 0x0B, 127, 2, nil},
		{[]byte{0x82, 0x80, 0x01}, codec.SUBSCRIBE, 2, 128, 3, nil},
		{[]byte{0x30, 0xFF, 0x7F}, codec.PUBLISH, 0, 16383, 3, nil},
		{[]byte{0x30, 0x80, 0x80, 0x01}, codec.PUBLISH, 0, 16384, 4, nil},
		{[]byte{0x30, 0xFF, 0xFF, 0x7F}, codec.PUBLISH, 0, 2097151, 4, nil},
		{[]byte{0x30, 0x80, 0x80, 0x80, 0x01}, codec.PUBLISH, 0, 2097152, 5, nil},
		{[]byte{0x30, 0xFF, 0xFF, 0xFF, 0x7F, 0xAA}, codec.PUBLISH, 0, codec.MaxRemainingLength, 5, nil},
		{[]byte{0x30}, 0, 0, 0, 0, nil},
		{[]byte{0x30, 0xFF, 0xFF}, 0, 0, 0, 0, nil},
		{[]byte{0x00, 0x00}, 0, 0, 0, 0, codec.ErrReservedType},
		{[]byte{0x30, 0xFF, 0xFF, 0xFF, 0xFF}, 0, 0, 0, 0, codec.ErrVarintTooLong},
		{[]byte{0x30, 0x80, 0x00}, 0, 0, 0, 0, codec.ErrVarintNotMinimal},
		{[]byte{0x30, 0xFF, 0xFF, 0x80, 0x00}, 0, 0, 0, 0, codec.ErrVarintNotMinimal},
	}
	for _, tt := range tests {
		typ, flags, remaining, n, err := codec.ParseHeader(tt.raw)
		what := fmt.Sprintf("ParseHeader(% x)", tt.raw)
		checkErr(t, what, err, tt.err)
		if typ != tt.typ || flags != tt.flags || remaining != tt.remaining || n != tt.n {
			t.Errorf("%s: got %v %#x %d %d, want %v %#x %d %d", what, typ, flags, remaining, n, tt.typ, tt.flags, tt.remaining, tt.n)
		}
	}
}

func TestNewAndTypeString(t *testing.T) {
	for typ := codec.CONNECT; typ <= codec.AUTH; typ++ {
		p := codec.New(typ)
		if p == nil || p.Type() != typ {
			t.Errorf("New(%v): got %T, want a packet of that type", typ, p)
		}
	}
	if p := codec.New(0); p != nil {
		t.Errorf("New(0): got %T, want nil", p)
	}
	for typ, want := range map[codec.Type]string{codec.CONNECT: "CONNECT", codec.PUBREL: "PUBREL", codec.AUTH: "AUTH", 0: "RESERVED", 16: "Type(16)"} {
		if got := typ.String(); got != want {
			t.Errorf("Type(%d).String: got %q, want %q", byte(typ), got, want)
		}
	}
}

// TestPooledReaderRelease reads packets one Write at a time, releasing the
// buffer whenever nothing is buffered: every packet still arrives whole,
// bytes left in the buffer are kept, and Release costs no allocation.
func TestPooledReaderRelease(t *testing.T) {
	pool := &sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64) }}
	raw := codectest.BenchPublish(1, 16, false).Append(nil, codec.V311)
	var stream bytes.Buffer
	r := codec.NewPooledReader(&stream, pool, 0)
	r.Version = codec.V311
	for i := range 5 {
		stream.Write(raw)
		if i%2 == 1 {
			stream.Write(raw) // two packets in one read: Release must keep the second
		}
		for range 1 + i%2 {
			p, err := r.ReadPacket()
			if err != nil {
				t.Fatalf("read %d: ReadPacket: got error %v, want none", i, err)
			}
			if _, ok := p.(*codec.Publish); !ok {
				t.Fatalf("read %d: ReadPacket: got %T, want *codec.Publish", i, p)
			}
			r.Release()
		}
		if got := r.Buffered(); got != 0 {
			t.Fatalf("read %d: Buffered after Release: got %d, want 0", i, got)
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		stream.Write(raw)
		if _, err := r.ReadPacket(); err != nil {
			t.Fatalf("ReadPacket: got error %v, want none", err)
		}
		r.Release()
	})
	if allocs != 0 && !raceEnabled {
		t.Errorf("ReadPacket and Release: got %v allocations, want 0", allocs)
	}
	r.Close()
	if _, err := r.ReadPacket(); err == nil {
		t.Errorf("ReadPacket after Close: got no error, want one")
	}
}

// publishWithUserProps is an MQTT 5 QoS 0 PUBLISH to "t" with n empty user
// properties.
func publishWithUserProps(n int) []byte {
	p := &codec.Publish{Topic: []byte("t"), Payload: []byte("x")}
	p.Props.User = make([]codec.UserProperty, n)
	return p.Append(nil, codec.V5)
}

func TestReaderMaxUserProperties(t *testing.T) {
	tests := []struct {
		name  string
		max   int
		props int
		want  error
	}{
		{"under the bound", 8, 7, nil},
		{"at the bound", 8, 8, nil},
		{"one over", 8, 9, codec.ErrTooManyUserProperties},
		{"far over, a few KiB of pairs", 8, 2000, codec.ErrTooManyUserProperties},
		{"no bound", 0, 2000, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := codec.NewReader(bufio.NewReader(bytes.NewReader(publishWithUserProps(tt.props))), 0)
			r.Version = codec.V5
			r.MaxUserProperties = tt.max
			p, err := r.ReadPacket()
			if !errors.Is(err, tt.want) {
				t.Fatalf("ReadPacket error %v, want %v", err, tt.want)
			}
			if err == nil && len(p.(*codec.Publish).Props.User) != tt.props {
				t.Errorf("decoded %d user properties, want %d", len(p.(*codec.Publish).Props.User), tt.props)
			}
			var ce *codec.Error
			if err != nil && (!errors.As(err, &ce) || ce.Code != codec.QuotaExceeded) {
				t.Errorf("error %v does not carry Quota exceeded", err)
			}
		})
	}
}

// testBudget is a codec.Budget with a fixed size.
type testBudget struct {
	mu         sync.Mutex
	used, size int
	maxUsed    int
}

func (b *testBudget) Take(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.size {
		return false
	}
	b.used += n
	b.maxUsed = max(b.maxUsed, b.used)
	return true
}

func (b *testBudget) Give(n int) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

func TestReaderBudget(t *testing.T) {
	big := (&codec.Publish{Topic: []byte("t"), Payload: make([]byte, 10_000)}).Append(nil, codec.V311)
	small := (&codec.Publish{Topic: []byte("t"), Payload: []byte("x")}).Append(nil, codec.V311)
	t.Run("a large body takes from the budget and gives it back", func(t *testing.T) {
		b := &testBudget{size: 1 << 20}
		r := codec.NewReader(bufio.NewReaderSize(bytes.NewReader(append(bytes.Clone(big), small...)), 64), 0)
		r.Version = codec.V311
		r.SetBudget(b)
		if _, err := r.ReadPacket(); err != nil {
			t.Fatal(err)
		}
		if b.used < len(big)-64 {
			t.Errorf("budget in use %d after a %d-byte body", b.used, len(big))
		}
		r.SetBudget(nil)
		if b.used != 0 {
			t.Errorf("budget in use %d after SetBudget(nil), want 0", b.used)
		}
		if _, err := r.ReadPacket(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a body over the budget is refused", func(t *testing.T) {
		b := &testBudget{size: 4096}
		r := codec.NewReader(bufio.NewReaderSize(bytes.NewReader(big), 64), 0)
		r.Version = codec.V311
		r.SetBudget(b)
		if _, err := r.ReadPacket(); !errors.Is(err, codec.ErrBudget) {
			t.Fatalf("ReadPacket error %v, want ErrBudget", err)
		}
		r.Close()
		if b.used != 0 || b.maxUsed > b.size {
			t.Errorf("budget in use %d after Close (peak %d of %d)", b.used, b.maxUsed, b.size)
		}
	})
	t.Run("a body that fits the read buffer takes nothing", func(t *testing.T) {
		b := &testBudget{size: 0}
		r := codec.NewReader(bufio.NewReaderSize(bytes.NewReader(small), 64), 0)
		r.Version = codec.V311
		r.SetBudget(b)
		if _, err := r.ReadPacket(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestPooledReaderResumesAcrossRelease: a large body cut by ErrWouldBlock
// carries on after Release gave the buffer back, as a parked connection's
// reader does.
func TestPooledReaderResumesAcrossRelease(t *testing.T) {
	raw := (&codec.Publish{Topic: []byte("t"), Payload: bytes.Repeat([]byte("x"), 3000), QoS: 1, PacketID: 3}).Append(nil, codec.V311)
	pool := &sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64) }}
	src := &chunkReader{data: raw, sizes: []int{700}, block: true}
	r := codec.NewPooledReader(src, pool, 0)
	r.Version = codec.V311
	for i := 0; ; i++ {
		p, err := r.ReadPacket()
		if errors.Is(err, codec.ErrWouldBlock) {
			r.Release()
			if i > 100 {
				t.Fatal("no progress")
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := p.(*codec.Publish); len(got.Payload) != 3000 || got.PacketID != 3 {
			t.Fatalf("got %d bytes id %d", len(got.Payload), got.PacketID)
		}
		return
	}
}
