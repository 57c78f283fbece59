package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/core"
)

// Traces: POST /api/v1/traces starts a core trace (every packet of the
// connections of a client id, user name or address, or on topics a filter
// matches) written to its own file in Options.TraceDir; the API lists,
// downloads, stops and deletes them, and the dashboard's Traces page does
// the same. A trace's facts are kept beside its file (NAME.json), so the
// traces of earlier runs are listed too.

// Tracer starts traces; *core.Server implements it.
type Tracer interface {
	StartTrace(spec core.TraceSpec, w io.Writer, done func(why string)) (*core.Trace, error)
}

var _ Tracer = (*core.Server)(nil)

// Trace limits.
const (
	// DefaultTraceDuration is a trace's duration when the request sets none.
	DefaultTraceDuration = 5 * time.Minute
	// MaxTraceDuration bounds a trace's duration.
	MaxTraceDuration = 24 * time.Hour
	// DefaultTraceMaxBytes is a trace's size limit when the request sets none.
	DefaultTraceMaxBytes = 16 << 20
	// MaxTraceMaxBytes bounds a trace's size limit.
	MaxTraceMaxBytes = 1 << 30
	// MaxRunningTraces bounds the traces running at once.
	MaxRunningTraces = 8
)

// traceInfo is a trace as the API shows it.
type traceInfo struct {
	Name       string    `json:"name"`
	ClientID   string    `json:"client_id,omitempty"`
	Username   string    `json:"username,omitempty"`
	IP         string    `json:"ip,omitempty"`
	Topic      string    `json:"topic,omitempty"`
	Payload    bool      `json:"payload"`
	MaxBytes   int64     `json:"max_bytes"`
	State      string    `json:"state"` // running or stopped
	StopReason string    `json:"stop_reason,omitempty"`
	Packets    int64     `json:"packets"`
	Bytes      int64     `json:"bytes"`
	StartedAt  time.Time `json:"started_at"`
	Until      time.Time `json:"until"`
	StoppedAt  time.Time `json:"stopped_at,omitzero"`
	StartedBy  string    `json:"started_by,omitempty"`
}

// traceManager owns the trace files and the running traces.
type traceManager struct {
	dir    string
	tracer Tracer
	log    *zap.Logger

	mu      sync.Mutex // guards running and the files' metadata
	running map[string]*runningTrace
}

type runningTrace struct {
	info traceInfo
	t    *core.Trace
	f    *os.File
}

func newTraceManager(dir string, tracer Tracer, log *zap.Logger) *traceManager {
	return &traceManager{dir: dir, tracer: tracer, log: log, running: map[string]*runningTrace{}}
}

var errNoTraces = errorf(http.StatusNotImplemented, "not_implemented", "this broker keeps no traces (no trace directory)")

// validTraceName checks a name that becomes a file name.
func validTraceName(name string) error {
	if name == "" || len(name) > 64 || name[0] == '.' {
		return fmt.Errorf("trace name %q: 1 to 64 letters, digits, '.', '-' or '_', not starting with '.'", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return fmt.Errorf("trace name %q: 1 to 64 letters, digits, '.', '-' or '_', not starting with '.'", name)
		}
	}
	return nil
}

func (m *traceManager) logPath(name string) string  { return filepath.Join(m.dir, name+".log") }
func (m *traceManager) metaPath(name string) string { return filepath.Join(m.dir, name+".json") }

// startTraceBody is POST /traces's body.
type startTraceBody struct {
	Name     string `json:"name"`
	ClientID string `json:"client_id"`
	Username string `json:"username"`
	IP       string `json:"ip"`
	Topic    string `json:"topic"`
	Duration string `json:"duration"`
	Payload  bool   `json:"payload"`
	MaxBytes int64  `json:"max_bytes"`
}

// start starts a trace as body asks.
func (m *traceManager) start(body startTraceBody, by string) (traceInfo, error) {
	spec := core.TraceSpec{ClientID: body.ClientID, Username: body.Username, TopicFilter: body.Topic, Payload: body.Payload,
		Duration: DefaultTraceDuration, MaxBytes: body.MaxBytes}
	if body.Duration != "" {
		d, err := time.ParseDuration(body.Duration)
		if err != nil || d <= 0 || d > MaxTraceDuration {
			return traceInfo{}, badRequest(fmt.Sprintf("duration %q: want a positive duration up to %v, such as 5m", body.Duration, MaxTraceDuration))
		}
		spec.Duration = d
	}
	if spec.MaxBytes == 0 {
		spec.MaxBytes = DefaultTraceMaxBytes
	}
	if spec.MaxBytes < 0 || spec.MaxBytes > MaxTraceMaxBytes {
		return traceInfo{}, badRequest(fmt.Sprintf("max_bytes %d: want 1 to %d", spec.MaxBytes, MaxTraceMaxBytes))
	}
	if body.IP != "" {
		p, err := netip.ParsePrefix(body.IP)
		if err != nil {
			a, aerr := netip.ParseAddr(body.IP)
			if aerr != nil {
				return traceInfo{}, badRequest(fmt.Sprintf("ip %q: want an address (10.0.0.5) or a prefix (10.0.0.0/24)", body.IP))
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		spec.IP = p.Masked()
	}
	if err := spec.Validate(); err != nil {
		return traceInfo{}, badRequest(strings.TrimPrefix(err.Error(), "core: "))
	}
	now := time.Now().UTC()
	name := body.Name
	if name == "" {
		name = "trace-" + now.Format("20060102-150405.000")
	}
	if err := validTraceName(name); err != nil {
		return traceInfo{}, badRequest(err.Error())
	}
	info := traceInfo{Name: name, ClientID: spec.ClientID, Username: spec.Username, Topic: spec.TopicFilter, Payload: spec.Payload,
		MaxBytes: spec.MaxBytes, State: "running", StartedAt: now, Until: now.Add(spec.Duration), StartedBy: by}
	if spec.IP.IsValid() {
		info.IP = spec.IP.String()
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.running) >= MaxRunningTraces {
		m.log.Info("trace refused: too many running", zap.Int("running", len(m.running)), zap.String("by", by))
		return traceInfo{}, errorf(http.StatusTooManyRequests, "too_many_traces",
			fmt.Sprintf("%d traces are running already: stop one first", MaxRunningTraces))
	}
	if _, err := os.Stat(m.metaPath(name)); err == nil || m.running[name] != nil {
		return traceInfo{}, errorf(http.StatusConflict, "exists", "a trace named "+name+" exists: delete it or choose another name")
	}
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return traceInfo{}, err
	}
	f, err := os.OpenFile(m.logPath(name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return traceInfo{}, err
	}
	rt := &runningTrace{info: info, f: f}
	if err := m.writeMeta(info); err != nil {
		_ = f.Close()
		_ = os.Remove(m.logPath(name))
		return traceInfo{}, err
	}
	m.running[name] = rt
	t, err := m.tracer.StartTrace(spec, f, func(why string) { m.finished(name, why) })
	if err != nil {
		delete(m.running, name)
		_ = f.Close()
		_ = os.Remove(m.logPath(name))
		_ = os.Remove(m.metaPath(name))
		return traceInfo{}, badRequest(strings.TrimPrefix(err.Error(), "core: "))
	}
	rt.t = t
	m.log.Info("trace started", zap.String("trace", name), zap.String("by", by), zap.String("client_id", spec.ClientID),
		zap.String("username", spec.Username), zap.String("ip", info.IP), zap.String("topic", spec.TopicFilter),
		zap.Duration("duration", spec.Duration), zap.Int64("max_bytes", spec.MaxBytes))
	return m.infoLocked(rt), nil
}

// finished runs when a trace has stopped (core's done): its file is closed
// and its facts written.
func (m *traceManager) finished(name, why string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rt := m.running[name]
	if rt == nil {
		return
	}
	info := m.infoLocked(rt)
	info.State, info.StopReason, info.StoppedAt = "stopped", why, time.Now().UTC()
	delete(m.running, name)
	_ = rt.f.Close()
	if err := m.writeMeta(info); err != nil {
		m.log.Warn("trace: cannot write its facts", zap.String("trace", name), zap.Error(err))
	}
	m.log.Info("trace stopped", zap.String("trace", name), zap.String("why", why), zap.Int64("packets", info.Packets),
		zap.Int64("bytes", info.Bytes))
}

// infoLocked is a running trace's facts with its progress; m.mu is held.
func (m *traceManager) infoLocked(rt *runningTrace) traceInfo {
	info := rt.info
	if rt.t != nil {
		st := rt.t.Status()
		info.Packets, info.Bytes = st.Packets, st.Bytes
	}
	return info
}

func (m *traceManager) writeMeta(info traceInfo) error {
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	tmp := m.metaPath(info.Name) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, m.metaPath(info.Name))
}

// list returns every trace, newest first: the running ones and those in
// the directory (of this run or earlier ones).
func (m *traceManager) list() []traceInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []traceInfo
	for _, rt := range m.running {
		out = append(out, m.infoLocked(rt))
	}
	files, _ := filepath.Glob(filepath.Join(m.dir, "*.json"))
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		if m.running[name] != nil || validTraceName(name) != nil {
			continue
		}
		if info, ok := m.readMeta(name); ok {
			out = append(out, info)
		}
	}
	slices.SortFunc(out, func(a, b traceInfo) int { return b.StartedAt.Compare(a.StartedAt) })
	return out
}

// readMeta reads a stopped trace's facts. A trace whose run ended without
// stopping it (a crash) is shown stopped, with the size of its file.
func (m *traceManager) readMeta(name string) (traceInfo, bool) {
	data, err := os.ReadFile(m.metaPath(name))
	if err != nil {
		return traceInfo{}, false
	}
	var info traceInfo
	if json.Unmarshal(data, &info) != nil || info.Name != name {
		return traceInfo{}, false
	}
	if info.State == "running" {
		info.State, info.StopReason = "stopped", "xmq stopped while it ran"
		if fi, err := os.Stat(m.logPath(name)); err == nil {
			info.Bytes = fi.Size()
		}
	}
	return info, true
}

// get returns one trace's facts.
func (m *traceManager) get(name string) (traceInfo, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rt := m.running[name]; rt != nil {
		return m.infoLocked(rt), true
	}
	if validTraceName(name) != nil {
		return traceInfo{}, false
	}
	return m.readMeta(name)
}

// stop stops a running trace; it reports whether there was one.
func (m *traceManager) stop(name string) bool {
	m.mu.Lock()
	rt := m.running[name]
	m.mu.Unlock()
	if rt == nil {
		return false
	}
	rt.t.Stop() // finished runs before Stop returns
	return true
}

// remove stops a trace if it runs and deletes its file and facts.
func (m *traceManager) remove(name string) bool {
	if _, ok := m.get(name); !ok {
		return false
	}
	m.stop(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	_ = os.Remove(m.logPath(name))
	_ = os.Remove(m.metaPath(name))
	return true
}

// close stops every running trace (the web server is stopping).
func (m *traceManager) close() {
	m.mu.Lock()
	var all []*runningTrace
	for _, rt := range m.running {
		all = append(all, rt)
	}
	m.mu.Unlock()
	for _, rt := range all {
		rt.t.Stop()
	}
}

// traceAPI serves /api/v1/traces: the traces an operator starts, reads,
// stops and deletes.
type traceAPI struct {
	traces *traceManager // nil: no trace directory
	log    *zap.Logger
}

// ---- handlers ----

func (a traceAPI) listTraces(w http.ResponseWriter, r *http.Request, _ principal, _ string) error {
	if a.traces == nil {
		return errNoTraces
	}
	pg, err := parsePage(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, pageOf(a.traces.list(), pg))
	return nil
}

func (a traceAPI) startTrace(w http.ResponseWriter, r *http.Request, p principal, _ string) error {
	if a.traces == nil {
		return errNoTraces
	}
	var body startTraceBody
	if err := decodeBody(a.log, w, r, maxBody, &body); err != nil {
		return err
	}
	noteAudit(r, func(n *auditNote) { n.target = body.Name })
	info, err := a.traces.start(body, p.User)
	if err != nil {
		return err
	}
	noteAudit(r, func(n *auditNote) { n.target = info.Name }) // the name given, or the one made up
	writeJSON(w, http.StatusCreated, info)
	return nil
}

// getTrace serves GET /traces/{name} and /traces/{name}/download.
func (a traceAPI) getTrace(w http.ResponseWriter, r *http.Request, _ principal, rest string) error {
	if a.traces == nil {
		return errNoTraces
	}
	name, sub, _ := strings.Cut(rest, "/")
	info, ok := a.traces.get(name)
	switch {
	case !ok:
		return notFound("no trace " + name)
	case sub == "":
		writeJSON(w, http.StatusOK, info)
		return nil
	case sub != "download":
		return notFound("no API endpoint " + r.URL.Path + " (GET " + apiPrefix + "/traces/{name} or /traces/{name}/download)")
	}
	f, err := os.Open(a.traces.logPath(name))
	if errors.Is(err, os.ErrNotExist) {
		return notFound("trace " + name + " has no file")
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`.log"`)
	// What is written by now; a running trace goes on growing.
	http.ServeContent(w, r, "", fi.ModTime(), io.NewSectionReader(f, 0, fi.Size()))
	return nil
}

// traceAction serves POST /traces/{name}/stop.
func (a traceAPI) traceAction(w http.ResponseWriter, r *http.Request, p principal, rest string) error {
	if a.traces == nil {
		return errNoTraces
	}
	name, action, _ := strings.Cut(rest, "/")
	if action != "stop" {
		return notFound("no API endpoint " + r.URL.Path + " (POST " + apiPrefix + "/traces/{name}/stop)")
	}
	if _, ok := a.traces.get(name); !ok {
		return notFound("no trace " + name)
	}
	a.traces.stop(name)
	info, _ := a.traces.get(name)
	a.log.Info("trace stopped by an operator", zap.String("trace", name), zap.String("by", p.User))
	writeJSON(w, http.StatusOK, info)
	return nil
}

// deleteTrace serves DELETE /traces/{name}.
func (a traceAPI) deleteTrace(w http.ResponseWriter, _ *http.Request, p principal, name string) error {
	if a.traces == nil {
		return errNoTraces
	}
	if !a.traces.remove(name) {
		return notFound("no trace " + name)
	}
	a.log.Info("trace deleted", zap.String("trace", name), zap.String("by", p.User))
	w.WriteHeader(http.StatusNoContent)
	return nil
}
