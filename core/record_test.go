package core

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
)

func TestSessionRecordRoundTrip(t *testing.T) {
	for _, r := range []sessionRecord{
		{Version: codec.V311, Expiry: neverExpires},
		{Version: codec.V5, Expiry: 3600, DisconnectedAt: 1700000000, Subs: []storedSub{
			{Filter: "a/+/c", QoS: 1, V5: true, SubscriptionID: 268435455},
			{Filter: "$share/g/x/#", QoS: 2, RetainAsPublished: true, RetainHandling: 2, V5: true},
			{Filter: "n", NoLocal: true, RetainHandling: 1},
		}, Owner: "alice", OwnerKnown: true},
		{Version: codec.V5, Expiry: 60, Owner: "", OwnerKnown: true}, // anonymous owner
	} {
		rec := r.append(nil)
		var got sessionRecord
		if err := got.decode(rec); err != nil {
			t.Fatalf("decode: %v", err)
		}
		if got.Subs == nil {
			got.Subs = r.Subs[:0:0]
		}
		if r.Subs == nil {
			r.Subs = got.Subs
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, r)
		}
		for i := 0; i < len(rec); i++ {
			if err := new(sessionRecord).decode(rec[:i]); err == nil {
				t.Errorf("decode of %d of %d bytes succeeded", i, len(rec))
			}
		}
	}
}

func TestMessageRecordRoundTrip(t *testing.T) {
	props := &codec.Properties{ContentType: []byte("text/plain"), ResponseTopic: []byte("r/1"),
		CorrelationData: []byte{1, 2}, User: []codec.UserProperty{{Key: []byte("k"), Value: []byte("v")}}}
	props.SetNum(codec.PropPayloadFormat, 1)
	exp := time.Unix(1800000000, 123456789)
	for _, tc := range []struct {
		name   string
		m      *Message
		qos    byte
		retain bool
		subID  uint32
	}{
		{"plain", &Message{Message: codec.Message{Topic: "a/b", Payload: []byte("x"), QoS: 1, From: "c1"}}, 1, false, 0},
		{"props+expiry", &Message{Message: codec.Message{Topic: "a", Payload: []byte("hello"), QoS: 2, Retain: true, Props: props, Expires: exp, From: "c2"}}, 2, true, 7},
		{"empty payload", &Message{Message: codec.Message{Topic: "t", QoS: 0}}, 0, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := appendMessageRecord(nil, tc.m, tc.qos, tc.retain, tc.subID)
			m, qos, retain, subID, err := decodeMessageRecord(rec)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if qos != tc.qos || retain != tc.retain || subID != tc.subID {
				t.Errorf("delivery fields = %d %v %d, want %d %v %d", qos, retain, subID, tc.qos, tc.retain, tc.subID)
			}
			if !m.Expires.Equal(tc.m.Expires) {
				t.Errorf("expires = %v, want %v", m.Expires, tc.m.Expires)
			}
			m.Expires = tc.m.Expires
			if !reflect.DeepEqual(m, tc.m) {
				t.Errorf("message:\n got %+v\nwant %+v", m, tc.m)
			}
			for i := 0; i < len(rec); i++ {
				if _, _, _, _, err := decodeMessageRecord(rec[:i]); err == nil {
					t.Errorf("decode of %d of %d bytes succeeded", i, len(rec))
				}
			}
		})
	}
}

// TestRecordFormat2StillReads: a store written by the previous format
// opens; its sessions and wills have no known owner (the next login with
// the client id claims the session).
func TestRecordFormat2StillReads(t *testing.T) {
	r := sessionRecord{Version: codec.V311, Expiry: neverExpires, Subs: []storedSub{{Filter: "a/#", QoS: 1}}, OwnerKnown: true, Owner: "x"}
	rec := r.append(nil)
	rec = rec[:len(rec)-3] // version 2 ended after the subscriptions: no owner flag, no owner string
	rec[0] = 2
	var got sessionRecord
	if err := got.decode(rec); err != nil {
		t.Fatalf("decode of a format 2 session: %v", err)
	}
	if got.OwnerKnown || len(got.Subs) != 1 {
		t.Errorf("format 2 session decoded as %+v, want owner unknown", got)
	}
	w := willRecord{At: time.Unix(1700000000, 0), Expiry: time.Second, Msg: &Message{Message: codec.Message{Topic: "w", Payload: []byte("p"), QoS: 1}}}
	v3 := w.append(nil)
	// Format 2: version, at, expiry, then the message record.
	v2 := append([]byte{2}, v3[1:9]...)
	v2 = append(v2, 0x80, 0x94, 0xeb, 0xdc, 0x03) // uvarint of one second in nanoseconds
	msg := appendMessageRecord(nil, w.Msg, w.Msg.QoS, w.Msg.Retain, 0)
	v2 = append(v2, msg...)
	var gw willRecord
	if err := gw.decode(v2); err != nil {
		t.Fatalf("decode of a format 2 will: %v", err)
	}
	if gw.OwnerKnown || gw.Expiry != time.Second || !gw.At.Equal(w.At) || gw.Msg.Topic != "w" {
		t.Errorf("format 2 will decoded as %+v", gw)
	}
}

func TestWillRecordRoundTrip(t *testing.T) {
	for _, w := range []willRecord{
		{At: time.Unix(1700000000, 5), Expiry: time.Minute, Msg: &Message{Message: codec.Message{Topic: "w", Payload: []byte("p"), QoS: 1}}, Owner: "bob", OwnerKnown: true},
		{Delay: 30 * time.Second, Msg: &Message{Message: codec.Message{Topic: "w", Payload: []byte("p")}}, OwnerKnown: true}, // connected: no At
	} {
		var got willRecord
		if err := got.decode(w.append(nil)); err != nil {
			t.Fatal(err)
		}
		if !got.At.Equal(w.At) || got.At.IsZero() != w.At.IsZero() || got.Expiry != w.Expiry || got.Delay != w.Delay ||
			got.Owner != w.Owner || got.OwnerKnown != w.OwnerKnown || got.Msg.Topic != w.Msg.Topic {
			t.Errorf("round trip: got %+v, want %+v", got, w)
		}
	}
}

func TestRecordFromNewerFormatRefused(t *testing.T) {
	rec := (&sessionRecord{Version: codec.V5}).append(nil)
	rec[0] = recordVersion + 1
	err := new(sessionRecord).decode(rec)
	if err == nil || !strings.Contains(err.Error(), "format") {
		t.Fatalf("decode of a newer format: err = %v, want a format error", err)
	}
}

// TestRetainedRecordStoredTime: a retained message's record keeps when it
// was stored (format 4); a format 3 record, which had no such field, reads
// with the time unknown.
func TestRetainedRecordStoredTime(t *testing.T) {
	m := &Message{Message: codec.Message{Topic: "r/1", Payload: []byte("kept"), QoS: 1, Retain: true, From: "c"}}
	const at = int64(1800000000123)
	rec := appendRetainedRecord(nil, m, at)
	sm, err := decodeDeliveryRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	if sm.stored != at || sm.msg.Topic != "r/1" || !sm.retain {
		t.Fatalf("decoded stored %d topic %q retain %v, want %d r/1 true", sm.stored, sm.msg.Topic, sm.retain, at)
	}
	// Format 3: the same fields without the stored time (one uvarint after
	// the inbound sequence, which is the byte before the PUBLISH).
	short := appendRetainedRecord(nil, m, 0)
	pub := appendRecord(nil, m, m.QoS, true, 0, 0, false, 0)
	if string(short) != string(pub) {
		t.Fatal("a zero stored time is not the plain record")
	}
	head := len(short) - len((&codec.Publish{QoS: m.QoS, Retain: true, Topic: []byte(m.Topic), Payload: m.Payload, PacketID: 1}).Append(nil, codec.V5))
	v3 := append(append([]byte{3}, short[1:head-1]...), short[head:]...)
	sm, err = decodeDeliveryRecord(v3)
	if err != nil {
		t.Fatalf("format 3 record: %v", err)
	}
	if sm.stored != 0 || string(sm.msg.Payload) != "kept" {
		t.Fatalf("format 3 record decoded as stored %d payload %q", sm.stored, sm.msg.Payload)
	}
}
