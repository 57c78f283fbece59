package core

import (
	"sort"
	"sync"
)

// StoredSubscription is one subscription of a persistent session.
type StoredSubscription struct {
	Filter            string // as subscribed, including any $share/{group}/ prefix
	QoS               byte
	NoLocal           bool
	RetainAsPublished bool
	RetainHandling    byte
	SubscriptionID    uint32
}

// StoredSession is what must survive a restart for a persistent session.
type StoredSession struct {
	ClientID      string
	Version       byte
	ExpirySeconds uint32 // session expiry interval; 0xFFFFFFFF never expires
	// DisconnectedAt is the Unix time the client went away; 0 while connected.
	DisconnectedAt int64
	Subscriptions  []StoredSubscription
}

// StoredMessage is a QoS 1/2 message owed to a persistent session, queued or
// in flight, in the order it must be delivered (Seq ascending).
type StoredMessage struct {
	Seq     uint64
	Message *Message
	QoS     byte // the QoS of this delivery (min of published and granted)
	Retain  bool
	SubID   uint32
}

// Store keeps the state that must survive a restart: persistent sessions,
// the QoS 1/2 messages owed to them, and retained messages. Core calls it
// from connection goroutines; implementations must be safe for concurrent
// use. A method returns only once the change is as durable as the store
// promises (the on-disk store: on disk, per its durability mode).
type Store interface {
	// SaveSession creates or replaces a persistent session's metadata and subscriptions.
	SaveSession(s *StoredSession) error
	// DeleteSession removes a session and every message owed to it.
	DeleteSession(clientID string) error
	// AddMessage records a QoS 1/2 message owed to a persistent session.
	AddMessage(clientID string, m *StoredMessage) error
	// AckMessage forgets a message once its delivery is complete (or dropped).
	AckMessage(clientID string, seq uint64) error
	// SetRetained stores a retained message, or deletes the topic's retained
	// message when m has an empty payload.
	SetRetained(m *Message) error
	// Load returns every stored session with its messages in Seq order, and
	// every retained message.
	Load() (sessions []*StoredSession, messages map[string][]*StoredMessage, retained []*Message, err error)
	// Close flushes and releases the store.
	Close() error
}

// MemStore is an in-memory Store: state survives a Server restart within one
// process (as tests and embedding programs need) but not the process.
type MemStore struct {
	mu       sync.Mutex
	sessions map[string]*StoredSession
	messages map[string]map[uint64]*StoredMessage
	retained map[string]*Message
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{
		sessions: map[string]*StoredSession{},
		messages: map[string]map[uint64]*StoredMessage{},
		retained: map[string]*Message{},
	}
}

// SaveSession implements Store.
func (s *MemStore) SaveSession(ss *StoredSession) error {
	cp := *ss
	cp.Subscriptions = append([]StoredSubscription(nil), ss.Subscriptions...)
	s.mu.Lock()
	s.sessions[ss.ClientID] = &cp
	s.mu.Unlock()
	return nil
}

// DeleteSession implements Store.
func (s *MemStore) DeleteSession(id string) error {
	s.mu.Lock()
	delete(s.sessions, id)
	delete(s.messages, id)
	s.mu.Unlock()
	return nil
}

// AddMessage implements Store.
func (s *MemStore) AddMessage(id string, m *StoredMessage) error {
	s.mu.Lock()
	q := s.messages[id]
	if q == nil {
		q = map[uint64]*StoredMessage{}
		s.messages[id] = q
	}
	cp := *m
	q[m.Seq] = &cp
	s.mu.Unlock()
	return nil
}

// AckMessage implements Store.
func (s *MemStore) AckMessage(id string, seq uint64) error {
	s.mu.Lock()
	delete(s.messages[id], seq)
	s.mu.Unlock()
	return nil
}

// SetRetained implements Store.
func (s *MemStore) SetRetained(m *Message) error {
	s.mu.Lock()
	if len(m.Payload) == 0 {
		delete(s.retained, m.Topic)
	} else {
		s.retained[m.Topic] = m
	}
	s.mu.Unlock()
	return nil
}

// Load implements Store.
func (s *MemStore) Load() ([]*StoredSession, map[string][]*StoredMessage, []*Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sessions := make([]*StoredSession, 0, len(s.sessions))
	for _, ss := range s.sessions {
		cp := *ss
		sessions = append(sessions, &cp)
	}
	msgs := map[string][]*StoredMessage{}
	for id, q := range s.messages {
		l := make([]*StoredMessage, 0, len(q))
		for _, m := range q {
			l = append(l, m)
		}
		sort.Slice(l, func(i, j int) bool { return l[i].Seq < l[j].Seq })
		msgs[id] = l
	}
	retained := make([]*Message, 0, len(s.retained))
	for _, m := range s.retained {
		retained = append(retained, m)
	}
	return sessions, msgs, retained, nil
}

// Close implements Store.
func (s *MemStore) Close() error { return nil }
