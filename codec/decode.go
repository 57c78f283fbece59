package codec

// ErrNeedMore is returned by Decode when buf holds only part of a packet.
var ErrNeedMore = malformed("incomplete packet")

// ErrAuthBeforeV5 reports an AUTH packet on a 3.1 or 3.1.1 connection, where
// packet type 15 is reserved.
var ErrAuthBeforeV5 = malformed("AUTH packet before MQTT 5 [MQTT-2.1.2]")

// ParseHeader reads the fixed header at the start of buf and returns the
// packet type, the flag nibble, the remaining length and the header's size.
// n is 0 with a nil error when buf ends inside the header.
func ParseHeader(buf []byte) (t Type, flags byte, remaining, n int, err error) {
	if len(buf) < 2 {
		return 0, 0, 0, 0, nil
	}
	t, flags = Type(buf[0]>>4), buf[0]&0x0f
	if t == 0 {
		return 0, 0, 0, 0, ErrReservedType
	}
	remaining, vn, err := readVarint(buf[1:])
	if err != nil || vn == 0 {
		return 0, 0, 0, 0, err
	}
	return t, flags, remaining, 1 + vn, nil
}

// New returns an empty packet of type t, or nil for the reserved type 0.
func New(t Type) Packet {
	switch t {
	case CONNECT:
		return &Connect{}
	case CONNACK:
		return &Connack{}
	case PUBLISH:
		return &Publish{}
	case PUBACK, PUBREC, PUBREL, PUBCOMP:
		return &Ack{Kind: t}
	case SUBSCRIBE:
		return &Subscribe{}
	case SUBACK:
		return &Suback{}
	case UNSUBSCRIBE:
		return &Unsubscribe{}
	case UNSUBACK:
		return &Unsuback{}
	case PINGREQ:
		return &Pingreq{}
	case PINGRESP:
		return &Pingresp{}
	case DISCONNECT:
		return &Disconnect{}
	case AUTH:
		return &Auth{}
	}
	return nil
}

// Decode decodes the first packet in buf for protocol level v (a CONNECT
// carries its own level, so v only matters for the packets after it) and
// returns it with the number of bytes it took. The packet aliases buf.
// When buf holds only part of a packet, Decode returns ErrNeedMore, unless
// the fixed header already settles it: an AUTH packet below MQTT 5 is
// refused with ErrAuthBeforeV5 as soon as its header is complete.
func Decode(buf []byte, v byte) (Packet, int, error) {
	t, flags, rl, hn, err := ParseHeader(buf)
	if err != nil {
		return nil, 0, err
	}
	if hn == 0 {
		return nil, 0, ErrNeedMore
	}
	// Refuse AUTH from its header, as Reader does, rather than asking for
	// the body of a packet that cannot be valid.
	if t == AUTH && v != V5 {
		return nil, 0, ErrAuthBeforeV5
	}
	if len(buf)-hn < rl {
		return nil, 0, ErrNeedMore
	}
	p := New(t)
	if err := p.decode(flags, &decoder{b: buf[hn : hn+rl : hn+rl]}, v); err != nil {
		return nil, 0, err
	}
	return p, hn + rl, nil
}
