package core

import (
	"crypto/tls"
	"slices"
	"sort"
	"time"

	"github.com/xmq-io/xmq/codec"
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
	ClientID string `json:"client_id"`
	// Username is the connection's user name, or while offline the
	// session's owner (who may resume it).
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
	AwaitingRelease []uint16 `json:"awaiting_release,omitempty"`
	// QueuedBytes is the topic and payload bytes the session holds,
	// queued or in flight (what MaxQueuedBytes bounds).
	QueuedBytes int64 `json:"queued_bytes"`
	// Traffic is the current connection's (zero while offline).
	Traffic
	// Will is the connection's will; nil without one. WillPending is set
	// while an offline session's will waits for its delay.
	Will        *WillInfo `json:"will,omitempty"`
	WillPending bool      `json:"will_pending,omitempty"`
	// TLS is the connection's TLS state; nil without TLS.
	TLS           *TLSInfo           `json:"tls,omitempty"`
	Subscriptions []SubscriptionInfo `json:"subscriptions,omitempty"`
}

// Traffic counts the PUBLISH packets and the bytes of a connection, each
// way.
type Traffic struct {
	MessagesIn  int64 `json:"messages_in"`
	MessagesOut int64 `json:"messages_out"`
	BytesIn     int64 `json:"bytes_in"`
	BytesOut    int64 `json:"bytes_out"`
}

// WillInfo describes a connection's will message.
type WillInfo struct {
	Topic  string `json:"topic"`
	QoS    byte   `json:"qos"`
	Retain bool   `json:"retain"`
	Size   int    `json:"size"`                    // payload bytes
	Delay  uint32 `json:"delay_seconds,omitempty"` // MQTT 5 Will Delay Interval
	// Expiry is the will's Message Expiry Interval, which starts when it
	// is published; 0 none.
	Expiry time.Duration `json:"expiry,omitempty"`
}

// TLSInfo describes a connection's TLS session.
type TLSInfo struct {
	Version     string `json:"version"`      // "TLS 1.3"
	CipherSuite string `json:"cipher_suite"` // "TLS_AES_128_GCM_SHA256"
	ServerName  string `json:"server_name,omitempty"`
	// CertSubject is the verified client certificate's subject; "" when
	// the client sent none.
	CertSubject string `json:"cert_subject,omitempty"`
	// CertIdentity is the identity the listener took from the certificate
	// as the user name (identity_as_username); "" when it takes none.
	CertIdentity string `json:"cert_identity,omitempty"`
}

// tlsStater is a conn of a TLS-based transport (listeners' tls, wss and
// quic conns): the state of its handshake, for the admin views.
type tlsStater interface {
	ConnectionState() tls.ConnectionState
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
		Inflight: len(sess.inflight), Queued: sess.queued(), QueuedBytes: sess.qbytes, WillPending: sess.will.timer != nil,
		Dropped: sess.drops.Load()}
	for id := range sess.qos2in.ids {
		ci.AwaitingRelease = append(ci.AwaitingRelease, id)
	}
	slices.Sort(ci.AwaitingRelease)
	if o := sess.owner.Load(); o != nil {
		ci.Username = *o // who the session belongs to, while its client is away too
	}
	if c := sess.c; c != nil {
		// What CONNECT set is read-only once the session is attached.
		ci.Connected, ci.Username, ci.Remote, ci.Listener = true, c.username, c.remoteAddr(), c.listener
		ci.KeepAlive, ci.ConnectedAt = c.keepAlive, time.Unix(0, c.connectedAt)
		ci.Traffic = Traffic{MessagesIn: c.msgsIn.Load(), MessagesOut: c.msgsOut.Load(), BytesIn: c.bytesIn.Load(), BytesOut: c.bytesOut.Load()}
		if x := c.rare(); x.will != nil {
			w := x.will
			ci.Will = &WillInfo{Topic: w.Topic, QoS: w.QoS, Retain: w.Retain, Size: len(w.Payload), Delay: x.willDelay, Expiry: x.willExpiry}
		}
		if withSubs {
			ci.TLS = tlsInfo(c) // a handshake lock per connection: not for every row of a list
		}
	}
	if withSubs {
		for _, sub := range sess.subs {
			ci.Subscriptions = append(ci.Subscriptions, sub.info(sess.id))
		}
		sort.Slice(ci.Subscriptions, func(i, j int) bool { return ci.Subscriptions[i].Filter < ci.Subscriptions[j].Filter })
	}
	return ci
}

// tlsInfo describes c's TLS session; nil when its transport has none.
func tlsInfo(c *client) *TLSInfo {
	ts, ok := c.conn.(tlsStater)
	if !ok {
		return nil
	}
	st := ts.ConnectionState()
	if !st.HandshakeComplete {
		return nil
	}
	info := &TLSInfo{Version: tls.VersionName(st.Version), CipherSuite: tls.CipherSuiteName(st.CipherSuite), ServerName: st.ServerName}
	if len(st.VerifiedChains) > 0 && len(st.PeerCertificates) > 0 {
		info.CertSubject = st.PeerCertificates[0].Subject.String()
	}
	if ci, ok := c.conn.(CertIdentifier); ok {
		info.CertIdentity = ci.CertIdentity()
	}
	return info
}

func (sub *storedSub) info(clientID string) SubscriptionInfo {
	return SubscriptionInfo{ClientID: clientID, Filter: sub.Filter, QoS: sub.QoS, NoLocal: sub.NoLocal,
		RetainAsPublished: sub.RetainAsPublished, RetainHandling: sub.RetainHandling, SubscriptionID: sub.SubscriptionID}
}

// RetainedMessage returns the retained message of topic and when it was
// stored (zero when unknown: restored from a store written before xmq kept
// the time).
func (s *Server) RetainedMessage(topic string) (*Message, time.Time, bool) {
	return s.retained.get(topic)
}

// DeleteRetained clears the retained message of topic, as an empty
// retained PUBLISH would, and reports whether there was one.
func (s *Server) DeleteRetained(topic string) bool {
	if _, _, ok := s.RetainedMessage(topic); !ok {
		return false
	}
	s.retain(&Message{Message: codec.Message{Topic: topic, Retain: true}}, nil)
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
