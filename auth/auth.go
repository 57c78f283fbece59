package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// Auth authenticates clients at CONNECT, authorizes PUBLISH and SUBSCRIBE,
// and enforces the abuse limits. It satisfies core's Authenticator,
// Authorizer, EnhancedAuthenticator and ConnectionObserver with plain
// parameters. It is safe for concurrent use.
type Auth struct {
	opts          Options
	log           *zap.Logger
	certListeners map[string]bool

	users atomic.Pointer[passwordFile] // nil: no password file
	acl   atomic.Pointer[aclState]     // nil: no ACL file
	gen   atomic.Uint64                // ACL generation, one per load

	mu       sync.Mutex // serializes loads; guards the stamps and errors below
	pwStamp  fileStamp
	aclStamp fileStamp
	pwErr    string // last poll error, logged once
	aclErr   string

	bans    *banList
	banMu   sync.Mutex // orders the changes of stored bans: memory and store together
	failed  *failureLimiter
	rate    *rateLimiter
	flaps   *flapDetector
	denyLog *limitTable[string, denyWindow]
	hashq   *hashQueue
	jwt     *jwtAuth // nil without auth.jwt (jwt.go)

	scramSecret []byte
	proofKey    []byte                               // keys the login cache's proofs; never leaves the process
	nonce       func() string                        // SCRAM server nonce; tests replace it
	now         func() time.Time                     // tests replace it
	verify      func(h hasher, password []byte) bool // checks a hash; tests replace it
	busyLogged  logGate                              // the Server Busy log line
	http        *httpAuth                            // nil: no HTTP service (httpauth.go)

	stats counters

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// aclState is one generation of ACL rules with its own decision cache.
type aclState struct {
	set   *aclSet
	cache *decisionCache
	gen   uint64
}

// fileStamp identifies a version of a file by size, modification time and
// the file itself: a file replaced by rename (as editors and xmq passwd
// write) is new even when its size and coarse timestamp are not.
type fileStamp struct {
	size int64
	mod  time.Time
	fi   os.FileInfo
}

func (s fileStamp) same(o fileStamp) bool {
	return s.size == o.size && s.mod.Equal(o.mod) && s.fi != nil && o.fi != nil && os.SameFile(s.fi, o.fi)
}

func stamp(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{size: fi.Size(), mod: fi.ModTime(), fi: fi}, nil
}

// New loads the files named in opts and starts watching them (see
// Options.ReloadInterval). Close stops the watch.
func New(opts Options) (*Auth, error) {
	opts.SetDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	l := opts.Limits
	a := &Auth{
		opts: opts, log: opts.Log, certListeners: map[string]bool{},
		bans:        newBanList(),
		failed:      newFailureLimiter(l.MaxFailedLogins, l.FailedLoginWindow, l.FailedLoginBan, l.Tracked),
		rate:        newRateLimiter(l.ConnectionRate, l.ConnectionBurst, l.Tracked),
		flaps:       newFlapDetector(l.FlapMax, l.FlapWindow, l.Tracked),
		denyLog:     newDenyLog(l.Tracked),
		scramSecret: randomBytes(32),
		proofKey:    randomBytes(32),
		nonce:       func() string { return b64(randomBytes(18)) },
		now:         opts.now,
		verify:      func(h hasher, password []byte) bool { return h.verify(password) },
		stop:        make(chan struct{}), done: make(chan struct{}),
	}
	budget := func(key netip.Addr) (int, bool) { return a.failed.budget(key, a.now()) }
	a.hashq = newHashQueue(l.MaxHashes, l.HashQueuePerSource, l.HashQueue, budget)
	var err error
	if a.http, err = newHTTPAuth(opts, budget); err != nil {
		return nil, err
	}
	for _, name := range opts.CertListeners {
		a.certListeners[name] = true
	}
	a.jwt = newJWT(opts.JWT, l.Tracked, a.log)
	a.mu.Lock()
	err = errors.Join(a.loadPasswordsLocked(), a.loadACLLocked(), a.loadJWTLocked(false))
	a.mu.Unlock()
	if err == nil {
		err = a.loadBans(a.now())
	}
	if err != nil {
		return nil, err
	}
	a.jwt.start(a.now())
	if st := a.acl.Load(); st != nil && a.users.Load() == nil && opts.HTTP.URL == "" && len(st.set.users) > 0 {
		a.log.Warn("the ACL file has user sections but there is no password file: user names are not verified")
	}
	go a.maintain()
	return a, nil
}

// Close stops watching the files. The Auth keeps working with what it has.
func (a *Auth) Close() error {
	a.closeOnce.Do(func() { close(a.stop) })
	<-a.done
	a.http.close()
	return nil
}

// Reload re-reads the password and ACL files now (SIGHUP). A file that
// fails to load leaves its previous version in force; the error says why.
// Connections stay up: new password entries apply to the next CONNECT,
// new ACL rules to the next PUBLISH and SUBSCRIBE of every client.
func (a *Auth) Reload() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return errors.Join(a.loadPasswordsLocked(), a.loadACLLocked(), a.loadJWTLocked(true))
}

// SetFiles changes the password file and the ACL file ("" for none) while
// the Auth runs (a reload of the configuration) and loads them; new logins
// and decisions use them at once. A file that fails to load leaves both
// as they were, and the error says why.
func (a *Auth) SetFiles(passwordFile, aclFile string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	oldPW, oldACL := a.opts.PasswordFile, a.opts.ACLFile
	if passwordFile == oldPW && aclFile == oldACL {
		return nil
	}
	if err := CheckFiles(passwordFile, aclFile); err != nil {
		return err
	}
	a.opts.PasswordFile, a.opts.ACLFile = passwordFile, aclFile
	var errs []error
	if passwordFile != oldPW {
		if passwordFile == "" {
			a.users.Store(nil)
			a.pwStamp, a.pwErr = fileStamp{}, ""
			a.log.Info("password file removed: user names are not checked; anonymous access per allow_anonymous")
		} else {
			errs = append(errs, a.loadPasswordsLocked())
		}
	}
	if aclFile != oldACL {
		if aclFile == "" {
			a.aclStamp, a.aclErr = fileStamp{}, ""
			a.gen.Add(1)
			a.acl.Store(nil)
			a.log.Info("acl file removed: every client may publish and subscribe to everything")
		} else {
			errs = append(errs, a.loadACLLocked())
		}
	}
	return errors.Join(errs...)
}

// loadPasswordsLocked (re)loads the password file; a.mu is held.
func (a *Auth) loadPasswordsLocked() error {
	path := a.opts.PasswordFile
	if path == "" {
		return nil
	}
	st, _ := stamp(path)
	data, err := os.ReadFile(path)
	var pf *passwordFile
	if err == nil {
		pf, err = parsePasswordFile(data)
	}
	if err != nil {
		a.stats.reloadErrors.Add(1)
		return fmt.Errorf("auth: password file %s: %w", path, err)
	}
	// A new load starts with an empty login cache: a changed password
	// takes effect at the next login.
	pf.logins = newLoginCache(a.opts.LoginCacheTTL, a.opts.Limits.Tracked, a.now)
	a.pwStamp, a.pwErr = st, ""
	a.users.Store(pf)
	a.stats.reloads.Add(1)
	a.log.Info("password file loaded", zap.String("file", path), zap.Int("users", len(pf.users)))
	return nil
}

// loadACLLocked (re)loads the ACL file with a fresh decision cache; a.mu
// is held.
func (a *Auth) loadACLLocked() error {
	path := a.opts.ACLFile
	if path == "" {
		return nil
	}
	st, _ := stamp(path)
	data, err := os.ReadFile(path)
	var set *aclSet
	if err == nil {
		set, err = parseACL(data)
	}
	if err != nil {
		a.stats.reloadErrors.Add(1)
		return fmt.Errorf("auth: acl file %s: %w", path, err)
	}
	a.aclStamp, a.aclErr = st, ""
	gen := a.gen.Add(1)
	a.acl.Store(&aclState{set: set, cache: newDecisionCache(a.opts.ACLCacheSize), gen: gen})
	a.stats.reloads.Add(1)
	a.log.Info("acl file loaded", zap.String("file", path), zap.Int("rules", set.rules), zap.Int("users", len(set.users)),
		zap.Int("patterns", len(set.patterns)), zap.Uint64("generation", gen))
	return nil
}

// maintain polls the files and sweeps the limit tables until Close.
func (a *Auth) maintain() {
	defer close(a.done)
	every := a.opts.ReloadInterval
	if every < 0 {
		every = 30 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
		}
		if a.opts.ReloadInterval > 0 {
			a.poll()
		}
		now := a.now()
		a.banMu.Lock()
		a.unstoreBans(a.bans.sweep(now)...)
		a.banMu.Unlock()
		if pf := a.users.Load(); pf != nil {
			pf.logins.sweep(now)
		}
		a.failed.t.sweep(now)
		a.rate.t.sweep(now)
		a.flaps.t.sweep(now)
		a.flaps.holders.sweep(now)
		a.denyLog.sweep(now)
		a.maintainJWT(now)
	}
}

// poll reloads a file whose size or modification time changed. A file
// caught half-written fails to parse and is tried again at the next tick
// (its stamp is not taken).
func (a *Auth) poll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	check := func(path string, last fileStamp, lastErr *string, load func() error) {
		if path == "" {
			return
		}
		st, err := stamp(path)
		if err == nil && st.same(last) {
			return
		}
		if err == nil {
			err = load()
		}
		if err == nil {
			return
		}
		if msg := err.Error(); msg != *lastErr {
			*lastErr = msg
			a.log.Error("reload failed; the previous version stays in force", zap.Error(err))
		}
	}
	check(a.opts.PasswordFile, a.pwStamp, &a.pwErr, a.loadPasswordsLocked)
	check(a.opts.ACLFile, a.aclStamp, &a.aclErr, a.loadACLLocked)
	a.pollJWTLocked()
}

// refusal is an authentication refusal: core sends Code to the client and
// logs the error text, which never holds a credential.
type refusal struct {
	code codec.ReasonCode
	why  string
}

func (r *refusal) Error() string { return "auth: " + r.why }
func (r *refusal) Unwrap() error { return r.code }

func refuse(code codec.ReasonCode, format string, a ...any) error {
	return &refusal{code: code, why: fmt.Sprintf(format, a...)}
}

// admit runs the checks every attempt passes first, cheapest first: the
// connection rate of the source, then the bans.
func (a *Auth) admit(who identity, username string, ip netip.Addr, now time.Time) error {
	if !a.rate.allow(sourceKey(ip), now) {
		a.stats.rateLimited.Add(1)
		return refuse(codec.ConnectionRateExceeded, "connection rate of %s exceeded", ip)
	}
	if b, ok := a.bans.match(who, username, ip, now); ok {
		a.stats.banned.Add(1)
		return refuse(codec.Banned, "banned (%s %s)", b.Kind, b.Value)
	}
	return nil
}

// Authenticate decides a CONNECT (core.Authenticator). In order: the
// connection rate of the source address, the ban list, the HTTP service
// for a client with a user name (Options.HTTP; its ignore leaves the rest
// to decide), then either the anonymous policy (no user name, or no password file), the certificate
// identity (CertListeners), or the password: a source locked out after
// too many failures is refused before any hash is checked; a login that
// succeeded within LoginCacheTTL is admitted without one; otherwise the
// login waits for its turn in the hash queue (fair between sources) and
// exactly one hash is checked, against a stand-in of the same cost for an
// unknown user. Only a wrong password or an unknown user counts as a
// failure, and gets Bad User Name or Password. A connection opened by a
// foreign browser page (crossOrigin set) is never local for the anonymous
// policy.
func (a *Auth) Authenticate(clientID, username string, password []byte, remote net.Addr, listener, crossOrigin string) error {
	now := a.now()
	ip, _ := addrIP(remote)
	pf := a.users.Load()
	who := a.identityOf(clientID, username, ip, listener, pf)
	if err := a.admit(who, username, ip, now); err != nil {
		return err
	}
	// A token is checked first, then the operator's service, then the files.
	if a.tokenApplies(username, password, listener) {
		_, _, err := a.tokenLogin(clientID, username, password, remote, ip, now)
		return err
	}
	if done, err := a.httpAuthenticate(who, clientID, username, password, ip, listener, pf, now); done {
		return err
	}
	switch {
	case username != "" && a.certListeners[listener]:
		a.loggedIn(who, now)
		return nil
	case username == "" || pf == nil:
		if !a.anonymousOK(listener, remote, ip, crossOrigin) {
			a.stats.anonymousRefused.Add(1)
			if crossOrigin != "" {
				return refuse(codec.NotAuthorized, "anonymous access is not allowed to a web page from %s (a foreign origin) on listener %s", crossOrigin, listener)
			}
			if username != "" {
				return refuse(codec.NotAuthorized, "user names are not checked without a password file, and anonymous access is not allowed from %s on listener %s", ip, listener)
			}
			return refuse(codec.NotAuthorized, "anonymous access is not allowed from %s on listener %s", ip, listener)
		}
		a.loggedIn(who, now)
		return nil
	}
	key := sourceKey(ip)
	if a.failed.locked(key, now) {
		a.stats.lockedOut.Add(1)
		return refuse(codec.NotAuthorized, "too many failed logins from %s", ip)
	}
	e := pf.users[username]
	var proof loginProof
	if e != nil && pf.logins != nil {
		proof = proofOf(a.proofKey, username, password, e)
		// Proved lately, or by the check of the same credentials now in
		// flight: no hash, no turn in the queue.
		if pf.logins.await(proof, a.opts.Limits.HashWait) {
			a.stats.loginCacheHits.Add(1)
			a.loggedIn(who, now)
			return nil
		}
	}
	switch a.hashq.acquire(key, a.opts.Limits.HashWait) {
	case turnBusy:
		a.stats.busy.Add(1)
		a.logBusy(ip)
		return refuse(codec.ServerBusy, "no password check turn within %v (hash queue full or too slow)", a.opts.Limits.HashWait)
	case turnLocked:
		a.stats.lockedOut.Add(1)
		return refuse(codec.NotAuthorized, "too many failed logins from %s", ip)
	}
	ok, cached := a.checkHash(pf, e, proof, key, ip, password)
	switch {
	case cached:
		a.stats.loginCacheHits.Add(1)
	case !ok:
		a.stats.loginFailures.Add(1)
		if e == nil {
			return refuse(codec.BadUserNameOrPassword, "unknown user %q", username)
		}
		return refuse(codec.BadUserNameOrPassword, "wrong password for user %q", username)
	}
	a.loggedIn(who, now)
	return nil
}

// checkHash runs a login's hash check in the turn the hash queue gave it, and
// ends the turn: a failure is counted for the source first, so that the
// queue sees the source's budget or lockout when it hands out the next
// turn. A login whose credentials another login proved meanwhile (or is
// checking now) is admitted without a check (cached).
func (a *Auth) checkHash(pf *passwordFile, e *entry, proof loginProof, key, ip netip.Addr, password []byte) (ok, cached bool) {
	defer a.hashq.release(key)
	if e != nil && pf.logins != nil {
		proved, land := pf.logins.lead(proof, a.opts.Limits.HashWait)
		if proved {
			return true, true
		}
		defer land() // after add: the logins waiting for this check then find it proved
	}
	h := pf.dummy
	if e != nil {
		h = e.hash
	}
	ok = a.verify(h, password) && e != nil
	a.stats.hashChecks.Add(1)
	now := a.now()
	if ok {
		if pf.logins != nil {
			pf.logins.add(proof, now)
		}
		return true, false
	}
	a.failLogin(key, ip, now)
	return false, false
}

// failLogin counts a failed login against its source and logs a lockout
// it causes.
func (a *Auth) failLogin(key, ip netip.Addr, now time.Time) {
	if a.failed.fail(key, now) {
		a.log.Warn("source locked out after failed logins", zap.String("address", ip.String()),
			zap.Int("failures", a.opts.Limits.MaxFailedLogins), zap.Duration("for", a.opts.Limits.FailedLoginBan))
	}
}

// logBusy logs a Server Busy refusal, at most once a second (a flood
// would otherwise flood the log too); Stats counts every one.
func (a *Auth) logBusy(ip netip.Addr) {
	if a.busyLogged.open() {
		a.log.Warn("login refused with Server Busy: no password check turn in time",
			zap.String("address", ip.String()), zap.Int("waiting", a.hashq.waiting()), zap.Int("max_hashes", a.opts.Limits.MaxHashes),
			zap.Duration("hash_wait", a.opts.Limits.HashWait), zap.Int64("refused_so_far", a.stats.busy.Load()))
	}
}

// logGate lets a log line through at most once a second: a flood of the
// same event would otherwise flood the log too (the counters count every
// one).
type logGate struct{ last atomic.Int64 } // unix seconds of the last line

func (g *logGate) open() bool {
	now := time.Now().Unix()
	last := g.last.Load()
	return now > last && g.last.CompareAndSwap(last, now)
}

// loggedIn counts an admitted login and, for flapping detection, notes
// which identity now holds the client id: when core then reports the
// previous connection with that client id as taken over, the takeover
// counts as that identity's drop only if the same identity took over.
func (a *Auth) loggedIn(who identity, now time.Time) {
	a.stats.logins.Add(1)
	a.flaps.admitted(who, now)
}

// identityOf is the identity a client is counted and banned as for
// flapping: its client id with its user name when the name is verified
// (a password file, a token, or a certificate listener), otherwise with its
// source address.
func (a *Auth) identityOf(clientID, username string, ip netip.Addr, listener string, pf *passwordFile) identity {
	if username != "" && (pf != nil || a.jwt != nil || a.certListeners[listener]) {
		return identity{clientID: clientID, username: username}
	}
	return identity{clientID: clientID, addr: sourceKey(ip)}
}

// anonymousOK applies the anonymous policy of a listener. The local policy
// never admits a connection from a foreign web page: the page runs in a
// browser on the machine, but its author is not local.
func (a *Auth) anonymousOK(listener string, remote net.Addr, ip netip.Addr, crossOrigin string) bool {
	p := a.opts.AllowAnonymous
	if lp := a.opts.ListenerAnonymous[listener]; lp != "" {
		p = lp
	}
	switch p {
	case AnonymousAllow:
		return true
	case AnonymousDeny:
		return false
	}
	if crossOrigin != "" {
		return false
	}
	if ip.IsValid() {
		return ip.IsLoopback()
	}
	// In-process (net.Pipe) and Unix socket connections are local.
	if _, ok := remote.(*net.UnixAddr); ok {
		return true
	}
	return remote != nil && remote.Network() == "pipe"
}

// AuthStep runs one step of MQTT 5 enhanced authentication
// (core.EnhancedAuthenticator): SCRAM-SHA-256 or SCRAM-SHA-1 against the
// SCRAM credentials of the password file. The first step (state nil)
// passes the same rate, ban and lockout checks as Authenticate and answers
// the client-first-message; the second checks the proof and answers with
// the server-final-message. An unknown user gets a consistent fake salt,
// so the exchange does not tell whether a user exists.
func (a *Auth) AuthStep(method, clientID string, state any, data []byte, remote net.Addr, listener string) (
	reply []byte, next any, done bool, username string, err error) {
	m := scramMechByName(method)
	pf := a.users.Load()
	if m == nil || pf == nil {
		return nil, nil, false, "", refuse(codec.BadAuthenticationMethod, "authentication method %q is not supported", method)
	}
	now := a.now()
	ip, _ := addrIP(remote)
	key := sourceKey(ip)
	if state == nil {
		if err := a.admit(identity{clientID: clientID, addr: key}, "", ip, now); err != nil {
			return nil, nil, false, "", err
		}
		if a.failed.locked(key, now) {
			a.stats.lockedOut.Add(1)
			return nil, nil, false, "", refuse(codec.NotAuthorized, "too many failed logins from %s", ip)
		}
		x, err := scramFirst(m, data, a.nonce(), func(user string) (scramCred, bool) {
			if e := pf.users[user]; e != nil {
				c, ok := e.scram[m]
				return c, ok
			}
			return scramCred{}, false
		}, func(user string) scramCred { return a.fakeScram(m, user) })
		if err != nil {
			a.stats.loginFailures.Add(1)
			return nil, nil, false, "", refuse(codec.NotAuthorized, "%s: %v", m.name, err)
		}
		if b, ok := a.bans.match(identity{clientID: clientID, username: x.user}, x.user, netip.Addr{}, now); ok {
			a.stats.banned.Add(1)
			return nil, nil, false, "", refuse(codec.Banned, "banned (%s %s)", b.Kind, b.Value)
		}
		return []byte(x.serverFirst), x, false, "", nil
	}
	x, ok := state.(*scramExchange)
	if !ok || x.mech != m {
		return nil, nil, false, "", refuse(codec.ProtocolError, "%s: unexpected authentication state", m.name)
	}
	reply, err = x.final(data)
	if err != nil {
		a.stats.loginFailures.Add(1)
		a.failLogin(key, ip, now)
		why := err.Error()
		if !x.known {
			why = fmt.Sprintf("%s: user %q unknown or without %s credentials", m.name, x.user, m.name)
		}
		return nil, nil, false, "", refuse(codec.BadUserNameOrPassword, "%s", why)
	}
	a.loggedIn(identity{clientID: clientID, username: x.user}, now)
	return reply, nil, true, x.user, nil
}

// fakeScram makes stable credentials for a user without real ones: the
// same salt every time, so probing cannot tell.
func (a *Auth) fakeScram(m *scramMech, user string) scramCred {
	mac := hmac.New(sha256.New, a.scramSecret)
	mac.Write([]byte(m.name + "\x00" + user))
	sum := mac.Sum(nil)
	return scramCred{iter: DefaultScramIterations, salt: sum[:16], storedKey: randomBytes(m.size), serverKey: randomBytes(m.size)}
}

// ClientDisconnected feeds flapping detection (core.ConnectionObserver):
// an identity (see identityOf) whose connections end uncleanly more than
// FlapMax times in FlapWindow is banned for FlapBan, that identity only.
// Clean ends (DISCONNECT, with or without will), shutdowns and operator
// disconnects do not count; a takeover counts only when the connection
// that took over is the same identity (a device reconnecting before its
// old connection was noticed dead, or two devices sharing credentials and
// client id), since anyone who knows a client id can take it over.
func (a *Auth) ClientDisconnected(clientID, username string, remote net.Addr, listener string, connectedFor time.Duration, reason string) {
	a.jwtDisconnected(clientID, username, remote)
	switch reason {
	case "normal", "disconnect_with_will", "server_shutdown", "admin", "login_expired":
		return
	}
	now := a.now()
	ip, _ := addrIP(remote)
	who := a.identityOf(clientID, username, ip, listener, a.users.Load())
	if reason == "taken_over" && !a.flaps.tookOverBySelf(who, now) {
		return
	}
	if !a.flaps.drop(who, now) {
		return
	}
	until := now.Add(a.opts.Limits.FlapBan)
	b := a.bans.addIdentity(who, Ban{Until: until, Reason: "flapping", At: now})
	a.stats.flapBans.Add(1)
	a.log.Warn("client banned for flapping", zap.String("kind", string(b.Kind)), zap.String("value", b.Value),
		zap.Int("disconnects", a.opts.Limits.FlapMax+1), zap.Duration("within", a.opts.Limits.FlapWindow), zap.Time("until", until))
}

// CanPublish decides whether a client may publish to topic
// (core.Authorizer). Decisions are cached per client and topic until the
// ACL file is reloaded; a cache hit takes no lock but a shard's read lock
// and allocates nothing. topic may alias a buffer the caller reuses.
func (a *Auth) CanPublish(clientID, username, topic string) bool {
	return a.check(denyPublish, clientID, username, topic, accWrite)
}

// CanWill decides whether a client may have a will on topic, at CONNECT
// and again when the will is published (core.Authorizer): write access,
// as for PUBLISH, counted and logged as a will.
func (a *Auth) CanWill(clientID, username, topic string) bool {
	return a.check(denyWill, clientID, username, topic, accWrite)
}

// CanRead decides whether a message on topic may be delivered to a client
// (core.Authorizer), cached like CanPublish.
func (a *Auth) CanRead(clientID, username, topic string) bool {
	return a.check(denyRead, clientID, username, topic, accRead)
}

// check decides one access to a topic name through the decision cache and
// reports a refusal.
func (a *Auth) check(kind denyKind, clientID, username, topic string, acc access) bool {
	if ok, decided := a.claimTopic(kind, clientID, username, topic, acc); decided {
		return ok
	}
	if a.httpDecides(acc) {
		if ok, done := a.httpCheck(kind, clientID, username, topic, acc); done {
			return ok
		}
	}
	st := a.acl.Load()
	if st == nil {
		return true
	}
	d, hit := st.cache.get(clientID, username, topic, acc)
	if !hit {
		d.ok, d.by = st.set.decideTopic(clientID, username, topic, acc)
		st.cache.put(clientID, username, topic, acc, d)
		a.stats.aclMisses.Add(1)
	}
	if !d.ok {
		a.denied(kind, clientID, username, topic, d.by)
	}
	return d.ok
}

// CanSubscribe decides whether a client may subscribe to filter
// (core.Authorizer); a shared subscription is decided on its inner filter.
// A granted filter may still reach topics the client may not read, which
// CanRead filters out on delivery.
func (a *Auth) CanSubscribe(clientID, username, filter string) bool {
	if ok, decided := a.claimSubscribe(clientID, username, filter); decided {
		return ok
	}
	if a.httpDecides(accSubscribe) {
		if ok, done := a.httpCheck(denySubscribe, clientID, username, filter, accSubscribe); done {
			return ok
		}
	}
	st := a.acl.Load()
	if st == nil {
		return true
	}
	ok, _, by := st.set.canSubscribe(clientID, username, filter)
	if !ok {
		a.denied(denySubscribe, clientID, username, filter, by)
	}
	return ok
}

// ReadsAll reports that every message filter can match is readable by the
// client, so deliveries need no CanRead until Generation changes
// (core.Authorizer). It counts and logs nothing.
func (a *Auth) ReadsAll(clientID, username, filter string) bool {
	if a.hasClaim(clientID, username) {
		return false
	}
	if a.httpDecides(accSubscribe) {
		if all, known := a.httpReadsAll(clientID, username, filter); known {
			return all
		}
	}
	st := a.acl.Load()
	if st == nil {
		return true
	}
	ok, readAll, _ := st.set.canSubscribe(clientID, username, filter)
	return ok && readAll
}

// Generation changes whenever earlier decisions may no longer hold: each
// ACL load (core.Authorizer).
func (a *Auth) Generation() uint64 { return a.gen.Load() }

// Ban adds or replaces a ban (same kind and value) of kind client_id,
// username or ip; with Options.BanStore it is stored and survives a
// restart until it expires. At defaults to now.
// Connections already up are not closed: the caller disconnects them
// through the broker if it wants.
func (a *Auth) Ban(b Ban) error {
	if b.Value == "" {
		return fmt.Errorf("%w: empty value", ErrBadBan)
	}
	if b.At.IsZero() {
		b.At = a.now()
	}
	a.banMu.Lock()
	defer a.banMu.Unlock()
	b, err := a.bans.add(b)
	if err != nil {
		return err
	}
	a.storeBan(b)
	a.log.Info("ban set", zap.String("kind", string(b.Kind)), zap.String("value", b.Value), zap.Time("until", b.Until),
		zap.String("reason", b.Reason))
	return nil
}

// Unban lifts a ban; it reports whether there was one. value is as Bans
// lists it (an address or prefix in any form).
func (a *Auth) Unban(kind BanKind, value string) bool {
	a.banMu.Lock()
	defer a.banMu.Unlock()
	ok := a.bans.remove(kind, value)
	if kind == BanAddress {
		if _, v, err := banPrefix(value); err == nil {
			value = v
		}
	}
	if ok {
		a.unstoreBans(Ban{Kind: kind, Value: value})
		a.log.Info("ban lifted", zap.String("kind", string(kind)), zap.String("value", value))
	}
	return ok
}

// Bans lists the bans in force, by kind and value.
func (a *Auth) Bans() []Ban { return a.bans.list(a.now()) }

// counters are the live statistics.
type counters struct {
	logins, loginFailures, anonymousRefused, banned, lockedOut, rateLimited, busy,
	flapBans, aclMisses, reloads, reloadErrors, hashChecks, loginCacheHits atomic.Int64
	denied [denyKinds]atomic.Int64
}

// Stats is a snapshot of the counters since New, for $SYS and metrics.
type Stats struct {
	Logins           int64 // CONNECTs accepted (password, SCRAM, certificate or anonymous)
	LoginFailures    int64 // wrong password, unknown user or failed SCRAM exchange
	AnonymousRefused int64 // refused by the anonymous policy
	Banned           int64 // refused by a ban
	LockedOut        int64 // refused without a hash check: too many failed logins from the source
	RateLimited      int64 // refused by the per-source connection rate
	Busy             int64 // refused because the hash queue was full or no turn came in time
	FlapBans         int64 // identities banned for flapping
	HashChecks       int64 // password hashes checked (unknown users' stand-ins included)
	LoginCacheHits   int64 // password logins admitted from the login cache, without a hash check
	LoginsCached     int   // logins in the login cache now
	HashWaiting      int   // logins waiting for a hash check turn now
	PublishDenied    int64 // PUBLISH refused by the ACL
	SubscribeDenied  int64 // SUBSCRIBE filters refused by the ACL
	WillDenied       int64 // wills refused by the ACL, at CONNECT or when due
	DeliveryDenied   int64 // messages not delivered to a subscriber the ACL does not let read them
	ACLCacheMisses   int64 // PUBLISH, will and delivery decisions computed from the rules
	ACLCached        int   // decisions in the cache now
	Reloads          int64 // successful file loads (each file counts)
	ReloadErrors     int64
	ACLGeneration    uint64 // bumped by each ACL load
	Users            int    // entries in the password file
	ACLRules         int
	Bans             int        // bans in force
	LockedSources    int        // source addresses remembered by the failed-login limit
	HTTP             *HTTPStats // the HTTP service's counters; nil without one
}

// Stats returns a snapshot of the counters.
func (a *Auth) Stats() Stats {
	s := Stats{
		Logins: a.stats.logins.Load(), LoginFailures: a.stats.loginFailures.Load(),
		AnonymousRefused: a.stats.anonymousRefused.Load(), Banned: a.stats.banned.Load(),
		LockedOut: a.stats.lockedOut.Load(), RateLimited: a.stats.rateLimited.Load(), Busy: a.stats.busy.Load(),
		FlapBans: a.stats.flapBans.Load(), PublishDenied: a.stats.denied[denyPublish].Load(),
		SubscribeDenied: a.stats.denied[denySubscribe].Load(), WillDenied: a.stats.denied[denyWill].Load(),
		DeliveryDenied: a.stats.denied[denyRead].Load(), ACLCacheMisses: a.stats.aclMisses.Load(),
		Reloads: a.stats.reloads.Load(), ReloadErrors: a.stats.reloadErrors.Load(),
		HashChecks: a.stats.hashChecks.Load(), LoginCacheHits: a.stats.loginCacheHits.Load(),
		HashWaiting: a.hashq.waiting(),
		Bans:        len(a.Bans()), LockedSources: a.failed.t.len(), HTTP: a.httpStats(),
	}
	if pf := a.users.Load(); pf != nil {
		s.Users, s.LoginsCached = len(pf.users), pf.logins.len()
	}
	if st := a.acl.Load(); st != nil {
		s.ACLGeneration, s.ACLRules, s.ACLCached = st.gen, st.set.rules, st.cache.len()
	}
	return s
}

// CheckFiles reads and parses a password file and an ACL file ("" for
// none) as New would, without starting anything (xmq check-config). The
// errors name the files.
func CheckFiles(passwordFile, aclFile string) error {
	var errs []error
	if passwordFile != "" {
		data, err := os.ReadFile(passwordFile)
		if err == nil {
			_, err = parsePasswordFile(data)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("auth: password file %s: %w", passwordFile, err))
		}
	}
	if aclFile != "" {
		data, err := os.ReadFile(aclFile)
		if err == nil {
			_, err = parseACL(data)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("auth: acl file %s: %w", aclFile, err))
		}
	}
	return errors.Join(errs...)
}
