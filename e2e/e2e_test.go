// Package e2e_test runs the broker end to end: core.Server behind a real
// TCP listener on 127.0.0.1, driven by third-party MQTT clients
// (eclipse/paho.golang for MQTT 5, eclipse/paho.mqtt.golang for 3.1.1) and,
// for byte-level cases, by the project's codec.
package e2e_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// timeout bounds every wait in these tests.
const timeout = 5 * time.Second

// quiet is how long a test waits to be sure something does not arrive.
const quiet = 300 * time.Millisecond

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startBroker serves a new broker on 127.0.0.1:0 and returns its address;
// the broker is shut down when the test ends, after the test's clients.
func startBroker(t *testing.T, opts core.Options) string {
	t.Helper()
	if opts.SysInterval == 0 {
		opts.SysInterval = -1
	}
	srv, err := core.New(opts, core.Config{})
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	return mqtttest.Serve(t, srv, mqtttest.Listen(t), "tcp", core.ErrServerClosed)
}

// ctx is a context bounded by timeout and cancelled when the test ends.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return c
}

// receive takes the next value from ch within timeout.
func receive[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		var zero T
		t.Fatalf("nothing received in %v", timeout)
		return zero
	}
}

// nothing asserts that ch stays empty for quiet.
func nothing[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("received %v, want nothing", v)
	case <-time.After(quiet):
	}
}

// dialRaw connects a TCP client spoken to packet by packet with the codec.
func dialRaw(t *testing.T, addr string, v byte) *mqtttest.Conn {
	t.Helper()
	return mqtttest.DialConn(t, "mqtt://"+addr, nil, v)
}

// connect sends a CONNECT for id (clean, or resuming a session that
// outlives the connection) and requires a successful CONNACK.
func connect(c *mqtttest.Conn, id string, clean bool, mods ...func(*codec.Connect)) *codec.Connack {
	c.T.Helper()
	p := mqtttest.ConnectPacket(c.V, id)
	p.CleanStart = clean
	if !clean && c.V == codec.V5 {
		p.Props.SetNum(codec.PropSessionExpiry, 60)
	}
	for _, m := range mods {
		m(p)
	}
	return c.Connect(p)
}
