package codec

import (
	"encoding/binary"
	"fmt"
)

// Type is an MQTT control packet type, the high nibble of the first byte.
type Type byte

// Control packet types [MQTT-2.1.2].
const (
	CONNECT     Type = 1
	CONNACK     Type = 2
	PUBLISH     Type = 3
	PUBACK      Type = 4
	PUBREC      Type = 5
	PUBREL      Type = 6
	PUBCOMP     Type = 7
	SUBSCRIBE   Type = 8
	SUBACK      Type = 9
	UNSUBSCRIBE Type = 10
	UNSUBACK    Type = 11
	PINGREQ     Type = 12
	PINGRESP    Type = 13
	DISCONNECT  Type = 14
	AUTH        Type = 15
)

var typeNames = [...]string{"RESERVED", "CONNECT", "CONNACK", "PUBLISH", "PUBACK", "PUBREC", "PUBREL",
	"PUBCOMP", "SUBSCRIBE", "SUBACK", "UNSUBSCRIBE", "UNSUBACK", "PINGREQ", "PINGRESP", "DISCONNECT", "AUTH"}

func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", byte(t))
}

// Protocol levels, as carried in CONNECT.
const (
	V31  byte = 3 // MQTT 3.1, protocol name "MQIsdp"
	V311 byte = 4 // MQTT 3.1.1, protocol name "MQTT"
	V5   byte = 5 // MQTT 5.0, protocol name "MQTT"
)

// MaxRemainingLength is the largest value four bytes of variable byte
// integer can hold [MQTT-1.5.5].
const MaxRemainingLength = 268435455

// MaxPacketSize is the largest possible MQTT packet: fixed header plus the
// maximum remaining length.
const MaxPacketSize = 1 + 4 + MaxRemainingLength

// Packet is any MQTT control packet.
type Packet interface {
	// Type is the control packet type.
	Type() Type
	// Len is the exact number of bytes Append writes for protocol level v.
	Len(v byte) int
	// Append appends the encoded packet for protocol level v to dst.
	Append(dst []byte, v byte) []byte
	// decode fills the packet from the fixed-header flags and the body
	// (d.b, the bytes after the remaining length), for protocol level v.
	decode(flags byte, d *decoder, v byte) error
}

// varintLen is the number of bytes needed to encode n as a variable byte integer.
func varintLen(n int) int {
	switch {
	case n < 128:
		return 1
	case n < 16384:
		return 2
	case n < 2097152:
		return 3
	default:
		return 4
	}
}

// appendVarint appends n as a variable byte integer. n must not exceed
// MaxRemainingLength.
func appendVarint(dst []byte, n int) []byte {
	for n >= 128 {
		dst = append(dst, byte(n)|0x80)
		n >>= 7
	}
	return append(dst, byte(n))
}

// readVarint decodes a variable byte integer at the start of b and returns
// the value and the number of bytes it took. n is 0 when b ends before the
// integer does; err is set when the integer is longer than four bytes or
// not minimally encoded [MQTT-1.5.5-1].
func readVarint(b []byte) (v, n int, err error) {
	shift := 0
	for i := 0; i < 4; i++ {
		if i >= len(b) {
			return 0, 0, nil
		}
		c := b[i]
		v |= int(c&0x7f) << shift
		if c&0x80 == 0 {
			if c == 0 && i > 0 {
				return 0, 0, ErrVarintNotMinimal
			}
			return v, i + 1, nil
		}
		shift += 7
	}
	return 0, 0, ErrVarintTooLong
}

// headerLen is the fixed header size for a body of n bytes.
func headerLen(n int) int { return 1 + varintLen(n) }

func appendHeader(dst []byte, t Type, flags byte, body int) []byte {
	return appendVarint(append(dst, byte(t)<<4|flags), body)
}

func appendUint16(dst []byte, n uint16) []byte { return append(dst, byte(n>>8), byte(n)) }

func appendUint32(dst []byte, n uint32) []byte {
	return append(dst, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

// appendBytes appends a two-byte length prefix and b (UTF-8 string or binary data).
func appendBytes(dst, b []byte) []byte {
	return append(appendUint16(dst, uint16(len(b))), b...)
}

// decoder walks a packet body. Every read checks bounds, so a truncated
// body is reported as Malformed Packet and never read past.
type decoder struct {
	b   []byte
	off int
	// maxUser bounds the user properties of one property section (0: no
	// bound), so a packet cannot make its decoded value hold far more
	// memory than its bytes.
	maxUser int
}

func (d *decoder) left() int { return len(d.b) - d.off }

func (d *decoder) byte() (byte, error) {
	if d.off >= len(d.b) {
		return 0, ErrShortBuffer
	}
	c := d.b[d.off]
	d.off++
	return c, nil
}

func (d *decoder) uint16() (uint16, error) {
	if d.left() < 2 {
		return 0, ErrShortBuffer
	}
	n := binary.BigEndian.Uint16(d.b[d.off:])
	d.off += 2
	return n, nil
}

func (d *decoder) uint32() (uint32, error) {
	if d.left() < 4 {
		return 0, ErrShortBuffer
	}
	n := binary.BigEndian.Uint32(d.b[d.off:])
	d.off += 4
	return n, nil
}

func (d *decoder) varint() (int, error) {
	v, n, err := readVarint(d.b[d.off:])
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, ErrShortBuffer
	}
	d.off += n
	return v, nil
}

// binary reads two-byte-length-prefixed data. The result aliases the body and
// is nil when empty, so a decoded empty field compares equal to an unset one.
func (d *decoder) binary() ([]byte, error) {
	n, err := d.uint16()
	if err != nil {
		return nil, err
	}
	if d.left() < int(n) {
		return nil, ErrShortBuffer
	}
	if n == 0 {
		return nil, nil
	}
	b := d.b[d.off : d.off+int(n) : d.off+int(n)]
	d.off += int(n)
	return b, nil
}

// string reads a UTF-8 encoded string and checks it is well formed [MQTT-1.5.4-1] [MQTT-1.5.4-2].
func (d *decoder) string() ([]byte, error) {
	b, err := d.binary()
	if err != nil {
		return nil, err
	}
	if !ValidUTF8(b) {
		return nil, ErrBadUTF8
	}
	return b, nil
}

// rest returns the remaining body bytes; nil when none are left.
func (d *decoder) rest() []byte {
	if d.off >= len(d.b) {
		return nil
	}
	b := d.b[d.off:len(d.b):len(d.b)]
	d.off = len(d.b)
	return b
}

// packetID reads a packet identifier, which must be non-zero [MQTT-2.2.1-3] (3.1.1: [MQTT-2.3.1-1]).
func (d *decoder) packetID() (uint16, error) {
	id, err := d.uint16()
	if err != nil {
		return 0, err
	}
	if id == 0 {
		return 0, ErrZeroPacketID
	}
	return id, nil
}
