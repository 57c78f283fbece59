package auth

// End to end through core.Server over net.Pipe: the hooks core calls
// (Authenticate, AuthStep, ClientDisconnected, CanPublish, CanSubscribe)
// with the packets a client sees. (Tests may import core; auth does not.)

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// addrConn gives a pipe end the remote address of a TCP client.
type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }

// startCore serves a broker whose Authenticator and Authorizer is a.
func startCore(t *testing.T, a *Auth) *core.Server {
	t.Helper()
	srv, err := core.New(core.Options{SysInterval: -1}, core.Config{Authenticator: a, Authorizer: a})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return srv
}

// pipeClient is a client connection to a core.Server: the kit's Conn
// with auth's login.
type pipeClient struct {
	*mqtttest.Conn
}

// dialCore connects a client over net.Pipe, which srv sees coming from
// remote over TCP.
func dialCore(t *testing.T, srv *core.Server, remote string, v byte) *pipeClient {
	t.Helper()
	c, s := net.Pipe()
	srv.ServeConn(addrConn{s, tcpAddr(remote)}, "tcp")
	p := &pipeClient{mqtttest.NewConn(t, c, v)}
	p.Timeout = 10 * time.Second
	return p
}

// connect sends CONNECT and returns CONNACK's reason code; the client is
// closed when it was refused.
func (p *pipeClient) connect(id, user, pass string) codec.ReasonCode {
	p.T.Helper()
	c := mqtttest.ConnectPacket(p.V, id, func(c *codec.Connect) { c.KeepAlive = 60 })
	if user != "" {
		c.UsernameFlag, c.Username, c.PasswordFlag, c.Password = true, []byte(user), true, []byte(pass)
	}
	ack := p.ConnectRC(c)
	if ack.ReasonCode != codec.Success {
		p.Close()
	}
	return ack.ReasonCode
}

// TestCoreBruteForce: an attacker hammers one user from one address
// through the broker; it is locked out after MaxFailedLogins hash checks,
// and a client from another address logs in and publishes meanwhile.
// (HashWait is long for the reason TestBruteForce gives.)
func TestCoreBruteForce(t *testing.T) {
	file := filepath.Join(t.TempDir(), "passwd")
	if err := SetPassword(file, "victim", []byte("correct horse"), false, PasswordOptions{Cost: 6}); err != nil {
		t.Fatal(err)
	}
	a := newAuth(t, Options{PasswordFile: file, Limits: Limits{HashWait: time.Minute}})
	srv := startCore(t, a)
	const attempts, workers = 1000, 16
	var next, bad, locked atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= attempts {
				p := dialCore(t, srv, "192.0.2.66:4000", codec.V311)
				switch rc := p.connect("bot", "victim", "guess"); rc {
				case codec.BadUserNameOrPassword:
					bad.Add(1)
				case codec.NotAuthorized:
					locked.Add(1)
				default:
					t.Errorf("attacker got %v", rc)
				}
			}
		})
	}
	p := dialCore(t, srv, "192.0.2.10:4000", codec.V5)
	if rc := p.connect("good", "victim", "correct horse"); rc != codec.Success {
		t.Fatalf("legitimate client: %v", rc)
	}
	p.Send(&codec.Publish{Topic: []byte("t"), QoS: 1, PacketID: 1})
	if ack, ok := p.Next().(*codec.Ack); !ok || ack.ReasonCode.IsError() {
		t.Errorf("legitimate client's PUBACK %+v", ack)
	}
	p.Send(&codec.Disconnect{})
	wg.Wait()
	if bad.Load() != DefaultMaxFailedLogins || locked.Load() != attempts-DefaultMaxFailedLogins {
		t.Errorf("attacker: %d bad password answers, %d lockouts; want %d and %d",
			bad.Load(), locked.Load(), DefaultMaxFailedLogins, attempts-DefaultMaxFailedLogins)
	}
	if st := srv.Stats(); st.AuthFailures != attempts {
		t.Errorf("core counted %d auth failures, want %d", st.AuthFailures, attempts)
	}
}

// TestCoreSCRAM runs SCRAM-SHA-256 as MQTT 5 enhanced authentication
// through core: CONNECT, AUTH both ways, CONNACK with the server
// signature; then re-authentication on the live connection.
func TestCoreSCRAM(t *testing.T) {
	file := filepath.Join(t.TempDir(), "passwd")
	if err := SetPassword(file, "alice", []byte("wonderland"), false, PasswordOptions{Cost: 4, SCRAM: PasswordSCRAMs}); err != nil {
		t.Fatal(err)
	}
	aclFile := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(aclFile, []byte("user alice\ntopic write alice/#\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := newAuth(t, Options{PasswordFile: file, ACLFile: aclFile})
	srv := startCore(t, a)

	exchange := func(p *pipeClient, sc *scramClient, first func(data []byte)) (codec.Packet, string) {
		t.Helper()
		first(sc.first())
		cont, ok := p.Next().(*codec.Auth)
		if !ok || cont.ReasonCode != codec.ContinueAuthentication || string(cont.Props.AuthMethod) != sc.mech.name {
			t.Fatalf("want AUTH Continue authentication, got %+v", cont)
		}
		final, err := sc.final(cont.Props.AuthData)
		if err != nil {
			t.Fatal(err)
		}
		a := &codec.Auth{ReasonCode: codec.ContinueAuthentication}
		a.Props.AuthMethod, a.Props.AuthData = []byte(sc.mech.name), final
		p.Send(a)
		return p.Next(), sc.expectedServerSig
	}
	connectSCRAM := func(p *pipeClient, sc *scramClient) func(data []byte) {
		return func(data []byte) {
			c := &codec.Connect{ProtocolVersion: codec.V5, CleanStart: true, KeepAlive: 60, ClientID: []byte("scram-" + sc.password)}
			c.Props.AuthMethod, c.Props.AuthData = []byte(sc.mech.name), data
			p.Send(c)
		}
	}

	p := dialCore(t, srv, "192.0.2.20:1", codec.V5)
	sc := &scramClient{mech: scramSHA256, user: "alice", password: "wonderland", nonce: "abcdef"}
	got, sig := exchange(p, sc, connectSCRAM(p, sc))
	ack, ok := got.(*codec.Connack)
	if !ok || ack.ReasonCode != codec.Success || string(ack.Props.AuthData) != sig {
		t.Fatalf("CONNACK %+v, want Success with the server signature %q", got, sig)
	}
	// The user name SCRAM proved is the one the ACL sees.
	p.Send(&codec.Publish{Topic: []byte("alice/x"), QoS: 1, PacketID: 1})
	if ack, ok := p.Next().(*codec.Ack); !ok || ack.ReasonCode.IsError() {
		t.Errorf("PUBACK %+v, want no error", ack)
	}
	p.Send(&codec.Publish{Topic: []byte("bob/x"), QoS: 1, PacketID: 2})
	if ack, ok := p.Next().(*codec.Ack); !ok || ack.ReasonCode != codec.NotAuthorized {
		t.Errorf("PUBACK %+v, want Not Authorized", ack)
	}
	// Re-authentication with the same method.
	sc2 := &scramClient{mech: scramSHA256, user: "alice", password: "wonderland", nonce: "ghijkl"}
	got, sig = exchange(p, sc2, func(data []byte) {
		a := &codec.Auth{ReasonCode: codec.ReAuthenticate}
		a.Props.AuthMethod, a.Props.AuthData = []byte(sc2.mech.name), data
		p.Send(a)
	})
	if done, ok := got.(*codec.Auth); !ok || done.ReasonCode != codec.Success || string(done.Props.AuthData) != sig {
		t.Fatalf("re-authentication ended with %+v, want AUTH Success with the server signature", got)
	}
	p.Send(&codec.Disconnect{})

	// A wrong password is refused with Bad User Name or Password.
	p = dialCore(t, srv, "192.0.2.20:2", codec.V5)
	sc = &scramClient{mech: scramSHA256, user: "alice", password: "wonderlant", nonce: "mnopqr"}
	got, _ = exchange(p, sc, connectSCRAM(p, sc))
	if ack, ok := got.(*codec.Connack); !ok || ack.ReasonCode != codec.BadUserNameOrPassword {
		t.Fatalf("wrong password: %+v", got)
	}
}

// TestCoreFlapping: a client id that drops its connection over and over is
// banned; core tells auth through ConnectionObserver.
func TestCoreFlapping(t *testing.T) {
	a := newAuth(t, Options{AllowAnonymous: AnonymousAllow, Limits: Limits{FlapMax: 3}})
	srv := startCore(t, a)
	for i := range 4 {
		p := dialCore(t, srv, "192.0.2.30:1", codec.V5)
		if rc := p.connect("flappy", "", ""); rc != codec.Success {
			t.Fatalf("connection %d: %v", i+1, rc)
		}
		_ = p.NetConn.Close() // no DISCONNECT: an unclean end
	}
	deadline := time.Now().Add(5 * time.Second)
	for a.Stats().FlapBans == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no flapping ban")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if rc := dialCore(t, srv, "192.0.2.30:1", codec.V5).connect("flappy", "", ""); rc != codec.Banned {
		t.Errorf("MQTT 5 CONNACK %v, want Banned", rc)
	}
	if rc := dialCore(t, srv, "192.0.2.30:1", codec.V311).connect("flappy", "", ""); rc != codec.NotAuthorized {
		t.Errorf("MQTT 3.1.1 CONNACK %v, want Not Authorized (return code 5)", rc)
	}
	if rc := dialCore(t, srv, "192.0.2.30:1", codec.V5).connect("steady", "", ""); rc != codec.Success {
		t.Errorf("another client id: %v", rc)
	}
}
