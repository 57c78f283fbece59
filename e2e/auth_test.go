package e2e_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/xmq-io/xmq/auth"
	"github.com/xmq-io/xmq/certs/certstest"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/mqtttest"
	"github.com/xmq-io/xmq/listeners"
)

// The password file and ACL of the auth tests. alice and bob have
// passwords (bcrypt and SCRAM credentials, as xmq passwd writes them);
// sensor-7 is a certificate identity.
var authUsers = map[string]string{"alice": "wonderland", "bob": "builder"}

const authACL = `user alice
topic readwrite alice/#
topic read public/#

user bob
topic read alice/#
topic readwrite bob/#

user sensor-7
topic write devices/sensor-7/#
`

// authFiles writes the password and ACL files.
func authFiles(t *testing.T) (pwFile, aclFile string) {
	t.Helper()
	dir := t.TempDir()
	pwFile, aclFile = filepath.Join(dir, "passwd"), filepath.Join(dir, "acl")
	for user, pass := range authUsers {
		if err := auth.SetPassword(pwFile, user, []byte(pass), false, auth.PasswordOptions{Cost: 4, SCRAM: auth.PasswordSCRAMs}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(aclFile, []byte(authACL), 0o600); err != nil {
		t.Fatal(err)
	}
	return pwFile, aclFile
}

// startAuthBroker serves a broker checking opts on a loopback TCP listener.
// Anonymous access is refused unless opts says otherwise.
func startAuthBroker(t *testing.T, opts auth.Options) (string, *auth.Auth) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := serveAuth(t, opts, l, "tcp")
	return l.Addr().String(), a
}

func serveAuth(t *testing.T, opts auth.Options, l net.Listener, name string) *auth.Auth {
	t.Helper()
	if opts.AllowAnonymous == "" {
		opts.AllowAnonymous = auth.AnonymousDeny
	}
	a, err := auth.New(opts)
	if err != nil {
		t.Fatalf("auth.New: %v", err)
	}
	t.Cleanup(func() { _ = a.Close() })
	srv, err := core.New(core.Options{SysInterval: -1}, core.Config{Authenticator: a, Authorizer: a})
	if err != nil {
		t.Fatal(err)
	}
	mqtttest.Serve(t, srv, l, name, core.ErrServerClosed)
	return a
}

// tryV5 connects a paho.golang client over conn; unlike connectV5 a
// refusal is returned, not fatal.
func tryV5(t *testing.T, conn net.Conn, cp *paho.Connect, auther paho.Auther) (*v5Client, *paho.Connack, error) {
	t.Helper()
	c := &v5Client{conn: conn, msgs: make(chan *paho.Publish, 100)}
	c.Client = paho.NewClient(paho.ClientConfig{
		ClientID: cp.ClientID,
		Conn:     pahoConn(conn),
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(r paho.PublishReceived) (bool, error) {
			c.msgs <- r.Packet
			return true, nil
		}},
		AuthHandler:        auther,
		OnClientError:      func(error) {},
		OnServerDisconnect: func(*paho.Disconnect) {},
		PacketTimeout:      timeout,
	})
	if cp.KeepAlive == 0 {
		cp.KeepAlive = 30
	}
	ack, err := c.Connect(ctx(t), cp)
	t.Cleanup(func() {
		_ = c.Disconnect(&paho.Disconnect{})
		_ = conn.Close()
		if err == nil {
			select {
			case <-c.Done():
			case <-time.After(timeout):
				t.Errorf("paho client %q did not stop", cp.ClientID)
			}
		}
	})
	return c, ack, err
}

func dialTCP(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// loginV5 connects id with a user name and password.
func loginV5(t *testing.T, addr, id, user, pass string) (*v5Client, *paho.Connack, error) {
	t.Helper()
	cp := &paho.Connect{ClientID: id, CleanStart: true}
	if user != "" {
		cp.Username, cp.UsernameFlag, cp.Password, cp.PasswordFlag = user, true, []byte(pass), true
	}
	return tryV5(t, dialTCP(t, addr), cp, nil)
}

func mustLoginV5(t *testing.T, addr, id, user, pass string) *v5Client {
	t.Helper()
	c, ack, err := loginV5(t, addr, id, user, pass)
	if err != nil {
		t.Fatalf("%s: connect: %v (%+v)", id, err, ack)
	}
	return c
}

// pubAck publishes at QoS 1 and returns PUBACK's reason code.
func (c *v5Client) pubAck(t *testing.T, topic string) byte {
	t.Helper()
	r, err := c.Publish(ctx(t), &paho.Publish{Topic: topic, QoS: 1, Payload: []byte(topic)})
	if r == nil {
		t.Fatalf("publish %s: %v", topic, err)
	}
	return r.ReasonCode
}

// subAck subscribes and returns SUBACK's reason codes.
func (c *v5Client) subAck(t *testing.T, filters ...string) []byte {
	t.Helper()
	s := &paho.Subscribe{}
	for _, f := range filters {
		s.Subscriptions = append(s.Subscriptions, paho.SubscribeOptions{Topic: f, QoS: 1})
	}
	ack, err := c.Subscribe(ctx(t), s)
	if ack == nil {
		t.Fatalf("subscribe %v: %v", filters, err)
	}
	return ack.Reasons
}

// MQTT 5 with paho.golang: refused logins carry their reason code; the ACL
// answers PUBACK and SUBACK with Not Authorized (0x87) per packet and per
// filter, and a refused message reaches no one.
func TestAuthPaho5(t *testing.T) {
	pw, acl := authFiles(t)
	addr, a := startAuthBroker(t, auth.Options{PasswordFile: pw, ACLFile: acl})
	for _, tt := range []struct {
		name, user, pass string
		want             byte
	}{
		{"wrong password", "alice", "Wonderland", 0x86},
		{"unknown user", "mallory", "wonderland", 0x86},
		{"anonymous", "", "", 0x87},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, ack, err := loginV5(t, addr, "refused", tt.user, tt.pass)
			if err == nil || ack == nil || ack.ReasonCode != tt.want {
				t.Fatalf("CONNACK %+v, %v; want reason %#x", ack, err, tt.want)
			}
		})
	}

	alice := mustLoginV5(t, addr, "alice-1", "alice", "wonderland")
	bob := mustLoginV5(t, addr, "bob-1", "bob", "builder")
	// As in Mosquitto 2, # is granted (bob may read some of it) and each
	// message is checked on delivery; secret/# reaches nothing bob reads.
	if got := bob.subAck(t, "alice/#", "secret/#", "$share/g/bob/+"); !bytes.Equal(got, []byte{1, 0x87, 1}) {
		t.Errorf("SUBACK %#x, want [1 0x87 1]", got)
	}
	if got := alice.subAck(t, "#"); !bytes.Equal(got, []byte{1}) {
		t.Errorf("alice SUBACK # %#x, want [1]", got)
	}
	if rc := alice.pubAck(t, "alice/hello"); rc >= 0x80 {
		t.Errorf("allowed publish: PUBACK %#x", rc)
	}
	if m := receive(t, bob.msgs); m.Topic != "alice/hello" {
		t.Errorf("bob got %s", m.Topic)
	}
	if m := receive(t, alice.msgs); m.Topic != "alice/hello" {
		t.Errorf("alice got %s", m.Topic)
	}
	if rc := alice.pubAck(t, "bob/inbox"); rc != 0x87 {
		t.Errorf("denied publish: PUBACK %#x, want 0x87", rc)
	}
	if _, err := alice.Publish(ctx(t), &paho.Publish{Topic: "bob/qos0", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	nothing(t, bob.msgs)
	// bob/1 reaches bob's shared subscription, not alice's #: alice may not read bob/.
	if rc := bob.pubAck(t, "bob/1"); rc >= 0x80 {
		t.Errorf("bob's publish: PUBACK %#x", rc)
	}
	if m := receive(t, bob.msgs); m.Topic != "bob/1" {
		t.Errorf("bob got %s", m.Topic)
	}
	nothing(t, alice.msgs)
	if st := a.Stats(); st.PublishDenied != 2 || st.SubscribeDenied != 1 || st.DeliveryDenied != 1 || st.LoginFailures != 2 || st.AnonymousRefused != 1 {
		t.Errorf("auth stats %+v", st)
	}
}

// tryV3 connects a paho.mqtt.golang (3.1.1) client; a refusal is returned.
func tryV3(t *testing.T, addr, id, user, pass string) (*v3Client, error) {
	t.Helper()
	c := &v3Client{conn: make(chan net.Conn, 1), msgs: make(chan mqtt.Message, 100)}
	o := mqtt.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(id).SetProtocolVersion(4).
		SetCleanSession(true).SetAutoReconnect(false).SetConnectRetry(false).SetKeepAlive(30 * time.Second).
		SetConnectTimeout(timeout).SetWriteTimeout(timeout).SetOrderMatters(true).
		SetUsername(user).SetPassword(pass).
		SetDefaultPublishHandler(func(_ mqtt.Client, m mqtt.Message) { c.msgs <- m })
	c.Client = mqtt.NewClient(o)
	tok := c.Connect()
	if !tok.WaitTimeout(timeout) {
		t.Fatalf("connect %q: no answer", id)
	}
	if err := tok.Error(); err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return c, nil
}

// MQTT 3.1.1 with paho.mqtt.golang: CONNACK return codes 4 and 5, SUBACK
// 0x80 for a refused filter, and a refused PUBLISH acknowledged and
// dropped as 3.1.1 requires.
func TestAuthPaho311(t *testing.T) {
	pw, acl := authFiles(t)
	addr, _ := startAuthBroker(t, auth.Options{PasswordFile: pw, ACLFile: acl})
	for _, tt := range []struct {
		name, user, pass string
		want             error
	}{
		{"wrong password", "alice", "Wonderland", packets.ErrorRefusedBadUsernameOrPassword},
		{"unknown user", "mallory", "x", packets.ErrorRefusedBadUsernameOrPassword},
		{"anonymous", "", "", packets.ErrorRefusedNotAuthorised},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tryV3(t, addr, "refused", tt.user, tt.pass); !errors.Is(err, tt.want) {
				t.Fatalf("connect: %v, want %v", err, tt.want)
			}
		})
	}
	alice, err := tryV3(t, addr, "alice-3", "alice", "wonderland")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := tryV3(t, addr, "bob-3", "bob", "builder")
	if err != nil {
		t.Fatal(err)
	}
	tok := bob.SubscribeMultiple(map[string]byte{"alice/#": 1, "secret/#": 1, "bob/#": 1}, nil)
	wait(t, "subscribe", tok)
	want := map[string]byte{"alice/#": 1, "secret/#": 0x80, "bob/#": 1}
	if got := tok.(*mqtt.SubscribeToken).Result(); len(got) != 3 || got["alice/#"] != 1 || got["secret/#"] != 0x80 || got["bob/#"] != 1 {
		t.Errorf("SUBACK %v, want %v", got, want)
	}
	wait(t, "publish denied", alice.Publish("bob/inbox", 1, false, "no")) // acknowledged, dropped
	wait(t, "publish allowed", alice.Publish("alice/hello", 1, false, "yes"))
	m := receive(t, bob.msgs)
	if m.Topic() != "alice/hello" {
		t.Errorf("bob got %s, want only alice/hello", m.Topic())
	}
	nothing(t, bob.msgs)
	if !alice.IsConnected() {
		t.Error("a refused publish disconnected the 3.1.1 client")
	}
}

// Changing the ACL and password files takes effect without dropping
// anyone: the same connections see the new rules, old cached decisions
// are gone, the new password works for the next login.
func TestAuthReloadWithoutDisconnect(t *testing.T) {
	pw, acl := authFiles(t)
	addr, a := startAuthBroker(t, auth.Options{PasswordFile: pw, ACLFile: acl, ReloadInterval: 20 * time.Millisecond})
	alice := mustLoginV5(t, addr, "alice-r", "alice", "wonderland")
	bob := mustLoginV5(t, addr, "bob-r", "bob", "builder")
	if got := bob.subAck(t, "alice/#", "news/#"); !bytes.Equal(got, []byte{1, 0x87}) {
		t.Fatalf("SUBACK %#x", got)
	}
	if rc := alice.pubAck(t, "news/today"); rc != 0x87 {
		t.Fatalf("before the reload: PUBACK %#x, want 0x87", rc)
	}
	if rc := alice.pubAck(t, "alice/x"); rc >= 0x80 {
		t.Fatalf("before the reload: PUBACK %#x", rc)
	}
	receive(t, bob.msgs)

	newACL := strings.Replace(authACL, "topic readwrite alice/#", "topic write news/#", 1) +
		"user bob\ntopic read news/#\n"
	tmp := acl + ".new"
	if err := os.WriteFile(tmp, []byte(newACL), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, acl); err != nil {
		t.Fatal(err)
	}
	mqtttest.WaitFor(t, "the ACL change to be picked up", func() bool { return a.Stats().ACLGeneration >= 2 })
	if rc := alice.pubAck(t, "alice/x"); rc != 0x87 {
		t.Errorf("after the reload: alice/x PUBACK %#x, want 0x87 (old decision cached?)", rc)
	}
	if got := bob.subAck(t, "news/#"); !bytes.Equal(got, []byte{1}) {
		t.Errorf("after the reload: SUBACK %#x", got)
	}
	if rc := alice.pubAck(t, "news/today"); rc >= 0x80 {
		t.Errorf("after the reload: news/today PUBACK %#x", rc)
	}
	if m := receive(t, bob.msgs); m.Topic != "news/today" {
		t.Errorf("bob got %s", m.Topic)
	}

	if err := auth.SetPassword(pw, "alice", []byte("looking-glass"), false, auth.PasswordOptions{Cost: 4, SCRAM: auth.PasswordSCRAMs}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, _, err := loginV5(t, addr, "alice-new", "alice", "looking-glass"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("password change not picked up")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Everyone stayed connected through both reloads.
	for _, c := range []*v5Client{alice, bob} {
		select {
		case <-c.Done():
			t.Error("a client was disconnected by the reload")
		default:
		}
	}
}

// scramAuther is a SCRAM-SHA-256 client for paho.golang's enhanced
// authentication (RFC 5802 / 7677).
type scramAuther struct {
	user, password, nonce, clientFirstBare string
	serverSignature                        string
	err                                    error
}

func (s *scramAuther) first() []byte {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	s.nonce = base64.StdEncoding.EncodeToString(b)
	s.clientFirstBare = "n=" + s.user + ",r=" + s.nonce
	return []byte("n,," + s.clientFirstBare)
}

func (s *scramAuther) Authenticate(a *paho.Auth) *paho.Auth {
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	serverFirst := string(a.Properties.AuthData)
	attrs := strings.Split(serverFirst, ",")
	salt, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(attrs[1], "s="))
	iter, err2 := strconv.Atoi(strings.TrimPrefix(attrs[2], "i="))
	if err != nil || err2 != nil || !strings.HasPrefix(attrs[0], "r="+s.nonce) {
		s.err = errors.New("bad server-first-message " + serverFirst)
	}
	salted, _ := pbkdf2.Key(sha256.New, s.password, salt, iter, sha256.Size)
	withoutProof := "c=biws," + attrs[0]
	authMessage := s.clientFirstBare + "," + serverFirst + "," + withoutProof
	clientKey := mac(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	sig := mac(stored[:], authMessage)
	for i := range clientKey {
		clientKey[i] ^= sig[i]
	}
	s.serverSignature = "v=" + base64.StdEncoding.EncodeToString(mac(mac(salted, "Server Key"), authMessage))
	return &paho.Auth{ReasonCode: 0x18, Properties: &paho.AuthProperties{
		AuthMethod: "SCRAM-SHA-256",
		AuthData:   []byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(clientKey)),
	}}
}

func (s *scramAuther) Authenticated() {}

// MQTT 5 enhanced authentication with SCRAM-SHA-256 from paho.golang,
// against the credentials xmq passwd stored; the CONNACK carries the
// server's signature, and a wrong password is refused.
func TestAuthPaho5SCRAM(t *testing.T) {
	pw, acl := authFiles(t)
	addr, _ := startAuthBroker(t, auth.Options{PasswordFile: pw, ACLFile: acl})
	login := func(password string) (*v5Client, *paho.Connack, *scramAuther, error) {
		s := &scramAuther{user: "alice", password: password}
		cp := &paho.Connect{ClientID: "scram-" + password, CleanStart: true,
			Properties: &paho.ConnectProperties{AuthMethod: "SCRAM-SHA-256", AuthData: s.first()}}
		c, ack, err := tryV5(t, dialTCP(t, addr), cp, s)
		return c, ack, s, err
	}
	c, ack, s, err := login("wonderland")
	if err != nil || s.err != nil {
		t.Fatalf("SCRAM login: %v %v (%+v)", err, s.err, ack)
	}
	if ack.Properties == nil || string(ack.Properties.AuthData) != s.serverSignature {
		t.Errorf("CONNACK authentication data %+v, want the server signature %q", ack.Properties, s.serverSignature)
	}
	if rc := c.pubAck(t, "alice/scram"); rc >= 0x80 {
		t.Errorf("publish as the SCRAM user: PUBACK %#x", rc)
	}
	if _, ack, _, err := login("wonderlant"); err == nil || ack == nil || ack.ReasonCode != 0x86 {
		t.Errorf("wrong SCRAM password: %+v, %v; want 0x86", ack, err)
	}
}

// Over mqtts with a client certificate, the certificate's CN is the user
// name (identity_as_username), whatever CONNECT says, and the ACL applies
// to it; no password is needed.
func TestAuthCertificateIdentity(t *testing.T) {
	_, acl := authFiles(t)
	ca := certstest.NewCA(t)
	server := ca.ServerConfig("127.0.0.1")
	server.ClientAuth = tls.RequireAndVerifyClientCert
	server.ClientCAs = ca.ClientConfig().RootCAs
	l, err := listeners.Listen(listeners.Options{Name: "mtls", Transport: listeners.TransportTLS, Address: "127.0.0.1:0",
		TLS: server, IdentityAsUsername: listeners.IdentityCN})
	if err != nil {
		t.Fatal(err)
	}
	serveAuth(t, auth.Options{ACLFile: acl, CertListeners: []string{"mtls"}}, l, "mtls")
	dial := func() net.Conn {
		cfg := ca.ClientConfig(ca.ClientCert("sensor-7"))
		cfg.ServerName = "127.0.0.1"
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", l.Addr().String(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return conn
	}
	c, ack, err := tryV5(t, dial(), &paho.Connect{ClientID: "sensor-7", CleanStart: true}, nil)
	if err != nil {
		t.Fatalf("connect with a certificate: %v (%+v)", err, ack)
	}
	if rc := c.pubAck(t, "devices/sensor-7/temp"); rc >= 0x80 {
		t.Errorf("own topic: PUBACK %#x", rc)
	}
	if rc := c.pubAck(t, "alice/x"); rc != 0x87 {
		t.Errorf("foreign topic: PUBACK %#x, want 0x87", rc)
	}
	// Claiming another user in CONNECT changes nothing: the certificate speaks.
	c2, ack, err := tryV5(t, dial(), &paho.Connect{ClientID: "sneaky", CleanStart: true,
		Username: "alice", UsernameFlag: true, Password: []byte("guess"), PasswordFlag: true}, nil)
	if err != nil {
		t.Fatalf("connect: %v (%+v)", err, ack)
	}
	if rc := c2.pubAck(t, "alice/x"); rc != 0x87 {
		t.Errorf("as sensor-7 claiming alice: PUBACK %#x, want 0x87", rc)
	}
}

// A ban set at run time refuses the next CONNECT (MQTT 5 Banned, 3.1.1
// return code 5); a client id that keeps dropping its TCP connection is
// banned for flapping.
func TestAuthBanAndFlapping(t *testing.T) {
	pw, acl := authFiles(t)
	addr, a := startAuthBroker(t, auth.Options{PasswordFile: pw, ACLFile: acl, Limits: auth.Limits{FlapMax: 2}})
	if err := a.Ban(auth.Ban{Kind: auth.BanUsername, Value: "bob", Until: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, ack, err := loginV5(t, addr, "bob-b", "bob", "builder"); err == nil || ack == nil || ack.ReasonCode != 0x8A {
		t.Errorf("banned user, MQTT 5: %+v, %v; want 0x8A", ack, err)
	}
	if _, err := tryV3(t, addr, "bob-b3", "bob", "builder"); !errors.Is(err, packets.ErrorRefusedNotAuthorised) {
		t.Errorf("banned user, 3.1.1: %v, want not authorised", err)
	}
	a.Unban(auth.BanUsername, "bob")
	mustLoginV5(t, addr, "bob-b", "bob", "builder")

	for i := range 3 {
		c := mustLoginV5(t, addr, "flappy", "alice", "wonderland")
		_ = c.conn.Close() // dropped without DISCONNECT
		select {
		case <-c.Done():
		case <-time.After(timeout):
			t.Fatalf("drop %d: client did not stop", i+1)
		}
	}
	mqtttest.WaitWithin(t, timeout, "a flapping ban", func() bool { return a.Stats().FlapBans != 0 })
	if _, ack, err := loginV5(t, addr, "flappy", "alice", "wonderland"); err == nil || ack == nil || ack.ReasonCode != 0x8A {
		t.Errorf("flapping client id: %+v, %v; want 0x8A", ack, err)
	}
	mustLoginV5(t, addr, "steady", "alice", "wonderland")
}
