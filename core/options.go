package core

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// SharedStrategy picks the member of a shared subscription group that gets a message.
type SharedStrategy string

// Dispatch strategies for shared subscriptions.
const (
	SharedRoundRobin    SharedStrategy = "round_robin"
	SharedRandom        SharedStrategy = "random"
	SharedLeastInflight SharedStrategy = "least_inflight"
	SharedHashClient    SharedStrategy = "hash_clientid"
	SharedHashTopic     SharedStrategy = "hash_topic"
)

// SharedStrategies lists every SharedStrategy, the default first.
var SharedStrategies = []SharedStrategy{SharedRoundRobin, SharedRandom, SharedLeastInflight, SharedHashClient, SharedHashTopic}

// OverflowPolicy says what happens to a QoS 1/2 message for a session whose queue is full.
type OverflowPolicy string

// Overflow policies.
const (
	OverflowDropNew    OverflowPolicy = "drop_new"   // drop the new message, count it
	OverflowDisconnect OverflowPolicy = "disconnect" // disconnect the slow client
)

// OverflowPolicies lists every OverflowPolicy, the default first.
var OverflowPolicies = []OverflowPolicy{OverflowDropNew, OverflowDisconnect}

// Options configures a Server. The zero value is usable: setDefaults fills
// every unset field with the default documented on it.
type Options struct {
	// MaxConnections bounds concurrent connections; 0 means no limit.
	MaxConnections int
	// MaxPacketSize bounds an incoming packet in bytes (default 1 MiB). It is
	// announced to MQTT 5 clients in CONNACK.
	MaxPacketSize int
	// MaxConnectSize bounds CONNECT and the AUTH packets of its exchange,
	// which arrive before the client is authenticated (default 64 KiB,
	// never more than MaxPacketSize).
	MaxConnectSize int
	// MaxUserProperties bounds the user properties of one packet (default
	// 256): a packet with more is refused (Quota Exceeded), so that a few
	// KiB cannot decode into far more memory.
	MaxUserProperties int
	// PreLoginMemory bounds the memory that all connections not yet
	// through CONNECT may hold together for packet bodies larger than their
	// read buffer (default 16 MiB: 256 CONNECTs of 64 KiB at once). Over it a new handshake is refused
	// (Server Busy) rather than holding more.
	PreLoginMemory int64
	// AnySessionOwner lets any identity resume, take over or end a session
	// with its client id, as Mosquitto does. By default (false) a session
	// belongs to the user name (or certificate identity) that created it:
	// another identity is refused with Not Authorized.
	AnySessionOwner bool
	// ConnectTimeout closes a connection that sends no CONNECT in time (default 10s).
	ConnectTimeout time.Duration
	// MaxKeepAlive caps the keepalive a client may ask for; a client asking
	// for more (or for 0) is told the cap with Server Keep Alive (MQTT 5).
	// 0 leaves the client's value alone.
	MaxKeepAlive uint16
	// ReceiveMaximum is how many QoS 1/2 PUBLISH packets the server accepts
	// unacknowledged from one client (default 1024), announced in CONNACK.
	ReceiveMaximum uint16
	// MaxInflight bounds outgoing unacknowledged QoS 1/2 messages per client,
	// below the client's own Receive Maximum (default 1024).
	MaxInflight int
	// MaxQueued bounds the messages waiting in one session's queue (default
	// 1000, Mosquitto's max_queued_messages and EMQX's mqueue max_len). It
	// is also the memory a subscriber that cannot keep up may hold.
	MaxQueued int
	// MaxQueuedBytes bounds the topic and payload bytes of the messages one
	// session holds, queued or in flight (default 0 = no limit).
	MaxQueuedBytes int64
	// QueueOverflow is the policy for a session whose queue is full (MaxQueued
	// or MaxQueuedBytes): the oldest queued QoS 0 message is dropped to make
	// room; with none, a new QoS 0 message is dropped and a new QoS 1/2
	// message refused for that session — an MQTT 5 publisher gets Quota
	// Exceeded — (drop_new, the default) or the online client is
	// disconnected as a slow consumer (disconnect).
	QueueOverflow OverflowPolicy
	// TopicAliasMaximum is how many topic aliases a client may use towards
	// the server (default 64).
	TopicAliasMaximum uint16
	// MaxSubscriptionsPerClient bounds one session's subscriptions (default
	// 10,000: each costs the router and the store about 800 bytes, so one
	// client cannot grow the broker by more than a few MB); beyond it SUBACK
	// answers Quota exceeded (0x80 in 3.1.1). Negative means no limit.
	MaxSubscriptionsPerClient int
	// MaxMessageRate bounds the PUBLISH packets per second one client may
	// send, MaxByteRate their payload bytes per second; 0 means no limit.
	// Over the limit QoS 0 messages are dropped and QoS 1/2 are slowed by
	// holding back their acknowledgement — never buffered.
	MaxMessageRate int
	MaxByteRate    int
	// MaxTopicLevels bounds the levels of a topic or filter (default 128).
	MaxTopicLevels int
	// MaxSessionExpiry caps the session expiry interval in seconds a client
	// may ask for (default 0 = no cap).
	MaxSessionExpiry uint32
	// RetainDisabled turns retained messages off (Retain Available 0 in CONNACK).
	RetainDisabled bool
	// MaxRetainedMessages bounds the retained messages clients keep in the
	// broker (default 500,000), MaxRetainedBytes their topic and payload
	// bytes (default 128 MiB), so that retained messages alone cannot grow
	// the broker past a few hundred MB (each costs about 230 bytes besides
	// its topic and payload); negative means no limit. A retained
	// PUBLISH that would take them past either is delivered to the current
	// subscribers but not retained: an MQTT 5 publisher of QoS 1/2 gets
	// Quota exceeded (0x97); it is logged and counted. Replacing a topic's
	// message by one no larger, and clearing one, always work. The broker's
	// own $SYS topics, messages restored from the store and those another
	// cluster node kept count but are never refused.
	MaxRetainedMessages int
	MaxRetainedBytes    int64
	// SharedStrategy dispatches shared subscriptions (default round_robin).
	SharedStrategy SharedStrategy
	// SysInterval is the period of $SYS publications (default 10s; negative disables).
	SysInterval time.Duration
	// WriteTimeout disconnects a client whose socket accepts nothing for this
	// long (default 30s): the slow-consumer cut-off.
	WriteTimeout time.Duration
	// ReadBufferSize is the per-connection read buffer (default 4 KiB); packets
	// larger than it are read into a temporary buffer.
	ReadBufferSize int
	// Version is reported in $SYS/broker/version.
	Version string
}

// DefaultOptions returns the options a Server runs with when none are set.
func DefaultOptions() Options {
	var o Options
	o.setDefaults()
	return o
}

func (o *Options) setDefaults() {
	if o.MaxPacketSize == 0 {
		o.MaxPacketSize = 1 << 20
	}
	if o.MaxConnectSize == 0 {
		o.MaxConnectSize = 64 << 10
	}
	o.MaxConnectSize = min(o.MaxConnectSize, o.MaxPacketSize)
	if o.MaxUserProperties == 0 {
		o.MaxUserProperties = 256
	}
	if o.PreLoginMemory == 0 {
		o.PreLoginMemory = 16 << 20
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	if o.ReceiveMaximum == 0 {
		o.ReceiveMaximum = 1024
	}
	if o.MaxInflight == 0 {
		o.MaxInflight = 1024
	}
	if o.MaxQueued == 0 {
		o.MaxQueued = 1000
	}
	if o.QueueOverflow == "" {
		o.QueueOverflow = OverflowDropNew
	}
	if o.TopicAliasMaximum == 0 {
		o.TopicAliasMaximum = 64
	}
	if o.MaxTopicLevels == 0 {
		o.MaxTopicLevels = 128
	}
	if o.MaxSubscriptionsPerClient == 0 {
		o.MaxSubscriptionsPerClient = 10_000
	}
	if o.MaxRetainedMessages == 0 {
		o.MaxRetainedMessages = 500_000
	}
	if o.MaxRetainedBytes == 0 {
		o.MaxRetainedBytes = 128 << 20
	}
	if o.SharedStrategy == "" {
		o.SharedStrategy = SharedRoundRobin
	}
	if o.SysInterval == 0 {
		o.SysInterval = 10 * time.Second
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = 30 * time.Second
	}
	if o.ReadBufferSize == 0 {
		o.ReadBufferSize = 4096
	}
	if o.Version == "" {
		o.Version = "dev"
	}
}

// SetDefaults fills every unset field with its default, as New does.
func (o *Options) SetDefaults() { o.setDefaults() }

// OptionError is an option that is out of range: Option is the field's
// name, Msg says what is wrong and what is allowed.
type OptionError struct {
	Option string
	Msg    string
}

func (e *OptionError) Error() string { return "core: " + e.Msg }

// Validate reports every option that is out of range, each an
// *OptionError (joined with errors.Join). Call it after SetDefaults.
func (o *Options) Validate() error {
	var errs []error
	bad := func(option, format string, a ...any) {
		errs = append(errs, &OptionError{Option: option, Msg: fmt.Sprintf(format, a...)})
	}
	if o.MaxConnections < 0 {
		bad("MaxConnections", "max connections %d must not be negative (0 is no limit)", o.MaxConnections)
	}
	if o.MaxPacketSize < 64 || o.MaxPacketSize > 268435460 {
		bad("MaxPacketSize", "max packet size %d out of range 64..268435460", o.MaxPacketSize)
	}
	if o.MaxInflight < 1 || o.MaxInflight > 65535 {
		bad("MaxInflight", "max inflight %d out of range 1..65535", o.MaxInflight)
	}
	for _, l := range []struct {
		option string
		v      int
	}{{"MaxMessageRate", o.MaxMessageRate}, {"MaxByteRate", o.MaxByteRate}} {
		if l.v < 0 {
			bad(l.option, "%d must not be negative (0 is no limit)", l.v)
		}
	}
	if o.MaxQueued < 1 {
		bad("MaxQueued", "max queued %d must be at least 1", o.MaxQueued)
	}
	if o.MaxQueuedBytes < 0 {
		bad("MaxQueuedBytes", "max queued bytes %d must not be negative (0 is no limit)", o.MaxQueuedBytes)
	}
	if o.ConnectTimeout < 0 {
		bad("ConnectTimeout", "connect timeout %v must not be negative", o.ConnectTimeout)
	}
	if o.WriteTimeout < 0 {
		bad("WriteTimeout", "write timeout %v must not be negative", o.WriteTimeout)
	}
	if o.ReadBufferSize < 64 {
		bad("ReadBufferSize", "read buffer size %d must be at least 64", o.ReadBufferSize)
	}
	if o.MaxConnectSize < 64 {
		bad("MaxConnectSize", "max connect size %d must be at least 64", o.MaxConnectSize)
	}
	if o.MaxUserProperties < 0 {
		bad("MaxUserProperties", "max user properties %d must not be negative", o.MaxUserProperties)
	}
	if o.PreLoginMemory < int64(o.MaxConnectSize) {
		bad("PreLoginMemory", "pre-login memory %d must be at least the max connect size, %d", o.PreLoginMemory, o.MaxConnectSize)
	}
	if !slices.Contains(OverflowPolicies, o.QueueOverflow) {
		bad("QueueOverflow", "unknown queue overflow policy %q (want %s)", o.QueueOverflow, joinNames(OverflowPolicies))
	}
	if !slices.Contains(SharedStrategies, o.SharedStrategy) {
		bad("SharedStrategy", "unknown shared subscription strategy %q (want %s)", o.SharedStrategy, joinNames(SharedStrategies))
	}
	return errors.Join(errs...)
}

// joinNames lists values for an error message: "a, b, c".
func joinNames[T ~string](vs []T) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}
