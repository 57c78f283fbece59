package core

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"xmq/codec"
)

// recordVersion is the format of every record core gives its Store. A
// record of another version is refused with a clear error, never misread.
const recordVersion = 1

// errRecord reports a damaged or unknown record.
var errRecord = errors.New("core: damaged store record")

// storedSub is one subscription of a persistent session.
type storedSub struct {
	Filter            string // as subscribed, including any $share/{group}/ prefix
	QoS               byte
	NoLocal           bool
	RetainAsPublished bool
	RetainHandling    byte
	SubscriptionID    uint32
	V5                bool
}

// sessionRecord is what a persistent session keeps across restarts.
type sessionRecord struct {
	Version        byte
	Expiry         uint32 // seconds; neverExpires for 3.1.1 persistent sessions
	DisconnectedAt int64  // Unix seconds; 0 while connected
	Subs           []storedSub
}

// Session record: version, protocol level, expiry (4), disconnected-at (8),
// subscription count, then per subscription: filter, QoS, flags, subscription id.
func (r *sessionRecord) append(b []byte) []byte {
	b = append(b, recordVersion, r.Version)
	b = binary.BigEndian.AppendUint32(b, r.Expiry)
	b = binary.BigEndian.AppendUint64(b, uint64(r.DisconnectedAt))
	b = binary.AppendUvarint(b, uint64(len(r.Subs)))
	for _, s := range r.Subs {
		b = appendString(b, s.Filter)
		flags := s.RetainHandling << 2
		if s.NoLocal {
			flags |= 1
		}
		if s.RetainAsPublished {
			flags |= 2
		}
		if s.V5 {
			flags |= 16
		}
		b = append(b, s.QoS, flags)
		b = binary.AppendUvarint(b, uint64(s.SubscriptionID))
	}
	return b
}

func (r *sessionRecord) decode(b []byte) error {
	d := recDecoder{b: b}
	if v := d.byte(); v != recordVersion {
		return fmt.Errorf("core: session record format %d, this build reads %d", v, recordVersion)
	}
	r.Version = d.byte()
	r.Expiry = d.uint32()
	r.DisconnectedAt = int64(d.uint64())
	n := d.uvarint()
	if n > uint64(len(b)) {
		return errRecord
	}
	r.Subs = make([]storedSub, 0, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		s := storedSub{Filter: d.string(), QoS: d.byte()}
		flags := d.byte()
		s.NoLocal, s.RetainAsPublished, s.V5 = flags&1 != 0, flags&2 != 0, flags&16 != 0
		s.RetainHandling = flags >> 2 & 3
		s.SubscriptionID = uint32(d.uvarint())
		r.Subs = append(r.Subs, s)
	}
	return d.done()
}

// Message record: version, delivery QoS, retain, subscription id, absolute
// expiry (Unix nanoseconds, 0 none), publisher id, then the message as an
// MQTT 5 PUBLISH with its forwarded properties — the codec already knows how
// to write and check every property.
func appendMessageRecord(b []byte, m *Message, qos byte, retain bool, subID uint32) []byte {
	b = append(b, recordVersion, qos, boolByte(retain))
	b = binary.AppendUvarint(b, uint64(subID))
	var exp int64
	if !m.Expires.IsZero() {
		exp = m.Expires.UnixNano()
	}
	b = binary.BigEndian.AppendUint64(b, uint64(exp))
	b = appendString(b, m.From)
	p := codec.Publish{QoS: m.QoS, Retain: m.Retain, Topic: unsafeBytes(m.Topic), Payload: m.Payload, PacketID: 1}
	if m.Props != nil {
		p.Props = *m.Props
	}
	return p.Append(b, codec.V5)
}

func decodeMessageRecord(b []byte) (m *Message, qos byte, retain bool, subID uint32, err error) {
	d := recDecoder{b: b}
	if v := d.byte(); v != recordVersion {
		return nil, 0, false, 0, fmt.Errorf("core: message record format %d, this build reads %d", v, recordVersion)
	}
	qos, retain = d.byte(), d.byte() != 0
	subID = uint32(d.uvarint())
	exp := int64(d.uint64())
	from := d.string()
	if err := d.err; err != nil {
		return nil, 0, false, 0, err
	}
	pk, n, err := codec.Decode(b[d.off:], codec.V5)
	if err != nil || d.off+n != len(b) {
		return nil, 0, false, 0, fmt.Errorf("%w: %v", errRecord, err)
	}
	p, ok := pk.(*codec.Publish)
	if !ok {
		return nil, 0, false, 0, errRecord
	}
	m = newMessage(p, p.Topic, from)
	if exp != 0 {
		m.Expires = time.Unix(0, exp)
	}
	return m, qos, retain, subID, nil
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// recDecoder reads a record; the first error sticks and later reads return zero.
type recDecoder struct {
	b   []byte
	off int
	err error
}

func (d *recDecoder) need(n int) bool {
	if d.err == nil && len(d.b)-d.off < n {
		d.err = errRecord
	}
	return d.err == nil
}

func (d *recDecoder) byte() byte {
	if !d.need(1) {
		return 0
	}
	d.off++
	return d.b[d.off-1]
}

func (d *recDecoder) uint32() uint32 {
	if !d.need(4) {
		return 0
	}
	d.off += 4
	return binary.BigEndian.Uint32(d.b[d.off-4:])
}

func (d *recDecoder) uint64() uint64 {
	if !d.need(8) {
		return 0
	}
	d.off += 8
	return binary.BigEndian.Uint64(d.b[d.off-8:])
}

func (d *recDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.err = errRecord
		return 0
	}
	d.off += n
	return v
}

func (d *recDecoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) || !d.need(int(n)) {
		d.err = errRecord
		return ""
	}
	d.off += int(n)
	return string(d.b[d.off-int(n) : d.off])
}

func (d *recDecoder) done() error {
	if d.err == nil && d.off != len(d.b) {
		d.err = errRecord
	}
	return d.err
}
