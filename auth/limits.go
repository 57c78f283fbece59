package auth

import (
	"errors"
	"fmt"
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

// banList holds the bans; IP bans are kept per prefix length, so a lookup
// costs one map probe per distinct length.
type banList struct {
	mu        sync.RWMutex
	clientIDs map[string]Ban
	usernames map[string]Ban
	prefixes  map[netip.Prefix]Ban
	lengths   map[int]int // prefix bit length → number of prefixes of that length
}

func newBanList() *banList {
	return &banList{clientIDs: map[string]Ban{}, usernames: map[string]Ban{},
		prefixes: map[netip.Prefix]Ban{}, lengths: map[int]int{}}
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

func (l *banList) add(b Ban) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch b.Kind {
	case BanClientID:
		l.clientIDs[b.Value] = b
	case BanUsername:
		l.usernames[b.Value] = b
	case BanAddress:
		p, err := parseBanAddress(b.Value)
		if err != nil {
			return fmt.Errorf("%w: address %q: %v", ErrBadBan, b.Value, err)
		}
		b.Value = p.String()
		if p.IsSingleIP() {
			b.Value = p.Addr().String()
		}
		if _, ok := l.prefixes[p]; !ok {
			l.lengths[p.Bits()]++
		}
		l.prefixes[p] = b
	default:
		return fmt.Errorf("%w: kind %q: want client_id, username or ip", ErrBadBan, b.Kind)
	}
	return nil
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

// match returns the ban that refuses a client, if any is in force.
func (l *banList) match(clientID, username string, ip netip.Addr, now time.Time) (Ban, bool) {
	active := func(b Ban, ok bool) bool { return ok && (b.Until.IsZero() || now.Before(b.Until)) }
	l.mu.RLock()
	defer l.mu.RUnlock()
	if b, ok := l.clientIDs[clientID]; active(b, ok) {
		return b, true
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
	l.mu.RUnlock()
	slices.SortFunc(out, func(a, b Ban) int {
		if c := strings.Compare(string(a.Kind), string(b.Kind)); c != 0 {
			return c
		}
		return strings.Compare(a.Value, b.Value)
	})
	return out
}

// sweep drops expired bans.
func (l *banList) sweep(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range []map[string]Ban{l.clientIDs, l.usernames} {
		for k, b := range m {
			if !b.Until.IsZero() && !now.Before(b.Until) {
				delete(m, k)
			}
		}
	}
	for p, b := range l.prefixes {
		if !b.Until.IsZero() && !now.Before(b.Until) {
			l.removePrefixLocked(p)
		}
	}
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
// expired entries are swept; if none are, new keys go untracked (the
// limit fails open rather than locking everyone out), and dropped counts
// them.
type limitTable[K comparable, V any] struct {
	mu      sync.Mutex
	m       map[K]*V
	max     int
	expired func(v *V, now time.Time) bool
	dropped int64
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
		t.sweepLocked(now)
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
// counted in a fixed window, attempts with a hash check in progress, and
// the lockout.
type failures struct {
	start     time.Time
	count     int
	pending   int
	lockedTil time.Time
}

// failureLimiter locks a source out after max failed logins within window:
// for ban, attempts are refused before any hash is checked. Attempts in
// progress count against the limit, so at most max hashes are ever checked
// for one source per window, however many connections it opens at once.
type failureLimiter struct {
	max    int
	window time.Duration
	ban    time.Duration
	t      *limitTable[netip.Addr, failures]
}

func newFailureLimiter(max int, window, ban time.Duration, tableSize int) *failureLimiter {
	l := &failureLimiter{max: max, window: window, ban: ban}
	l.t = newLimitTable[netip.Addr](tableSize, func(f *failures, now time.Time) bool {
		return f.pending == 0 && now.After(f.lockedTil) && now.Sub(f.start) > window
	})
	return l
}

// begin reserves a hash check for key; false means locked out.
func (l *failureLimiter) begin(key netip.Addr, now time.Time) bool {
	if l.max <= 0 {
		return true
	}
	l.t.mu.Lock()
	defer l.t.mu.Unlock()
	f := l.t.getLocked(key, now, true)
	if f == nil {
		return true
	}
	if now.Before(f.lockedTil) {
		return false
	}
	if now.Sub(f.start) > l.window {
		f.start, f.count = now, 0
	}
	if f.count+f.pending >= l.max {
		return false
	}
	f.pending++
	return true
}

// end records the outcome of a check that begin allowed; it reports
// whether the source is locked out by this failure.
func (l *failureLimiter) end(key netip.Addr, ok bool, now time.Time) bool {
	if l.max <= 0 {
		return false
	}
	l.t.mu.Lock()
	defer l.t.mu.Unlock()
	f := l.t.getLocked(key, now, false)
	if f == nil {
		return false
	}
	f.pending = max(f.pending-1, 0)
	return !ok && l.failLocked(f, now)
}

// fail records a failure not reserved with begin (SCRAM, whose broker-side
// cost is small); it reports whether the source is locked out by it.
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

// flaps counts one client id's unclean disconnects in a fixed window.
type flaps struct {
	start time.Time
	count int
}

// flapDetector bans a client id that drops more than max times in window.
type flapDetector struct {
	max    int
	window time.Duration
	t      *limitTable[string, flaps]
}

func newFlapDetector(max int, window time.Duration, tableSize int) *flapDetector {
	d := &flapDetector{max: max, window: window}
	d.t = newLimitTable[string](tableSize, func(f *flaps, now time.Time) bool {
		return now.Sub(f.start) > window
	})
	return d
}

// drop records a disconnect and reports whether the client id now flaps.
func (d *flapDetector) drop(clientID string, now time.Time) bool {
	if d.max <= 0 {
		return false
	}
	d.t.mu.Lock()
	defer d.t.mu.Unlock()
	f := d.t.getLocked(clientID, now, true)
	if f == nil {
		return false
	}
	if now.Sub(f.start) > d.window {
		f.start, f.count = now, 0
	}
	f.count++
	if f.count > d.max {
		delete(d.t.m, clientID)
		return true
	}
	return false
}
