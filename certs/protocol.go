package certs

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
)

// MinVersion parses a listener's min_version: "1.2" (the default for "")
// or "1.3". TLS 1.0 and 1.1 are not offered: RFC 8996 deprecates them and
// no maintained MQTT client needs them.
func MinVersion(s string) (uint16, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	v = strings.TrimPrefix(strings.TrimPrefix(v, "tlsv"), "tls")
	switch v {
	case "", "1.2":
		return tls.VersionTLS12, nil
	case "1.3":
		return tls.VersionTLS13, nil
	case "1.0", "1", "1.1":
		return 0, fmt.Errorf("certs: min_version %q: TLS 1.0 and 1.1 are not offered (RFC 8996); want 1.2 or 1.3", s)
	}
	return 0, fmt.Errorf("certs: min_version %q: want 1.2 or 1.3", s)
}

// CipherSuites parses a listener's cipher_suites: Go's (IANA) names of the
// TLS 1.2 suites it considers secure, such as
// TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256. TLS 1.3 suites are not
// configurable in Go: all three are always offered. None means Go's
// default order and set.
func CipherSuites(names []string) ([]uint16, error) {
	if len(names) == 0 {
		return nil, nil
	}
	known := map[string]uint16{}
	for _, cs := range tls.CipherSuites() {
		if slices.Contains(cs.SupportedVersions, tls.VersionTLS12) {
			known[cs.Name] = cs.ID
		}
	}
	ids := make([]uint16, 0, len(names))
	for _, n := range names {
		id, ok := known[strings.ToUpper(strings.TrimSpace(n))]
		if !ok {
			return nil, fmt.Errorf("certs: cipher suite %q: want one of %s", n, strings.Join(CipherSuiteNames(), ", "))
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// CipherSuiteNames lists the names CipherSuites accepts, sorted.
func CipherSuiteNames() []string {
	var names []string
	for _, cs := range tls.CipherSuites() {
		if slices.Contains(cs.SupportedVersions, tls.VersionTLS12) {
			names = append(names, cs.Name)
		}
	}
	slices.Sort(names)
	return names
}

// curveNames are the key exchanges Curves accepts, in upper case: the
// names of CurveNames, Go's (CurveP256) and OpenSSL's (prime256v1, also
// in Mosquitto's ecdh_curve) spellings.
var curveNames = map[string]tls.CurveID{
	"X25519": tls.X25519, "P256": tls.CurveP256, "P384": tls.CurveP384, "P521": tls.CurveP521,
	"X25519MLKEM768": tls.X25519MLKEM768, "SECP256R1MLKEM768": tls.SecP256r1MLKEM768,
	"SECP384R1MLKEM1024": tls.SecP384r1MLKEM1024,
	"CURVEP256":          tls.CurveP256, "CURVEP384": tls.CurveP384, "CURVEP521": tls.CurveP521,
	"P-256": tls.CurveP256, "P-384": tls.CurveP384, "P-521": tls.CurveP521,
	"SECP256R1": tls.CurveP256, "PRIME256V1": tls.CurveP256, "SECP384R1": tls.CurveP384, "SECP521R1": tls.CurveP521,
}

// Curves parses a listener's curves: the key exchanges offered, in order
// of preference, such as [X25519, P256, X25519MLKEM768]. None means Go's
// default (which includes the hybrid post-quantum X25519MLKEM768, preferred
// when the client offers it: about 3 times the server CPU of X25519 per
// handshake, see docs/security.md).
func Curves(names []string) ([]tls.CurveID, error) {
	if len(names) == 0 {
		return nil, nil
	}
	ids := make([]tls.CurveID, 0, len(names))
	for _, n := range names {
		id, ok := curveNames[strings.ToUpper(strings.TrimSpace(n))]
		if !ok {
			return nil, fmt.Errorf("certs: curve %q: want one of %s", n, strings.Join(CurveNames(), ", "))
		}
		if slices.Contains(ids, id) {
			return nil, fmt.Errorf("certs: curve %q: listed twice", n)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// CurveNames lists the names Curves accepts (other spellings aside).
func CurveNames() []string {
	return []string{"X25519", "P256", "P384", "P521", "X25519MLKEM768", "SecP256r1MLKEM768", "SecP384r1MLKEM1024"}
}
