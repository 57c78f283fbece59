package listeners

import (
	"context"
	"crypto/tls"
	"io"
	"maps"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/xmq-io/xmq/certs/certstest"
)

// waitFailure waits until l has counted one more failure for reason than
// before, and none for another reason.
func waitFailure(t *testing.T, l Listener, before map[string]int64, reason string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		now := l.HandshakeFailures()
		want := maps.Clone(before)
		want[reason]++
		if maps.Equal(now, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("failures %v, want %s counted once more than %v", now, reason, before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHandshakeFailureReasons: each way a TLS handshake fails is counted
// under its reason, which says what to look at.
func TestHandshakeFailureReasons(t *testing.T) {
	ca := certstest.NewCA(t)
	modern := ca.ServerConfig()
	modern.MinVersion = tls.VersionTLS13
	tls13 := listen(t, Options{Transport: TransportTLS, TLS: modern, HandshakeTimeout: 300 * time.Millisecond})

	// TLS 1.2 with ciphers the client below does not offer.
	old := ca.ServerConfig()
	old.MaxVersion = tls.VersionTLS12
	old.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}
	tls12 := listen(t, Options{Transport: TransportTLS, TLS: old})

	mutual := ca.ServerConfig()
	mutual.ClientAuth = tls.RequireAndVerifyClientCert
	mutual.ClientCAs = ca.Pool()
	certs := listen(t, Options{Transport: TransportTLS, TLS: mutual, IdentityAsUsername: IdentitySAN})

	// raw sends bytes (nil: none) and, with wait, stays until the listener
	// closes the connection; without, it leaves at once.
	raw := func(l Listener, send []byte, wait bool) func(t *testing.T) {
		return func(t *testing.T) {
			c, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if send != nil {
				_, _ = c.Write(send)
			}
			if wait {
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				_, _ = io.Copy(io.Discard, c)
			}
		}
	}
	handshake := func(l Listener, conf *tls.Config) func(t *testing.T) {
		return func(t *testing.T) {
			c, err := tls.Dial("tcp", l.Addr().String(), conf)
			if err == nil {
				// TLS 1.3: the client finishes before the server checks its
				// certificate; the refusal comes with the first read.
				_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
				_, _ = c.Read(make([]byte, 1))
				_ = c.Close()
			}
		}
	}
	tls12Client := ca.ClientConfig()
	tls12Client.MaxVersion = tls.VersionTLS12
	otherCiphers := ca.ClientConfig()
	otherCiphers.MaxVersion = tls.VersionTLS12
	otherCiphers.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305}
	untrusting := &tls.Config{ServerName: "localhost", RootCAs: certstest.NewCA(t).Pool()}

	for _, tc := range []struct {
		name   string
		l      Listener
		act    func(t *testing.T)
		reason string
	}{
		{"plain MQTT on a TLS port", tls13, raw(tls13, []byte("\x10\x0c\x00\x04MQTT\x04\x02\x00\x3c\x00\x00"), true), FailNotTLS},
		{"connected and left", tls13, raw(tls13, nil, false), FailClosed},
		{"silent past the handshake timeout", tls13, raw(tls13, nil, true), FailTimeout},
		{"TLS 1.2 client, TLS 1.3 server", tls13, handshake(tls13, tls12Client), FailTLSVersion},
		{"no common cipher suite", tls12, handshake(tls12, otherCiphers), FailTLSCipher},
		{"client does not trust the server", tls13, handshake(tls13, untrusting), FailRejectedByClient},
		{"no client certificate", certs, handshake(certs, ca.ClientConfig()), FailClientCertificate},
		{"client certificate of another CA", certs, handshake(certs, ca.ClientConfig(certstest.NewCA(t).ClientCert("x", "x.example"))), FailClientCertificate},
		{"client certificate without identity", certs, handshake(certs, ca.ClientConfig(ca.ClientCert("only-cn"))), FailClientCertificate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.l.HandshakeFailures()
			tc.act(t)
			waitFailure(t, tc.l, before, tc.reason)
		})
	}
	// A good client is no failure.
	before := certs.HandshakeFailures()
	client, server := mustConnect(t, certs, dialURL("mqtts", certs), ca.ClientConfig(ca.ClientCert("cn", "ok.example")))
	roundTrip(t, client, server, []byte{0xc0, 0x00})
	if after := certs.HandshakeFailures(); !maps.Equal(before, after) {
		t.Errorf("a good handshake changed the failures from %v to %v", before, after)
	}
}

// TestHandshakeFailureSeries: every listener reports each reason its
// transport can meet from the start, at zero.
func TestHandshakeFailureSeries(t *testing.T) {
	ca := certstest.NewCA(t)
	for _, tc := range []struct {
		o    Options
		want []string
	}{
		{Options{Transport: TransportTCP}, []string{FailMaxConnections}},
		{Options{Transport: TransportTCP, ProxyProtocol: true, TrustedProxies: []string{"127.0.0.1"}},
			[]string{FailMaxConnections, FailTimeout, FailClosed, FailProxyHeader}},
		{Options{Transport: TransportTLS, TLS: ca.ServerConfig()}, []string{FailMaxConnections, FailTimeout, FailClosed,
			FailNotTLS, FailTLSVersion, FailTLSCipher, FailClientCertificate, FailRejectedByClient, FailTLSOther}},
		{Options{Transport: TransportWS}, []string{FailMaxConnections, FailWSPath, FailWSRequest, FailWSSubprotocol, FailWSOrigin}},
		{Options{Transport: TransportWSS, TLS: ca.ServerConfig()}, []string{FailMaxConnections, FailTimeout, FailClosed,
			FailNotTLS, FailTLSVersion, FailTLSCipher, FailClientCertificate, FailRejectedByClient, FailTLSOther,
			FailWSPath, FailWSRequest, FailWSSubprotocol, FailWSOrigin}},
		{Options{Transport: TransportQUIC, TLS: ca.ServerConfig()}, []string{FailMaxConnections, FailTimeout, FailClosed, FailClientCertificate}},
	} {
		l := listen(t, tc.o)
		got := l.HandshakeFailures()
		names := slices.Sorted(maps.Keys(got))
		want := slices.Sorted(slices.Values(tc.want))
		if !slices.Equal(names, want) {
			t.Errorf("%s (proxy %v): reasons %v, want %v", tc.o.Transport, tc.o.ProxyProtocol, names, want)
		}
		for r, n := range got {
			if n != 0 {
				t.Errorf("%s: %s = %d at start", tc.o.Transport, r, n)
			}
		}
	}
}

// TestQUICHandshakeFailures: a QUIC connection that opens no MQTT stream
// in time is counted, and so is one over the limit.
func TestQUICHandshakeFailures(t *testing.T) {
	ca := certstest.NewCA(t)
	l := listen(t, Options{Transport: TransportQUIC, TLS: ca.ServerConfig(), HandshakeTimeout: 300 * time.Millisecond, MaxConnections: 1})
	conf := ca.ClientConfig()
	conf.NextProtos = []string{ALPNMQTT}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	before := l.HandshakeFailures()
	qc, err := quic.DialAddr(ctx, l.Addr().String(), conf, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = qc.CloseWithError(0, "") }()
	waitFailure(t, l, before, FailTimeout) // no stream opened
	before = l.HandshakeFailures()
	client, server := mustConnect(t, l, "quic://"+l.Addr().String(), ca.ClientConfig())
	defer client.Close()
	defer server.Close()
	qc2, err := quic.DialAddr(ctx, l.Addr().String(), conf, nil)
	if err == nil {
		defer func() { _ = qc2.CloseWithError(0, "") }()
	}
	waitFailure(t, l, before, FailMaxConnections)
}
