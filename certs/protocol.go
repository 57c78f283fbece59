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
