package web

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Role is what a principal may do.
type Role string

// Roles: a viewer reads, an admin also acts (disconnect, publish, delete,
// ban).
const (
	RoleViewer Role = "viewer"
	RoleAdmin  Role = "admin"
)

func (r Role) allows(need Role) bool { return r == RoleAdmin || r == need }

// Ways a request can be authenticated; they decide whether CSRF applies.
const (
	methodSession   = "session"   // the dashboard's cookie: unsafe requests need the CSRF token
	methodAnonymous = "anonymous" // loopback without credentials: unsafe requests need the CSRF token
	methodBasic     = "basic"
	methodAPIKey    = "api_key"
	methodBearer    = "bearer" // a token issued by POST /api/v1/auth/tokens
)

// principal is who made a request.
type principal struct {
	User   string
	Role   Role
	Method string
	CSRF   string // sessions and anonymous: the token unsafe requests must carry
	gen    uint64 // the user's generation when authenticated (authenticator.gen)
}

// isUser reports whether p is a dashboard user (who has a password), not
// an API key or anonymous.
func (p principal) isUser() bool {
	// A session or bearer token may belong to an API key ("key:NAME",
	// logged in with the key) or to anonymous access.
	return p.Method != methodAPIKey && p.Method != methodAnonymous && !strings.HasPrefix(p.User, "key:") && p.User != reservedUser
}

const (
	sessionCookie = "xmq_session"
	csrfHeader    = "X-CSRF-Token"
	apiKeyHeader  = "X-API-Key"
	maxSessions   = 10000 // sessions and tokens kept at once; the oldest go first
	tokenPrefix   = "xmqt_"
)

// grant is a session or an issued bearer token.
type grant struct {
	user    string
	role    Role
	csrf    string
	token   bool // a bearer token rather than a cookie session
	expires time.Time
	gen     uint64 // the user's generation at login: a grant of an older one is dead
}

// authenticator checks credentials and keeps sessions and tokens. Its
// mutex guards grants, failures, verified and gen; bcrypt runs outside it,
// and the user store has its own (never taken while holding this one).
type authenticator struct {
	opts     *Options
	users    *userStore
	anonCSRF string // the CSRF token of anonymous loopback requests
	now      func() time.Time

	mu       sync.Mutex
	grants   map[string]*grant // by the SHA-256 of the cookie value or token
	failures map[string]*failureCount
	verified map[[32]byte]verifiedPassword // by the SHA-256 of user and password checked lately
	// gen counts, per user name, the times its sessions and tokens were
	// ended (deleted, role or password changed): a grant or a verified
	// password of an older generation is dead. Names never changed have 0.
	gen map[string]uint64
}

// verifiedPassword is a password checked lately: it stands until until
// while its user's generation is gen.
type verifiedPassword struct {
	until time.Time
	gen   uint64
}

type failureCount struct {
	n     int
	since time.Time
}

func newAuthenticator(opts *Options) *authenticator {
	return &authenticator{opts: opts, users: newUserStore(opts), anonCSRF: randomToken(24), now: time.Now,
		grants: map[string]*grant{}, failures: map[string]*failureCount{}, verified: map[[32]byte]verifiedPassword{},
		gen: map[string]uint64{}}
}

// errUnauthenticated and errBadCredentials are answered with 401.
var (
	errUnauthenticated = errors.New("authentication required: log in, or send HTTP Basic credentials, an X-API-Key or a bearer token")
	errBadCredentials  = errors.New("invalid credentials")
	errTooManyFailures = errors.New("too many failed logins from this address; try again in a minute")
)

// authenticate finds the request's principal. It returns errUnauthenticated
// when there are no credentials and errBadCredentials when they are wrong.
func (a *authenticator) authenticate(r *http.Request) (principal, error) {
	if user, pass, ok := r.BasicAuth(); ok {
		if err := a.throttled(r); err != nil {
			return principal{}, err
		}
		role, gen, ok := a.checkPassword(user, pass)
		if !ok {
			a.failed(r)
			return principal{}, errBadCredentials
		}
		return principal{User: user, Role: role, Method: methodBasic, gen: gen}, nil
	}
	if key := r.Header.Get(apiKeyHeader); key != "" {
		return a.byKey(r, key, methodAPIKey)
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, cred, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Bearer") || cred == "" {
			return principal{}, errBadCredentials
		}
		cred = strings.TrimSpace(cred)
		if strings.HasPrefix(cred, tokenPrefix) {
			if g := a.lookup(cred, true); g != nil {
				return principal{User: g.user, Role: g.role, Method: methodBearer, gen: g.gen}, nil
			}
			return principal{}, errBadCredentials
		}
		return a.byKey(r, cred, methodAPIKey)
	}
	if c, err := r.Cookie(sessionCookie); err == nil && c.Value != "" {
		if g := a.lookup(c.Value, false); g != nil {
			return principal{User: g.user, Role: g.role, Method: methodSession, CSRF: g.csrf, gen: g.gen}, nil
		}
		// An expired cookie falls through: anonymous may still apply.
	}
	if a.opts.AllowAnonymousLoopback && isLoopbackRequest(r) {
		return principal{User: "anonymous", Role: RoleAdmin, Method: methodAnonymous, CSRF: a.anonCSRF}, nil
	}
	return principal{}, errUnauthenticated
}

// byKey checks an API key.
func (a *authenticator) byKey(r *http.Request, key, method string) (principal, error) {
	if err := a.throttled(r); err != nil {
		return principal{}, err
	}
	if k, ok := a.apiKey(key); ok {
		return principal{User: "key:" + k.Name, Role: k.Role, Method: method}, nil
	}
	a.failed(r)
	return principal{}, errBadCredentials
}

func (a *authenticator) apiKey(key string) (APIKey, bool) {
	sum := sha256.Sum256([]byte(key))
	for _, k := range a.opts.APIKeys {
		if subtle.ConstantTimeCompare(sum[:], k.SHA256[:]) == 1 {
			return k, true
		}
	}
	return APIKey{}, false
}

// verifiedFor is how long a checked user and password skip bcrypt: a
// script sending HTTP Basic on every request would otherwise pay ~50 ms
// of CPU per request.
const verifiedFor = 5 * time.Minute

// checkPassword checks user and password against the users (the
// configured admin among them), in time that does not tell whether the
// user exists, and returns the user's role and generation.
func (a *authenticator) checkPassword(user, pass string) (Role, uint64, bool) {
	key := sha256.Sum256([]byte(user + "\x00" + pass))
	a.mu.Lock()
	// The generation is read before the hash: a change that lands between
	// the two bumps it, so what is granted below is already dead.
	gen := a.gen[user]
	v, cached := a.verified[key]
	a.mu.Unlock()
	hash, role, exists := a.users.credentials(user)
	if !exists {
		hash = a.users.anyHash()
		if len(hash) == 0 {
			return "", 0, false
		}
	}
	if exists && cached && v.gen == gen && a.now().Before(v.until) {
		return role, gen, true
	}
	okPass := bcrypt.CompareHashAndPassword(hash, []byte(pass)) == nil
	if !exists || !okPass {
		return "", 0, false
	}
	a.mu.Lock()
	if len(a.verified) > 100 {
		clear(a.verified)
	}
	a.verified[key] = verifiedPassword{until: a.now().Add(verifiedFor), gen: gen}
	a.mu.Unlock()
	return role, gen, true
}

// endUser ends the sessions and bearer tokens of user and forgets its
// verified passwords: it was deleted, or its role or password changed.
func (a *authenticator) endUser(user string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gen[user]++
	clear(a.verified)
	for k, g := range a.grants {
		if g.user == user {
			delete(a.grants, k)
		}
	}
}

// login checks a username and password, or an API key, and opens a
// session; it returns the cookie value and the grant.
func (a *authenticator) login(r *http.Request, user, pass, key string) (string, *grant, error) {
	if err := a.throttled(r); err != nil {
		return "", nil, err
	}
	var g *grant
	switch {
	case key != "":
		if k, ok := a.apiKey(key); ok {
			g = &grant{user: "key:" + k.Name, role: k.Role}
		}
	case user != "":
		if role, gen, ok := a.checkPassword(user, pass); ok {
			g = &grant{user: user, role: role, gen: gen}
		}
	}
	if g == nil {
		a.failed(r)
		return "", nil, errBadCredentials
	}
	g.csrf = randomToken(24)
	g.expires = a.now().Add(a.opts.SessionTTL)
	id := randomToken(32)
	a.store(id, g)
	return id, g, nil
}

// issueToken makes a bearer token for p with at most p's role.
func (a *authenticator) issueToken(p principal, role Role, ttl time.Duration) (string, *grant) {
	g := &grant{user: p.User, role: role, token: true, expires: a.now().Add(ttl), gen: p.gen}
	tok := tokenPrefix + randomToken(32)
	a.store(tok, g)
	return tok, g
}

func (a *authenticator) store(id string, g *grant) {
	key := sha256.Sum256([]byte(id))
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	if len(a.grants) >= maxSessions {
		var oldest string
		var oldestExp time.Time
		for k, v := range a.grants {
			if v.expires.Before(now) {
				delete(a.grants, k)
				continue
			}
			if oldest == "" || v.expires.Before(oldestExp) {
				oldest, oldestExp = k, v.expires
			}
		}
		if len(a.grants) >= maxSessions {
			delete(a.grants, oldest)
		}
	}
	a.grants[string(key[:])] = g
}

// lookup returns the live grant of a cookie value (token false) or a
// bearer token (token true).
func (a *authenticator) lookup(id string, token bool) *grant {
	key := sha256.Sum256([]byte(id))
	a.mu.Lock()
	defer a.mu.Unlock()
	g := a.grants[string(key[:])]
	if g == nil || g.token != token {
		return nil
	}
	if a.now().After(g.expires) || g.gen != a.gen[g.user] {
		delete(a.grants, string(key[:]))
		return nil
	}
	return g
}

// logout ends the session of a cookie value.
func (a *authenticator) logout(id string) {
	key := sha256.Sum256([]byte(id))
	a.mu.Lock()
	delete(a.grants, string(key[:]))
	a.mu.Unlock()
}

// Failed logins: more than maxFailures from one address within a minute
// lock that address out for the rest of the minute.
const maxFailures = 10

func (a *authenticator) throttled(r *http.Request) error {
	ip := remoteIP(r)
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.failures[ip]
	if f == nil {
		return nil
	}
	if a.now().Sub(f.since) > time.Minute {
		delete(a.failures, ip)
		return nil
	}
	if f.n >= maxFailures {
		return errTooManyFailures
	}
	return nil
}

func (a *authenticator) failed(r *http.Request) {
	ip := remoteIP(r)
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.failures) > 10000 {
		clear(a.failures) // a flood of addresses: forget rather than grow
	}
	f := a.failures[ip]
	if f == nil || a.now().Sub(f.since) > time.Minute {
		f = &failureCount{since: a.now()}
		a.failures[ip] = f
	}
	f.n++
}

// checkCSRF applies to unsafe requests of browser principals: the session's
// CSRF token must come in the X-CSRF-Token header (a cross-site page can
// neither read it nor set the header without a CORS preflight we never
// grant), and an Origin header, when sent, must be this host.
func checkCSRF(r *http.Request, p principal) error {
	if p.Method != methodSession && p.Method != methodAnonymous {
		return nil
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r) {
		return fmt.Errorf("cross-origin request from %s refused", o)
	}
	got := r.Header.Get(csrfHeader)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(p.CSRF)) != 1 {
		return errors.New("missing or wrong " + csrfHeader + " header (GET /api/v1/auth/me returns the token)")
	}
	return nil
}

func sameOrigin(origin string, r *http.Request) bool {
	_, host, ok := strings.Cut(origin, "://")
	return ok && strings.EqualFold(host, r.Host)
}

// isLoopbackRequest reports a request from a loopback address to a
// loopback host name. The Host check defeats DNS rebinding: a page from
// evil.example resolved to 127.0.0.1 still sends Host: evil.example.
func isLoopbackRequest(r *http.Request) bool {
	ip := net.ParseIP(remoteIP(r))
	if ip == nil || !ip.IsLoopback() {
		return false
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	hip := net.ParseIP(host)
	return hip != nil && hip.IsLoopback()
}

func remoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

// bcryptCost checks that hash is a bcrypt hash and returns its cost.
func bcryptCost(hash []byte) (int, error) {
	return bcrypt.Cost(hash)
}

// HashPassword returns the bcrypt hash of password, for the admin user
// (dashboard users' hashes are made the same way, userStore.hash).
func HashPassword(password string) ([]byte, error) {
	return hashPassword(password, bcrypt.DefaultCost)
}

// hashPassword is HashPassword at a given cost (tests use the lowest).
func hashPassword(password string, cost int) ([]byte, error) {
	return bcrypt.GenerateFromPassword([]byte(password), cost)
}

// ParseAPIKeyHash parses the hex SHA-256 of an API key, as the
// configuration gives it ("sha256:" prefix optional).
func ParseAPIKeyHash(s string) ([32]byte, error) {
	var sum [32]byte
	b, err := hex.DecodeString(strings.TrimPrefix(strings.TrimSpace(s), "sha256:"))
	if err != nil || len(b) != len(sum) {
		return sum, errors.New("web: api key hash: want the 64 hex digits of the key's SHA-256 (printf %s KEY | sha256sum)")
	}
	copy(sum[:], b)
	return sum, nil
}

// NewAPIKey returns a random API key and the hex SHA-256 to configure.
func NewAPIKey() (key, sha256Hex string) {
	key = "xmqk_" + randomToken(30)
	sum := sha256.Sum256([]byte(key))
	return key, hex.EncodeToString(sum[:])
}
