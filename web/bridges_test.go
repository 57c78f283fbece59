package web

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

// stubBridges is one bridge, "b", that records what the API asks of it.
type stubBridges struct{ ops []string }

func (s *stubBridges) Bridges() []Bridge {
	return []Bridge{{Name: "b", State: "backoff", BackoffSeconds: 4, MessagesOut: 3, Dropped: map[string]int64{"local_queue": 1},
		Failures: map[string]int64{"auth": 2}, Topics: []BridgeRule{{Topic: "#", Direction: "out"}}, InflightTimeouts: 5}}
}

func (s *stubBridges) op(name, what string) (bool, error) {
	if name != "b" {
		return false, nil
	}
	s.ops = append(s.ops, what)
	return true, nil
}

func (s *stubBridges) StartBridge(name string) (bool, error) { return s.op(name, "start") }
func (s *stubBridges) StopBridge(name string) (bool, error)  { return s.op(name, "stop") }

func TestBridgesAPI(t *testing.T) {
	sb := &stubBridges{}
	reloads := 0
	s := newTestServer(t, &fakeBroker{}, func(o *Options) {
		o.Bridges = sb
		o.Reload = func() (Reloaded, error) {
			reloads++
			if reloads > 1 {
				return Reloaded{}, errors.New("config: bad file")
			}
			return Reloaded{Added: []string{"new"}}, nil
		}
	})
	h := s.Handler()
	viewer := map[string]string{"X-API-Key": viewerKey}
	tests := []struct {
		q      req
		status int
		want   string // in the body
	}{
		{req{path: "/api/v1/bridges", header: viewer}, 200, `"state":"backoff"`},
		{req{path: "/api/v1/bridges/b", header: viewer}, 200, `"connect_failures":{"auth":2}`},
		{req{path: "/api/v1/bridges/b", header: viewer}, 200, `"inflight_in":0,"inflight_timeouts":5`},
		{req{path: "/api/v1/bridges/nope", header: viewer}, 404, "no bridge nope"},
		{req{method: "POST", path: "/api/v1/bridges/b/stop", header: viewer}, 403, "admin"},
		{req{method: "POST", path: "/api/v1/bridges/b/stop", basic: admin}, 200, `"action":"stop"`},
		{req{method: "POST", path: "/api/v1/bridges/b/start", basic: admin}, 200, `"action":"start"`},
		{req{method: "POST", path: "/api/v1/bridges/b/explode", basic: admin}, 404, "start or /stop"},
		{req{method: "POST", path: "/api/v1/bridges/x/start", basic: admin}, 404, "no bridge x"},
		{req{method: "POST", path: "/api/v1/reload", basic: admin}, 200, `"added":["new"],"changed":[],"removed":[]`},
		{req{method: "POST", path: "/api/v1/reload", basic: admin}, 400, "config: bad file"},
		{req{path: "/api/v1/bridges"}, 401, "unauthorized"},
	}
	for _, tt := range tests {
		r := call(t, h, tt.q)
		if r.status != tt.status || !strings.Contains(string(r.body), tt.want) {
			t.Errorf("%s %s: %d %s; want %d with %s", tt.q.method, tt.q.path, r.status, r.body, tt.status, tt.want)
		}
	}
	if strings.Join(sb.ops, ",") != "stop,start" {
		t.Errorf("operations %q", sb.ops)
	}
	metrics := string(call(t, h, req{path: "/metrics"}).body)
	for _, want := range []string{
		`xmq_bridge_connected{bridge="b"} 0`,
		`xmq_bridge_backoff_seconds{bridge="b"} 4`,
		`xmq_bridge_messages_total{bridge="b",direction="out"} 3`,
		`xmq_bridge_dropped_total{bridge="b",cause="local_queue"} 1`,
		`xmq_bridge_connect_failures_total{bridge="b",cause="auth"} 2`,
		`xmq_bridge_inflight_in_messages{bridge="b"} 0`,
		`xmq_bridge_inflight_timeouts_total{bridge="b"} 5`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// Without bridges: 501, and no bridge series.
	h = newTestServer(t, &fakeBroker{}, nil).Handler()
	for _, q := range []req{{path: "/api/v1/bridges", header: viewer}, {method: "POST", path: "/api/v1/reload", basic: admin}} {
		if r := call(t, h, q); r.status != http.StatusNotImplemented {
			t.Errorf("%s without bridges: %d", q.path, r.status)
		}
	}
	if strings.Contains(string(call(t, h, req{path: "/metrics"}).body), "xmq_bridge_") {
		t.Error("/metrics has bridge series without bridges")
	}
}
