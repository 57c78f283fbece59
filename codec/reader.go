package codec

import (
	"bufio"
	"errors"
	"io"
)

// keepLarge is the largest body buffer a Reader keeps between packets; a
// larger one (from one big packet) is dropped so an idle connection stays small.
const keepLarge = 64 << 10

// Reader reads MQTT packets from a stream.
//
// A packet that fits in the bufio.Reader's buffer is decoded in place from
// it; a larger one is read into a body buffer the Reader owns. Either way the
// returned packet, and every slice in it, is valid only until the next call
// to ReadPacket. The Reader reuses one packet value per type, so steady-state
// reading allocates nothing.
type Reader struct {
	br *bufio.Reader
	// MaxPacketSize bounds the whole packet (fixed header included); 0
	// means the protocol maximum. It is checked from the fixed header,
	// before the body is read or any memory is set aside for it.
	MaxPacketSize int
	// Version is the protocol level used to decode every packet but
	// CONNECT. A server sets it from the CONNECT it accepts; a client sets
	// it before reading. AUTH is refused with ErrAuthBeforeV5 unless
	// Version is V5, so before CONNECT (Version 0) it is an error too.
	Version byte

	large []byte

	connect     Connect
	connack     Connack
	publish     Publish
	ack         [4]Ack
	subscribe   Subscribe
	suback      Suback
	unsubscribe Unsubscribe
	unsuback    Unsuback
	pingreq     Pingreq
	pingresp    Pingresp
	disconnect  Disconnect
	auth        Auth
}

// NewReader returns a Reader over br. maxPacketSize is as in MaxPacketSize.
func NewReader(br *bufio.Reader, maxPacketSize int) *Reader {
	r := &Reader{br: br, MaxPacketSize: maxPacketSize}
	for i := range r.ack {
		r.ack[i].Kind = PUBACK + Type(i)
	}
	return r
}

// Buffered is the number of bytes read from the stream but not yet decoded;
// a server uses it to tell whether more packets are already waiting.
func (r *Reader) Buffered() int { return r.br.Buffered() }

func (r *Reader) packet(t Type) Packet {
	switch t {
	case CONNECT:
		return &r.connect
	case CONNACK:
		return &r.connack
	case PUBLISH:
		return &r.publish
	case PUBACK, PUBREC, PUBREL, PUBCOMP:
		return &r.ack[t-PUBACK]
	case SUBSCRIBE:
		return &r.subscribe
	case SUBACK:
		return &r.suback
	case UNSUBSCRIBE:
		return &r.unsubscribe
	case UNSUBACK:
		return &r.unsuback
	case PINGREQ:
		return &r.pingreq
	case PINGRESP:
		return &r.pingresp
	case DISCONNECT:
		return &r.disconnect
	case AUTH:
		return &r.auth
	}
	return nil
}

// ReadPacket reads and decodes the next packet. It returns io.EOF when the
// stream ends cleanly between packets, io.ErrUnexpectedEOF when it ends
// inside one, ErrPacketTooLarge without reading the body when the fixed
// header announces more than MaxPacketSize, and an *Error for any other
// violation. After an error the stream is out of step and must be closed.
func (r *Reader) ReadPacket() (Packet, error) {
	if cap(r.large) > keepLarge {
		r.large = nil
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
		var err error
		if body, err = r.readLarge(remaining); err != nil {
			return nil, err
		}
	}
	p := r.packet(t)
	if err := p.decode(flags, body, r.Version); err != nil {
		return nil, err
	}
	return p, nil
}

// readLarge reads a body bigger than the bufio buffer. The buffer grows as
// bytes arrive rather than by the announced length, so a peer that
// announces a huge packet and sends nothing costs nothing.
func (r *Reader) readLarge(n int) ([]byte, error) {
	buf := r.large[:0]
	for len(buf) < n {
		if len(buf) == cap(buf) {
			grow := min(n, max(2*cap(buf), r.br.Size()))
			nb := make([]byte, len(buf), grow)
			copy(nb, buf)
			buf = nb
		}
		m, err := io.ReadFull(r.br, buf[len(buf):min(cap(buf), n)])
		buf = buf[:len(buf)+m]
		if err != nil {
			return nil, unexpected(err)
		}
	}
	r.large = buf
	return buf, nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
