// Package certstest makes TLS fixtures for tests: a throw-away CA, server
// and client certificates signed by it, and the files a configuration
// names. Like net/http/httptest, it is for tests only.
package certstest

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"

	"github.com/xmq-io/xmq/certs"
)

// CA is a test certificate authority.
type CA struct {
	*certs.CA
	t testing.TB
}

// NewCA creates a CA for one test.
func NewCA(t testing.TB) *CA {
	t.Helper()
	ca, err := certs.NewCA("xmq test CA")
	if err != nil {
		t.Fatalf("certstest: %v", err)
	}
	return &CA{CA: ca, t: t}
}

// ServerCert issues a server certificate for hosts (default: localhost,
// 127.0.0.1 and ::1).
func (ca *CA) ServerCert(hosts ...string) tls.Certificate {
	ca.t.Helper()
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	certPEM, keyPEM, err := ca.IssueServer(hosts...)
	return ca.pair(certPEM, keyPEM, err)
}

// ClientCert issues a client certificate with common name cn and the
// given subject alternative names.
func (ca *CA) ClientCert(cn string, sans ...string) tls.Certificate {
	ca.t.Helper()
	certPEM, keyPEM, err := ca.IssueClient(cn, sans...)
	return ca.pair(certPEM, keyPEM, err)
}

func (ca *CA) pair(certPEM, keyPEM []byte, err error) tls.Certificate {
	ca.t.Helper()
	if err != nil {
		ca.t.Fatalf("certstest: %v", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		ca.t.Fatalf("certstest: %v", err)
	}
	return pair
}

// ServerConfig is a TLS server configuration with a certificate for hosts
// (default: the loopback names).
func (ca *CA) ServerConfig(hosts ...string) *tls.Config {
	ca.t.Helper()
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{ca.ServerCert(hosts...)}}
}

// ClientConfig is a TLS client configuration that trusts the CA and, when
// given, presents certificates.
func (ca *CA) ClientConfig(certificates ...tls.Certificate) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ca.Pool(), Certificates: certificates}
}

// WriteServerFiles issues a server certificate for hosts and writes it
// and its key in a temporary directory, returning the file names.
func (ca *CA) WriteServerFiles(hosts ...string) (certFile, keyFile string) {
	ca.t.Helper()
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	certPEM, keyPEM, err := ca.IssueServer(hosts...)
	if err != nil {
		ca.t.Fatalf("certstest: %v", err)
	}
	dir := ca.t.TempDir()
	return WriteFile(ca.t, dir, "server.pem", certPEM), WriteFile(ca.t, dir, "server-key.pem", keyPEM)
}

// WriteNodeFiles issues a cluster node's certificate (server and client
// use) for the loopback names and writes it and its key in a temporary
// directory, returning the file names.
func (ca *CA) WriteNodeFiles(node string) (certFile, keyFile string) {
	ca.t.Helper()
	certPEM, keyPEM, err := ca.IssueNode(node, "localhost", "127.0.0.1", "::1")
	if err != nil {
		ca.t.Fatalf("certstest: %v", err)
	}
	dir := ca.t.TempDir()
	return WriteFile(ca.t, dir, node+".pem", certPEM), WriteFile(ca.t, dir, node+"-key.pem", keyPEM)
}

// WriteCAFile writes the CA certificate in a temporary directory and
// returns its name.
func (ca *CA) WriteCAFile() string {
	ca.t.Helper()
	return WriteFile(ca.t, ca.t.TempDir(), "ca.pem", ca.CertPEM)
}

// WriteFile writes data to dir/name (mode 0600) and returns the path.
func WriteFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatalf("certstest: %v", err)
	}
	return path
}
