package loadtest_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/internal/mqtttest"
	"github.com/xmq-io/xmq/loadtest"
)

// The broker's CPU and RSS are sampled from /proc/PID (-broker-pid), which
// only Linux has; -metrics-url works everywhere (TestBrokerProbes).

func TestProgressAndBrokerSampling(t *testing.T) {
	b := startTCPBroker(t)
	w := &mqtttest.Buffer{}
	rep := run(t, b, opts(loadtest.ModePubSub, func(o *loadtest.Options) {
		o.Pubs, o.Subs, o.Rate, o.Duration = 2, 2, 100, 2100*time.Millisecond
	}), loadtest.Config{Progress: w, BrokerPID: pid()})
	out := w.String()
	if !strings.Contains(out, "sent") || !strings.Contains(out, "recv") || !strings.Contains(out, "errors 0") {
		t.Errorf("progress lines = %q", out)
	}
	st := rep.Cases[0].Broker
	if st == nil || st.Samples < 2 || st.RSSMax == 0 || st.Error != "" {
		t.Errorf("broker stats from /proc = %+v", st)
	}
}

// pid is this process's id: the in-process broker is part of it.
func pid() int { return os.Getpid() }
