package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// SCRAM (RFC 5802, RFC 7677) as MQTT 5 enhanced authentication: the
// CONNECT's Authentication Method is the mechanism name, its
// Authentication Data the client-first-message; the broker answers with
// AUTH (Continue authentication) carrying the server-first-message, the
// client sends the client-final-message in AUTH, and CONNACK carries the
// server-final-message. Channel binding (-PLUS) is not offered. User names
// are compared as sent (no SASLprep), so keep them ASCII.

// scramMech is one SCRAM mechanism.
type scramMech struct {
	name    string // Authentication Method, e.g. "SCRAM-SHA-256"
	field   string // password file tag, e.g. "scram-sha-256"
	newHash func() hash.Hash
	size    int
}

var (
	scramSHA256 = &scramMech{"SCRAM-SHA-256", "scram-sha-256", sha256.New, sha256.Size}
	scramSHA1   = &scramMech{"SCRAM-SHA-1", "scram-sha-1", sha1.New, sha1.Size}
	// scramMechs is every mechanism, strongest first (the order of the
	// password file fields).
	scramMechs = []*scramMech{scramSHA256, scramSHA1}
)

// DefaultScramIterations is the PBKDF2 iteration count xmq passwd uses for
// SCRAM credentials (RFC 7677 asks for at least 4096). The client, not the
// broker, pays for it at each login.
const DefaultScramIterations = 4096

// scramMechByName returns the mechanism for an Authentication Method, nil
// for an unknown one. Names are case-sensitive, as in SASL.
func scramMechByName(name string) *scramMech {
	for _, m := range scramMechs {
		if m.name == name {
			return m
		}
	}
	return nil
}

// scramCred is what the broker stores for one user and mechanism: never
// the password, nor anything that logs in by itself.
type scramCred struct {
	iter                       int
	salt, storedKey, serverKey []byte
}

func (m *scramMech) hmac(key []byte, msg ...string) []byte {
	h := hmac.New(m.newHash, key)
	for _, s := range msg {
		h.Write([]byte(s))
	}
	return h.Sum(nil)
}

// newScramCred derives the stored credentials from a password (RFC 5802
// section 3): SaltedPassword = Hi(password, salt, i), ClientKey =
// HMAC(SaltedPassword, "Client Key"), StoredKey = H(ClientKey), ServerKey =
// HMAC(SaltedPassword, "Server Key").
func newScramCred(m *scramMech, password []byte, salt []byte, iter int) (scramCred, error) {
	salted, err := pbkdf2.Key(m.newHash, string(password), salt, iter, m.size)
	if err != nil {
		return scramCred{}, err
	}
	ck := m.hmac(salted, "Client Key")
	h := m.newHash()
	h.Write(ck)
	return scramCred{iter: iter, salt: salt, storedKey: h.Sum(nil), serverKey: m.hmac(salted, "Server Key")}, nil
}

func (c scramCred) encode(m *scramMech) string {
	return "$" + m.field + "$" + strconv.Itoa(c.iter) + "$" + b64(c.salt) + "$" + b64(c.storedKey) + "$" + b64(c.serverKey)
}

// parseScramField decodes a password file SCRAM field.
func parseScramField(f string) (*scramMech, scramCred, error) {
	for _, m := range scramMechs {
		tag := "$" + m.field + "$"
		if !strings.HasPrefix(f, tag) {
			continue
		}
		p := strings.Split(f[len(tag):], "$")
		if len(p) != 4 {
			return nil, scramCred{}, fmt.Errorf("%s field: want $%s$ITERATIONS$SALT$STOREDKEY$SERVERKEY", m.name, m.field)
		}
		iter, err := strconv.Atoi(p[0])
		if err != nil || iter < 1 {
			return nil, scramCred{}, fmt.Errorf("%s field: bad iteration count", m.name)
		}
		salt, e1 := unb64(p[1])
		sk, e2 := unb64(p[2])
		vk, e3 := unb64(p[3])
		if e1 != nil || e2 != nil || e3 != nil || len(salt) == 0 || len(sk) != m.size || len(vk) != m.size {
			return nil, scramCred{}, fmt.Errorf("%s field: bad salt or key encoding", m.name)
		}
		return m, scramCred{iter: iter, salt: salt, storedKey: sk, serverKey: vk}, nil
	}
	return nil, scramCred{}, errors.New("unrecognised extra field (want $scram-sha-256$... or $scram-sha-1$...)")
}

// errScram is a malformed or refused SCRAM message; the wrapped reason
// stays in the server log.
var errScram = errors.New("scram")

func scramErr(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errScram}, a...)...)
}

// scramExchange is the server's state between the two client messages.
type scramExchange struct {
	mech            *scramMech
	user            string
	cred            scramCred
	known           bool // the user has credentials for mech
	gs2Header       string
	clientFirstBare string
	serverFirst     string
	nonce           string // client nonce + server nonce
}

// scramFirst reads a client-first-message and returns the exchange with
// its server-first-message. cred looks the user's credentials up; an
// unknown user gets fake ones from fake, so the reply does not tell.
func scramFirst(m *scramMech, msg []byte, serverNonce string,
	cred func(user string) (scramCred, bool), fake func(user string) scramCred) (*scramExchange, error) {
	s := string(msg)
	// gs2-header = gs2-cbind-flag "," [ authzid ] ","
	cb, rest, ok1 := strings.Cut(s, ",")
	authz, bare, ok2 := strings.Cut(rest, ",")
	if !ok1 || !ok2 {
		return nil, scramErr("client-first-message without a GS2 header")
	}
	switch {
	case cb == "n", cb == "y":
	case strings.HasPrefix(cb, "p="):
		return nil, scramErr("channel binding is not supported")
	default:
		return nil, scramErr("bad GS2 channel binding flag")
	}
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		if strings.HasPrefix(attrs[0], "m=") {
			return nil, scramErr("mandatory extension not supported")
		}
		return nil, scramErr("client-first-message: want n=USER,r=NONCE")
	}
	user, err := saslname(attrs[0][2:])
	if err != nil {
		return nil, err
	}
	if authz != "" {
		az, err := saslname(strings.TrimPrefix(authz, "a="))
		if err != nil || !strings.HasPrefix(authz, "a=") || az != user {
			return nil, scramErr("authorization identity differs from the user")
		}
	}
	cnonce := attrs[1][2:]
	if cnonce == "" || !printable(cnonce) {
		return nil, scramErr("bad client nonce")
	}
	x := &scramExchange{mech: m, user: user, gs2Header: cb + "," + authz + ",", clientFirstBare: bare,
		nonce: cnonce + serverNonce}
	x.cred, x.known = cred(user)
	if !x.known {
		x.cred = fake(user)
	}
	x.serverFirst = "r=" + x.nonce + ",s=" + b64(x.cred.salt) + ",i=" + strconv.Itoa(x.cred.iter)
	return x, nil
}

// final checks a client-final-message and returns the server-final-message.
func (x *scramExchange) final(msg []byte) ([]byte, error) {
	s := string(msg)
	i := strings.LastIndex(s, ",p=")
	if i < 0 {
		return nil, scramErr("client-final-message without a proof")
	}
	withoutProof, proofB64 := s[:i], s[i+3:]
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, scramErr("client-final-message: want c=...,r=...,p=...")
	}
	cbind, err := unb64(attrs[0][2:])
	if err != nil || string(cbind) != x.gs2Header {
		return nil, scramErr("channel binding data differs from the GS2 header")
	}
	if subtle.ConstantTimeCompare([]byte(attrs[1][2:]), []byte(x.nonce)) != 1 {
		return nil, scramErr("nonce mismatch")
	}
	proof, err := unb64(proofB64)
	if err != nil || len(proof) != x.mech.size {
		return nil, scramErr("bad proof encoding")
	}
	authMessage := x.clientFirstBare + "," + x.serverFirst + "," + withoutProof
	sig := x.mech.hmac(x.cred.storedKey, authMessage)
	for i := range proof {
		proof[i] ^= sig[i] // proof is now ClientKey
	}
	h := x.mech.newHash()
	h.Write(proof)
	if subtle.ConstantTimeCompare(h.Sum(nil), x.cred.storedKey) != 1 || !x.known {
		return nil, scramErr("wrong proof")
	}
	return []byte("v=" + b64(x.mech.hmac(x.cred.serverKey, authMessage))), nil
}

// saslname decodes a SCRAM user name: "=2C" is ',' and "=3D" is '='.
func saslname(s string) (string, error) {
	if !strings.Contains(s, "=") {
		if s == "" {
			return "", scramErr("empty user name")
		}
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", scramErr("bad '=' escape in user name")
		}
		i += 2
	}
	return b.String(), nil
}

// printable reports whether s holds only printable ASCII other than ','.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}
