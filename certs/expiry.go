package certs

import (
	"crypto/tls"
	"crypto/x509"
	"sync"
	"time"
)

// NotAfter returns when the certificate in service stops being valid: the
// loaded file's or the development CA's; with ACME, the earliest end of
// the certificates served so far (one per domain), zero before the first
// handshake has fetched one. Monitoring turns it into time left
// (xmq_certificate_expiry_seconds).
func (s *Source) NotAfter() time.Time {
	if s.acme != nil {
		return s.served.earliest()
	}
	return leafNotAfter(s.cert.Load())
}

// leafNotAfter is the end of cert's leaf; zero when there is none.
func leafNotAfter(cert *tls.Certificate) time.Time {
	switch {
	case cert == nil:
		return time.Time{}
	case cert.Leaf != nil:
		return cert.Leaf.NotAfter
	case len(cert.Certificate) > 0:
		if leaf, err := x509.ParseCertificate(cert.Certificate[0]); err == nil {
			return leaf.NotAfter
		}
	}
	return time.Time{}
}

// servedCerts keeps, per domain, the end of the ACME certificate last
// served. A handshake takes the write lock only when the certificate
// changed (a renewal), so the common case is a read lock.
type servedCerts struct {
	mu    sync.RWMutex
	until map[string]time.Time
}

func (c *servedCerts) note(domain string, cert *tls.Certificate) {
	end := leafNotAfter(cert)
	c.mu.RLock()
	same := c.until[domain].Equal(end)
	c.mu.RUnlock()
	if same || end.IsZero() {
		return
	}
	c.mu.Lock()
	if c.until == nil {
		c.until = map[string]time.Time{}
	}
	c.until[domain] = end
	c.mu.Unlock()
}

func (c *servedCerts) earliest() time.Time {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var first time.Time
	for _, end := range c.until {
		if first.IsZero() || end.Before(first) {
			first = end
		}
	}
	return first
}
