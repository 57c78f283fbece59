package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/config"
	"github.com/xmq-io/xmq/internal/logging"
	"github.com/xmq-io/xmq/listeners"
	"github.com/xmq-io/xmq/store"
	"github.com/xmq-io/xmq/web"
)

// shutdownTimeout bounds how long a graceful shutdown waits for clients.
const shutdownTimeout = 10 * time.Second

// runOption adjusts run for tests; there are no exported options.
type runOption func(*runOptions)

type runOptions struct {
	// ready is called once every listener is bound, with their real addresses.
	ready func(addrs []net.Addr)
	// webReady is called with the web server's address once it serves.
	webReady func(addr net.Addr)
}

// withReady makes run report the bound listener addresses (port 0 resolved).
func withReady(f func(addrs []net.Addr)) runOption {
	return func(o *runOptions) { o.ready = f }
}

// run is the composition root: it reads flags and the configuration file,
// builds the logger, the broker and the listeners, serves until ctx is
// cancelled, then shuts down gracefully. args excludes the program name.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, opts ...runOption) error {
	var ro runOptions
	for _, o := range opts {
		o(&ro)
	}
	if len(args) > 0 {
		switch args[0] {
		case "version", "-version", "--version":
			if len(args) > 1 {
				return config.UsageError{Err: fmt.Errorf("version takes no arguments, got %q", args[1:])}
			}
			printVersion(stdout)
			return nil
		case "certs":
			return runCerts(args[1:], stdout)
		case "cluster":
			return runClusterCmd(args[1:], stdout)
		case "store":
			return runStore(args[1:], stdout)
		case "passwd":
			return runPasswd(args[1:], os.Stdin, stdout, stderr)
		case "config":
			return runConfig(args[1:], os.Environ(), stdout)
		case "health":
			return runHealth(ctx, args[1:], os.Environ(), stdout)
		case "completion":
			return runCompletion(args[1:], stdout)
		case "check-config":
			return runCheckConfig(args[1:], os.Environ(), stdout)
		}
	}
	if len(args) > 0 && args[0] == "import" {
		return runImport(args[1:], stdout, stderr)
	}
	cfg, err := loadConfig(args)
	switch {
	case errors.Is(err, config.ErrHelp):
		printUsage(stdout)
		return nil
	case errors.Is(err, config.ErrVersion):
		printVersion(stdout)
		return nil
	case err != nil:
		return err
	}
	cfg.File = config.FileArg(args)

	// Each part started pushes what undoes it; a return unwinds them, the
	// last started first.
	var down cleanups
	defer down.unwind()
	lg, err := logging.New(stderr, cfg.Log)
	if err != nil {
		return err
	}
	down.push(lg.Close)
	log := lg.Logger
	if cfg.Pprof != "" {
		stop, err := startPprof(cfg.Pprof, log.Named("pprof"))
		if err != nil {
			return err
		}
		down.push(stop)
	}

	// The ports are bound before anything else starts, so that a port in
	// use (or a certificate that does not load) is found before the store
	// is opened and restored. Nothing is accepted until Serve; connections
	// wait in the listen backlog meanwhile.
	ts, err := newTLSSetup(&cfg, log)
	if err != nil {
		return err
	}
	down.push(ts.close)
	// Below this mark, what the running broker takes over: the web server
	// and listeners, the store, auth and the cluster (see stopBroker).
	started := down.mark()
	// The dashboard's port is bound first: the ws and wss listeners trust its origin.
	wr, err := bindWeb(&cfg)
	if err != nil {
		return err
	}
	down.push(func() { wr.stop(ctx) })
	lns, err := listen(&cfg, ts, wr.trustedOrigins(), log.Named("listeners"))
	if err != nil {
		return err
	}
	down.push(func() {
		for _, l := range lns {
			_ = l.Close()
		}
	})

	// The store is closed by srv.Shutdown, or by the cleanups if there is
	// no srv.
	st, bans, err := openStore(&cfg, log)
	if err != nil {
		return err
	}
	down.push(func() { _ = st.Close() })

	authn, err := newAuth(&cfg, bans, log)
	if err != nil {
		return err
	}
	down.push(func() { _ = authn.Close() }) // before the store closes: auth sweeps expired bans out of it

	// The bridges' local sessions are checked in front of auth
	// (bridgeAuth); with the dashboard on, its sessions' MQTT passwords in
	// front of both (web.MQTTTokens.Wrap).
	ba := &bridgeAuth{Auth: authn}
	var mqttAuthn core.Authenticator = ba
	var mqttAuthz core.Authorizer = ba
	var tokens *web.MQTTTokens
	if cfg.Web.Address != "" {
		tokens = web.NewMQTTTokens()
		mqttAuthn, mqttAuthz = tokens.Wrap(ba, ba)
	}

	// The cluster's NATS side starts before the broker, which restores
	// the sessions whose subscriptions it hears of; it routes from Start.
	cl, err := startCluster(&cfg, log)
	if err != nil {
		return err
	}
	if cl != nil {
		down.push(func() { _ = cl.Close() })
	}
	ccfg := core.Config{Log: log.Named("core"), Authenticator: mqttAuthn, Authorizer: mqttAuthz, Store: st}
	if cl != nil {
		ccfg.Cluster = cl // not a nil *cluster.Cluster in the interface: core tests it against nil
		ccfg.SysTopics = clusterSysTopics(cl)
		// With session replicas, what core writes for persistent sessions
		// goes to the cluster's session stream too.
		ccfg.Store = cl.ReplicateStore(st)
	}
	applyMemoryLimit(cfg.Broker.MemoryLimit, log)
	bopts := cfg.Broker.Options()
	bopts.Version = build().Version
	srv, err := core.New(bopts, ccfg)
	if err != nil {
		return restoreHint(err, cfg.DataDir)
	}
	// From here the broker owns the store and the listeners: stopBroker,
	// pushed below, stops it and what it holds, in its own order.
	down.release(started)
	if cl != nil {
		cl.Start(srv)
		startHeartbeats(cl, srv, lns)
	}
	bridges := newBridges(srv, log)
	ba.bridges = bridges // before any connection
	// stopBroker shuts the broker down, which closes the store: the bridges
	// first (their remote sessions end with DISCONNECT, their local ones
	// stay), then auth stops sweeping expired bans out of the store (it
	// still answers logins meanwhile).
	stopBroker := func(lns []listeners.Listener) error {
		bridges.Close()
		if cl != nil {
			// The clients go first, while the cluster still forwards what
			// they publish and answers for the sessions they leave (their
			// next connection, on another node, moves them); then nothing
			// more from other nodes into a broker that stops: what they
			// publish for its sessions meanwhile is in their replay rings,
			// fetched when it is back, or by the node that rebuilds a
			// session from the replicas.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
			if err := srv.Drain(dctx); err != nil {
				log.Warn("connections not all closed before leaving the cluster", zap.Error(err))
			}
			cancel()
			awaitHandoff(srv, log)
			_ = cl.Close()
		}
		_ = authn.Close()
		return shutdown(ctx, srv, lns, log)
	}
	// SIGHUP (or POST /api/v1/reload) applies the configuration again
	// (reload.go). It is caught until the very end: the default action of
	// SIGHUP would end the process in the middle of the shutdown.
	rl := &reloader{args: args, cur: cfg, lg: lg, srv: srv, authn: authn, ts: ts, bridges: bridges, log: log}
	reload := rl.reload
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	down.push(func() { signal.Stop(hup); close(hup) })
	go func() {
		for range hup {
			_, _ = reload("SIGHUP")
		}
	}()
	addrs := make([]net.Addr, len(lns))
	llog := log.Named("listeners")
	for i, l := range lns {
		addrs[i] = l.Addr()
		llog.Info("listening", zap.String("listener", cfg.Listeners[i].Name),
			zap.String("transport", l.Transport()), zap.Stringer("address", l.Addr()))
	}

	// Each listener's accept loop runs on its own goroutine until Shutdown
	// closes the listener; the first unexpected error stops the broker.
	serveErr := make(chan error, len(lns)+1)
	var serving sync.WaitGroup
	rd := newReadiness(&cfg, srv)
	if ps, ok := st.(*store.Store); ok {
		rd.store = ps.Health
	}
	if cl != nil {
		rd.cluster = cl
	}
	for i, l := range lns {
		serving.Go(func() {
			err := srv.Serve(l, cfg.Listeners[i].Name)
			rd.stopped(i)
			if !errors.Is(err, core.ErrServerClosed) {
				serveErr <- fmt.Errorf("listener %s: %w", cfg.Listeners[i].Name, err)
			}
		})
	}
	// The web server stops first, so that no API request reaches a broker
	// that stops; the accept loops end with the broker.
	down.pushErr(func() error {
		wr.stop(ctx)
		err := stopBroker(lns)
		serving.Wait()
		return err
	})
	if wr != nil {
		ops := webOps{bridges: bridges, reload: func() (reloadResult, error) { return reload("API") }, cluster: cl}
		if err := wr.start(&cfg, srv, st, lns, ts, webAuth{authn: authn, tokens: tokens}, ops, rd.check, log, serveErr); err != nil {
			return err
		}
	}
	if _, err := bridges.Apply(cfg.BridgeConfigs()); err != nil {
		return err
	}
	log.Info("xmq started", zap.String("version", build().Version), zap.Int("listeners", len(lns)),
		zap.String("data_dir", cfg.DataDir), zap.Int("bridges", len(cfg.Bridges)))
	// Every listener is bound, so connections are accepted from now on:
	// tell systemd (Type=notify), whose `systemctl start` returns now.
	if err := sdNotify(os.Getenv("NOTIFY_SOCKET"), "READY=1\nSTATUS=serving MQTT"); err != nil {
		log.Warn("cannot notify systemd of readiness", zap.Error(err))
	}
	if cfg.Broker.TrimBinaryPages == nil || *cfg.Broker.TrimBinaryPages {
		// Started: what the package initialisations and the start
		// touched of the binary need not count in RSS any longer.
		if n, err := trimBinaryPages(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
			log.Warn("cannot trim the binary's pages", zap.Error(err))
		} else if err == nil {
			log.Debug("binary pages trimmed", zap.Int64("rss_bytes", n))
		}
	}
	if ro.ready != nil {
		ro.ready(addrs)
	}
	if ro.webReady != nil && wr != nil {
		ro.webReady(wr.addr())
	}

	var failed error
	select {
	case <-ctx.Done():
		log.Info("xmq stopping", zap.String("cause", context.Cause(ctx).Error()))
	case failed = <-serveErr:
		log.Error("xmq stopping", zap.Error(failed))
	}
	if err := sdNotify(os.Getenv("NOTIFY_SOCKET"), "STOPPING=1"); err != nil {
		log.Warn("cannot notify systemd of the shutdown", zap.Error(err))
	}
	return errors.Join(failed, down.unwind())
}

// cleanups is run's teardown, a stack: each part started pushes what
// undoes it, and unwind runs them the last pushed first, once.
type cleanups []func() error

// push adds f, which cannot fail.
func (c *cleanups) push(f func()) { c.pushErr(func() error { f(); return nil }) }

// pushErr adds f; unwind returns its error.
func (c *cleanups) pushErr(f func() error) { *c = append(*c, f) }

// mark is the height of the stack, for release.
func (c *cleanups) mark() int { return len(*c) }

// release drops, without running them, the cleanups pushed since mark:
// something else (the running broker) undoes those parts now.
func (c *cleanups) release(mark int) { *c = (*c)[:mark] }

// unwind runs the cleanups, the last pushed first, and empties the stack;
// it returns their errors joined.
func (c *cleanups) unwind() error {
	var errs []error
	for i := len(*c) - 1; i >= 0; i-- {
		errs = append(errs, (*c)[i]())
	}
	*c = nil
	return errors.Join(errs...)
}

// handoffWait bounds how long a stopping cluster node waits for the
// clients it disconnected to move their persistent sessions to other
// nodes: one that reconnects later finds the session when the node is
// back (a rolling restart), or, with session replicas, rebuilt from them.
const handoffWait = 5 * time.Second

// awaitHandoff waits until the persistent sessions whose clients Drain
// disconnected have moved to other nodes, or handoffWait passed.
func awaitHandoff(srv *core.Server, log *zap.Logger) {
	start := time.Now()
	left := srv.DrainedSessions()
	for left > 0 && time.Since(start) < handoffWait {
		time.Sleep(50 * time.Millisecond)
		left = srv.DrainedSessions()
	}
	log.Info("sessions handed to other nodes before leaving the cluster", zap.Int("left_here", left),
		zap.Duration("took", time.Since(start).Round(time.Millisecond)))
}

// readiness is what /readyz checks of a run: every listener bound and its
// accept loop running, the node part of its cluster (if any), the store
// open and syncing (core.StoreHealthy).
// webRun adds "not shutting down".
type readiness struct {
	names     []string
	accepting []atomic.Bool // listener i's accept loop runs
	srv       interface{ StoreHealthy() error }
	// store, when set, is the on-disk store's health: checked before
	// StoreHealthy's Sync, which a stalled disk would hold up.
	store func() store.Health
	// cluster, when set, says whether this node is part of its cluster.
	cluster interface{ Healthy() error }
}

// newReadiness marks every configured listener as accepting: run calls it
// once they are all bound, as their accept loops start.
func newReadiness(cfg *config.Config, srv interface{ StoreHealthy() error }) *readiness {
	r := &readiness{accepting: make([]atomic.Bool, len(cfg.Listeners)), srv: srv}
	for i, lc := range cfg.Listeners {
		r.names = append(r.names, lc.Name)
		r.accepting[i].Store(true)
	}
	return r
}

// stopped records that listener i's accept loop has ended.
func (r *readiness) stopped(i int) { r.accepting[i].Store(false) }

func (r *readiness) check() error {
	for i := range r.accepting {
		if !r.accepting[i].Load() {
			return fmt.Errorf("listener %s is not accepting connections", r.names[i])
		}
	}
	if r.cluster != nil {
		if err := r.cluster.Healthy(); err != nil {
			return err
		}
	}
	if r.store != nil {
		if err := r.store().Err(); err != nil {
			return err
		}
	}
	return r.srv.StoreHealthy()
}

// listen binds every configured listener, or none: on an error the ones
// already bound are closed.
func listen(cfg *config.Config, ts *tlsSetup, trustedOrigins []string, log *zap.Logger) ([]listeners.Listener, error) {
	lns := make([]listeners.Listener, 0, len(cfg.Listeners))
	for _, lc := range cfg.Listeners {
		l, err := listenOne(lc, cfg, ts, trustedOrigins, log)
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			network := "tcp"
			if lc.Transport == listeners.TransportQUIC {
				network = "udp"
			}
			return nil, fmt.Errorf("listener %s: %w", lc.Name, explainBind(err, network, lc.Address))
		}
		lns = append(lns, l)
	}
	return lns, nil
}

func listenOne(lc config.Listener, cfg *config.Config, ts *tlsSetup, trustedOrigins []string, log *zap.Logger) (listeners.Listener, error) {
	tlsConf, err := ts.serverConfig(lc)
	if err != nil {
		return nil, err
	}
	o := cfg.ListenerOptions(lc, tlsConf)
	o.Log = log
	if lc.Transport == listeners.TransportWS || lc.Transport == listeners.TransportWSS {
		o.TrustedOrigins = trustedOrigins
	}
	return listeners.Listen(o)
}

// shutdown stops the broker within shutdownTimeout, even though ctx is
// already cancelled, and closes the listeners (Serve may not have taken
// them over yet).
func shutdown(ctx context.Context, srv *core.Server, lns []listeners.Listener, log *zap.Logger) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	start := time.Now()
	err := srv.Shutdown(sctx)
	for _, l := range lns {
		_ = l.Close()
	}
	st := srv.Stats()
	if err != nil {
		log.Error("xmq stopped uncleanly", zap.Error(err), zap.Duration("took", time.Since(start)),
			zap.Int64("still_connected", st.Connected))
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("xmq stopped", zap.Duration("took", time.Since(start)), zap.Int64("connects", st.Connects),
		zap.Int64("messages_in", st.MessagesIn), zap.Int64("messages_out", st.MessagesOut))
	return nil
}
