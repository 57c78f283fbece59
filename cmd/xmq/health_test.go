package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmq-io/xmq/internal/config"
)

func TestHealthURL(t *testing.T) {
	for _, tt := range []struct {
		web  config.Web
		want string
	}{
		{config.Web{Address: ":18083"}, "http://127.0.0.1:18083/healthz"},
		{config.Web{Address: "0.0.0.0:18083"}, "http://127.0.0.1:18083/healthz"},
		{config.Web{Address: "[::]:18083", TLS: true}, "https://[::1]:18083/healthz"},
		{config.Web{Address: "10.1.2.3:80"}, "http://10.1.2.3:80/healthz"},
		{config.Web{Address: ""}, "error: health: the web server is off"},
		{config.Web{Address: "18083"}, "error: health: web.address"},
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

// TestHealthServiceFiles: run from a shell without -c on a packaged
// install, health asks the service's broker: the address in
// /etc/xmq/xmq.yaml, overridden by /etc/default/xmq's XMQ_ settings, which
// the shell's own environment overrides in turn.
func TestHealthServiceFiles(t *testing.T) {
	hit := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hit <- r.Host
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	oldConf, oldEnv := serviceConfig, serviceEnvFile
	t.Cleanup(func() { serviceConfig, serviceEnvFile = oldConf, oldEnv })
	serviceConfig, serviceEnvFile = filepath.Join(dir, "xmq.yaml"), filepath.Join(dir, "default")
	var out bytes.Buffer

	// The configuration file's address.
	if err := os.WriteFile(serviceConfig, []byte("web:\n  address: "+addr+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := runHealth(context.Background(), nil, nil, &out); err != nil {
		t.Fatalf("health with the service's configuration: %v", err)
	}
	if got := <-hit; got != addr {
		t.Errorf("asked %s, want %s", got, addr)
	}

	// The EnvironmentFile's setting wins over the file.
	if err := os.WriteFile(serviceConfig, []byte("web:\n  address: 127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := "# comment\nXMQ_LOG_FORMAT=console\nXMQ_WEB_ADDRESS=\"" + addr + "\"\nOTHER=1\n"
	if err := os.WriteFile(serviceEnvFile, []byte(env), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := runHealth(context.Background(), nil, nil, &out); err != nil {
		t.Fatalf("health with the service's EnvironmentFile: %v", err)
	}
	<-hit

	// The shell's own environment wins over both.
	if err := runHealth(context.Background(), []string{"-timeout", "1s"}, []string{"XMQ_WEB_ADDRESS=127.0.0.1:1"}, &out); err == nil {
		t.Error("the shell's XMQ_WEB_ADDRESS was not used")
	}
}
