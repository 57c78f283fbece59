package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap/zaptest"

	"github.com/xmq-io/xmq/certs/certstest"
	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

const testSecret = "test-secret-0123456789"

// secured gives the nodes a secret and one application user, app, who may
// read and write the mapped subjects (default permissions) on a client
// port.
func secured(o *Options) {
	o.Secret = testSecret
	o.Embedded.ClientListen = "127.0.0.1:0"
	o.Embedded.Users = []User{{Name: "app", Password: "app-pass"}}
}

// violation connects as user (nil: no credentials) to url, does op and
// reports the error NATS gave: at connect, or the asynchronous permission
// violation after a flush.
func violation(t *testing.T, url string, user *url.Userinfo, op func(*nats.Conn) error) error {
	t.Helper()
	errc := make(chan error, 1)
	opts := []nats.Option{nats.Timeout(2 * time.Second), nats.NoReconnect(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case errc <- err:
			default:
			}
		})}
	if user != nil {
		pass, _ := user.Password()
		opts = append(opts, nats.UserInfo(user.Username(), pass))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := op(nc); err != nil {
		return err
	}
	if err := nc.Flush(); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return err
	case <-time.After(300 * time.Millisecond):
		return nil
	}
}

// TestTrustEmbedded is the attacker's view of a node's ports: a NATS
// client without credentials is refused on the client and route ports;
// the application user reads and writes MQTT's subjects but none of the
// nodes' ($XMQ.>), JetStream's or the buckets', so 20,000 forged
// heartbeats change no node table. (A NATS server that knows the
// cluster's name but not its secret: cmd/xmq TestClusterAttack.)
func TestTrustEmbedded(t *testing.T) {
	ports := freePorts(t, 2)
	nodes := startNodesWith(t, ports, 2, secured)
	waitReady(t, nodes...)
	for _, nd := range nodes {
		nd.StartHeartbeats(Self{Version: "test"})
	}
	client := nodes[0].ClientURL()
	app := url.UserPassword("app", "app-pass")

	for _, addr := range []string{client, fmt.Sprintf("nats://127.0.0.1:%d", ports[0])} {
		err := violation(t, addr, nil, func(nc *nats.Conn) error { _, err := nc.SubscribeSync(">"); return err })
		if err == nil {
			t.Errorf("%s: a client without credentials subscribed to >", addr)
		}
	}
	if err := violation(t, client, url.UserPassword("app", "wrong"), func(*nats.Conn) error { return nil }); !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("wrong password: %v, want an authorization violation", err)
	}
	for _, subj := range []string{"$XMQ.>", "$XMQ.xmq.nodes", "$JS.API.>", "$KV.>", "$KV.xmq-registry.>", ">", "_INBOX.>"} {
		err := violation(t, client, app, func(nc *nats.Conn) error { _, err := nc.SubscribeSync(subj); return err })
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Errorf("app subscribing to %s: %v, want a permission violation", subj, err)
		}
	}
	for _, subj := range []string{"$XMQ.xmq.nodes", "$JS.API.INFO", "$KV.xmq-registry.x", "$XMQ.xmq.replay"} {
		err := violation(t, client, app, func(nc *nats.Conn) error { return nc.Publish(subj, []byte("{}")) })
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Errorf("app publishing to %s: %v, want a permission violation", subj, err)
		}
	}
	// 20,000 forged heartbeats: each refused by the server.
	_ = violation(t, client, app, func(nc *nats.Conn) error {
		for i := range 20_000 {
			_ = nc.Publish(nodesSubject("xmq"), beat(NodeStatus{Node: fmt.Sprintf("forged%d", i), Clients: 1e9}))
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond)
	for _, nd := range nodes {
		if tot := nd.Totals(); tot.Nodes > 2 || tot.Clients >= 1e9 {
			t.Errorf("%s: forged heartbeats reached the node table: %+v", nd.Node(), tot)
		}
	}

	// The application reads what a node forwards and writes into MQTT.
	nc, err := nats.Connect(client, nats.UserInfo("app", "app-pass"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	in, err := nc.SubscribeSync("mqtt.app.>")
	if err != nil || nc.Flush() != nil {
		t.Fatal(err)
	}
	var m *nats.Msg
	mqtttest.WaitWithin(t, 5*time.Second, "the application gets a forwarded message", func() bool {
		nodes[1].Forward(codec.Message{Topic: "app/x", Payload: []byte("to nats"), QoS: 1, From: "c1"}, nil)
		m, _ = in.NextMsg(50 * time.Millisecond)
		return m != nil
	})
	if m.Subject != "mqtt.app.x" || string(m.Data) != "to nats" {
		t.Errorf("application got %s %q", m.Subject, m.Data)
	}
	nodes[1].Interest("", "app/#", true)
	mqtttest.WaitWithin(t, 5*time.Second, "a node gets the application's message", func() bool {
		_ = nc.Publish("mqtt.app.y", []byte("from nats"))
		select {
		case d := <-nodes[1].local.ch:
			return d.topic == "app/y" && string(d.payload) == "from nats"
		case <-time.After(50 * time.Millisecond):
			return false
		}
	})
	time.Sleep(100 * time.Millisecond)
	for len(nodes[1].local.ch) > 0 {
		<-nodes[1].local.ch
	}

	// The nodes' own headers, forged: the same number twice (a node would
	// take the second for a copy of the first), an origin for the replay
	// marks, a shared group served. Both messages arrive; no mark is kept.
	for _, payload := range []string{"forged 1", "forged 2"} {
		h := nats.Header{}
		h.Set("Mqtt-Qos", "1")
		h.Set(hdrNode, "forged")
		h.Set(hdrSeq, "zz")
		h.Set(hdrID, "zz")
		h.Set(hdrGroup, "xmq-nothing")
		if err := nc.PublishMsg(&nats.Msg{Subject: "mqtt.app.z", Data: []byte(payload), Header: h}); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"forged 1", "forged 2"} {
		if d := nodes[1].local.next(t); string(d.payload) != want {
			t.Fatalf("got %q, want %q", d.payload, want)
		}
	}
	nodes[1].rep.mu.Lock()
	_, marked := nodes[1].rep.marks["forged"]
	nodes[1].rep.mu.Unlock()
	if marked {
		t.Error("an application's forged node header made a replay mark")
	}
}

// TestTrustTLS: nodes with certificates from one CA, and no client port
// for applications (the default), form a cluster over TLS routes; a
// server with the secret but no certificate of the CA gets no route.
func TestTrustTLS(t *testing.T) {
	ca := certstest.NewCA(t)
	caFile := ca.WriteCAFile()
	ports := freePorts(t, 2)
	nodes := startNodesWith(t, ports, 2, func(o *Options) {
		o.Secret = testSecret
		o.Embedded.ClientListen = "" // the default: no client port for applications
		cert, key := ca.WriteNodeFiles(o.Node)
		o.Embedded.TLS = EmbeddedTLS{CertFile: cert, KeyFile: key, CAFile: caFile}
	})
	waitReady(t, nodes...)
	// The route port speaks TLS only, and only to a certificate of the CA.
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	handshake := func(certs ...tls.Certificate) error {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, ca.ClientConfig(certs...))
		if err != nil {
			return err
		}
		defer conn.Close()
		// TLS 1.3 reports a refused client certificate at the first read.
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		return err
	}
	if err := handshake(); err == nil {
		t.Error("the route port accepted TLS without a client certificate")
	}
	if err := handshake(ca.ClientCert("n9")); err != nil {
		t.Errorf("the route port refused a certificate of the CA: %v", err)
	}
	nodes[1].Interest("", "tls/#", true)
	waitInterest(t, nodes[0], "tls/x", nodes[1])

	other := certstest.NewCA(t)
	cert, key := other.WriteNodeFiles("rogue")
	tc, err := embeddedTLSFrom(cert, key, other.WriteCAFile())
	if err != nil {
		t.Fatal(err)
	}
	rogue, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, ServerName: "rogue",
		Cluster: server.ClusterOpts{Name: DefaultName, Host: "127.0.0.1", Port: -1, Username: routeUser, Password: testSecret,
			TLSConfig: tc, TLSTimeout: 2},
		Routes: []*url.URL{{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", ports[0]), User: url.UserPassword(routeUser, testSecret)}}})
	if err != nil {
		t.Fatal(err)
	}
	rogue.SetLoggerV2(natsLogger{zaptest.NewLogger(t).Sugar().Named("rogue")}, false, false, false)
	rogue.Start()
	defer rogue.Shutdown()
	time.Sleep(time.Second)
	if n := rogue.NumRoutes(); n != 0 {
		t.Errorf("a server whose certificate another CA signed has %d routes", n)
	}
}

// embeddedTLSFrom is embeddedTLS's route configuration from files.
func embeddedTLSFrom(cert, key, ca string) (*tls.Config, error) {
	r, _, err := embeddedTLS(EmbeddedTLS{CertFile: cert, KeyFile: key, CAFile: ca})
	return r, err
}

// TestClaimOwnerAcrossNodes: a session belongs to its owner on every
// node. alice's client id, connected on n1 and then offline there, can
// neither be taken over nor ended (Clean Start) nor resumed by bob from
// n2; once the session is gone from n1 the id is free; alice herself, or
// anyone when owners are not checked, takes it over as before.
func TestClaimOwnerAcrossNodes(t *testing.T) {
	nodes := startNodesWith(t, freePorts(t, 2), 2, secured)
	waitReady(t, nodes...)
	n1, n2 := nodes[0], nodes[1]
	n1.local.mu.Lock()
	n1.local.owners["dev"] = "alice"
	n1.local.mu.Unlock()
	c1, rc := n1.Claim("dev", "alice", true, false)
	if c1 == 0 || rc != 0 {
		t.Fatalf("alice's claim on n1: %d, %v", c1, rc)
	}
	for _, clean := range []bool{true, false} {
		if c, rc := n2.Claim("dev", "bob", true, clean); c != 0 || rc != codec.NotAuthorized {
			t.Fatalf("bob's claim (clean %v) on n2 of alice's connected id: %d, %v; want refused, not authorized", clean, c, rc)
		}
	}
	n1.local.noTakeOver(t, 300*time.Millisecond)
	n1.Release("dev", c1, true) // her session stays on n1, offline
	mqtttest.WaitWithin(t, 5*time.Second, "alice's session offline on n1", func() bool {
		node, offline, _ := n2.Holder("dev")
		return node == "n1" && offline
	})
	if c, rc := n2.Claim("dev", "bob", true, true); c != 0 || rc != codec.NotAuthorized {
		t.Fatalf("bob's Clean Start on n2 of alice's offline session: %d, %v; want refused", c, rc)
	}
	if got := n2.Stats().ClaimsRefused; got != 3 {
		t.Errorf("claims refused %d, want 3", got)
	}
	if c, rc := n2.Claim("dev", "bob", false, true); c == 0 || rc != 0 {
		t.Fatalf("without the owner check bob's claim is refused: %d, %v", c, rc)
	}
	c3, rc := n1.Claim("dev", "alice", true, false)
	if c3 == 0 || rc != 0 {
		t.Fatalf("alice's claim back on n1: %d, %v", c3, rc)
	}
	n2.local.mu.Lock()
	n2.local.owners["dev"] = "alice"
	n2.local.mu.Unlock()
	n1.local.mu.Lock()
	delete(n1.local.owners, "dev") // her session ended on n1
	n1.local.mu.Unlock()
	n1.Release("dev", c3, true)
	mqtttest.WaitWithin(t, 5*time.Second, "the id offline on n1", func() bool {
		node, offline, _ := n2.Holder("dev")
		return node == "n1" && offline
	})
	if c, rc := n2.Claim("dev", "carol", true, true); c == 0 || rc != 0 {
		t.Fatalf("carol's claim of an id whose session ended: %d, %v", c, rc)
	}
}

// TestClaimOrderAfterFreeze: a claim that began while its node was frozen
// loses to the connection its client made on another node meanwhile,
// which is not taken over; once the node has caught up, claims order as
// before.
func TestClaimOrderAfterFreeze(t *testing.T) {
	nodes := startNodesWith(t, freePorts(t, 2), 2, secured)
	waitReady(t, nodes...)
	n1, n2 := nodes[0], nodes[1]
	live := n1.claim("dev", false)
	// n2 was frozen from a minute ago until now: its freezeLoop says so.
	now := time.Now()
	n2.reg.freeze.from.Store(now.Add(-time.Minute).UnixNano())
	n2.reg.freeze.until.Store(now.UnixNano())
	if c, rc := n2.Claim("dev", "", true, true); c != 0 || rc != codec.UseAnotherServer {
		t.Fatalf("a claim read after a freeze: %d, %v; want refused", c, rc)
	}
	n1.local.noTakeOver(t, 300*time.Millisecond)
	n2.reg.freeze.until.Store(now.Add(-time.Hour).UnixNano())
	if c, rc := n2.Claim("dev", "", true, true); c == 0 || rc != 0 {
		t.Fatalf("a claim after the node caught up: %d, %v", c, rc)
	}
	if to := n1.local.nextTakeOver(t); to.claim != live {
		t.Fatalf("takeover %+v, want n1's claim %d", to, live)
	}
}
