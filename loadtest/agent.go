package loadtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
)

// The agent protocol is JSON over HTTP, one job at a time:
//
//	GET  /v1/env                 the agent machine's Env
//	POST /v1/prepare   Job       connect and subscribe; answers {"id": …}
//	POST /v1/start?id=ID         run the measured phase; answers the CaseResult
//	GET  /v1/progress?id=ID      running totals for the controller's live line
//	POST /v1/close?id=ID         abandon a prepared job
//
// Histograms travel as exact sparse buckets, so the controller merges them;
// nothing is averaged. The protocol carries the broker password: run agents
// on a network you trust.

// Agent serves the agent protocol.
type Agent struct {
	log *zap.Logger
	mu  sync.Mutex
	id  string
	w   *Worker
}

// NewAgent returns an agent with no job.
func NewAgent(log *zap.Logger) *Agent {
	if log == nil {
		log = zap.NewNop()
	}
	return &Agent{log: log}
}

// Handler is the agent's HTTP handler.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/env", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, CollectEnv()) })
	mux.HandleFunc("POST /v1/prepare", a.prepare)
	mux.HandleFunc("POST /v1/start", a.start)
	mux.HandleFunc("GET /v1/progress", a.progress)
	mux.HandleFunc("POST /v1/close", a.close)
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (a *Agent) prepare(w http.ResponseWriter, r *http.Request) {
	var job Job
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&job); err != nil {
		http.Error(w, "bad job: "+err.Error(), http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	if a.id != "" {
		a.mu.Unlock()
		http.Error(w, "agent busy with job "+a.id, http.StatusConflict)
		return
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	a.id = id
	a.mu.Unlock()
	a.log.Info("preparing", zap.String("job", id), zap.String("case", job.Case), zap.String("mode", string(job.Options.Mode)))
	// The worker outlives this request: its connections stay open until
	// start or close.
	wk, err := Prepare(context.WithoutCancel(r.Context()), job, a.log)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.id != id {
		if wk != nil {
			wk.Close()
		}
		http.Error(w, "job closed while preparing", http.StatusConflict)
		return
	}
	if err != nil {
		a.id = ""
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	a.w = wk
	writeJSON(w, map[string]string{"id": id})
}

// take returns the job's worker and forgets it, so only one start runs.
func (a *Agent) take(id string) *Worker {
	a.mu.Lock()
	defer a.mu.Unlock()
	if id == "" || a.id != id || a.w == nil {
		return nil
	}
	w := a.w
	a.w, a.id = nil, ""
	return w
}

func (a *Agent) start(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	wk := a.w
	ok := wk != nil && a.id == r.URL.Query().Get("id")
	a.mu.Unlock()
	if !ok {
		http.Error(w, "no such job", http.StatusNotFound)
		return
	}
	res, err := wk.Start(r.Context())
	a.take(r.URL.Query().Get("id"))
	if err != nil && res == nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, res)
}

func (a *Agent) progress(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	wk := a.w
	ok := wk != nil && a.id == r.URL.Query().Get("id")
	a.mu.Unlock()
	if !ok {
		http.Error(w, "no such job", http.StatusNotFound)
		return
	}
	writeJSON(w, wk.Progress())
}

func (a *Agent) close(w http.ResponseWriter, r *http.Request) {
	if wk := a.take(r.URL.Query().Get("id")); wk != nil {
		wk.Close()
	}
	a.mu.Lock()
	if a.id == r.URL.Query().Get("id") {
		a.id = "" // closed while preparing: prepare sees it and cleans up
	}
	a.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// ServeAgent serves the agent protocol on addr until ctx ends. ready, if
// not nil, is called with the bound address.
func ServeAgent(ctx context.Context, addr string, log *zap.Logger, ready func(net.Addr)) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("loadtest: agent: %w", err)
	}
	a := NewAgent(log)
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second}
	if log != nil {
		log.Info("agent listening", zap.Stringer("address", l.Addr()))
	}
	if ready != nil {
		ready(l.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	a.mu.Lock()
	wk := a.w
	a.w, a.id = nil, ""
	a.mu.Unlock()
	if wk != nil {
		wk.Close()
	}
	return nil
}

// agentClient talks to one agent.
type agentClient struct {
	base string
	hc   *http.Client
}

func newAgentClient(addr string, hc *http.Client) *agentClient {
	base := addr
	if !bytes.Contains([]byte(addr), []byte("://")) {
		base = "http://" + addr
	}
	return &agentClient{base: base, hc: hc}
}

func (c *agentClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%w %s: %w", errAgent, c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%w %s: %s: %s", errAgent, c.base, resp.Status, bytes.TrimSpace(msg))
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%w %s: %w", errAgent, c.base, err)
	}
	return nil
}

func (c *agentClient) env(ctx context.Context) (Env, error) {
	var e Env
	err := c.do(ctx, http.MethodGet, "/v1/env", nil, &e)
	return e, err
}

func (c *agentClient) prepare(ctx context.Context, job Job) (string, error) {
	var out struct {
		ID string `json:"id"`
	}
	if err := c.do(ctx, http.MethodPost, "/v1/prepare", job, &out); err != nil {
		return "", err
	}
	if out.ID == "" {
		return "", errors.New("loadtest: agent " + c.base + " returned no job id")
	}
	return out.ID, nil
}

func (c *agentClient) start(ctx context.Context, id string) (*CaseResult, error) {
	var r CaseResult
	if err := c.do(ctx, http.MethodPost, "/v1/start?id="+id, nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func (c *agentClient) progress(ctx context.Context, id string) (Progress, error) {
	var p Progress
	err := c.do(ctx, http.MethodGet, "/v1/progress?id="+id, nil, &p)
	return p, err
}

func (c *agentClient) close(ctx context.Context, id string) {
	_ = c.do(ctx, http.MethodPost, "/v1/close?id="+id, nil, nil)
}
