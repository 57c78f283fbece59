package main

import (
	"bytes"
	"crypto/tls"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// wsRunConfig serves ws and wss on free loopback ports, everything else
// as by default.
const wsRunConfig = `
listeners:
  - {name: ws, transport: ws, address: "127.0.0.1:0"}
  - {name: wss, transport: wss, address: "127.0.0.1:0"}
auth:
  reload_interval: -1s
`

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
