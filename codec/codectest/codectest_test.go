package codectest_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/codec/codectest"
)

// remainingLength decodes the fixed header by hand, independently of the
// codec, so a fixture whose length byte was miscounted is caught here and not
// mistaken for a codec bug.
func remainingLength(raw []byte) (n, hdr int, ok bool) {
	mul := 1
	for i := 1; i < len(raw) && i <= 4; i++ {
		n += int(raw[i]&0x7f) * mul
		if raw[i]&0x80 == 0 {
			return n, i + 1, true
		}
		mul *= 128
	}
	return 0, 0, false
}

// headerErrors are the sentinels of fixtures whose length is wrong on purpose.
var headerErrors = []error{codec.ErrNeedMore, codec.ErrVarintTooLong, codec.ErrVarintNotMinimal}

func TestFixturesAreConsistent(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range codectest.Cases() {
		if seen[c.Name] {
			t.Errorf("%s: duplicate name", c.Name)
		}
		seen[c.Name] = true
		if !slices.Contains(codectest.Versions, c.Version) {
			t.Errorf("%s: version %d", c.Name, c.Version)
		}
		if vn := map[byte]string{3: "/v3", 4: "/v4", 5: "/v5"}[c.Version]; !strings.Contains(c.Name, vn) {
			t.Errorf("%s: name does not say version %s", c.Name, vn)
		}
		if c.Spec == "" {
			t.Errorf("%s: no Spec", c.Name)
		}
		if c.Valid() != (c.Packet != nil) {
			t.Errorf("%s: Valid() = %v but Packet = %v", c.Name, c.Valid(), c.Packet)
		}
		if c.NonCanonical && !c.Valid() {
			t.Errorf("%s: NonCanonical on a malformed case", c.Name)
		}
		var ce *codec.Error
		if c.Err != nil && !errors.As(c.Err, &ce) {
			t.Errorf("%s: Err %v is not a *codec.Error", c.Name, c.Err)
		}
		if c.Packet != nil && byte(c.Packet.Type()) != c.Raw[0]>>4 {
			t.Errorf("%s: Packet type %v, Raw type %d", c.Name, c.Packet.Type(), c.Raw[0]>>4)
		}
		if slices.ContainsFunc(headerErrors, func(e error) bool { return e == c.Err }) {
			continue
		}
		n, hdr, ok := remainingLength(c.Raw)
		if !ok || hdr+n != len(c.Raw) {
			t.Errorf("%s: remaining length %d + header %d != %d bytes", c.Name, n, hdr, len(c.Raw))
		}
	}
	for _, v := range codectest.Versions {
		if len(codectest.ValidAt(v)) < 20 {
			t.Errorf("only %d valid fixtures at level %d", len(codectest.ValidAt(v)), v)
		}
	}
}

// TestEveryTypeAtEveryVersion checks the coverage the fixtures promise.
func TestEveryTypeAtEveryVersion(t *testing.T) {
	have := map[[2]byte]bool{}
	for _, c := range codectest.Valid() {
		have[[2]byte{c.Version, byte(c.Packet.Type())}] = true
	}
	for _, v := range codectest.Versions {
		for typ := codec.CONNECT; typ <= codec.AUTH; typ++ {
			if typ == codec.AUTH && v != codec.V5 {
				continue
			}
			if !have[[2]byte{v, byte(typ)}] {
				t.Errorf("no valid %v fixture at level %d", typ, v)
			}
		}
	}
}

func TestCasesAreFresh(t *testing.T) {
	a := codectest.Get("publish/v4/qos0")
	a.Raw[0] = 0xFF
	a.Packet.(*codec.Publish).Topic[0] = 'z'
	b := codectest.Get("publish/v4/qos0")
	if b.Raw[0] != 0x30 || string(b.Packet.(*codec.Publish).Topic) != "a/b" {
		t.Fatalf("Cases shares state between calls: %v %s", b.Raw, codectest.Format(b.Packet))
	}
}

func TestEqual(t *testing.T) {
	tests := []struct {
		name string
		a, b codec.Packet
		want bool
	}{
		{"same", &codec.Publish{Topic: []byte("a")}, &codec.Publish{Topic: []byte("a")}, true},
		{"nil and empty slice", &codec.Suback{ReasonCodes: nil}, &codec.Suback{ReasonCodes: []codec.ReasonCode{}}, true},
		{"nil and empty bytes", &codec.Publish{Payload: nil}, &codec.Publish{Payload: []byte{}}, true},
		{"different bytes", &codec.Publish{Topic: []byte("a")}, &codec.Publish{Topic: []byte("b")}, false},
		{"different types", &codec.Pingreq{}, &codec.Pingresp{}, false},
		{"one nil", &codec.Pingreq{}, nil, false},
		{"both nil", nil, nil, true},
		{"ack kind", &codec.Ack{Kind: codec.PUBACK}, &codec.Ack{Kind: codec.PUBREC}, false},
		{"presence bit", presence(codec.PropMaximumQoS, 0), &codec.Connack{}, false},
		{"same presence", presence(codec.PropMaximumQoS, 0), presence(codec.PropMaximumQoS, 0), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := codectest.Equal(tt.a, tt.b); got != tt.want {
				t.Errorf("Equal(%s, %s) = %v, want %v", codectest.Format(tt.a), codectest.Format(tt.b), got, tt.want)
			}
		})
	}
}

func presence(id codec.PropID, v uint32) *codec.Connack {
	c := &codec.Connack{}
	c.Props.SetNum(id, v)
	return c
}

func TestFormat(t *testing.T) {
	got := codectest.Format(&codec.Publish{QoS: 1, Topic: []byte("a/b"), PacketID: 7})
	want := `&codec.Publish{QoS:1, Topic:"a/b", PacketID:7}`
	if got != want {
		t.Errorf("Format = %s, want %s", got, want)
	}
}

// TestEveryDecodeErrorHasAFixture keeps the malformed fixtures complete:
// each sentinel that Decode can return is exercised by at least one case.
// (ErrPacketTooLarge is the Reader's, and the filter errors are
// Subscribe.Validate's; the codec tests cover those.)
func TestEveryDecodeErrorHasAFixture(t *testing.T) {
	sentinels := map[string]error{
		"ErrNeedMore": codec.ErrNeedMore, "ErrAuthBeforeV5": codec.ErrAuthBeforeV5,
		"ErrShortBuffer": codec.ErrShortBuffer, "ErrVarintTooLong": codec.ErrVarintTooLong,
		"ErrVarintNotMinimal": codec.ErrVarintNotMinimal, "ErrBadUTF8": codec.ErrBadUTF8,
		"ErrReservedType": codec.ErrReservedType, "ErrBadFlags": codec.ErrBadFlags, "ErrBadQoS": codec.ErrBadQoS,
		"ErrDupQoS0": codec.ErrDupQoS0, "ErrTrailingBytes": codec.ErrTrailingBytes,
		"ErrZeroPacketID": codec.ErrZeroPacketID, "ErrBadProtocolName": codec.ErrBadProtocolName,
		"ErrBadProtocolVersion": codec.ErrBadProtocolVersion, "ErrConnectReserved": codec.ErrConnectReserved,
		"ErrWillFlags": codec.ErrWillFlags, "ErrWillQoS": codec.ErrWillQoS, "ErrPasswordNoUser": codec.ErrPasswordNoUser,
		"ErrConnackFlags": codec.ErrConnackFlags, "ErrBadReasonCode": codec.ErrBadReasonCode,
		"ErrTopicWildcard": codec.ErrTopicWildcard, "ErrTopicEmpty": codec.ErrTopicEmpty,
		"ErrTopicNoAlias": codec.ErrTopicNoAlias, "ErrSubOptions": codec.ErrSubOptions,
		"ErrRetainHandling": codec.ErrRetainHandling, "ErrNoFilters": codec.ErrNoFilters,
		"ErrNoReasonCodes": codec.ErrNoReasonCodes, "ErrUnknownProperty": codec.ErrUnknownProperty,
		"ErrPropertyNotAllowed": codec.ErrPropertyNotAllowed, "ErrDuplicateProperty": codec.ErrDuplicateProperty,
		"ErrPropertyValue": codec.ErrPropertyValue, "ErrPropertyLength": codec.ErrPropertyLength,
		"ErrAuthDataNoMethod": codec.ErrAuthDataNoMethod,
	}
	versions := map[error]map[byte]bool{}
	for _, c := range codectest.Invalid() {
		if versions[c.Err] == nil {
			versions[c.Err] = map[byte]bool{}
		}
		versions[c.Err][c.Version] = true
	}
	for name, err := range sentinels {
		if len(versions[err]) == 0 {
			t.Errorf("no fixture expects %s", name)
		}
	}
}
