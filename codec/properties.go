package codec

import "math/bits"

// PropID is an MQTT 5.0 property identifier [MQTT-2.2.2.2].
type PropID byte

// Property identifiers, table 2-4.
const (
	PropPayloadFormat        PropID = 0x01
	PropMessageExpiry        PropID = 0x02
	PropContentType          PropID = 0x03
	PropResponseTopic        PropID = 0x08
	PropCorrelationData      PropID = 0x09
	PropSubscriptionID       PropID = 0x0B
	PropSessionExpiry        PropID = 0x11
	PropAssignedClientID     PropID = 0x12
	PropServerKeepAlive      PropID = 0x13
	PropAuthMethod           PropID = 0x15
	PropAuthData             PropID = 0x16
	PropRequestProblemInfo   PropID = 0x17
	PropWillDelay            PropID = 0x18
	PropRequestResponseInfo  PropID = 0x19
	PropResponseInfo         PropID = 0x1A
	PropServerReference      PropID = 0x1C
	PropReasonString         PropID = 0x1F
	PropReceiveMaximum       PropID = 0x21
	PropTopicAliasMaximum    PropID = 0x22
	PropTopicAlias           PropID = 0x23
	PropMaximumQoS           PropID = 0x24
	PropRetainAvailable      PropID = 0x25
	PropUserProperty         PropID = 0x26
	PropMaximumPacketSize    PropID = 0x27
	PropWildcardSubAvailable PropID = 0x28
	PropSubIDAvailable       PropID = 0x29
	PropSharedSubAvailable   PropID = 0x2A
	maxPropID                       = 0x2A
)

type propType byte

const (
	ptByte propType = iota + 1
	ptUint16
	ptUint32
	ptVarint
	ptString
	ptBinary
	ptPair
)

// willProps is a pseudo packet type bit for the will properties of CONNECT,
// which have their own table (MQTT 5.0 3.1.3.2). Type 0 is reserved on the
// wire, so its bit is free.
const willProps = 0

func on(ts ...Type) (m uint16) {
	for _, t := range ts {
		m |= 1 << t
	}
	return m
}

// propInfo is the property table as data: type, the packets that may carry
// each property, and whether it may repeat (User Property and Subscription
// Identifier only). It drives decoding and validation.
var propInfo = [maxPropID + 1]struct {
	name    string
	typ     propType
	allowed uint16
	multi   bool
}{
	PropPayloadFormat:        {"payload format indicator", ptByte, on(PUBLISH, willProps), false},
	PropMessageExpiry:        {"message expiry interval", ptUint32, on(PUBLISH, willProps), false},
	PropContentType:          {"content type", ptString, on(PUBLISH, willProps), false},
	PropResponseTopic:        {"response topic", ptString, on(PUBLISH, willProps), false},
	PropCorrelationData:      {"correlation data", ptBinary, on(PUBLISH, willProps), false},
	PropSubscriptionID:       {"subscription identifier", ptVarint, on(PUBLISH, SUBSCRIBE), true},
	PropSessionExpiry:        {"session expiry interval", ptUint32, on(CONNECT, CONNACK, DISCONNECT), false},
	PropAssignedClientID:     {"assigned client identifier", ptString, on(CONNACK), false},
	PropServerKeepAlive:      {"server keep alive", ptUint16, on(CONNACK), false},
	PropAuthMethod:           {"authentication method", ptString, on(CONNECT, CONNACK, AUTH), false},
	PropAuthData:             {"authentication data", ptBinary, on(CONNECT, CONNACK, AUTH), false},
	PropRequestProblemInfo:   {"request problem information", ptByte, on(CONNECT), false},
	PropWillDelay:            {"will delay interval", ptUint32, on(willProps), false},
	PropRequestResponseInfo:  {"request response information", ptByte, on(CONNECT), false},
	PropResponseInfo:         {"response information", ptString, on(CONNACK), false},
	PropServerReference:      {"server reference", ptString, on(CONNACK, DISCONNECT), false},
	PropReasonString:         {"reason string", ptString, on(CONNACK, PUBACK, PUBREC, PUBREL, PUBCOMP, SUBACK, UNSUBACK, DISCONNECT, AUTH), false},
	PropReceiveMaximum:       {"receive maximum", ptUint16, on(CONNECT, CONNACK), false},
	PropTopicAliasMaximum:    {"topic alias maximum", ptUint16, on(CONNECT, CONNACK), false},
	PropTopicAlias:           {"topic alias", ptUint16, on(PUBLISH), false},
	PropMaximumQoS:           {"maximum QoS", ptByte, on(CONNACK), false},
	PropRetainAvailable:      {"retain available", ptByte, on(CONNACK), false},
	PropUserProperty:         {"user property", ptPair, on(CONNECT, CONNACK, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP, SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK, DISCONNECT, AUTH, willProps), true},
	PropMaximumPacketSize:    {"maximum packet size", ptUint32, on(CONNECT, CONNACK), false},
	PropWildcardSubAvailable: {"wildcard subscription available", ptByte, on(CONNACK), false},
	PropSubIDAvailable:       {"subscription identifier available", ptByte, on(CONNACK), false},
	PropSharedSubAvailable:   {"shared subscription available", ptByte, on(CONNACK), false},
}

// UserProperty is one name/value pair; order and repeats are significant [MQTT-3.3.2-18].
type UserProperty struct {
	Key, Value []byte
}

// Properties holds the MQTT 5.0 properties of one packet (or of a will).
//
// Numeric properties are sent only when their presence bit is set, because
// zero is a meaningful value for several of them (Maximum QoS 0, Server Keep
// Alive 0, Retain Available 0): set them with SetNum, read them with Num or
// through the field after checking Has. String and binary properties are sent
// when non-empty. Slices alias the decoded buffer; decoding into a reused
// Properties reuses the capacity of User and SubscriptionIDs, which is what
// keeps repeated decoding allocation-free.
type Properties struct {
	present uint64 // bit 1<<id for each numeric property present

	PayloadFormat        byte
	MessageExpiry        uint32
	ContentType          []byte
	ResponseTopic        []byte
	CorrelationData      []byte
	SubscriptionIDs      []uint32
	SessionExpiry        uint32
	AssignedClientID     []byte
	ServerKeepAlive      uint16
	AuthMethod           []byte
	AuthData             []byte
	RequestProblemInfo   byte
	WillDelay            uint32
	RequestResponseInfo  byte
	ResponseInfo         []byte
	ServerReference      []byte
	ReasonString         []byte
	ReceiveMaximum       uint16
	TopicAliasMaximum    uint16
	TopicAlias           uint16
	MaximumQoS           byte
	RetainAvailable      byte
	User                 []UserProperty
	MaximumPacketSize    uint32
	WildcardSubAvailable byte
	SubIDAvailable       byte
	SharedSubAvailable   byte
}

// Has reports whether the numeric property id is present.
func (p *Properties) Has(id PropID) bool { return p.present&(1<<id) != 0 }

// Clear removes the numeric property id.
func (p *Properties) Clear(id PropID) { p.present &^= 1 << id }

// Num returns the value of a numeric (byte, two- or four-byte integer)
// property and whether it is present.
func (p *Properties) Num(id PropID) (uint32, bool) {
	if !p.Has(id) {
		return 0, false
	}
	switch id {
	case PropPayloadFormat:
		return uint32(p.PayloadFormat), true
	case PropMessageExpiry:
		return p.MessageExpiry, true
	case PropSessionExpiry:
		return p.SessionExpiry, true
	case PropServerKeepAlive:
		return uint32(p.ServerKeepAlive), true
	case PropRequestProblemInfo:
		return uint32(p.RequestProblemInfo), true
	case PropWillDelay:
		return p.WillDelay, true
	case PropRequestResponseInfo:
		return uint32(p.RequestResponseInfo), true
	case PropReceiveMaximum:
		return uint32(p.ReceiveMaximum), true
	case PropTopicAliasMaximum:
		return uint32(p.TopicAliasMaximum), true
	case PropTopicAlias:
		return uint32(p.TopicAlias), true
	case PropMaximumQoS:
		return uint32(p.MaximumQoS), true
	case PropRetainAvailable:
		return uint32(p.RetainAvailable), true
	case PropMaximumPacketSize:
		return p.MaximumPacketSize, true
	case PropWildcardSubAvailable:
		return uint32(p.WildcardSubAvailable), true
	case PropSubIDAvailable:
		return uint32(p.SubIDAvailable), true
	case PropSharedSubAvailable:
		return uint32(p.SharedSubAvailable), true
	}
	return 0, false
}

// SetNum sets a numeric property and marks it present. It ignores ids that
// are not byte, two- or four-byte integer properties.
func (p *Properties) SetNum(id PropID, v uint32) {
	switch id {
	case PropPayloadFormat:
		p.PayloadFormat = byte(v)
	case PropMessageExpiry:
		p.MessageExpiry = v
	case PropSessionExpiry:
		p.SessionExpiry = v
	case PropServerKeepAlive:
		p.ServerKeepAlive = uint16(v)
	case PropRequestProblemInfo:
		p.RequestProblemInfo = byte(v)
	case PropWillDelay:
		p.WillDelay = v
	case PropRequestResponseInfo:
		p.RequestResponseInfo = byte(v)
	case PropReceiveMaximum:
		p.ReceiveMaximum = uint16(v)
	case PropTopicAliasMaximum:
		p.TopicAliasMaximum = uint16(v)
	case PropTopicAlias:
		p.TopicAlias = uint16(v)
	case PropMaximumQoS:
		p.MaximumQoS = byte(v)
	case PropRetainAvailable:
		p.RetainAvailable = byte(v)
	case PropMaximumPacketSize:
		p.MaximumPacketSize = v
	case PropWildcardSubAvailable:
		p.WildcardSubAvailable = byte(v)
	case PropSubIDAvailable:
		p.SubIDAvailable = byte(v)
	case PropSharedSubAvailable:
		p.SharedSubAvailable = byte(v)
	default:
		return
	}
	p.present |= 1 << id
}

// Reset empties p but keeps the capacity of its slices for reuse.
func (p *Properties) Reset() {
	user, subs := p.User[:0], p.SubscriptionIDs[:0]
	*p = Properties{User: user, SubscriptionIDs: subs}
}

// IsZero reports whether p holds no property at all.
func (p *Properties) IsZero() bool {
	return p.present == 0 && len(p.SubscriptionIDs) == 0 && len(p.User) == 0 && p.stringsLen() == 0
}

// numLen is the encoded size of each numeric property, identifier included,
// indexed by id; 0 for the others.
var numLen = func() (n [maxPropID + 1]int) {
	for id, info := range propInfo {
		switch info.typ {
		case ptByte:
			n[id] = 2
		case ptUint16:
			n[id] = 3
		case ptUint32:
			n[id] = 5
		}
	}
	return n
}()

func strPropLen(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	return 3 + len(b)
}

// stringsLen is the encoded size of the string and binary properties.
func (p *Properties) stringsLen() int {
	return strPropLen(p.ContentType) + strPropLen(p.ResponseTopic) + strPropLen(p.CorrelationData) +
		strPropLen(p.AssignedClientID) + strPropLen(p.AuthMethod) + strPropLen(p.AuthData) +
		strPropLen(p.ResponseInfo) + strPropLen(p.ServerReference) + strPropLen(p.ReasonString)
}

// bodyLen is the encoded size of the properties without their length prefix.
func (p *Properties) bodyLen() int {
	n := p.stringsLen()
	// present only holds numeric ids, so walking its bits visits exactly
	// the numeric properties that are set.
	for m := p.present; m != 0; m &= m - 1 {
		n += numLen[bits.TrailingZeros64(m)]
	}
	for _, id := range p.SubscriptionIDs {
		n += 1 + varintLen(int(id))
	}
	for i := range p.User {
		n += 5 + len(p.User[i].Key) + len(p.User[i].Value)
	}
	return n
}

// encLen is the size of the property section including its length prefix.
func (p *Properties) encLen() int {
	n := p.bodyLen()
	return varintLen(n) + n
}

func appendStrProp(dst []byte, id PropID, b []byte) []byte {
	if len(b) == 0 {
		return dst
	}
	return appendBytes(append(dst, byte(id)), b)
}

// appendTo appends the property section (length prefix and properties):
// numeric properties in id order, then string and binary ones, subscription
// identifiers and user properties in their order.
func (p *Properties) appendTo(dst []byte) []byte {
	return p.appendBody(appendVarint(dst, p.bodyLen()))
}

// appendBody appends the properties without their length prefix.
func (p *Properties) appendBody(dst []byte) []byte {
	for m := p.present; m != 0; m &= m - 1 {
		id := PropID(bits.TrailingZeros64(m))
		v, _ := p.Num(id)
		dst = append(dst, byte(id))
		switch numLen[id] {
		case 2:
			dst = append(dst, byte(v))
		case 3:
			dst = appendUint16(dst, uint16(v))
		case 5:
			dst = appendUint32(dst, v)
		}
	}
	dst = appendStrProp(dst, PropContentType, p.ContentType)
	dst = appendStrProp(dst, PropResponseTopic, p.ResponseTopic)
	dst = appendStrProp(dst, PropCorrelationData, p.CorrelationData)
	dst = appendStrProp(dst, PropAssignedClientID, p.AssignedClientID)
	dst = appendStrProp(dst, PropAuthMethod, p.AuthMethod)
	dst = appendStrProp(dst, PropAuthData, p.AuthData)
	dst = appendStrProp(dst, PropResponseInfo, p.ResponseInfo)
	dst = appendStrProp(dst, PropServerReference, p.ServerReference)
	dst = appendStrProp(dst, PropReasonString, p.ReasonString)
	for _, id := range p.SubscriptionIDs {
		dst = appendVarint(append(dst, byte(PropSubscriptionID)), int(id))
	}
	for i := range p.User {
		u := &p.User[i]
		dst = appendBytes(appendBytes(append(dst, byte(PropUserProperty)), u.Key), u.Value)
	}
	return dst
}

// decode reads a property section for packet type t (willProps for the will
// properties) and validates identifiers, repeats and values.
func (p *Properties) decode(d *decoder, t Type) error {
	p.Reset()
	n, err := d.varint()
	if err != nil {
		return err
	}
	if n > d.left() {
		return ErrPropertyLength
	}
	end := d.off + n
	var seen uint64
	for d.off < end {
		// Bound the property reads by the section, not the whole body.
		sub := decoder{b: d.b[:end], off: d.off}
		c, _ := sub.byte()
		if c > maxPropID || propInfo[c].typ == 0 {
			return ErrUnknownProperty
		}
		id := PropID(c)
		info := &propInfo[id]
		if info.allowed&(1<<t) == 0 {
			return ErrPropertyNotAllowed
		}
		if !info.multi {
			if seen&(1<<id) != 0 {
				return ErrDuplicateProperty
			}
			seen |= 1 << id
		}
		var v uint32
		switch info.typ {
		case ptByte:
			b, err := sub.byte()
			if err != nil {
				return err
			}
			if b > 1 {
				return ErrPropertyValue // every byte property is a 0/1 flag (Maximum QoS too: 2 is sent by omission)
			}
			v = uint32(b)
		case ptUint16:
			u, err := sub.uint16()
			if err != nil {
				return err
			}
			if u == 0 && (id == PropReceiveMaximum || id == PropTopicAlias) {
				return ErrPropertyValue // Receive Maximum 0 (3.1.2.11.3), Topic Alias 0 [MQTT-3.3.2-8]
			}
			v = uint32(u)
		case ptUint32:
			if v, err = sub.uint32(); err != nil {
				return err
			}
			if v == 0 && id == PropMaximumPacketSize {
				return ErrPropertyValue
			}
		case ptVarint:
			x, err := sub.varint()
			if err != nil {
				return err
			}
			if x == 0 {
				return ErrPropertyValue // subscription identifier 0 [MQTT-3.8.2.1.2]
			}
			p.SubscriptionIDs = append(p.SubscriptionIDs, uint32(x))
		case ptString, ptBinary:
			var b []byte
			if info.typ == ptString {
				b, err = sub.string()
			} else {
				b, err = sub.binary()
			}
			if err != nil {
				return err
			}
			p.setBytes(id, b)
		case ptPair:
			k, err := sub.string()
			if err != nil {
				return err
			}
			val, err := sub.string()
			if err != nil {
				return err
			}
			if d.maxUser > 0 && len(p.User) >= d.maxUser {
				return ErrTooManyUserProperties
			}
			p.User = append(p.User, UserProperty{Key: k, Value: val})
		}
		if info.typ <= ptUint32 {
			p.SetNum(id, v)
		}
		d.off = sub.off
	}
	if len(p.AuthData) > 0 && len(p.AuthMethod) == 0 {
		return ErrAuthDataNoMethod
	}
	return nil
}

func (p *Properties) setBytes(id PropID, b []byte) {
	switch id {
	case PropContentType:
		p.ContentType = b
	case PropResponseTopic:
		p.ResponseTopic = b
	case PropCorrelationData:
		p.CorrelationData = b
	case PropAssignedClientID:
		p.AssignedClientID = b
	case PropAuthMethod:
		p.AuthMethod = b
	case PropAuthData:
		p.AuthData = b
	case PropResponseInfo:
		p.ResponseInfo = b
	case PropServerReference:
		p.ServerReference = b
	case PropReasonString:
		p.ReasonString = b
	}
}
