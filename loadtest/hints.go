package loadtest

import (
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
)

// TLSHint says what to do when the broker's certificate was not accepted:
// which flag to add, or "" for any other error. The common case is xmq's
// development CA, which no machine trusts until told.
func TLSHint(err error) string {
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ua):
		return "the broker's certificate is signed by a CA this machine does not trust: give the CA with -cafile " +
			"(xmq's development CA: -cafile data/certs/ca.pem), or skip verification with -insecure"
	case errors.As(err, &hn):
		names := hn.Certificate.DNSNames
		for _, ip := range hn.Certificate.IPAddresses {
			names = append(names, ip.String())
		}
		return fmt.Sprintf("the broker's certificate is not valid for %s (it names %s): dial one of those, add this name to it "+
			"(xmq's development CA: xmq certs -host %s), or skip verification with -insecure",
			hn.Host, strings.Join(names, ", "), hn.Host)
	case errors.As(err, &ci):
		return "the broker's certificate is not valid (" + ci.Error() + "): renew it, or skip verification with -insecure"
	}
	return ""
}

// withTLSHint appends TLSHint's advice to an error's text.
func withTLSHint(err error) error {
	if h := TLSHint(err); h != "" {
		return fmt.Errorf("%w (%s)", err, h)
	}
	return err
}
