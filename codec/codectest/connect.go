package codectest

import "github.com/xmq-io/xmq/codec"

func connectCases() []Case {
	return []Case{
		// Valid.
		{
			Name: "connect/v3/minimal", Version: codec.V31, Spec: "MQTT 3.1 §3.1",
			Raw: []byte{
				0x10, 16, // CONNECT, remaining length
				0, 6, 'M', 'Q', 'I', 's', 'd', 'p', // protocol name
				3,     // protocol level
				0x02,  // clean session
				0, 30, // keep alive
				0, 2, 'c', '1', // client identifier
			},
			Packet: &codec.Connect{ProtocolVersion: codec.V31, CleanStart: true, KeepAlive: 30, ClientID: s("c1")},
		},
		{
			Name: "connect/v3/will-user-password", Version: codec.V31, Spec: "MQTT 3.1 §3.1",
			Raw: []byte{
				0x10, 32,
				0, 6, 'M', 'Q', 'I', 's', 'd', 'p', 3,
				0xEE, // user, password, will retain, will QoS 1, will, clean
				0, 10,
				0, 2, 'c', '1',
				0, 3, 'w', '/', 't', // will topic
				0, 3, 'b', 'y', 'e', // will message
				0, 1, 'u', // user name
				0, 1, 'p', // password
			},
			Packet: &codec.Connect{ProtocolVersion: codec.V31, CleanStart: true, KeepAlive: 10, ClientID: s("c1"),
				WillFlag: true, WillQoS: 1, WillRetain: true, WillTopic: s("w/t"), WillPayload: s("bye"),
				UsernameFlag: true, Username: s("u"), PasswordFlag: true, Password: s("p")},
		},
		{
			Name: "connect/v4/minimal", Version: codec.V311, Spec: "MQTT 3.1.1 §3.1",
			Raw: []byte{
				0x10, 16,
				0, 4, 'M', 'Q', 'T', 'T', 4,
				0x02, 0, 60,
				0, 4, 'z', 'e', 'n', '3',
			},
			Packet: &codec.Connect{ProtocolVersion: codec.V311, CleanStart: true, KeepAlive: 60, ClientID: s("zen3")},
		},
		{
			Name: "connect/v4/empty-client-id", Version: codec.V311, Spec: "[MQTT-3.1.3-6]",
			Raw: []byte{
				0x10, 12,
				0, 4, 'M', 'Q', 'T', 'T', 4,
				0x02, 0, 0,
				0, 0, // zero-length client identifier
			},
			Packet: &codec.Connect{ProtocolVersion: codec.V311, CleanStart: true},
		},
		{
			Name: "connect/v4/persistent-session", Version: codec.V311, Spec: "MQTT 3.1.1 §3.1.2.4",
			Raw: []byte{
				0x10, 16,
				0, 4, 'M', 'Q', 'T', 'T', 4,
				0x00, 0xFF, 0xFF, // no clean session, keep alive 65535
				0, 4, 'z', 'e', 'n', '3',
			},
			Packet: &codec.Connect{ProtocolVersion: codec.V311, KeepAlive: 65535, ClientID: s("zen3")},
		},
		{
			Name: "connect/v4/will-user-password", Version: codec.V311, Spec: "MQTT 3.1.1 §3.1.3",
			Raw: []byte{
				0x10, 43,
				0, 4, 'M', 'Q', 'T', 'T', 4,
				0xF6, // user, password, will retain, will QoS 2, will, clean
				0, 45,
				0, 4, 'z', 'e', 'n', '3',
				0, 5, 'l', 'w', 't', '/', 'x',
				0, 4, 'd', 'e', 'a', 'd',
				0, 4, 'u', 's', 'e', 'r',
				0, 6, 's', 'e', 'c', 'r', 'e', 't',
			},
			Packet: &codec.Connect{ProtocolVersion: codec.V311, CleanStart: true, KeepAlive: 45, ClientID: s("zen3"),
				WillFlag: true, WillQoS: 2, WillRetain: true, WillTopic: s("lwt/x"), WillPayload: s("dead"),
				UsernameFlag: true, Username: s("user"), PasswordFlag: true, Password: s("secret")},
		},
		{
			Name: "connect/v4/username-only", Version: codec.V311, Spec: "MQTT 3.1.1 §3.1.2.8",
			Raw: []byte{
				0x10, 22,
				0, 4, 'M', 'Q', 'T', 'T', 4,
				0x82, 0, 60,
				0, 4, 'z', 'e', 'n', '3',
				0, 4, 'u', 's', 'e', 'r',
			},
			Packet: &codec.Connect{ProtocolVersion: codec.V311, CleanStart: true, KeepAlive: 60, ClientID: s("zen3"),
				UsernameFlag: true, Username: s("user")},
		},
		{
			Name: "connect/v4/bridge", Version: codec.V311, Spec: "Mosquitto bridge protocol (try_private)",
			Raw: []byte{
				0x10, 16,
				0, 4, 'M', 'Q', 'T', 'T', 0x84, // level 4 with the bridge bit
				0x00, 0, 60,
				0, 4, 'z', 'e', 'n', '3',
			},
			Packet: &codec.Connect{ProtocolVersion: codec.V311, Bridge: true, KeepAlive: 60, ClientID: s("zen3")},
		},
		{
			Name: "connect/v3/bridge", Version: codec.V31, Spec: "Mosquitto bridge protocol (try_private)",
			Raw: []byte{
				0x10, 16,
				0, 6, 'M', 'Q', 'I', 's', 'd', 'p', 0x83,
				0x02, 0, 30,
				0, 2, 'c', '1',
			},
			Packet: &codec.Connect{ProtocolVersion: codec.V31, Bridge: true, CleanStart: true, KeepAlive: 30, ClientID: s("c1")},
		},
		{
			Name: "connect/v5/minimal", Version: codec.V5, Spec: "MQTT 5.0 §3.1",
			Raw: []byte{
				0x10, 17,
				0, 4, 'M', 'Q', 'T', 'T', 5,
				0x02, 0, 60,
				0, // property length
				0, 4, 'z', 'e', 'n', '3',
			},
			Packet: &codec.Connect{ProtocolVersion: codec.V5, CleanStart: true, KeepAlive: 60, ClientID: s("zen3")},
		},
		{
			Name: "connect/v5/full", Version: codec.V5, Spec: "MQTT 5.0 §3.1.2.11 §3.1.3.2",
			Raw: []byte{
				0x10, 112,
				0, 4, 'M', 'Q', 'T', 'T', 5,
				0xCE, // user, password, will QoS 1, will, clean start
				0, 60,
				41,                 // property length
				0x11, 0, 0, 0, 120, // session expiry interval
				0x17, 0, // request problem information
				0x19, 1, // request response information
				0x21, 0, 10, // receive maximum
				0x22, 0, 5, // topic alias maximum
				0x27, 0, 0, 4, 0, // maximum packet size 1024
				0x15, 0, 5, 'S', 'C', 'R', 'A', 'M', // authentication method
				0x16, 0, 3, 'x', 'y', 'z', // authentication data
				0x26, 0, 1, 'k', 0, 1, 'v', // user property
				0, 4, 'z', 'e', 'n', '3',
				37,      // will property length
				0x01, 1, // payload format indicator
				0x02, 0, 0, 0, 60, // message expiry interval
				0x18, 0, 0, 0, 5, // will delay interval
				0x03, 0, 4, 't', 'e', 'x', 't', // content type
				0x08, 0, 3, 'r', '/', 't', // response topic
				0x09, 0, 2, 1, 2, // correlation data
				0x26, 0, 1, 'a', 0, 1, 'b', // user property
				0, 3, 'w', '/', 't',
				0, 3, 'b', 'y', 'e',
				0, 1, 'u',
				0, 1, 'p',
			},
			Packet: &codec.Connect{ProtocolVersion: codec.V5, CleanStart: true, KeepAlive: 60, ClientID: s("zen3"),
				Props: props(codec.Properties{AuthMethod: s("SCRAM"), AuthData: s("xyz"),
					User: []codec.UserProperty{{Key: s("k"), Value: s("v")}}},
					num{codec.PropSessionExpiry, 120}, num{codec.PropRequestProblemInfo, 0},
					num{codec.PropRequestResponseInfo, 1}, num{codec.PropReceiveMaximum, 10},
					num{codec.PropTopicAliasMaximum, 5}, num{codec.PropMaximumPacketSize, 1024}),
				WillFlag: true, WillQoS: 1,
				WillProps: props(codec.Properties{ContentType: s("text"), ResponseTopic: s("r/t"),
					CorrelationData: []byte{1, 2}, User: []codec.UserProperty{{Key: s("a"), Value: s("b")}}},
					num{codec.PropPayloadFormat, 1}, num{codec.PropMessageExpiry, 60}, num{codec.PropWillDelay, 5}),
				WillTopic: s("w/t"), WillPayload: s("bye"),
				UsernameFlag: true, Username: s("u"), PasswordFlag: true, Password: s("p")},
		},
		{
			Name: "connect/v5/password-without-username", Version: codec.V5, Spec: "MQTT 5.0 §3.1.2.9",
			Raw: []byte{
				0x10, 21,
				0, 4, 'M', 'Q', 'T', 'T', 5,
				0x42, 0, 60, // password, clean start: allowed in MQTT 5
				0,
				0, 4, 'z', 'e', 'n', '3',
				0, 2, 'p', 'w',
			},
			Packet: &codec.Connect{ProtocolVersion: codec.V5, CleanStart: true, KeepAlive: 60, ClientID: s("zen3"),
				PasswordFlag: true, Password: s("pw")},
		},
		{
			Name: "connect/v5/will-empty-properties-and-payload", Version: codec.V5, Spec: "MQTT 5.0 §3.1.3.2",
			Raw: []byte{
				0x10, 25,
				0, 4, 'M', 'Q', 'T', 'T', 5,
				0x06, 0, 60, // will, clean start
				0,
				0, 4, 'z', 'e', 'n', '3',
				0, // will property length
				0, 3, 'w', '/', 't',
				0, 0, // empty will payload
			},
			Packet: &codec.Connect{ProtocolVersion: codec.V5, CleanStart: true, KeepAlive: 60, ClientID: s("zen3"),
				WillFlag: true, WillTopic: s("w/t")},
		},

		// Malformed.
		{
			Name: "connect/v4/bad-flags", Version: codec.V311, Err: codec.ErrBadFlags, Spec: "[MQTT-2.1.3-1]",
			Raw: []byte{0x11, 16, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 60, 0, 4, 'z', 'e', 'n', '3'},
		},
		{
			Name: "connect/v4/reserved-bit", Version: codec.V311, Err: codec.ErrConnectReserved, Spec: "[MQTT-3.1.2-3]",
			Raw: []byte{0x10, 16, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x03, 0, 60, 0, 4, 'z', 'e', 'n', '3'},
		},
		{
			Name: "connect/v5/reserved-bit", Version: codec.V5, Err: codec.ErrConnectReserved, Spec: "[MQTT-3.1.2-3]",
			Raw: []byte{0x10, 17, 0, 4, 'M', 'Q', 'T', 'T', 5, 0x01, 0, 60, 0, 0, 4, 'z', 'e', 'n', '3'},
		},
		{
			Name: "connect/v4/will-qos-without-will", Version: codec.V311, Err: codec.ErrWillFlags, Spec: "[MQTT-3.1.2-13]",
			Raw: []byte{0x10, 16, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x0A, 0, 60, 0, 4, 'z', 'e', 'n', '3'},
		},
		{
			Name: "connect/v4/will-retain-without-will", Version: codec.V311, Err: codec.ErrWillFlags, Spec: "[MQTT-3.1.2-15]",
			Raw: []byte{0x10, 16, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x22, 0, 60, 0, 4, 'z', 'e', 'n', '3'},
		},
		{
			Name: "connect/v5/will-qos-without-will", Version: codec.V5, Err: codec.ErrWillFlags, Spec: "[MQTT-3.1.2-11]",
			Raw: []byte{0x10, 17, 0, 4, 'M', 'Q', 'T', 'T', 5, 0x12, 0, 60, 0, 0, 4, 'z', 'e', 'n', '3'},
		},
		{
			Name: "connect/v4/will-qos-3", Version: codec.V311, Err: codec.ErrWillQoS, Spec: "[MQTT-3.1.2-14]",
			Raw: []byte{
				0x10, 23,
				0, 4, 'M', 'Q', 'T', 'T', 4,
				0x1E, 0, 60, // will QoS 3, will, clean
				0, 4, 'z', 'e', 'n', '3',
				0, 3, 'w', '/', 't',
				0, 0,
			},
		},
		{
			Name: "connect/v4/password-without-username", Version: codec.V311, Err: codec.ErrPasswordNoUser, Spec: "[MQTT-3.1.2-22]",
			Raw: []byte{0x10, 20, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x42, 0, 60, 0, 4, 'z', 'e', 'n', '3', 0, 2, 'p', 'w'},
		},
		{
			Name: "connect/v3/password-without-username", Version: codec.V31, Err: codec.ErrPasswordNoUser, Spec: "MQTT 3.1 §3.1",
			Raw: []byte{0x10, 20, 0, 6, 'M', 'Q', 'I', 's', 'd', 'p', 3, 0x42, 0, 60, 0, 2, 'c', '1', 0, 2, 'p', 'w'},
		},
		{
			Name: "connect/v4/bad-protocol-name", Version: codec.V311, Err: codec.ErrBadProtocolName, Spec: "[MQTT-3.1.2-1]",
			Raw: []byte{0x10, 16, 0, 4, 'M', 'Q', 'T', 'X', 4, 0x02, 0, 60, 0, 4, 'z', 'e', 'n', '3'},
		},
		{
			Name: "connect/v4/lower-case-protocol-name", Version: codec.V311, Err: codec.ErrBadProtocolName, Spec: "[MQTT-3.1.2-1]",
			Raw: []byte{0x10, 16, 0, 4, 'm', 'q', 't', 't', 4, 0x02, 0, 60, 0, 4, 'z', 'e', 'n', '3'},
		},
		{
			Name: "connect/v4/mqtt-level-3", Version: codec.V311, Err: codec.ErrBadProtocolVersion, Spec: "[MQTT-3.1.2-2]",
			Raw: []byte{0x10, 16, 0, 4, 'M', 'Q', 'T', 'T', 3, 0x02, 0, 60, 0, 4, 'z', 'e', 'n', '3'},
		},
		{
			Name: "connect/v5/mqtt-level-6", Version: codec.V5, Err: codec.ErrBadProtocolVersion, Spec: "[MQTT-3.1.2-2]",
			Raw: []byte{0x10, 17, 0, 4, 'M', 'Q', 'T', 'T', 6, 0x02, 0, 60, 0, 0, 4, 'z', 'e', 'n', '3'},
		},
		{
			Name: "connect/v5/bridge-bit", Version: codec.V5, Err: codec.ErrBadProtocolVersion, Spec: "[MQTT-3.1.2-2]: MQTT 5 has No Local, not the bridge bit",
			Raw: []byte{0x10, 17, 0, 4, 'M', 'Q', 'T', 'T', 0x85, 0x02, 0, 60, 0, 0, 4, 'z', 'e', 'n', '3'},
		},
		{
			Name: "connect/v4/mqtt-bridge-level-3", Version: codec.V311, Err: codec.ErrBadProtocolVersion, Spec: "[MQTT-3.1.2-2]",
			Raw: []byte{0x10, 16, 0, 4, 'M', 'Q', 'T', 'T', 0x83, 0x02, 0, 60, 0, 4, 'z', 'e', 'n', '3'},
		},
		{
			Name: "connect/v3/mqisdp-level-4", Version: codec.V31, Err: codec.ErrBadProtocolVersion, Spec: "[MQTT-3.1.2-2]",
			Raw: []byte{0x10, 16, 0, 6, 'M', 'Q', 'I', 's', 'd', 'p', 4, 0x02, 0, 60, 0, 2, 'c', '1'},
		},
		{
			Name: "connect/v4/client-id-bad-utf8", Version: codec.V311, Err: codec.ErrBadUTF8, Spec: "[MQTT-1.5.4-1]",
			Raw: []byte{0x10, 14, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 60, 0, 2, 0xC3, 0x28},
		},
		{
			Name: "connect/v4/client-id-nul", Version: codec.V311, Err: codec.ErrBadUTF8, Spec: "[MQTT-1.5.4-2]",
			Raw: []byte{0x10, 15, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 60, 0, 3, 'a', 0, 'b'},
		},
		{
			Name: "connect/v4/username-surrogate", Version: codec.V311, Err: codec.ErrBadUTF8, Spec: "[MQTT-1.5.4-1]",
			Raw: []byte{0x10, 21, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x82, 0, 60, 0, 4, 'z', 'e', 'n', '3',
				0, 3, 0xED, 0xA0, 0x80}, // U+D800 encoded as UTF-8
		},
		{
			Name: "connect/v4/will-topic-wildcard", Version: codec.V311, Err: codec.ErrTopicWildcard, Spec: "[MQTT-3.1.3-11] [MQTT-4.7.1-1]",
			Raw: []byte{0x10, 23, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x06, 0, 60, 0, 4, 'z', 'e', 'n', '3',
				0, 3, 'w', '/', '#', 0, 0},
		},
		{
			Name: "connect/v4/will-topic-empty", Version: codec.V311, Err: codec.ErrTopicEmpty, Spec: "[MQTT-4.7.3-1]",
			Raw: []byte{0x10, 20, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x06, 0, 60, 0, 4, 'z', 'e', 'n', '3',
				0, 0, 0, 0},
		},
		{
			Name: "connect/v4/trailing-bytes", Version: codec.V311, Err: codec.ErrTrailingBytes, Spec: "MQTT 3.1.1 §3.1.3",
			Raw: []byte{0x10, 17, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 60, 0, 4, 'z', 'e', 'n', '3', 0},
		},
		{
			Name: "connect/v4/truncated-protocol-name", Version: codec.V311, Err: codec.ErrShortBuffer, Spec: "MQTT 3.1.1 §1.5.3",
			Raw: []byte{0x10, 4, 0, 4, 'M', 'Q'},
		},
		{
			Name: "connect/v4/truncated-keep-alive", Version: codec.V311, Err: codec.ErrShortBuffer, Spec: "MQTT 3.1.1 §3.1.2.10",
			Raw: []byte{0x10, 9, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0},
		},
		{
			Name: "connect/v4/missing-username", Version: codec.V311, Err: codec.ErrShortBuffer, Spec: "[MQTT-3.1.2-19]",
			Raw: []byte{0x10, 16, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x82, 0, 60, 0, 4, 'z', 'e', 'n', '3'},
		},
		{
			Name: "connect/v4/missing-will-payload", Version: codec.V311, Err: codec.ErrShortBuffer, Spec: "[MQTT-3.1.2-9]",
			Raw: []byte{0x10, 21, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x06, 0, 60, 0, 4, 'z', 'e', 'n', '3', 0, 3, 'w', '/', 't'},
		},
		{
			Name: "connect/v5/missing-properties", Version: codec.V5, Err: codec.ErrShortBuffer, Spec: "MQTT 5.0 §3.1.2.11",
			Raw: []byte{0x10, 10, 0, 4, 'M', 'Q', 'T', 'T', 5, 0x02, 0, 60},
		},
	}
}

func connackCases() []Case {
	cases := []Case{
		{
			Name: "connack/v3/accepted", Version: codec.V31, Spec: "MQTT 3.1 §3.2",
			Raw: []byte{0x20, 2, 0, 0}, Packet: &codec.Connack{},
		},
		{
			Name: "connack/v4/session-present", Version: codec.V311, Spec: "MQTT 3.1.1 §3.2.2.2",
			Raw: []byte{0x20, 2, 1, 0}, Packet: &codec.Connack{SessionPresent: true},
		},
		{
			Name: "connack/v5/success", Version: codec.V5, Spec: "MQTT 5.0 §3.2",
			Raw: []byte{0x20, 3, 0, 0, 0}, Packet: &codec.Connack{},
		},
		{
			Name: "connack/v5/properties", Version: codec.V5, Spec: "MQTT 5.0 §3.2.2.3",
			Raw: []byte{
				0x20, 72,
				0, 0, // flags, reason code
				69,               // property length
				0x11, 0, 0, 0, 0, // session expiry interval 0, present
				0x13, 0, 30, // server keep alive
				0x21, 0, 20, // receive maximum
				0x22, 0, 10, // topic alias maximum
				0x24, 1, // maximum QoS
				0x25, 0, // retain available: no
				0x27, 0, 1, 0, 0, // maximum packet size 65536
				0x28, 1, // wildcard subscription available
				0x29, 0, // subscription identifiers available: no
				0x2A, 1, // shared subscription available
				0x12, 0, 6, 'a', 'u', 't', 'o', '-', '1', // assigned client identifier
				0x15, 0, 1, 'm', // authentication method
				0x16, 0, 1, 0xFF, // authentication data
				0x1A, 0, 2, 'r', 'i', // response information
				0x1C, 0, 3, 's', 'r', 'v', // server reference
				0x1F, 0, 2, 'o', 'k', // reason string
				0x26, 0, 1, 'k', 0, 1, 'v', // user property
			},
			Packet: &codec.Connack{Props: props(codec.Properties{AssignedClientID: s("auto-1"), AuthMethod: s("m"),
				AuthData: []byte{0xFF}, ResponseInfo: s("ri"), ServerReference: s("srv"), ReasonString: s("ok"),
				User: []codec.UserProperty{{Key: s("k"), Value: s("v")}}},
				num{codec.PropSessionExpiry, 0}, num{codec.PropServerKeepAlive, 30}, num{codec.PropReceiveMaximum, 20},
				num{codec.PropTopicAliasMaximum, 10}, num{codec.PropMaximumQoS, 1}, num{codec.PropRetainAvailable, 0},
				num{codec.PropMaximumPacketSize, 65536}, num{codec.PropWildcardSubAvailable, 1},
				num{codec.PropSubIDAvailable, 0}, num{codec.PropSharedSubAvailable, 1})},
		},
		{
			Name: "connack/v5/not-authorized", Version: codec.V5, Spec: "MQTT 5.0 §3.2.2.2",
			Raw:    []byte{0x20, 8, 0, 0x87, 5, 0x1F, 0, 2, 'n', 'o'},
			Packet: &codec.Connack{ReasonCode: codec.NotAuthorized, Props: codec.Properties{ReasonString: s("no")}},
		},

		// Malformed.
		{
			Name: "connack/v4/bad-flags", Version: codec.V311, Err: codec.ErrBadFlags, Spec: "[MQTT-2.1.3-1]",
			Raw: []byte{0x21, 2, 0, 0},
		},
		{
			Name: "connack/v4/reserved-acknowledge-flags", Version: codec.V311, Err: codec.ErrConnackFlags, Spec: "[MQTT-3.2.2-1]",
			Raw: []byte{0x20, 2, 0x02, 0},
		},
		{
			Name: "connack/v4/return-code-6", Version: codec.V311, Err: codec.ErrBadReasonCode, Spec: "MQTT 3.1.1 §3.2.2.3",
			Raw: []byte{0x20, 2, 0, 6},
		},
		{
			Name: "connack/v4/trailing-bytes", Version: codec.V311, Err: codec.ErrTrailingBytes, Spec: "MQTT 3.1.1 §3.2",
			Raw: []byte{0x20, 3, 0, 0, 0},
		},
		{
			Name: "connack/v4/truncated", Version: codec.V311, Err: codec.ErrShortBuffer, Spec: "MQTT 3.1.1 §3.2",
			Raw: []byte{0x20, 1, 0},
		},
		{
			Name: "connack/v5/reason-code-not-allowed", Version: codec.V5, Err: codec.ErrBadReasonCode, Spec: "MQTT 5.0 §3.2.2.2",
			Raw: []byte{0x20, 3, 0, 0x10, 0},
		},
		{
			Name: "connack/v5/missing-properties", Version: codec.V5, Err: codec.ErrShortBuffer, Spec: "MQTT 5.0 §3.2.2.3",
			Raw: []byte{0x20, 2, 0, 0},
		},
	}
	// The 3.1.1 return codes map onto the MQTT 5 reason codes.
	for _, rc := range []struct {
		name string
		code byte
		rc   codec.ReasonCode
	}{
		{"unacceptable-protocol-version", 1, codec.UnsupportedProtocolVersion},
		{"identifier-rejected", 2, codec.ClientIdentifierNotValid},
		{"server-unavailable", 3, codec.ServerUnavailable},
		{"bad-username-or-password", 4, codec.BadUserNameOrPassword},
		{"not-authorized", 5, codec.NotAuthorized},
	} {
		for _, v := range []byte{codec.V31, codec.V311} {
			cases = append(cases, Case{
				Name: "connack/" + vname(v) + "/" + rc.name, Version: v, Spec: "MQTT 3.1.1 §3.2.2.3",
				Raw: []byte{0x20, 2, 0, rc.code}, Packet: &codec.Connack{ReasonCode: rc.rc},
			})
		}
	}
	return cases
}

// vname is the version part of a fixture name.
func vname(v byte) string {
	switch v {
	case codec.V31:
		return "v3"
	case codec.V311:
		return "v4"
	}
	return "v5"
}
