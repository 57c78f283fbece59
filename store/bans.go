package store

import "fmt"

// maxBanKey bounds a ban's key; auth's keys are a kind and a client id,
// user name or address, far shorter.
const maxBanKey = 1 << 17

func banKey(key []byte) ([]byte, error) {
	if len(key) == 0 || len(key) > maxBanKey {
		return nil, fmt.Errorf("store: ban key of %d bytes", len(key))
	}
	return append([]byte{prefixBan}, key...), nil
}

// PutBan implements auth.BanStore: rec under key, both opaque. Bans are
// rare and set by hand, so each is synced as the durability mode says
// before PutBan returns (sync mode: on disk).
func (s *Store) PutBan(key, rec []byte) error {
	k, err := banKey(key)
	if err != nil {
		return err
	}
	if err := s.set(k, rec); err != nil {
		return err
	}
	return s.Sync()
}

// DeleteBan implements auth.BanStore.
func (s *Store) DeleteBan(key []byte) error {
	k, err := banKey(key)
	if err != nil {
		return err
	}
	if err := s.del(k); err != nil {
		return err
	}
	return s.Sync()
}

// LoadBans implements auth.BanStore: fn sees every ban's key (without the
// store's prefix) and record; both alias the engine's buffers and are only
// valid during the call.
func (s *Store) LoadBans(fn func(key, rec []byte) error) error {
	return s.scan(prefixBan, func(k, v []byte) error { return fn(k[1:], v) })
}
