package auth

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// JWT authentication (auth.jwt): a client presents a JSON Web Token as its
// MQTT password. The signature is checked with a shared secret (HS256,
// HS384, HS512) or a public key (RS*, PS*, ES*, EdDSA) from a PEM file, a
// JWK Set file, or a JWK Set URL fetched at start and every JWKSRefresh;
// go-jose does the cryptography and refuses any algorithm outside the list
// the configured keys allow (so never "none", and never HMAC keyed with a
// public key). Then exp (strictly: the connection is closed at exp), nbf
// and iat (with Leeway for clock skew), iss and aud are checked, the user
// name is taken from UsernameClaim (a CONNECT user name must be the same),
// and an ACL may come with the token in ACLClaim, in either of EMQX's
// shapes:
//
//	{"acl": {"pub": ["a/%u/#"], "sub": ["b/#"], "all": ["c/%c"]}}
//	    a whitelist: what the lists name is allowed, everything else refused
//	{"acl": [{"permission": "allow", "action": "publish", "topic": "t/${clientid}"},
//	         {"permission": "deny", "action": "all", "topic": "#"}]}
//	    rules in order, the first that matches decides; when none does, the
//	    ACL file decides (no ACL file: allowed, as for every client)
//
// %u / ${username} and %c / ${clientid} stand for the user name and client
// id, as in ACL file patterns, and never match for a name containing '+',
// '#' or '/' (a deny rule with them then refuses everything). Actions are
// publish (PUBLISH and wills), subscribe (SUBSCRIBE and deliveries) and all.
// A rule with a field xmq cannot check (EMQX's qos, retain, clientid_re …)
// or an "eq " topic makes the token refused, rather than silently broader
// or narrower. A subscription is decided by the first rule whose filter
// covers it; each delivery is decided again per topic.
//
// The claim ACL belongs to the connection that logged in with the token,
// kept per client id and user name (grantTable) until that connection ends,
// its token expires (everything is refused from then until the broker has
// closed it), or the same client id and user log in again. An offline
// persistent session's deliveries are then decided by the ACL file alone.
//
// A password is taken for a token when auth.jwt has a key and the password
// has the form of a JWS (three base64url parts, the first a JSON object);
// any other password goes to the password file as before. With auth.jwt and
// no password file, a user name must come with a token.

// JWTOptions configures JWT authentication. It is on when at least one key
// source is given; secret and public keys may be combined (HMAC tokens are
// checked with the secret only, the others with the public keys only).
type JWTOptions struct {
	// SecretFile holds the HMAC secret: the file's content without
	// surrounding white space, at least 32 bytes (HS256; HS384 needs 48,
	// HS512 64).
	SecretFile string
	// PublicKeyFile holds PEM public keys or certificates (RSA of at least
	// 2048 bits, ECDSA P-256/384/521, Ed25519); a token's kid is not used
	// with them.
	PublicKeyFile string
	// JWKSFile is a JWK Set (RFC 7517); keys are chosen by the token's kid.
	JWKSFile string
	// JWKSURL is a JWK Set fetched at start and every JWKSRefresh (and on
	// Reload), at most 1 MiB within 10s; a failed fetch keeps the keys
	// already fetched.
	JWKSURL string
	// JWKSRefresh is how often JWKSURL is fetched. Default 5m; negative:
	// only at start and on Reload.
	JWKSRefresh time.Duration
	// UsernameClaim names the claim holding the user name. Default "sub".
	UsernameClaim string
	// ACLClaim names the claim holding the ACL. Default "acl".
	ACLClaim string
	// Issuer, when set, must equal the token's iss.
	Issuer string
	// Audience, when set, must be one of the token's aud.
	Audience string
	// Leeway is the clock skew allowed for nbf and iat (exp is strict).
	// Default 5s; negative: none.
	Leeway time.Duration
}

// JWT defaults and bounds.
const (
	DefaultJWKSRefresh   = 5 * time.Minute
	DefaultUsernameClaim = "sub"
	DefaultACLClaim      = "acl"
	DefaultJWTLeeway     = 5 * time.Second
	// MaxTokenSize bounds a token: one larger is refused unread.
	MaxTokenSize = 16 << 10
	// maxKeyFile bounds a key file or a fetched JWK Set.
	maxKeyFile = 1 << 20
	// maxClaimRules bounds the rules of a token's ACL claim.
	maxClaimRules = 256
	jwksTimeout   = 10 * time.Second
	// jwksRetry is the wait after a failed fetch of JWKSURL.
	jwksRetry = 30 * time.Second
)

// Enabled reports whether a key source is configured.
func (o *JWTOptions) Enabled() bool {
	return o.SecretFile != "" || o.PublicKeyFile != "" || o.JWKSFile != "" || o.JWKSURL != ""
}

// setDefaults fills the zero values.
func (o *JWTOptions) setDefaults() {
	if o.JWKSRefresh == 0 {
		o.JWKSRefresh = DefaultJWKSRefresh
	}
	if o.UsernameClaim == "" {
		o.UsernameClaim = DefaultUsernameClaim
	}
	if o.ACLClaim == "" {
		o.ACLClaim = DefaultACLClaim
	}
	if o.Leeway == 0 {
		o.Leeway = DefaultJWTLeeway
	}
}

// validate checks the options after setDefaults, without reading files.
func (o *JWTOptions) validate() error {
	if !o.Enabled() {
		if o.Issuer != "" || o.Audience != "" {
			return errors.New("auth: jwt: issuer and audience need a key: secret_file, public_key_file, jwks_file or jwks_url")
		}
		return nil
	}
	if o.JWKSURL != "" {
		u, err := url.Parse(o.JWKSURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("auth: jwt: jwks_url %q: want an http or https URL", o.JWKSURL)
		}
	}
	if o.UsernameClaim == o.ACLClaim {
		return fmt.Errorf("auth: jwt: username_claim and acl_claim are both %q", o.ACLClaim)
	}
	return nil
}

// jwtKey is one verification key.
type jwtKey struct {
	key any    // *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
	kid string // from a JWK Set; "" from a PEM file
	alg string // the JWK's alg, "" when it names none
}

// jwtFiles are the keys read from files, replaced whole by a reload.
type jwtFiles struct {
	secret []byte
	pem    []jwtKey
	jwks   []jwtKey
}

// jwtAuth checks tokens. Keys are swapped atomically, so a check never
// waits for a reload or a fetch.
type jwtAuth struct {
	opts   JWTOptions
	algs   []jose.SignatureAlgorithm // what the configured key kinds can verify
	files  atomic.Pointer[jwtFiles]
	remote atomic.Pointer[[]jwtKey] // from JWKSURL; nil before the first fetch
	grants *grantTable
	client *http.Client
	log    *zap.Logger

	stamps   [3]fileStamp // secret, public key and JWKS files; guarded by Auth.mu
	fileErr  string       // the last poll error, logged once; guarded by Auth.mu
	fetchMu  sync.Mutex   // one fetch at a time; guards the fields below
	nextJWKS time.Time    // when the URL is due
	fetchErr string       // the last fetch error, logged once
}

// newJWT makes the token checker of o, nil when o has no key source. The
// key files are read by Auth.loadJWTLocked, the JWK Set URL by start.
func newJWT(o JWTOptions, tracked int, log *zap.Logger) *jwtAuth {
	if !o.Enabled() {
		return nil
	}
	j := &jwtAuth{opts: o, grants: newGrantTable(tracked), log: log,
		client: &http.Client{Timeout: jwksTimeout}}
	j.files.Store(&jwtFiles{})
	// The algorithms are those of the key kinds configured, whatever the
	// files hold: an HMAC token is refused unread without a secret file.
	if o.SecretFile != "" {
		j.algs = append(j.algs, jose.HS256, jose.HS384, jose.HS512)
	}
	if o.PublicKeyFile != "" || o.JWKSFile != "" || o.JWKSURL != "" {
		j.algs = append(j.algs, jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
			jose.ES256, jose.ES384, jose.ES512, jose.EdDSA)
	}
	return j
}

// start fetches the JWK Set URL for the first time. A failure is logged and
// retried (refresh): the broker starts, and tokens signed by those keys are
// refused until a fetch works.
func (j *jwtAuth) start(now time.Time) {
	if j != nil && j.opts.JWKSURL != "" {
		_ = j.fetchJWKS(now)
	}
}

// CheckJWT reads the key files of o as New would, without fetching
// JWKSURL (xmq check-config).
func CheckJWT(o JWTOptions) error {
	o.setDefaults()
	if err := o.validate(); err != nil || !o.Enabled() {
		return err
	}
	_, err := o.loadFiles()
	return err
}

// loadFiles reads the secret, public key and JWK Set files.
func (o *JWTOptions) loadFiles() (*jwtFiles, error) {
	f := &jwtFiles{}
	var errs []error
	if o.SecretFile != "" {
		data, err := readKeyFile(o.SecretFile)
		if err == nil {
			f.secret = bytes.TrimSpace(data)
			if len(f.secret) < 32 {
				err = fmt.Errorf("%d bytes: an HMAC secret needs at least 32 (256 bits)", len(f.secret))
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("auth: jwt: secret_file %s: %w", o.SecretFile, err))
		}
	}
	if o.PublicKeyFile != "" {
		data, err := readKeyFile(o.PublicKeyFile)
		if err == nil {
			f.pem, err = parsePEMKeys(data)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("auth: jwt: public_key_file %s: %w", o.PublicKeyFile, err))
		}
	}
	if o.JWKSFile != "" {
		data, err := readKeyFile(o.JWKSFile)
		if err == nil {
			f.jwks, _, err = parseJWKS(data)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("auth: jwt: jwks_file %s: %w", o.JWKSFile, err))
		}
	}
	return f, errors.Join(errs...)
}

func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err == nil && len(data) > maxKeyFile {
		err = fmt.Errorf("larger than %d bytes", maxKeyFile)
	}
	return data, err
}

// parsePEMKeys reads PUBLIC KEY, RSA PUBLIC KEY and CERTIFICATE blocks. A
// private key is refused: the broker only verifies, and a copy of the
// signing key on it is one more place to steal it from.
func parsePEMKeys(data []byte) ([]jwtKey, error) {
	var keys []jwtKey
	for n := 1; ; n++ {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		var key any
		var err error
		switch {
		case b.Type == "PUBLIC KEY":
			key, err = x509.ParsePKIXPublicKey(b.Bytes)
		case b.Type == "RSA PUBLIC KEY":
			key, err = x509.ParsePKCS1PublicKey(b.Bytes)
		case b.Type == "CERTIFICATE":
			var c *x509.Certificate
			if c, err = x509.ParseCertificate(b.Bytes); err == nil {
				key = c.PublicKey
			}
		case strings.Contains(b.Type, "PRIVATE KEY"):
			return nil, fmt.Errorf("block %d is a private key: give the broker the public key only (openssl pkey -pubout)", n)
		default:
			return nil, fmt.Errorf("block %d: %q is not a public key or certificate", n, b.Type)
		}
		if err == nil {
			err = checkPublicKey(key)
		}
		if err != nil {
			return nil, fmt.Errorf("block %d: %w", n, err)
		}
		keys = append(keys, jwtKey{key: key})
	}
	if len(keys) == 0 {
		return nil, errors.New("no PEM public key or certificate in it")
	}
	return keys, nil
}

// checkPublicKey accepts the key kinds JWS signatures use, at sizes still
// considered safe.
func checkPublicKey(key any) error {
	switch k := key.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return fmt.Errorf("RSA key of %d bits: at least 2048 needed", k.N.BitLen())
		}
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256(), elliptic.P384(), elliptic.P521():
		default:
			return errors.New("ECDSA key on a curve JWS does not use (want P-256, P-384 or P-521)")
		}
	case ed25519.PublicKey:
	default:
		return fmt.Errorf("%T is not an RSA, ECDSA or Ed25519 public key", key)
	}
	return nil
}

// parseJWKS reads a JWK Set. Keys that are not public signature keys of a
// usable kind are left out and named in skipped (a symmetric key in a set
// meant to be public, a private key, an encryption key); a set left with
// none is an error. A malformed key is left out too: one key of a kind
// go-jose does not know must not take the others down.
func parseJWKS(data []byte) (keys []jwtKey, skipped []string, err error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, nil, fmt.Errorf("not a JWK Set: %w", err)
	}
	for i, raw := range set.Keys {
		var k jose.JSONWebKey
		why := ""
		switch err := k.UnmarshalJSON(raw); {
		case err != nil:
			why = err.Error()
		case !k.IsPublic():
			why = "not a public key"
		case k.Use != "" && k.Use != "sig":
			why = "use " + k.Use
		default:
			if err := checkPublicKey(k.Key); err != nil {
				why = err.Error()
			}
		}
		if why != "" {
			skipped = append(skipped, fmt.Sprintf("key %d (kid %q): %s", i, k.KeyID, why))
			continue
		}
		keys = append(keys, jwtKey{key: k.Key, kid: k.KeyID, alg: k.Algorithm})
	}
	if len(keys) == 0 {
		return nil, skipped, fmt.Errorf("no usable public signature key in it (%s)", strings.Join(skipped, "; "))
	}
	return keys, skipped, nil
}

// fetchJWKS fetches JWKSURL now; on failure the keys fetched before stay.
func (j *jwtAuth) fetchJWKS(now time.Time) error {
	j.fetchMu.Lock()
	defer j.fetchMu.Unlock()
	err := j.fetchLocked()
	if err != nil {
		retry := jwksRetry
		if r := j.opts.JWKSRefresh; r > 0 && r < retry {
			retry = r
		}
		j.nextJWKS = now.Add(retry)
		if msg := err.Error(); msg != j.fetchErr {
			j.fetchErr = msg
			j.log.Error("jwt: fetching the JWK Set failed; the keys fetched before stay in force", zap.String("url", j.opts.JWKSURL), zap.Error(err))
		}
		return err
	}
	j.fetchErr = ""
	j.nextJWKS = now.Add(j.opts.JWKSRefresh)
	return nil
}

func (j *jwtAuth) fetchLocked() error {
	ctx, cancel := context.WithTimeout(context.Background(), jwksTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.opts.JWKSURL, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	res, err := j.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("jwks_url: HTTP %s", res.Status)
	}
	data, err := io.ReadAll(io.LimitReader(res.Body, maxKeyFile+1))
	if err != nil {
		return fmt.Errorf("jwks_url: %w", err)
	}
	if len(data) > maxKeyFile {
		return fmt.Errorf("jwks_url: larger than %d bytes", maxKeyFile)
	}
	keys, skipped, err := parseJWKS(data)
	if err != nil {
		return fmt.Errorf("jwks_url: %w", err)
	}
	if len(skipped) > 0 {
		j.log.Warn("jwt: keys of the JWK Set left out", zap.String("url", j.opts.JWKSURL), zap.String("skipped", strings.Join(skipped, "; ")))
	}
	j.remote.Store(&keys)
	return nil
}

// refresh fetches JWKSURL when it is due (Auth.maintain).
func (j *jwtAuth) refresh(now time.Time) {
	if j.opts.JWKSURL == "" {
		return
	}
	j.fetchMu.Lock()
	due := !j.nextJWKS.IsZero() && !now.Before(j.nextJWKS) && (j.opts.JWKSRefresh > 0 || j.remote.Load() == nil)
	j.fetchMu.Unlock()
	if due {
		_ = j.fetchJWKS(now)
	}
}

// keysFor returns the keys that may have signed a token with alg and kid.
// An HMAC token is checked with the secret alone and an asymmetric one with
// public keys alone, whatever its header says, so no public key is ever
// used as an HMAC secret.
func (j *jwtAuth) keysFor(alg, kid string) ([]any, error) {
	f := j.files.Load()
	if strings.HasPrefix(alg, "HS") {
		if len(f.secret) == 0 {
			return nil, fmt.Errorf("%s token, and no secret_file", alg)
		}
		return []any{f.secret}, nil
	}
	var sets [][]jwtKey
	sets = append(sets, f.jwks)
	if r := j.remote.Load(); r != nil {
		sets = append(sets, *r)
	}
	var out []any
	for _, set := range sets {
		for _, k := range set {
			if k.kid == kid && (k.alg == "" || k.alg == alg) && keyFits(alg, k.key) {
				out = append(out, k.key)
			}
		}
	}
	if len(out) == 0 {
		// PEM keys have no kid: they stand for any kid the sets lack.
		for _, k := range f.pem {
			if keyFits(alg, k.key) {
				out = append(out, k.key)
			}
		}
	}
	if len(out) == 0 {
		if kid != "" {
			return nil, fmt.Errorf("no %s key with kid %q", alg, kid)
		}
		return nil, fmt.Errorf("no %s key for a token without kid", alg)
	}
	return out, nil
}

// keyFits reports whether key can verify alg, so that no verification is
// tried that cannot succeed.
func keyFits(alg string, key any) bool {
	switch k := key.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")
	case *ecdsa.PublicKey:
		return alg == "ES256" && k.Curve == elliptic.P256() || alg == "ES384" && k.Curve == elliptic.P384() ||
			alg == "ES512" && k.Curve == elliptic.P521()
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}

// looksLikeJWT reports whether a password has the form of a JWS in compact
// form: three base64url parts (the last empty for alg none, which is then
// refused as a token rather than tried as a password), the first a JSON
// object. A password such as "a.b.c" stays a password.
func looksLikeJWT(p []byte) bool {
	if len(p) < 8 || bytes.Count(p, []byte{'.'}) != 2 {
		return false
	}
	for _, c := range p {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	h, _, _ := bytes.Cut(p, []byte{'.'})
	if len(h) > 1024 {
		return true // too long for a password anyone types: a token, refused for its size or header
	}
	var buf [768]byte
	n, err := base64.RawURLEncoding.Decode(buf[:], h)
	return err == nil && len(bytes.TrimLeft(buf[:n], " \t\r\n")) > 0 && bytes.TrimLeft(buf[:n], " \t\r\n")[0] == '{'
}

// tokenClaims is what a verified token says.
type tokenClaims struct {
	user    string
	expires time.Time // zero: no exp
	acl     *claimACL // nil: no ACL claim
}

// Errors of a token check; the refusal's text names them, never the token.
var (
	errTokenSize      = fmt.Errorf("token larger than %d bytes", MaxTokenSize)
	errTokenSignature = errors.New("token signature does not verify")
	errTokenExpired   = errors.New("token expired")
)

// verify checks a token's signature and claims at now.
func (j *jwtAuth) verify(token []byte, now time.Time) (*tokenClaims, error) {
	if len(token) > MaxTokenSize {
		return nil, errTokenSize
	}
	jws, err := jose.ParseSignedCompact(string(token), j.algs)
	if err != nil {
		return nil, err // an algorithm not allowed (none, HMAC without a secret …) or a malformed token
	}
	h := jws.Signatures[0].Header
	keys, err := j.keysFor(h.Algorithm, h.KeyID)
	if err != nil {
		return nil, err
	}
	var payload []byte
	for _, k := range keys {
		if payload, err = jws.Verify(k); err == nil {
			break
		}
	}
	if err != nil {
		return nil, errTokenSignature
	}
	var std jwt.Claims
	var all map[string]json.RawMessage
	if err := json.Unmarshal(payload, &std); err != nil {
		return nil, fmt.Errorf("token claims: %w", err)
	}
	if err := json.Unmarshal(payload, &all); err != nil {
		return nil, fmt.Errorf("token claims: %w", err)
	}
	exp := jwt.Expected{Issuer: j.opts.Issuer, Time: now}
	if j.opts.Audience != "" {
		exp.AnyAudience = jwt.Audience{j.opts.Audience}
	}
	// exp is strict (the connection is closed at exp, so a token past it
	// would be closed at once); the leeway is for clocks ahead of ours.
	if std.Expiry != nil && !now.Before(std.Expiry.Time()) {
		return nil, errTokenExpired
	}
	if err := std.ValidateWithLeeway(exp, max(j.opts.Leeway, 0)); err != nil {
		return nil, err
	}
	c := &tokenClaims{expires: std.Expiry.Time()}
	raw, ok := all[j.opts.UsernameClaim]
	if ok && json.Unmarshal(raw, &c.user) != nil || c.user == "" {
		return nil, fmt.Errorf("token has no user name: claim %q is not a non-empty string", j.opts.UsernameClaim)
	}
	if raw, ok := all[j.opts.ACLClaim]; ok && string(raw) != "null" {
		if c.acl, err = parseACLClaim(raw); err != nil {
			return nil, fmt.Errorf("token claim %q: %w", j.opts.ACLClaim, err)
		}
	}
	return c, nil
}

// claimRule is one rule of a token's ACL claim.
type claimRule struct {
	rule             // the filter, with %c and %u as in ACL patterns; line is the rule's number
	allow     bool   // else deny
	acts      access // accWrite: publish; accRead: subscribe; both: all
	templated bool   // uses %c or %u
}

// claimACL is a token's ACL claim.
type claimACL struct {
	rules []claimRule
	// list is EMQX 5.5's list of rules: a topic no rule matches goes on to
	// the ACL file. The older object of lists is a whitelist: what it does
	// not name is refused.
	list bool
}

// parseACLClaim reads either shape of the ACL claim (see the comment at
// the top of this file).
func parseACLClaim(raw json.RawMessage) (*claimACL, error) {
	acl := &claimACL{}
	add := func(allow bool, acts access, topic string) error {
		if len(acl.rules) == maxClaimRules {
			return fmt.Errorf("more than %d rules", maxClaimRules)
		}
		if strings.HasPrefix(topic, "eq ") {
			return fmt.Errorf("topic %q: the eq prefix is not supported", topic)
		}
		topic = strings.NewReplacer("${clientid}", "%c", "${username}", "%u").Replace(topic)
		if strings.Contains(topic, "${") {
			return fmt.Errorf("topic %q: only the placeholders ${clientid}, ${username}, %%c and %%u are supported", topic)
		}
		r, err := newRule(topic, accRead|accWrite, true)
		if err != nil {
			return err
		}
		r.claim, r.line = true, len(acl.rules)+1
		acl.rules = append(acl.rules, claimRule{rule: r, allow: allow, acts: acts,
			templated: strings.Contains(topic, "%c") || strings.Contains(topic, "%u")})
		return nil
	}
	dec := func(v any) error {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields() // a condition xmq cannot check must not be dropped silently
		return d.Decode(v)
	}
	switch bytes.TrimLeft(raw, " \t\r\n")[0] {
	case '{':
		var lists struct{ Pub, Sub, All []string }
		if err := dec(&lists); err != nil {
			return nil, fmt.Errorf("want {\"pub\": [...], \"sub\": [...], \"all\": [...]}: %w", err)
		}
		for _, l := range []struct {
			topics []string
			acts   access
		}{{lists.Pub, accWrite}, {lists.Sub, accRead}, {lists.All, accRead | accWrite}} {
			for _, t := range l.topics {
				if err := add(true, l.acts, t); err != nil {
					return nil, err
				}
			}
		}
	case '[':
		acl.list = true
		var rules []struct{ Permission, Action, Topic string }
		if err := dec(&rules); err != nil {
			return nil, fmt.Errorf("want [{\"permission\": ..., \"action\": ..., \"topic\": ...}, ...]: %w", err)
		}
		for i, r := range rules {
			acts := map[string]access{"publish": accWrite, "subscribe": accRead, "all": accRead | accWrite}[r.Action]
			if acts == 0 || (r.Permission != "allow" && r.Permission != "deny") || r.Topic == "" {
				return nil, fmt.Errorf("rule %d: want permission allow or deny, action publish, subscribe or all, and a topic", i+1)
			}
			if err := add(r.Permission == "allow", acts, r.Topic); err != nil {
				return nil, fmt.Errorf("rule %d: %w", i+1, err)
			}
		}
	default:
		return nil, errors.New("neither an object of pub/sub/all lists nor a list of rules")
	}
	return acl, nil
}

// grant is the claim ACL of one login, for its connection.
type grant struct {
	acl     *claimACL
	expires time.Time // zero: none
	remote  string    // the connection's address, so that another connection's end leaves it
}

// expired reports whether the token has expired: from then until the
// broker has closed the connection, the grant refuses everything.
func (g *grant) expired(now time.Time) bool { return !g.expires.IsZero() && !now.Before(g.expires) }

// decideTopic decides write (publish, will) or read (delivery) access to a
// topic name: the first rule for that action matching the topic decides.
// decided is false when the claim leaves it to the ACL file.
func (g *grant) decideTopic(clientID, username, topic string, want access, now time.Time) (ok, decided bool, by *rule) {
	if g.expired(now) {
		return false, true, nil
	}
	bent := dangerous(clientID) || dangerous(username)
	for i := range g.acl.rules {
		r := &g.acl.rules[i]
		if r.acts&want == 0 || !r.applies(username) {
			continue
		}
		if r.templated && bent {
			if !r.allow {
				return false, true, &r.rule // as with ACL file patterns: such a name gets nothing
			}
			continue
		}
		if r.matchTopic(topic, clientID, username) {
			return r.allow, true, &r.rule
		}
	}
	return false, !g.acl.list, nil
}

// decideSubscribe decides a SUBSCRIBE filter (a shared one on its inner
// filter): the first subscribe rule whose filter covers it decides.
func (g *grant) decideSubscribe(clientID, username, filter string, now time.Time) (ok, decided bool, by *rule) {
	if g.expired(now) {
		return false, true, nil
	}
	_, f, _, err := codec.ParseShared([]byte(filter))
	if err != nil || len(f) == 0 {
		return false, true, nil
	}
	levels := strings.Split(string(f), "/")
	bent := dangerous(clientID) || dangerous(username)
	for i := range g.acl.rules {
		r := &g.acl.rules[i]
		if r.acts&accRead == 0 || !r.applies(username) {
			continue
		}
		if r.templated && bent {
			if !r.allow {
				return false, true, &r.rule
			}
			continue
		}
		if r.covers(levels, clientID, username) {
			return r.allow, true, &r.rule
		}
	}
	return false, !g.acl.list, nil
}

// grantTable holds the grants of connected token logins by client id and
// user name. A check on the message path costs one atomic load when no
// grant is held, else a read lock of one shard and a map lookup.
type grantTable struct {
	n      atomic.Int64 // grants held
	max    int
	seed   maphash.Seed
	shards [grantShards]grantShard
}

const grantShards = 16

type grantKey struct{ clientID, username string }

type grantShard struct {
	mu sync.RWMutex
	m  map[grantKey]*grant
	_  [40]byte // keep shards on separate cache lines
}

func newGrantTable(max int) *grantTable {
	t := &grantTable{max: max, seed: maphash.MakeSeed()}
	for i := range t.shards {
		t.shards[i].m = map[grantKey]*grant{}
	}
	return t
}

func (t *grantTable) shard(clientID string) *grantShard {
	return &t.shards[maphash.String(t.seed, clientID)%grantShards]
}

// get returns the grant of a client id and user name, nil if none. The
// strings may alias the caller's buffers.
func (t *grantTable) get(clientID, username string) *grant {
	if t.n.Load() == 0 {
		return nil
	}
	s := t.shard(clientID)
	s.mu.RLock()
	g := s.m[grantKey{clientID, username}]
	s.mu.RUnlock()
	return g
}

// set puts the grant of a login (nil: the login has no claim ACL, and one
// held for the same client id and user name goes). It reports false when
// the table is full even after expired grants are swept.
func (t *grantTable) set(clientID, username string, g *grant, now time.Time) bool {
	if g == nil && t.n.Load() == 0 {
		return true // nothing to drop: a password login costs no lock
	}
	k := grantKey{clientID, username}
	s := t.shard(clientID)
	if g != nil && t.n.Load() >= int64(t.max) {
		t.sweep(now)
		s.mu.RLock()
		_, replaces := s.m[k]
		s.mu.RUnlock()
		if !replaces && t.n.Load() >= int64(t.max) {
			return false
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, had := s.m[k]
	switch {
	case g != nil:
		s.m[k] = g
		if !had {
			t.n.Add(1)
		}
	case had:
		delete(s.m, k)
		t.n.Add(-1)
	}
	return true
}

// drop removes the grant of a connection that ended, unless it belongs to
// another connection with the same client id and user name (one that took
// the session over, or logs in just now).
func (t *grantTable) drop(clientID, username, remote string) {
	if t.n.Load() == 0 {
		return
	}
	s := t.shard(clientID)
	k := grantKey{clientID, username}
	s.mu.Lock()
	if g := s.m[k]; g != nil && g.remote == remote {
		delete(s.m, k)
		t.n.Add(-1)
	}
	s.mu.Unlock()
}

// sweep drops the grants whose tokens have expired.
func (t *grantTable) sweep(now time.Time) {
	if t.n.Load() == 0 {
		return
	}
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for k, g := range s.m {
			if g.expired(now) {
				delete(s.m, k)
				t.n.Add(-1)
			}
		}
		s.mu.Unlock()
	}
}

func (t *grantTable) len() int { return int(t.n.Load()) }

// tokenApplies reports whether a login is decided by JWT authentication:
// auth.jwt is on, the listener does not take the user name from a
// certificate, and the password has a token's form, or there is a user name
// and no password file to check it against (then only a token can prove
// it, and tokenLogin refuses the login).
func (a *Auth) tokenApplies(username string, password []byte, listener string) bool {
	if a.jwt == nil || username != "" && a.certListeners[listener] {
		return false
	}
	return looksLikeJWT(password) || username != "" && a.users.Load() == nil
}

// Login implements core.LoginAuthenticator: Authenticate, which for a token
// also returns the user name of its claim and when it expires (core closes
// the connection then). A login without a token drops the claim ACL of a
// token login with the same client id and user name: its rights are the
// ACL file's.
func (a *Auth) Login(clientID, username string, password []byte, remote net.Addr, listener, crossOrigin string) (
	string, time.Time, error) {
	if !a.tokenApplies(username, password, listener) {
		err := a.Authenticate(clientID, username, password, remote, listener, crossOrigin)
		if err == nil && a.jwt != nil {
			a.jwt.grants.set(clientID, username, nil, a.now())
		}
		return "", time.Time{}, err
	}
	now := a.now()
	ip, _ := addrIP(remote)
	if err := a.admit(a.identityOf(clientID, username, ip, listener, a.users.Load()), username, ip, now); err != nil {
		return "", time.Time{}, err
	}
	return a.tokenLogin(clientID, username, password, remote, ip, now)
}

// tokenLogin decides a login by token after the rate and ban checks of its
// CONNECT (admit). A token check costs microseconds, so it takes no turn in
// the hash queue; but a refused token counts as a failed login of its
// source, which the failed-login limit locks out as for passwords.
func (a *Auth) tokenLogin(clientID, username string, password []byte, remote net.Addr, ip netip.Addr, now time.Time) (
	string, time.Time, error) {
	key := sourceKey(ip)
	if a.failed.locked(key, now) {
		a.stats.lockedOut.Add(1)
		return "", time.Time{}, refuse(codec.NotAuthorized, "too many failed logins from %s", ip)
	}
	fail := func(format string, args ...any) (string, time.Time, error) {
		a.stats.loginFailures.Add(1)
		if a.failed.fail(key, now) {
			a.log.Warn("source locked out after failed logins", zap.String("address", ip.String()),
				zap.Int("failures", a.opts.Limits.MaxFailedLogins), zap.Duration("for", a.opts.Limits.FailedLoginBan))
		}
		return "", time.Time{}, refuse(codec.BadUserNameOrPassword, format, args...)
	}
	if !looksLikeJWT(password) {
		return fail("user %q: there is no password file, and the password is not a token", username)
	}
	c, err := a.jwt.verify(password, now)
	if err != nil {
		return fail("token refused (client %q from %s): %v", clientID, ip, err)
	}
	if username != "" && username != c.user {
		return fail("user name %q is not the token's (%s claim %q)", username, a.jwt.opts.UsernameClaim, c.user)
	}
	who := identity{clientID: clientID, username: c.user}
	if username == "" {
		// admit saw no user name: the token's may be banned.
		if b, ok := a.bans.match(who, c.user, netip.Addr{}, now); ok {
			a.stats.banned.Add(1)
			return "", time.Time{}, refuse(codec.Banned, "banned (%s %s)", b.Kind, b.Value)
		}
	}
	var g *grant
	if c.acl != nil {
		g = &grant{acl: c.acl, expires: c.expires, remote: addrString(remote)}
	}
	if !a.jwt.grants.set(clientID, c.user, g, now) {
		a.stats.busy.Add(1)
		a.log.Warn("jwt: token ACLs of as many connections as auth.tracked are held; login refused with Server Busy",
			zap.Int("tracked", a.opts.Limits.Tracked))
		return "", time.Time{}, refuse(codec.ServerBusy, "too many connections with token ACLs (auth.tracked %d)", a.opts.Limits.Tracked)
	}
	a.loggedIn(who, now)
	return c.user, c.expires, nil
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

// claimTopic decides a topic access by the claim ACL of the client's
// login, if any; decided false leaves it to the ACL file.
func (a *Auth) claimTopic(kind denyKind, clientID, username, topic string, acc access) (ok, decided bool) {
	if a.jwt == nil {
		return false, false
	}
	g := a.jwt.grants.get(clientID, username)
	if g == nil {
		return false, false
	}
	ok, decided, by := g.decideTopic(clientID, username, topic, acc, a.now())
	if decided && !ok {
		a.denied(kind, clientID, username, topic, by)
	}
	return ok, decided
}

// claimSubscribe is claimTopic for a SUBSCRIBE filter.
func (a *Auth) claimSubscribe(clientID, username, filter string) (ok, decided bool) {
	if a.jwt == nil {
		return false, false
	}
	g := a.jwt.grants.get(clientID, username)
	if g == nil {
		return false, false
	}
	ok, decided, by := g.decideSubscribe(clientID, username, filter, a.now())
	if decided && !ok {
		a.denied(denySubscribe, clientID, username, filter, by)
	}
	return ok, decided
}

// hasClaim reports whether the client's login carries a claim ACL. Its
// subscriptions then never read everything unchecked (ReadsAll is false):
// the claim ends with the connection, and core keeps a ReadsAll answer
// until the next login, so each delivery asks CanRead instead.
func (a *Auth) hasClaim(clientID, username string) bool {
	return a.jwt != nil && a.jwt.grants.get(clientID, username) != nil
}

// jwtDisconnected drops the claim ACL of a connection that ended.
func (a *Auth) jwtDisconnected(clientID, username string, remote net.Addr) {
	if a.jwt != nil {
		a.jwt.grants.drop(clientID, username, addrString(remote))
	}
}

// maintainJWT sweeps expired grants and fetches the JWK Set when due
// (Auth.maintain).
func (a *Auth) maintainJWT(now time.Time) {
	if a.jwt != nil {
		a.jwt.grants.sweep(now)
		a.jwt.refresh(now)
	}
}

// jwtFileNames are the key files, in the order of jwtAuth.stamps.
func (o *JWTOptions) fileNames() [3]string {
	return [3]string{o.SecretFile, o.PublicKeyFile, o.JWKSFile}
}

// loadJWTLocked re-reads the key files, all or none (a file that fails
// leaves the keys as they were), and with fetch the JWK Set URL; a.mu is
// held.
func (a *Auth) loadJWTLocked(fetch bool) error {
	j := a.jwt
	if j == nil {
		return nil
	}
	var st [3]fileStamp
	for i, name := range j.opts.fileNames() {
		if name != "" {
			st[i], _ = stamp(name)
		}
	}
	files, err := j.opts.loadFiles()
	if err != nil {
		a.stats.reloadErrors.Add(1)
		return err
	}
	j.files.Store(files)
	j.stamps, j.fileErr = st, ""
	a.stats.reloads.Add(1)
	a.log.Info("jwt keys loaded", zap.Bool("secret", len(files.secret) > 0), zap.Int("public_keys", len(files.pem)),
		zap.Int("jwks_file_keys", len(files.jwks)))
	if fetch && j.opts.JWKSURL != "" {
		return j.fetchJWKS(a.now())
	}
	return nil
}

// pollJWTLocked reloads the key files when one changed; a.mu is held.
func (a *Auth) pollJWTLocked() {
	j := a.jwt
	if j == nil {
		return
	}
	changed := false
	for i, name := range j.opts.fileNames() {
		if name == "" {
			continue
		}
		st, err := stamp(name)
		changed = changed || err != nil || !st.same(j.stamps[i])
	}
	if !changed {
		return
	}
	if err := a.loadJWTLocked(false); err != nil {
		if msg := err.Error(); msg != j.fileErr {
			j.fileErr = msg
			a.log.Error("reload failed; the previous version stays in force", zap.Error(err))
		}
	}
}
