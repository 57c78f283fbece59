package codectest

import "github.com/xmq-io/xmq/codec"

func subscribeCases() []Case {
	var cases []Case
	for _, v := range []byte{codec.V31, codec.V311} {
		cases = append(cases, Case{
			Name: "subscribe/" + vname(v) + "/two-filters", Version: v, Spec: "MQTT 3.1.1 §3.8",
			Raw: []byte{
				0x82, 14,
				0, 10, // packet identifier
				0, 3, 'a', '/', 'b', 1, // filter, requested QoS 1
				0, 3, 'c', '/', '#', 2, // filter, requested QoS 2
			},
			Packet: &codec.Subscribe{PacketID: 10, Subscriptions: []codec.Subscription{
				{Filter: s("a/b"), QoS: 1}, {Filter: s("c/#"), QoS: 2}}},
		})
	}
	return append(cases,
		Case{
			Name: "subscribe/v4/invalid-filter-is-not-malformed", Version: codec.V311, Spec: "MQTT 3.1.1 §3.9.3",
			Raw:    []byte{0x82, 7, 0, 1, 0, 2, 'a', '#', 0}, // Subscribe.Validate reports it; the server answers 0x80
			Packet: &codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{{Filter: s("a#")}}},
		},
		Case{
			Name: "subscribe/v5/options", Version: codec.V5, Spec: "MQTT 5.0 §3.8.3.1",
			Raw: []byte{
				0x82, 31,
				0, 10,
				9,       // property length
				0x0B, 5, // subscription identifier
				0x26, 0, 1, 'k', 0, 1, 'v', // user property
				0, 3, 'a', '/', '+', 0x2D, // retain handling 2, retain as published, no local, QoS 1
				0, 10, '$', 's', 'h', 'a', 'r', 'e', '/', 'g', '/', 'x', 0x12, // retain handling 1, QoS 2
			},
			Packet: &codec.Subscribe{PacketID: 10,
				Props: codec.Properties{SubscriptionIDs: []uint32{5}, User: []codec.UserProperty{{Key: s("k"), Value: s("v")}}},
				Subscriptions: []codec.Subscription{
					{Filter: s("a/+"), QoS: 1, NoLocal: true, RetainAsPublished: true, RetainHandling: 2},
					{Filter: s("$share/g/x"), QoS: 2, RetainHandling: 1},
				}},
		},
		Case{
			Name: "subscribe/v5/no-properties", Version: codec.V5, Spec: "MQTT 5.0 §3.8",
			Raw:    []byte{0x82, 7, 0, 1, 0, 0, 1, '#', 0},
			Packet: &codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{{Filter: s("#")}}},
		},

		Case{
			Name: "subscribe/v4/bad-flags", Version: codec.V311, Err: codec.ErrBadFlags, Spec: "[MQTT-3.8.1-1]",
			Raw: []byte{0x80, 6, 0, 1, 0, 1, '#', 0},
		},
		Case{
			Name: "subscribe/v5/bad-flags", Version: codec.V5, Err: codec.ErrBadFlags, Spec: "[MQTT-3.8.1-1]",
			Raw: []byte{0x83, 7, 0, 1, 0, 0, 1, '#', 0},
		},
		Case{
			Name: "subscribe/v4/packet-id-0", Version: codec.V311, Err: codec.ErrZeroPacketID, Spec: "[MQTT-2.3.1-1]",
			Raw: []byte{0x82, 6, 0, 0, 0, 1, '#', 0},
		},
		Case{
			Name: "subscribe/v4/no-filters", Version: codec.V311, Err: codec.ErrNoFilters, Spec: "[MQTT-3.8.3-3]",
			Raw: []byte{0x82, 2, 0, 1},
		},
		Case{
			Name: "subscribe/v5/no-filters", Version: codec.V5, Err: codec.ErrNoFilters, Spec: "[MQTT-3.8.3-2]",
			Raw: []byte{0x82, 3, 0, 1, 0},
		},
		Case{
			Name: "subscribe/v4/options-reserved-bits", Version: codec.V311, Err: codec.ErrSubOptions, Spec: "[MQTT-3-8.3-4]",
			Raw: []byte{0x82, 8, 0, 1, 0, 3, 'a', '/', 'b', 0x04},
		},
		Case{
			Name: "subscribe/v5/options-reserved-bits", Version: codec.V5, Err: codec.ErrSubOptions, Spec: "[MQTT-3.8.3-5]",
			Raw: []byte{0x82, 9, 0, 1, 0, 0, 3, 'a', '/', 'b', 0x40},
		},
		Case{
			Name: "subscribe/v5/retain-handling-3", Version: codec.V5, Err: codec.ErrRetainHandling, Spec: "MQTT 5.0 §3.8.3.1",
			Raw: []byte{0x82, 9, 0, 1, 0, 0, 3, 'a', '/', 'b', 0x30},
		},
		Case{
			Name: "subscribe/v4/qos-3", Version: codec.V311, Err: codec.ErrBadQoS, Spec: "[MQTT-3-8.3-4]",
			Raw: []byte{0x82, 8, 0, 1, 0, 3, 'a', '/', 'b', 0x03},
		},
		Case{
			Name: "subscribe/v5/qos-3", Version: codec.V5, Err: codec.ErrSubQoS, Spec: "MQTT 5.0 §3.8.3.1",
			Raw: []byte{0x82, 9, 0, 1, 0, 0, 3, 'a', '/', 'b', 0x03},
		},
		Case{
			Name: "subscribe/v4/missing-options", Version: codec.V311, Err: codec.ErrShortBuffer, Spec: "MQTT 3.1.1 §3.8.3",
			Raw: []byte{0x82, 7, 0, 1, 0, 3, 'a', '/', 'b'},
		},
		Case{
			Name: "subscribe/v4/filter-nul", Version: codec.V311, Err: codec.ErrBadUTF8, Spec: "[MQTT-1.5.4-2]",
			Raw: []byte{0x82, 7, 0, 1, 0, 2, 'a', 0, 0},
		},
	)
}

func subackCases() []Case {
	return []Case{
		{
			Name: "suback/v3/granted", Version: codec.V31, Spec: "MQTT 3.1 §3.9",
			Raw:    []byte{0x90, 4, 0, 10, 0, 2},
			Packet: &codec.Suback{PacketID: 10, ReasonCodes: []codec.ReasonCode{codec.GrantedQoS0, codec.GrantedQoS2}},
		},
		{
			Name: "suback/v4/failure", Version: codec.V311, Spec: "[MQTT-3.9.3-2]",
			Raw:    []byte{0x90, 5, 0, 10, 0, 1, 0x80},
			Packet: &codec.Suback{PacketID: 10, ReasonCodes: []codec.ReasonCode{codec.GrantedQoS0, codec.GrantedQoS1, codec.UnspecifiedError}},
		},
		{
			Name: "suback/v5/codes", Version: codec.V5, Spec: "MQTT 5.0 §3.9.3",
			Raw: []byte{
				0x90, 11,
				0, 10,
				4, 0x1F, 0, 1, 'r', // reason string
				0x00, 0x02, 0x8F, 0xA2, // granted 0, granted 2, filter invalid, wildcards not supported
			},
			Packet: &codec.Suback{PacketID: 10, Props: codec.Properties{ReasonString: s("r")},
				ReasonCodes: []codec.ReasonCode{codec.GrantedQoS0, codec.GrantedQoS2, codec.TopicFilterInvalid,
					codec.WildcardSubscriptionsNotSupported}},
		},

		{
			Name: "suback/v4/bad-flags", Version: codec.V311, Err: codec.ErrBadFlags, Spec: "[MQTT-2.1.3-1]",
			Raw: []byte{0x91, 3, 0, 1, 0},
		},
		{
			Name: "suback/v4/packet-id-0", Version: codec.V311, Err: codec.ErrZeroPacketID, Spec: "[MQTT-2.3.1-1]",
			Raw: []byte{0x90, 3, 0, 0, 0},
		},
		{
			Name: "suback/v4/return-code-3", Version: codec.V311, Err: codec.ErrBadReasonCode, Spec: "[MQTT-3.9.3-2]",
			Raw: []byte{0x90, 3, 0, 1, 3},
		},
		{
			Name: "suback/v4/mqtt5-failure-code", Version: codec.V311, Err: codec.ErrBadReasonCode, Spec: "[MQTT-3.9.3-2]",
			Raw: []byte{0x90, 3, 0, 1, 0x87},
		},
		{
			Name: "suback/v5/reason-code-not-allowed", Version: codec.V5, Err: codec.ErrBadReasonCode, Spec: "MQTT 5.0 §3.9.3",
			Raw: []byte{0x90, 4, 0, 1, 0, 0x04},
		},
		{
			Name: "suback/v4/no-return-codes", Version: codec.V311, Err: codec.ErrNoReasonCodes, Spec: "MQTT 3.1.1 §3.9.3",
			Raw: []byte{0x90, 2, 0, 1},
		},
		{
			Name: "suback/v5/no-reason-codes", Version: codec.V5, Err: codec.ErrNoReasonCodes, Spec: "MQTT 5.0 §3.9.3",
			Raw: []byte{0x90, 3, 0, 1, 0},
		},
	}
}

func unsubscribeCases() []Case {
	var cases []Case
	for _, v := range []byte{codec.V31, codec.V311} {
		cases = append(cases, Case{
			Name: "unsubscribe/" + vname(v) + "/two-filters", Version: v, Spec: "MQTT 3.1.1 §3.10",
			Raw:    []byte{0xA2, 10, 0, 11, 0, 3, 'a', '/', 'b', 0, 1, '#'},
			Packet: &codec.Unsubscribe{PacketID: 11, Filters: [][]byte{s("a/b"), s("#")}},
		})
	}
	return append(cases,
		Case{
			Name: "unsubscribe/v5/user-property", Version: codec.V5, Spec: "MQTT 5.0 §3.10",
			Raw: []byte{
				0xA2, 18,
				0, 11,
				7, 0x26, 0, 1, 'k', 0, 1, 'v',
				0, 3, 'a', '/', 'b',
				0, 1, '#',
			},
			Packet: &codec.Unsubscribe{PacketID: 11, Props: codec.Properties{User: []codec.UserProperty{{Key: s("k"), Value: s("v")}}},
				Filters: [][]byte{s("a/b"), s("#")}},
		},

		Case{
			Name: "unsubscribe/v4/bad-flags", Version: codec.V311, Err: codec.ErrBadFlags, Spec: "[MQTT-3.10.1-1]",
			Raw: []byte{0xA0, 5, 0, 1, 0, 1, '#'},
		},
		Case{
			Name: "unsubscribe/v4/packet-id-0", Version: codec.V311, Err: codec.ErrZeroPacketID, Spec: "[MQTT-2.3.1-1]",
			Raw: []byte{0xA2, 5, 0, 0, 0, 1, '#'},
		},
		Case{
			Name: "unsubscribe/v4/no-filters", Version: codec.V311, Err: codec.ErrNoFilters, Spec: "[MQTT-3.10.3-2]",
			Raw: []byte{0xA2, 2, 0, 1},
		},
		Case{
			Name: "unsubscribe/v5/no-filters", Version: codec.V5, Err: codec.ErrNoFilters, Spec: "[MQTT-3.10.3-2]",
			Raw: []byte{0xA2, 3, 0, 1, 0},
		},
		Case{
			Name: "unsubscribe/v4/filter-bad-utf8", Version: codec.V311, Err: codec.ErrBadUTF8, Spec: "[MQTT-1.5.4-1]",
			Raw: []byte{0xA2, 5, 0, 1, 0, 1, 0x80},
		},
		Case{
			Name: "unsubscribe/v4/truncated-filter", Version: codec.V311, Err: codec.ErrShortBuffer, Spec: "MQTT 3.1.1 §3.10.3",
			Raw: []byte{0xA2, 5, 0, 1, 0, 3, '#'},
		},
		Case{
			Name: "unsubscribe/v5/property-not-allowed", Version: codec.V5, Err: codec.ErrPropertyNotAllowed, Spec: "MQTT 5.0 §3.10.2.1",
			Raw: []byte{0xA2, 8, 0, 1, 2, 0x0B, 1, 0, 1, '#'}, // subscription identifier
		},
	)
}

func unsubackCases() []Case {
	return []Case{
		{
			Name: "unsuback/v3/packet-id", Version: codec.V31, Spec: "MQTT 3.1 §3.11",
			Raw: []byte{0xB0, 2, 0, 11}, Packet: &codec.Unsuback{PacketID: 11},
		},
		{
			Name: "unsuback/v4/packet-id", Version: codec.V311, Spec: "MQTT 3.1.1 §3.11",
			Raw: []byte{0xB0, 2, 0, 11}, Packet: &codec.Unsuback{PacketID: 11},
		},
		{
			Name: "unsuback/v5/codes", Version: codec.V5, Spec: "MQTT 5.0 §3.11.3",
			Raw:    []byte{0xB0, 5, 0, 11, 0, 0x00, 0x11},
			Packet: &codec.Unsuback{PacketID: 11, ReasonCodes: []codec.ReasonCode{codec.Success, codec.NoSubscriptionExisted}},
		},
		{
			Name: "unsuback/v5/properties", Version: codec.V5, Spec: "MQTT 5.0 §3.11.2.1",
			Raw:    []byte{0xB0, 8, 0, 11, 4, 0x1F, 0, 1, '?', 0x87},
			Packet: &codec.Unsuback{PacketID: 11, Props: codec.Properties{ReasonString: s("?")}, ReasonCodes: []codec.ReasonCode{codec.NotAuthorized}},
		},

		{
			Name: "unsuback/v4/bad-flags", Version: codec.V311, Err: codec.ErrBadFlags, Spec: "[MQTT-2.1.3-1]",
			Raw: []byte{0xB2, 2, 0, 11},
		},
		{
			Name: "unsuback/v4/packet-id-0", Version: codec.V311, Err: codec.ErrZeroPacketID, Spec: "[MQTT-2.3.1-1]",
			Raw: []byte{0xB0, 2, 0, 0},
		},
		{
			Name: "unsuback/v4/trailing-bytes", Version: codec.V311, Err: codec.ErrTrailingBytes, Spec: "MQTT 3.1.1 §3.11",
			Raw: []byte{0xB0, 3, 0, 11, 0},
		},
		{
			Name: "unsuback/v5/no-reason-codes", Version: codec.V5, Err: codec.ErrNoReasonCodes, Spec: "MQTT 5.0 §3.11.3",
			Raw: []byte{0xB0, 3, 0, 11, 0},
		},
		{
			Name: "unsuback/v5/reason-code-not-allowed", Version: codec.V5, Err: codec.ErrBadReasonCode, Spec: "MQTT 5.0 §3.11.3",
			Raw: []byte{0xB0, 4, 0, 11, 0, 0x10},
		},
	}
}
