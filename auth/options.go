package auth

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"go.uber.org/zap"
)

// Anonymous says who may connect without a user name.
type Anonymous string

// Anonymous policies. In YAML, allow_anonymous: true / false / loopback.
const (
	AnonymousAllow    Anonymous = "true"     // everyone
	AnonymousDeny     Anonymous = "false"    // no one
	AnonymousLoopback Anonymous = "loopback" // clients connecting from a loopback address (127.0.0.0/8, ::1) only
)

// Validate reports an unknown policy; "" is accepted (inherit the default).
func (a Anonymous) Validate() error {
	switch a {
	case "", AnonymousAllow, AnonymousDeny, AnonymousLoopback:
		return nil
	}
	return fmt.Errorf("auth: allow_anonymous %q: want true, false or loopback", string(a))
}

// Options configures an Auth. Zero values mean the defaults given; a
// negative count or duration turns the feature off where that is said.
type Options struct {
	// PasswordFile is a Mosquitto-compatible password file (see the
	// package documentation); "" means no passwords: user names are not
	// checked and every client is admitted under the anonymous policy.
	PasswordFile string
	// ACLFile is a Mosquitto acl_file; "" allows every client everything.
	ACLFile string
	// AllowAnonymous is the policy for clients without a user name.
	// Default AnonymousLoopback.
	AllowAnonymous Anonymous
	// ListenerAnonymous overrides AllowAnonymous per listener name.
	ListenerAnonymous map[string]Anonymous
	// CertListeners names the listeners whose user name is the identity of
	// the client's verified certificate (use_identity_as_username): there
	// a user name is accepted without a password; ACLs still apply to it.
	CertListeners []string
	// ReloadInterval is how often the password and ACL files are checked
	// for changes (size or modification time); negative: never (Reload
	// still works). Default 2s.
	ReloadInterval time.Duration
	// ACLCacheSize bounds the cached PUBLISH decisions. Default 65536.
	ACLCacheSize int
	// LoginCacheTTL is how long a login whose password was checked is
	// remembered (a keyed hash of user name, password and the file's
	// entry; never the password), so the same credentials skip the slow
	// hash until then. Bans, limits and the anonymous and certificate
	// rules still apply to every login. The cache is emptied when the
	// password file is reloaded and holds at most Limits.Tracked logins.
	// Default 5m; negative: off.
	LoginCacheTTL time.Duration
	// BanStore keeps the bans set through Ban across restarts; nil: bans
	// live in memory only. Flapping bans are never stored.
	BanStore BanStore
	// JWT is JSON Web Token authentication (jwt.go); off without a key.
	JWT JWTOptions
	// Limits are the abuse limits.
	Limits Limits
	// HTTP asks an operator's HTTP service about CONNECTs and, optionally,
	// PUBLISH and SUBSCRIBE (httpauth.go). Zero: no service.
	HTTP HTTPOptions
	// Log receives reloads, bans and refusals (never a password or hash).
	// Default: discard.
	Log *zap.Logger

	now func() time.Time // the clock; tests replace it
}

// Limits are the per-source and per-client abuse limits.
type Limits struct {
	// MaxFailedLogins from one source address within FailedLoginWindow
	// lock that address out for FailedLoginBan: its attempts are refused
	// with Not Authorized before any password is checked. IPv6 sources
	// count per /64. Default 10; negative: no limit.
	MaxFailedLogins   int
	FailedLoginWindow time.Duration // default 1m
	FailedLoginBan    time.Duration // default 5m
	// ConnectionRate is the CONNECTs per second one source address may
	// make, with bursts of ConnectionBurst (default 2 × the rate, at least
	// 1); more are refused with Connection Rate Exceeded. 0: no limit
	// (the default: load tests and NAT'd fleets connect many clients from
	// one address).
	ConnectionRate  float64
	ConnectionBurst int
	// An identity whose connection ends uncleanly (not by DISCONNECT, an
	// operator, a shutdown or a takeover) more than FlapMax times within
	// FlapWindow is banned for FlapBan. The identity is the client id
	// with the verified user name, or without one, with the source
	// address (IPv6: its /64); never a client id alone, so nobody can get
	// another client banned by using its client id. Default 15 in 1m,
	// banned 5m; negative FlapMax: off.
	FlapMax    int
	FlapWindow time.Duration
	FlapBan    time.Duration
	// MaxHashes bounds the password hashes checked at once, so a flood of
	// logins from many addresses cannot take every core. Logins waiting
	// for a check are served fairly between source addresses (IPv6: per
	// /64): a source's first check never waits behind another source's
	// backlog. A source runs at most as many checks at once as it may
	// still fail before MaxFailedLogins locks it out. A login waits up to
	// HashWait for its turn; it is refused with Server Busy when that runs
	// out, or at once when HashQueuePerSource logins of its source, or
	// HashQueue logins in all, are waiting already. Defaults: the number
	// of CPUs, 5s, 1000 and 10000.
	MaxHashes          int
	HashWait           time.Duration
	HashQueuePerSource int
	HashQueue          int
	// Tracked bounds the source addresses and identities each limit
	// remembers, and the logins the login cache holds. Default 100000.
	Tracked int
}

// Default values.
const (
	DefaultReloadInterval    = 2 * time.Second
	DefaultACLCacheSize      = 65536
	DefaultMaxFailedLogins   = 10
	DefaultFailedLoginWindow = time.Minute
	DefaultFailedLoginBan    = 5 * time.Minute
	DefaultFlapMax           = 15
	DefaultFlapWindow        = time.Minute
	DefaultFlapBan           = 5 * time.Minute
	DefaultHashWait          = 5 * time.Second
	DefaultHashQueuePerSrc   = 1000
	DefaultHashQueue         = 10000
	DefaultLoginCacheTTL     = 5 * time.Minute
	DefaultTracked           = 100000
)

// SetDefaults fills the zero values.
func (o *Options) SetDefaults() {
	if o.AllowAnonymous == "" {
		o.AllowAnonymous = AnonymousLoopback
	}
	if o.ReloadInterval == 0 {
		o.ReloadInterval = DefaultReloadInterval
	}
	if o.ACLCacheSize == 0 {
		o.ACLCacheSize = DefaultACLCacheSize
	}
	if o.LoginCacheTTL == 0 {
		o.LoginCacheTTL = DefaultLoginCacheTTL
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	o.JWT.setDefaults()
	if o.now == nil {
		o.now = time.Now
	}
	o.HTTP.setDefaults()
	l := &o.Limits
	if l.MaxFailedLogins == 0 {
		l.MaxFailedLogins = DefaultMaxFailedLogins
	}
	if l.FailedLoginWindow == 0 {
		l.FailedLoginWindow = DefaultFailedLoginWindow
	}
	if l.FailedLoginBan == 0 {
		l.FailedLoginBan = DefaultFailedLoginBan
	}
	if l.ConnectionRate > 0 && l.ConnectionBurst == 0 {
		l.ConnectionBurst = max(1, int(2*l.ConnectionRate))
	}
	if l.FlapMax == 0 {
		l.FlapMax = DefaultFlapMax
	}
	if l.FlapWindow == 0 {
		l.FlapWindow = DefaultFlapWindow
	}
	if l.FlapBan == 0 {
		l.FlapBan = DefaultFlapBan
	}
	if l.MaxHashes == 0 {
		l.MaxHashes = runtime.NumCPU()
	}
	if l.HashWait == 0 {
		l.HashWait = DefaultHashWait
	}
	if l.HashQueuePerSource == 0 {
		l.HashQueuePerSource = DefaultHashQueuePerSrc
	}
	if l.HashQueue == 0 {
		l.HashQueue = DefaultHashQueue
	}
	if l.Tracked == 0 {
		l.Tracked = DefaultTracked
	}
}

// Validate checks the options after SetDefaults.
func (o *Options) Validate() error {
	errs := []error{o.AllowAnonymous.Validate(), o.JWT.validate(), o.HTTP.validate()}
	for name, a := range o.ListenerAnonymous {
		if err := a.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("listener %s: %w", name, err))
		}
	}
	l := o.Limits
	if o.ACLCacheSize < 0 {
		errs = append(errs, errors.New("auth: acl_cache_size must not be negative"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"failed_login_window", l.FailedLoginWindow}, {"failed_login_ban", l.FailedLoginBan},
		{"flap_window", l.FlapWindow}, {"flap_ban", l.FlapBan}, {"hash_wait", l.HashWait}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("auth: %s %v must not be negative", d.name, d.v))
		}
	}
	if l.ConnectionRate < 0 || l.ConnectionBurst < 0 || l.MaxHashes < 0 || l.Tracked < 0 ||
		l.HashQueuePerSource < 0 || l.HashQueue < 0 {
		errs = append(errs, errors.New("auth: connection_rate, connection_burst, max_hashes, hash_queue_per_source, hash_queue and tracked must not be negative"))
	}
	return errors.Join(errs...)
}
