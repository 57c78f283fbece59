package cluster

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"go.uber.org/zap"
)

// The embedded server's limits, above NATS's defaults so that an MQTT
// message (a topic of up to 65535 bytes, three times that escaped, and a
// payload up to what the broker accepts) fits: the PUB line and payload.
const (
	embeddedMaxControlLine = 256 << 10
	embeddedMaxSubject     = embeddedMaxControlLine - 1024
	embeddedMaxPayload     = 64 << 20 // NATS's ceiling
)

// The embedded server's trust, as NATS recommends for production: route
// authorization with the cluster's secret, accounts that keep the nodes'
// subjects and JetStream from applications, users with permissions.
const (
	// nodeAccount holds the nodes' connections: the $XMQ.> subjects,
	// JetStream and its buckets, and the mapped MQTT subjects they
	// forward on. Only nodeUser logs in to it, in process.
	nodeAccount = "XMQ"
	// appAccount holds Options.Embedded.Users: it imports the mapped
	// subjects (SubjectPrefix.>) from nodeAccount both ways (a stream to
	// read what the nodes forward, a service to publish into MQTT; NATS
	// refuses two streams as a cycle) and sees nothing else.
	appAccount = "APP"
	// routeUser is the name routes authenticate with; the password is
	// Options.Secret.
	routeUser = "xmq-route"
)

// embedded is the NATS server a node runs in process.
type embedded struct {
	srv    *server.Server
	tmpDir string // JetStream's directory when Options.Embedded.Dir is empty
	// node is the nkey of the node's own connection: made per process,
	// since only its in-process connection uses it (and an nkey leaves
	// no password in memory for NATS to warn about).
	node nkeys.KeyPair
}

// startEmbedded starts the embedded NATS server and waits until it
// accepts connections.
func startEmbedded(o *Options, log *zap.Logger) (*embedded, error) {
	host, port, _ := splitHostPort(o.Embedded.ClientListen)
	chost, cport, _ := splitHostPort(o.Embedded.Listen)
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	e := &embedded{node: kp}
	dir := o.Embedded.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "xmq-nats-")
		if err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		dir, e.tmpDir = d, d
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	sopts := &server.Options{}
	nodeKey, _ := kp.PublicKey() // a key pair just made has one
	if err := embeddedAccounts(o, sopts, nodeKey); err != nil {
		e.close()
		return nil, err
	}
	sopts.ServerName = o.Node
	sopts.Host, sopts.Port = host, randomIfZero(port)
	if o.Embedded.ClientListen == "" {
		// No client port for applications: the node's own connection is
		// in process. nats-server solicits routes only once its client
		// listener is up (StartRouting waits for it), so a node with
		// routes gets one on loopback, at a random port, where no
		// credentials exist (no users; the node's nkey is this process's).
		sopts.Host, sopts.Port = "127.0.0.1", server.RANDOM_PORT
		sopts.DontListen = len(o.Embedded.Routes) == 0
	}
	sopts.Cluster = server.ClusterOpts{Name: o.Name, Host: chost, Port: randomIfZero(cport), Advertise: o.Embedded.Advertise}
	if o.Secret != "" {
		sopts.Cluster.Username, sopts.Cluster.Password = routeUser, o.Secret
	}
	sopts.JetStream, sopts.StoreDir, sopts.NoSigs = true, dir, true
	sopts.MaxControlLine, sopts.MaxPayload = embeddedMaxControlLine, embeddedMaxPayload
	if t := o.Embedded.TLS; t.CertFile != "" {
		rt, ct, err := embeddedTLS(t)
		if err != nil {
			e.close()
			return nil, err
		}
		sopts.Cluster.TLSConfig, sopts.Cluster.TLSTimeout = rt, 2
		sopts.TLSConfig, sopts.TLS, sopts.TLSTimeout = ct, true, 2
	}
	routes := o.Embedded.Routes
	if len(routes) == 0 {
		// A cluster of one: clustered JetStream would wait for a route
		// forever, so the server is standalone, with no route port.
		sopts.Cluster = server.ClusterOpts{}
	}
	for _, r := range routes {
		u := &url.URL{Scheme: "nats-route", Host: strings.TrimPrefix(r, "nats-route://")}
		if o.Secret != "" {
			u.User = url.UserPassword(routeUser, o.Secret)
		}
		sopts.Routes = append(sopts.Routes, u)
	}
	srv, err := server.NewServer(sopts)
	if err != nil {
		e.close()
		return nil, fmt.Errorf("cluster: embedded NATS: %w", err)
	}
	srv.SetLoggerV2(natsLogger{log.Sugar()}, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		e.close()
		return nil, fmt.Errorf("cluster: embedded NATS did not start (client %s, routes %s)", o.Embedded.ClientListen, o.Embedded.Listen)
	}
	e.srv = srv
	return e, nil
}

// embeddedAccounts configures nodeAccount, appAccount and their users in
// sopts.
func embeddedAccounts(o *Options, sopts *server.Options, nodeKey string) error {
	// JetStream per account is not in server.Options' fields: it comes
	// from the configuration language, the rest is set on the accounts.
	if err := sopts.ProcessConfigString("accounts: { " + nodeAccount + ": { jetstream: enabled }, " + appAccount + ": {} }"); err != nil {
		return fmt.Errorf("cluster: embedded NATS accounts: %w", err)
	}
	var xmq, app *server.Account
	for _, a := range sopts.Accounts {
		switch a.Name {
		case nodeAccount:
			xmq = a
		case appAccount:
			app = a
		}
	}
	if xmq == nil || app == nil {
		return errors.New("cluster: embedded NATS accounts were not made")
	}
	mapped := o.SubjectPrefix + ".>"
	if err := errors.Join(xmq.AddStreamExport(mapped, []*server.Account{app}), xmq.AddServiceExport(mapped, []*server.Account{app}),
		app.AddStreamImport(xmq, mapped, ""), app.AddServiceImport(xmq, mapped, "")); err != nil {
		return fmt.Errorf("cluster: embedded NATS accounts: %w", err)
	}
	sopts.Nkeys = []*server.NkeyUser{{Nkey: nodeKey, Account: xmq}}
	for _, u := range o.Embedded.Users {
		perm := &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: orAll(u.Publish, mapped)},
			Subscribe: &server.SubjectPermission{Allow: orAll(u.Subscribe, mapped)},
		}
		if u.NKey != "" {
			sopts.Nkeys = append(sopts.Nkeys, &server.NkeyUser{Nkey: u.NKey, Permissions: perm, Account: app})
			continue
		}
		sopts.Users = append(sopts.Users, &server.User{Username: u.Name, Password: u.Password, Permissions: perm, Account: app})
	}
	return nil
}

// orAll is subjects, or all when it is empty.
func orAll(subjects []string, all string) []string {
	if len(subjects) == 0 {
		return []string{all}
	}
	return subjects
}

// embeddedTLS builds the routes' TLS (mutual: every node's certificate is
// verified against the CA) and the client port's.
func embeddedTLS(t EmbeddedTLS) (routes, clients *tls.Config, err error) {
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: embedded NATS TLS: %w", err)
	}
	caPEM, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: embedded NATS TLS: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, nil, fmt.Errorf("cluster: embedded NATS TLS: %s holds no PEM certificate", t.CAFile)
	}
	routes = &tls.Config{
		MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert},
		RootCAs: pool, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
	}
	clients = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	return routes, clients, nil
}

// randomSecret is 32 random bytes, base64: a password no one guesses.
func randomSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// NewSecret returns a new cluster secret (xmq cluster secret).
func NewSecret() string { return randomSecret() }

// randomIfZero turns port 0 into NATS's "pick one" (0 means its default).
func randomIfZero(p int) int {
	if p == 0 {
		return server.RANDOM_PORT
	}
	return p
}

// close stops the server and removes a temporary directory; nil does nothing.
func (e *embedded) close() {
	if e == nil {
		return
	}
	if e.srv != nil {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
	}
	if e.tmpDir != "" {
		_ = os.RemoveAll(e.tmpDir)
	}
}

// natsLogger sends the embedded server's log to zap: its notices (banner,
// routes coming and going) at debug, so that a node's log stays xmq's.
type natsLogger struct{ l *zap.SugaredLogger }

func (n natsLogger) Noticef(format string, v ...any) { n.l.Debugf(format, v...) }
func (n natsLogger) Warnf(format string, v ...any)   { n.l.Warnf(format, v...) }
func (n natsLogger) Fatalf(format string, v ...any)  { n.l.Errorf(format, v...) }
func (n natsLogger) Errorf(format string, v ...any)  { n.l.Errorf(format, v...) }
func (n natsLogger) Debugf(format string, v ...any)  { n.l.Debugf(format, v...) }
func (n natsLogger) Tracef(format string, v ...any)  {}

// nodeAuth logs the node's own connection in with its nkey.
func (e *embedded) nodeAuth() nats.Option {
	pub, _ := e.node.PublicKey()
	return nats.Nkey(pub, e.node.Sign)
}
