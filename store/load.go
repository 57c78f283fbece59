package store

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// scan calls fn for every key with the given one-byte prefix, in key order.
// A damaged block, a malformed key or a panic in the engine is returned as
// ErrDamaged with the key; an error from fn is returned as is.
func (s *Store) scan(prefix byte, fn func(k, v []byte) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: %s: reading keys %q: %v", ErrDamaged, s.dir, prefix, v)
		}
	}()
	s.flushPending() // a read sees every write made before it
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: []byte{prefix + 1}})
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrDamaged, s.dir, err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, verr := it.ValueAndErr()
		if verr != nil {
			return fmt.Errorf("%w: %s: key %q: %v", ErrDamaged, s.dir, it.Key(), verr)
		}
		if err := fn(it.Key(), v); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrDamaged, s.dir, err)
	}
	return nil
}

// splitID parses prefix, length, id; rest is what follows the id.
func splitID(k []byte) (id string, rest []byte, ok bool) {
	if len(k) < 3 {
		return "", nil, false
	}
	n := int(binary.BigEndian.Uint16(k[1:3]))
	if len(k) < 3+n {
		return "", nil, false
	}
	return string(k[3 : 3+n]), k[3+n:], true
}

func (s *Store) badKey(k []byte) error {
	return fmt.Errorf("%w: %s: malformed key %q", ErrDamaged, s.dir, k)
}

// scanIDs calls fn for each key of a per-client record (session, inbound, will).
func (s *Store) scanIDs(prefix byte, fn func(id string, rec []byte) error) error {
	return s.scan(prefix, func(k, v []byte) error {
		id, rest, ok := splitID(k)
		if !ok || len(rest) != 0 {
			return s.badKey(k)
		}
		return fn(id, v)
	})
}

// Load implements core.Store: every session, then every message (each
// session's in ascending seq order), then every retained message.
func (s *Store) Load(session func(clientID string, rec []byte) error,
	message func(clientID string, seq uint64, rec []byte) error,
	retained func(topic string, rec []byte) error) error {
	if err := s.scanIDs(prefixSession, session); err != nil {
		return err
	}
	err := s.scan(prefixMessage, func(k, v []byte) error {
		id, rest, ok := splitID(k)
		if !ok || len(rest) != 8 {
			return s.badKey(k)
		}
		return message(id, binary.BigEndian.Uint64(rest), v)
	})
	if err != nil {
		return err
	}
	return s.scan(prefixRetained, func(k, v []byte) error { return retained(string(k[1:]), v) })
}

// LoadInbound implements core.Store.
func (s *Store) LoadInbound(fn func(clientID string, rec []byte) error) error {
	return s.scanIDs(prefixInbound, fn)
}

// LoadWills implements core.Store.
func (s *Store) LoadWills(fn func(clientID string, rec []byte) error) error {
	return s.scanIDs(prefixWill, fn)
}

// KeyStats counts the keys of each kind a Check found.
type KeyStats struct {
	Sessions, Inbound, Wills, Messages, Retained, Bans int
	Bytes                                              int64 // keys and values
}

// Check walks every key of the store, reading every block (which verifies
// its checksum), and reports each key it cannot account for to problem. It
// returns an error only when the walk itself cannot go on. Records are not
// decoded here: core does that (core.CheckStore).
func (s *Store) Check(problem func(error)) (st KeyStats, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: %s: %v", ErrDamaged, s.dir, v)
		}
	}()
	it, err := s.db.NewIter(nil)
	if err != nil {
		return st, fmt.Errorf("%w: %s: %v", ErrDamaged, s.dir, err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		v, verr := it.ValueAndErr()
		if verr != nil {
			problem(fmt.Errorf("%w: key %q: %v", ErrDamaged, k, verr))
			continue
		}
		st.Bytes += int64(len(k) + len(v))
		var bad bool
		switch k[0] {
		case prefixFormat:
			bad = len(k) != 1 || len(v) != 4
		case prefixSession, prefixInbound, prefixWill:
			_, rest, ok := splitID(k)
			bad = !ok || len(rest) != 0
			switch {
			case bad:
			case k[0] == prefixSession:
				st.Sessions++
			case k[0] == prefixInbound:
				st.Inbound++
			default:
				st.Wills++
			}
		case prefixMessage:
			_, rest, ok := splitID(k)
			bad = !ok || len(rest) != 8
			if !bad {
				st.Messages++
			}
		case prefixRetained:
			st.Retained++
		case prefixBan:
			bad = len(k) == 1
			if !bad {
				st.Bans++
			}
		default:
			bad = true
		}
		if bad {
			problem(s.badKey(k))
		}
	}
	if err := it.Error(); err != nil {
		return st, fmt.Errorf("%w: %s: %v", ErrDamaged, s.dir, err)
	}
	return st, nil
}
