package web

import (
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

//go:embed static
var staticFiles embed.FS

// contentSecurityPolicy lets the dashboard load only its own files and
// open WebSockets to the broker's ws/wss listeners on other ports.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self' ws: wss:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// routes builds the top-level handler. /api/v1 has its own router (see
// api.go) so that client ids and topics, which may hold any character,
// reach the handlers unchanged; ServeMux would clean "//" out of them.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{
		ErrorLog: zap.NewStdLog(s.log.Named("metrics")), ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Degraded != nil {
			if err := s.opts.Degraded(); err != nil {
				writeJSON(w, http.StatusOK, map[string]string{"status": "degraded", "reason": err.Error()})
				return
			}
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	sub, _ := fs.Sub(staticFiles, "static")
	files := http.FileServerFS(sub)
	mux.Handle("GET /static/", http.StripPrefix("/static", files))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, sub, "index.html")
	})
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, sub, "favicon.svg")
	})
	api := s.apiRoutes()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		if s.opts.TLS != nil {
			h.Set("Strict-Transport-Security", "max-age=31536000")
		}
		if r.URL.Path == "/api" || strings.HasPrefix(r.URL.Path, "/api/") {
			h.Set("Cache-Control", "no-store")
			api.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// readyz answers 200 when Options.Ready says the broker serves, else 503.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.opts.Ready != nil {
		if err := s.opts.Ready(); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": err.Error()})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// apiError is an error with its HTTP status; the API answers it as
// {"error": {"status": 404, "code": "not_found", "message": "…"}}.
type apiError struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return e.Message }

func errorf(status int, code, msg string) *apiError {
	return &apiError{Status: status, Code: code, Message: msg}
}

func badRequest(msg string) *apiError { return errorf(http.StatusBadRequest, "bad_request", msg) }
func notFound(msg string) *apiError   { return errorf(http.StatusNotFound, "not_found", msg) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = errorf(http.StatusInternalServerError, "internal", err.Error())
	}
	if ae.Status == http.StatusUnauthorized {
		// Bearer, not Basic: a browser would otherwise pop up its own login
		// dialog and then send the credentials on every request, CSRF or not.
		w.Header().Set("WWW-Authenticate", `Bearer realm="xmq"`)
	}
	writeJSON(w, ae.Status, map[string]*apiError{"error": ae})
}
