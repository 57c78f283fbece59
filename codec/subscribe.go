package codec

// Subscription is one topic filter of a SUBSCRIBE with its options (3.8.3.1).
type Subscription struct {
	Filter            []byte
	QoS               byte
	NoLocal           bool // MQTT 5
	RetainAsPublished bool // MQTT 5
	RetainHandling    byte // MQTT 5: 0 send on subscribe, 1 only if new, 2 never
}

func (s *Subscription) options(v byte) byte {
	o := s.QoS
	if v == V5 {
		if s.NoLocal {
			o |= 0x04
		}
		if s.RetainAsPublished {
			o |= 0x08
		}
		o |= s.RetainHandling << 4
	}
	return o
}

// Subscribe is the SUBSCRIBE packet (3.8).
type Subscribe struct {
	PacketID      uint16
	Props         Properties
	Subscriptions []Subscription
}

// Type implements Packet.
func (*Subscribe) Type() Type { return SUBSCRIBE }

func (s *Subscribe) bodyLen(v byte) int {
	n := 2
	if v == V5 {
		n += s.Props.encLen()
	}
	for i := range s.Subscriptions {
		n += 3 + len(s.Subscriptions[i].Filter)
	}
	return n
}

// Len implements Packet.
func (s *Subscribe) Len(v byte) int { n := s.bodyLen(v); return headerLen(n) + n }

// Append implements Packet.
func (s *Subscribe) Append(dst []byte, v byte) []byte {
	dst = appendUint16(appendHeader(dst, SUBSCRIBE, 0x02, s.bodyLen(v)), s.PacketID)
	if v == V5 {
		dst = s.Props.appendTo(dst)
	}
	for i := range s.Subscriptions {
		sub := &s.Subscriptions[i]
		dst = append(appendBytes(dst, sub.Filter), sub.options(v))
	}
	return dst
}

func (s *Subscribe) decode(flags byte, d *decoder, v byte) error {
	if flags != 0x02 {
		return ErrBadFlags // [MQTT-3.8.1-1]
	}
	var err error
	if s.PacketID, err = d.packetID(); err != nil {
		return err
	}
	if v == V5 {
		if err := s.Props.decode(d, SUBSCRIBE); err != nil {
			return err
		}
		if len(s.Props.SubscriptionIDs) > 1 {
			return ErrDuplicateProperty
		}
	} else {
		s.Props.Reset()
	}
	s.Subscriptions = s.Subscriptions[:0]
	for d.left() > 0 {
		f, err := d.string()
		if err != nil {
			return err
		}
		o, err := d.byte()
		if err != nil {
			return err
		}
		sub := Subscription{Filter: f, QoS: o & 0x03}
		if v == V5 {
			if o&0xc0 != 0 {
				return ErrSubOptions // [MQTT-3.8.3-5]
			}
			sub.NoLocal = o&0x04 != 0
			sub.RetainAsPublished = o&0x08 != 0
			sub.RetainHandling = o >> 4 & 0x03
			if sub.RetainHandling == 3 {
				return ErrRetainHandling
			}
		} else if o&0xfc != 0 {
			return ErrSubOptions // [MQTT-3-8.3-4]
		}
		if sub.QoS == 3 {
			if v == V5 {
				return ErrSubQoS // Maximum QoS 3 is a Protocol Error in 5.0 (3.8.3.1)
			}
			return ErrBadQoS // [MQTT-3-8.3-4]
		}
		s.Subscriptions = append(s.Subscriptions, sub)
	}
	if len(s.Subscriptions) == 0 {
		return ErrNoFilters // [MQTT-3.8.3-3]
	}
	return nil
}

// Validate checks each filter's syntax and the shared-subscription rules
// and returns one error per subscription (nil where it is valid). An invalid
// filter is not a malformed packet: the server answers it with a SUBACK
// failure code and keeps the connection, so decode leaves this to the caller.
func (s *Subscribe) Validate(errs []error) []error {
	for i := range s.Subscriptions {
		sub := &s.Subscriptions[i]
		err := ValidFilter(sub.Filter)
		if err == nil && sub.NoLocal && IsShared(sub.Filter) {
			err = ErrSharedNoLocal // [MQTT-3.8.3-4]
		}
		errs = append(errs, err)
	}
	return errs
}

// Suback is the SUBACK packet (3.9): one reason code per filter, in order.
// In 3.1 and 3.1.1 codes are 0, 1, 2 or 0x80; other failure codes are sent as 0x80.
type Suback struct {
	PacketID    uint16
	Props       Properties
	ReasonCodes []ReasonCode
}

// Type implements Packet.
func (*Suback) Type() Type { return SUBACK }

func (s *Suback) bodyLen(v byte) int {
	n := 2 + len(s.ReasonCodes)
	if v == V5 {
		n += s.Props.encLen()
	}
	return n
}

// Len implements Packet.
func (s *Suback) Len(v byte) int { n := s.bodyLen(v); return headerLen(n) + n }

// Append implements Packet.
func (s *Suback) Append(dst []byte, v byte) []byte {
	dst = appendUint16(appendHeader(dst, SUBACK, 0, s.bodyLen(v)), s.PacketID)
	if v == V5 {
		dst = s.Props.appendTo(dst)
	}
	for _, rc := range s.ReasonCodes {
		if v != V5 && rc.IsError() {
			rc = UnspecifiedError // 0x80 Failure [MQTT-3.9.3-2]
		}
		dst = append(dst, byte(rc))
	}
	return dst
}

func (s *Suback) decode(flags byte, d *decoder, v byte) error {
	if flags != 0 {
		return ErrBadFlags
	}
	var err error
	if s.PacketID, err = d.packetID(); err != nil {
		return err
	}
	if v == V5 {
		if err := s.Props.decode(d, SUBACK); err != nil {
			return err
		}
	} else {
		s.Props.Reset()
	}
	s.ReasonCodes = s.ReasonCodes[:0]
	for d.left() > 0 {
		c, _ := d.byte()
		rc := ReasonCode(c)
		if v == V5 && !subackCodes.has(rc) || v != V5 && rc > 2 && rc != UnspecifiedError {
			return ErrBadReasonCode // [MQTT-3.9.3-2]
		}
		s.ReasonCodes = append(s.ReasonCodes, rc)
	}
	if len(s.ReasonCodes) == 0 {
		return ErrNoReasonCodes
	}
	return nil
}

// Unsubscribe is the UNSUBSCRIBE packet (3.10).
type Unsubscribe struct {
	PacketID uint16
	Props    Properties
	Filters  [][]byte
}

// Type implements Packet.
func (*Unsubscribe) Type() Type { return UNSUBSCRIBE }

func (u *Unsubscribe) bodyLen(v byte) int {
	n := 2
	if v == V5 {
		n += u.Props.encLen()
	}
	for _, f := range u.Filters {
		n += 2 + len(f)
	}
	return n
}

// Len implements Packet.
func (u *Unsubscribe) Len(v byte) int { n := u.bodyLen(v); return headerLen(n) + n }

// Append implements Packet.
func (u *Unsubscribe) Append(dst []byte, v byte) []byte {
	dst = appendUint16(appendHeader(dst, UNSUBSCRIBE, 0x02, u.bodyLen(v)), u.PacketID)
	if v == V5 {
		dst = u.Props.appendTo(dst)
	}
	for _, f := range u.Filters {
		dst = appendBytes(dst, f)
	}
	return dst
}

func (u *Unsubscribe) decode(flags byte, d *decoder, v byte) error {
	if flags != 0x02 {
		return ErrBadFlags // [MQTT-3.10.1-1]
	}
	var err error
	if u.PacketID, err = d.packetID(); err != nil {
		return err
	}
	if v == V5 {
		if err := u.Props.decode(d, UNSUBSCRIBE); err != nil {
			return err
		}
	} else {
		u.Props.Reset()
	}
	u.Filters = u.Filters[:0]
	for d.left() > 0 {
		f, err := d.string()
		if err != nil {
			return err
		}
		u.Filters = append(u.Filters, f)
	}
	if len(u.Filters) == 0 {
		return ErrNoFilters // [MQTT-3.10.3-2]
	}
	return nil
}

// Unsuback is the UNSUBACK packet (3.11). ReasonCodes exist in MQTT 5 only.
type Unsuback struct {
	PacketID    uint16
	Props       Properties
	ReasonCodes []ReasonCode
}

// Type implements Packet.
func (*Unsuback) Type() Type { return UNSUBACK }

func (u *Unsuback) bodyLen(v byte) int {
	if v != V5 {
		return 2
	}
	return 2 + u.Props.encLen() + len(u.ReasonCodes)
}

// Len implements Packet.
func (u *Unsuback) Len(v byte) int { n := u.bodyLen(v); return headerLen(n) + n }

// Append implements Packet.
func (u *Unsuback) Append(dst []byte, v byte) []byte {
	dst = appendUint16(appendHeader(dst, UNSUBACK, 0, u.bodyLen(v)), u.PacketID)
	if v != V5 {
		return dst
	}
	dst = u.Props.appendTo(dst)
	for _, rc := range u.ReasonCodes {
		dst = append(dst, byte(rc))
	}
	return dst
}

func (u *Unsuback) decode(flags byte, d *decoder, v byte) error {
	if flags != 0 {
		return ErrBadFlags
	}
	var err error
	if u.PacketID, err = d.packetID(); err != nil {
		return err
	}
	u.Props.Reset()
	u.ReasonCodes = u.ReasonCodes[:0]
	if v != V5 {
		if d.left() != 0 {
			return ErrTrailingBytes
		}
		return nil
	}
	if err := u.Props.decode(d, UNSUBACK); err != nil {
		return err
	}
	for d.left() > 0 {
		c, _ := d.byte()
		if !unsubackCodes.has(ReasonCode(c)) {
			return ErrBadReasonCode
		}
		u.ReasonCodes = append(u.ReasonCodes, ReasonCode(c))
	}
	if len(u.ReasonCodes) == 0 {
		return ErrNoReasonCodes
	}
	return nil
}
