package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthURL(t *testing.T) {
	for _, tt := range []struct {
		web  webConfig
		want string
	}{
		{webConfig{Address: ":18083"}, "http://127.0.0.1:18083/healthz"},
		{webConfig{Address: "0.0.0.0:18083"}, "http://127.0.0.1:18083/healthz"},
		{webConfig{Address: "[::]:18083", TLS: true}, "https://[::1]:18083/healthz"},
		{webConfig{Address: "10.1.2.3:80"}, "http://10.1.2.3:80/healthz"},
		{webConfig{Address: ""}, "error: health: the web server is off"},
		{webConfig{Address: "18083"}, "error: health: web.address"},
	} {
		got, err := healthURL(tt.web)
		if err != nil {
			got = "error: " + err.Error()
		}
		if !strings.HasPrefix(got, tt.want) {
			t.Errorf("healthURL(%+v) = %q, want %q", tt.web, got, tt.want)
		}
	}
}

func TestHealthCommand(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	var out bytes.Buffer
	// The address from the environment, as in the container image.
	if err := runHealth(context.Background(), nil, []string{"XMQ_WEB_ADDRESS=" + addr}, &out); err != nil {
		t.Fatalf("health of a healthy server: %v", err)
	}
	if !strings.Contains(out.String(), `{"status":"ok"}`) {
		t.Errorf("health printed %q", out.String())
	}
	status = http.StatusServiceUnavailable
	if err := runHealth(context.Background(), []string{"-url", srv.URL + "/healthz"}, nil, &out); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("health of a failing server: %v", err)
	}
	srv.Close()
	if err := runHealth(context.Background(), []string{"-url", srv.URL + "/healthz", "-timeout", "1s"}, nil, &out); err == nil {
		t.Error("health of a stopped server succeeded")
	}
	if err := runHealth(context.Background(), []string{"-c", writeFile(t, "web:\n  address: \"\"\n")}, nil, &out); err == nil || !strings.Contains(err.Error(), "off") {
		t.Errorf("health without a web server: %v", err)
	}
}
