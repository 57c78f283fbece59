package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/xmq-io/xmq/codec"
)

// wsRunConfig serves ws and wss on free loopback ports, everything else
// as by default: allowed_origins empty, anonymous access from loopback.
const wsRunConfig = `
listeners:
  - {name: ws, transport: ws, address: "127.0.0.1:0"}
  - {name: wss, transport: wss, address: "127.0.0.1:0"}
auth:
  reload_interval: -1s
`

// wsConnack opens a WebSocket to url as a page from origin ("" for no
// Origin header, not a browser) and sends an MQTT 5 CONNECT with user and
// pass (none when user is ""). It returns the HTTP status of the upgrade
// and, after a 101, the CONNACK's reason code.
func wsConnack(t *testing.T, url, origin, user, pass string) (int, codec.ReasonCode) {
	t.Helper()
	h := http.Header{}
	if origin != "" {
		h.Set("Origin", origin)
	}
	d := websocket.Dialer{Subprotocols: []string{"mqtt"}, HandshakeTimeout: 5 * time.Second,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} // the development CA
	ws, res, err := d.Dial(url, h)
	if err != nil {
		if res == nil {
			t.Fatalf("dial %s: %v", url, err)
		}
		return res.StatusCode, 0
	}
	defer ws.Close()
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	// A client id of its own: the previous case's connection, closed
	// without DISCONNECT, may still hold its id, and a session of another
	// user is not taken over (session_owner_check).
	c := codec.Connect{ProtocolVersion: codec.V5, CleanStart: true, ClientID: []byte(t.Name())}
	if user != "" {
		c.UsernameFlag, c.Username, c.PasswordFlag, c.Password = true, []byte(user), true, []byte(pass)
	}
	if err := ws.WriteMessage(websocket.BinaryMessage, c.Append(nil, codec.V5)); err != nil {
		t.Fatal(err)
	}
	_, msg, err := ws.ReadMessage()
	if err != nil {
		t.Fatalf("read CONNACK: %v", err)
	}
	r := codec.NewReader(bufio.NewReader(bytes.NewReader(msg)), 0)
	r.Version = codec.V5
	p, err := r.ReadPacket()
	if err != nil {
		t.Fatalf("read CONNACK: %v", err)
	}
	return http.StatusSwitchingProtocols, p.(*codec.Connack).ReasonCode
}

// TestRunWebSocketOrigins: with the default settings (dashboard on, no
// allowed_origins, anonymous access from loopback) every page may connect
// over ws and wss, but a foreign page must log in: it never gets the
// anonymous-on-loopback privilege, which clients that are no browser and
// same-origin pages keep.
func TestRunWebSocketOrigins(t *testing.T) {
	b := startRun(t, "-c", writeFile(t, wsRunConfig), "-data", t.TempDir(), "-log-format", "json",
		"-password-file", passwordFile(t))
	for i, scheme := range []string{"ws", "wss"} {
		addr := b.addrs[i].String()
		url := scheme + "://" + addr + "/mqtt"
		for _, tt := range []struct {
			name, origin, user, pass string
			want                     codec.ReasonCode
		}{
			{"foreign page with a password", "https://app.example.com", "bob", "hunter2", codec.Success},
			{"foreign page with a wrong password", "https://app.example.com", "bob", "wrong", codec.BadUserNameOrPassword},
			{"foreign page, anonymous", "https://app.example.com", "", "", codec.NotAuthorized},
			{"no Origin, anonymous", "", "", "", codec.Success},
			{"same origin, anonymous", "http://" + addr, "", "", codec.Success},
			{"paho-mqtt's Origin, anonymous", "https://" + addr, "", "", codec.Success},
		} {
			t.Run(scheme+"/"+tt.name, func(t *testing.T) {
				status, rc := wsConnack(t, url, tt.origin, tt.user, tt.pass)
				if status != http.StatusSwitchingProtocols || rc != tt.want {
					t.Errorf("upgrade %d, CONNACK %v; want 101, %v", status, rc, tt.want)
				}
			})
		}
	}
}

// TestRunWebSocketPingFlood: a client that floods pings before CONNECT and
// reads nothing is closed about connect_timeout after it connected, over
// ws and wss: the pongs it does not read cannot hold its connection open.
func TestRunWebSocketPingFlood(t *testing.T) {
	const connectTimeout = time.Second
	b := startRun(t, "-c", writeFile(t, wsRunConfig+"broker:\n  connect_timeout: 1s\n"), "-data", "", "-log-format", "json")
	for i, scheme := range []string{"ws", "wss"} {
		t.Run(scheme, func(t *testing.T) {
			d := websocket.Dialer{Subprotocols: []string{"mqtt"}, HandshakeTimeout: 5 * time.Second,
				TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
			ws, _, err := d.Dial(scheme+"://"+b.addrs[i].String()+"/mqtt", nil)
			if err != nil {
				t.Fatal(err)
			}
			conn := ws.NetConn() // frames of our own, and no reads
			defer conn.Close()
			start := time.Now()
			// Masked pings of the largest size, a zero masking key. A
			// write fails once the broker has closed the connection (with
			// a reset: it leaves pings unread).
			ping := append([]byte{0x89, 0x80 | 125, 0, 0, 0, 0}, bytes.Repeat([]byte{'p'}, 125)...)
			burst := bytes.Repeat(ping, 64)
			closed := make(chan error, 1)
			go func() {
				for {
					if _, err := conn.Write(burst); err != nil {
						closed <- err
						return
					}
				}
			}()
			select {
			case <-closed:
				if took := time.Since(start); took > connectTimeout+2*time.Second {
					t.Errorf("closed after %v, want about connect_timeout %v", took, connectTimeout)
				}
			case <-time.After(connectTimeout + 3*time.Second):
				t.Fatalf("the connection is still open %v after connect_timeout %v", time.Since(start)-connectTimeout, connectTimeout)
			}
		})
	}
}
