package codec_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/xmq-io/xmq/codec"
)

func TestConnackCodeV3(t *testing.T) {
	want := map[codec.ReasonCode]byte{
		codec.Success:                     0,
		codec.UnsupportedProtocolVersion:  1,
		codec.ClientIdentifierNotValid:    2,
		codec.ServerUnavailable:           3,
		codec.ServerBusy:                  3,
		codec.UnspecifiedError:            3,
		codec.ImplementationSpecificError: 3,
		codec.MalformedPacket:             3,
		codec.BadUserNameOrPassword:       4,
		codec.BadAuthenticationMethod:     4,
		codec.NotAuthorized:               5,
		codec.Banned:                      5,
	}
	for rc := range 256 {
		got := codec.ConnackCodeV3(codec.ReasonCode(rc))
		w, ok := want[codec.ReasonCode(rc)]
		if !ok {
			w = 3 // everything else: server unavailable
		}
		if got != w {
			t.Errorf("ConnackCodeV3(0x%02x): got %d, want %d", rc, got, w)
		}
	}
	// On the wire, in both directions.
	for rc, code := range want {
		for _, v := range []byte{codec.V31, codec.V311} {
			b := (&codec.Connack{ReasonCode: rc}).Append(nil, v)
			if !bytes.Equal(b, []byte{0x20, 2, 0, code}) {
				t.Errorf("CONNACK %v at level %d: got % x, want 20 02 00 %02x", rc, v, b, code)
			}
			p, _, err := codec.Decode(b, v)
			checkErr(t, "Decode", err, nil)
			if back := p.(*codec.Connack).ReasonCode; codec.ConnackCodeV3(back) != code {
				t.Errorf("CONNACK return code %d decoded to %v, which maps back to %d", code, back, codec.ConnackCodeV3(back))
			}
		}
	}
}

func TestSubackV3FailureCodes(t *testing.T) {
	s := &codec.Suback{PacketID: 1, ReasonCodes: []codec.ReasonCode{codec.GrantedQoS1, codec.NotAuthorized,
		codec.TopicFilterInvalid, codec.GrantedQoS2, codec.QuotaExceeded, codec.GrantedQoS0, codec.SharedSubscriptionsNotSupported}}
	for v, want := range map[byte][]byte{
		codec.V31:  {0x90, 9, 0, 1, 0x01, 0x80, 0x80, 0x02, 0x80, 0x00, 0x80},
		codec.V311: {0x90, 9, 0, 1, 0x01, 0x80, 0x80, 0x02, 0x80, 0x00, 0x80},
		codec.V5:   {0x90, 10, 0, 1, 0, 0x01, 0x87, 0x8F, 0x02, 0x97, 0x00, 0x9E},
	} {
		if got := s.Append(nil, v); !bytes.Equal(got, want) {
			t.Errorf("SUBACK at level %d: got % x, want % x", v, got, want)
		}
	}
}

func TestReasonCode(t *testing.T) {
	tests := []struct {
		rc      codec.ReasonCode
		str     string
		isError bool
	}{
		{codec.Success, "success", false},
		{codec.GrantedQoS2, "granted QoS 2", false},
		{codec.NoMatchingSubscribers, "no matching subscribers", false},
		{codec.ReAuthenticate, "re-authenticate", false},
		{codec.UnspecifiedError, "unspecified error", true},
		{codec.PacketTooLarge, "packet too large", true},
		{codec.WildcardSubscriptionsNotSupported, "wildcard subscriptions not supported", true},
		{0x03, "reason code 0x03", false},
		{0xFF, "reason code 0xff", true},
	}
	for _, tt := range tests {
		if got := tt.rc.String(); got != tt.str {
			t.Errorf("ReasonCode(0x%02x).String: got %q, want %q", byte(tt.rc), got, tt.str)
		}
		if got := tt.rc.Error(); got != "mqtt: "+tt.str {
			t.Errorf("ReasonCode(0x%02x).Error: got %q, want %q", byte(tt.rc), got, "mqtt: "+tt.str)
		}
		if got := tt.rc.IsError(); got != tt.isError {
			t.Errorf("ReasonCode(0x%02x).IsError: got %v, want %v", byte(tt.rc), got, tt.isError)
		}
	}
	// A handler can return a reason code as an error and have it found.
	err := fmt.Errorf("publish refused: %w", codec.QuotaExceeded)
	var rc codec.ReasonCode
	if !errors.As(err, &rc) || rc != codec.QuotaExceeded {
		t.Errorf("errors.As(wrapped QuotaExceeded): got %v, want %v", rc, codec.QuotaExceeded)
	}
}

// TestErrorCodes pins the reason code each sentinel carries: it is what the
// broker sends in CONNACK or DISCONNECT, so changing one is a behaviour change.
func TestErrorCodes(t *testing.T) {
	tests := []struct {
		err  *codec.Error
		code codec.ReasonCode
	}{
		{codec.ErrNeedMore, codec.MalformedPacket},
		{codec.ErrAuthBeforeV5, codec.MalformedPacket},
		{codec.ErrShortBuffer, codec.MalformedPacket},
		{codec.ErrVarintTooLong, codec.MalformedPacket},
		{codec.ErrVarintNotMinimal, codec.MalformedPacket},
		{codec.ErrBadUTF8, codec.MalformedPacket},
		{codec.ErrReservedType, codec.MalformedPacket},
		{codec.ErrBadFlags, codec.MalformedPacket},
		{codec.ErrBadQoS, codec.MalformedPacket},
		{codec.ErrDupQoS0, codec.MalformedPacket},
		{codec.ErrTrailingBytes, codec.MalformedPacket},
		{codec.ErrZeroPacketID, codec.MalformedPacket},
		{codec.ErrPacketTooLarge, codec.PacketTooLarge},
		{codec.ErrBadProtocolName, codec.UnsupportedProtocolVersion},
		{codec.ErrBadProtocolVersion, codec.UnsupportedProtocolVersion},
		{codec.ErrConnectReserved, codec.MalformedPacket},
		{codec.ErrWillFlags, codec.MalformedPacket},
		{codec.ErrWillQoS, codec.MalformedPacket},
		{codec.ErrPasswordNoUser, codec.MalformedPacket},
		{codec.ErrConnackFlags, codec.MalformedPacket},
		{codec.ErrBadReasonCode, codec.ProtocolError},
		{codec.ErrTopicWildcard, codec.TopicNameInvalid},
		{codec.ErrTopicEmpty, codec.TopicNameInvalid},
		{codec.ErrTopicNoAlias, codec.ProtocolError},
		{codec.ErrFilterInvalid, codec.TopicFilterInvalid},
		{codec.ErrSharedInvalid, codec.TopicFilterInvalid},
		{codec.ErrSharedNoLocal, codec.ProtocolError},
		{codec.ErrSubOptions, codec.MalformedPacket},
		{codec.ErrRetainHandling, codec.ProtocolError},
		{codec.ErrNoFilters, codec.ProtocolError},
		{codec.ErrNoReasonCodes, codec.ProtocolError},
		{codec.ErrUnknownProperty, codec.MalformedPacket},
		{codec.ErrPropertyNotAllowed, codec.MalformedPacket}, // MQTT 5.0 §2.2.2.2
		{codec.ErrDuplicateProperty, codec.ProtocolError},
		{codec.ErrPropertyValue, codec.ProtocolError},
		{codec.ErrPropertyLength, codec.MalformedPacket},
		{codec.ErrAuthDataNoMethod, codec.ProtocolError},
	}
	for _, tt := range tests {
		if tt.err.Code != tt.code {
			t.Errorf("%q: got code %v, want %v", tt.err.Error(), tt.err.Code, tt.code)
		}
		if msg := tt.err.Error(); len(msg) < 8 || msg[:7] != "codec: " {
			t.Errorf("%q: want the \"codec: \" prefix", msg)
		}
	}
}
