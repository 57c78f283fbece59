package codec

// Pingreq is the PINGREQ packet (3.12).
type Pingreq struct{}

// Pingresp is the PINGRESP packet (3.13).
type Pingresp struct{}

// Type implements Packet.
func (*Pingreq) Type() Type { return PINGREQ }

// Len implements Packet.
func (*Pingreq) Len(byte) int { return 2 }

// Append implements Packet.
func (*Pingreq) Append(dst []byte, _ byte) []byte { return append(dst, byte(PINGREQ)<<4, 0) }

func (*Pingreq) decode(flags byte, d *decoder, _ byte) error { return emptyBody(flags, d.b) }

// Type implements Packet.
func (*Pingresp) Type() Type { return PINGRESP }

// Len implements Packet.
func (*Pingresp) Len(byte) int { return 2 }

// Append implements Packet.
func (*Pingresp) Append(dst []byte, _ byte) []byte { return append(dst, byte(PINGRESP)<<4, 0) }

func (*Pingresp) decode(flags byte, d *decoder, _ byte) error { return emptyBody(flags, d.b) }

func emptyBody(flags byte, body []byte) error {
	if flags != 0 {
		return ErrBadFlags
	}
	if len(body) != 0 {
		return ErrTrailingBytes
	}
	return nil
}

// Disconnect is the DISCONNECT packet (3.14). In 3.1 and 3.1.1 it has no
// body; ReasonCode and Props are MQTT 5 only.
type Disconnect struct {
	ReasonCode ReasonCode
	Props      Properties
}

// Auth is the AUTH packet (3.15), MQTT 5 only.
type Auth struct {
	ReasonCode ReasonCode
	Props      Properties
}

// Type implements Packet.
func (*Disconnect) Type() Type { return DISCONNECT }

// Len implements Packet.
func (p *Disconnect) Len(v byte) int { return reasonPropsLen(p.ReasonCode, &p.Props, v) }

// Append implements Packet.
func (p *Disconnect) Append(dst []byte, v byte) []byte {
	return appendReasonProps(dst, DISCONNECT, p.ReasonCode, &p.Props, v)
}

func (p *Disconnect) decode(flags byte, d *decoder, v byte) error {
	return decodeReasonProps(flags, d, v, DISCONNECT, &disconnectCodes, &p.ReasonCode, &p.Props)
}

// Type implements Packet.
func (*Auth) Type() Type { return AUTH }

// Len implements Packet.
func (p *Auth) Len(v byte) int { return reasonPropsLen(p.ReasonCode, &p.Props, v) }

// Append implements Packet.
func (p *Auth) Append(dst []byte, v byte) []byte {
	return appendReasonProps(dst, AUTH, p.ReasonCode, &p.Props, v)
}

func (p *Auth) decode(flags byte, d *decoder, v byte) error {
	return decodeReasonProps(flags, d, v, AUTH, &authCodes, &p.ReasonCode, &p.Props)
}

// DISCONNECT and AUTH share a body: an optional reason code and optional
// properties, both omitted when the code is Success (Normal disconnection)
// and there are no properties [MQTT-3.14.2-1] (3.15.2.1).
func reasonPropsBodyLen(rc ReasonCode, p *Properties, v byte) int {
	if v != V5 || rc == Success && p.IsZero() {
		return 0
	}
	if p.IsZero() {
		return 1
	}
	return 1 + p.encLen()
}

func reasonPropsLen(rc ReasonCode, p *Properties, v byte) int {
	n := reasonPropsBodyLen(rc, p, v)
	return headerLen(n) + n
}

func appendReasonProps(dst []byte, t Type, rc ReasonCode, p *Properties, v byte) []byte {
	n := reasonPropsBodyLen(rc, p, v)
	dst = appendHeader(dst, t, 0, n)
	if n >= 1 {
		dst = append(dst, byte(rc))
	}
	if n > 1 {
		dst = p.appendTo(dst)
	}
	return dst
}

func decodeReasonProps(flags byte, d *decoder, v byte, t Type, codes *reasonSet, rc *ReasonCode, p *Properties) error {
	if flags != 0 {
		return ErrBadFlags // [MQTT-3.14.1-1]
	}
	*rc = Success
	p.Reset()
	if v != V5 {
		if d.left() != 0 {
			return ErrTrailingBytes
		}
		return nil
	}
	if d.left() > 0 {
		c, _ := d.byte()
		*rc = ReasonCode(c)
		if !codes.has(*rc) {
			return ErrBadReasonCode
		}
	}
	if d.left() > 0 {
		if err := p.decode(d, t); err != nil {
			return err
		}
	}
	if d.left() != 0 {
		return ErrTrailingBytes
	}
	return nil
}
