package core

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"xmq/codec"
)

func TestSessionRecordRoundTrip(t *testing.T) {
	for _, r := range []sessionRecord{
		{Version: codec.V311, Expiry: neverExpires},
		{Version: codec.V5, Expiry: 3600, DisconnectedAt: 1700000000, Subs: []storedSub{
			{Filter: "a/+/c", QoS: 1, V5: true, SubscriptionID: 268435455},
			{Filter: "$share/g/x/#", QoS: 2, RetainAsPublished: true, RetainHandling: 2, V5: true},
			{Filter: "n", NoLocal: true, RetainHandling: 1},
		}},
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
		{"plain", &Message{Topic: "a/b", Payload: []byte("x"), QoS: 1, From: "c1"}, 1, false, 0},
		{"props+expiry", &Message{Topic: "a", Payload: []byte("hello"), QoS: 2, Retain: true, Props: props, Expires: exp, From: "c2"}, 2, true, 7},
		{"empty payload", &Message{Topic: "t", QoS: 0}, 0, false, 0},
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

func TestRecordFromNewerFormatRefused(t *testing.T) {
	rec := (&sessionRecord{Version: codec.V5}).append(nil)
	rec[0] = recordVersion + 1
	err := new(sessionRecord).decode(rec)
	if err == nil || !strings.Contains(err.Error(), "format") {
		t.Fatalf("decode of a newer format: err = %v, want a format error", err)
	}
}
