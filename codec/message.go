package codec

import "time"

// Message is an application message as it crosses package seams: the
// broker keeps it (core.Message holds one), hands it to the cluster, which
// carries it to the other nodes and hands it to their brokers. Whoever
// builds one gives it away: the holders share its slices and Props and
// change none of them.
type Message struct {
	Topic   string
	Payload []byte // nil when empty
	QoS     byte
	Retain  bool
	// Props are the MQTT 5 properties forwarded to subscribers (payload
	// format, content type, response topic, correlation data, user
	// properties); nil when there are none. Topic Alias, Subscription
	// Identifier and Message Expiry are per delivery, not kept here.
	Props *Properties
	// Expires is when the message stops being delivered; zero means never.
	Expires time.Time
	// From is the publishing client's id ("" for the broker), for No Local.
	From string
}
