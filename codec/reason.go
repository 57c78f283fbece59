package codec

import "fmt"

// ReasonCode is an MQTT 5.0 reason code [MQTT-2.4]. It implements error so
// that a handler can return the code it wants sent to the peer. For MQTT 3.1
// and 3.1.1 the codec maps CONNACK return codes and SUBACK codes to and from
// these values, so the broker speaks one vocabulary.
type ReasonCode byte

// Reason codes of MQTT 5.0, table 2-6.
const (
	Success                             ReasonCode = 0x00
	NormalDisconnection                 ReasonCode = 0x00
	GrantedQoS0                         ReasonCode = 0x00
	GrantedQoS1                         ReasonCode = 0x01
	GrantedQoS2                         ReasonCode = 0x02
	DisconnectWithWillMessage           ReasonCode = 0x04
	NoMatchingSubscribers               ReasonCode = 0x10
	NoSubscriptionExisted               ReasonCode = 0x11
	ContinueAuthentication              ReasonCode = 0x18
	ReAuthenticate                      ReasonCode = 0x19
	UnspecifiedError                    ReasonCode = 0x80
	MalformedPacket                     ReasonCode = 0x81
	ProtocolError                       ReasonCode = 0x82
	ImplementationSpecificError         ReasonCode = 0x83
	UnsupportedProtocolVersion          ReasonCode = 0x84
	ClientIdentifierNotValid            ReasonCode = 0x85
	BadUserNameOrPassword               ReasonCode = 0x86
	NotAuthorized                       ReasonCode = 0x87
	ServerUnavailable                   ReasonCode = 0x88
	ServerBusy                          ReasonCode = 0x89
	Banned                              ReasonCode = 0x8A
	ServerShuttingDown                  ReasonCode = 0x8B
	BadAuthenticationMethod             ReasonCode = 0x8C
	KeepAliveTimeout                    ReasonCode = 0x8D
	SessionTakenOver                    ReasonCode = 0x8E
	TopicFilterInvalid                  ReasonCode = 0x8F
	TopicNameInvalid                    ReasonCode = 0x90
	PacketIdentifierInUse               ReasonCode = 0x91
	PacketIdentifierNotFound            ReasonCode = 0x92
	ReceiveMaximumExceeded              ReasonCode = 0x93
	TopicAliasInvalid                   ReasonCode = 0x94
	PacketTooLarge                      ReasonCode = 0x95
	MessageRateTooHigh                  ReasonCode = 0x96
	QuotaExceeded                       ReasonCode = 0x97
	AdministrativeAction                ReasonCode = 0x98
	PayloadFormatInvalid                ReasonCode = 0x99
	RetainNotSupported                  ReasonCode = 0x9A
	QoSNotSupported                     ReasonCode = 0x9B
	UseAnotherServer                    ReasonCode = 0x9C
	ServerMoved                         ReasonCode = 0x9D
	SharedSubscriptionsNotSupported     ReasonCode = 0x9E
	ConnectionRateExceeded              ReasonCode = 0x9F
	MaximumConnectTime                  ReasonCode = 0xA0
	SubscriptionIdentifiersNotSupported ReasonCode = 0xA1
	WildcardSubscriptionsNotSupported   ReasonCode = 0xA2
)

var reasonNames = map[ReasonCode]string{
	0x00: "success", 0x01: "granted QoS 1", 0x02: "granted QoS 2", 0x04: "disconnect with will message",
	0x10: "no matching subscribers", 0x11: "no subscription existed", 0x18: "continue authentication",
	0x19: "re-authenticate", 0x80: "unspecified error", 0x81: "malformed packet", 0x82: "protocol error",
	0x83: "implementation specific error", 0x84: "unsupported protocol version",
	0x85: "client identifier not valid", 0x86: "bad user name or password", 0x87: "not authorized",
	0x88: "server unavailable", 0x89: "server busy", 0x8A: "banned", 0x8B: "server shutting down",
	0x8C: "bad authentication method", 0x8D: "keep alive timeout", 0x8E: "session taken over",
	0x8F: "topic filter invalid", 0x90: "topic name invalid", 0x91: "packet identifier in use",
	0x92: "packet identifier not found", 0x93: "receive maximum exceeded", 0x94: "topic alias invalid",
	0x95: "packet too large", 0x96: "message rate too high", 0x97: "quota exceeded",
	0x98: "administrative action", 0x99: "payload format invalid", 0x9A: "retain not supported",
	0x9B: "QoS not supported", 0x9C: "use another server", 0x9D: "server moved",
	0x9E: "shared subscriptions not supported", 0x9F: "connection rate exceeded",
	0xA0: "maximum connect time", 0xA1: "subscription identifiers not supported",
	0xA2: "wildcard subscriptions not supported",
}

// String names the code as the specification does.
func (r ReasonCode) String() string {
	if s, ok := reasonNames[r]; ok {
		return s
	}
	return fmt.Sprintf("reason code 0x%02x", byte(r))
}

// Error makes a ReasonCode usable as an error.
func (r ReasonCode) Error() string { return "mqtt: " + r.String() }

// IsError reports whether the code signals failure (0x80 and above) [MQTT-2.4].
func (r ReasonCode) IsError() bool { return r >= 0x80 }

// Reason code sets that each packet may carry (MQTT 5.0 sections 3.x.2.1).
// A decoded packet with a code outside its set is a Protocol Error.
var (
	connackCodes    = codeSet(0x00, 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8A, 0x8C, 0x90, 0x95, 0x97, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9F)
	pubackCodes     = codeSet(0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99)
	pubrelCodes     = codeSet(0x00, 0x92)
	subackCodes     = codeSet(0x00, 0x01, 0x02, 0x80, 0x83, 0x87, 0x8F, 0x91, 0x97, 0x9E, 0xA1, 0xA2)
	unsubackCodes   = codeSet(0x00, 0x11, 0x80, 0x83, 0x87, 0x8F, 0x91)
	disconnectCodes = codeSet(0x00, 0x04, 0x80, 0x81, 0x82, 0x83, 0x87, 0x89, 0x8B, 0x8D, 0x8E, 0x8F, 0x90, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9E, 0x9F, 0xA0, 0xA1, 0xA2)
	authCodes       = codeSet(0x00, 0x18, 0x19)
)

type reasonSet [4]uint64

func codeSet(codes ...byte) (s reasonSet) {
	for _, c := range codes {
		s[c>>6] |= 1 << (c & 63)
	}
	return s
}

func (s *reasonSet) has(c ReasonCode) bool { return s[c>>6]&(1<<(c&63)) != 0 }

// ConnackCodeV3 maps a reason code to the MQTT 3.1/3.1.1 CONNACK return code
// (0 accepted, 1 unacceptable protocol version, 2 identifier rejected,
// 3 server unavailable, 4 bad user name or password, 5 not authorized).
func ConnackCodeV3(r ReasonCode) byte {
	switch r {
	case Success:
		return 0
	case UnsupportedProtocolVersion:
		return 1
	case ClientIdentifierNotValid:
		return 2
	case BadUserNameOrPassword, BadAuthenticationMethod:
		return 4
	case NotAuthorized, Banned:
		return 5
	default:
		return 3
	}
}

// connackCodeFromV3 is the inverse of ConnackCodeV3 for the six defined codes.
func connackCodeFromV3(c byte) (ReasonCode, error) {
	switch c {
	case 0:
		return Success, nil
	case 1:
		return UnsupportedProtocolVersion, nil
	case 2:
		return ClientIdentifierNotValid, nil
	case 3:
		return ServerUnavailable, nil
	case 4:
		return BadUserNameOrPassword, nil
	case 5:
		return NotAuthorized, nil
	}
	return 0, ErrBadReasonCode
}

// Error is a decoding or validation failure. Code is the reason code the
// broker should send (in a CONNACK before the session exists, in a
// DISCONNECT after); the message names the rule that was broken.
type Error struct {
	Code ReasonCode
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func malformed(msg string) *Error { return &Error{Code: MalformedPacket, Msg: "codec: " + msg} }
func protocol(msg string) *Error  { return &Error{Code: ProtocolError, Msg: "codec: " + msg} }

// Decoding and validation errors. Each is an *Error carrying its reason code.
var (
	ErrShortBuffer        = malformed("packet shorter than its fields")
	ErrVarintTooLong      = malformed("variable byte integer longer than four bytes [MQTT-1.5.5]")
	ErrVarintNotMinimal   = malformed("variable byte integer not minimally encoded [MQTT-1.5.5-1]")
	ErrBadUTF8            = malformed("string is not well-formed UTF-8 or contains U+0000 [MQTT-1.5.4-1] [MQTT-1.5.4-2]")
	ErrReservedType       = malformed("reserved control packet type 0 [MQTT-2.1.2]")
	ErrBadFlags           = malformed("invalid fixed header flags [MQTT-2.1.3-1]")
	ErrBadQoS             = malformed("QoS 3 [MQTT-3.3.1-4]")
	ErrSubQoS             = protocol("subscription Maximum QoS 3 (3.8.3.1)")
	ErrDupQoS0            = malformed("DUP set on a QoS 0 PUBLISH [MQTT-3.3.1-2]")
	ErrTrailingBytes      = malformed("bytes after the end of the packet's fields")
	ErrZeroPacketID       = malformed("packet identifier 0 [MQTT-2.2.1-3]")
	ErrPacketTooLarge     = &Error{Code: PacketTooLarge, Msg: "codec: packet exceeds the maximum packet size [MQTT-3.2.2-15]"}
	ErrBadProtocolName    = &Error{Code: UnsupportedProtocolVersion, Msg: "codec: unknown protocol name [MQTT-3.1.2-1]"}
	ErrBadProtocolVersion = &Error{Code: UnsupportedProtocolVersion, Msg: "codec: unsupported protocol level [MQTT-3.1.2-2]"}
	ErrConnectReserved    = malformed("CONNECT reserved flag is set [MQTT-3.1.2-3]")
	ErrWillFlags          = malformed("will QoS or retain set without the will flag [MQTT-3.1.2-11] [MQTT-3.1.2-13] [MQTT-3.1.2-15]")
	ErrWillQoS            = malformed("will QoS 3 [MQTT-3.1.2-14]")
	ErrPasswordNoUser     = malformed("password flag without user name flag [MQTT-3.1.2-22]")
	ErrConnackFlags       = malformed("CONNACK reserved acknowledge flags are set [MQTT-3.2.2-1]")
	ErrBadReasonCode      = protocol("reason code not allowed in this packet")
	ErrTopicWildcard      = &Error{Code: TopicNameInvalid, Msg: "codec: topic name contains a wildcard [MQTT-3.3.2-2]"}
	ErrTopicEmpty         = &Error{Code: TopicNameInvalid, Msg: "codec: empty topic name [MQTT-4.7.3-1]"}
	ErrTopicNoAlias       = protocol("empty topic name without a topic alias [MQTT-3.3.4-4]")
	ErrFilterInvalid      = &Error{Code: TopicFilterInvalid, Msg: "codec: topic filter is invalid [MQTT-4.7.1-1] [MQTT-4.7.1-2] [MQTT-4.7.3-1]"}
	ErrSharedInvalid      = &Error{Code: TopicFilterInvalid, Msg: "codec: shared subscription filter is invalid [MQTT-4.8.2-1] [MQTT-4.8.2-2]"}
	ErrSharedNoLocal      = protocol("no local set on a shared subscription [MQTT-3.8.3-4]")
	ErrSubOptions         = malformed("subscription options reserved bits are set [MQTT-3.8.3-5]")
	ErrRetainHandling     = protocol("retain handling 3 [MQTT-3.8.3-5]")
	ErrNoFilters          = protocol("SUBSCRIBE or UNSUBSCRIBE without a topic filter [MQTT-3.8.3-3] [MQTT-3.10.3-2]")
	ErrNoReasonCodes      = protocol("SUBACK or UNSUBACK without a reason code")
	ErrUnknownProperty    = malformed("unknown property identifier")
	ErrPropertyNotAllowed = malformed("property not valid for this packet type (MQTT 5.0 2.2.2.2)")
	ErrDuplicateProperty  = protocol("property included more than once")
	ErrPropertyValue      = protocol("property has a value the specification forbids")
	ErrPropertyLength     = malformed("property length exceeds the packet")
	ErrAuthDataNoMethod   = protocol("authentication data without an authentication method")
	// ErrTooManyUserProperties is a packet over Reader.MaxUserProperties.
	ErrTooManyUserProperties = &Error{Code: QuotaExceeded, Msg: "codec: too many user properties in one packet"}
	// ErrBudget is a packet body that Reader.Budget has no room for.
	ErrBudget = &Error{Code: ServerBusy, Msg: "codec: no memory left for packets in the shared budget"}
)
