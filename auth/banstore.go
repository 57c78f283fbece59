package auth

import (
	"encoding/json"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// BanStore keeps bans across restarts: records under keys, both opaque to
// the store (auth encodes them). The on-disk store (package store)
// satisfies it; cmd/xmq wires it in. Calls may come from any goroutine.
type BanStore interface {
	// LoadBans calls fn for every stored ban.
	LoadBans(fn func(key, rec []byte) error) error
	// PutBan stores rec under key, replacing what was there.
	PutBan(key, rec []byte) error
	// DeleteBan removes key; a missing key is not an error.
	DeleteBan(key []byte) error
}

// banRecord is a stored ban: version 1 is the JSON of Ban with "v": 1.
type banRecord struct {
	V int `json:"v"`
	Ban
}

const banRecordVersion = 1

// banKey is the store key of a ban: its kind and its value as kept (an
// address in canonical form), so replacing a ban replaces its record.
func banKey(kind BanKind, value string) []byte {
	return []byte(string(kind) + "\x00" + value)
}

func encodeBan(b Ban) ([]byte, error) {
	return json.Marshal(banRecord{V: banRecordVersion, Ban: b})
}

func decodeBan(rec []byte) (Ban, error) {
	var r banRecord
	if err := json.Unmarshal(rec, &r); err != nil {
		return Ban{}, err
	}
	if r.V != banRecordVersion {
		return Ban{}, fmt.Errorf("record version %d, this build reads %d", r.V, banRecordVersion)
	}
	return r.Ban, nil
}

// loadBans puts the stored bans in force; expired ones are deleted from
// the store. A record that cannot be read is logged and left alone (a
// newer build may have written it).
func (a *Auth) loadBans(now time.Time) error {
	st := a.opts.BanStore
	if st == nil {
		return nil
	}
	var loaded, expired int
	var stale [][]byte
	err := st.LoadBans(func(key, rec []byte) error {
		b, err := decodeBan(rec)
		if err == nil && !b.Until.IsZero() && !now.Before(b.Until) {
			stale = append(stale, append([]byte(nil), key...))
			expired++
			return nil
		}
		if err == nil {
			_, err = a.bans.add(b)
		}
		if err != nil {
			a.log.Warn("stored ban ignored", zap.String("key", string(key)), zap.Error(err))
			return nil
		}
		loaded++
		return nil
	})
	if err != nil {
		return fmt.Errorf("auth: loading bans: %w", err)
	}
	for _, k := range stale {
		if err := st.DeleteBan(k); err != nil {
			a.log.Error("expired ban not deleted from the store", zap.String("key", string(k)), zap.Error(err))
		}
	}
	if loaded > 0 || expired > 0 {
		a.log.Info("bans restored", zap.Int("bans", loaded), zap.Int("expired", expired))
	}
	return nil
}

// storeBan writes a ban set through Ban; a failure leaves it in force in
// memory and is logged.
func (a *Auth) storeBan(b Ban) {
	st := a.opts.BanStore
	if st == nil {
		return
	}
	rec, err := encodeBan(b)
	if err == nil {
		err = st.PutBan(banKey(b.Kind, b.Value), rec)
	}
	if err != nil {
		a.log.Error("ban in force but not stored: it will not survive a restart",
			zap.String("kind", string(b.Kind)), zap.String("value", b.Value), zap.Error(err))
	}
}

// unstoreBans deletes bans from the store (lifted or expired).
func (a *Auth) unstoreBans(bans ...Ban) {
	st := a.opts.BanStore
	if st == nil {
		return
	}
	for _, b := range bans {
		if err := st.DeleteBan(banKey(b.Kind, b.Value)); err != nil {
			a.log.Error("ban lifted but still stored: it comes back at the next start until it expires",
				zap.String("kind", string(b.Kind)), zap.String("value", b.Value), zap.Error(err))
		}
	}
}
