package codectest

import "github.com/xmq-io/xmq/codec"

// ackKinds are PUBACK, PUBREC, PUBREL and PUBCOMP with their fixed-header
// first byte (PUBREL's flags are 0010 [MQTT-3.6.1-1]).
var ackKinds = []struct {
	name  string
	kind  codec.Type
	first byte
}{
	{"puback", codec.PUBACK, 0x40},
	{"pubrec", codec.PUBREC, 0x50},
	{"pubrel", codec.PUBREL, 0x62},
	{"pubcomp", codec.PUBCOMP, 0x70},
}

func ackCases() []Case {
	var cases []Case
	for _, k := range ackKinds {
		for _, v := range Versions {
			cases = append(cases, Case{
				Name: k.name + "/" + vname(v) + "/packet-id", Version: v, Spec: "§3.4-3.7",
				Raw:    []byte{k.first, 2, 0x12, 0x34},
				Packet: &codec.Ack{Kind: k.kind, PacketID: 0x1234},
			})
		}
		cases = append(cases,
			Case{
				Name: k.name + "/v4/bad-flags", Version: codec.V311, Err: codec.ErrBadFlags, Spec: "[MQTT-2.1.3-1] [MQTT-3.6.1-1]",
				Raw: []byte{k.first ^ 0x02, 2, 0, 1},
			},
			Case{
				Name: k.name + "/v5/bad-flags", Version: codec.V5, Err: codec.ErrBadFlags, Spec: "[MQTT-2.1.3-1] [MQTT-3.6.1-1]",
				Raw: []byte{k.first | 0x08, 2, 0, 1},
			},
			Case{
				Name: k.name + "/v4/packet-id-0", Version: codec.V311, Err: codec.ErrZeroPacketID, Spec: "[MQTT-2.3.1-1]",
				Raw: []byte{k.first, 2, 0, 0},
			},
			Case{
				Name: k.name + "/v5/packet-id-0", Version: codec.V5, Err: codec.ErrZeroPacketID, Spec: "[MQTT-2.2.1-3]",
				Raw: []byte{k.first, 3, 0, 0, 0},
			},
			Case{
				Name: k.name + "/v4/trailing-bytes", Version: codec.V311, Err: codec.ErrTrailingBytes, Spec: "MQTT 3.1.1 §3.4.2",
				Raw: []byte{k.first, 3, 0, 1, 0}, // a reason code is MQTT 5 only
			},
			Case{
				Name: k.name + "/v4/truncated", Version: codec.V311, Err: codec.ErrShortBuffer, Spec: "MQTT 3.1.1 §3.4.2",
				Raw: []byte{k.first, 1, 0},
			},
		)
	}
	return append(cases,
		Case{
			Name: "puback/v5/no-matching-subscribers", Version: codec.V5, Spec: "MQTT 5.0 §3.4.2.1",
			Raw:    []byte{0x40, 3, 0, 1, 0x10},
			Packet: &codec.Ack{Kind: codec.PUBACK, PacketID: 1, ReasonCode: codec.NoMatchingSubscribers},
		},
		Case{
			Name: "puback/v5/properties", Version: codec.V5, Spec: "MQTT 5.0 §3.4.2.2",
			Raw: []byte{
				0x40, 18,
				0, 1, 0x80, // packet identifier, unspecified error
				14,
				0x1F, 0, 4, 'f', 'u', 'l', 'l', // reason string
				0x26, 0, 1, 'k', 0, 1, 'v', // user property
			},
			Packet: &codec.Ack{Kind: codec.PUBACK, PacketID: 1, ReasonCode: codec.UnspecifiedError,
				Props: codec.Properties{ReasonString: s("full"), User: []codec.UserProperty{{Key: s("k"), Value: s("v")}}}},
		},
		Case{
			Name: "puback/v5/success-empty-properties", Version: codec.V5, Spec: "[MQTT-3.4.2-1]", NonCanonical: true,
			Raw:    []byte{0x40, 4, 0, 1, 0, 0}, // the encoder omits both
			Packet: &codec.Ack{Kind: codec.PUBACK, PacketID: 1},
		},
		Case{
			Name: "puback/v5/success-no-properties", Version: codec.V5, Spec: "MQTT 5.0 §3.4.2.1", NonCanonical: true,
			Raw:    []byte{0x40, 3, 0, 1, 0},
			Packet: &codec.Ack{Kind: codec.PUBACK, PacketID: 1},
		},
		Case{
			Name: "pubrec/v5/quota-exceeded", Version: codec.V5, Spec: "MQTT 5.0 §3.5.2.1",
			Raw:    []byte{0x50, 3, 0, 2, 0x97},
			Packet: &codec.Ack{Kind: codec.PUBREC, PacketID: 2, ReasonCode: codec.QuotaExceeded},
		},
		Case{
			Name: "pubrel/v5/packet-id-not-found", Version: codec.V5, Spec: "MQTT 5.0 §3.6.2.1",
			Raw:    []byte{0x62, 3, 0, 3, 0x92},
			Packet: &codec.Ack{Kind: codec.PUBREL, PacketID: 3, ReasonCode: codec.PacketIdentifierNotFound},
		},
		Case{
			Name: "pubcomp/v5/success-reason-string", Version: codec.V5, Spec: "MQTT 5.0 §3.7.2.2",
			Raw:    []byte{0x70, 9, 0, 4, 0x00, 5, 0x1F, 0, 2, 'o', 'k'},
			Packet: &codec.Ack{Kind: codec.PUBCOMP, PacketID: 4, Props: codec.Properties{ReasonString: s("ok")}},
		},

		Case{
			Name: "puback/v5/reason-code-not-allowed", Version: codec.V5, Err: codec.ErrBadReasonCode, Spec: "MQTT 5.0 §3.4.2.1",
			Raw: []byte{0x40, 3, 0, 1, 0x04},
		},
		Case{
			Name: "pubrec/v5/reason-code-not-allowed", Version: codec.V5, Err: codec.ErrBadReasonCode, Spec: "MQTT 5.0 §3.5.2.1",
			Raw: []byte{0x50, 3, 0, 1, 0x92},
		},
		Case{
			Name: "pubrel/v5/reason-code-not-allowed", Version: codec.V5, Err: codec.ErrBadReasonCode, Spec: "MQTT 5.0 §3.6.2.1",
			Raw: []byte{0x62, 3, 0, 1, 0x80},
		},
		Case{
			Name: "pubcomp/v5/reason-code-not-allowed", Version: codec.V5, Err: codec.ErrBadReasonCode, Spec: "MQTT 5.0 §3.7.2.1",
			Raw: []byte{0x70, 3, 0, 1, 0x10},
		},
		Case{
			Name: "puback/v5/property-not-allowed", Version: codec.V5, Err: codec.ErrPropertyNotAllowed, Spec: "MQTT 5.0 §3.4.2.2",
			Raw: []byte{0x40, 7, 0, 1, 0, 3, 0x23, 0, 1}, // topic alias
		},
		Case{
			Name: "puback/v5/property-length-beyond-packet", Version: codec.V5, Err: codec.ErrPropertyLength, Spec: "MQTT 5.0 §2.2.2.1",
			Raw: []byte{0x40, 6, 0, 1, 0, 5, 0x1F, 0}, // property length beyond the packet
		},
	)
}
