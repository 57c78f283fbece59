package listeners

import "strings"

// handshakeHint explains the TLS handshake failures whose own words
// mislead: a device that does not accept the listener's certificate
// aborts with an alert ("bad certificate", "unknown certificate
// authority"), or, as some TLS stacks do after the server has switched to
// encrypted records, with a plaintext alert the server can only report as
// "bad record MAC". "" for other errors.
func handshakeHint(err error) string {
	s := err.Error()
	for _, sign := range []string{"bad record MAC", "bad certificate", "unknown certificate authority", "certificate unknown"} {
		if strings.Contains(s, sign) {
			return "the client probably refused this listener's certificate: it must trust the CA that issued it " +
				"(xmq's development CA: data/certs/ca.pem) and dial a name or address the certificate covers " +
				"(xmq certs -host NAME adds one to the development certificate)"
		}
	}
	return ""
}
