package e2e_test

// The transport matrix: one scenario table run over every transport xmq
// serves (tcp, tls, ws, wss, quic, and tls with a client certificate),
// with core.Server behind the real listeners, listeners.Dial and the codec
// as the client; then third-party clients on the real transports (paho over
// TLS and WebSocket, mosquitto_pub/mosquitto_sub over mqtts).

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/xmq-io/xmq/certs"
	"github.com/xmq-io/xmq/certs/certstest"
	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/mqtttest"
	"github.com/xmq-io/xmq/listeners"
)

// endpoint is one listener of a transport broker and how a client reaches it.
type endpoint struct {
	name string      // tcp, tls, ws, wss, quic, tls-client-cert
	url  string      // for listeners.Dial
	tls  *tls.Config // the client's TLS configuration; nil for tcp and ws
	user string      // the username the broker must see: the certificate's CN, or ""
}

// transportBroker is a broker serving every transport on loopback.
type transportBroker struct {
	endpoints []endpoint
	caFile    string // the CA of the server certificate, for external clients
	users     *userLog
}

// userLog records the username each client id connected with.
type userLog struct {
	mu    sync.Mutex
	users map[string]string
}

// Authenticate implements core.Authenticator: it lets everyone in and notes the username.
func (u *userLog) Authenticate(clientID, username string, _ []byte, _ net.Addr, _, _ string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.users[clientID] = username
	return nil
}

func (u *userLog) user(clientID string) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.users[clientID]
}

// maxPacket is the broker's packet size limit in the matrix.
const maxPacket = 2048

// startTransportBroker serves a broker on every transport, the TLS ones
// with a server certificate from the development CA code (certs.EnsureDev
// in a temporary directory), and one TLS listener requiring a client
// certificate whose CN becomes the username.
func startTransportBroker(t testing.TB) *transportBroker {
	t.Helper()
	dev, err := certs.EnsureDev(t.TempDir(), false)
	if err != nil {
		t.Fatalf("EnsureDev: %v", err)
	}
	src, err := certs.New(certs.Options{DevDir: dev.Dir})
	if err != nil {
		t.Fatalf("certs.New: %v", err)
	}
	t.Cleanup(func() { _ = src.Close() })
	plain, err := src.ServerConfig(certs.ClientAuth{Verify: certs.VerifyNone})
	if err != nil {
		t.Fatal(err)
	}
	mutual, err := src.ServerConfig(certs.ClientAuth{Verify: certs.VerifyRequired})
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := dev.CA.IssueClient("device-42")
	if err != nil {
		t.Fatal(err)
	}
	clientCert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}

	users := &userLog{users: map[string]string{}}
	srv, err := core.New(core.Options{SysInterval: -1, MaxPacketSize: maxPacket}, core.Config{Authenticator: users})
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	specs := []struct {
		name, scheme string
		opts         listeners.Options
		client       *tls.Config
		user         string
	}{
		{"tcp", "mqtt", listeners.Options{Transport: listeners.TransportTCP}, nil, ""},
		{"tls", "mqtts", listeners.Options{Transport: listeners.TransportTLS, TLS: plain}, &tls.Config{RootCAs: dev.CA.Pool()}, ""},
		{"ws", "ws", listeners.Options{Transport: listeners.TransportWS}, nil, ""},
		{"wss", "wss", listeners.Options{Transport: listeners.TransportWSS, TLS: plain}, &tls.Config{RootCAs: dev.CA.Pool()}, ""},
		{"quic", "quic", listeners.Options{Transport: listeners.TransportQUIC, TLS: plain}, &tls.Config{RootCAs: dev.CA.Pool()}, ""},
		{"tls-client-cert", "mqtts", listeners.Options{Transport: listeners.TransportTLS, TLS: mutual, IdentityAsUsername: listeners.IdentityCN},
			&tls.Config{RootCAs: dev.CA.Pool(), Certificates: []tls.Certificate{clientCert}}, "device-42"},
	}
	b := &transportBroker{caFile: dev.CAFile, users: users}
	var served sync.WaitGroup
	for _, s := range specs {
		s.opts.Name, s.opts.Address = s.name, "127.0.0.1:0"
		l, err := listeners.Listen(s.opts)
		if err != nil {
			t.Fatalf("listen %s: %v", s.name, err)
		}
		served.Go(func() {
			if err := srv.Serve(l, s.name); !errors.Is(err, core.ErrServerClosed) {
				t.Errorf("Serve %s: %v", s.name, err)
			}
		})
		b.endpoints = append(b.endpoints, endpoint{
			name: s.name, url: s.scheme + "://" + l.Addr().String() + "/mqtt", tls: s.client, user: s.user,
		})
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		served.Wait()
	})
	return b
}

// dial opens a codec client over the endpoint's transport.
func (e endpoint) dial(t *testing.T) *mqtttest.Conn {
	t.Helper()
	return mqtttest.DialConn(t, e.url, e.tls, codec.V5)
}

// transportScenarios are the matrix's rows; each runs over every endpoint.
var transportScenarios = []struct {
	name string
	run  func(t *testing.T, b *transportBroker, e endpoint)
}{
	{"connect", func(t *testing.T, b *transportBroker, e endpoint) {
		c := e.dial(t)
		connect(c, "connect-"+e.name, true, func(p *codec.Connect) {
			p.UsernameFlag, p.Username = true, []byte("claimed")
		})
		want := "claimed"
		if e.user != "" {
			want = e.user // the certificate's identity wins over CONNECT
		}
		if got := b.users.user("connect-" + e.name); got != want {
			t.Errorf("broker saw username %q, want %q", got, want)
		}
		c.Send(&codec.Pingreq{})
		mqtttest.Expect[*codec.Pingresp](c)
		c.Send(&codec.Disconnect{})
		c.ExpectClosed()
	}},
	{"subscribe and publish QoS 0, 1, 2", func(t *testing.T, b *transportBroker, e endpoint) {
		topic := "m/" + e.name
		sub := e.dial(t)
		connect(sub, "sub-"+e.name, true)
		sub.Subscribe(2, topic+"/#")
		pub := e.dial(t)
		connect(pub, "pub-"+e.name, true)
		for qos := byte(0); qos <= 2; qos++ {
			payload := bytes.Repeat([]byte{'a' + qos}, 100)
			pub.Send(&codec.Publish{QoS: qos, PacketID: uint16(qos), Topic: []byte(topic + "/q"), Payload: payload})
			switch qos {
			case 1:
				pub.ExpectAck(codec.PUBACK, 1)
			case 2:
				pub.ExpectAck(codec.PUBREC, 2)
				pub.Send(&codec.Ack{Kind: codec.PUBREL, PacketID: 2})
				pub.ExpectAck(codec.PUBCOMP, 2)
			}
			got := mqtttest.Expect[*codec.Publish](sub)
			if got.QoS != qos || !bytes.Equal(got.Payload, payload) || string(got.Topic) != topic+"/q" {
				t.Fatalf("subscriber got QoS %d %q on %q, want QoS %d %q", got.QoS, got.Payload, got.Topic, qos, payload)
			}
			switch qos {
			case 1:
				sub.Send(&codec.Ack{Kind: codec.PUBACK, PacketID: got.PacketID})
			case 2:
				sub.Send(&codec.Ack{Kind: codec.PUBREC, PacketID: got.PacketID})
				sub.ExpectAck(codec.PUBREL, got.PacketID)
				sub.Send(&codec.Ack{Kind: codec.PUBCOMP, PacketID: got.PacketID})
			}
		}
	}},
	{"retained", func(t *testing.T, b *transportBroker, e endpoint) {
		topic := "r/" + e.name
		pub := e.dial(t)
		connect(pub, "rpub-"+e.name, true)
		pub.Send(&codec.Publish{QoS: 1, PacketID: 7, Retain: true, Topic: []byte(topic), Payload: []byte("kept")})
		pub.ExpectAck(codec.PUBACK, 7)
		sub := e.dial(t)
		connect(sub, "rsub-"+e.name, true)
		sub.Subscribe(0, topic)
		if got := mqtttest.Expect[*codec.Publish](sub); !got.Retain || string(got.Payload) != "kept" {
			t.Fatalf("got retain=%v %q, want the retained message", got.Retain, got.Payload)
		}
	}},
	{"will on abrupt close", func(t *testing.T, b *transportBroker, e endpoint) {
		topic := "w/" + e.name
		watcher := e.dial(t)
		connect(watcher, "watch-"+e.name, true)
		watcher.Subscribe(0, topic)
		dying := e.dial(t)
		connect(dying, "dying-"+e.name, true, func(p *codec.Connect) {
			p.WillFlag, p.WillTopic, p.WillPayload = true, []byte(topic), []byte("gone")
		})
		_ = dying.NetConn.Close() // no DISCONNECT
		if got := mqtttest.Expect[*codec.Publish](watcher); string(got.Payload) != "gone" {
			t.Fatalf("got %q, want the will", got.Payload)
		}
	}},
	{"keepalive expiry", func(t *testing.T, b *transportBroker, e endpoint) {
		c := e.dial(t)
		connect(c, "idle-"+e.name, true, func(p *codec.Connect) { p.KeepAlive = 1 })
		start := time.Now()
		// Silent for 1.5 × keepalive: the broker says why (MQTT 5) and closes.
		if d := mqtttest.Expect[*codec.Disconnect](c); d.ReasonCode != codec.KeepAliveTimeout {
			t.Fatalf("DISCONNECT %v, want Keep Alive timeout", d.ReasonCode)
		}
		c.ExpectClosed()
		if took := time.Since(start); took < time.Second {
			t.Errorf("closed after %v, before the keepalive ran out", took)
		}
	}},
	{"oversize packet refused", func(t *testing.T, b *transportBroker, e endpoint) {
		c := e.dial(t)
		connect(c, "big-"+e.name, true)
		c.Send(&codec.Publish{Topic: []byte("big"), Payload: make([]byte, maxPacket+1)})
		if d := mqtttest.Expect[*codec.Disconnect](c); d.ReasonCode != codec.PacketTooLarge {
			t.Fatalf("DISCONNECT %v, want Packet too large", d.ReasonCode)
		}
		c.ExpectClosed()
	}},
}

// TestTransportMatrix runs every scenario over every transport.
func TestTransportMatrix(t *testing.T) {
	b := startTransportBroker(t)
	for _, e := range b.endpoints {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			for _, sc := range transportScenarios {
				t.Run(sc.name, func(t *testing.T) {
					t.Parallel()
					sc.run(t, b, e)
				})
			}
		})
	}
}

// TestPahoOverTLSAndWebSocket connects eclipse/paho.mqtt.golang to the
// broker over mqtts, ws and wss: a subscription and a QoS 1 message each.
func TestPahoOverTLSAndWebSocket(t *testing.T) {
	b := startTransportBroker(t)
	for _, e := range b.endpoints {
		var broker string
		switch e.name {
		case "tls":
			broker = "ssl://" + strings.TrimSuffix(strings.TrimPrefix(e.url, "mqtts://"), "/mqtt")
		case "ws", "wss":
			broker = e.url
		default:
			continue
		}
		t.Run(e.name, func(t *testing.T) {
			got := make(chan string, 1)
			opts := mqtt.NewClientOptions().AddBroker(broker).SetClientID("paho-" + e.name).
				SetConnectTimeout(timeout).SetAutoReconnect(false).SetTLSConfig(e.tls)
			c := mqtt.NewClient(opts)
			wait(t, "connect", c.Connect())
			t.Cleanup(func() { c.Disconnect(100) })
			wait(t, "subscribe", c.Subscribe("paho/"+e.name, 1, func(_ mqtt.Client, m mqtt.Message) {
				got <- string(m.Payload())
			}))
			wait(t, "publish", c.Publish("paho/"+e.name, 1, false, "over "+e.name))
			if m := receive(t, got); m != "over "+e.name {
				t.Errorf("received %q", m)
			}
		})
	}
}

// TestMosquittoOverMQTTS runs mosquitto_sub and mosquitto_pub against the
// TLS listener, trusting the development CA file, as the README shows.
func TestMosquittoOverMQTTS(t *testing.T) {
	sub, err1 := exec.LookPath("mosquitto_sub")
	pub, err2 := exec.LookPath("mosquitto_pub")
	if err1 != nil || err2 != nil {
		t.Skip("mosquitto_sub/mosquitto_pub not installed (Debian mosquitto-clients; make deps installs them)")
	}
	b := startTransportBroker(t)
	var port string
	for _, e := range b.endpoints {
		if e.name == "tls" {
			_, port, _ = net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(e.url, "mqtts://"), "/mqtt"))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// -C 1: exit after one message; -W: give up in time.
	subCmd := exec.CommandContext(ctx, sub, "--cafile", b.caFile, "-h", "localhost", "-p", port,
		"-t", "mosq/test", "-q", "1", "-C", "1", "-W", "8", "-V", "mqttv5", "-d")
	var subOut, subErr bytes.Buffer
	subCmd.Stdout, subCmd.Stderr = &subOut, &subErr
	if err := subCmd.Start(); err != nil {
		t.Fatalf("mosquitto_sub: %v", err)
	}
	// Publish until the subscriber has its subscription and takes one.
	done := make(chan error, 1)
	go func() { done <- subCmd.Wait() }()
	for i := 0; ; i++ {
		out, err := exec.CommandContext(ctx, pub, "--cafile", b.caFile, "-h", "localhost", "-p", port,
			"-t", "mosq/test", "-q", "1", "-m", "hello over mqtts").CombinedOutput()
		if err != nil {
			t.Fatalf("mosquitto_pub: %v\n%s", err, out)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("mosquitto_sub: %v\n%s", err, subErr.String())
			}
			if !strings.Contains(subOut.String(), "hello over mqtts") {
				t.Fatalf("mosquitto_sub printed %q", subOut.String())
			}
			return
		case <-time.After(200 * time.Millisecond):
		}
		if i > 30 {
			t.Fatalf("mosquitto_sub got nothing\n%s", subErr.String())
		}
	}
}

// TestMosquittoRefusesUnknownCA checks the other side: a client that does
// not trust the development CA cannot connect.
func TestMosquittoRefusesUnknownCA(t *testing.T) {
	pub, err := exec.LookPath("mosquitto_pub")
	if err != nil {
		t.Skip("mosquitto_pub not installed (Debian mosquitto-clients)")
	}
	b := startTransportBroker(t)
	other := certstest.NewCA(t).WriteCAFile()
	for _, e := range b.endpoints {
		if e.name != "tls" {
			continue
		}
		_, port, _ := net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(e.url, "mqtts://"), "/mqtt"))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, pub, "--cafile", other, "-h", "localhost", "-p", port,
			"-t", "x", "-m", "y").CombinedOutput()
		if err == nil {
			t.Fatalf("mosquitto_pub with a foreign CA succeeded:\n%s", out)
		}
	}
}
