package auth

import (
	"errors"
	"fmt"
	"hash/maphash"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// BanKind says what a Ban matches.
type BanKind string

// Ban kinds.
const (
	BanClientID BanKind = "client_id" // Value is a client identifier
	BanUsername BanKind = "username"  // Value is a user name
	BanAddress  BanKind = "ip"        // Value is an IP address or a CIDR prefix (10.0.0.0/8, 2001:db8::/32)
	// The identity kinds are set by flap detection only (see identity):
	// they refuse one client id only together with one verified user name,
	// or for clients without one, one source address (an IPv6 /64). Value
	// is "CLIENT_ID@USER" or "CLIENT_ID@ADDRESS"; Unban takes it as listed.
	BanClientUser    BanKind = "client_id+username"
	BanClientAddress BanKind = "client_id+ip"
)

// Ban refuses CONNECT (Banned in MQTT 5, Not Authorized in 3.1.1) to
// matching clients until it expires.
type Ban struct {
	Kind   BanKind   `json:"kind"`
	Value  string    `json:"value"`
	Until  time.Time `json:"until,omitzero"` // zero: never expires
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"` // when it was set
}

// ErrBadBan is returned by Ban for an unknown kind or an unparsable address.
var ErrBadBan = errors.New("auth: bad ban")

// identity is what flapping is counted for and what a flapping ban
// refuses: a client id together with the user name that proved itself (a
// password file, SCRAM or a certificate), or, for a client without a
// verified user name, together with its source address (sourceKey). Never
// a client id alone: anyone may claim any client id, so counting or
// banning by client id would let one client get another banned.
type identity struct {
	clientID string
	username string     // the verified user name; "" when keyed by address
	addr     netip.Addr // the source key, when username is ""
}

// ban returns the kind and value a ban of the identity is listed with.
func (id identity) ban() (BanKind, string) {
	if id.username != "" {
		return BanClientUser, id.clientID + "@" + id.username
	}
	a := id.addr.String()
	if id.addr.Is6() {
		a += "/64"
	}
	return BanClientAddress, id.clientID + "@" + a
}

// banList holds the bans; IP bans are kept per prefix length, so a lookup
// costs one map probe per distinct length.
type banList struct {
	mu         sync.RWMutex
	clientIDs  map[string]Ban
	usernames  map[string]Ban
	prefixes   map[netip.Prefix]Ban
	lengths    map[int]int // prefix bit length → number of prefixes of that length
	identities map[identity]Ban
}

func newBanList() *banList {
	return &banList{clientIDs: map[string]Ban{}, usernames: map[string]Ban{},
		prefixes: map[netip.Prefix]Ban{}, lengths: map[int]int{}, identities: map[identity]Ban{}}
}

// parseBanAddress reads an address or prefix; an address is a full-length
// prefix. IPv4-mapped IPv6 addresses become IPv4.
func parseBanAddress(v string) (netip.Prefix, error) {
	if strings.Contains(v, "/") {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			return netip.Prefix{}, err
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(v)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap().WithZone("")
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// banPrefix reads the value of an ip ban: its prefix, and the value as
// kept and listed (a single address without its length).
func banPrefix(v string) (netip.Prefix, string, error) {
	p, err := parseBanAddress(v)
	if err != nil {
		return netip.Prefix{}, "", err
	}
	if p.IsSingleIP() {
		return p, p.Addr().String(), nil
	}
	return p, p.String(), nil
}

// add adds or replaces a ban of kind client_id, username or ip and
// returns it as kept (an address in its canonical form).
func (l *banList) add(b Ban) (Ban, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch b.Kind {
	case BanClientID:
		l.clientIDs[b.Value] = b
	case BanUsername:
		l.usernames[b.Value] = b
	case BanAddress:
		p, v, err := banPrefix(b.Value)
		if err != nil {
			return Ban{}, fmt.Errorf("%w: address %q: %v", ErrBadBan, b.Value, err)
		}
		b.Value = v
		if _, ok := l.prefixes[p]; !ok {
			l.lengths[p.Bits()]++
		}
		l.prefixes[p] = b
	case BanClientUser, BanClientAddress:
		return Ban{}, fmt.Errorf("%w: kind %q is set by flap detection only", ErrBadBan, b.Kind)
	default:
		return Ban{}, fmt.Errorf("%w: kind %q: want client_id, username or ip", ErrBadBan, b.Kind)
	}
	return b, nil
}

// addIdentity bans one identity (flapping); b's kind and value are set
// from it.
func (l *banList) addIdentity(id identity, b Ban) Ban {
	b.Kind, b.Value = id.ban()
	l.mu.Lock()
	l.identities[id] = b
	l.mu.Unlock()
	return b
}

func (l *banList) remove(kind BanKind, value string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch kind {
	case BanClientID:
		_, ok := l.clientIDs[value]
		delete(l.clientIDs, value)
		return ok
	case BanUsername:
		_, ok := l.usernames[value]
		delete(l.usernames, value)
		return ok
	case BanAddress:
		p, err := parseBanAddress(value)
		if err != nil {
			return false
		}
		return l.removePrefixLocked(p)
	case BanClientUser, BanClientAddress:
		// By the value as listed; identity bans are few (flapping only).
		found := false
		for id, b := range l.identities {
			if b.Kind == kind && b.Value == value {
				delete(l.identities, id)
				found = true
			}
		}
		return found
	}
	return false
}

func (l *banList) removePrefixLocked(p netip.Prefix) bool {
	if _, ok := l.prefixes[p]; !ok {
		return false
	}
	delete(l.prefixes, p)
	if l.lengths[p.Bits()]--; l.lengths[p.Bits()] == 0 {
		delete(l.lengths, p.Bits())
	}
	return true
}

// match returns the ban that refuses a client, if any is in force: who is
// the client's identity (its client id with its user name or address).
func (l *banList) match(who identity, username string, ip netip.Addr, now time.Time) (Ban, bool) {
	active := func(b Ban, ok bool) bool { return ok && (b.Until.IsZero() || now.Before(b.Until)) }
	l.mu.RLock()
	defer l.mu.RUnlock()
	if b, ok := l.clientIDs[who.clientID]; active(b, ok) {
		return b, true
	}
	if len(l.identities) > 0 {
		if b, ok := l.identities[who]; active(b, ok) {
			return b, true
		}
	}
	if username != "" {
		if b, ok := l.usernames[username]; active(b, ok) {
			return b, true
		}
	}
	if ip.IsValid() {
		for bits := range l.lengths {
			if bits > ip.BitLen() {
				continue
			}
			p, _ := ip.Prefix(bits)
			if b, ok := l.prefixes[p]; active(b, ok) {
				return b, true
			}
		}
	}
	return Ban{}, false
}

// list returns the bans in force, sorted by kind and value.
func (l *banList) list(now time.Time) []Ban {
	l.mu.RLock()
	var out []Ban
	for _, m := range []map[string]Ban{l.clientIDs, l.usernames} {
		for _, b := range m {
			if b.Until.IsZero() || now.Before(b.Until) {
				out = append(out, b)
			}
		}
	}
	for _, b := range l.prefixes {
		if b.Until.IsZero() || now.Before(b.Until) {
			out = append(out, b)
		}
	}
	for _, b := range l.identities {
		if b.Until.IsZero() || now.Before(b.Until) {
			out = append(out, b)
		}
	}
	l.mu.RUnlock()
	slices.SortFunc(out, func(a, b Ban) int {
		if c := strings.Compare(string(a.Kind), string(b.Kind)); c != 0 {
			return c
		}
		return strings.Compare(a.Value, b.Value)
	})
	return out
}

// sweep drops expired bans and returns them.
func (l *banList) sweep(now time.Time) []Ban {
	expired := func(b Ban) bool { return !b.Until.IsZero() && !now.Before(b.Until) }
	var gone []Ban
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range []map[string]Ban{l.clientIDs, l.usernames} {
		for k, b := range m {
			if expired(b) {
				delete(m, k)
				gone = append(gone, b)
			}
		}
	}
	for p, b := range l.prefixes {
		if expired(b) {
			l.removePrefixLocked(p)
			gone = append(gone, b)
		}
	}
	for id, b := range l.identities {
		if expired(b) {
			delete(l.identities, id)
		}
	}
	return gone
}

// addrIP returns the client's IP address, IPv4-mapped addresses unmapped,
// and false for an address without one (net.Pipe, Unix sockets).
func addrIP(a net.Addr) (netip.Addr, bool) {
	switch a := a.(type) {
	case nil:
		return netip.Addr{}, false
	case *net.TCPAddr:
		ip, ok := netip.AddrFromSlice(a.IP)
		return ip.Unmap(), ok
	case *net.UDPAddr:
		ip, ok := netip.AddrFromSlice(a.IP)
		return ip.Unmap(), ok
	case *net.IPAddr:
		ip, ok := netip.AddrFromSlice(a.IP)
		return ip.Unmap(), ok
	}
	s := a.String()
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	if ip, err := netip.ParseAddr(s); err == nil {
		return ip.Unmap().WithZone(""), true
	}
	return netip.Addr{}, false
}

// sourceKey is the address a limit is kept for: the IPv4 address, or the
// /64 of an IPv6 address (one host usually owns a whole /64). Addresses
// without an IP share the zero key.
func sourceKey(ip netip.Addr) netip.Addr {
	if ip.Is6() {
		p, _ := ip.WithZone("").Prefix(64)
		return p.Addr()
	}
	return ip
}

// limitTable is a bounded map of per-key limit state. When it is full,
// expired entries are swept (at most once a second, so a table full of
// live entries does not cost a sweep per new key); if none are, new keys
// go untracked (the limit fails open rather than locking everyone out),
// and dropped counts them.
type limitTable[K comparable, V any] struct {
	mu      sync.Mutex
	m       map[K]*V
	max     int
	expired func(v *V, now time.Time) bool
	dropped int64
	swept   time.Time // last sweep of a full table
}

func newLimitTable[K comparable, V any](max int, expired func(*V, time.Time) bool) *limitTable[K, V] {
	return &limitTable[K, V]{m: map[K]*V{}, max: max, expired: expired}
}

// getLocked returns the state of k, creating it when create is set; nil
// when k is untracked. t.mu is held.
func (t *limitTable[K, V]) getLocked(k K, now time.Time, create bool) *V {
	if v, ok := t.m[k]; ok {
		return v
	}
	if !create {
		return nil
	}
	if len(t.m) >= t.max {
		if now.Sub(t.swept) >= time.Second {
			t.swept = now
			t.sweepLocked(now)
		}
		if len(t.m) >= t.max {
			t.dropped++
			return nil
		}
	}
	v := new(V)
	t.m[k] = v
	return v
}

func (t *limitTable[K, V]) sweepLocked(now time.Time) {
	for k, v := range t.m {
		if t.expired(v, now) {
			delete(t.m, k)
		}
	}
}

func (t *limitTable[K, V]) sweep(now time.Time) {
	t.mu.Lock()
	t.sweepLocked(now)
	t.mu.Unlock()
}

func (t *limitTable[K, V]) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// failures is the failed-login state of one source address: failures
// counted in a fixed window, and the lockout.
type failures struct {
	start     time.Time
	count     int
	lockedTil time.Time
}

// failureLimiter locks a source out after max failed logins within window:
// for ban, attempts are refused before any hash is checked. Only failures
// count: a check in progress is not one. The hash queue bounds the checks
// a source runs at once by budget, so at most max hashes are checked for
// one source per window however many connections it opens at once, and
// its queued attempts are refused without a check once it is locked out.
type failureLimiter struct {
	max    int
	window time.Duration
	ban    time.Duration
	t      *limitTable[netip.Addr, failures]
}

func newFailureLimiter(max int, window, ban time.Duration, tableSize int) *failureLimiter {
	l := &failureLimiter{max: max, window: window, ban: ban}
	l.t = newLimitTable[netip.Addr](tableSize, func(f *failures, now time.Time) bool {
		return now.After(f.lockedTil) && now.Sub(f.start) > window
	})
	return l
}

// noLimit is the budget of a source when failures are not limited.
const noLimit = 1 << 30

// budget returns how many checks key may have in progress at once: the
// failures it may still have before the lockout, so that checks in
// progress can never add up to more failures than max. locked reports a
// source locked out now.
func (l *failureLimiter) budget(key netip.Addr, now time.Time) (n int, locked bool) {
	if l.max <= 0 {
		return noLimit, false
	}
	l.t.mu.Lock()
	defer l.t.mu.Unlock()
	f := l.t.getLocked(key, now, false)
	switch {
	case f == nil:
		return l.max, false
	case now.Before(f.lockedTil):
		return 0, true
	case now.Sub(f.start) > l.window:
		return l.max, false
	}
	return l.max - f.count, false
}

// fail records a failed login; it reports whether the source is locked
// out by it.
func (l *failureLimiter) fail(key netip.Addr, now time.Time) bool {
	if l.max <= 0 {
		return false
	}
	l.t.mu.Lock()
	defer l.t.mu.Unlock()
	f := l.t.getLocked(key, now, true)
	if f == nil {
		return false
	}
	if now.Sub(f.start) > l.window {
		f.start, f.count = now, 0
	}
	return l.failLocked(f, now)
}

func (l *failureLimiter) failLocked(f *failures, now time.Time) bool {
	f.count++
	if f.count < l.max {
		return false
	}
	f.lockedTil = now.Add(l.ban)
	f.start, f.count = now.Add(l.ban), 0 // a fresh window once the lockout ends
	return true
}

// locked reports whether key is locked out now.
func (l *failureLimiter) locked(key netip.Addr, now time.Time) bool {
	if l.max <= 0 {
		return false
	}
	l.t.mu.Lock()
	defer l.t.mu.Unlock()
	f := l.t.getLocked(key, now, false)
	return f != nil && now.Before(f.lockedTil)
}

// bucket is a token bucket.
type bucket struct {
	tokens float64
	last   time.Time
}

// rateLimiter allows each source address rate connections per second with
// bursts of burst.
type rateLimiter struct {
	rate  float64
	burst float64
	t     *limitTable[netip.Addr, bucket]
}

func newRateLimiter(rate float64, burst int, tableSize int) *rateLimiter {
	r := &rateLimiter{rate: rate, burst: float64(max(burst, 1))}
	r.t = newLimitTable[netip.Addr](tableSize, func(b *bucket, now time.Time) bool {
		return b.tokens+now.Sub(b.last).Seconds()*r.rate >= r.burst // full again: nothing to remember
	})
	return r
}

func (r *rateLimiter) allow(key netip.Addr, now time.Time) bool {
	if r.rate <= 0 {
		return true
	}
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	b := r.t.getLocked(key, now, true)
	if b == nil {
		return true
	}
	if b.last.IsZero() {
		b.tokens, b.last = r.burst, now
	}
	b.tokens = min(r.burst, b.tokens+now.Sub(b.last).Seconds()*r.rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// flaps counts one identity's unclean disconnects in a fixed window.
type flaps struct {
	start time.Time
	count int
}

// flapDetector finds an identity whose connections drop more than max
// times in window. holders remembers, for a short while, which identity
// logged in last with each client id, so a takeover can be told apart.
type flapDetector struct {
	max     int
	window  time.Duration
	t       *limitTable[identity, flaps]
	holders *limitTable[string, holder]
	seed    maphash.Seed // of holder.who
}

// holder is the identity that logged in last with a client id, by its
// hash, and when (Unix nanoseconds). Every login makes one, for
// holderMemory, so it is kept small: 16 bytes rather than the 80 of an
// identity and a time.Time. Two identities of one client id with equal
// hashes (one chance in 2^64) would count a takeover as a drop.
type holder struct {
	who uint64
	at  int64
}

// hash is what holder keeps of who.
func (d *flapDetector) hash(who identity) uint64 { return maphash.Comparable(d.seed, who) }

// holderMemory is how long a login's identity is remembered for telling a
// takeover apart: core reports the connection taken over right after the
// new one's login.
const holderMemory = 10 * time.Second

func newFlapDetector(max int, window time.Duration, tableSize int) *flapDetector {
	d := &flapDetector{max: max, window: window, seed: maphash.MakeSeed()}
	d.t = newLimitTable[identity](tableSize, func(f *flaps, now time.Time) bool {
		return now.Sub(f.start) > window
	})
	d.holders = newLimitTable[string](tableSize, func(h *holder, now time.Time) bool {
		return now.UnixNano()-h.at > int64(holderMemory)
	})
	return d
}

// admitted notes that who logged in with its client id.
func (d *flapDetector) admitted(who identity, now time.Time) {
	if d.max <= 0 {
		return
	}
	d.holders.mu.Lock()
	if h := d.holders.getLocked(who.clientID, now, true); h != nil {
		h.who, h.at = d.hash(who), now.UnixNano()
	}
	d.holders.mu.Unlock()
}

// tookOverBySelf reports whether the last login with who's client id was
// who itself, recently: a takeover that counts as who's drop. Unknown
// (forgotten or untracked) is no.
func (d *flapDetector) tookOverBySelf(who identity, now time.Time) bool {
	d.holders.mu.Lock()
	defer d.holders.mu.Unlock()
	h := d.holders.getLocked(who.clientID, now, false)
	return h != nil && h.who == d.hash(who) && now.UnixNano()-h.at <= int64(holderMemory)
}

// drop records a disconnect and reports whether the identity now flaps.
func (d *flapDetector) drop(who identity, now time.Time) bool {
	if d.max <= 0 {
		return false
	}
	d.t.mu.Lock()
	defer d.t.mu.Unlock()
	f := d.t.getLocked(who, now, true)
	if f == nil {
		return false
	}
	if now.Sub(f.start) > d.window {
		f.start, f.count = now, 0
	}
	f.count++
	if f.count > d.max {
		delete(d.t.m, who)
		return true
	}
	return false
}
