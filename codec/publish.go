package codec

// Publish is the PUBLISH packet (3.3). Topic and Payload alias the decoded
// buffer. PacketID is meaningful only for QoS 1 and 2.
type Publish struct {
	Dup      bool
	QoS      byte
	Retain   bool
	Topic    []byte
	PacketID uint16
	Props    Properties
	Payload  []byte
}

// Type implements Packet.
func (*Publish) Type() Type { return PUBLISH }

// bodyLen is the body size; pn is the size of the properties without their
// length prefix, which Append passes on so it is computed once.
func (p *Publish) bodyLen(v byte) (n, pn int) {
	n = 2 + len(p.Topic) + len(p.Payload)
	if p.QoS > 0 {
		n += 2
	}
	if v == V5 {
		pn = p.Props.bodyLen()
		n += varintLen(pn) + pn
	}
	return n, pn
}

// Len implements Packet.
func (p *Publish) Len(v byte) int { n, _ := p.bodyLen(v); return headerLen(n) + n }

// Flags returns the fixed-header flag nibble: DUP, QoS and RETAIN.
func (p *Publish) Flags() byte {
	f := p.QoS << 1
	if p.Dup {
		f |= 0x08
	}
	if p.Retain {
		f |= 0x01
	}
	return f
}

// Append implements Packet.
func (p *Publish) Append(dst []byte, v byte) []byte {
	n, pn := p.bodyLen(v)
	dst = appendHeader(dst, PUBLISH, p.Flags(), n)
	dst = appendBytes(dst, p.Topic)
	if p.QoS > 0 {
		dst = appendUint16(dst, p.PacketID)
	}
	if v == V5 {
		dst = p.Props.appendBody(appendVarint(dst, pn))
	}
	return append(dst, p.Payload...)
}

func (p *Publish) decode(flags byte, d *decoder, v byte) error {
	p.Dup = flags&0x08 != 0
	p.QoS = flags >> 1 & 0x03
	p.Retain = flags&0x01 != 0
	if p.QoS == 3 {
		return ErrBadQoS // [MQTT-3.3.1-4]
	}
	if p.Dup && p.QoS == 0 {
		return ErrDupQoS0 // [MQTT-3.3.1-2]
	}
	var err error
	if p.Topic, err = d.binary(); err != nil {
		return err
	}
	// Most topics are plain ASCII: one pass settles both the UTF-8 and the
	// wildcard rules. Otherwise check UTF-8 now and wildcards below, in the
	// order the rules are listed.
	plain := plainTopic(p.Topic)
	if !plain && !ValidUTF8(p.Topic) {
		return ErrBadUTF8
	}
	p.PacketID = 0
	if p.QoS > 0 {
		if p.PacketID, err = d.packetID(); err != nil {
			return err
		}
	}
	if v == V5 {
		if err := p.Props.decode(d, PUBLISH); err != nil {
			return err
		}
		if len(p.Topic) == 0 && !p.Props.Has(PropTopicAlias) {
			return ErrTopicNoAlias // [MQTT-3.3.4-4]
		}
		if len(p.Props.ResponseTopic) > 0 && ValidTopicName(p.Props.ResponseTopic) != nil {
			return ErrTopicWildcard // [MQTT-3.3.2-14]
		}
	} else {
		p.Props.Reset()
		if len(p.Topic) == 0 {
			return ErrTopicEmpty // [MQTT-4.7.3-1]
		}
	}
	if len(p.Topic) > 0 && !plain {
		if err := ValidTopicName(p.Topic); err != nil {
			return err // [MQTT-3.3.2-2]
		}
	}
	p.Payload = d.rest()
	return nil
}

// Ack is PUBACK, PUBREC, PUBREL or PUBCOMP (3.4–3.7): a packet identifier,
// and in MQTT 5 a reason code and properties. Kind says which.
type Ack struct {
	Kind       Type
	PacketID   uint16
	ReasonCode ReasonCode
	Props      Properties
}

// Type implements Packet.
func (a *Ack) Type() Type { return a.Kind }

// bodyLen follows the MQTT 5 shortening rules: the reason code and property
// length may be omitted when the code is Success and there are no properties
// [MQTT-3.4.2-1].
func (a *Ack) bodyLen(v byte) int {
	if v != V5 || a.ReasonCode == Success && a.Props.IsZero() {
		return 2
	}
	if a.Props.IsZero() {
		return 3
	}
	return 3 + a.Props.encLen()
}

// Len implements Packet.
func (a *Ack) Len(v byte) int { n := a.bodyLen(v); return headerLen(n) + n }

func (a *Ack) flags() byte {
	if a.Kind == PUBREL {
		return 0x02 // [MQTT-3.6.1-1]
	}
	return 0
}

// Append implements Packet.
func (a *Ack) Append(dst []byte, v byte) []byte {
	n := a.bodyLen(v)
	dst = appendUint16(appendHeader(dst, a.Kind, a.flags(), n), a.PacketID)
	if n >= 3 {
		dst = append(dst, byte(a.ReasonCode))
	}
	if n > 3 {
		dst = a.Props.appendTo(dst)
	}
	return dst
}

func (a *Ack) decode(flags byte, d *decoder, v byte) error {
	if flags != a.flags() {
		return ErrBadFlags // [MQTT-3.6.1-1] [MQTT-2.1.3-1]
	}
	var err error
	if a.PacketID, err = d.packetID(); err != nil {
		return err
	}
	a.ReasonCode = Success
	a.Props.Reset()
	if v == V5 && d.left() > 0 {
		rc, _ := d.byte()
		a.ReasonCode = ReasonCode(rc)
		set := &pubackCodes
		if a.Kind == PUBREL || a.Kind == PUBCOMP {
			set = &pubrelCodes
		}
		if !set.has(a.ReasonCode) {
			return ErrBadReasonCode
		}
		if d.left() > 0 {
			if err := a.Props.decode(d, a.Kind); err != nil {
				return err
			}
		}
	}
	if d.left() != 0 {
		return ErrTrailingBytes
	}
	return nil
}
