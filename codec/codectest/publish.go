package codectest

import (
	"bytes"

	"github.com/xmq-io/xmq/codec"
)

func publishCases() []Case {
	long := bytes.Repeat([]byte{'x'}, 200)
	cases := []Case{
		{
			Name: "publish/v3/qos0", Version: codec.V31, Spec: "MQTT 3.1 §3.3",
			Raw:    []byte{0x30, 10, 0, 3, 'a', '/', 'b', 'h', 'e', 'l', 'l', 'o'},
			Packet: &codec.Publish{Topic: s("a/b"), Payload: s("hello")},
		},
		{
			Name: "publish/v3/qos1", Version: codec.V31, Spec: "MQTT 3.1 §3.3",
			Raw:    []byte{0x32, 12, 0, 3, 'a', '/', 'b', 0, 1, 'h', 'e', 'l', 'l', 'o'},
			Packet: &codec.Publish{QoS: 1, Topic: s("a/b"), PacketID: 1, Payload: s("hello")},
		},
		{
			Name: "publish/v4/qos0", Version: codec.V311, Spec: "MQTT 3.1.1 §3.3",
			Raw:    []byte{0x30, 10, 0, 3, 'a', '/', 'b', 'h', 'e', 'l', 'l', 'o'},
			Packet: &codec.Publish{Topic: s("a/b"), Payload: s("hello")},
		},
		{
			Name: "publish/v4/qos0-retain", Version: codec.V311, Spec: "MQTT 3.1.1 §3.3.1.3",
			Raw:    []byte{0x31, 10, 0, 3, 'a', '/', 'b', 'h', 'e', 'l', 'l', 'o'},
			Packet: &codec.Publish{Retain: true, Topic: s("a/b"), Payload: s("hello")},
		},
		{
			Name: "publish/v4/qos1", Version: codec.V311, Spec: "MQTT 3.1.1 §3.3.2.2",
			Raw:    []byte{0x32, 12, 0, 3, 'a', '/', 'b', 0, 7, 'h', 'e', 'l', 'l', 'o'},
			Packet: &codec.Publish{QoS: 1, Topic: s("a/b"), PacketID: 7, Payload: s("hello")},
		},
		{
			Name: "publish/v4/qos2-dup-retain", Version: codec.V311, Spec: "MQTT 3.1.1 §3.3.1",
			Raw:    []byte{0x3D, 12, 0, 3, 'a', '/', 'b', 0xFF, 0xFF, 'h', 'e', 'l', 'l', 'o'},
			Packet: &codec.Publish{Dup: true, QoS: 2, Retain: true, Topic: s("a/b"), PacketID: 65535, Payload: s("hello")},
		},
		{
			Name: "publish/v4/empty-payload", Version: codec.V311, Spec: "MQTT 3.1.1 §3.3.3",
			Raw:    []byte{0x30, 5, 0, 3, 'a', '/', 'b'},
			Packet: &codec.Publish{Topic: s("a/b")},
		},
		{
			Name: "publish/v4/utf8-topic", Version: codec.V311, Spec: "MQTT 3.1.1 §1.5.3",
			Raw:    []byte{0x30, 9, 0, 6, 0xC3, 0xA4, '/', 0xE2, 0x82, 0xAC, 'x'}, // "ä/€"
			Packet: &codec.Publish{Topic: s("ä/€"), Payload: s("x")},
		},
		{
			Name: "publish/v4/dollar-topic", Version: codec.V311, Spec: "MQTT 3.1.1 §4.7.2",
			Raw:    []byte{0x30, 9, 0, 6, '$', 'S', 'Y', 'S', '/', 'x', '1'},
			Packet: &codec.Publish{Topic: s("$SYS/x"), Payload: s("1")},
		},
		{
			Name: "publish/v4/two-byte-remaining-length", Version: codec.V311, Spec: "MQTT 3.1.1 §2.2.3",
			Raw:    append([]byte{0x30, 0xCD, 0x01, 0, 3, 'a', '/', 'b'}, long...), // 205
			Packet: &codec.Publish{Topic: s("a/b"), Payload: long},
		},
		{
			Name: "publish/v5/qos0", Version: codec.V5, Spec: "MQTT 5.0 §3.3",
			Raw:    []byte{0x30, 11, 0, 3, 'a', '/', 'b', 0, 'h', 'e', 'l', 'l', 'o'},
			Packet: &codec.Publish{Topic: s("a/b"), Payload: s("hello")},
		},
		{
			Name: "publish/v5/qos2", Version: codec.V5, Spec: "MQTT 5.0 §3.3",
			Raw:    []byte{0x34, 13, 0, 3, 'a', '/', 'b', 0, 9, 0, 'h', 'e', 'l', 'l', 'o'},
			Packet: &codec.Publish{QoS: 2, Topic: s("a/b"), PacketID: 9, Payload: s("hello")},
		},
		{
			Name: "publish/v5/qos1-properties", Version: codec.V5, Spec: "MQTT 5.0 §3.3.2.3",
			Raw: []byte{
				0x32, 57,
				0, 3, 'a', '/', 'b',
				0, 1, // packet identifier
				47,      // property length
				0x01, 1, // payload format indicator
				0x02, 0, 0, 0, 60, // message expiry interval
				0x23, 0, 3, // topic alias
				0x03, 0, 4, 'j', 's', 'o', 'n', // content type
				0x08, 0, 3, 'r', '/', '1', // response topic
				0x09, 0, 2, 'i', 'd', // correlation data
				0x0B, 5, // subscription identifier
				0x0B, 0xAC, 0x02, // subscription identifier 300: may repeat
				0x26, 0, 1, 'a', 0, 1, '1', // user property
				0x26, 0, 1, 'a', 0, 1, '2', // same key again: order and repeats are kept
				'h', 'i',
			},
			Packet: &codec.Publish{QoS: 1, Topic: s("a/b"), PacketID: 1, Payload: s("hi"),
				Props: props(codec.Properties{ContentType: s("json"), ResponseTopic: s("r/1"), CorrelationData: s("id"),
					SubscriptionIDs: []uint32{5, 300},
					User:            []codec.UserProperty{{Key: s("a"), Value: s("1")}, {Key: s("a"), Value: s("2")}}},
					num{codec.PropPayloadFormat, 1}, num{codec.PropMessageExpiry, 60}, num{codec.PropTopicAlias, 3})},
		},
		{
			Name: "publish/v5/topic-alias-only", Version: codec.V5, Spec: "MQTT 5.0 §3.3.2.3.4",
			Raw:    []byte{0x30, 7, 0, 0, 3, 0x23, 0, 1, 'x'},
			Packet: &codec.Publish{Props: props(codec.Properties{}, num{codec.PropTopicAlias, 1}), Payload: s("x")},
		},
		{
			Name: "publish/v5/property-order", Version: codec.V5, Spec: "MQTT 5.0 §2.2.2.2", NonCanonical: true,
			Raw: []byte{
				0x30, 19,
				0, 3, 'a', '/', 'b',
				12,
				0x26, 0, 1, 'k', 0, 1, 'v', // user property before the expiry: any order is valid
				0x02, 0, 0, 0, 9,
				'p',
			},
			Packet: &codec.Publish{Topic: s("a/b"), Payload: s("p"),
				Props: props(codec.Properties{User: []codec.UserProperty{{Key: s("k"), Value: s("v")}}},
					num{codec.PropMessageExpiry, 9})},
		},

		// Malformed.
		{
			Name: "publish/v4/qos3", Version: codec.V311, Err: codec.ErrBadQoS, Spec: "[MQTT-3.3.1-4]",
			Raw: []byte{0x36, 12, 0, 3, 'a', '/', 'b', 0, 1, 'h', 'e', 'l', 'l', 'o'},
		},
		{
			Name: "publish/v5/qos3", Version: codec.V5, Err: codec.ErrBadQoS, Spec: "[MQTT-3.3.1-4]",
			Raw: []byte{0x36, 8, 0, 3, 'a', '/', 'b', 0, 1, 0},
		},
		{
			Name: "publish/v4/dup-qos0", Version: codec.V311, Err: codec.ErrDupQoS0, Spec: "[MQTT-3.3.1-2]",
			Raw: []byte{0x38, 10, 0, 3, 'a', '/', 'b', 'h', 'e', 'l', 'l', 'o'},
		},
		{
			Name: "publish/v4/topic-plus", Version: codec.V311, Err: codec.ErrTopicWildcard, Spec: "[MQTT-3.3.2-2]",
			Raw: []byte{0x30, 6, 0, 3, 'a', '/', '+', 'x'},
		},
		{
			Name: "publish/v4/topic-hash", Version: codec.V311, Err: codec.ErrTopicWildcard, Spec: "[MQTT-3.3.2-2]",
			Raw: []byte{0x30, 4, 0, 1, '#', 'x'},
		},
		{
			Name: "publish/v5/topic-plus", Version: codec.V5, Err: codec.ErrTopicWildcard, Spec: "[MQTT-3.3.2-2]",
			Raw: []byte{0x30, 7, 0, 3, '+', '/', 'b', 0, 'x'},
		},
		{
			Name: "publish/v3/empty-topic", Version: codec.V31, Err: codec.ErrTopicEmpty, Spec: "[MQTT-4.7.3-1]",
			Raw: []byte{0x30, 3, 0, 0, 'x'},
		},
		{
			Name: "publish/v4/empty-topic", Version: codec.V311, Err: codec.ErrTopicEmpty, Spec: "[MQTT-4.7.3-1]",
			Raw: []byte{0x30, 7, 0, 0, 'h', 'e', 'l', 'l', 'o'},
		},
		{
			Name: "publish/v5/empty-topic-without-alias", Version: codec.V5, Err: codec.ErrTopicNoAlias, Spec: "[MQTT-3.3.4-4]",
			Raw: []byte{0x30, 8, 0, 0, 0, 'h', 'e', 'l', 'l', 'o'},
		},
		{
			Name: "publish/v4/topic-bad-utf8", Version: codec.V311, Err: codec.ErrBadUTF8, Spec: "[MQTT-1.5.4-1]",
			Raw: []byte{0x30, 7, 0, 2, 0xC3, 0x28, 'h', 'i', '!'},
		},
		{
			Name: "publish/v4/topic-nul", Version: codec.V311, Err: codec.ErrBadUTF8, Spec: "[MQTT-1.5.4-2]",
			Raw: []byte{0x30, 6, 0, 3, 'a', 0, 'b', 'x'},
		},
		{
			Name: "publish/v4/topic-surrogate", Version: codec.V311, Err: codec.ErrBadUTF8, Spec: "[MQTT-1.5.4-1]",
			Raw: []byte{0x30, 6, 0, 3, 0xED, 0xA0, 0x80, 'x'}, // U+D800
		},
		{
			Name: "publish/v4/topic-overlong-nul", Version: codec.V311, Err: codec.ErrBadUTF8, Spec: "[MQTT-1.5.4-1]",
			Raw: []byte{0x30, 5, 0, 2, 0xC0, 0x80, 'x'}, // U+0000 in two bytes
		},
		{
			Name: "publish/v5/topic-bad-utf8", Version: codec.V5, Err: codec.ErrBadUTF8, Spec: "[MQTT-1.5.4-1]",
			Raw: []byte{0x30, 5, 0, 2, 0xFF, 'a', 0},
		},
		{
			Name: "publish/v4/packet-id-0", Version: codec.V311, Err: codec.ErrZeroPacketID, Spec: "[MQTT-2.3.1-1]",
			Raw: []byte{0x32, 12, 0, 3, 'a', '/', 'b', 0, 0, 'h', 'e', 'l', 'l', 'o'},
		},
		{
			Name: "publish/v5/packet-id-0", Version: codec.V5, Err: codec.ErrZeroPacketID, Spec: "[MQTT-2.2.1-3]",
			Raw: []byte{0x34, 8, 0, 3, 'a', '/', 'b', 0, 0, 0},
		},
		{
			Name: "publish/v4/truncated-topic", Version: codec.V311, Err: codec.ErrShortBuffer, Spec: "MQTT 3.1.1 §1.5.3",
			Raw: []byte{0x30, 3, 0, 5, 'a'},
		},
		{
			Name: "publish/v4/missing-packet-id", Version: codec.V311, Err: codec.ErrShortBuffer, Spec: "MQTT 3.1.1 §3.3.2.2",
			Raw: []byte{0x32, 6, 0, 3, 'a', '/', 'b', 0},
		},
		{
			Name: "publish/v5/missing-properties", Version: codec.V5, Err: codec.ErrShortBuffer, Spec: "MQTT 5.0 §3.3.2.3",
			Raw: []byte{0x30, 5, 0, 3, 'a', '/', 'b'},
		},
		{
			Name: "publish/v5/response-topic-wildcard", Version: codec.V5, Err: codec.ErrTopicWildcard, Spec: "[MQTT-3.3.2-14]",
			Raw: []byte{0x30, 13, 0, 3, 'a', '/', 'b', 6, 0x08, 0, 3, 'r', '/', '#', 'x'},
		},
	}
	return cases
}
