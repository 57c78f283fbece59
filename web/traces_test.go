package web

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// traceClient connects an MQTT 5 client with id to srv (metrics_test's
// dial) and returns its connection.
func traceClient(t *testing.T, srv *core.Server, id string) net.Conn {
	t.Helper()
	pc, rc := dial(t, srv, "pipe", codec.Connect{ProtocolVersion: codec.V5, CleanStart: true, ClientID: []byte(id)},
		new(atomic.Int64), new(atomic.Int64))
	if rc != codec.Success {
		t.Fatalf("CONNECT %s: %v", id, rc)
	}
	return pc.NetConn
}

// TestTracesAPI: a trace started through the API follows its client's
// packets into its file, which the API lists, serves for download, stops
// and deletes; bad requests say what is wrong, and a viewer may only read.
func TestTracesAPI(t *testing.T) {
	srv, err := core.New(core.Options{SysInterval: -1}, core.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(t.Context()) })
	dir := t.TempDir()
	s := newTestServer(t, srv, func(o *Options) { o.TraceDir = dir })
	h := s.Handler()
	asAdmin := map[string]string{"X-API-Key": adminKey}
	asViewer := map[string]string{"X-API-Key": viewerKey}

	r := call(t, h, req{method: "POST", path: "/api/v1/traces", header: asAdmin,
		body: `{"name":"t1","client_id":"sensor-7","duration":"1m","payload":true}`})
	if r.status != 201 {
		t.Fatalf("POST /traces: %d %s", r.status, r.body)
	}
	if m := r.json(t); m["state"] != "running" || m["client_id"] != "sensor-7" || m["max_bytes"] != float64(DefaultTraceMaxBytes) {
		t.Errorf("started trace %v", m)
	}
	c := traceClient(t, srv, "sensor-7")
	other := traceClient(t, srv, "other")
	for _, conn := range []net.Conn{c, other} {
		if _, err := conn.Write((&codec.Publish{Topic: []byte("a/b"), Payload: []byte("hi")}).Append(nil, codec.V5)); err != nil {
			t.Fatal(err)
		}
	}
	download := func() string {
		r := call(t, h, req{path: "/api/v1/traces/t1/download", header: asViewer})
		if r.status != 200 || !strings.Contains(r.header.Get("Content-Disposition"), `filename="t1.log"`) {
			t.Fatalf("download: %d %v %s", r.status, r.header, r.body)
		}
		return string(r.body)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(download(), `in PUBLISH topic="a/b"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the PUBLISH never reached the trace:\n%s", download())
		}
		time.Sleep(10 * time.Millisecond)
	}
	file := download()
	for _, want := range []string{`"sensor-7" pipe in CONNECT protocol=5`, `out CONNACK rc=success`, `payload_bytes=2 payload=6869`} {
		if !strings.Contains(file, want) {
			t.Errorf("trace file lacks %q:\n%s", want, file)
		}
	}
	if strings.Contains(file, `"other"`) {
		t.Errorf("trace file holds another client:\n%s", file)
	}

	var list struct {
		Total int         `json:"total"`
		Items []traceInfo `json:"items"`
	}
	r = call(t, h, req{path: "/api/v1/traces", header: asViewer})
	if err := json.Unmarshal(r.body, &list); err != nil || list.Total != 1 || list.Items[0].Packets < 3 || list.Items[0].State != "running" {
		t.Errorf("GET /traces: %d %s", r.status, r.body)
	}

	for _, tc := range []struct {
		name, method, path, body string
		header                   map[string]string
		status                   int
		msg                      string
	}{
		{"two targets", "POST", "/api/v1/traces", `{"client_id":"a","topic":"b"}`, asAdmin, 400, "exactly one of"},
		{"nothing to trace", "POST", "/api/v1/traces", `{}`, asAdmin, 400, "exactly one of"},
		{"bad duration", "POST", "/api/v1/traces", `{"client_id":"a","duration":"forever"}`, asAdmin, 400, "duration"},
		{"too long", "POST", "/api/v1/traces", `{"client_id":"a","duration":"48h"}`, asAdmin, 400, "up to 24h"},
		{"bad ip", "POST", "/api/v1/traces", `{"ip":"10.0.0"}`, asAdmin, 400, "want an address"},
		{"bad name", "POST", "/api/v1/traces", `{"name":"../x","client_id":"a"}`, asAdmin, 400, "trace name"},
		{"same name", "POST", "/api/v1/traces", `{"name":"t1","client_id":"a"}`, asAdmin, 409, "exists"},
		{"viewer may not start", "POST", "/api/v1/traces", `{"client_id":"a"}`, asViewer, 403, "admin role"},
		{"viewer may not stop", "POST", "/api/v1/traces/t1/stop", "", asViewer, 403, "admin role"},
		{"unknown", "GET", "/api/v1/traces/nope", "", asViewer, 404, "no trace nope"},
		{"traversal", "GET", "/api/v1/traces/..%2Fx/download", "", asViewer, 404, "no trace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, h, req{method: tc.method, path: tc.path, body: tc.body, header: tc.header})
			if r.status != tc.status || !strings.Contains(string(r.body), tc.msg) {
				t.Errorf("%s %s: %d %s, want %d with %q", tc.method, tc.path, r.status, r.body, tc.status, tc.msg)
			}
		})
	}

	r = call(t, h, req{method: "POST", path: "/api/v1/traces/t1/stop", header: asAdmin})
	if m := r.json(t); r.status != 200 || m["state"] != "stopped" || m["stop_reason"] != "stopped" {
		t.Errorf("stop: %d %s", r.status, r.body)
	}
	if !strings.Contains(download(), "# trace ended: stopped") {
		t.Errorf("no last line:\n%s", download())
	}
	// The facts outlive the run: a new web server over the same directory lists the trace.
	s2 := newTestServer(t, srv, func(o *Options) { o.TraceDir = dir })
	r = call(t, s2.Handler(), req{path: "/api/v1/traces/t1", header: asViewer})
	if m := r.json(t); r.status != 200 || m["state"] != "stopped" || m["packets"].(float64) < 3 {
		t.Errorf("GET /traces/t1 from a new server: %d %s", r.status, r.body)
	}
	r = call(t, h, req{method: "DELETE", path: "/api/v1/traces/t1", header: asAdmin})
	if r.status != 204 {
		t.Errorf("DELETE: %d %s", r.status, r.body)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) != 0 {
		t.Errorf("files left after DELETE: %v", files)
	}
	if _, err := os.Stat(filepath.Join(dir, "t1.log")); err == nil {
		t.Error("t1.log remains")
	}

	// Without a trace directory the API says so.
	r = call(t, newTestServer(t, srv, nil).Handler(), req{path: "/api/v1/traces", header: asViewer})
	if r.status != 501 {
		t.Errorf("GET /traces without a directory: %d %s", r.status, r.body)
	}
}

// TestTraceSizeLimitStopsItself: a trace whose file reaches max_bytes
// stops itself, and the API says why.
func TestTraceSizeLimitStopsItself(t *testing.T) {
	srv, err := core.New(core.Options{SysInterval: -1}, core.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(t.Context()) })
	s := newTestServer(t, srv, func(o *Options) { o.TraceDir = t.TempDir() })
	h := s.Handler()
	asAdmin := map[string]string{"X-API-Key": adminKey}
	if r := call(t, h, req{method: "POST", path: "/api/v1/traces", header: asAdmin, body: `{"name":"small","topic":"#","max_bytes":700}`}); r.status != 201 {
		t.Fatalf("POST: %d %s", r.status, r.body)
	}
	c := traceClient(t, srv, "chatty")
	for range 20 {
		if _, err := c.Write((&codec.Publish{Topic: []byte("x"), Payload: []byte("0123456789")}).Append(nil, codec.V5)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := call(t, h, req{path: "/api/v1/traces/small", header: asAdmin})
		m := r.json(t)
		if m["state"] == "stopped" {
			if m["stop_reason"] != "size limit reached" || m["bytes"].(float64) > 700+300 {
				t.Errorf("stopped trace %v", m)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the trace did not stop at its limit: %v", m)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
