package core

import (
	"strings"
	"time"

	"go.uber.org/zap"

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
// A shared group ($share/GROUP/FILTER) is announced too: each message
// goes to one member cluster-wide, a member on the publisher's node when
// there is one (Forward says which groups it served), else one on a node
// the cluster picks, where the group's strategy picks the member.
//
// A client id is connected once cluster-wide: Claim at CONNECT, Release
// when the connection ends, Server.TakeOver where another node's claim
// replaces this node's. Retained messages are kept on every node:
// Retain when set here, Server.SetRetained when set elsewhere.
type Cluster interface {
	// Interest reports that this node's first (on) or last (!on) plain
	// subscription to filter (group "") or member of the shared group
	// group on filter came or went, whatever the number of sessions. It
	// is called with the router's lock held, in the order of the changes:
	// it must neither block nor call the Server.
	Interest(group, filter string, on bool)
	// Forward hands the other nodes a message published on this node, on
	// the publisher's goroutine, once its local subscribers have it. The
	// arguments are the immutable parts of a Message: Forward must not
	// change them, nor block on the network. props holds only what is
	// forwarded to subscribers (nil for none); expires is zero for no
	// expiry; from is the publishing client's id ("" for the broker);
	// served lists the shared groups this node delivered it to, as group,
	// filter pairs (nil for none).
	Forward(topic string, payload []byte, qos byte, retain bool, props *codec.Properties, expires time.Time, from string, served []string)
	// Retain records topic's retained message cluster-wide (an empty
	// payload clears it) as this node keeps it; the other nodes keep it
	// through Server.SetRetained. The arguments are as Forward's, and
	// Retain must not block on the network either.
	Retain(topic string, payload []byte, qos byte, props *codec.Properties, expires time.Time, from string)
	// Claim makes this connection the holder of clientID cluster-wide,
	// before its session is attached: a connection with that id on
	// another node is closed there (Server.TakeOver). It returns the
	// claim, which Release gives back, or 0 when it could not be made
	// (the connection goes ahead, held on this node only). It runs on the
	// connection's goroutine and may wait for one round trip.
	Claim(clientID string, clean bool) uint64
	// Release gives up claim when its connection ends, unless a newer
	// claim replaced it. It must not block.
	Release(clientID string, claim uint64)
}

// forward hands msg, routed here to matches, to the cluster; the
// broker's own $SYS topics stay on their node. s.cluster is not nil.
func (s *Server) forward(msg *Message, matches []match) {
	if strings.HasPrefix(msg.Topic, "$SYS/") {
		return
	}
	var served []string
	for i := range matches {
		if g := matches[i].group; g != nil {
			served = append(served, g.name, g.filter)
		}
	}
	s.cluster.Forward(msg.Topic, msg.Payload, msg.QoS, msg.Retain, msg.Props, msg.Expires, msg.From, served)
}

// DeliverRemote routes a message that another node published to this
// node's plain subscribers of filter (group ""), or to one member of the
// shared group group on filter — the interest that brought it here, see
// Cluster — with the same rules as a local PUBLISH: QoS downgrade, retain
// as published, No Local against from, subscription identifiers, the
// subscriber's read rights, the group's strategy. It is not retained
// here, nor forwarded again. The arguments become the message: the
// caller must not change them afterwards. It returns the number of
// deliveries made.
func (s *Server) DeliverRemote(group, filter, topic string, payload []byte, qos byte, retain bool, props *codec.Properties,
	expires time.Time, from string) int {
	msg := &Message{Topic: topic, Payload: payload, QoS: min(qos, 2), Retain: retain, Props: props, Expires: expires, From: from}
	if msg.expired(time.Now()) {
		s.stats.dropped(dropExpired)
		return 0
	}
	matches := s.router.matchFilter(group, filter, from, topic, nil)
	var r routed
	s.deliver(msg, matches, &r, nil)
	return r.n
}

// TakeOver closes clientID's connection on this node because a
// connection on another node took the client id over (Cluster.Claim),
// with Session taken over (MQTT 5), as a takeover on one node does. claim
// is the hold the other node replaced: a newer connection here (another
// claim) is left alone. With endSession (the new connection started
// clean) the session here ends too, as does a session left offline here;
// otherwise the session stays here, offline, until it expires (sessions
// do not move between nodes), and a will waiting for its delay is not
// sent: the client is back. It reports whether it closed or ended anything.
func (s *Server) TakeOver(clientID string, claim uint64, endSession bool) bool {
	s.mu.Lock()
	sess := s.sessions[clientID]
	if sess == nil {
		s.mu.Unlock()
		return false
	}
	sess.mu.Lock()
	c := sess.c
	sess.mu.Unlock()
	if c != nil && c.claim != claim || !endSession && c == nil {
		s.mu.Unlock()
		return false
	}
	if !endSession {
		s.mu.Unlock()
		c.takenElsewhere.Store(true)
		c.log(zap.InfoLevel, "session taken over on another node")
		c.close(CloseTakenOver, codec.SessionTakenOver)
		return true
	}
	c = s.endSessionLocked(sess) // the same c: attach changes it under s.mu only
	s.mu.Unlock()
	if c != nil {
		c.log(zap.InfoLevel, "session taken over on another node, with Clean Start")
		c.close(CloseTakenOver, codec.SessionTakenOver)
	}
	return true
}

// SetRetained keeps a retained message that another node set (an empty
// payload clears it), on this node and in its store, without delivering
// it and without telling the cluster again. The arguments become the
// message: the caller must not change them afterwards.
func (s *Server) SetRetained(topic string, payload []byte, qos byte, props *codec.Properties, expires time.Time, from string) {
	if len(payload) == 0 {
		payload = nil
	}
	_ = s.retainHere(&Message{Topic: topic, Payload: payload, QoS: min(qos, 2), Retain: true, Props: props, Expires: expires, From: from})
}
