package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
)

// Kinds of Source, as Source.Kind reports them.
const (
	KindFiles = "files"
	KindDev   = "dev"
	KindACME  = "acme"
)

// ALPNACME is the ALPN protocol of the ACME TLS-ALPN-01 challenge. A
// connection that negotiated it carries no MQTT and is closed after its
// handshake.
const ALPNACME = acme.ALPNProto

// Options says where a Source takes its certificates from: ACME when
// ACME.Domains is set, else CertFile and KeyFile when set, else the
// development CA.
type Options struct {
	// CertFile and KeyFile are PEM files: the certificate (with its chain)
	// and its private key.
	CertFile string
	KeyFile  string
	// ReloadInterval is how often the files are checked for a change
	// (default 10s; negative: only on Reload, that is SIGHUP).
	ReloadInterval time.Duration
	// DevDir is the development CA's directory; "" keeps it in memory.
	DevDir string
	// ACME obtains certificates from an ACME CA when Domains is not empty.
	ACME ACMEOptions
	// Log is the logger (default: none).
	Log *zap.Logger
}

// ACMEOptions configures certificates from an ACME CA.
type ACMEOptions struct {
	// Domains are the only names certificates are requested for.
	Domains []string
	// Email is the account's contact address (optional).
	Email string
	// CacheDir keeps the account key and certificates across restarts (required).
	CacheDir string
	// DirectoryURL is the CA's directory (default: Let's Encrypt production).
	DirectoryURL string
	// CAFile is a PEM bundle trusted for the CA's own HTTPS endpoint, for a
	// private ACME CA; "" trusts the system roots.
	CAFile string
	// HTTPAddress serves HTTP-01 challenges there (host:port, usually
	// ":80"); "" answers TLS-ALPN-01 on the TLS ports only.
	HTTPAddress string
	// RenewBefore renews a certificate this long before it ends (default:
	// autocert's, 30 days or a third of the lifetime).
	RenewBefore time.Duration
}

func (o *Options) setDefaults() {
	if o.ReloadInterval == 0 {
		o.ReloadInterval = 10 * time.Second
	}
	if o.ACME.DirectoryURL == "" {
		o.ACME.DirectoryURL = autocert.DefaultACMEDirectory
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
}

// Validate reports the first inconsistent option.
func (o *Options) Validate() error {
	if (o.CertFile == "") != (o.KeyFile == "") {
		return errors.New("certs: cert_file and key_file go together")
	}
	if len(o.ACME.Domains) > 0 {
		if o.CertFile != "" {
			return errors.New("certs: acme and cert_file/key_file exclude each other")
		}
		if o.ACME.CacheDir == "" {
			return errors.New("certs: acme needs a cache directory")
		}
		for _, d := range o.ACME.Domains {
			if d == "" || strings.ContainsAny(d, " /:*") || !strings.Contains(strings.Trim(d, "."), ".") {
				return fmt.Errorf("certs: acme domain %q is not a fully qualified host name", d)
			}
		}
	}
	return nil
}

// Source serves TLS certificates. Build it with New; Close it when done.
type Source struct {
	opts Options
	kind string
	log  *zap.Logger

	cert atomic.Pointer[tls.Certificate] // files and dev: the certificate in service
	dev  *Dev                            // KindDev only

	// Files: the state of the files when last loaded, guarded by mu.
	mu            sync.Mutex
	certStamp     fileStamp
	keyStamp      fileStamp
	stopReload    chan struct{}
	reloadStopped chan struct{}

	crls map[string]*crlFile // client_crl_file by path, guarded by mu

	acme     *autocert.Manager
	served   servedCerts // ACME: the end of each domain's certificate last served (expiry.go)
	httpSrv  *http.Server
	httpAddr net.Addr
	httpDone chan struct{}

	closeOnce sync.Once
}

// New builds a Source and loads its first certificate: it fails when the
// files cannot be read, the development CA cannot be written or the ACME
// options are wrong. An ACME certificate is fetched at the first handshake
// that asks for it, not here.
func New(opts Options) (*Source, error) {
	opts.setDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Source{opts: opts, log: opts.Log}
	switch {
	case len(opts.ACME.Domains) > 0:
		s.kind = KindACME
		if err := s.startACME(); err != nil {
			return nil, err
		}
	case opts.CertFile != "":
		s.kind = KindFiles
		if err := s.Reload(); err != nil {
			return nil, err
		}
		if opts.ReloadInterval > 0 {
			s.stopReload, s.reloadStopped = make(chan struct{}), make(chan struct{})
			go s.watch()
		}
	default:
		s.kind = KindDev
		dev, err := EnsureDev(opts.DevDir, false)
		if err != nil {
			return nil, err
		}
		s.dev = dev
		s.cert.Store(&dev.Cert)
	}
	return s, nil
}

// Kind reports where the certificates come from: KindFiles, KindDev or KindACME.
func (s *Source) Kind() string { return s.kind }

// Dev returns the development CA when the Source uses it, else nil.
func (s *Source) Dev() *Dev { return s.dev }

// GetCertificate is the tls.Config hook: the certificate for a handshake.
func (s *Source) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if s.acme != nil {
		if hello.ServerName == "" || !slices.Contains(s.opts.ACME.Domains, strings.ToLower(strings.TrimSuffix(hello.ServerName, "."))) {
			// A client that sends no name (or another one, such as an IP
			// address) gets the first domain's certificate; the host
			// policy still refuses to request any other.
			h := *hello
			h.ServerName = s.opts.ACME.Domains[0]
			hello = &h
		}
		cert, err := s.acme.GetCertificate(hello)
		if err == nil {
			s.served.note(hello.ServerName, cert)
		}
		return cert, err
	}
	return s.cert.Load(), nil
}

// Certificate returns the certificate in service (files and development
// CA; nil for ACME).
func (s *Source) Certificate() *tls.Certificate { return s.cert.Load() }

// Verify is a listener's client-certificate policy.
type Verify string

// Client-certificate policies.
const (
	VerifyNone     Verify = "none"     // no client certificate asked for
	VerifyOptional Verify = "optional" // asked for; verified when given
	VerifyRequired Verify = "required" // required and verified
)

// ClientAuth is the client-certificate part of a listener's TLS settings.
type ClientAuth struct {
	Verify Verify
	// CAFile holds the CAs trusted for client certificates (PEM). Empty
	// with a development CA source: the development CA.
	CAFile string
	// CRLFile holds certificate revocation lists (PEM "X509 CRL" blocks,
	// or one DER list) of those CAs: a client certificate it revokes, or
	// whose issuer has no list in it, is refused. Reloaded with the
	// certificate files. "" checks no revocation.
	CRLFile string
}

// ServerConfig returns a TLS server configuration served by s: TLS 1.2
// or later, the client-certificate policy of auth and, for ACME, the
// "acme-tls/1" ALPN protocol. The caller clones it and puts its own ALPN
// protocols first.
func (s *Source) ServerConfig(auth ClientAuth) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.GetCertificate}
	if s.acme != nil {
		cfg.NextProtos = []string{ALPNACME}
	}
	switch auth.Verify {
	case VerifyNone, "":
		if auth.CRLFile != "" {
			return nil, errors.New("certs: a client_crl_file needs verify optional or required")
		}
		cfg.ClientAuth = tls.NoClientCert
		return cfg, nil
	case VerifyOptional:
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	case VerifyRequired:
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, fmt.Errorf("certs: verify %q: want none, optional or required", auth.Verify)
	}
	switch {
	case auth.CAFile != "":
		pool, err := LoadPool(auth.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
	case s.dev != nil:
		cfg.ClientCAs = s.dev.CA.Pool()
	default:
		return nil, fmt.Errorf("certs: verify %s needs client_ca_file (only the development CA has a default)", auth.Verify)
	}
	if auth.CRLFile != "" {
		c, err := s.crlFile(auth.CRLFile)
		if err != nil {
			return nil, err
		}
		cfg.VerifyConnection = c.verifyConnection
	}
	return cfg, nil
}

// crlFile returns the loaded revocation lists of path, loading them (and
// starting their watcher) on first use; listeners naming the same file
// share them.
func (s *Source) crlFile(path string) (*crlFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.crls[path]; c != nil {
		return c, nil
	}
	c, err := newCRLFile(path, s.opts.ReloadInterval, s.log)
	if err != nil {
		return nil, err
	}
	if s.crls == nil {
		s.crls = map[string]*crlFile{}
	}
	s.crls[path] = c
	return c, nil
}

// LoadPool reads a PEM bundle of CA certificates.
func LoadPool(file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("certs: %s holds no PEM certificate", file)
	}
	return pool, nil
}

// Close stops the file watcher and the HTTP-01 server. It is idempotent.
func (s *Source) Close() error {
	var err error
	s.closeOnce.Do(func() {
		if s.stopReload != nil {
			close(s.stopReload)
			<-s.reloadStopped
		}
		if s.httpSrv != nil {
			err = s.httpSrv.Close()
			<-s.httpDone
		}
		s.mu.Lock()
		for _, c := range s.crls {
			c.close()
		}
		s.mu.Unlock()
	})
	return err
}
