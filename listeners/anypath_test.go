package listeners

import (
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestWebSocketAnyPath: with Path "*" a ws listener answers MQTT on every
// path, as Mosquitto does, so its clients keep working unchanged.
func TestWebSocketAnyPath(t *testing.T) {
	l := listen(t, Options{Transport: TransportWS, Path: AnyPath})
	for _, path := range []string{"/", "/mqtt", "/ws/anything"} {
		d := websocket.Dialer{Subprotocols: []string{"mqtt"}, HandshakeTimeout: 5 * time.Second}
		ws, resp, err := d.Dial("ws://"+l.Addr().String()+path, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Errorf("%s: status %d", path, resp.StatusCode)
		}
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
		_ = ws.Close()
	}
	if err := (&Options{Transport: TransportWS, Path: "mqtt"}).Validate(); err == nil {
		t.Error("a path without / was accepted")
	}
}
