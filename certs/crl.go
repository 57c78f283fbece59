package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// ErrRevoked is the handshake error of a client certificate that a CRL
// of its issuer lists.
var ErrRevoked = errors.New("certs: client certificate revoked")

// crlFile is a listener's client_crl_file: the certificate revocation
// lists in one PEM (or DER) file, reloaded like the certificate files.
// Handshakes read the loaded lists through an atomic pointer; reloads
// replace it whole.
type crlFile struct {
	path string
	log  *zap.Logger

	lists atomic.Pointer[[]*crl]

	mu    sync.Mutex // guards stamp and serialises loads
	stamp fileStamp

	// checked caches the verified signatures of the lists against an
	// issuer certificate, so a handshake costs a map lookup, not a
	// signature check. The key is the list and the issuer's DER.
	checked sync.Map // crlIssuer → error (nil when the signature holds)

	stop, stopped chan struct{}
}

// crl is one revocation list with its serial numbers indexed.
type crl struct {
	list    *x509.RevocationList
	revoked map[string]bool // big-endian serial bytes
}

type crlIssuer struct {
	list   *x509.RevocationList
	issuer string
}

// newCRLFile loads path and, with interval > 0, checks it for a change
// every interval until close.
func newCRLFile(path string, interval time.Duration, log *zap.Logger) (*crlFile, error) {
	c := &crlFile{path: path, log: log}
	if err := c.reload(); err != nil {
		return nil, err
	}
	if interval > 0 {
		c.stop, c.stopped = make(chan struct{}), make(chan struct{})
		go c.watch(interval)
	}
	return c, nil
}

// reload reads the file now; on an error the lists in force stay.
func (c *crlFile) reload() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, _ := stamp(c.path)
	data, err := os.ReadFile(c.path)
	if err != nil {
		return fmt.Errorf("certs: client_crl_file: %w", err)
	}
	lists, err := parseCRLs(data)
	if err != nil {
		return fmt.Errorf("certs: client_crl_file %s: %w", c.path, err)
	}
	c.stamp = st
	old := c.lists.Swap(&lists)
	c.checked.Clear() // its keys are the replaced lists
	now := time.Now()
	for _, l := range lists {
		if !l.list.NextUpdate.IsZero() && now.After(l.list.NextUpdate) {
			// OpenSSL refuses every client once a CRL is past its next
			// update; xmq keeps applying it and says so, because locking
			// every device out is worse than a stale list.
			c.log.Warn("certificate revocation list is past its next update: publish a new one; it is still applied",
				zap.String("client_crl_file", c.path), zap.String("issuer", l.list.Issuer.String()),
				zap.Time("next_update", l.list.NextUpdate))
		}
	}
	if old != nil {
		c.log.Info("certificate revocation lists reloaded", zap.String("client_crl_file", c.path), zap.Int("lists", len(lists)))
	}
	return nil
}

// parseCRLs reads every "X509 CRL" block of a PEM file, or one DER list.
func parseCRLs(data []byte) ([]*crl, error) {
	var ders [][]byte
	if bytes.Contains(data, []byte("-----BEGIN")) {
		for rest := data; ; {
			var b *pem.Block
			b, rest = pem.Decode(rest)
			if b == nil {
				break
			}
			if b.Type == "X509 CRL" {
				ders = append(ders, b.Bytes)
			}
		}
	} else if len(data) > 0 {
		ders = append(ders, data)
	}
	if len(ders) == 0 {
		return nil, errors.New(`holds no certificate revocation list (PEM "X509 CRL" blocks or one DER list)`)
	}
	out := make([]*crl, 0, len(ders))
	for _, der := range ders {
		l, err := x509.ParseRevocationList(der)
		if err != nil {
			return nil, err
		}
		c := &crl{list: l, revoked: make(map[string]bool, len(l.RevokedCertificateEntries))}
		for _, e := range l.RevokedCertificateEntries {
			c.revoked[string(e.SerialNumber.Bytes())] = true
		}
		out = append(out, c)
	}
	return out, nil
}

// watch reloads the file when its size or modification time changes.
func (c *crlFile) watch(interval time.Duration) {
	defer close(c.stopped)
	t := time.NewTicker(interval)
	defer t.Stop()
	var lastErr string
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		st, err := stamp(c.path)
		c.mu.Lock()
		changed := err == nil && st != c.stamp
		c.mu.Unlock()
		if !changed {
			continue
		}
		if err := c.reload(); err != nil {
			if err.Error() != lastErr {
				c.log.Warn("certificate revocation list changed but does not load; keeping the previous one", zap.Error(err))
			}
			lastErr = err.Error()
		} else {
			lastErr = ""
		}
	}
}

func (c *crlFile) close() {
	if c.stop != nil {
		close(c.stop)
		<-c.stopped
	}
}

// verifyConnection is the tls.Config hook: a verified client certificate
// passes when one of its chains has a CRL from the leaf's issuer, signed
// by that issuer, that does not list it. As with Mosquitto (OpenSSL's
// CRL check), a certificate whose issuer has no CRL in the file is
// refused. A connection without a client certificate is not checked.
func (c *crlFile) verifyConnection(cs tls.ConnectionState) error {
	if len(cs.VerifiedChains) == 0 {
		return nil
	}
	lists := *c.lists.Load()
	var first error
	for _, chain := range cs.VerifiedChains {
		if len(chain) < 2 {
			// The client's certificate is itself a trusted CA
			// certificate: no issuer to ask.
			return nil
		}
		err := c.check(chain[0], chain[1], lists)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

func (c *crlFile) check(leaf, issuer *x509.Certificate, lists []*crl) error {
	found := false
	for _, l := range lists {
		if !bytes.Equal(l.list.RawIssuer, issuer.RawSubject) {
			continue
		}
		key := crlIssuer{l.list, string(issuer.Raw)}
		sigErr, ok := c.checked.Load(key)
		if !ok {
			err := l.list.CheckSignatureFrom(issuer)
			c.checked.Store(key, err)
			sigErr = err
		}
		if sigErr != nil {
			continue
		}
		found = true
		if l.revoked[string(leaf.SerialNumber.Bytes())] {
			return fmt.Errorf("%w: serial %x, issuer %s", ErrRevoked, leaf.SerialNumber, issuer.Subject)
		}
	}
	if !found {
		return fmt.Errorf("certs: no revocation list from %s in %s: client certificates of that CA are refused", issuer.Subject, c.path)
	}
	return nil
}

// CheckCRLFile reads and parses a client_crl_file as a listener would,
// without loading it into any Source (xmq check-config).
func CheckCRLFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if _, err := parseCRLs(data); err != nil {
		return fmt.Errorf("certs: %s: %w", path, err)
	}
	return nil
}
