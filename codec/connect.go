package codec

import "bytes"

var (
	nameMQTT   = []byte("MQTT")
	nameMQIsdp = []byte("MQIsdp")
)

// BridgeBit is the bit Mosquitto's bridges add to the protocol level of an
// MQTT 3.1 or 3.1.1 CONNECT (levels 0x83 and 0x84, its try_private
// option): the client is a bridge, and the server should not send it back
// what it published and should keep the retain flag of what it forwards —
// what No Local and Retain As Published ask for in MQTT 5.
const BridgeBit = 0x80

// Connect is the CONNECT packet (3.1).
type Connect struct {
	ProtocolVersion byte // V31, V311 or V5
	// Bridge is set when the protocol level carries BridgeBit (3.1 and
	// 3.1.1 only); ProtocolVersion is then the level without it.
	Bridge     bool
	CleanStart bool // Clean Session in 3.1 / 3.1.1
	KeepAlive  uint16
	Props      Properties
	ClientID   []byte

	WillFlag    bool
	WillQoS     byte
	WillRetain  bool
	WillProps   Properties
	WillTopic   []byte
	WillPayload []byte

	UsernameFlag bool
	Username     []byte
	PasswordFlag bool
	Password     []byte
}

// Type implements Packet.
func (*Connect) Type() Type { return CONNECT }

// protoName is the protocol name for the packet's own version; CONNECT
// carries its version, so the v argument of Len and Append is ignored.
func (c *Connect) protoName() []byte {
	if c.ProtocolVersion == V31 {
		return nameMQIsdp
	}
	return nameMQTT
}

func (c *Connect) bodyLen() int {
	n := 2 + len(c.protoName()) + 1 + 1 + 2 + 2 + len(c.ClientID)
	v5 := c.ProtocolVersion == V5
	if v5 {
		n += c.Props.encLen()
	}
	if c.WillFlag {
		if v5 {
			n += c.WillProps.encLen()
		}
		n += 4 + len(c.WillTopic) + len(c.WillPayload)
	}
	if c.UsernameFlag {
		n += 2 + len(c.Username)
	}
	if c.PasswordFlag {
		n += 2 + len(c.Password)
	}
	return n
}

// Len implements Packet.
func (c *Connect) Len(byte) int { n := c.bodyLen(); return headerLen(n) + n }

// Append implements Packet.
func (c *Connect) Append(dst []byte, _ byte) []byte {
	dst = appendHeader(dst, CONNECT, 0, c.bodyLen())
	dst = appendBytes(dst, c.protoName())
	var flags byte
	if c.CleanStart {
		flags |= 0x02
	}
	if c.WillFlag {
		flags |= 0x04 | c.WillQoS<<3
		if c.WillRetain {
			flags |= 0x20
		}
	}
	if c.PasswordFlag {
		flags |= 0x40
	}
	if c.UsernameFlag {
		flags |= 0x80
	}
	level := c.ProtocolVersion
	if c.Bridge && level != V5 {
		level |= BridgeBit
	}
	dst = appendUint16(append(dst, level, flags), c.KeepAlive)
	v5 := c.ProtocolVersion == V5
	if v5 {
		dst = c.Props.appendTo(dst)
	}
	dst = appendBytes(dst, c.ClientID)
	if c.WillFlag {
		if v5 {
			dst = c.WillProps.appendTo(dst)
		}
		dst = appendBytes(appendBytes(dst, c.WillTopic), c.WillPayload)
	}
	if c.UsernameFlag {
		dst = appendBytes(dst, c.Username)
	}
	if c.PasswordFlag {
		dst = appendBytes(dst, c.Password)
	}
	return dst
}

func (c *Connect) decode(flags byte, d *decoder, _ byte) error {
	if flags != 0 {
		return ErrBadFlags
	}
	name, err := d.binary()
	if err != nil {
		return err
	}
	level, err := d.byte()
	if err != nil {
		return err
	}
	// Mosquitto's bridges mark 3.1 and 3.1.1 CONNECTs with BridgeBit; MQTT
	// 5 has No Local instead, so 0x85 stays an unknown level.
	c.Bridge = level&BridgeBit != 0 && level&^BridgeBit != V5
	if c.Bridge {
		level &^= BridgeBit
	}
	switch {
	case bytes.Equal(name, nameMQTT):
		if level != V311 && level != V5 {
			return ErrBadProtocolVersion // [MQTT-3.1.2-2]
		}
	case bytes.Equal(name, nameMQIsdp):
		if level != V31 {
			return ErrBadProtocolVersion
		}
	default:
		return ErrBadProtocolName // [MQTT-3.1.2-1]
	}
	c.ProtocolVersion = level
	cf, err := d.byte()
	if err != nil {
		return err
	}
	if cf&0x01 != 0 {
		return ErrConnectReserved // [MQTT-3.1.2-3]
	}
	c.CleanStart = cf&0x02 != 0
	c.WillFlag = cf&0x04 != 0
	c.WillQoS = cf >> 3 & 0x03
	c.WillRetain = cf&0x20 != 0
	c.PasswordFlag = cf&0x40 != 0
	c.UsernameFlag = cf&0x80 != 0
	if !c.WillFlag && (c.WillQoS != 0 || c.WillRetain) {
		return ErrWillFlags // [MQTT-3.1.2-11] [MQTT-3.1.2-13] [MQTT-3.1.2-15]
	}
	if c.WillQoS == 3 {
		return ErrWillQoS // [MQTT-3.1.2-14]
	}
	if level != V5 && c.PasswordFlag && !c.UsernameFlag {
		return ErrPasswordNoUser // [MQTT-3.1.2-22]
	}
	if c.KeepAlive, err = d.uint16(); err != nil {
		return err
	}
	v5 := level == V5
	if v5 {
		if err := c.Props.decode(d, CONNECT); err != nil {
			return err
		}
	} else {
		c.Props.Reset()
	}
	if c.ClientID, err = d.string(); err != nil { // [MQTT-3.1.3-4]
		return err
	}
	c.WillProps.Reset()
	c.WillTopic, c.WillPayload = nil, nil
	if c.WillFlag {
		if v5 {
			if err := c.WillProps.decode(d, willProps); err != nil {
				return err
			}
		}
		if c.WillTopic, err = d.string(); err != nil {
			return err
		}
		if err := ValidTopicName(c.WillTopic); err != nil {
			return err // [MQTT-3.1.3-11]
		}
		if c.WillPayload, err = d.binary(); err != nil {
			return err
		}
	}
	c.Username, c.Password = nil, nil
	if c.UsernameFlag {
		if c.Username, err = d.string(); err != nil { // [MQTT-3.1.3-11]
			return err
		}
	}
	if c.PasswordFlag {
		if c.Password, err = d.binary(); err != nil {
			return err
		}
	}
	if d.left() != 0 {
		return ErrTrailingBytes
	}
	return nil
}

// Connack is the CONNACK packet (3.2). ReasonCode uses the MQTT 5 values for
// every version; for 3.1 and 3.1.1 it is mapped to the return code with
// ConnackCodeV3.
type Connack struct {
	SessionPresent bool
	ReasonCode     ReasonCode
	Props          Properties
}

// Type implements Packet.
func (*Connack) Type() Type { return CONNACK }

func (c *Connack) bodyLen(v byte) int {
	if v == V5 {
		return 2 + c.Props.encLen()
	}
	return 2
}

// Len implements Packet.
func (c *Connack) Len(v byte) int { n := c.bodyLen(v); return headerLen(n) + n }

// Append implements Packet.
func (c *Connack) Append(dst []byte, v byte) []byte {
	dst = appendHeader(dst, CONNACK, 0, c.bodyLen(v))
	var sp byte
	if c.SessionPresent && v != V31 { // 3.1 has no Session Present: the byte is reserved
		sp = 1
	}
	if v != V5 {
		return append(dst, sp, ConnackCodeV3(c.ReasonCode))
	}
	return c.Props.appendTo(append(dst, sp, byte(c.ReasonCode)))
}

func (c *Connack) decode(flags byte, d *decoder, v byte) error {
	if flags != 0 {
		return ErrBadFlags
	}
	af, err := d.byte()
	if err != nil {
		return err
	}
	if af&0xfe != 0 {
		return ErrConnackFlags // [MQTT-3.2.2-1]
	}
	c.SessionPresent = af&1 != 0 && v != V31 // reserved in 3.1
	rc, err := d.byte()
	if err != nil {
		return err
	}
	if v == V5 {
		c.ReasonCode = ReasonCode(rc)
		if !connackCodes.has(c.ReasonCode) {
			return ErrBadReasonCode
		}
		if err := c.Props.decode(d, CONNACK); err != nil {
			return err
		}
	} else {
		if c.ReasonCode, err = connackCodeFromV3(rc); err != nil {
			return err
		}
		c.Props.Reset()
	}
	if d.left() != 0 {
		return ErrTrailingBytes
	}
	return nil
}
