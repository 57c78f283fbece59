package cluster

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
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

// embedded is the NATS server a node runs in process.
type embedded struct {
	srv    *server.Server
	tmpDir string // JetStream's directory when Options.Embedded.Dir is empty
}

// startEmbedded starts the embedded NATS server and waits until it
// accepts connections.
func startEmbedded(o *Options, log *zap.Logger) (*embedded, error) {
	host, port, _ := splitHostPort(o.Embedded.ClientListen)
	chost, cport, _ := splitHostPort(o.Embedded.Listen)
	e := &embedded{}
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
	sopts := &server.Options{
		ServerName:     o.Node,
		Host:           host,
		Port:           randomIfZero(port),
		Cluster:        server.ClusterOpts{Name: o.Name, Host: chost, Port: randomIfZero(cport), Advertise: o.Embedded.Advertise},
		JetStream:      true,
		StoreDir:       dir,
		NoSigs:         true,
		MaxControlLine: embeddedMaxControlLine,
		MaxPayload:     embeddedMaxPayload,
	}
	routes := o.Embedded.Routes
	if len(routes) == 0 {
		// A cluster of one: clustered JetStream would wait for a route
		// forever, so the server is standalone, with no route port.
		sopts.Cluster = server.ClusterOpts{}
	}
	if len(routes) > 0 {
		urls := make([]string, len(routes))
		for i, r := range routes {
			urls[i] = "nats-route://" + strings.TrimPrefix(r, "nats-route://")
		}
		sopts.Routes = server.RoutesFromStr(strings.Join(urls, ","))
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
