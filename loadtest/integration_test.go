package loadtest_test

import (
	"bytes"
	"context"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/mqtttest"
	"github.com/xmq-io/xmq/listeners"
	"github.com/xmq-io/xmq/loadtest"
)

// broker is an in-process xmq serving one listener.
type broker struct {
	url string // what -addr takes
	srv *core.Server
}

// startBroker runs a core.Server on l until the test ends.
func startBroker(t *testing.T, l net.Listener, url string) *broker {
	t.Helper()
	srv, err := core.New(core.Options{SysInterval: -1}, core.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mqtttest.Serve(t, srv, l, "test", core.ErrServerClosed)
	return &broker{url: url, srv: srv}
}

func startTCPBroker(t *testing.T) *broker {
	t.Helper()
	l, err := listeners.ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return startBroker(t, l, "mqtt://"+l.Addr().String())
}

// run runs o against b and fails the test on an error.
func run(t *testing.T, b *broker, o loadtest.Options, cfg loadtest.Config) *loadtest.Report {
	t.Helper()
	o.Addr = b.url
	if o.IDPrefix == "" {
		o.IDPrefix = strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := loadtest.Run(ctx, o, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(rep.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range rep.Cases {
		if n := c.ErrorTotal(); n > 0 {
			t.Errorf("%s: %d errors: %v %v", c.Name, n, c.Errors, c.ErrorSamples)
		}
	}
	return rep
}

func opts(mode loadtest.Mode, edit func(o *loadtest.Options)) loadtest.Options {
	o := loadtest.DefaultOptions()
	o.Mode = mode
	o.Duration = 500 * time.Millisecond
	o.Drain = 5 * time.Second
	if edit != nil {
		edit(&o)
	}
	return o
}

// checkDelivery asserts what every delivery mode must show at a low rate:
// every message reached every receiver it should, once, and was timed.
func checkDelivery(t *testing.T, c *loadtest.CaseResult, fanout uint64) {
	t.Helper()
	if c.Published == 0 {
		t.Fatalf("%s: nothing published", c.Name)
	}
	if c.Expected != c.Published*fanout {
		t.Errorf("%s: expected %d deliveries, want published %d × fan-out %d", c.Name, c.Expected, c.Published, fanout)
	}
	if c.Unique != c.Expected || c.LostMessages != 0 {
		t.Errorf("%s: delivered %d of %d (lost %d)", c.Name, c.Unique, c.Expected, c.LostMessages)
	}
	if c.Duplicates != 0 || c.Stale != 0 || c.Foreign != 0 {
		t.Errorf("%s: duplicates %d, stale %d, foreign %d; want none", c.Name, c.Duplicates, c.Stale, c.Foreign)
	}
	if c.Latency.Count() != c.Unique {
		t.Errorf("%s: %d latencies for %d deliveries", c.Name, c.Latency.Count(), c.Unique)
	}
	if s := c.LatencySummary; s.P50 <= 0 || s.P50 > s.P99 || s.P99 > s.Max || s.Max > int64(2*time.Second) {
		t.Errorf("%s: latency summary not sane: %+v", c.Name, s)
	}
	if c.PublishedPerSec <= 0 || c.DeliveredPerSec <= 0 || c.DeliveredRatio != 1 {
		t.Errorf("%s: rates %f/%f, ratio %f", c.Name, c.PublishedPerSec, c.DeliveredPerSec, c.DeliveredRatio)
	}
	if c.Generator.CPUSeconds <= 0 || c.Generator.WallSeconds <= 0 {
		t.Errorf("%s: generator CPU not measured: %+v", c.Name, c.Generator)
	}
	if len(c.Series) == 0 {
		t.Errorf("%s: no time series", c.Name)
	}
	if c.PublishersWithLoss != 0 || c.PublishersWithDups != 0 || c.WorstLoss != nil {
		t.Errorf("%s: per publisher: %d with loss (worst %+v), %d with duplicates", c.Name, c.PublishersWithLoss,
			c.WorstLoss, c.PublishersWithDups)
	}
	pp := c.PerPub
	if pp == nil || len(pp.Published) != c.Pubs {
		t.Fatalf("%s: per-publisher figures %+v for %d publishers", c.Name, pp, c.Pubs)
	}
	var pub, exp, uniq uint64
	for i := range pp.Published {
		pub, exp, uniq = pub+pp.Published[i], exp+pp.Expected[i], uniq+pp.Unique[i]
		if pp.Published[i] == 0 || pp.Unique[i] != pp.Expected[i] {
			t.Errorf("%s: publisher %d published %d, delivered %d of %d", c.Name, i, pp.Published[i], pp.Unique[i], pp.Expected[i])
		}
	}
	if pub != c.Published || exp != c.Expected || uniq != c.Unique {
		t.Errorf("%s: per-publisher sums %d/%d/%d, totals %d/%d/%d", c.Name, pub, exp, uniq, c.Published, c.Expected, c.Unique)
	}
}

func TestModesOverTCP(t *testing.T) {
	b := startTCPBroker(t)
	testModes(t, b)
}

// testModes runs every mode for about a second against b.
func testModes(t *testing.T, b *broker) {
	t.Run("conn", func(t *testing.T) {
		rep := run(t, b, opts(loadtest.ModeConn, func(o *loadtest.Options) {
			o.Levels, o.Hold, o.DialConcurrency = []int{20, 150}, 200*time.Millisecond, 50
		}), loadtest.Config{})
		for i, c := range rep.Cases {
			want := []int{20, 150}[i]
			if c.Target != want || c.Established != want || c.Failed != 0 || c.Alive != want {
				t.Errorf("level %d: target %d established %d failed %d alive %d (%v)", want, c.Target, c.Established,
					c.Failed, c.Alive, c.Failures)
			}
			if s := c.ConnectSummary; s.Count != uint64(want) || s.P50 <= 0 || s.P99 < s.P50 {
				t.Errorf("level %d: connect times %+v", want, s)
			}
		}
	})
	t.Run("conn/wake", func(t *testing.T) {
		// More wakes than connections: the round trips cycle over them.
		rep := run(t, b, opts(loadtest.ModeConn, func(o *loadtest.Options) {
			o.Levels, o.Hold, o.Wake, o.WakeIdle = []int{3}, 0, 5, 20*time.Millisecond
		}), loadtest.Config{})
		c := rep.Cases[0]
		if c.Alive != 3 || len(c.Lost) != 0 || c.Wake.Count() != 5 || c.WakeBusy.Count() != 5 {
			t.Errorf("alive %d, lost %v, wake %d and busy %d round trips; want 3, none, 5 and 5", c.Alive, c.Lost,
				c.Wake.Count(), c.WakeBusy.Count())
		}
		if c.WakeSummary == nil || c.WakeSummary.Count != 5 || c.WakeBusySummary == nil || c.WakeBusySummary.Count != 5 {
			t.Errorf("summaries %+v %+v", c.WakeSummary, c.WakeBusySummary)
		}
		var text bytes.Buffer
		if err := loadtest.WriteText(&text, rep); err != nil || !strings.Contains(text.String(), "wake p50") {
			t.Errorf("the table shows no wake column (%v):\n%s", err, text.String())
		}
	})
	for _, qos := range []int{0, 1, 2} {
		t.Run("pub/qos"+string(rune('0'+qos)), func(t *testing.T) {
			rep := run(t, b, opts(loadtest.ModePub, func(o *loadtest.Options) {
				o.Pubs, o.QoS, o.Inflight = 3, qos, 16
			}), loadtest.Config{})
			c := rep.Cases[0]
			if c.Published == 0 || c.PublishedPerSec <= 0 || c.MBPerSec <= 0 {
				t.Fatalf("published %d at %f/s, %f MB/s", c.Published, c.PublishedPerSec, c.MBPerSec)
			}
			if qos > 0 && (c.Acked != c.Published || c.AckLatency.Count() != c.Published) {
				t.Errorf("QoS %d: acked %d (%d timed) of %d", qos, c.Acked, c.AckLatency.Count(), c.Published)
			}
		})
	}
	for _, tc := range []struct {
		name string
		qos  int
		mqtt string
	}{{"qos0", 0, "3.1.1"}, {"qos1", 1, "3.1.1"}, {"qos2-v5", 2, "5"}} {
		t.Run("pubsub/"+tc.name, func(t *testing.T) {
			rep := run(t, b, opts(loadtest.ModePubSub, func(o *loadtest.Options) {
				o.Pubs, o.Subs, o.QoS, o.Rate, o.MQTT = 3, 4, tc.qos, 50, tc.mqtt
			}), loadtest.Config{})
			checkDelivery(t, rep.Cases[0], 4)
		})
	}
	t.Run("fanin", func(t *testing.T) {
		rep := run(t, b, opts(loadtest.ModeFanIn, func(o *loadtest.Options) {
			o.Pubs, o.Subs, o.QoS, o.Rate = 30, 3, 1, 20
		}), loadtest.Config{})
		checkDelivery(t, rep.Cases[0], 1)
	})
	t.Run("p2p/churn", func(t *testing.T) {
		rep := run(t, b, opts(loadtest.ModeP2P, func(o *loadtest.Options) {
			o.Pubs, o.QoS, o.Rate, o.Clean, o.Churn = 6, 1, 40, false, 400*time.Millisecond
			o.Duration = 1200 * time.Millisecond
		}), loadtest.Config{})
		c := rep.Cases[0]
		if c.Reconnects == 0 {
			t.Errorf("no subscriber reconnected with -churn")
		}
		// Offline subscribers' messages wait in their sessions: nothing lost.
		if c.LostMessages != 0 || c.Unique != c.Expected || c.Expected != c.Published {
			t.Errorf("churn: delivered %d of %d (published %d), lost %d", c.Unique, c.Expected, c.Published, c.LostMessages)
		}
	})
	t.Run("p2p/loop", func(t *testing.T) {
		rep := run(t, b, opts(loadtest.ModeP2P, func(o *loadtest.Options) {
			o.Pubs, o.QoS, o.Rate, o.Loop, o.Topic = 5, 1, 30, true, "t/%i"
		}), loadtest.Config{})
		checkDelivery(t, rep.Cases[0], 1)
	})
	t.Run("payload-sweep", func(t *testing.T) {
		rep := run(t, b, opts(loadtest.ModePubSub, func(o *loadtest.Options) {
			o.Pubs, o.Subs, o.Rate, o.Payloads, o.Duration = 2, 2, 50, []int{16, 1024}, 400*time.Millisecond
		}), loadtest.Config{})
		if len(rep.Cases) != 2 || rep.Cases[0].Payload != 16 || rep.Cases[1].Payload != 1024 {
			t.Fatalf("cases %+v", rep.Cases)
		}
		for _, c := range rep.Cases {
			checkDelivery(t, c, 2)
		}
	})
}

func TestAgentsMergeHistograms(t *testing.T) {
	b := startTCPBroker(t)
	var addrs []string
	for range 2 {
		s := httptest.NewServer(loadtest.NewAgent(nil).Handler())
		t.Cleanup(s.Close)
		addrs = append(addrs, s.URL)
	}
	rep := run(t, b, opts(loadtest.ModePubSub, func(o *loadtest.Options) {
		o.Pubs, o.Subs, o.QoS, o.Rate = 4, 4, 1, 50
	}), loadtest.Config{Agents: addrs})
	c := rep.Cases[0]
	// Each agent runs half the publishers and half the subscribers; every
	// subscriber hears every publisher, so the figures only add up if the
	// split and the merge are right.
	checkDelivery(t, c, 4)
	if c.Generator.Processes != 2 {
		t.Errorf("generator processes = %d, want 2", c.Generator.Processes)
	}
	if len(rep.AgentEnvs) != 2 || rep.AgentEnvs[0].GoVersion == "" {
		t.Errorf("agent environments %+v", rep.AgentEnvs)
	}
	t.Run("conn", func(t *testing.T) {
		rep := run(t, b, opts(loadtest.ModeConn, func(o *loadtest.Options) {
			o.Levels, o.Hold, o.Wake, o.WakeIdle = []int{41}, 100*time.Millisecond, 3, 10*time.Millisecond
		}), loadtest.Config{Agents: addrs})
		if c := rep.Cases[0]; c.Target != 41 || c.Established != 41 || c.Alive != 41 || c.Connect.Count() != 41 {
			t.Errorf("conn over 2 agents: target %d established %d alive %d timed %d", c.Target, c.Established, c.Alive,
				c.Connect.Count())
		}
		// One agent wakes connections, so the round trips never overlap.
		if c := rep.Cases[0]; c.Wake.Count() != 3 || c.WakeBusy.Count() != 3 {
			t.Errorf("conn over 2 agents: %d wake and %d busy round trips, want 3 each", c.Wake.Count(), c.WakeBusy.Count())
		}
	})
}

func TestConnFailuresAreClassified(t *testing.T) {
	// A port nobody listens on: every dial is refused, and says so.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	o := opts(loadtest.ModeConn, func(o *loadtest.Options) { o.Levels, o.Hold = []int{5}, 0 })
	o.Addr = addr
	rep, err := loadtest.Run(context.Background(), o, loadtest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Cases[0]
	if c.Established != 0 || c.Failed != 5 || c.Failures[loadtest.FailRefused] != 5 {
		t.Errorf("established %d failed %d failures %v; want 5 refused", c.Established, c.Failed, c.Failures)
	}
	// Traffic modes refuse to start without every client connected.
	o = opts(loadtest.ModePub, nil)
	o.Addr = addr
	if _, err := loadtest.Run(context.Background(), o, loadtest.Config{}); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("pub against nothing: %v, want a refused error", err)
	}
}

// TestAddrListSpreadsConnections: -addr a,b puts half of the connections on
// each broker, as a cluster run over its nodes needs.
func TestAddrListSpreadsConnections(t *testing.T) {
	a, b := startTCPBroker(t), startTCPBroker(t)
	o := opts(loadtest.ModeConn, func(o *loadtest.Options) {
		o.Levels, o.Hold, o.DialConcurrency = []int{10}, 100*time.Millisecond, 10
	})
	o.IDPrefix = "spread"
	o.Addr = a.url + "," + b.url
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := loadtest.Run(ctx, o, loadtest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Cases[0]; c.Established != 10 || c.Failed != 0 {
		t.Fatalf("established %d failed %d (%v)", c.Established, c.Failed, c.Failures)
	}
	if na, nb := a.srv.Stats().Connects, b.srv.Stats().Connects; na != 5 || nb != 5 {
		t.Errorf("connects: %d on the first broker, %d on the second; want 5 and 5", na, nb)
	}
	if !strings.Contains(rep.URL, a.url) || !strings.Contains(rep.URL, b.url) {
		t.Errorf("report URL %q does not name both brokers", rep.URL)
	}
}
