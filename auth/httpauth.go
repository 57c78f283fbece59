package auth

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// HTTP authentication and authorization: an operator's service answers
// CONNECTs (HTTPOptions.URL) and, optionally, PUBLISH and SUBSCRIBE
// (HTTPOptions.ACLURL) with allow, deny or ignore, in the shape of EMQX's
// HTTP authenticator and authorizer. Ignore leaves the decision to the
// files, exactly as without the service. docs/auth-http.md is the
// operator's view: the bodies, the cache, what happens when the service
// is slow or down.
//
// Where it sits: Authenticate asks the service after the connection rate
// and the bans, before the anonymous, certificate and password rules
// (httpAuthenticate); the ACL checks ask it before the ACL file
// (httpCheck), for PUBLISH, wills and SUBSCRIBE, never for a delivery,
// which must not wait on the network.

// HTTPCacheKey says which fields of a CONNECT its cached answer is kept
// for: a login reuses an answer only if it agrees on all of them.
type HTTPCacheKey string

// Cache keys. In YAML, auth.http.cache_key.
const (
	// HTTPCacheClient keeps an answer for every field the service is sent:
	// client id, user name, password, address, listener. Whatever the
	// service decides on, the cache never admits a login it was not asked
	// about. A fleet costs one request per client per cache_ttl.
	HTTPCacheClient HTTPCacheKey = "client"
	// HTTPCacheCredentials keeps an answer for user name, password and
	// listener: clients that share credentials share the answer, whatever
	// their client id or address. Only for a service that decides on the
	// credentials alone.
	HTTPCacheCredentials HTTPCacheKey = "credentials"
)

// HTTPOptions configures the HTTP service (auth.http). Zero values mean
// the defaults given.
type HTTPOptions struct {
	// URL receives a POST for each CONNECT with a user name
	// (httpConnectRequest); "" asks no service at CONNECT. http or https;
	// no user:password in it (it would show in logs and config print).
	URL string
	// ACLURL receives a POST for each PUBLISH topic, will and SUBSCRIBE
	// filter that is not in the cache (httpACLRequest); "" asks no
	// service: the ACL file decides, as without one.
	ACLURL string
	// Timeout bounds each request: connecting, sending, the answer.
	// Default 5s.
	Timeout time.Duration
	// QueueWait bounds the wait for a request slot (MaxInflight), so a
	// login waits at most QueueWait + Timeout for the service. Default:
	// Timeout.
	QueueWait time.Duration
	// CacheTTL is how long answers are remembered: allow and ignore for a
	// CONNECT (a denial never is: a fixed password works at the next
	// attempt, and the failed-login lockout bounds the retries), every
	// answer for an ACL question. No answer (an error, a timeout) is ever
	// cached. Logins with the same key (CacheKey) in flight at once share
	// one request even when nothing is cached. Default 1m; negative: off.
	CacheTTL time.Duration
	// CacheKey is what a CONNECT answer is kept for. Default
	// HTTPCacheClient.
	CacheKey HTTPCacheKey
	// MaxInflight bounds the CONNECT requests in flight, and separately
	// the ACL requests. A CONNECT waiting for a slot is served fairly
	// between source addresses, as in the hash queue, a source never
	// holding more slots than the failures it has left before its
	// lockout; it is refused with Server Busy when no slot comes within
	// QueueWait, or at once when Limits.HashQueuePerSource logins of its
	// source or Limits.HashQueue in all are waiting already. Default 64.
	MaxInflight int
	// FailOpen: a question the service did not answer (an error, a
	// timeout, no slot) is treated as ignore, so the files decide. Off
	// (the default), such a CONNECT is refused with Server Unavailable
	// (Server Busy when no slot came) and such a PUBLISH or SUBSCRIBE
	// with Not Authorized. Turning it on lets whatever the files allow in
	// while the service is down: without an ACL file, every topic.
	FailOpen bool
	// CAFile holds the PEM CAs that verify an https service (default: the
	// system's roots); CertFile and KeyFile are the broker's client
	// certificate for a service that wants mutual TLS; ServerName is the
	// name verified (default: the URL's host). The files are read at each
	// new connection, so renewed ones apply without a restart.
	CAFile, CertFile, KeyFile, ServerName string
}

// Defaults of HTTPOptions.
const (
	DefaultHTTPTimeout     = 5 * time.Second
	DefaultHTTPCacheTTL    = time.Minute
	DefaultHTTPMaxInflight = 64
)

func (o *HTTPOptions) setDefaults() {
	if o.Timeout == 0 {
		o.Timeout = DefaultHTTPTimeout
	}
	if o.QueueWait == 0 {
		o.QueueWait = o.Timeout
	}
	if o.CacheTTL == 0 {
		o.CacheTTL = DefaultHTTPCacheTTL
	}
	if o.CacheKey == "" {
		o.CacheKey = HTTPCacheClient
	}
	if o.MaxInflight == 0 {
		o.MaxInflight = DefaultHTTPMaxInflight
	}
}

// validate checks the options after setDefaults; it reads no file (New
// does).
func (o *HTTPOptions) validate() error {
	var errs []error
	https := false
	for _, u := range []struct{ key, v string }{{"url", o.URL}, {"acl_url", o.ACLURL}} {
		if u.v == "" {
			continue
		}
		p, err := url.Parse(u.v)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("auth: http.%s: %w", u.key, err))
		case p.Scheme != "http" && p.Scheme != "https" || p.Host == "":
			errs = append(errs, fmt.Errorf("auth: http.%s %q: want an http:// or https:// URL with a host", u.key, p.Redacted()))
		case p.User != nil:
			errs = append(errs, fmt.Errorf("auth: http.%s %q: no user or password in the URL (it would show in the logs); authenticate the broker with tls.cert_file and tls.key_file",
				u.key, p.Redacted()))
		}
		https = https || err == nil && p.Scheme == "https"
	}
	if o.Timeout < 0 || o.QueueWait < 0 {
		errs = append(errs, fmt.Errorf("auth: http.timeout %v and http.queue_wait %v must not be negative", o.Timeout, o.QueueWait))
	}
	if o.MaxInflight < 0 {
		errs = append(errs, errors.New("auth: http.max_inflight must not be negative"))
	}
	if o.CacheKey != HTTPCacheClient && o.CacheKey != HTTPCacheCredentials {
		errs = append(errs, fmt.Errorf("auth: http.cache_key %q: want client or credentials", string(o.CacheKey)))
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		errs = append(errs, errors.New("auth: http.tls: cert_file and key_file go together"))
	}
	if !https && (o.CAFile != "" || o.CertFile != "" || o.ServerName != "") {
		errs = append(errs, errors.New("auth: http.tls is set but neither url nor acl_url is https"))
	}
	return errors.Join(errs...)
}

// tlsConfig reads the TLS files; nil when none are set (the system's
// roots then verify an https service).
func (o *HTTPOptions) tlsConfig() (*tls.Config, error) {
	if o.CAFile == "" && o.CertFile == "" && o.ServerName == "" {
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.ServerName}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("auth: http.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("auth: http.tls.ca_file %s: no PEM certificate", o.CAFile)
		}
		conf.RootCAs = pool
	}
	if o.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("auth: http.tls.cert_file/key_file: %w", err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return conf, nil
}

// httpKind is what a request is about; it labels counters and log lines.
type httpKind uint8

const (
	httpConnect httpKind = iota
	httpACL
	httpKinds
)

var httpKindNames = [httpKinds]string{"connect", "acl"}

// httpAnswer is what a question to the service came to.
type httpAnswer uint8

const (
	answerAllow   httpAnswer = iota + 1
	answerDeny               // the service said deny
	answerIgnore             // the service said ignore: the files decide
	answerError              // no usable answer: transport error, status not 200, malformed body
	answerTimeout            // no answer within Timeout
	answerBusy               // not asked: no request slot within QueueWait
	answerLocked             // not asked: the source was locked out while it waited for a slot
	answers
)

var answerNames = [answers]string{"", "allow", "deny", "ignore", "error", "timeout", "busy", "locked out"}

func (x httpAnswer) String() string { return answerNames[x] }

// answered reports an answer of the service, which may be cached.
func (x httpAnswer) answered() bool { return x == answerAllow || x == answerDeny || x == answerIgnore }

// httpAuth is the HTTP service's state in an Auth.
type httpAuth struct {
	opts   HTTPOptions
	client *http.Client
	log    *zap.Logger
	now    func() time.Time
	// elapsed is the ACL answers' clock: monotonic time since the start,
	// one clock read where time.Now takes two, on the message path;
	// tests replace it.
	elapsed func() time.Duration

	// queue[kind] hands out the request slots; nil for a kind without a
	// URL. CONNECTs wait per source address (fair, and bounded by each
	// source's failures left); ACL questions all under the zero address.
	queue [httpKinds]*hashQueue

	// CONNECT answers: allow and ignore kept by proof (httpProof) for
	// CacheTTL; flights are the requests in flight, whose answer the same
	// logins arriving meanwhile wait for and share.
	allowed, ignored *loginCache
	mu               sync.Mutex // guards flights
	flights          map[loginProof]*httpFlight

	// acl holds the ACL answers per (client id, user name, topic, write or
	// subscribe); nil without an ACL URL.
	acl *topicCache[httpVerdict]

	counts [httpKinds]httpCounters
	gates  [httpKinds][answers]logGate // one log line a second per kind and failure
}

// httpFlight is a CONNECT request in flight; ans is set before done is
// closed.
type httpFlight struct {
	done chan struct{}
	ans  httpAnswer
}

// httpVerdict is a cached ACL answer.
type httpVerdict struct {
	ans   httpAnswer
	until time.Duration // on the elapsed clock
}

// accSubscribe keys SUBSCRIBE answers in the ACL answer cache, beside
// accWrite (PUBLISH and wills); the ACL file has no such access.
const accSubscribe access = 4

type httpCounters struct {
	answers                 [answers]atomic.Int64 // questions asked (or tried: busy), by answer
	cacheHits, failedClosed atomic.Int64
}

// Stand-in rules that name the service in an ACL refusal's log line
// (rule.describe).
var (
	httpDenyRule     = &rule{line: -1, filter: "the HTTP service denied it"}
	httpNoAnswerRule = &rule{line: -1, filter: "the HTTP service gave no answer and fail_open is off"}
)

// maxHTTPBody bounds the answer read: the answer is a few bytes, and a
// broken service must not make logins buffer megabytes.
const maxHTTPBody = 64 << 10

// newHTTPAuth builds the HTTP service's state; nil without a URL. It
// reads the TLS files once, so that a broken one stops the start.
func newHTTPAuth(o Options, budget func(netip.Addr) (int, bool)) (*httpAuth, error) {
	ho := o.HTTP
	if ho.URL == "" && ho.ACLURL == "" {
		return nil, nil
	}
	conf, err := ho.tlsConfig()
	if err != nil {
		return nil, err
	}
	dialer := &net.Dialer{Timeout: ho.Timeout, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:               nil, // never an environment's proxy: the requests hold passwords
		DialContext:         dialer.DialContext,
		TLSHandshakeTimeout: ho.Timeout,
		MaxIdleConns:        2 * ho.MaxInflight, // both kinds' slots, when one service has both URLs
		MaxIdleConnsPerHost: 2 * ho.MaxInflight,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	if conf != nil {
		// Read the files at each new connection, as the bridges do, so a
		// renewed certificate or CA applies without a restart. HTTP/1.1
		// then: keep-alive connections, at most one per slot.
		tr.ForceAttemptHTTP2 = false
		tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conf, err := ho.tlsConfig()
			if err != nil {
				return nil, err
			}
			d := &tls.Dialer{NetDialer: dialer, Config: conf}
			return d.DialContext(ctx, network, addr)
		}
	}
	h := &httpAuth{
		opts: ho, log: o.Log, now: o.now,
		client: &http.Client{Transport: tr,
			// A redirect would send the credentials on to another
			// address; it is a status other than 200, an error.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		flights: map[loginProof]*httpFlight{},
	}
	start := time.Now()
	h.elapsed = func() time.Duration { return time.Since(start) }
	l := o.Limits
	if ho.URL != "" {
		h.queue[httpConnect] = newHashQueue(ho.MaxInflight, l.HashQueuePerSource, l.HashQueue, budget)
		h.allowed = newLoginCache(ho.CacheTTL, l.Tracked, o.now)
		h.ignored = newLoginCache(ho.CacheTTL, l.Tracked, o.now)
		if u, _ := url.Parse(ho.URL); u.Scheme == "http" && !loopbackHost(u.Hostname()) {
			o.Log.Warn("auth.http.url is plain http to another machine: client passwords cross the network in clear", zap.String("url", u.Redacted()))
		}
	}
	if ho.ACLURL != "" {
		h.queue[httpACL] = newHashQueue(ho.MaxInflight, l.HashQueue, l.HashQueue, func(netip.Addr) (int, bool) { return noLimit, false })
		h.acl = newTopicCache[httpVerdict](o.ACLCacheSize)
	}
	return h, nil
}

// loopbackHost reports a host name or address that stays on this machine.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// close drops the idle connections to the service.
func (h *httpAuth) close() {
	if h != nil {
		h.client.CloseIdleConnections()
	}
}

// httpConnectRequest is the body POSTed to URL for a CONNECT, with EMQX's
// names.
type httpConnectRequest struct {
	ClientID string `json:"clientid"`
	Username string `json:"username"`
	Password string `json:"password"`
	PeerHost string `json:"peerhost"` // the client's IP address; "" for an in-process connection
	Listener string `json:"listener"` // the listener's name
	// CertIdentity is set on a listener that takes the user name from the
	// client's certificate (identity_as_username): the identity (its CN
	// or SAN), which is then the user name too.
	CertIdentity string `json:"cert_identity,omitempty"`
}

// httpACLRequest is the body POSTed to ACLURL.
type httpACLRequest struct {
	ClientID string `json:"clientid"`
	Username string `json:"username"`
	Action   string `json:"action"` // publish (PUBLISH and wills) or subscribe
	Topic    string `json:"topic"`  // the topic, or the filter as subscribed ($share/GROUP/ included)
}

// httpResponse is the answer: HTTP 200 with this body. Other fields
// (EMQX's client_attrs, acl, expire_at) are ignored.
type httpResponse struct {
	Result string `json:"result"` // allow, deny or ignore
	// IsSuperuser is read for EMQX compatibility and not used: xmq has no
	// superuser, the ACL decides every access.
	IsSuperuser bool `json:"is_superuser"`
}

// ask POSTs body to u and reads the answer. A failure is logged, at most
// once a second per kind and failure.
func (h *httpAuth) ask(kind httpKind, u string, body any) httpAnswer {
	data, err := json.Marshal(body)
	if err != nil {
		return h.failed(kind, answerError, err) // cannot happen: strings only
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(data))
	if err != nil {
		return h.failed(kind, answerError, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return h.failed(kind, timeoutOr(ctx, err), err)
	}
	defer resp.Body.Close()
	data, err = io.ReadAll(io.LimitReader(resp.Body, maxHTTPBody+1))
	switch {
	case err != nil:
		return h.failed(kind, timeoutOr(ctx, err), fmt.Errorf("reading the answer: %w", err))
	case resp.StatusCode != http.StatusOK:
		return h.failed(kind, answerError, fmt.Errorf("status %s, want 200 OK", resp.Status))
	case len(data) > maxHTTPBody:
		return h.failed(kind, answerError, fmt.Errorf("answer longer than %d bytes", maxHTTPBody))
	}
	var r httpResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return h.failed(kind, answerError, fmt.Errorf("answer is not the JSON object wanted: %w", err))
	}
	switch r.Result {
	case "allow":
		return answerAllow
	case "deny":
		return answerDeny
	case "ignore":
		return answerIgnore
	}
	return h.failed(kind, answerError, fmt.Errorf("result %.40q: want allow, deny or ignore", r.Result))
}

// timeoutOr tells a request that ran out of time from one that failed.
func timeoutOr(ctx context.Context, err error) httpAnswer {
	var ne net.Error
	if ctx.Err() != nil || errors.As(err, &ne) && ne.Timeout() {
		return answerTimeout
	}
	return answerError
}

// failed logs a request without a usable answer, at most once a second
// per kind and failure (counted by the caller), and returns ans. The
// error never holds the request's body.
func (h *httpAuth) failed(kind httpKind, ans httpAnswer, err error) httpAnswer {
	if h.gates[kind][ans].open() {
		u := h.opts.URL
		if kind == httpACL {
			u = h.opts.ACLURL
		}
		h.log.Warn("HTTP auth service gave no usable answer", zap.String("request", httpKindNames[kind]), zap.String("failure", ans.String()),
			zap.String("url", u), zap.Error(err), zap.Int64("so_far", h.counts[kind].answers[ans].Load()+1),
			zap.Bool("fail_open", h.opts.FailOpen), zap.Duration("timeout", h.opts.Timeout))
	}
	return ans
}

// httpProof stands for a CONNECT as the cache keys it (HTTPCacheKey): an
// HMAC under the process's key, as the login cache's proofs, so the cache
// holds no password.
func (h *httpAuth) httpProof(key []byte, clientID, username string, password []byte, ip netip.Addr, listener string) loginProof {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("xmq auth.http " + string(h.opts.CacheKey))) // never equal to a password file login's proof
	if h.opts.CacheKey == HTTPCacheClient {
		macField(mac, []byte(clientID))
		b, _ := ip.MarshalBinary()
		macField(mac, b)
	}
	macField(mac, []byte(username))
	macField(mac, password)
	macField(mac, []byte(listener))
	var p loginProof
	mac.Sum(p[:0])
	return p
}

// loginAnswer returns the answer for proof p: from the cache, from the
// request of p in flight, or from ask, which it then runs as the request
// of p in flight. asked reports that this login ran ask.
func (h *httpAuth) loginAnswer(p loginProof, ask func() httpAnswer) (ans httpAnswer, asked bool) {
	for {
		h.mu.Lock()
		f := h.flights[p]
		if f == nil {
			// Under h.mu: a request adds its answer to the cache before it
			// leaves flights, so no answer is missed here and asked again.
			switch {
			case h.allowed.has(p):
				h.mu.Unlock()
				return answerAllow, false
			case h.ignored.has(p):
				h.mu.Unlock()
				return answerIgnore, false
			}
			f = &httpFlight{done: make(chan struct{})}
			h.flights[p] = f
			h.mu.Unlock()
			return h.fly(p, f, ask), true
		}
		h.mu.Unlock()
		<-f.done // within QueueWait + Timeout
		if f.ans != answerLocked {
			return f.ans, false // Busy too: this login has waited as long
		}
		// That login's source was locked out before its request was sent:
		// this one, maybe from another source, tries for a slot itself.
	}
}

// fly runs ask as the request of p in flight and lands it.
func (h *httpAuth) fly(p loginProof, f *httpFlight, ask func() httpAnswer) (ans httpAnswer) {
	defer func() {
		switch ans {
		case answerAllow:
			h.allowed.add(p, h.now())
		case answerIgnore:
			h.ignored.add(p, h.now())
		}
		h.mu.Lock()
		delete(h.flights, p)
		h.mu.Unlock()
		f.ans = ans
		close(f.done)
	}()
	return ask()
}

// httpAuthenticate asks the service about a CONNECT with a user name
// (Authenticate's hook). done false leaves the decision to the files: the
// service said ignore, or gave no answer with FailOpen. A user name then
// needs a password file or a certificate listener to vouch for it: with
// a service configured, an unchecked user name is a bad one.
func (a *Auth) httpAuthenticate(who identity, clientID, username string, password []byte, ip netip.Addr, listener string,
	pf *passwordFile, now time.Time) (done bool, err error) {
	h := a.http
	if h == nil || h.queue[httpConnect] == nil || username == "" {
		return false, nil // clients without a user name follow the anonymous policy
	}
	key := sourceKey(ip)
	if a.failed.locked(key, now) {
		a.stats.lockedOut.Add(1)
		return true, refuse(codec.NotAuthorized, "too many failed logins from %s", ip)
	}
	c := &h.counts[httpConnect]
	cert := a.certListeners[listener]
	// JSON strings are UTF-8: a password that is not cannot be sent as it
	// is, and is not sent mangled either; the files decide it.
	ans := answerIgnore
	if utf8.Valid(password) {
		var asked bool
		ans, asked = h.loginAnswer(h.httpProof(a.proofKey, clientID, username, password, ip, listener), func() httpAnswer {
			q := h.queue[httpConnect]
			switch q.acquire(key, h.opts.QueueWait) {
			case turnBusy:
				return answerBusy
			case turnLocked:
				return answerLocked
			}
			defer q.release(key)
			req := &httpConnectRequest{ClientID: clientID, Username: username, Password: string(password), Listener: listener}
			if ip.IsValid() {
				req.PeerHost = ip.String()
			}
			if cert {
				req.CertIdentity = username
			}
			ans := h.ask(httpConnect, h.opts.URL, req)
			if ans == answerDeny {
				a.failLogin(key, ip, a.now()) // before release: the queue sees the source's budget
			}
			return ans
		})
		switch {
		case ans == answerLocked: // counted below
		case asked || ans == answerBusy:
			c.answers[ans].Add(1)
		default:
			c.cacheHits.Add(1)
			if ans == answerDeny {
				a.failLogin(key, ip, now) // each attempt with bad credentials is a failure of its source
			}
		}
	}
	switch ans {
	case answerAllow:
		a.loggedIn(who, now)
		return true, nil
	case answerDeny:
		a.stats.loginFailures.Add(1)
		return true, refuse(codec.BadUserNameOrPassword, "the HTTP auth service denied user %q", username)
	case answerLocked:
		a.stats.lockedOut.Add(1)
		return true, refuse(codec.NotAuthorized, "too many failed logins from %s", ip)
	case answerIgnore:
	default:
		if !h.opts.FailOpen {
			c.failedClosed.Add(1)
			if ans == answerBusy {
				return true, refuse(codec.ServerBusy, "no HTTP auth request slot within %v (max_inflight %d)", h.opts.QueueWait, h.opts.MaxInflight)
			}
			return true, refuse(codec.ServerUnavailable, "the HTTP auth service gave no answer (%s); refused, fail_open is off", ans)
		}
	}
	if pf == nil && !cert {
		a.stats.loginFailures.Add(1)
		a.failLogin(key, ip, now)
		return true, refuse(codec.BadUserNameOrPassword, "user %q: the HTTP auth service did not vouch for it (%s) and there is no password file", username, ans)
	}
	return false, nil
}

// httpDecides reports whether the service is asked about an access:
// PUBLISH, wills and SUBSCRIBE with an ACL URL; never a delivery.
func (a *Auth) httpDecides(acc access) bool {
	return a.http != nil && a.http.acl != nil && acc != accRead
}

// httpCheck decides a PUBLISH topic or will (accWrite) or a SUBSCRIBE
// filter (accSubscribe) through the service's answers, cached for
// CacheTTL per client, user name, topic and access. done false leaves
// the decision to the ACL file: the service said ignore, or gave no
// answer with FailOpen. The strings may alias the caller's buffers.
func (a *Auth) httpCheck(kind denyKind, clientID, username, topic string, acc access) (ok, done bool) {
	h := a.http
	c := &h.counts[httpACL]
	now := h.elapsed()
	v, hit := h.acl.get(clientID, username, topic, acc)
	if hit && now < v.until {
		c.cacheHits.Add(1)
	} else {
		v.ans = h.askACL(clientID, username, topic, acc)
		c.answers[v.ans].Add(1)
		if v.ans.answered() && h.opts.CacheTTL > 0 {
			v.until = now + h.opts.CacheTTL
			h.acl.put(clientID, username, topic, acc, v)
		}
	}
	switch v.ans {
	case answerAllow:
		return true, true
	case answerDeny:
		a.denied(kind, clientID, username, topic, httpDenyRule)
		return false, true
	case answerIgnore:
		return false, false
	}
	if h.opts.FailOpen {
		return false, false
	}
	c.failedClosed.Add(1)
	a.denied(kind, clientID, username, topic, httpNoAnswerRule)
	return false, true
}

func (h *httpAuth) askACL(clientID, username, topic string, acc access) httpAnswer {
	var all netip.Addr // ACL questions queue as one source: the client's address is not known here
	q := h.queue[httpACL]
	if q.acquire(all, h.opts.QueueWait) != turnRun {
		return answerBusy
	}
	defer q.release(all)
	action := "publish"
	if acc == accSubscribe {
		action = "subscribe"
	}
	return h.ask(httpACL, h.opts.ACLURL, &httpACLRequest{ClientID: clientID, Username: username, Action: action, Topic: topic})
}

// httpReadsAll is ReadsAll's hook: a filter the service allowed reads
// everything it matches (deliveries are never sent to the service), one
// it denied nothing; known false when the service ignored the filter or
// its answer is not held (the ACL file then decides). The answer is used
// past CacheTTL: it stands for the subscription the client made with it,
// and ReadsAll must not wait on the network.
func (a *Auth) httpReadsAll(clientID, username, filter string) (all, known bool) {
	v, ok := a.http.acl.get(clientID, username, filter, accSubscribe)
	switch {
	case !ok:
		return false, false
	case v.ans == answerAllow:
		return true, true
	case v.ans == answerDeny:
		return false, true
	}
	return false, false
}

// HTTPCounts counts one kind of question to the HTTP service.
type HTTPCounts struct {
	Allow, Deny, Ignore int64 // the service's answers
	Errors              int64 // requests without a usable answer: transport error, status not 200, malformed body
	Timeouts            int64 // requests without an answer within the timeout
	Busy                int64 // questions not asked: no request slot within queue_wait
	CacheHits           int64 // questions answered by the cache, or by the same question in flight
	FailedClosed        int64 // refusals because there was no answer (error, timeout, busy) and fail_open is off
}

// HTTPStats are the HTTP service's counters (Stats.HTTP).
type HTTPStats struct {
	Connect, ACL HTTPCounts
	LoginsCached int // CONNECT answers (allow, ignore) cached now
	ACLCached    int // ACL answers cached now
	Waiting      int // CONNECT and ACL questions waiting for a request slot now
}

// httpStats is Stats.HTTP; nil without a service.
func (a *Auth) httpStats() *HTTPStats {
	h := a.http
	if h == nil {
		return nil
	}
	s := &HTTPStats{LoginsCached: h.allowed.len() + h.ignored.len()}
	if h.acl != nil {
		s.ACLCached = h.acl.len()
	}
	for k, out := range []*HTTPCounts{&s.Connect, &s.ACL} {
		c := &h.counts[k]
		*out = HTTPCounts{Allow: c.answers[answerAllow].Load(), Deny: c.answers[answerDeny].Load(), Ignore: c.answers[answerIgnore].Load(),
			Errors: c.answers[answerError].Load(), Timeouts: c.answers[answerTimeout].Load(), Busy: c.answers[answerBusy].Load(),
			CacheHits: c.cacheHits.Load(), FailedClosed: c.failedClosed.Load()}
		if q := h.queue[k]; q != nil {
			s.Waiting += q.waiting()
		}
	}
	return s
}
