package web

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

const apiPrefix = "/api/v1"

// route is one API endpoint. path is exact, or a prefix when it ends in
// "/", in which case the handler gets the rest of the path (unescaped).
type route struct {
	method string
	path   string
	role   Role // "" needs no authentication
	h      func(w http.ResponseWriter, r *http.Request, p principal, rest string) error
}

// apiRouter dispatches /api/v1 requests: authentication, role and CSRF
// checks, then the handler; every error is JSON.
type apiRouter struct {
	s      *Server
	routes []route
}

func (s *Server) apiRoutes() *apiRouter {
	p := func(path string) string { return apiPrefix + path }
	// The pages whose handlers need only a few of the server's parts.
	retained := retainedAPI{broker: s.broker, log: s.log}
	bans := banAPI{bans: s.opts.Bans, log: s.log}
	bridges := bridgeAPI{bridges: s.opts.Bridges, reloadFn: s.opts.Reload, log: s.log}
	traces := traceAPI{traces: s.traces, log: s.log}
	topics := topicMetricAPI{broker: s.broker, rates: &s.topicRates, log: s.log}
	return &apiRouter{s: s, routes: []route{
		{"POST", p("/auth/login"), "", s.login},
		{"POST", p("/auth/logout"), RoleViewer, s.logout},
		{"GET", p("/auth/me"), "", s.me},
		{"POST", p("/auth/tokens"), RoleViewer, s.issueToken},
		{"GET", p("/auth/mqtt"), RoleViewer, s.mqttLogin},
		{"POST", p("/auth/password"), RoleViewer, s.changePassword},
		{"GET", p("/users"), RoleAdmin, s.listUsers},
		{"POST", p("/users"), RoleAdmin, s.createUser},
		{"GET", p("/users/"), RoleAdmin, s.getUser},
		{"PUT", p("/users/"), RoleAdmin, s.updateUser},
		{"DELETE", p("/users/"), RoleAdmin, s.deleteUser},
		{"GET", p("/openapi.json"), "", s.openAPI},
		{"GET", p("/overview"), RoleViewer, s.overview},
		{"GET", p("/alarms"), RoleViewer, s.listAlarms},
		{"GET", p("/nodes"), RoleViewer, s.listNodes},
		{"GET", p("/clients"), RoleViewer, s.listClients},
		{"GET", p("/clients/"), RoleViewer, s.getClient},
		{"POST", p("/clients/"), RoleAdmin, s.clientAction},
		{"DELETE", p("/clients/"), RoleAdmin, s.removeSession},
		{"GET", p("/subscriptions"), RoleViewer, s.listSubscriptions},
		{"GET", p("/retained"), RoleViewer, retained.listRetained},
		{"GET", p("/retained/"), RoleViewer, retained.getRetained},
		{"DELETE", p("/retained/"), RoleAdmin, retained.deleteRetained},
		{"GET", p("/banned"), RoleViewer, bans.listBans},
		{"POST", p("/banned"), RoleAdmin, bans.addBan},
		{"DELETE", p("/banned/"), RoleAdmin, bans.removeBan},
		{"POST", p("/publish"), RoleAdmin, s.publish},
		{"GET", p("/bridges"), RoleViewer, bridges.listBridges},
		{"GET", p("/bridges/"), RoleViewer, bridges.getBridge},
		{"POST", p("/bridges/"), RoleAdmin, bridges.bridgeAction},
		{"POST", p("/reload"), RoleAdmin, bridges.reload},
		{"GET", p("/traces"), RoleViewer, traces.listTraces},
		{"POST", p("/traces"), RoleAdmin, traces.startTrace},
		{"GET", p("/traces/"), RoleViewer, traces.getTrace},
		{"POST", p("/traces/"), RoleAdmin, traces.traceAction},
		{"DELETE", p("/traces/"), RoleAdmin, traces.deleteTrace},
		{"GET", p("/audit"), RoleAdmin, s.listAudit},
		{"GET", p("/topic-metrics"), RoleViewer, topics.listTopicMetrics},
		{"POST", p("/topic-metrics"), RoleAdmin, topics.addTopicMetric},
		{"DELETE", p("/topic-metrics/"), RoleAdmin, topics.removeTopicMetric},
	}}
}

func (a *apiRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	rt, rest, allowed, ok := a.lookup(r.Method, path)
	if ok {
		a.serve(w, r, rt, rest)
		return
	}
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeError(w, errorf(http.StatusMethodNotAllowed, "method_not_allowed",
			fmt.Sprintf("%s is not allowed on %s (allowed: %s)", r.Method, path, strings.Join(allowed, ", "))))
		return
	}
	writeError(w, notFound("no API endpoint "+path+" (docs/api.md lists them)"))
}

// lookup finds the route of method and path and the rest of the path
// after a prefix route; without one, allowed lists the methods the path
// takes.
func (a *apiRouter) lookup(method, path string) (_ route, rest string, allowed []string, ok bool) {
	for _, rt := range a.routes {
		rest = ""
		switch {
		case strings.HasSuffix(rt.path, "/"):
			if !strings.HasPrefix(path, rt.path) || len(path) == len(rt.path) {
				continue
			}
			rest = path[len(rt.path):]
		case path != rt.path:
			continue
		}
		if rt.method != method && (rt.method != "GET" || method != "HEAD") {
			allowed = append(allowed, rt.method)
			continue
		}
		return rt, rest, nil, true
	}
	return route{}, "", allowed, false
}

func (a *apiRouter) serve(w http.ResponseWriter, r *http.Request, rt route, rest string) {
	var p principal
	// Recorded on every return below, once p is known (audit.go).
	w, r, record := a.beginAudit(w, r, rt, rest)
	defer func() { record(p) }()
	if rt.role != "" {
		var err error
		p, err = a.s.auth.authenticate(r)
		switch {
		case errors.Is(err, errTooManyFailures):
			writeError(w, errorf(http.StatusTooManyRequests, "too_many_failures", err.Error()))
			return
		case err != nil:
			writeError(w, errorf(http.StatusUnauthorized, "unauthorized", err.Error()))
			return
		}
		if !p.Role.allows(rt.role) {
			writeError(w, errorf(http.StatusForbidden, "forbidden", fmt.Sprintf("%s needs the %s role; %s has %s", describe(r), rt.role, p.User, p.Role)))
			return
		}
		if err := checkCSRF(r, p); err != nil {
			writeError(w, errorf(http.StatusForbidden, "csrf", err.Error()))
			return
		}
	}
	if err := rt.h(w, r, p, rest); err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			a.s.log.Error("api handler failed", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
		}
		writeError(w, err)
	}
}

func describe(r *http.Request) string { return r.Method + " " + r.URL.Path }

// Request body limits: a login is a user name and a password, a publish
// carries a payload of up to maxPublishBody, everything else is small.
const (
	maxLoginBody   = 16 << 10
	maxBody        = 64 << 10
	maxPublishBody = 2 << 20 // a 1 MiB payload as base64, with room for the rest
)

// decodeBody reads a JSON body of at most limit bytes into v: Content-Type
// application/json (which a cross-site form cannot send), no unknown
// fields. A larger body is a 413, one not sent within the server's
// ReadTimeout a 408; both close the connection (http.MaxBytesReader, and
// net/http after a read error), so the rest is not read.
func decodeBody(log *zap.Logger, w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/json" {
		return errorf(http.StatusUnsupportedMediaType, "unsupported_media_type", "send the body as Content-Type: application/json")
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var tooLarge *http.MaxBytesError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tooLarge):
		log.Info("request body refused", zap.String("reason", "too large"), zap.Int64("limit", limit),
			zap.String("path", r.URL.Path), zap.String("remote", r.RemoteAddr))
		return errorf(http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body exceeds %d bytes", limit))
	case errors.Is(err, os.ErrDeadlineExceeded):
		log.Info("request body refused", zap.String("reason", "too slow"),
			zap.String("path", r.URL.Path), zap.String("remote", r.RemoteAddr))
		w.Header().Set("Connection", "close")
		return errorf(http.StatusRequestTimeout, "timeout", "the body did not arrive in time")
	}
	return badRequest("invalid JSON body: " + err.Error())
}

// ---- authentication ----

type meJSON struct {
	Authenticated bool      `json:"authenticated"`
	User          string    `json:"user"`
	Role          Role      `json:"role"`
	Method        string    `json:"auth"`
	CSRFToken     string    `json:"csrf_token,omitempty"`
	Expires       time.Time `json:"expires_at,omitzero"`
}

func (s *Server) login(w http.ResponseWriter, r *http.Request, _ principal, _ string) error {
	var body struct {
		Username string `json:"username"`
		Password string `json:"password"`
		APIKey   string `json:"api_key"`
	}
	if err := decodeBody(s.log, w, r, maxLoginBody, &body); err != nil {
		return err
	}
	if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r) {
		return errorf(http.StatusForbidden, "csrf", "cross-origin login from "+o+" refused")
	}
	noteAudit(r, func(n *auditNote) {
		// The user name tried, never the password or key.
		n.user, n.auth = body.Username, "password"
		if body.APIKey != "" {
			n.user, n.auth = "", methodAPIKey
		}
	})
	id, g, err := s.auth.login(r, body.Username, body.Password, body.APIKey)
	switch {
	case errors.Is(err, errTooManyFailures):
		s.log.Warn("dashboard login refused: too many failures from this address", zap.String("user", body.Username), zap.String("remote", r.RemoteAddr))
		return errorf(http.StatusTooManyRequests, "too_many_failures", err.Error())
	case err != nil:
		s.log.Warn("dashboard login failed", zap.String("user", body.Username), zap.String("remote", r.RemoteAddr))
		return errorf(http.StatusUnauthorized, "unauthorized", "wrong user name or password")
	}
	noteAudit(r, func(n *auditNote) { n.user = g.user })
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", HttpOnly: true,
		Secure: s.opts.TLS != nil, SameSite: http.SameSiteStrictMode, Expires: g.expires})
	s.log.Info("dashboard login", zap.String("user", g.user), zap.String("role", string(g.role)), zap.String("remote", r.RemoteAddr))
	writeJSON(w, http.StatusOK, meJSON{Authenticated: true, User: g.user, Role: g.role, Method: methodSession, CSRFToken: g.csrf, Expires: g.expires})
	return nil
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, _ principal, _ string) error {
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.auth.logout(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true,
		Secure: s.opts.TLS != nil, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	writeJSON(w, http.StatusOK, map[string]bool{"logged_out": true})
	return nil
}

// me says who the request's credentials belong to. Without credentials it
// answers 200 {"authenticated": false}, so the dashboard can ask before
// showing its login page; wrong credentials are a 401 as everywhere.
func (s *Server) me(w http.ResponseWriter, r *http.Request, _ principal, _ string) error {
	p, err := s.auth.authenticate(r)
	switch {
	case errors.Is(err, errUnauthenticated):
		writeJSON(w, http.StatusOK, map[string]bool{"authenticated": false})
		return nil
	case errors.Is(err, errTooManyFailures):
		return errorf(http.StatusTooManyRequests, "too_many_failures", err.Error())
	case err != nil:
		return errorf(http.StatusUnauthorized, "unauthorized", err.Error())
	}
	writeJSON(w, http.StatusOK, meJSON{Authenticated: true, User: p.User, Role: p.Role, Method: p.Method, CSRFToken: p.CSRF})
	return nil
}

// Bearer tokens live at most maxTokenTTL.
const (
	defaultTokenTTL = time.Hour
	maxTokenTTL     = 7 * 24 * time.Hour
)

func (s *Server) issueToken(w http.ResponseWriter, r *http.Request, p principal, _ string) error {
	var body struct {
		Role Role   `json:"role"`
		TTL  string `json:"ttl"`
	}
	if err := decodeBody(s.log, w, r, maxBody, &body); err != nil {
		return err
	}
	role := body.Role
	switch {
	case role == "":
		role = p.Role
	case role != RoleViewer && role != RoleAdmin:
		return badRequest(fmt.Sprintf("role %q: want viewer or admin", role))
	case !p.Role.allows(role):
		return errorf(http.StatusForbidden, "forbidden", fmt.Sprintf("a %s cannot issue %s tokens", p.Role, role))
	}
	ttl := defaultTokenTTL
	if body.TTL != "" {
		d, err := time.ParseDuration(body.TTL)
		if err != nil || d < time.Minute || d > maxTokenTTL {
			return badRequest(fmt.Sprintf("ttl %q: want a duration from 1m to %v", body.TTL, maxTokenTTL))
		}
		ttl = d
	}
	tok, g := s.auth.issueToken(p, role, ttl)
	writeJSON(w, http.StatusCreated, map[string]any{"token": tok, "role": g.role, "expires_at": g.expires})
	return nil
}

// mqttLogin gives the caller an MQTT user name and a short-lived password
// with its role, for the dashboard's own MQTT connections (mqttauth.go).
func (s *Server) mqttLogin(w http.ResponseWriter, _ *http.Request, p principal, _ string) error {
	user, pass, exp := s.opts.MQTTTokens.Issue(p.Role, p.User, DashboardMQTTTTL)
	writeJSON(w, http.StatusOK, map[string]any{"username": user, "password": pass, "expires_at": exp, "role": p.Role})
	return nil
}

// ---- overview ----

type listenerJSON struct {
	Listener
	Connections int    `json:"connections"`
	Connects    int64  `json:"connects"`      // CONNECTs accepted since start
	URL         string `json:"url,omitempty"` // ws and wss: what a browser on this page dials
	// HandshakeFailures counts the connections given up before MQTT, by
	// reason; only the reasons seen.
	HandshakeFailures map[string]int64 `json:"handshake_failures,omitempty"`
	CertNotAfter      time.Time        `json:"certificate_not_after,omitzero"`
}

type totalsJSON struct {
	Connected       int64            `json:"connected"`
	MaxConnected    int64            `json:"max_connected"` // most open at once since start
	Sessions        int              `json:"sessions"`
	OfflineSessions int              `json:"offline_sessions"`
	SessionsExpired int64            `json:"sessions_expired"`
	Connects        int64            `json:"connects"`
	MessagesIn      int64            `json:"messages_in"`
	MessagesOut     int64            `json:"messages_out"`
	MessagesInQoS   [3]int64         `json:"messages_in_by_qos"`
	MessagesOutQoS  [3]int64         `json:"messages_out_by_qos"`
	BytesIn         int64            `json:"bytes_in"`
	BytesOut        int64            `json:"bytes_out"`
	Deliveries      int64            `json:"deliveries"`
	Dropped         int64            `json:"dropped"`
	DroppedBy       map[string]int64 `json:"dropped_by_cause"`
	Disconnects     map[string]int64 `json:"disconnects_by_reason"`
	Subscriptions   int64            `json:"subscriptions"`
	Retained        int              `json:"retained"` // clients' retained messages, $SYS not included
	Queued          int64            `json:"queued"`
	Inflight        int64            `json:"inflight"`
	AuthFailures    int64            `json:"auth_failures"`
}

// maxHistory bounds the points of one overview: an hour at 5 s a point,
// a day at 2 minutes.
const maxHistory = 720

func (s *Server) overview(w http.ResponseWriter, r *http.Request, _ principal, _ string) error {
	q := r.URL.Query()
	n, step := 120, 1
	if v := q.Get("step"); v != "" {
		st, err := strconv.Atoi(v)
		if err != nil || st < 1 || st > int(historySpan/sampleInterval) {
			return badRequest(fmt.Sprintf("step %q: want 1 to %d seconds a point", v, int(historySpan/sampleInterval)))
		}
		step = st
	}
	// Up to an hour comes from the one-second samples; whole minutes a
	// point reach back a day, from the one-minute points.
	hour, day := int(historySpan/sampleInterval), int(minuteSpan/time.Second)
	if v := q.Get("history"); v != "" {
		h, err := strconv.Atoi(v)
		if err != nil || h < 0 || h > maxHistory || h*step > hour && (step%60 != 0 || h*step > day) {
			return badRequest(fmt.Sprintf("history %q: want 0 to %d points, at most %v with step %d (%v with a step of whole minutes)",
				v, maxHistory, historySpan, step, minuteSpan))
		}
		n = h
	}
	history, span := s.sampler.history(n, step), hour
	if n*step > hour {
		history, span = s.sampler.minuteHistory(n, step/60), day
	}
	st := s.broker.Stats()
	now := time.Now()
	cur := sampleOf(st, now)
	byListener := s.broker.ConnectionsByListener()
	lns := make([]listenerJSON, 0, len(s.opts.Listeners))
	for _, l := range s.opts.Listeners {
		lj := listenerJSON{Listener: l, Connections: byListener[l.Name], Connects: st.ConnectsByListener[l.Name], URL: browserURL(l, r)}
		if l.HandshakeFailures != nil {
			for reason, n := range l.HandshakeFailures() {
				if n > 0 {
					if lj.HandshakeFailures == nil {
						lj.HandshakeFailures = map[string]int64{}
					}
					lj.HandshakeFailures[reason] = n
				}
			}
		}
		if l.CertNotAfter != nil {
			lj.CertNotAfter = l.CertNotAfter()
		}
		lns = append(lns, lj)
	}
	started := s.broker.StartTime()
	out := map[string]any{
		"version":        s.opts.Version,
		"go_version":     runtime.Version(),
		"started_at":     started,
		"uptime_seconds": int64(now.Sub(started) / time.Second),
		"listeners":      lns,
		"totals": totalsJSON{Connected: st.Connected, MaxConnected: st.MaxConnected, Sessions: st.Sessions,
			OfflineSessions: st.OfflineSessions, SessionsExpired: st.SessionsExpired, Connects: st.Connects,
			MessagesIn: st.MessagesIn, MessagesOut: st.MessagesOut, MessagesInQoS: st.MessagesInQoS, MessagesOutQoS: st.MessagesOutQoS,
			BytesIn: st.BytesIn, BytesOut: st.BytesOut, Deliveries: st.Deliveries, Dropped: st.TotalDropped(),
			DroppedBy: st.Dropped, Disconnects: st.Disconnects, Subscriptions: st.Subscriptions, Retained: st.Retained,
			Queued: st.Queued, Inflight: st.Inflight, AuthFailures: st.AuthFailures},
		"rates":           s.sampler.rates(cur, 5*time.Second),
		"history":         history,
		"history_step":    step,
		"history_seconds": span,
		"limits":          map[string]any{"max_connections": s.broker.Options().MaxConnections},
		"node":            s.node.read(s.opts.Store),
	}
	if s.opts.Peers != nil {
		out["cluster_node"] = s.opts.Node // absent outside a cluster: the dashboard shows no Nodes page
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// browserURL is the ws:// or wss:// URL of a WebSocket listener as seen
// by the browser that asked: a listener on every interface is reached by
// the host name the page came from.
func browserURL(l Listener, r *http.Request) string {
	var scheme string
	switch l.Transport {
	case "ws":
		scheme = "ws"
	case "wss":
		scheme = "wss"
	default:
		return ""
	}
	host, port, err := net.SplitHostPort(l.Address)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = r.Host
		if h, _, err := net.SplitHostPort(r.Host); err == nil {
			host = h
		}
		host = strings.Trim(host, "[]")
	}
	p := l.Path
	if p == "" {
		p = "/mqtt"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + p
}

// ---- paging ----

type page struct{ offset, limit int }

const (
	defaultLimit = 50
	maxLimit     = 1000
)

func parseLimit(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return defaultLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxLimit {
		return 0, badRequest(fmt.Sprintf("limit %q: want 1 to %d", v, maxLimit))
	}
	return n, nil
}

// parsePage reads limit and offset, for the short lists (bans) that are
// copied whole anyway.
func parsePage(r *http.Request) (page, error) {
	limit, err := parseLimit(r)
	pg := page{limit: limit}
	if err != nil {
		return pg, err
	}
	if v := r.URL.Query().Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return pg, badRequest(fmt.Sprintf("offset %q: want 0 or more", v))
		}
		pg.offset = n
	}
	return pg, nil
}

// paged is a page of a short list: total counts every match, items this page's.
type paged[T any] struct {
	Total  int `json:"total"`
	Offset int `json:"offset"`
	Limit  int `json:"limit"`
	Items  []T `json:"items"`
}

func pageOf[T any](all []T, pg page) paged[T] {
	lo := min(pg.offset, len(all))
	hi := min(lo+pg.limit, len(all))
	items := all[lo:hi]
	if items == nil {
		items = []T{}
	}
	return paged[T]{Total: len(all), Offset: pg.offset, Limit: pg.limit, Items: items}
}

// cursorPage is a page of a list that can be large (clients,
// subscriptions, retained messages): it pages in a fixed order from a
// cursor, so a page costs its own items, never the whole list. Next is
// the cursor of the following page (pass it as after=); it is absent on
// the last page. Total is absent when counting the matches would cost
// more than the page (core.DefaultScanBudget). A condition that no index
// answers is checked on at most that many items per request: such a page
// can come back short, or empty, with a Next that continues the search.
type cursorPage[T any] struct {
	Total *int   `json:"total,omitempty"`
	Limit int    `json:"limit"`
	Items []T    `json:"items"`
	Next  string `json:"next,omitempty"`
}

func newCursorPage[T any](total, limit int, items []T) cursorPage[T] {
	p := cursorPage[T]{Limit: limit, Items: items}
	if total >= 0 {
		p.Total = &total
	}
	if p.Items == nil {
		p.Items = []T{}
	}
	return p
}

// Cursors are opaque to clients: a letter naming the list, then the key
// of the last item (client id; topic; client id and filter), joined by
// NUL (which no client id, topic or filter holds) and base64url-encoded.
func encodeCursor(list byte, key ...string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(string(list) + strings.Join(key, "\x00")))
}

// parseCursor reads limit and after=, the cursor of list with n key
// parts ("" parts from the first page). offset is refused, except 0: it
// would cost the whole list up to the offset.
func parseCursor(r *http.Request, list byte, n int) (limit int, key []string, err error) {
	if limit, err = parseLimit(r); err != nil {
		return 0, nil, err
	}
	q := r.URL.Query()
	if v := q.Get("offset"); v != "" && v != "0" {
		return 0, nil, badRequest("offset: this list pages by cursor: pass after= the next of the previous page")
	}
	key = make([]string, n)
	v := q.Get("after")
	if v == "" {
		return limit, key, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(b) == 0 || b[0] != list {
		return 0, nil, badRequest(fmt.Sprintf("after %q: not a cursor of this list (pass the next of a previous page)", v))
	}
	if key = strings.Split(string(b[1:]), "\x00"); len(key) != n {
		return 0, nil, badRequest(fmt.Sprintf("after %q: not a cursor of this list (pass the next of a previous page)", v))
	}
	return limit, key, nil
}

// ---- clients ----

type clientJSON struct {
	ClientID        string                  `json:"client_id"`
	Username        string                  `json:"username"`
	Connected       bool                    `json:"connected"`
	Remote          string                  `json:"remote,omitempty"`
	Listener        string                  `json:"listener,omitempty"`
	Transport       string                  `json:"transport,omitempty"`
	ProtocolVersion byte                    `json:"protocol_version"`
	Protocol        string                  `json:"protocol"`
	KeepAlive       int64                   `json:"keepalive_seconds"`
	ConnectedAt     time.Time               `json:"connected_at,omitzero"`
	SessionExpiry   uint32                  `json:"session_expiry_seconds"`
	Inflight        int                     `json:"inflight"`
	Queued          int                     `json:"queued"`
	QueuedBytes     int64                   `json:"queued_bytes"`
	core.Traffic                            // messages_in, messages_out, bytes_in, bytes_out
	Will            *willJSON               `json:"will,omitempty"`
	WillPending     bool                    `json:"will_pending,omitempty"`
	TLS             *core.TLSInfo           `json:"tls,omitempty"`
	Subscriptions   []core.SubscriptionInfo `json:"subscriptions,omitempty"`
	Node            string                  `json:"node,omitempty"` // in a cluster: the node the client is on
}

type willJSON struct {
	Topic         string `json:"topic"`
	QoS           byte   `json:"qos"`
	Retain        bool   `json:"retain"`
	Size          int    `json:"size"`
	DelaySeconds  uint32 `json:"delay_seconds,omitempty"`
	ExpirySeconds int64  `json:"expiry_seconds,omitempty"`
}

func (s *Server) clientJSON(ci core.ClientInfo) clientJSON {
	c := clientJSON{ClientID: ci.ClientID, Username: ci.Username, Connected: ci.Connected, Remote: ci.Remote,
		Listener: ci.Listener, ProtocolVersion: ci.ProtocolVersion, Protocol: protocolName(ci.ProtocolVersion),
		KeepAlive: int64(ci.KeepAlive / time.Second), ConnectedAt: ci.ConnectedAt, SessionExpiry: ci.SessionExpiry,
		Inflight: ci.Inflight, Queued: ci.Queued, QueuedBytes: ci.QueuedBytes, Traffic: ci.Traffic, WillPending: ci.WillPending,
		TLS: ci.TLS, Subscriptions: ci.Subscriptions, Node: s.opts.Node}
	if w := ci.Will; w != nil {
		c.Will = &willJSON{Topic: w.Topic, QoS: w.QoS, Retain: w.Retain, Size: w.Size, DelaySeconds: w.Delay,
			ExpirySeconds: int64(w.Expiry / time.Second)}
	}
	for _, l := range s.opts.Listeners {
		if l.Name == ci.Listener {
			c.Transport = l.Transport
		}
	}
	return c
}

func protocolName(v byte) string {
	switch v {
	case 3:
		return "3.1"
	case 4:
		return "3.1.1"
	case 5:
		return "5.0"
	}
	return ""
}

func (s *Server) listClients(w http.ResponseWriter, r *http.Request, _ principal, _ string) error {
	limit, after, err := parseCursor(r, 'c', 1)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	username, listener, search := q.Get("username"), q.Get("listener"), strings.ToLower(q.Get("q"))
	var version byte
	if v := q.Get("protocol_version"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 3 || n > 5 {
			return badRequest(fmt.Sprintf("protocol_version %q: want 3 (3.1), 4 (3.1.1) or 5", v))
		}
		version = byte(n)
	}
	var connected *bool
	if v := q.Get("connected"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return badRequest(fmt.Sprintf("connected %q: want true or false", v))
		}
		connected = &b
	}
	// Sessions are indexed by client id only; sorting by another column
	// would copy and sort them all on every request.
	if v := q.Get("sort"); v != "" && v != "client_id" {
		return badRequest(fmt.Sprintf("sort %q: clients are listed in client id order only (sort=client_id, order=asc or desc); filter with username, listener, protocol_version, connected or q", v))
	}
	order := q.Get("order")
	if order != "" && order != "asc" && order != "desc" {
		return badRequest(fmt.Sprintf("order %q: want asc or desc", order))
	}
	cq := core.ClientQuery{IDPrefix: q.Get("client_id"), After: after[0], Desc: order == "desc", Limit: limit}
	if username != "" || listener != "" || version != 0 || connected != nil || search != "" {
		cq.Match = func(ci *core.ClientInfo) bool {
			switch {
			case username != "" && ci.Username != username,
				listener != "" && ci.Listener != listener,
				version != 0 && ci.ProtocolVersion != version,
				connected != nil && ci.Connected != *connected,
				search != "" && !strings.Contains(strings.ToLower(ci.ClientID), search) &&
					!strings.Contains(strings.ToLower(ci.Username), search) && !strings.Contains(ci.Remote, search):
				return false
			}
			return true
		}
	}
	p := s.broker.ClientsPage(cq)
	items := make([]clientJSON, len(p.Clients))
	for i, ci := range p.Clients {
		items[i] = s.clientJSON(ci)
	}
	out := newCursorPage(p.Total, limit, items)
	if p.More {
		out.Next = encodeCursor('c', p.Next)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getClient serves GET /clients/{id}; in a cluster, a client on another
// node comes from there (remoteClient).
func (s *Server) getClient(w http.ResponseWriter, r *http.Request, p principal, id string) error {
	ci, ok := s.broker.Client(id)
	if !ok {
		return s.remoteClient(w, r, p, id)
	}
	writeJSON(w, http.StatusOK, s.clientJSON(ci))
	return nil
}

// clientAction serves POST /clients/{id}/disconnect.
func (s *Server) clientAction(w http.ResponseWriter, r *http.Request, p principal, rest string) error {
	id, ok := strings.CutSuffix(rest, "/disconnect")
	if !ok || id == "" {
		return notFound("no API endpoint " + r.URL.Path + " (POST " + apiPrefix + "/clients/{id}/disconnect)")
	}
	ci, found := s.broker.Client(id)
	if !found {
		return notFound(fmt.Sprintf("client %q not found", id))
	}
	if !ci.Connected || !s.broker.Disconnect(id) {
		return errorf(http.StatusConflict, "not_connected", fmt.Sprintf("client %q is not connected", id))
	}
	s.log.Info("client disconnected by operator", zap.String("client_id", id), zap.String("by", p.User))
	writeJSON(w, http.StatusOK, map[string]any{"client_id": id, "disconnected": true})
	return nil
}

// removeSession serves DELETE /clients/{id}: the client's session ends,
// whoever owns it — connection closed, subscriptions and queued messages
// discarded. It is how an operator frees a client id that session owner
// checks keep from everyone else.
func (s *Server) removeSession(w http.ResponseWriter, r *http.Request, p principal, id string) error {
	if id == "" {
		return notFound("DELETE " + apiPrefix + "/clients/{id}")
	}
	if !s.broker.RemoveSession(id) {
		return notFound(fmt.Sprintf("client %q has no session", id))
	}
	s.log.Info("session removed by operator", zap.String("client_id", id), zap.String("by", p.User))
	writeJSON(w, http.StatusOK, map[string]any{"client_id": id, "removed": true})
	return nil
}

// ---- subscriptions ----

func (s *Server) listSubscriptions(w http.ResponseWriter, r *http.Request, p principal, _ string) error {
	limit, after, err := parseCursor(r, 's', 2)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	filter, topic := q.Get("filter"), q.Get("topic")
	if topic != "" {
		if err := core.ValidTopic(topic); err != nil {
			return badRequest(fmt.Sprintf("topic %q: %v", topic, err))
		}
	}
	sq := core.SubscriptionQuery{IDPrefix: q.Get("client_id"), AfterClient: after[0], AfterFilter: after[1], Limit: limit}
	if filter != "" || topic != "" {
		sq.Match = func(sub *core.SubscriptionInfo) bool {
			if !strings.Contains(sub.Filter, filter) {
				return false
			}
			if topic == "" {
				return true
			}
			f := []byte(sub.Filter)
			if _, inner, ok, _ := codec.ParseShared(f); ok {
				f = inner
			}
			return codec.Match(f, []byte(topic))
		}
	}
	if node := q.Get("node"); node != "" && node != s.opts.Node {
		return s.nodeSubscriptions(w, r, p, node)
	}
	sp := s.broker.SubscriptionsPage(sq)
	local := nodePage{items: make([]subscriptionJSON, len(sp.Subscriptions))}
	for i, sub := range sp.Subscriptions {
		local.items[i] = subscriptionJSON{SubscriptionInfo: sub, Node: s.opts.Node}
	}
	if sp.Total >= 0 {
		local.total = &sp.Total
	}
	if sp.More {
		local.next = []string{sp.NextClient, sp.NextFilter}
	}
	if s.opts.Peers != nil && !forwarded(r) && q.Get("node") == "" {
		writeJSON(w, http.StatusOK, s.gatherSubscriptions(r, p, local, limit))
		return nil
	}
	writeJSON(w, http.StatusOK, mergePages([]nodePage{local}, limit))
	return nil
}

// nodeSubscriptions serves ?node=NAME, another node's subscriptions only.
func (s *Server) nodeSubscriptions(w http.ResponseWriter, r *http.Request, p principal, node string) error {
	if s.opts.Peers == nil || forwarded(r) || !slices.ContainsFunc(s.opts.Peers.Nodes(), func(n Node) bool { return n.Node == node }) {
		return notFound(fmt.Sprintf("node %q: no such node in this cluster", node))
	}
	np, err := s.askSubscriptions(node, forwardedRequest{Op: "subscriptions", Query: r.URL.RawQuery, User: p.User})
	if err != nil {
		return unavailable(node, err)
	}
	limit, _ := parseLimit(r)
	writeJSON(w, http.StatusOK, mergePages([]nodePage{np}, limit))
	return nil
}

// ---- publish ----

func (s *Server) publish(w http.ResponseWriter, r *http.Request, p principal, _ string) error {
	var body struct {
		Topic         string  `json:"topic"`
		Payload       *string `json:"payload"`
		PayloadBase64 *string `json:"payload_base64"`
		QoS           byte    `json:"qos"`
		Retain        bool    `json:"retain"`
	}
	if err := decodeBody(s.log, w, r, maxPublishBody, &body); err != nil {
		return err
	}
	noteAudit(r, func(n *auditNote) { n.target = body.Topic }) // the topic, never the payload
	if err := core.ValidTopic(body.Topic); err != nil {
		return badRequest(fmt.Sprintf("topic %q: %v", body.Topic, err))
	}
	if body.QoS > 2 {
		return badRequest(fmt.Sprintf("qos %d: want 0, 1 or 2", body.QoS))
	}
	var payload []byte
	switch {
	case body.Payload != nil && body.PayloadBase64 != nil:
		return badRequest("give payload or payload_base64, not both")
	case body.Payload != nil:
		payload = []byte(*body.Payload)
	case body.PayloadBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*body.PayloadBase64)
		if err != nil {
			return badRequest("payload_base64: " + err.Error())
		}
		payload = b
	}
	if err := s.broker.Publish(body.Topic, payload, body.QoS, body.Retain); err != nil {
		return badRequest(err.Error())
	}
	writeJSON(w, http.StatusOK, map[string]any{"topic": body.Topic, "size": len(payload), "qos": body.QoS, "retain": body.Retain, "published": true})
	return nil
}
