package core

import (
	"strings"
	"time"

	"github.com/xmq-io/xmq/codec"
)

// Cluster links the broker to the other nodes of a cluster (package
// cluster implements it over NATS, cmd/xmq wires it; core never imports
// either). With none configured (Config.Cluster nil) core pays one nil
// check per PUBLISH and per subscription change.
//
// Core tells the cluster which filters this node's subscribers use, so
// that messages travel only to nodes with interest, and hands it every
// message published on this node after routing it locally. Messages from
// other nodes come back through Server.DeliverRemote, which routes them to
// this node's subscribers only: nothing received is forwarded again.
//
// Shared subscriptions ($share/…) are not announced: a shared group gets
// the messages published on its own node only.
type Cluster interface {
	// Interest reports that this node's first (on) or last (!on) plain
	// subscription to filter came or went, whatever the number of
	// sessions using it. It is called with the router's lock held, in
	// the order of the changes: it must neither block nor call the Server.
	Interest(filter string, on bool)
	// Forward hands the other nodes a message published on this node, on
	// the publisher's goroutine, once its local subscribers have it. The
	// arguments are the immutable parts of a Message: Forward must not
	// change them, nor block on the network. props holds only what is
	// forwarded to subscribers (nil for none); expires is zero for no
	// expiry; from is the publishing client's id ("" for the broker).
	Forward(topic string, payload []byte, qos byte, retain bool, props *codec.Properties, expires time.Time, from string)
}

// forward hands msg to the cluster; the broker's own $SYS topics stay on
// their node. s.cluster is not nil.
func (s *Server) forward(msg *Message) {
	if strings.HasPrefix(msg.Topic, "$SYS/") {
		return
	}
	s.cluster.Forward(msg.Topic, msg.Payload, msg.QoS, msg.Retain, msg.Props, msg.Expires, msg.From)
}

// DeliverRemote routes a message that another node published to this
// node's plain subscribers of filter (the filter whose interest brought it
// here, see Cluster), with the same rules as a local PUBLISH: QoS
// downgrade, retain as published, No Local against from, subscription
// identifiers, the subscriber's read rights. It is not retained here, nor
// forwarded again. The arguments become the message: the caller must not
// change them afterwards. It returns the number of deliveries made.
func (s *Server) DeliverRemote(filter, topic string, payload []byte, qos byte, retain bool, props *codec.Properties,
	expires time.Time, from string) int {
	msg := &Message{Topic: topic, Payload: payload, QoS: min(qos, 2), Retain: retain, Props: props, Expires: expires, From: from}
	if msg.expired(time.Now()) {
		s.stats.dropped(dropExpired)
		return 0
	}
	matches := s.router.matchFilter(filter, nil)
	var r routed
	s.deliver(msg, matches, &r, nil)
	return r.n
}
