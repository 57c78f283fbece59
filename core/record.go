package core

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/xmq-io/xmq/codec"
)

// recordVersion is the format of every record core gives its Store. A
// record of another version is refused with a clear error, never misread.
// Version 2 added the inbound QoS 2 base and the sent sequence to sessions,
// the inbound sequence and delivery state to messages, and the inbound and
// will records. Version 3 added the owner of sessions and wills (who may
// resume the session; whose rights a will is checked against); a version 2
// record reads with the owner unknown. Version 4 added to message records
// the time a retained message was stored; an older one reads as unknown.
const recordVersion = 4

// oldestRecordVersion is the oldest format this build still reads.
const oldestRecordVersion = 2

// readable reports whether a record of format v can be read.
func readable(v byte) bool { return v >= oldestRecordVersion && v <= recordVersion }

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
	// InBase is where this incarnation of the session started numbering its
	// inbound QoS 2 messages (see inboundRecord): the Unix nanosecond it
	// began on the node that wrote the record (newInBase: created, started
	// clean or moved there), which a cluster replay relies on
	// (session.beganLocked).
	InBase uint64
	// SentSeq is the session's last message seq when the record was written
	// offline: messages up to it may have been sent, those after it were
	// not, so a restart sets DUP on the first and not on the second.
	SentSeq uint64
	Subs    []storedSub
	// Owner is the identity (user name) the session belongs to; OwnerKnown
	// is false for a session restored from a version 2 record, which the
	// next client to log in with its id claims.
	Owner      string
	OwnerKnown bool
}

// Session record: version, protocol level, expiry (4), disconnected-at (8),
// inbound base, sent seq, subscription count, then per subscription:
// filter, QoS, flags, subscription id; then (version 3) owner known and
// owner.
func (r *sessionRecord) append(b []byte) []byte {
	b = append(b, recordVersion, r.Version)
	b = binary.BigEndian.AppendUint32(b, r.Expiry)
	b = binary.BigEndian.AppendUint64(b, uint64(r.DisconnectedAt))
	b = binary.AppendUvarint(b, r.InBase)
	b = binary.AppendUvarint(b, r.SentSeq)
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
	b = append(b, boolByte(r.OwnerKnown))
	return appendString(b, r.Owner)
}

func (r *sessionRecord) decode(b []byte) error {
	d := recDecoder{b: b}
	v := d.byte()
	if !readable(v) {
		return formatError("session", v)
	}
	r.Version = d.byte()
	r.Expiry = d.uint32()
	r.DisconnectedAt = int64(d.uint64())
	r.InBase = d.uvarint()
	r.SentSeq = d.uvarint()
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
	if v >= 3 {
		r.OwnerKnown = d.byte() != 0
		r.Owner = d.string()
	}
	return d.done()
}

// storedMsg is a message record decoded: the message and its delivery to
// one session.
type storedMsg struct {
	msg    *Message
	qos    byte
	retain bool
	subID  uint32
	id     uint16 // packet id once a QoS 2 delivery was sent; 0 before
	pubrel bool   // PUBREC received: only PUBREL is owed
	stored int64  // a retained message: when it was stored, Unix milliseconds; 0 unknown or not retained
}

// Message record: version, delivery QoS, flags (retain, PUBREL owed),
// subscription id, packet id (2), absolute expiry (Unix nanoseconds, 0
// none), publisher id, inbound sequence (0 unless the message came from a
// persistent session's QoS 2 PUBLISH), (version 4) when a retained message
// was stored (Unix milliseconds, 0 for other messages), then the message
// as an MQTT 5 PUBLISH with its forwarded properties — the codec already
// knows how to write and check every property.
func appendMessageRecord(b []byte, m *Message, qos byte, retain bool, subID uint32) []byte {
	return appendRecord(b, m, qos, retain, subID, 0, false, 0)
}

func appendDeliveryRecord(b []byte, m *Message, qos byte, retain bool, subID uint32, id uint16, pubrel bool) []byte {
	return appendRecord(b, m, qos, retain, subID, id, pubrel, 0)
}

// appendRetainedRecord is the record of a retained message, stored at the
// Unix millisecond stored.
func appendRetainedRecord(b []byte, m *Message, stored int64) []byte {
	return appendRecord(b, m, m.QoS, true, 0, 0, false, stored)
}

func appendRecord(b []byte, m *Message, qos byte, retain bool, subID uint32, id uint16, pubrel bool, stored int64) []byte {
	b = append(b, recordVersion, qos, boolByte(retain)|boolByte(pubrel)<<1)
	b = binary.AppendUvarint(b, uint64(subID))
	b = binary.BigEndian.AppendUint16(b, id)
	var exp int64
	if !m.Expires.IsZero() {
		exp = m.Expires.UnixNano()
	}
	b = binary.BigEndian.AppendUint64(b, uint64(exp))
	b = appendString(b, m.From)
	b = binary.AppendUvarint(b, m.inSeq)
	b = binary.AppendUvarint(b, uint64(max(stored, 0)))
	p := codec.Publish{QoS: m.QoS, Retain: m.Retain, Topic: unsafeBytes(m.Topic), Payload: m.Payload, PacketID: 1}
	if m.Props != nil {
		p.Props = *m.Props
	}
	return p.Append(b, codec.V5)
}

func decodeMessageRecord(b []byte) (m *Message, qos byte, retain bool, subID uint32, err error) {
	sm, err := decodeDeliveryRecord(b)
	return sm.msg, sm.qos, sm.retain, sm.subID, err
}

func decodeDeliveryRecord(b []byte) (storedMsg, error) {
	d := recDecoder{b: b}
	v := d.byte()
	if !readable(v) {
		return storedMsg{}, formatError("message", v)
	}
	var sm storedMsg
	sm.qos = d.byte()
	flags := d.byte()
	sm.retain, sm.pubrel = flags&1 != 0, flags&2 != 0
	sm.subID = uint32(d.uvarint())
	sm.id = d.uint16()
	exp := int64(d.uint64())
	from := d.string()
	inSeq := d.uvarint()
	if v >= 4 {
		sm.stored = int64(min(d.uvarint(), 1<<62))
	}
	if err := d.err; err != nil {
		return storedMsg{}, err
	}
	if sm.qos > 2 || flags > 3 {
		return storedMsg{}, errRecord
	}
	pk, n, err := codec.Decode(b[d.off:], codec.V5)
	if err != nil || d.off+n != len(b) {
		return storedMsg{}, fmt.Errorf("%w: %v", errRecord, err)
	}
	p, ok := pk.(*codec.Publish)
	if !ok {
		return storedMsg{}, errRecord
	}
	sm.msg = newMessage(p, p.Topic, from)
	sm.msg.Expires = time.Time{}
	if exp != 0 {
		sm.msg.Expires = time.Unix(0, exp)
	}
	sm.msg.inSeq = inSeq
	return sm, nil
}

// formatError refuses a record of another format version, saying which way.
func formatError(kind string, v byte) error {
	if v > recordVersion {
		return fmt.Errorf("%w: %s record format %d is newer than this build reads (%d): run the newer xmq",
			errRecordFormat, kind, v, recordVersion)
	}
	return fmt.Errorf("%w: %s record format %d is older than this build reads (%d to %d) and cannot be migrated",
		errRecordFormat, kind, v, oldestRecordVersion, recordVersion)
}

// errRecordFormat reports a record written in another format version.
var errRecordFormat = errors.New("core: unsupported store record format")

// inboundRecord is a persistent session's inbound QoS 2 state: the packet
// ids received and not yet released by PUBREL, and High, the inbound
// sequence of the last QoS 2 PUBLISH whose routing is complete.
//
// Why High: a QoS 2 PUBLISH is routed (its deliveries written to the store)
// and then its packet id recorded, and each delivery carries the sequence.
// After a crash, a delivery whose sequence is above its publisher's High
// belongs to a PUBLISH whose routing may be incomplete and whose PUBREC was
// never sent: it is dropped, and the publisher's resend routes it again —
// exactly once.
type inboundRecord struct {
	High uint64
	IDs  []uint16
}

func (r *inboundRecord) append(b []byte) []byte {
	b = append(b, recordVersion)
	b = binary.AppendUvarint(b, r.High)
	b = binary.AppendUvarint(b, uint64(len(r.IDs)))
	for _, id := range r.IDs {
		b = binary.BigEndian.AppendUint16(b, id)
	}
	return b
}

func (r *inboundRecord) decode(b []byte) error {
	d := recDecoder{b: b}
	if v := d.byte(); !readable(v) {
		return formatError("inbound", v)
	}
	r.High = d.uvarint()
	n := d.uvarint()
	if n > uint64(len(b)) {
		return errRecord
	}
	r.IDs = make([]uint16, 0, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		r.IDs = append(r.IDs, d.uint16())
	}
	return d.done()
}

// willRecord is a will waiting for its delay: when to publish it, its
// Message Expiry Interval (which starts then) and the message.
type willRecord struct {
	At     time.Time // zero: its client was connected when the record was written (version 3)
	Expiry time.Duration
	Msg    *Message
	// Delay is the Will Delay Interval, which runs from a restart when
	// At is zero (version 3).
	Delay time.Duration
	// Owner is the user name whose rights the will needs when it is
	// published; OwnerKnown is false in a version 2 record.
	Owner      string
	OwnerKnown bool
}

func (r *willRecord) append(b []byte) []byte {
	b = append(b, recordVersion)
	at := int64(0)
	if !r.At.IsZero() {
		at = r.At.UnixNano()
	}
	b = binary.BigEndian.AppendUint64(b, uint64(at))
	b = binary.AppendUvarint(b, uint64(r.Expiry))
	b = binary.AppendUvarint(b, uint64(r.Delay))
	b = append(b, boolByte(r.OwnerKnown))
	b = appendString(b, r.Owner)
	return appendMessageRecord(b, r.Msg, r.Msg.QoS, r.Msg.Retain, 0)
}

func (r *willRecord) decode(b []byte) error {
	d := recDecoder{b: b}
	v := d.byte()
	if !readable(v) {
		return formatError("will", v)
	}
	at := int64(d.uint64())
	r.At = time.Time{}
	if at != 0 {
		r.At = time.Unix(0, at)
	}
	r.Expiry = time.Duration(d.uvarint())
	if v >= 3 {
		r.Delay = time.Duration(d.uvarint())
		r.OwnerKnown = d.byte() != 0
		r.Owner = d.string()
	}
	if d.err != nil {
		return d.err
	}
	sm, err := decodeDeliveryRecord(b[d.off:])
	if err != nil {
		return err
	}
	r.Msg = sm.msg
	return nil
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

func (d *recDecoder) uint16() uint16 {
	if !d.need(2) {
		return 0
	}
	d.off += 2
	return binary.BigEndian.Uint16(d.b[d.off-2:])
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
