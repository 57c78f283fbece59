package certs_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/xmq-io/xmq/certs"
	"github.com/xmq-io/xmq/certs/certstest"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// acmeDomain is the name certificates are requested for; the test's DNS
// server resolves every name to 127.0.0.1.
const acmeDomain = "mqtt.xmq.test"

// pebble is Let's Encrypt's test ACME server, run in-process on loopback.
type pebble struct {
	dirURL string
	caFile string            // trusts the directory's HTTPS certificate
	root   *x509.Certificate // signs the certificates it issues
}

// startPebble starts pebble validating challenges on 127.0.0.1 at the given
// ports, resolving names with a loopback DNS server.
func startPebble(t *testing.T, httpPort, tlsPort int) *pebble {
	t.Helper()
	t.Setenv("PEBBLE_VA_NOSLEEP", "1")          // validate at once
	t.Setenv("PEBBLE_WFE_NONCEREJECT", "0")     // no random bad nonces
	t.Setenv("PEBBLE_AUTHZREUSE", "0")          // each order validates
	logger := log.New(io.Discard, "pebble ", 0) // t.Output() for debugging
	store := db.NewMemoryStore()
	pca := ca.New(logger, store, "", "ecdsa", 0, 1, map[string]ca.Profile{"default": {Description: "default"}})
	pva := va.New(logger, httpPort, tlsPort, false, startDNS(t), store)
	w := wfe.New(logger, store, pva, pca, []string{"pebble.letsencrypt.org"}, false, false, 0, 0)
	srv := httptest.NewTLSServer(w.Handler())
	t.Cleanup(srv.Close)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return &pebble{
		dirURL: srv.URL + wfe.DirectoryPath,
		caFile: certstest.WriteFile(t, t.TempDir(), "pebble-wfe.pem", caPEM),
		root:   pca.GetRootCert(0).Cert,
	}
}

// startDNS serves DNS over TCP on loopback: A queries get 127.0.0.1, others
// an empty answer. It returns the server's address.
func startDNS(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				for {
					var n [2]byte
					if _, err := io.ReadFull(c, n[:]); err != nil {
						return
					}
					msg := make([]byte, binary.BigEndian.Uint16(n[:]))
					if _, err := io.ReadFull(c, msg); err != nil {
						return
					}
					resp, err := answer(msg)
					if err != nil {
						return
					}
					out := binary.BigEndian.AppendUint16(nil, uint16(len(resp)))
					if _, err := c.Write(append(out, resp...)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

func answer(query []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
	_ = b.StartQuestions()
	_ = b.Question(q)
	_ = b.StartAnswers()
	if q.Type == dnsmessage.TypeA {
		rh := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 60}
		_ = b.AResource(rh, dnsmessage.AResource{A: [4]byte{127, 0, 0, 1}})
	}
	return b.Finish()
}

// serveTLS runs handshakes with cfg on l until the test ends, as the TLS
// listeners do (a TLS-ALPN-01 challenge is one such handshake).
func serveTLS(t *testing.T, l net.Listener, cfg *tls.Config) {
	t.Helper()
	tl := tls.NewListener(l, cfg)
	t.Cleanup(func() { _ = tl.Close() })
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			go func() {
				_ = c.SetDeadline(time.Now().Add(30 * time.Second))
				_ = c.(*tls.Conn).Handshake()
				_, _ = io.Copy(io.Discard, c)
				_ = c.Close()
			}()
		}
	}()
}

// TestACMEWithPebble gets a real certificate from an ACME server through
// the Source that the TLS listeners use: TLS-ALPN-01 answered on the TLS
// port, and HTTP-01 when TLS-ALPN-01 cannot be reached.
func TestACMEWithPebble(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the ACME round trip takes a few seconds")
	}
	tests := []struct {
		name     string
		tlsALPN  bool // the CA reaches the TLS port
		httpPort bool // an HTTP-01 server runs
	}{
		{"tls-alpn-01", true, false},
		{"http-01", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tlsLn, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			vaTLSPort := tlsLn.Addr().(*net.TCPAddr).Port
			if !tt.tlsALPN {
				vaTLSPort = mqtttest.FreePort(t) // nothing there: TLS-ALPN-01 fails
			}
			httpPort := mqtttest.FreePort(t)
			p := startPebble(t, httpPort, vaTLSPort)
			opts := certs.Options{ACME: certs.ACMEOptions{
				Domains: []string{acmeDomain}, Email: "ops@xmq.test", CacheDir: t.TempDir(),
				DirectoryURL: p.dirURL, CAFile: p.caFile,
			}}
			if tt.httpPort {
				opts.ACME.HTTPAddress = "127.0.0.1:" + strconv.Itoa(httpPort)
			}
			src, err := certs.New(opts)
			if err != nil {
				t.Fatalf("certs.New: %v", err)
			}
			t.Cleanup(func() { _ = src.Close() })
			if src.Kind() != certs.KindACME {
				t.Fatalf("Kind() = %q, want acme", src.Kind())
			}
			cfg, err := src.ServerConfig(certs.ClientAuth{})
			if err != nil {
				t.Fatal(err)
			}
			cfg = cfg.Clone()
			cfg.NextProtos = append([]string{"mqtt"}, cfg.NextProtos...) // as the tls listener does
			serveTLS(t, tlsLn, cfg)

			if !src.NotAfter().IsZero() {
				t.Errorf("NotAfter() = %v before any certificate was fetched, want zero", src.NotAfter())
			}
			// The first client's handshake makes the Source get the certificate.
			roots := x509.NewCertPool()
			roots.AddCert(p.root)
			d := &net.Dialer{Timeout: 30 * time.Second}
			conn, err := tls.DialWithDialer(d, "tcp", tlsLn.Addr().String(), &tls.Config{ServerName: acmeDomain, RootCAs: roots})
			if err != nil {
				t.Fatalf("TLS to the ACME-served listener: %v", err)
			}
			leaf := conn.ConnectionState().PeerCertificates[0]
			_ = conn.Close()
			if err := leaf.VerifyHostname(acmeDomain); err != nil {
				t.Errorf("certificate: %v", err)
			}
			if got := src.NotAfter(); !got.Equal(leaf.NotAfter) {
				t.Errorf("NotAfter() = %v, want the served certificate's %v", got, leaf.NotAfter)
			}

			// A name outside the whitelist gets no new certificate: the
			// first domain's is served (and fails verification for it).
			_, err = tls.DialWithDialer(d, "tcp", tlsLn.Addr().String(), &tls.Config{ServerName: "other.xmq.test", RootCAs: roots})
			var he x509.HostnameError
			if !errors.As(err, &he) {
				t.Errorf("TLS for a name not configured: %v, want a host name mismatch", err)
			}
		})
	}
}

func TestACMEOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		acme certs.ACMEOptions
		err  string
	}{
		{"no cache", certs.ACMEOptions{Domains: []string{"a.example"}}, "cache directory"},
		{"bare name", certs.ACMEOptions{Domains: []string{"localhost"}, CacheDir: "x"}, "fully qualified"},
		{"wildcard", certs.ACMEOptions{Domains: []string{"*.example.com"}, CacheDir: "x"}, "fully qualified"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := certs.New(certs.Options{ACME: tt.acme})
			if err == nil || !containsStr(err.Error(), tt.err) {
				t.Errorf("New = %v, want an error containing %q", err, tt.err)
			}
		})
	}
}
