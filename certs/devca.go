package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/xmq-io/xmq/internal/atomicfile"
)

// Validity periods of the development CA and the certificates it issues.
// Leaf certificates stay under 398 days, the most some clients accept.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 397 * 24 * time.Hour
	// renewWithin renews the development server certificate this long
	// before it ends.
	renewWithin = 30 * 24 * time.Hour
)

// File names of the development CA inside its directory.
const (
	CAFileName      = "ca.pem"
	CAKeyFileName   = "ca-key.pem"
	CertFileName    = "server.pem"
	CertKeyFileName = "server-key.pem"
)

// CA is a certificate authority that issues server and client
// certificates: the development CA, and the fixtures of tests.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA creates a self-signed CA named commonName with an ECDSA P-256 key.
func NewCA(commonName string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"xmq development"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("certs: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certs: CA certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: encodeCert(der), KeyPEM: keyPEM}, nil
}

// LoadCA reads a CA from its certificate and key PEM files.
func LoadCA(certFile, keyFile string) (*CA, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("certs: loading CA: %w", err)
	}
	if !pair.Leaf.IsCA {
		return nil, fmt.Errorf("certs: %s is not a CA certificate", certFile)
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("certs: %s: key cannot sign", keyFile)
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	return &CA{Cert: pair.Leaf, Key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// Pool returns a pool holding only this CA, for RootCAs or ClientCAs.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// IssueServer issues a server certificate for hosts (DNS names or IP
// addresses) and returns it with its key, PEM-encoded.
func (ca *CA) IssueServer(hosts ...string) (certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 {
		return nil, nil, errors.New("certs: a server certificate needs at least one host")
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: hosts[0]},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	addHosts(tmpl, hosts)
	return ca.issue(tmpl)
}

// IssueNode issues a cluster node's certificate: a server certificate for
// hosts that is a client certificate too, since a route is dialled by one
// node and accepted by the other, and both verify (cluster TLS).
func (ca *CA) IssueNode(node string, hosts ...string) (certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 {
		return nil, nil, errors.New("certs: a node certificate needs at least one host")
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: node},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	addHosts(tmpl, hosts)
	return ca.issue(tmpl)
}

// addHosts puts each host in tmpl as an IP address or a DNS name.
func addHosts(tmpl *x509.Certificate, hosts []string) {
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
}

// IssueClient issues a client certificate whose subject common name is
// commonName, with sans (DNS names, e-mail addresses or IP addresses) as
// subject alternative names.
func (ca *CA) IssueClient(commonName string, sans ...string) (certPEM, keyPEM []byte, err error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	for _, s := range sans {
		switch ip := net.ParseIP(s); {
		case ip != nil:
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		case bytes.ContainsRune([]byte(s), '@'):
			tmpl.EmailAddresses = append(tmpl.EmailAddresses, s)
		default:
			tmpl.DNSNames = append(tmpl.DNSNames, s)
		}
	}
	return ca.issue(tmpl)
}

// issue signs tmpl with a fresh ECDSA P-256 key.
func (ca *CA) issue(tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: key: %w", err)
	}
	now := time.Now()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(leafValidity)
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: certificate: %w", err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return encodeCert(der), keyPEM, nil
}

// DevHosts are the names the development server certificate covers:
// localhost, 127.0.0.1, ::1, this machine's host name and the addresses of
// its network interfaces, so that a device on the LAN dialling the
// broker's address verifies it too. Link-local addresses are left out:
// they change with the interface and need a zone to be dialled.
func DevHosts() []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if h, err := os.Hostname(); err == nil && h != "" && !slices.Contains(hosts, h) {
		hosts = append(hosts, h)
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLinkLocalUnicast() || ipn.IP.IsUnspecified() || ipn.IP.IsMulticast() {
			continue
		}
		if s := ipn.IP.String(); !slices.Contains(hosts, s) {
			hosts = append(hosts, s)
		}
	}
	return hosts
}

// HostsFileName is the file, in the development CA's directory, of the
// names `xmq certs -host` added: one per line, kept across renewals.
const HostsFileName = "hosts"

// ReadExtraHosts returns the names of dir's hosts file; none when it is
// missing. Blank lines and lines starting with '#' are ignored.
func ReadExtraHosts(dir string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, HostsFileName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	var hosts []string
	for line := range strings.Lines(string(data)) {
		if h := strings.TrimSpace(line); h != "" && h[0] != '#' && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts, nil
}

// AddExtraHosts adds names to dir's hosts file, creating it, and returns
// every name it then holds. A name must be a DNS name or an IP address.
func AddExtraHosts(dir string, names []string) ([]string, error) {
	hosts, err := ReadExtraHosts(dir)
	if err != nil {
		return nil, err
	}
	added := false
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if err := validHost(n); err != nil {
			return nil, err
		}
		if !slices.Contains(hosts, n) {
			hosts, added = append(hosts, n), true
		}
	}
	if !added {
		return hosts, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("certs: development CA directory: %w", err)
	}
	body := "# Names the development server certificate covers besides localhost,\n" +
		"# the host name and the interface addresses (xmq certs -host).\n" + strings.Join(hosts, "\n") + "\n"
	if err := writeFileAtomic(filepath.Join(dir, HostsFileName), []byte(body), 0o644); err != nil {
		return nil, err
	}
	return hosts, nil
}

// validHost accepts an IP address or a DNS name. Wildcards are refused:
// a development certificate names the hosts it serves.
func validHost(h string) error {
	if net.ParseIP(h) != nil {
		return nil
	}
	name := h
	if len(name) > 253 || name == "" {
		return fmt.Errorf("certs: host %q is neither an IP address nor a DNS name", h)
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("certs: host %q is neither an IP address nor a DNS name", h)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return fmt.Errorf("certs: host %q is neither an IP address nor a DNS name", h)
			}
		}
	}
	return nil
}

// Dev is the development CA and the server certificate it issued.
type Dev struct {
	// Dir holds the files below; "" for a development CA kept in memory.
	Dir                                  string
	CAFile, CAKeyFile, CertFile, KeyFile string
	CA                                   *CA
	// Cert is the server certificate and its chain (leaf, then the CA).
	Cert tls.Certificate
	// Created reports that EnsureDev made new files (or a new server
	// certificate) instead of loading what was there.
	Created bool
	// Hosts are the names the server certificate must cover: DevHosts and
	// the directory's hosts file.
	Hosts []string
}

// DevPaths returns the development CA's file names in dir.
func DevPaths(dir string) Dev {
	return Dev{
		Dir:       dir,
		CAFile:    filepath.Join(dir, CAFileName),
		CAKeyFile: filepath.Join(dir, CAKeyFileName),
		CertFile:  filepath.Join(dir, CertFileName),
		KeyFile:   filepath.Join(dir, CertKeyFileName),
	}
}

// EnsureDev loads the development CA and server certificate from dir,
// creating what is missing: a new CA when there is none (or regenerate is
// set), a new server certificate when there is none, when it ends within 30
// days, does not cover DevHosts and the names of dir's hosts file
// (ReadExtraHosts), or was not issued by the CA. dir is created with mode
// 0700; keys are written 0600. dir "" keeps everything in memory.
func EnsureDev(dir string, regenerate bool) (*Dev, error) {
	d := DevPaths(dir)
	d.Hosts = DevHosts()
	if dir == "" {
		d = Dev{Hosts: d.Hosts}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("certs: development CA directory: %w", err)
	} else {
		extra, err := ReadExtraHosts(dir)
		if err != nil {
			return nil, err
		}
		for _, h := range extra {
			if !slices.Contains(d.Hosts, h) {
				d.Hosts = append(d.Hosts, h)
			}
		}
	}
	var err error
	if dir != "" && !regenerate && exists(d.CAFile) && exists(d.CAKeyFile) {
		if d.CA, err = LoadCA(d.CAFile, d.CAKeyFile); err != nil {
			return nil, err
		}
	} else {
		if d.CA, err = NewCA("xmq development CA"); err != nil {
			return nil, err
		}
		d.Created = true
		if err := d.write(d.CAFile, d.CA.CertPEM, d.CAKeyFile, d.CA.KeyPEM); err != nil {
			return nil, err
		}
	}
	if !d.Created && exists(d.CertFile) && exists(d.KeyFile) {
		if pair, err := tls.LoadX509KeyPair(d.CertFile, d.KeyFile); err == nil && devCertGood(pair.Leaf, d.CA, d.Hosts) {
			d.Cert = pair
			d.Cert.Certificate = append(d.Cert.Certificate, d.CA.Cert.Raw)
			return &d, nil
		}
	}
	certPEM, keyPEM, err := d.CA.IssueServer(d.Hosts...)
	if err != nil {
		return nil, err
	}
	if err := d.write(d.CertFile, certPEM, d.KeyFile, keyPEM); err != nil {
		return nil, err
	}
	if d.Cert, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, fmt.Errorf("certs: development certificate: %w", err)
	}
	d.Cert.Certificate = append(d.Cert.Certificate, d.CA.Cert.Raw)
	d.Created = true
	return &d, nil
}

// devCertGood reports whether the development server certificate can stay.
func devCertGood(leaf *x509.Certificate, ca *CA, hosts []string) bool {
	if leaf == nil || time.Until(leaf.NotAfter) < renewWithin || leaf.CheckSignatureFrom(ca.Cert) != nil {
		return false
	}
	for _, h := range hosts {
		if leaf.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

// write stores a certificate (mode 0644) and its key (mode 0600) unless d
// lives in memory.
func (d *Dev) write(certFile string, certPEM []byte, keyFile string, keyPEM []byte) error {
	if d.Dir == "" {
		return nil
	}
	if err := writeFileAtomic(keyFile, keyPEM, 0o600); err != nil {
		return err
	}
	return writeFileAtomic(certFile, certPEM, 0o644)
}

// writeFileAtomic writes data to a temporary file beside path and renames
// it over path, so a reader never sees half a file.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := atomicfile.Write(path, data, mode); err != nil {
		return fmt.Errorf("certs: writing %s: %w", path, err)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return n
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("certs: encoding key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
