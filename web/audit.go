package web

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// The audit log records who changed what through the API: every
// state-changing request (any method but GET and HEAD) whose credentials
// were accepted, whatever its outcome, and every dashboard login, failed
// or not. apiRouter.serve records it in one place, so a new route is
// audited without its handler knowing; auditAction names the action from
// the route. Only handlers whose target is in the body (publish, ban.add,
// trace.start, user.create, login) add it with noteAudit. Passwords are
// never recorded: an entry holds no part of a body but its target.
//
// Requests refused for missing or wrong credentials are not recorded
// (but a failed dashboard login is): they have no principal, and anyone
// able to reach the port could otherwise push the real entries out of
// the ring.

// auditEntries is how many entries the ring keeps; older ones live on in
// the broker's log only.
const auditEntries = 1000

// maxAuditTarget bounds a target (a client id or topic may be 64 KiB).
const maxAuditTarget = 256

// AuditEntry is one recorded admin action. It never holds a secret or a
// payload: the target is a client id, topic, ban, bridge or trace name.
type AuditEntry struct {
	Time    time.Time `json:"time"`
	User    string    `json:"user"`   // "admin", "key:NAME", "anonymous"; a failed login: the user name tried
	Auth    string    `json:"auth"`   // session, basic, api_key, bearer, anonymous; logins: password or api_key
	Remote  string    `json:"remote"` // the client's IP address
	Action  string    `json:"action"`
	Target  string    `json:"target,omitempty"`
	Status  int       `json:"status"`
	Outcome string    `json:"outcome"` // ok, refused (401, 403, 429) or failed
}

// auditLog keeps the latest entries in a ring and writes each one to the
// log. Its mutex guards ring, next and full.
type auditLog struct {
	log *zap.Logger

	mu   sync.Mutex
	ring []AuditEntry
	next int  // where the next entry goes
	full bool // ring has wrapped: every slot holds an entry
}

func newAuditLog(n int, log *zap.Logger) *auditLog {
	return &auditLog{log: log, ring: make([]AuditEntry, n)}
}

func (l *auditLog) add(e AuditEntry) {
	l.log.Info("admin action", zap.String("action", e.Action), zap.String("target", e.Target),
		zap.String("user", e.User), zap.String("auth", e.Auth), zap.String("remote", e.Remote),
		zap.Int("status", e.Status), zap.String("outcome", e.Outcome))
	l.mu.Lock()
	l.ring[l.next] = e
	l.next = (l.next + 1) % len(l.ring)
	l.full = l.full || l.next == 0
	l.mu.Unlock()
}

// latest returns up to n entries, newest first.
func (l *auditLog) latest(n int) []AuditEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	have := l.next
	if l.full {
		have = len(l.ring)
	}
	n = min(n, have)
	out := make([]AuditEntry, 0, n)
	for i := range n {
		out = append(out, l.ring[(l.next-1-i+len(l.ring))%len(l.ring)])
	}
	return out
}

// auditNote is what a handler adds to its request's entry: the target
// when it is in the body, and for logins the principal.
type auditNote struct {
	target     string
	user, auth string
}

type auditKey struct{}

// noteAudit lets a handler fill in its request's audit entry; outside an
// audited request it does nothing.
func noteAudit(r *http.Request, f func(*auditNote)) {
	if n, ok := r.Context().Value(auditKey{}).(*auditNote); ok {
		f(n)
	}
}

// audited reports whether apiRouter.serve records a request: every
// method but GET and HEAD changes something.
func audited(r *http.Request) bool {
	return r.Method != http.MethodGet && r.Method != http.MethodHead
}

// auditAction names the action of a request to rt, and its target when
// the path holds it. The names are stable: scripts filter on them.
func auditAction(rt route, rest string) (action, target string) {
	name, sub, _ := strings.Cut(rest, "/")
	switch rt.method + " " + strings.TrimPrefix(rt.path, apiPrefix) {
	case "POST /auth/login":
		return "login", ""
	case "POST /auth/logout":
		return "logout", ""
	case "POST /auth/tokens":
		return "token.issue", ""
	case "POST /auth/password":
		return "password.change", ""
	case "POST /users":
		return "user.create", ""
	case "PUT /users/":
		return "user.update", rest
	case "DELETE /users/":
		return "user.delete", rest
	case "POST /clients/":
		id, _ := strings.CutSuffix(rest, "/disconnect")
		return "client.disconnect", id
	case "DELETE /clients/":
		return "session.delete", rest
	case "DELETE /retained/":
		return "retained.delete", rest
	case "POST /banned":
		return "ban.add", ""
	case "DELETE /banned/":
		return "ban.delete", rest
	case "POST /publish":
		return "publish", ""
	case "POST /bridges/":
		return "bridge." + sub, name
	case "POST /reload":
		return "reload", ""
	case "POST /traces":
		return "trace.start", ""
	case "POST /traces/":
		return "trace." + sub, name
	case "DELETE /traces/":
		return "trace.delete", rest
	}
	// A route added without a name here is still recorded.
	return strings.ToLower(rt.method) + " " + strings.TrimPrefix(rt.path, apiPrefix), rest
}

func outcomeOf(status int) string {
	switch {
	case status < 400:
		return "ok"
	case status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusTooManyRequests:
		return "refused"
	}
	return "failed"
}

// statusWriter remembers the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// beginAudit prepares the recording of a request to rt: it returns the
// writer and request to serve with, and the function that records the
// entry once p is known (the zero principal: the request is not
// recorded, except a login).
func (a *apiRouter) beginAudit(w http.ResponseWriter, r *http.Request, rt route, rest string) (http.ResponseWriter, *http.Request, func(p principal)) {
	if !audited(r) {
		return w, r, func(principal) {}
	}
	sw := &statusWriter{ResponseWriter: w}
	note := &auditNote{}
	r = r.WithContext(context.WithValue(r.Context(), auditKey{}, note))
	return sw, r, func(p principal) {
		action, target := auditAction(rt, rest)
		user, auth := p.User, p.Method
		if action == "login" {
			user, auth = note.user, note.auth
		} else if user == "" {
			return
		}
		if note.target != "" {
			target = note.target
		}
		status := sw.status
		if status == 0 {
			// Every handler writes an answer; none written means it
			// panicked, and net/http answers 500.
			status = http.StatusInternalServerError
		}
		if action == "login" && status >= 400 {
			action = "login.failed"
		}
		if len(target) > maxAuditTarget {
			target = strings.ToValidUTF8(target[:maxAuditTarget], "") + "…"
		}
		a.s.audit.add(AuditEntry{Time: time.Now(), User: user, Auth: auth, Remote: remoteIP(r),
			Action: action, Target: target, Status: status, Outcome: outcomeOf(status)})
	}
}

// listAudit serves GET /audit: the latest entries, newest first.
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request, _ principal, _ string) error {
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > auditEntries {
			return badRequest("limit " + strconv.Quote(v) + ": want 1 to " + strconv.Itoa(auditEntries))
		}
		limit = n
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": s.audit.latest(limit), "limit": limit})
	return nil
}
