// Package web is xmq's HTTP side: the dashboard (static files embedded
// with embed.FS, nothing loaded from the internet), the admin REST API
// under /api/v1, Prometheus metrics at /metrics and the health probes
// /healthz and /readyz, all on one HTTP(S) server.
//
// The package reads the broker through the Broker interface, which
// *core.Server satisfies with its read-only views (ClientsPage, Client,
// SubscriptionsPage, RetainedPage, Stats …) and its operator actions
// (Disconnect, RemoveSession, DeleteRetained, Publish). The lists page by
// cursor over core's ordered indexes, so a request costs its page,
// whatever the broker holds.
//
// Nothing before login can hold the server: headers must arrive within
// ReadHeaderTimeout, a whole request (body included) within ReadTimeout,
// bodies are bounded per endpoint (http.MaxBytesReader), headers by
// MaxHeaderBytes. It never touches listeners: the composition root
// tells it which listeners exist (Options.Listeners) so the dashboard's
// own MQTT client knows where to connect over WebSocket.
//
// Metrics cost nothing on the message path: the collector reads core's
// Stats snapshot when Prometheus scrapes. A sampler goroutine takes one
// snapshot a second into a ring of an hour for the overview's rates and
// charts, and sums each minute into a point of the last day's history,
// which Options.HistoryFile keeps across restarts. What only the composition root knows — each listener's handshake
// failures and certificate end, the store's disk use — comes in through
// Options as functions, so web imports neither listeners nor the store.
// /api/v1/openapi.json describes the API; a test keeps it equal to the
// routes.
//
// Alarms (alarms.go) are the conditions of deploy/prometheus/alerts.yml's
// rules that hold now, computed from the same Options functions and
// snapshots as the metrics; the sampler's tick evaluates them each second
// so that each alarm's since is known even when nobody asks. A test keeps
// every alarm's rule a rule of that file.
//
// Authentication: users log in to a session cookie whose unsafe requests
// must carry the session's CSRF token; scripts use HTTP Basic with a
// user's credentials, an API key (X-API-Key or Authorization: Bearer) or
// a bearer token issued by the API. The users (users.go) are the
// configured admin (Options.AdminUser, its bcrypt hash from
// AdminPassword) and those admins add through the API, each a viewer or
// an admin with a bcrypt hash, kept in Options.UsersFile; a user's
// sessions and tokens end when it is deleted or its role or password
// changes. Every principal has a role, viewer (read-only) or admin. Nothing is
// served without credentials except /healthz, /readyz, the static files
// and, only when Options.AllowAnonymousLoopback is set, API requests from
// a loopback address to a loopback host name.
//
// The dashboard's own MQTT connections (the overview's $SYS feed, the MQTT
// client page) log in with the session: GET /api/v1/auth/mqtt gives a user
// name "$dashboard:ROLE:USER" and a password valid for DashboardMQTTTTL,
// HMAC-signed with a per-process random key (MQTTTokens). The composition
// root passes MQTTTokens.Wrap of the broker's Authenticator and Authorizer
// to core: those user names are checked there and nowhere else, a viewer
// may subscribe to $SYS/# only, an admin may do anything; every other
// client goes to the wrapped ones unchanged. Wrap finds the wrapped
// Authenticator's optional capabilities (core's LoginAuthenticator,
// EnhancedAuthenticator, ConnectionObserver) on it or behind it through
// Unwrap (authAs, as net/http's ResponseController finds a Flusher), and
// its own wrappers have Unwrap, so wrappers forward Unwrap rather than
// multiply by the interfaces they might carry.
//
// The audit log (audit.go) records every unsafe API request made with
// accepted credentials, and every login, in a ring of the last
// auditEntries and as a line of the "audit" logger. apiRouter.serve does
// it for all routes; auditAction names the action from the route, and
// the few handlers whose target is in the body add it with noteAudit.
//
// In a cluster (Options.Peers, nodes.go) the API answers for every node:
// GET /api/v1/nodes lists them from their heartbeats, and the client and
// subscription lookups reach the other nodes over the cluster's NATS once
// this node has authenticated the request and checked its role; a node
// asked (ServeForwarded) serves only those read-only lookups, from its
// own state, as a viewer.
//
// Goroutines: handlers run on net/http's goroutines and share the session
// store (guarded by its mutex), the sampler's ring and the audit ring
// (each guarded by its own mutex). Close stops the sampler; Shutdown stops the HTTP server too.
package web
