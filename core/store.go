package core

import (
	"sort"
	"strings"
	"sync"
)

// Store keeps what must survive a restart: persistent sessions (metadata
// and subscriptions), the QoS 1/2 messages owed to them — queued or in
// flight, in delivery order — the inbound QoS 2 state of each persistent
// session, pending wills with a delay, and retained messages.
//
// Its methods take plain parameters and opaque records that core encodes
// and decodes itself (record.go, with a format version), so a store
// implements it without importing core and never interprets a record.
// Core calls it from connection goroutines: implementations must be safe
// for concurrent use.
//
// Writes need not be durable when they return: Sync makes every write that
// returned before it durable, as the store's durability mode promises. Core
// acknowledges a QoS 1/2 PUBLISH only after a Sync that covers what the
// PUBLISH wrote, and calls Sync once per read burst, so a store should let
// concurrent callers share one flush (group commit). A store must keep the
// order of writes across a crash: what survives is a prefix of the writes.
//
// PutMessage and PutRetained may refuse a record for lack of space with an
// error wrapping syscall.ENOSPC; core then refuses the message (Quota
// Exceeded to MQTT 5 publishers) and keeps serving.
type Store interface {
	// PutSession creates or replaces a persistent session's record.
	PutSession(clientID string, rec []byte) error
	// DeleteSession removes a session's record, its inbound state and every
	// message owed to it.
	DeleteSession(clientID string) error
	// PutMessage records a new message owed to a session; seq orders delivery.
	PutMessage(clientID string, seq uint64, rec []byte) error
	// UpdateMessage replaces the record of a message already stored (its
	// delivery state changed); it is not refused for space.
	UpdateMessage(clientID string, seq uint64, rec []byte) error
	// DeleteMessage forgets a message once its delivery is complete or dropped.
	DeleteMessage(clientID string, seq uint64) error
	// PutRetained stores the retained message of a topic.
	PutRetained(topic string, rec []byte) error
	// DeleteRetained removes the retained message of a topic.
	DeleteRetained(topic string) error
	// PutInbound replaces a session's inbound QoS 2 state (the packet ids
	// awaiting PUBREL).
	PutInbound(clientID string, rec []byte) error
	// DeleteInbound removes a session's inbound QoS 2 state.
	DeleteInbound(clientID string) error
	// PutWill records the pending will of a disconnected client.
	PutWill(clientID string, rec []byte) error
	// DeleteWill removes a pending will, once published or cancelled.
	DeleteWill(clientID string) error
	// Sync returns once every write that returned before the call is as
	// durable as the store promises.
	Sync() error
	// Load calls session for every session, message for every message of
	// every session in ascending seq order (a session's record before its
	// messages), and retained for every retained message. The record slices
	// are valid only during the call, and the callbacks must not call the
	// store.
	Load(session func(clientID string, rec []byte) error,
		message func(clientID string, seq uint64, rec []byte) error,
		retained func(topic string, rec []byte) error) error
	// LoadInbound calls fn for every session's inbound QoS 2 state.
	LoadInbound(fn func(clientID string, rec []byte) error) error
	// LoadWills calls fn for every pending will.
	LoadWills(fn func(clientID string, rec []byte) error) error
	// Close flushes and releases the store.
	Close() error
}

// MemStore is an in-memory Store: state survives a Server restart within one
// process (as tests and embedding programs need) but not the process.
type MemStore struct {
	mu       sync.Mutex
	sessions map[string][]byte
	messages map[string]map[uint64][]byte
	retained map[string][]byte
	inbound  map[string][]byte
	wills    map[string][]byte
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{sessions: map[string][]byte{}, messages: map[string]map[uint64][]byte{}, retained: map[string][]byte{},
		inbound: map[string][]byte{}, wills: map[string][]byte{}}
}

// PutSession implements Store.
func (s *MemStore) PutSession(id string, rec []byte) error {
	s.mu.Lock()
	s.sessions[id] = append([]byte(nil), rec...)
	s.mu.Unlock()
	return nil
}

// DeleteSession implements Store.
func (s *MemStore) DeleteSession(id string) error {
	s.mu.Lock()
	delete(s.sessions, id)
	delete(s.messages, id)
	delete(s.inbound, id)
	s.mu.Unlock()
	return nil
}

// PutMessage implements Store.
func (s *MemStore) PutMessage(id string, seq uint64, rec []byte) error {
	s.mu.Lock()
	q := s.messages[id]
	if q == nil {
		q = map[uint64][]byte{}
		s.messages[id] = q
	}
	q[seq] = append([]byte(nil), rec...)
	s.mu.Unlock()
	return nil
}

// UpdateMessage implements Store.
func (s *MemStore) UpdateMessage(id string, seq uint64, rec []byte) error {
	return s.PutMessage(id, seq, rec)
}

// DeleteMessage implements Store.
func (s *MemStore) DeleteMessage(id string, seq uint64) error {
	s.mu.Lock()
	delete(s.messages[id], seq)
	s.mu.Unlock()
	return nil
}

// PutRetained implements Store.
func (s *MemStore) PutRetained(topic string, rec []byte) error {
	s.mu.Lock()
	s.retained[topic] = append([]byte(nil), rec...)
	s.mu.Unlock()
	return nil
}

// DeleteRetained implements Store.
func (s *MemStore) DeleteRetained(topic string) error {
	s.mu.Lock()
	delete(s.retained, topic)
	s.mu.Unlock()
	return nil
}

// PutInbound implements Store.
func (s *MemStore) PutInbound(id string, rec []byte) error { return s.put(s.inbound, id, rec) }

// DeleteInbound implements Store.
func (s *MemStore) DeleteInbound(id string) error { return s.del(s.inbound, id) }

// PutWill implements Store.
func (s *MemStore) PutWill(id string, rec []byte) error { return s.put(s.wills, id, rec) }

// DeleteWill implements Store.
func (s *MemStore) DeleteWill(id string) error { return s.del(s.wills, id) }

func (s *MemStore) put(m map[string][]byte, k string, rec []byte) error {
	s.mu.Lock()
	m[k] = append([]byte(nil), rec...)
	s.mu.Unlock()
	return nil
}

func (s *MemStore) del(m map[string][]byte, k string) error {
	s.mu.Lock()
	delete(m, k)
	s.mu.Unlock()
	return nil
}

// Sync implements Store: memory is as durable as a MemStore gets.
func (s *MemStore) Sync() error { return nil }

// LoadInbound implements Store.
func (s *MemStore) LoadInbound(fn func(string, []byte) error) error { return s.each(s.inbound, fn) }

// LoadWills implements Store.
func (s *MemStore) LoadWills(fn func(string, []byte) error) error { return s.each(s.wills, fn) }

func (s *MemStore) each(m map[string][]byte, fn func(string, []byte) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range sortedKeys(m) {
		if err := fn(k, m[k]); err != nil {
			return err
		}
	}
	return nil
}

// Load implements Store.
func (s *MemStore) Load(session func(string, []byte) error, message func(string, uint64, []byte) error,
	retained func(string, []byte) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range sortedKeys(s.sessions) {
		if err := session(id, s.sessions[id]); err != nil {
			return err
		}
		q := s.messages[id]
		seqs := make([]uint64, 0, len(q))
		for seq := range q {
			seqs = append(seqs, seq)
		}
		sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
		for _, seq := range seqs {
			if err := message(id, seq, q[seq]); err != nil {
				return err
			}
		}
	}
	for _, t := range sortedKeys(s.retained) {
		if err := retained(t, s.retained[t]); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return strings.Compare(keys[i], keys[j]) < 0 })
	return keys
}

// Close implements Store.
func (s *MemStore) Close() error { return nil }
