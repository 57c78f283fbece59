package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"sync"
	"time"
)

// loginProof stands for a user name, a password and the password file
// entry it matched: an HMAC under a key that lives only in this process,
// so the cache holds nothing a password can be recovered or checked from
// outside it.
type loginProof [sha256.Size]byte

// proofOf computes the proof of a login against entry e (its hash as
// encoded in the file, so a changed hash never matches an old proof).
func proofOf(key []byte, username string, password []byte, e *entry) loginProof {
	mac := hmac.New(sha256.New, key)
	macField(mac, []byte(username))
	macField(mac, password)
	mac.Write([]byte(e.hash.encode()))
	var p loginProof
	mac.Sum(p[:0])
	return p
}

// macField writes b to h with its length first, so that no two lists of
// fields write the same bytes.
func macField(h hash.Hash, b []byte) {
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
	h.Write(b)
}

// loginCache remembers the logins whose hash check succeeded, for ttl from
// the check, so a reconnect storm of a fleet costs one slow hash per user
// and microseconds per login after it. Only successes are kept; a cache
// belongs to one load of the password file (a reload starts an empty one).
// It holds at most max proofs; a full cache drops expired ones, then an
// arbitrary one. A nil cache is off.
//
// It also knows the checks in flight: logins with the same credentials
// that arrive while one is being checked wait for that check (at most one
// hash time) instead of checking the same hash again.
type loginCache struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu      sync.Mutex
	m       map[loginProof]time.Time     // proof → expiry
	flights map[loginProof]chan struct{} // closed when the check of the proof ends
}

func newLoginCache(ttl time.Duration, max int, now func() time.Time) *loginCache {
	if ttl <= 0 || max <= 0 {
		return nil
	}
	return &loginCache{ttl: ttl, max: max, now: now, m: map[loginProof]time.Time{}, flights: map[loginProof]chan struct{}{}}
}

// validLocked reports whether p was proved within ttl; c.mu is held.
func (c *loginCache) validLocked(p loginProof) bool {
	until, ok := c.m[p]
	return ok && c.now().Before(until)
}

// has reports whether p is proved, without waiting for a check in flight.
func (c *loginCache) has(p loginProof) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.validLocked(p)
}

// await reports whether p is proved, waiting up to wait for a check of p
// in flight to end first. It never starts a check.
func (c *loginCache) await(p loginProof, wait time.Duration) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	ok, f := c.validLocked(p), c.flights[p]
	c.mu.Unlock()
	if ok || f == nil || !waitFor(f, wait) {
		return ok
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.validLocked(p)
}

// lead is called with a hash check turn: it reports whether p is proved
// (waiting up to wait for a check of p in flight), and otherwise makes
// the caller the check of p in flight until it calls land, after add when
// the check succeeded. Without a cache land does nothing.
func (c *loginCache) lead(p loginProof, wait time.Duration) (proved bool, land func()) {
	if c == nil {
		return false, func() {}
	}
	for {
		c.mu.Lock()
		if c.validLocked(p) {
			c.mu.Unlock()
			return true, nil
		}
		f := c.flights[p]
		if f == nil {
			f = make(chan struct{})
			c.flights[p] = f
			c.mu.Unlock()
			return false, func() {
				c.mu.Lock()
				delete(c.flights, p)
				c.mu.Unlock()
				close(f)
			}
		}
		c.mu.Unlock()
		if !waitFor(f, wait) {
			return false, func() {} // check it alongside the slow one
		}
		// The other check ended: proved, or it failed and this one checks.
	}
}

// waitFor waits until ch is closed or d passes; it reports whether ch was.
func waitFor(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// add remembers a successful check that ended at now.
func (c *loginCache) add(p loginProof, now time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[p]; !ok && len(c.m) >= c.max {
		c.sweepLocked(now)
		for old := range c.m {
			if len(c.m) < c.max {
				break
			}
			delete(c.m, old)
		}
	}
	c.m[p] = now.Add(c.ttl)
}

// sweep drops expired proofs.
func (c *loginCache) sweep(now time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.sweepLocked(now)
	c.mu.Unlock()
}

func (c *loginCache) sweepLocked(now time.Time) {
	for p, until := range c.m {
		if !now.Before(until) {
			delete(c.m, p)
		}
	}
}

// len counts the proofs held.
func (c *loginCache) len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
