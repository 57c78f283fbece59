package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/auth"
	"github.com/xmq-io/xmq/bridge"
	"github.com/xmq-io/xmq/certs"
	"github.com/xmq-io/xmq/cluster"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/config"
	"github.com/xmq-io/xmq/listeners"
	"github.com/xmq-io/xmq/store"
	"github.com/xmq-io/xmq/web"
)

// apiKeys converts the web section's keys.
func apiKeys(w *config.Web) ([]web.APIKey, error) {
	var keys []web.APIKey
	for _, name := range sortedNames(w.APIKeys) {
		k := w.APIKeys[name]
		sum, err := web.ParseAPIKeyHash(k.SHA256)
		if err != nil {
			return nil, fmt.Errorf("web.api_keys.%s: %w", name, err)
		}
		keys = append(keys, web.APIKey{Name: name, SHA256: sum, Role: web.Role(k.Role)})
	}
	return keys, nil
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// validateWeb checks the web section.
func validateWeb(c *config.Config, ps *config.Problems) {
	w := &c.Web
	wp := config.Path("web")
	if w.Address == "" {
		return
	}
	if _, _, err := net.SplitHostPort(w.Address); err != nil {
		ps.Add(wp.With("address"), "%q is not host:port (127.0.0.1:18083 for this machine only, :18083 for every interface, \"\" for no web server)", w.Address)
	}
	if w.AdminUser == "" {
		ps.Add(wp.With("admin_user"), "must not be empty")
	}
	keys, err := apiKeys(w)
	if err != nil {
		ps.AddErr(nil, err) // names web.api_keys.NAME itself
		return
	}
	o := web.Options{SessionTTL: w.SessionTTL, APIKeys: keys}
	if w.AdminPasswordHash != "" {
		o.AdminPasswordHash = []byte(w.AdminPasswordHash)
	}
	ps.AddErr(wp, o.Validate())
}

// webUsage documents the web flag in printUsage.
const webUsage = `  -web ADDR
        serve the dashboard, the admin API (/api/v1) and Prometheus metrics
        (/metrics) on ADDR. Default "127.0.0.1:18083": this machine only;
        ":18083" for every interface. -web "" turns them off. The admin
        password is XMQ_ADMIN_PASSWORD, web.admin_password_hash, or one
        generated at first start and printed once in the log.
`

// webRun is the web server of a run: bound before the MQTT listeners (so
// the ws and wss listeners can trust the dashboard's origin), served once
// they are bound.
type webRun struct {
	l        net.Listener
	traceTmp string   // the traces' temporary directory (data_dir ""), removed at stop
	origins  []string // the dashboard's page, as browsers name its origin
	srv      *web.Server
	stopping atomic.Bool
	done     chan error
}

// bindWeb binds the web address, if any, and works out the dashboard's
// origins, which the ws and wss listeners trust (trustedOrigins).
func bindWeb(cfg *config.Config) (*webRun, error) {
	if cfg.Web.Address == "" {
		return nil, nil
	}
	l, err := net.Listen("tcp", cfg.Web.Address)
	if err != nil {
		return nil, fmt.Errorf("web: %w", explainBind(err, "tcp", cfg.Web.Address))
	}
	return &webRun{l: l, origins: dashboardOrigins(l.Addr().(*net.TCPAddr), cfg.Web.TLS)}, nil
}

// trustedOrigins are the origins of the broker's own pages: the
// dashboard's, none when it is off. The ws and wss listeners let them in
// whatever their allowed_origins say, as trusted pages: an empty
// allowed_origins still lets every page in, foreign ones as such.
func (w *webRun) trustedOrigins() []string {
	if w == nil {
		return nil
	}
	return w.origins
}

// dashboardOrigins are the origins a browser shows for the dashboard at
// addr: the loopback names, and for an address on every interface also
// the host name and the machine's addresses. Other names (a DNS name in
// front of the machine) go in the listeners' allowed_origins, which makes
// them trusted too.
func dashboardOrigins(addr *net.TCPAddr, tls bool) []string {
	scheme := "http://"
	if tls {
		scheme = "https://"
	}
	port := fmt.Sprint(addr.Port)
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	switch {
	case addr.IP.IsUnspecified():
		if h, err := os.Hostname(); err == nil && h != "" {
			hosts = append(hosts, h)
		}
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLinkLocalUnicast() {
					hosts = append(hosts, ipn.IP.String())
				}
			}
		}
	case !addr.IP.IsLoopback():
		hosts = append(hosts, addr.IP.String())
	}
	var out []string
	for _, h := range hosts {
		o := scheme + net.JoinHostPort(h, port)
		if !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

// webAuth is what the web server needs of the broker's authentication:
// auth's banned list and counters, and the dashboard's MQTT passwords
// (checked by the Authenticator that wraps auth).
type webAuth struct {
	authn  *auth.Auth
	tokens *web.MQTTTokens
}

// start builds the web server and serves it on its own goroutine; an
// unexpected end of serving is sent on failed, if there is room. ready
// says whether the broker serves (listeners, store); /readyz also fails
// once stop has begun.
func (w *webRun) start(cfg *config.Config, srv *core.Server, st core.Store, lns []listeners.Listener, ts *tlsSetup, wa webAuth, ops webOps,
	ready func() error, log *zap.Logger, failed chan<- error) error {
	wlog := log.Named("web")
	hash, source, err := web.AdminPassword(os.Getenv(config.AdminPasswordEnv), cfg.Web.AdminPasswordHash, cfg.DataDir, wlog)
	if err != nil {
		return err
	}
	keys, err := apiKeys(&cfg.Web)
	if err != nil {
		return err
	}
	infos := make([]web.Listener, len(lns))
	for i, l := range lns {
		lc := cfg.Listeners[i]
		path := lc.Path
		if path == listeners.AnyPath {
			path = listeners.DefaultPath // one of every path: what the dashboard dials
		}
		infos[i] = web.Listener{Name: lc.Name, Transport: l.Transport(), Address: l.Addr().String(), Path: path,
			HandshakeFailures: l.HandshakeFailures}
		infos[i].CertNotAfter = ts.certNotAfter(lc)
	}
	opts := web.Options{
		Address: cfg.Web.Address, AdminUser: cfg.Web.AdminUser, AdminPasswordHash: hash, APIKeys: keys,
		AllowAnonymousLoopback: cfg.Web.AllowAnonymousLoopback, SessionTTL: cfg.Web.SessionTTL,
		Listeners: infos, Version: build().Version, Log: wlog, MQTTTokens: wa.tokens,
		// A password from the environment or the file wins at every start:
		// the API must not pretend to change it.
		AdminPasswordFixed: source == web.PasswordFromEnv || source == web.PasswordFromConfig,
		Ready: func() error {
			if w.stopping.Load() {
				return errors.New("shutting down")
			}
			return ready()
		},
	}
	if ops.bridges != nil {
		opts.Bridges = webBridges{ops.bridges}
	}
	if cl := ops.cluster; cl != nil {
		opts.Node = cl.Node()
		opts.Cluster = func() web.ClusterStats {
			st := cl.Stats()
			ws := web.ClusterStats{Connected: cl.Connected(), Routes: cl.Routes(), StateReady: cl.Ready(),
				Forwarded: st.Forwarded, ForwardDropped: st.ForwardDropped, Received: st.Received,
				ReceivedDropped: st.ReceivedDropped, Interest: st.Interest, ClaimsUnavailable: st.ClaimsUnavailable,
				ClaimsRefused: st.ClaimsRefused,
				TakenOver:     st.TakenOver, RetainDropped: st.RetainDropped,
				SessionsIn: st.SessionsIn, SessionsOut: st.SessionsOut, SessionsLost: st.SessionsLost,
				HandedOver: st.HandedOver, SessionsAdopted: st.SessionsAdopted, SessionsRestored: st.SessionsRestored,
				SessionsMerged: st.SessionsMerged, ReplicaDropped: st.ReplicaDropped, NodesDead: st.NodesDead,
				Replayed: st.Replayed}
			tot := cl.Totals()
			ws.NodesReachable, ws.NodesUnreachable, ws.UnreachableTransitions = tot.Reachable, tot.Unreachable, tot.UnreachableTransitions
			ws.HeartbeatsRefused = tot.Refused
			return ws
		}
		opts.Peers = webPeers{cl}
	}
	if ops.reload != nil {
		opts.Reload = func() (web.Reloaded, error) {
			res, err := ops.reload()
			ch := res.bridges
			return web.Reloaded{Added: ch.Added, Changed: ch.Changed, Removed: ch.Removed,
				Keys: res.changed, NeedsRestart: res.needsRestart}, err
		}
	}
	if a := wa.authn; a != nil {
		opts.Bans = banList{a}
		opts.AuthStats = func() web.AuthStats { return webAuthStats(a.Stats()) }
	}
	// Traces live in the data directory, or in a temporary one without;
	// the overview's day of history, the dashboard users and a changed
	// admin password there too, or only in memory.
	if cfg.DataDir != "" {
		opts.TraceDir = filepath.Join(cfg.DataDir, "traces")
		opts.HistoryFile = filepath.Join(cfg.DataDir, "web", "history.json")
		opts.UsersFile = filepath.Join(cfg.DataDir, filepath.FromSlash(web.UsersFile))
		opts.AdminPasswordFile = filepath.Join(cfg.DataDir, filepath.FromSlash(web.AdminPasswordFile))
	} else {
		if w.traceTmp, err = os.MkdirTemp("", "xmq-traces-"); err != nil {
			return fmt.Errorf("traces: %w", err)
		}
		opts.TraceDir = w.traceTmp
	}
	if ps, ok := st.(*store.Store); ok {
		budget := cfg.Store.MaxDiskBytes
		opts.Store = func() web.StoreUsage {
			return web.StoreUsage{DiskBytes: ps.DiskUsage(), BudgetBytes: budget, FreeBytes: ps.FreeBytes(), State: string(ps.Health().State)}
		}
		opts.Degraded = func() error {
			if h := ps.Health(); h.State != store.StateOK {
				return fmt.Errorf("store %s: %s", h.State, h.Reason)
			}
			return nil
		}
	}
	if cfg.Web.TLS {
		if ts.def == nil {
			return errors.New("web.tls: no certificate source")
		}
		if opts.TLS, err = ts.def.ServerConfig(certs.ClientAuth{Verify: certs.VerifyNone}); err != nil {
			return fmt.Errorf("web.tls: %w", err)
		}
		if ts.def.Kind() != certs.KindACME {
			opts.TLS.GetCertificate = ts.slot("", ts.def).getCertificate // follows the top-level files on reload
		}
	}
	w.srv, err = web.New(srv, opts)
	if err != nil {
		return err
	}
	if cl := ops.cluster; cl != nil {
		// The other nodes' API lookups of this node's clients and subscriptions.
		if err := cl.ServeAPI(w.srv.ServeForwarded); err != nil {
			wlog.Warn("the other nodes' admin API cannot look up this node's clients", zap.Error(err))
		}
	}
	scheme := "http"
	if cfg.Web.TLS {
		scheme = "https"
	}
	wlog.Info("dashboard, admin API and metrics", zap.String("url", scheme+"://"+w.l.Addr().String()+"/"),
		zap.String("admin_user", cfg.Web.AdminUser), zap.String("password_from", source),
		zap.Bool("anonymous_loopback", cfg.Web.AllowAnonymousLoopback))
	w.done = make(chan error, 1)
	go func() {
		err := w.srv.Serve(w.l)
		if err != nil {
			wlog.Error("web server stopped", zap.Error(err))
			select {
			case failed <- fmt.Errorf("web: %w", err):
			default:
			}
		}
		w.done <- err
	}()
	return nil
}

// stop makes /readyz fail and ends the web server (a nil w is off).
func (w *webRun) stop(ctx context.Context) {
	if w == nil {
		return
	}
	w.stopping.Store(true)
	if w.srv == nil {
		_ = w.l.Close()
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = w.srv.Shutdown(sctx)
	<-w.done
	if w.traceTmp != "" {
		_ = os.RemoveAll(w.traceTmp)
	}
}

// addr is where the web server listens; nil when it is off.
func (w *webRun) addr() net.Addr {
	if w == nil {
		return nil
	}
	return w.l.Addr()
}

// webAuthStats copies auth's counters for /metrics.
func webAuthStats(s auth.Stats) web.AuthStats {
	return web.AuthStats{
		Logins: s.Logins, LoginFailures: s.LoginFailures, AnonymousRefused: s.AnonymousRefused, Banned: s.Banned,
		LockedOut: s.LockedOut, RateLimited: s.RateLimited, Busy: s.Busy, FlapBans: s.FlapBans,
		PublishDenied: s.PublishDenied, SubscribeDenied: s.SubscribeDenied, ACLCacheMisses: s.ACLCacheMisses,
		Reloads: s.Reloads, ReloadErrors: s.ReloadErrors, Users: s.Users, ACLRules: s.ACLRules,
		ACLCached: s.ACLCached, Bans: s.Bans, LockedSources: s.LockedSources, HTTP: webHTTPAuthStats(s.HTTP),
	}
}

// webHTTPAuthStats copies the HTTP auth service's counters; nil without
// a service.
func webHTTPAuthStats(s *auth.HTTPStats) *web.HTTPAuthStats {
	if s == nil {
		return nil
	}
	counts := func(c auth.HTTPCounts) web.HTTPAuthCounts {
		return web.HTTPAuthCounts{Allow: c.Allow, Deny: c.Deny, Ignore: c.Ignore, Errors: c.Errors, Timeouts: c.Timeouts,
			Busy: c.Busy, CacheHits: c.CacheHits, FailedClosed: c.FailedClosed}
	}
	return &web.HTTPAuthStats{Connect: counts(s.Connect), ACL: counts(s.ACL), LoginsCached: s.LoginsCached,
		ACLCached: s.ACLCached, Waiting: s.Waiting}
}

// banList adapts auth's runtime banned list to the web API's.
type banList struct{ a *auth.Auth }

var banKinds = map[string]auth.BanKind{"client_id": auth.BanClientID, "username": auth.BanUsername, "ip": auth.BanAddress,
	"client_id+username": auth.BanClientUser, "client_id+ip": auth.BanClientAddress}

func (b banList) Ban(kind, value, reason string, until time.Time) error {
	k, ok := banKinds[kind]
	if !ok {
		return fmt.Errorf("unknown ban kind %q", kind)
	}
	return b.a.Ban(auth.Ban{Kind: k, Value: value, Reason: reason, Until: until})
}

func (b banList) Unban(kind, value string) (bool, error) {
	k, ok := banKinds[kind]
	if !ok {
		return false, fmt.Errorf("unknown ban kind %q", kind)
	}
	return b.a.Unban(k, value), nil
}

func (b banList) Bans() []web.Ban {
	var out []web.Ban
	for _, x := range b.a.Bans() {
		kind := string(x.Kind)
		for name, k := range banKinds {
			if k == x.Kind {
				kind = name
			}
		}
		out = append(out, web.Ban{Kind: kind, Value: x.Value, Reason: x.Reason, Until: x.Until, Created: x.At})
	}
	return out
}

// webOps are the operations of a run the web server offers beyond the
// broker's: the bridges, and the reload SIGHUP does.
type webOps struct {
	bridges *bridge.Manager
	reload  func() (reloadResult, error)
	cluster *cluster.Cluster // nil: not in a cluster
}

// webBridges adapts the bridge manager to the web API's Bridges.
type webBridges struct{ m *bridge.Manager }

func (b webBridges) Bridges() []web.Bridge {
	sts := b.m.Status()
	out := make([]web.Bridge, len(sts))
	for i, st := range sts {
		out[i] = bridgeView(st)
	}
	return out
}

// bridgeView is st as the web API shows it (TestViewsMirrorSources checks
// that it copies every field).
func bridgeView(st bridge.Status) web.Bridge {
	wb := web.Bridge{Name: st.Name, State: string(st.State), Address: st.Address, Addresses: st.Addresses,
		Protocol: st.Protocol, ClientID: st.ClientID, LocalID: st.LocalID, LoopPrevention: st.LoopPrevention,
		ConnectedSince: st.ConnectedSince, BackoffSeconds: st.Backoff.Seconds(), LastError: st.LastError,
		LastErrorAt: st.LastErrorAt, MessagesOut: st.MessagesOut, MessagesIn: st.MessagesIn,
		BytesOut: st.BytesOut, BytesIn: st.BytesIn, Links: st.Links, Reconnects: st.Reconnects,
		Failures: st.Failures, Dropped: st.Dropped, LoopsPrevented: st.LoopsPrevented,
		SubscriptionsRefused: st.SubscriptionsRefused, Queued: st.Queued, Inflight: st.Inflight,
		InflightIn: st.InflightIn, InflightTimeouts: st.InflightTimeouts, Topics: make([]web.BridgeRule, len(st.Topics))}
	for j, r := range st.Topics {
		wb.Topics[j] = web.BridgeRule{Topic: r.Topic, Direction: string(r.Direction), QoS: r.QoS,
			LocalPrefix: r.LocalPrefix, RemotePrefix: r.RemotePrefix}
	}
	return wb
}

func (b webBridges) StartBridge(name string) (bool, error) { return bridgeOp(b.m.Start(name)) }
func (b webBridges) StopBridge(name string) (bool, error)  { return bridgeOp(b.m.Stop(name)) }

func bridgeOp(err error) (found bool, _ error) {
	if errors.Is(err, bridge.ErrUnknown) {
		return false, nil
	}
	return true, err
}
