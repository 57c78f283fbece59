package core

import (
	"slices"
	"sort"
	"time"

	"xmq/codec"
)

// The read-only views below serve the admin API, the dashboard and
// metrics. Each takes a snapshot under the locks it needs and returns
// copies; none is on the message path. The lists page in order
// (pages.go): none copies the whole set.

// SubscriptionInfo is one subscription of a session.
type SubscriptionInfo struct {
	ClientID          string `json:"client_id"`
	Filter            string `json:"filter"` // including any $share/{group}/ prefix
	QoS               byte   `json:"qos"`
	NoLocal           bool   `json:"no_local,omitempty"`
	RetainAsPublished bool   `json:"retain_as_published,omitempty"`
	RetainHandling    byte   `json:"retain_handling,omitempty"`
	SubscriptionID    uint32 `json:"subscription_id,omitempty"`
}

// ClientInfo describes a session and, when connected, its connection.
type ClientInfo struct {
	ClientID        string        `json:"client_id"`
	Username        string        `json:"username,omitempty"`
	Connected       bool          `json:"connected"`
	Remote          string        `json:"remote,omitempty"`
	Listener        string        `json:"listener,omitempty"`
	ProtocolVersion byte          `json:"protocol_version"`
	KeepAlive       time.Duration `json:"keepalive"`
	ConnectedAt     time.Time     `json:"connected_at,omitzero"`
	SessionExpiry   uint32        `json:"session_expiry"` // seconds; 4294967295 never
	Inflight        int           `json:"inflight"`
	Queued          int           `json:"queued"`
	// Dropped counts the messages the session did not get since the broker
	// started: queue full, offline, expired, too large, not readable
	// (the causes of Stats' Dropped that concern one subscriber).
	Dropped int64 `json:"dropped"`
	// AwaitingRelease are the packet ids of the QoS 2 messages received
	// from the client and not yet released by its PUBREL.
	AwaitingRelease []uint16           `json:"awaiting_release,omitempty"`
	Subscriptions   []SubscriptionInfo `json:"subscriptions,omitempty"`
}

// StartTime is when the server was created.
func (s *Server) StartTime() time.Time { return s.started }

// Client returns one session with its subscriptions.
func (s *Server) Client(clientID string) (ClientInfo, bool) {
	s.mu.Lock()
	sess := s.sessions[clientID]
	s.mu.Unlock()
	if sess == nil {
		return ClientInfo{}, false
	}
	return sess.info(true), true
}

func (sess *session) info(withSubs bool) ClientInfo {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	ci := ClientInfo{ClientID: sess.id, ProtocolVersion: sess.version, SessionExpiry: sess.expiry,
		Inflight: len(sess.inflight), Queued: sess.queued(), Dropped: sess.drops.Load()}
	for id := range sess.qos2in {
		ci.AwaitingRelease = append(ci.AwaitingRelease, id)
	}
	slices.Sort(ci.AwaitingRelease)
	if c := sess.c; c != nil {
		ci.Connected, ci.Username, ci.Remote, ci.Listener = true, c.username, c.remoteAddr(), c.listener
		ci.KeepAlive, ci.ConnectedAt = c.keepAlive, time.Unix(0, c.connectedAt)
	}
	if withSubs {
		for _, sub := range sess.subs {
			ci.Subscriptions = append(ci.Subscriptions, sub.info(sess.id))
		}
		sort.Slice(ci.Subscriptions, func(i, j int) bool { return ci.Subscriptions[i].Filter < ci.Subscriptions[j].Filter })
	}
	return ci
}

func (sub *storedSub) info(clientID string) SubscriptionInfo {
	return SubscriptionInfo{ClientID: clientID, Filter: sub.Filter, QoS: sub.QoS, NoLocal: sub.NoLocal,
		RetainAsPublished: sub.RetainAsPublished, RetainHandling: sub.RetainHandling, SubscriptionID: sub.SubscriptionID}
}

// RetainedMessage returns the retained message of topic.
func (s *Server) RetainedMessage(topic string) (*Message, bool) { return s.retained.get(topic) }

// DeleteRetained clears the retained message of topic, as an empty
// retained PUBLISH would, and reports whether there was one.
func (s *Server) DeleteRetained(topic string) bool {
	if _, ok := s.RetainedMessage(topic); !ok {
		return false
	}
	s.retain(&Message{Topic: topic, QoS: 0, Retain: true})
	return true
}

// ConnectionsByListener counts the open connections of each listener.
func (s *Server) ConnectionsByListener() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for c := range s.clients {
		out[c.listener]++
	}
	return out
}

// ValidTopic reports whether topic may be published to (for the admin API).
func ValidTopic(topic string) error { return codec.ValidTopicName([]byte(topic)) }
