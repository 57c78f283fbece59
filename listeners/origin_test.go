package listeners

import (
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestOriginPolicy is the classification table of browser pages: which
// may connect, and which are foreign (trusted: no Origin, same origin on a
// host no other site can take over, the dashboard's, listed by name).
func TestOriginPolicy(t *testing.T) {
	hostname, _ := os.Hostname()
	dashboard := []string{"http://127.0.0.1:18083", "http://localhost:18083"}
	listed := []string{"https://app.example.com", "https://*.example.org"}
	const (
		trusted = "trusted" // may connect, CrossOrigin ""
		foreign = "foreign" // may connect, CrossOrigin is the Origin
		refused = "refused"
	)
	tests := []struct {
		name, origin, host string
		allowed            []string
		want               string
	}{
		{"no origin: not a browser", "", "127.0.0.1:8083", nil, trusted},
		{"no origin with a list", "", "127.0.0.1:8083", listed, trusted},

		{"same origin", "http://127.0.0.1:8083", "127.0.0.1:8083", nil, trusted},
		{"same origin, paho-mqtt's https over ws", "https://127.0.0.1:8083", "127.0.0.1:8083", nil, trusted},
		{"same origin, case", "HTTP://LocalHost:8083", "localhost:8083", nil, trusted},
		{"same origin, IPv6", "http://[::1]:8083", "[::1]:8083", nil, trusted},
		{"same origin, IPv6 case", "http://[FE80::1]:8083", "[fe80::1]:8083", nil, trusted},
		{"same origin, paho-mqtt's unbracketed IPv6", "https://::1:8083", "::1:8083", nil, trusted},
		{"same origin, default port 443", "https://127.0.0.1", "127.0.0.1:443", nil, trusted},
		{"same origin, default port 80", "http://127.0.0.1", "127.0.0.1:80", nil, trusted},
		{"same origin, Host without port behind a TLS proxy", "https://127.0.0.1", "127.0.0.1", nil, trusted},
		{"same origin, *.localhost", "http://app.localhost:8083", "app.localhost:8083", nil, trusted},
		{"same origin, this machine's name", "http://" + hostname + ":8083", hostname + ":8083", nil, trusted},
		{"same origin despite a list", "http://127.0.0.1:8083", "127.0.0.1:8083", listed, trusted},
		{"other port", "http://127.0.0.1:8080", "127.0.0.1:8083", nil, foreign},
		{"other port, Host without port", "http://127.0.0.1:8080", "127.0.0.1", nil, foreign},
		{"explicit 443 against 80", "https://127.0.0.1:443", "127.0.0.1:80", nil, foreign},
		{"other host", "http://127.0.0.2:8083", "127.0.0.1:8083", nil, foreign},
		{"same origin on a rebindable name", "http://evil.example:8083", "evil.example:8083", nil, foreign},
		{"same origin on a rebindable name, list", "http://evil.example:8083", "evil.example:8083", listed, refused},

		{"dashboard", "http://localhost:18083", "127.0.0.1:8083", nil, trusted},
		{"dashboard, case", "HTTP://LOCALHOST:18083", "127.0.0.1:8083", nil, trusted},
		{"dashboard despite a list", "http://127.0.0.1:18083", "127.0.0.1:8083", listed, trusted},
		{"dashboard host on another port", "http://localhost:18084", "127.0.0.1:8083", nil, foreign},

		{"listed", "https://app.example.com", "mqtt.example.com", listed, trusted},
		{"listed, case", "https://APP.example.com", "mqtt.example.com", listed, trusted},
		{"listed wildcard", "https://a.b.example.org", "mqtt.example.com", listed, trusted},
		{"wildcard, other scheme", "http://a.example.org", "mqtt.example.com", listed, refused},
		{"wildcard is no suffix match", "https://evilexample.org", "mqtt.example.com", listed, refused},
		{"not listed", "https://evil.example", "mqtt.example.com", listed, refused},
		{"star lists nobody", "https://app.example.com", "mqtt.example.com", []string{"*"}, foreign},
		{"star beside a name", "https://app.example.com", "mqtt.example.com", []string{"*", "https://app.example.com"}, trusted},

		{"foreign, no list", "https://evil.example", "127.0.0.1:8083", nil, foreign},
		{"null origin", "null", "127.0.0.1:8083", nil, foreign},
		{"null origin, list", "null", "127.0.0.1:8083", listed, refused},
		{"file origin", "file://", "127.0.0.1:8083", nil, foreign},
		{"origin with a path", "http://127.0.0.1:8083/x", "127.0.0.1:8083", nil, foreign},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newOriginPolicy(&Options{AllowedOrigins: tt.allowed, TrustedOrigins: dashboard})
			cross, ok := p.check(tt.origin, tt.host)
			got := refused
			switch {
			case ok && cross == "":
				got = trusted
			case ok && cross == tt.origin:
				got = foreign
			case ok:
				t.Fatalf("CrossOrigin %q, want %q or none", cross, tt.origin)
			}
			if got != tt.want {
				t.Errorf("Origin %q to Host %q with allowed_origins %q: %s, want %s", tt.origin, tt.host, tt.allowed, got, tt.want)
			}
		})
	}
}

// TestWebSocketOrigins upgrades requests from browser pages: a foreign
// page connects and its conn says so; with allowed_origins a foreign page
// is refused, and the log says which setting lets it in.
func TestWebSocketOrigins(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	dashboard := "http://localhost:18083"
	open := listen(t, Options{Name: "ws-open", Transport: TransportWS, TrustedOrigins: []string{dashboard}})
	closed := listen(t, Options{Name: "ws-closed", Transport: TransportWS, TrustedOrigins: []string{dashboard},
		AllowedOrigins: []string{"https://app.example.com"}, Log: zap.New(core)})
	tests := []struct {
		name   string
		l      Listener
		origin string
		status int
		cross  string
	}{
		{"foreign page, no list", open, "https://evil.example", http.StatusSwitchingProtocols, "https://evil.example"},
		{"same origin", open, "https://" + open.Addr().String(), http.StatusSwitchingProtocols, ""},
		{"dashboard", open, dashboard, http.StatusSwitchingProtocols, ""},
		{"no origin", open, "", http.StatusSwitchingProtocols, ""},
		{"listed", closed, "https://app.example.com", http.StatusSwitchingProtocols, ""},
		{"dashboard beside a list", closed, dashboard, http.StatusSwitchingProtocols, ""},
		{"foreign page, list", closed, "https://evil.example", http.StatusForbidden, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			accepted := make(chan net.Conn, 1)
			go func() {
				if c, err := tt.l.Accept(); err == nil {
					accepted <- c
				}
			}()
			h := http.Header{}
			if tt.origin != "" {
				h.Set("Origin", tt.origin)
			}
			d := websocket.Dialer{Subprotocols: []string{"mqtt"}, HandshakeTimeout: 5 * time.Second}
			ws, resp, err := d.Dial("ws://"+tt.l.Addr().String()+"/mqtt", h)
			if resp == nil {
				t.Fatalf("no HTTP response: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d %q, want %d", resp.StatusCode, body, tt.status)
			}
			if ws == nil {
				if want := `add "https://evil.example" to allowed_origins of listener ws-closed`; !strings.Contains(string(body), want) {
					t.Errorf("refusal %q does not say %q", body, want)
				}
				return
			}
			defer ws.Close()
			select {
			case c := <-accepted:
				defer c.Close()
				if got := c.(CrossOriginer).CrossOrigin(); got != tt.cross {
					t.Errorf("CrossOrigin() = %q, want %q", got, tt.cross)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("nothing accepted")
			}
		})
	}
	refusals := logs.FilterMessage("refusing websocket request: origin not allowed").All()
	if len(refusals) != 1 {
		t.Fatalf("%d origin refusals logged, want 1: %v", len(refusals), logs.All())
	}
	fields := refusals[0].ContextMap()
	if fields["origin"] != "https://evil.example" || fields["listener"] != "ws-closed" ||
		fields["to_allow"] != `add "https://evil.example" to allowed_origins of listener ws-closed` {
		t.Errorf("refusal logged with %v, want the origin, the listener and the setting to add", fields)
	}
}
