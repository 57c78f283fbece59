package codec

import (
	"bufio"
	"errors"
	"io"
	"sync"
)

// keepLarge is the largest body buffer a Reader keeps between packets; a
// larger one (from one big packet) is dropped so an idle connection stays small.
const keepLarge = 64 << 10

// packetSet is a Reader's packet values, one per type, made on first use:
// each holds a Properties, and most connections never read most types.
type packetSet struct {
	connect     *Connect
	connack     *Connack
	publish     *Publish
	ack         [4]*Ack
	subscribe   *Subscribe
	suback      *Suback
	unsubscribe *Unsubscribe
	unsuback    *Unsuback
	disconnect  *Disconnect
	auth        *Auth
}

// packetSets holds the sets pooled Readers give back on Release. A
// CONNECT value is never pooled: it is read once per connection.
var packetSets = sync.Pool{New: func() any { return new(packetSet) }}

// Reader reads MQTT packets from a stream.
//
// A packet that fits in the bufio.Reader's buffer is decoded in place from
// it; a larger one is read into a body buffer the Reader owns. Either way the
// returned packet, and every slice in it, is valid only until the next call
// to ReadPacket. The Reader reuses one packet value per type, made the first
// time that type is read, so steady-state reading allocates nothing and a
// Reader that has read only CONNECT stays small.
//
// A Reader made by NewPooledReader takes its bufio.Reader from a pool and
// can give it back between packets (Release), so an idle connection holds
// no read buffer.
type Reader struct {
	br   *bufio.Reader // nil while released
	src  io.Reader     // pooled Readers: what br reads from
	pool *sync.Pool    // pooled Readers: of *bufio.Reader
	// MaxPacketSize bounds the whole packet (fixed header included); 0
	// means the protocol maximum. It is checked from the fixed header,
	// before the body is read or any memory is set aside for it.
	MaxPacketSize int
	// Version is the protocol level used to decode every packet but
	// CONNECT. A server sets it from the CONNECT it accepts; a client sets
	// it before reading. AUTH is refused with ErrAuthBeforeV5 unless
	// Version is V5, so before CONNECT (Version 0) it is an error too.
	Version byte
	// MaxUserProperties bounds the user properties of each property
	// section of a packet (0: no bound): a packet with more is refused
	// with ErrTooManyUserProperties before they are kept. Without it a
	// packet of a few KiB decodes into tens of KiB of pairs, which the
	// Reader's reused packet value would hold on to.
	MaxUserProperties int

	dec    decoder // the body being decoded: a field, so passing it allocates nothing
	budget Budget  // nil: none (SetBudget)
	large  []byte
	taken  int // bytes of large taken from budget
	// pending is a large body cut short by ErrWouldBlock, which the next
	// ReadPacket resumes: its header is consumed, large holds what came.
	// (n is an int32, a body is at most 256 MiB: a Reader per connection
	// fits the 160-byte size class.)
	pending struct {
		on    bool
		t     Type
		flags byte
		n     int32 // body length
	}

	// pk holds one packet value per type, each made on first use. A
	// pooled Reader borrows its set with its buffer and gives both back on
	// Release, so an idle connection keeps no packet values (a PUBLISH
	// with its Properties is a few hundred bytes).
	pk *packetSet
}

// Budget is memory shared by many Readers, such as all the connections
// that have not logged in yet: a Reader takes from it what a packet body
// larger than its buffer needs as the body grows, and gives it back when it
// drops the body. Take reports whether n more bytes fit. Both are called
// from the Reader's goroutine; a Budget is shared, so it must be safe for
// concurrent use.
type Budget interface {
	Take(n int) bool
	Give(n int)
}

// SetBudget makes the Reader take large bodies from b (nil: from no
// budget). Whatever the Reader held from its previous budget is given back
// and its large body buffer dropped.
func (r *Reader) SetBudget(b Budget) {
	r.dropLarge()
	r.budget = b
}

// dropLarge forgets the large body buffer and gives its bytes back.
func (r *Reader) dropLarge() {
	if r.budget != nil && r.taken > 0 {
		r.budget.Give(r.taken)
	}
	r.large, r.taken = nil, 0
}

// NewReader returns a Reader over br. maxPacketSize is as in MaxPacketSize.
func NewReader(br *bufio.Reader, maxPacketSize int) *Reader {
	return &Reader{br: br, MaxPacketSize: maxPacketSize}
}

// NewPooledReader returns a Reader over src whose bufio.Reader comes from
// pool (whose New must return a *bufio.Reader) when ReadPacket needs one
// and goes back to it on Release. maxPacketSize is as in MaxPacketSize.
func NewPooledReader(src io.Reader, pool *sync.Pool, maxPacketSize int) *Reader {
	return &Reader{src: src, pool: pool, MaxPacketSize: maxPacketSize}
}

// Buffered is the number of bytes read from the stream but not yet decoded;
// a server uses it to tell whether more packets are already waiting.
func (r *Reader) Buffered() int {
	if r.br == nil {
		return 0
	}
	return r.br.Buffered()
}

// Complete reports whether a whole packet is buffered, so that ReadPacket
// returns without reading from the stream. A server uses it to find the
// end of a burst: what it owes its peers is written before a read that may
// wait, not after it.
func (r *Reader) Complete() bool {
	b := r.Buffered()
	if b == 0 || r.pending.on {
		return false // a large body in progress is rarely whole: asking costs more than it saves
	}
	hdr, _ := r.br.Peek(min(b, 5)) // buffered: no read
	_, _, remaining, hn, err := ParseHeader(hdr)
	if err != nil {
		return true // ReadPacket reports it without reading
	}
	return hn > 0 && hn+remaining <= b
}

// Release gives a pooled Reader's buffer back to its pool when no byte is
// waiting in it, so a connection that waits for its next packet holds no
// buffer; ReadPacket takes one again. The packet last returned, and every
// slice in it, is invalid after Release. It does nothing for a Reader made
// by NewReader or with bytes buffered.
func (r *Reader) Release() {
	if r.pool == nil || r.br == nil || r.br.Buffered() > 0 || r.pending.on {
		return
	}
	r.br.Reset(nil) // keeps the buffer, drops the reference to src
	r.pool.Put(r.br)
	r.br = nil
	r.putPackets()
}

// putPackets gives a pooled Reader's packet values back.
func (r *Reader) putPackets() {
	if r.pk == nil || r.pool == nil {
		return
	}
	r.pk.connect = nil
	packetSets.Put(r.pk)
	r.pk = nil
}

// Close releases a pooled Reader's buffer even with bytes in it: the
// stream is done with. The Reader must not be used afterwards.
func (r *Reader) Close() {
	r.dropLarge()
	r.putPackets()
	if r.pool == nil || r.br == nil {
		return
	}
	r.br.Reset(nil)
	r.pool.Put(r.br)
	r.br, r.pool = nil, nil
}

// DropConnect forgets the Reader's CONNECT value, which a server reads
// once per connection, and the body buffer a large CONNECT needed, so a
// long-lived connection keeps neither; a later CONNECT (a protocol error)
// makes a new one. The CONNECT last returned is invalid after it.
func (r *Reader) DropConnect() {
	if r.pk != nil {
		r.pk.connect = nil
	}
	r.dropLarge()
}

func lazy[T any](p **T) *T {
	if *p == nil {
		*p = new(T)
	}
	return *p
}

// pingreq and pingresp have no fields: one value serves every Reader.
var (
	pingreq  Pingreq
	pingresp Pingresp
)

func (r *Reader) packet(t Type) Packet {
	if r.pk == nil {
		if r.pool != nil {
			r.pk = packetSets.Get().(*packetSet)
		} else {
			r.pk = new(packetSet)
		}
	}
	return r.pk.packet(t)
}

func (r *packetSet) packet(t Type) Packet {
	switch t {
	case CONNECT:
		return lazy(&r.connect)
	case CONNACK:
		return lazy(&r.connack)
	case PUBLISH:
		return lazy(&r.publish)
	case PUBACK, PUBREC, PUBREL, PUBCOMP:
		a := r.ack[t-PUBACK]
		if a == nil {
			a = &Ack{Kind: t}
			r.ack[t-PUBACK] = a
		}
		return a
	case SUBSCRIBE:
		return lazy(&r.subscribe)
	case SUBACK:
		return lazy(&r.suback)
	case UNSUBSCRIBE:
		return lazy(&r.unsubscribe)
	case UNSUBACK:
		return lazy(&r.unsuback)
	case PINGREQ:
		return &pingreq
	case PINGRESP:
		return &pingresp
	case DISCONNECT:
		return lazy(&r.disconnect)
	case AUTH:
		return lazy(&r.auth)
	}
	return nil
}

// ErrWouldBlock is what a non-blocking source returns from Read when it
// has no bytes now (it may wrap it). ReadPacket passes it on with nothing
// lost: bytes already read stay buffered, a large body read so far stays
// in the Reader, and the next ReadPacket carries on where this one
// stopped. It is the only error after which the Reader may be used again.
var ErrWouldBlock = errors.New("codec: no bytes available yet")

// ReadPacket reads and decodes the next packet. It returns io.EOF when the
// stream ends cleanly between packets, io.ErrUnexpectedEOF when it ends
// inside one, ErrPacketTooLarge without reading the body when the fixed
// header announces more than MaxPacketSize, an error wrapping
// ErrWouldBlock when a non-blocking source has no more bytes yet (call
// again once it has), and an *Error for any other violation. After any
// other error the stream is out of step and must be closed.
func (r *Reader) ReadPacket() (Packet, error) {
	if r.br == nil {
		if r.pool == nil {
			return nil, errClosed
		}
		r.br = r.pool.Get().(*bufio.Reader)
		r.br.Reset(r.src)
	}
	if r.pending.on {
		return r.resumeLarge()
	}
	if cap(r.large) > keepLarge {
		r.dropLarge()
	}
	var (
		t         Type
		flags     byte
		remaining int
		hn        int
	)
	// Peek at what is already buffered (up to the longest header) so the
	// common case parses the header once; ask for more only when it is cut.
	want := 2
	if b := r.br.Buffered(); b > want {
		want = min(b, 5)
	}
	for ; hn == 0; want++ {
		hdr, err := r.br.Peek(want)
		if err != nil {
			if err == io.EOF && len(hdr) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if t, flags, remaining, hn, err = ParseHeader(hdr); err != nil {
			return nil, err
		}
	}
	total := hn + remaining
	limit := r.MaxPacketSize
	if limit <= 0 {
		limit = MaxPacketSize
	}
	if total > limit {
		return nil, ErrPacketTooLarge
	}
	if t == AUTH && r.Version != V5 {
		return nil, ErrAuthBeforeV5 // like Decode: before CONNECT the level is unknown, and AUTH never comes first
	}
	var body []byte
	if total <= r.br.Size() {
		buf, err := r.br.Peek(total)
		if err != nil {
			return nil, unexpected(err)
		}
		body = buf[hn:total:total]
		_, _ = r.br.Discard(total) // cannot fail: the bytes are buffered
	} else {
		_, _ = r.br.Discard(hn)
		r.large = r.large[:0]
		r.pending.t, r.pending.flags, r.pending.n = t, flags, int32(remaining)
		return r.resumeLarge()
	}
	return r.decode(t, flags, body)
}

// resumeLarge reads (on) the large body of r.pending and decodes it.
func (r *Reader) resumeLarge() (Packet, error) {
	body, err := r.readLarge(int(r.pending.n))
	if err != nil {
		r.pending.on = errors.Is(err, ErrWouldBlock)
		return nil, err
	}
	r.pending.on = false
	return r.decode(r.pending.t, r.pending.flags, body)
}

// decode fills the Reader's packet value of type t from body.
func (r *Reader) decode(t Type, flags byte, body []byte) (Packet, error) {
	p := r.packet(t)
	r.dec = decoder{b: body, maxUser: r.MaxUserProperties}
	if err := p.decode(flags, &r.dec, r.Version); err != nil {
		return nil, err
	}
	return p, nil
}

// readLarge reads a body bigger than the bufio buffer into r.large, after
// what it already holds. The buffer grows as bytes arrive rather than by
// the announced length, so a peer that announces a huge packet and sends
// nothing costs nothing.
func (r *Reader) readLarge(n int) ([]byte, error) {
	buf := r.large
	for len(buf) < n {
		if len(buf) == cap(buf) {
			grow := min(n, max(2*cap(buf), r.br.Size()))
			if n <= keepLarge {
				// Small enough to keep: the whole body at once, rather than
				// the garbage of doubling up to it.
				grow = n
			}
			if r.budget != nil {
				if !r.budget.Take(grow - r.taken) {
					return nil, ErrBudget
				}
				r.taken = grow
			}
			nb := make([]byte, len(buf), grow)
			copy(nb, buf)
			buf = nb
		}
		m, err := io.ReadFull(r.br, buf[len(buf):min(cap(buf), n)])
		buf = buf[:len(buf)+m]
		if err != nil {
			r.large = buf // what came so far, for a resume after ErrWouldBlock
			return nil, unexpected(err)
		}
	}
	r.large = buf
	return buf, nil
}

var errClosed = errors.New("codec: ReadPacket after Close")

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
