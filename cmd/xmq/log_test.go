package main

import (
	"strings"
	"testing"
)

// TestRunLogsSentences: a broker run with -log-format console logs a
// client's connection and disconnection as sentences: core's fields reach
// the encoder by the names it reads (internal/logging tests the encoder).
func TestRunLogsSentences(t *testing.T) {
	b := startRun(t, "-listen", "127.0.0.1:0", "-data", "", "-log-format", "console")
	c, _, err := dialMQTT(t, b.addrs[0].String(), "sensor-7", 5, true)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	waitUntil(t, "the disconnect", func() bool {
		return strings.Contains(b.stderr.String(), "client sensor-7 disconnected: connection lost")
	})
	if log := b.stderr.String(); !strings.Contains(log, "client sensor-7 connected from 127.0.0.1:") ||
		!strings.Contains(log, " over tcp (MQTT 5, no keepalive, clean start)") {
		t.Errorf("no connection sentence:\n%s", log)
	}
}
