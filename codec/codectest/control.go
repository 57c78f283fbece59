package codectest

import "github.com/xmq-io/xmq/codec"

func controlCases() []Case {
	var cases []Case
	for _, v := range Versions {
		vn := vname(v)
		cases = append(cases,
			Case{Name: "pingreq/" + vn, Version: v, Spec: "§3.12", Raw: []byte{0xC0, 0}, Packet: &codec.Pingreq{}},
			Case{Name: "pingresp/" + vn, Version: v, Spec: "§3.13", Raw: []byte{0xD0, 0}, Packet: &codec.Pingresp{}},
			Case{Name: "disconnect/" + vn + "/empty", Version: v, Spec: "§3.14", Raw: []byte{0xE0, 0}, Packet: &codec.Disconnect{}},
			Case{
				Name: "pingreq/" + vn + "/bad-flags", Version: v, Err: codec.ErrBadFlags, Spec: "[MQTT-2.1.3-1]",
				Raw: []byte{0xC1, 0},
			},
			Case{
				Name: "pingresp/" + vn + "/bad-flags", Version: v, Err: codec.ErrBadFlags, Spec: "[MQTT-2.1.3-1]",
				Raw: []byte{0xD4, 0},
			},
			Case{
				Name: "pingreq/" + vn + "/trailing-bytes", Version: v, Err: codec.ErrTrailingBytes, Spec: "§3.12",
				Raw: []byte{0xC0, 1, 0},
			},
			Case{
				Name: "pingresp/" + vn + "/trailing-bytes", Version: v, Err: codec.ErrTrailingBytes, Spec: "§3.13",
				Raw: []byte{0xD0, 1, 0},
			},
			Case{
				Name: "disconnect/" + vn + "/bad-flags", Version: v, Err: codec.ErrBadFlags, Spec: "[MQTT-3.14.1-1]",
				Raw: []byte{0xE1, 0},
			},
		)
	}
	for _, v := range []byte{codec.V31, codec.V311} {
		cases = append(cases,
			Case{
				Name: "disconnect/" + vname(v) + "/trailing-bytes", Version: v, Err: codec.ErrTrailingBytes, Spec: "MQTT 3.1.1 §3.14",
				Raw: []byte{0xE0, 1, 0}, // a reason code is MQTT 5 only
			},
			Case{
				Name: "auth/" + vname(v) + "/before-mqtt5", Version: v, Err: codec.ErrAuthBeforeV5, Spec: "MQTT 3.1.1 §2.2.1",
				Raw: []byte{0xF0, 0}, // type 15 is reserved before MQTT 5
			},
		)
	}
	return append(cases,
		Case{
			Name: "disconnect/v5/with-will", Version: codec.V5, Spec: "MQTT 5.0 §3.14.2.1",
			Raw:    []byte{0xE0, 1, 0x04},
			Packet: &codec.Disconnect{ReasonCode: codec.DisconnectWithWillMessage},
		},
		Case{
			Name: "disconnect/v5/properties", Version: codec.V5, Spec: "MQTT 5.0 §3.14.2.2",
			Raw: []byte{
				0xE0, 18,
				0x9C, // use another server
				16,
				0x11, 0, 0, 0, 10, // session expiry interval
				0x1C, 0, 2, 's', '2', // server reference
				0x1F, 0, 3, 'b', 'y', 'e', // reason string
			},
			Packet: &codec.Disconnect{ReasonCode: codec.UseAnotherServer,
				Props: props(codec.Properties{ServerReference: s("s2"), ReasonString: s("bye")}, num{codec.PropSessionExpiry, 10})},
		},
		Case{
			Name: "disconnect/v5/success-empty-properties", Version: codec.V5, Spec: "[MQTT-3.14.2-1]", NonCanonical: true,
			Raw:    []byte{0xE0, 2, 0, 0},
			Packet: &codec.Disconnect{},
		},
		Case{
			Name: "auth/v5/success", Version: codec.V5, Spec: "MQTT 5.0 §3.15.2.1",
			Raw: []byte{0xF0, 0}, Packet: &codec.Auth{},
		},
		Case{
			Name: "auth/v5/continue", Version: codec.V5, Spec: "MQTT 5.0 §3.15",
			Raw: []byte{
				0xF0, 21,
				0x18, // continue authentication
				19,
				0x15, 0, 5, 'S', 'C', 'R', 'A', 'M', // authentication method
				0x16, 0, 3, 'a', 'b', 'c', // authentication data
				0x1F, 0, 2, 'g', 'o', // reason string
			},
			Packet: &codec.Auth{ReasonCode: codec.ContinueAuthentication,
				Props: codec.Properties{AuthMethod: s("SCRAM"), AuthData: s("abc"), ReasonString: s("go")}},
		},

		Case{
			Name: "disconnect/v5/reason-code-not-allowed", Version: codec.V5, Err: codec.ErrBadReasonCode, Spec: "MQTT 5.0 §3.14.2.1",
			Raw: []byte{0xE0, 1, 0x05},
		},
		Case{
			Name: "disconnect/v5/property-not-allowed", Version: codec.V5, Err: codec.ErrPropertyNotAllowed, Spec: "MQTT 5.0 §3.14.2.2",
			Raw: []byte{0xE0, 5, 0x00, 3, 0x21, 0, 1}, // receive maximum
		},
		Case{
			Name: "auth/v5/bad-flags", Version: codec.V5, Err: codec.ErrBadFlags, Spec: "MQTT 5.0 §3.15.1",
			Raw: []byte{0xF1, 0},
		},
		Case{
			Name: "auth/v5/reason-code-not-allowed", Version: codec.V5, Err: codec.ErrBadReasonCode, Spec: "MQTT 5.0 §3.15.2.1",
			Raw: []byte{0xF0, 1, 0x01},
		},
		Case{
			Name: "auth/v5/data-without-method", Version: codec.V5, Err: codec.ErrAuthDataNoMethod, Spec: "MQTT 5.0 §3.15.2.2.3",
			Raw: []byte{0xF0, 8, 0x18, 6, 0x16, 0, 3, 'a', 'b', 'c'},
		},
		Case{
			Name: "auth/v5/property-not-allowed", Version: codec.V5, Err: codec.ErrPropertyNotAllowed, Spec: "MQTT 5.0 §3.15.2.2",
			Raw: []byte{0xF0, 7, 0x18, 5, 0x11, 0, 0, 0, 1}, // session expiry interval
		},
	)
}

func headerCases() []Case {
	return []Case{
		{
			Name: "header/v4/reserved-type-0", Version: codec.V311, Err: codec.ErrReservedType, Spec: "MQTT 3.1.1 §2.2.1",
			Raw: []byte{0x00, 0},
		},
		{
			Name: "header/v5/reserved-type-0", Version: codec.V5, Err: codec.ErrReservedType, Spec: "MQTT 5.0 §2.1.2",
			Raw: []byte{0x0F, 2, 0, 0},
		},
		{
			Name: "header/v4/remaining-length-five-bytes", Version: codec.V311, Err: codec.ErrVarintTooLong, Spec: "MQTT 3.1.1 §2.2.3",
			Raw: []byte{0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x01},
		},
		{
			Name: "header/v5/remaining-length-five-bytes-zero", Version: codec.V5, Err: codec.ErrVarintTooLong, Spec: "MQTT 5.0 §1.5.5",
			Raw: []byte{0xC0, 0x80, 0x80, 0x80, 0x80, 0x00},
		},
		{
			Name: "header/v4/remaining-length-not-minimal", Version: codec.V311, Err: codec.ErrVarintNotMinimal, Spec: "[MQTT-1.5.5-1]",
			Raw: []byte{0xC0, 0x80, 0x00}, // PINGREQ with 0 in two bytes
		},
		{
			Name: "header/v5/remaining-length-not-minimal", Version: codec.V5, Err: codec.ErrVarintNotMinimal, Spec: "[MQTT-1.5.5-1]",
			Raw: []byte{0x30, 0x87, 0x80, 0x00, 0, 3, 'a', '/', 'b', 0, 'x'}, // 7 in three bytes
		},
		{
			Name: "header/v4/truncated-first-byte", Version: codec.V311, Err: codec.ErrNeedMore, Spec: "MQTT 3.1.1 §2.2",
			Raw: []byte{0x30},
		},
		{
			Name: "header/v4/truncated-remaining-length", Version: codec.V311, Err: codec.ErrNeedMore, Spec: "MQTT 3.1.1 §2.2.3",
			Raw: []byte{0x30, 0x80, 0x80},
		},
		{
			Name: "header/v4/truncated-body", Version: codec.V311, Err: codec.ErrNeedMore, Spec: "MQTT 3.1.1 §2.2.3",
			Raw: []byte{0x30, 10, 0, 3, 'a', '/', 'b', 'h'},
		},
		{
			Name: "header/v5/truncated-body", Version: codec.V5, Err: codec.ErrNeedMore, Spec: "MQTT 5.0 §2.1.4",
			Raw: []byte{0x82, 0x80, 0x01, 0, 1, 0}, // announces 128 bytes
		},
	}
}

func propertyCases() []Case {
	return []Case{
		{
			Name: "publish/v5/unknown-property-0x05", Version: codec.V5, Err: codec.ErrUnknownProperty, Spec: "MQTT 5.0 §2.2.2.2",
			Raw: []byte{0x30, 8, 0, 3, 'a', '/', 'b', 2, 0x05, 0},
		},
		{
			Name: "publish/v5/unknown-property-0x00", Version: codec.V5, Err: codec.ErrUnknownProperty, Spec: "MQTT 5.0 §2.2.2.2",
			Raw: []byte{0x30, 8, 0, 3, 'a', '/', 'b', 2, 0x00, 0},
		},
		{
			Name: "connack/v5/unknown-property-0x2b", Version: codec.V5, Err: codec.ErrUnknownProperty, Spec: "MQTT 5.0 §2.2.2.2",
			Raw: []byte{0x20, 5, 0, 0, 2, 0x2B, 1},
		},
		{
			Name: "publish/v5/session-expiry-not-allowed", Version: codec.V5, Err: codec.ErrPropertyNotAllowed, Spec: "MQTT 5.0 §3.3.2.3",
			Raw: []byte{0x30, 11, 0, 3, 'a', '/', 'b', 5, 0x11, 0, 0, 0, 1},
		},
		{
			Name: "connect/v5/will-delay-in-connect-properties", Version: codec.V5, Err: codec.ErrPropertyNotAllowed, Spec: "MQTT 5.0 §3.1.2.11",
			Raw: []byte{0x10, 22, 0, 4, 'M', 'Q', 'T', 'T', 5, 0x02, 0, 60,
				5, 0x18, 0, 0, 0, 1, // will delay interval belongs to the will properties
				0, 4, 'z', 'e', 'n', '3'},
		},
		{
			Name: "connect/v5/session-expiry-in-will-properties", Version: codec.V5, Err: codec.ErrPropertyNotAllowed, Spec: "MQTT 5.0 §3.1.3.2",
			Raw: []byte{0x10, 30, 0, 4, 'M', 'Q', 'T', 'T', 5, 0x06, 0, 60, 0,
				0, 4, 'z', 'e', 'n', '3',
				5, 0x11, 0, 0, 0, 1, // will properties
				0, 3, 'w', '/', 't', 0, 0},
		},
		{
			Name: "connack/v5/topic-alias-not-allowed", Version: codec.V5, Err: codec.ErrPropertyNotAllowed, Spec: "MQTT 5.0 §3.2.2.3",
			Raw: []byte{0x20, 6, 0, 0, 3, 0x23, 0, 1},
		},
		{
			Name: "publish/v5/duplicate-message-expiry", Version: codec.V5, Err: codec.ErrDuplicateProperty, Spec: "MQTT 5.0 §3.3.2.3.3",
			Raw: []byte{0x30, 16, 0, 3, 'a', '/', 'b', 10, 0x02, 0, 0, 0, 1, 0x02, 0, 0, 0, 2},
		},
		{
			Name: "publish/v5/duplicate-content-type", Version: codec.V5, Err: codec.ErrDuplicateProperty, Spec: "MQTT 5.0 §3.3.2.3.9",
			Raw: []byte{0x30, 14, 0, 3, 'a', '/', 'b', 8, 0x03, 0, 1, 'a', 0x03, 0, 1, 'b'},
		},
		{
			Name: "connect/v5/duplicate-session-expiry", Version: codec.V5, Err: codec.ErrDuplicateProperty, Spec: "MQTT 5.0 §3.1.2.11.2",
			Raw: []byte{0x10, 27, 0, 4, 'M', 'Q', 'T', 'T', 5, 0x02, 0, 60,
				10, 0x11, 0, 0, 0, 1, 0x11, 0, 0, 0, 1,
				0, 4, 'z', 'e', 'n', '3'},
		},
		{
			Name: "subscribe/v5/two-subscription-ids", Version: codec.V5, Err: codec.ErrDuplicateProperty, Spec: "MQTT 5.0 §3.8.2.1.2",
			Raw: []byte{0x82, 11, 0, 1, 4, 0x0B, 1, 0x0B, 2, 0, 1, '#', 0},
		},
		{
			Name: "subscribe/v5/subscription-id-0", Version: codec.V5, Err: codec.ErrPropertyValue, Spec: "MQTT 5.0 §3.8.2.1.2",
			Raw: []byte{0x82, 9, 0, 1, 2, 0x0B, 0, 0, 1, '#', 0},
		},
		{
			Name: "publish/v5/subscription-id-0", Version: codec.V5, Err: codec.ErrPropertyValue, Spec: "MQTT 5.0 §3.3.2.3.8",
			Raw: []byte{0x30, 8, 0, 3, 'a', '/', 'b', 2, 0x0B, 0},
		},
		{
			Name: "publish/v5/subscription-id-not-minimal", Version: codec.V5, Err: codec.ErrVarintNotMinimal, Spec: "[MQTT-1.5.5-1]",
			Raw: []byte{0x30, 9, 0, 3, 'a', '/', 'b', 3, 0x0B, 0x81, 0x00},
		},
		{
			Name: "connect/v5/receive-maximum-0", Version: codec.V5, Err: codec.ErrPropertyValue, Spec: "MQTT 5.0 §3.1.2.11.3",
			Raw: []byte{0x10, 20, 0, 4, 'M', 'Q', 'T', 'T', 5, 0x02, 0, 60,
				3, 0x21, 0, 0,
				0, 4, 'z', 'e', 'n', '3'},
		},
		{
			Name: "connack/v5/receive-maximum-0", Version: codec.V5, Err: codec.ErrPropertyValue, Spec: "MQTT 5.0 §3.2.2.3.3",
			Raw: []byte{0x20, 6, 0, 0, 3, 0x21, 0, 0},
		},
		{
			Name: "publish/v5/topic-alias-0", Version: codec.V5, Err: codec.ErrPropertyValue, Spec: "[MQTT-3.3.2-8]",
			Raw: []byte{0x30, 10, 0, 3, 'a', '/', 'b', 3, 0x23, 0, 0, 'x'},
		},
		{
			Name: "connect/v5/maximum-packet-size-0", Version: codec.V5, Err: codec.ErrPropertyValue, Spec: "MQTT 5.0 §3.1.2.11.4",
			Raw: []byte{0x10, 22, 0, 4, 'M', 'Q', 'T', 'T', 5, 0x02, 0, 60,
				5, 0x27, 0, 0, 0, 0,
				0, 4, 'z', 'e', 'n', '3'},
		},
		{
			Name: "publish/v5/payload-format-2", Version: codec.V5, Err: codec.ErrPropertyValue, Spec: "MQTT 5.0 §3.3.2.3.2",
			Raw: []byte{0x30, 8, 0, 3, 'a', '/', 'b', 2, 0x01, 2},
		},
		{
			Name: "connect/v5/request-problem-information-2", Version: codec.V5, Err: codec.ErrPropertyValue, Spec: "MQTT 5.0 §3.1.2.11.7",
			Raw: []byte{0x10, 19, 0, 4, 'M', 'Q', 'T', 'T', 5, 0x02, 0, 60,
				2, 0x17, 2,
				0, 4, 'z', 'e', 'n', '3'},
		},
		{
			Name: "connack/v5/maximum-qos-2", Version: codec.V5, Err: codec.ErrPropertyValue, Spec: "MQTT 5.0 §3.2.2.3.4",
			Raw: []byte{0x20, 5, 0, 0, 2, 0x24, 2},
		},
		{
			Name: "publish/v5/user-property-bad-utf8", Version: codec.V5, Err: codec.ErrBadUTF8, Spec: "[MQTT-1.5.4-1]",
			Raw: []byte{0x30, 13, 0, 3, 'a', '/', 'b', 7, 0x26, 0, 1, 0xFF, 0, 1, 'v'},
		},
		{
			Name: "publish/v5/content-type-nul", Version: codec.V5, Err: codec.ErrBadUTF8, Spec: "[MQTT-1.5.4-2]",
			Raw: []byte{0x30, 10, 0, 3, 'a', '/', 'b', 4, 0x03, 0, 1, 0},
		},
		{
			Name: "publish/v5/property-length-beyond-packet", Version: codec.V5, Err: codec.ErrPropertyLength, Spec: "MQTT 5.0 §2.2.2.1",
			Raw: []byte{0x30, 8, 0, 3, 'a', '/', 'b', 10, 0x01, 1},
		},
		{
			Name: "publish/v5/property-length-not-minimal", Version: codec.V5, Err: codec.ErrVarintNotMinimal, Spec: "[MQTT-1.5.5-1]",
			Raw: []byte{0x30, 8, 0, 3, 'a', '/', 'b', 0x80, 0x00, 'x'},
		},
		{
			Name: "publish/v5/property-truncated", Version: codec.V5, Err: codec.ErrShortBuffer, Spec: "MQTT 5.0 §2.2.2.2",
			Raw: []byte{0x30, 11, 0, 3, 'a', '/', 'b', 2, 0x02, 0, 0, 0, 1}, // expiry runs past the property section into the payload
		},
	}
}
