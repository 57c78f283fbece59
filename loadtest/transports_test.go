package loadtest_test

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/xmq-io/xmq/certs/certstest"
	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/listeners"
	"github.com/xmq-io/xmq/loadtest"
)

// startListener serves an in-process xmq on a fresh listener of transport.
func startListener(t *testing.T, transport string, ca *certstest.CA) *broker {
	t.Helper()
	o := listeners.Options{Transport: transport, Address: "127.0.0.1:0"}
	if transport != listeners.TransportTCP && transport != listeners.TransportWS {
		o.TLS = ca.ServerConfig()
	}
	l, err := listeners.Listen(o)
	if err != nil {
		t.Fatalf("listen %s: %v", transport, err)
	}
	scheme := map[string]string{"tcp": "mqtt", "tls": "mqtts", "ws": "ws", "wss": "wss", "quic": "quic"}[transport]
	return startBroker(t, l, scheme+"://"+l.Addr().String())
}

func TestModesOverWebSocket(t *testing.T) {
	testModes(t, startListener(t, listeners.TransportWS, nil))
}

// TestEveryTransport runs connections and end-to-end QoS 1 delivery over
// each transport, verifying the broker with the CA (-cafile), or not
// (-insecure).
func TestEveryTransport(t *testing.T) {
	ca := certstest.NewCA(t)
	caFile := ca.WriteCAFile()
	for _, tr := range []string{"tcp", "tls", "ws", "wss", "quic"} {
		t.Run(tr, func(t *testing.T) {
			b := startListener(t, tr, ca)
			rep := run(t, b, opts(loadtest.ModeConn, func(o *loadtest.Options) {
				o.Levels, o.Hold, o.CAFile = []int{25}, 100*time.Millisecond, caFile
			}), loadtest.Config{})
			if c := rep.Cases[0]; c.Established != 25 || c.Alive != 25 || rep.Transport != tr {
				t.Errorf("conn over %s (%s): established %d alive %d %v", rep.Transport, rep.URL, c.Established, c.Alive, c.Failures)
			}
			rep = run(t, b, opts(loadtest.ModePubSub, func(o *loadtest.Options) {
				o.Pubs, o.Subs, o.QoS, o.Rate, o.Insecure = 2, 2, 1, 50, true
				o.Duration = 400 * time.Millisecond
			}), loadtest.Config{})
			checkDelivery(t, rep.Cases[0], 2)
		})
	}
}

func TestSrcIPs(t *testing.T) {
	b := startTCPBroker(t)
	rep := run(t, b, opts(loadtest.ModeConn, func(o *loadtest.Options) {
		o.Levels, o.Hold, o.SrcIPs = []int{30}, 0, []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	}), loadtest.Config{})
	if c := rep.Cases[0]; c.Established != 30 || c.Failed != 0 {
		t.Errorf("conn from three source addresses: established %d failed %d %v", c.Established, c.Failed, c.Failures)
	}
}

// TestTLSResume: with -tls-resume the connections share a session cache,
// and a connection after the first resumes its TLS session (the broker's
// listener issues tickets).
func TestTLSResume(t *testing.T) {
	ca := certstest.NewCA(t)
	b := startListener(t, listeners.TransportTLS, ca)
	o := opts(loadtest.ModeConn, func(o *loadtest.Options) { o.Addr, o.CAFile, o.TLSResume = b.url, ca.WriteCAFile(), true })
	conf, err := o.TLSConfig()
	if err != nil || conf.ClientSessionCache == nil {
		t.Fatalf("TLSConfig with TLSResume: %+v, %v; want a session cache", conf, err)
	}
	for i, want := range []bool{false, true, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := listeners.Dial(ctx, b.url, conf)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		// A TLS 1.3 ticket comes after the handshake: the client takes it
		// with its first read (the CONNACK).
		connect := codec.Connect{ProtocolVersion: codec.V311, CleanStart: true, ClientID: []byte("resume")}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(connect.Append(nil, codec.V311)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(make([]byte, 4)); err != nil {
			t.Fatal(err)
		}
		if got := c.(*tls.Conn).ConnectionState().DidResume; got != want {
			t.Errorf("connection %d resumed: %v, want %v", i, got, want)
		}
		_ = c.Close()
	}
}
