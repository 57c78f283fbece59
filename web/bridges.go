package web

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// BridgeRule is one topic rule of a bridge.
type BridgeRule struct {
	Topic        string `json:"topic"`
	Direction    string `json:"direction"`
	QoS          byte   `json:"qos"`
	LocalPrefix  string `json:"local_prefix,omitempty"`
	RemotePrefix string `json:"remote_prefix,omitempty"`
}

// Bridge is one bridge to another broker as the API shows it (the
// composition root copies bridge.Status here: web does not import bridge;
// its TestViewsMirrorSources fails when bridge.Status gains a field).
type Bridge struct {
	Name      string   `json:"name"`
	State     string   `json:"state"` // connecting, connected, backoff or stopped
	Address   string   `json:"address"`
	Addresses []string `json:"addresses"`
	Protocol  string   `json:"protocol"`
	ClientID  string   `json:"client_id"`
	LocalID   string   `json:"local_client_id"`
	// LoopPrevention is no_local, bridge_bit, origin_tracking or
	// none_needed while connected.
	LoopPrevention       string           `json:"loop_prevention,omitempty"`
	ConnectedSince       time.Time        `json:"connected_since,omitzero"`
	BackoffSeconds       float64          `json:"backoff_seconds"`
	LastError            string           `json:"last_error,omitempty"`
	LastErrorAt          time.Time        `json:"last_error_at,omitzero"`
	Topics               []BridgeRule     `json:"topics"`
	MessagesOut          int64            `json:"messages_out"`
	MessagesIn           int64            `json:"messages_in"`
	BytesOut             int64            `json:"bytes_out"`
	BytesIn              int64            `json:"bytes_in"`
	Links                int64            `json:"links"`
	Reconnects           int64            `json:"reconnects"`
	Failures             map[string]int64 `json:"connect_failures"`
	Dropped              map[string]int64 `json:"dropped"`
	LoopsPrevented       int64            `json:"loops_prevented"`
	SubscriptionsRefused int64            `json:"subscriptions_refused"`
	Queued               int              `json:"queued"`
	Inflight             int              `json:"inflight"`
	// InflightIn are the messages from the remote the link has not
	// finished (0 without a link); InflightTimeouts the links closed
	// because a message in flight was not acknowledged in time.
	InflightIn       int   `json:"inflight_in"`
	InflightTimeouts int64 `json:"inflight_timeouts"`
}

// Bridges are the broker's bridges (provided by the bridge package; the
// composition root adapts it). A nil Bridges makes the bridges API answer
// 501 and leaves the xmq_bridge_* metrics out.
type Bridges interface {
	// Bridges lists the bridges by name.
	Bridges() []Bridge
	// StartBridge and StopBridge start and stop one; found is false for
	// a name that is not configured.
	StartBridge(name string) (found bool, err error)
	StopBridge(name string) (found bool, err error)
}

// Reloaded is what a reload changed: among the bridges, and the keys of
// the configuration changed live (Keys) or changed but in force only after
// a restart (NeedsRestart).
type Reloaded struct {
	Added        []string `json:"added"`
	Changed      []string `json:"changed"`
	Removed      []string `json:"removed"`
	Keys         []string `json:"-"`
	NeedsRestart []string `json:"-"`
}

var (
	errNoBridges = errorf(http.StatusNotImplemented, "not_implemented", "this broker was built without bridges")
	errNoReload  = errorf(http.StatusNotImplemented, "not_implemented", "this broker cannot reload its configuration")
)

// bridgeAPI serves /api/v1/bridges and /api/v1/reload.
type bridgeAPI struct {
	bridges  Bridges                  // nil: 501
	reloadFn func() (Reloaded, error) // nil: 501
	log      *zap.Logger
}

// listBridges serves GET /bridges.
func (a bridgeAPI) listBridges(w http.ResponseWriter, r *http.Request, _ principal, _ string) error {
	if a.bridges == nil {
		return errNoBridges
	}
	pg, err := parsePage(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, pageOf(a.bridges.Bridges(), pg))
	return nil
}

// getBridge serves GET /bridges/{name}.
func (a bridgeAPI) getBridge(w http.ResponseWriter, _ *http.Request, _ principal, name string) error {
	if a.bridges == nil {
		return errNoBridges
	}
	all := a.bridges.Bridges()
	i := slices.IndexFunc(all, func(b Bridge) bool { return b.Name == name })
	if i < 0 {
		return notFound("no bridge " + name)
	}
	writeJSON(w, http.StatusOK, all[i])
	return nil
}

// bridgeAction serves POST /bridges/{name}/start and /stop.
func (a bridgeAPI) bridgeAction(w http.ResponseWriter, r *http.Request, p principal, rest string) error {
	if a.bridges == nil {
		return errNoBridges
	}
	name, action, _ := strings.Cut(rest, "/")
	var do func(string) (bool, error)
	switch action {
	case "start":
		do = a.bridges.StartBridge
	case "stop":
		do = a.bridges.StopBridge
	default:
		return notFound("no API endpoint " + r.URL.Path + " (POST " + apiPrefix + "/bridges/{name}/start or /stop)")
	}
	found, err := do(name)
	switch {
	case !found:
		return notFound("no bridge " + name)
	case err != nil:
		return badRequest(err.Error())
	}
	a.log.Info("bridge "+action, zap.String("bridge", name), zap.String("by", p.User))
	writeJSON(w, http.StatusOK, map[string]string{"name": name, "action": action})
	return nil
}

// reload serves POST /reload: what SIGHUP does.
func (a bridgeAPI) reload(w http.ResponseWriter, _ *http.Request, p principal, _ string) error {
	if a.reloadFn == nil {
		return errNoReload
	}
	res, err := a.reloadFn()
	if err != nil {
		return badRequest("reload: " + err.Error())
	}
	for _, l := range []*[]string{&res.Added, &res.Changed, &res.Removed, &res.Keys, &res.NeedsRestart} {
		if *l == nil {
			*l = []string{}
		}
	}
	a.log.Info("configuration reloaded", zap.String("by", p.User))
	writeJSON(w, http.StatusOK, map[string]any{"bridges": res, "changed": res.Keys, "needs_restart": res.NeedsRestart})
	return nil
}

// bridgeCollector turns the bridges' statuses into metrics at scrape time.
type bridgeCollector struct {
	b                                                     Bridges
	connected, msgs, bytes, queued, inflight, dropped     *prometheus.Desc
	links, reconnects, failures, backoff, loops, subsFail *prometheus.Desc
	inflightIn, inflightTimeouts                          *prometheus.Desc
}

func newBridgeCollector(b Bridges) *bridgeCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("xmq_bridge_"+name, help, append([]string{"bridge"}, labels...), nil)
	}
	return &bridgeCollector{b: b,
		connected:  d("connected", "1 while the bridge's link to its remote is up, else 0."),
		msgs:       d("messages_total", "Messages forwarded, out (to the remote) and in (from it).", "direction"),
		bytes:      d("bytes_total", "Bytes written to (out) and read from (in) the remote.", "direction"),
		queued:     d("queued_messages", "Messages in the bridge's local session queue, waiting for the remote."),
		inflight:   d("inflight_messages", "Messages sent to the remote and not yet acknowledged."),
		dropped:    d("dropped_total", "Messages not forwarded, by cause (local_queue: its local session's drops).", "cause"),
		links:      d("links_total", "Links established with the remote."),
		reconnects: d("reconnects_total", "Connection rounds after the first."),
		failures:   d("connect_failures_total", "Failed connection attempts, by cause.", "cause"),
		backoff:    d("backoff_seconds", "The last wait between connection rounds; 0 while connected."),
		loops:      d("loops_prevented_total", "Messages from the remote recognised as the bridge's own (origin tracking)."),
		subsFail:   d("subscriptions_refused_total", "Topic filters a SUBACK refused."),
		inflightIn: d("inflight_in_messages",
			"Messages from the remote the link has not finished: not yet acknowledged here, or awaiting the remote's PUBREL."),
		inflightTimeouts: d("inflight_timeouts_total",
			"Links closed because a message in flight was not acknowledged within inflight_timeout."),
	}
}

// Describe implements prometheus.Collector.
func (c *bridgeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.connected, c.msgs, c.bytes, c.queued, c.inflight, c.dropped,
		c.links, c.reconnects, c.failures, c.backoff, c.loops, c.subsFail, c.inflightIn, c.inflightTimeouts} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *bridgeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, b := range c.b.Bridges() {
		counter := func(d *prometheus.Desc, v int64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{b.Name}, labels...)...)
		}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, b.Name)
		}
		up := 0.0
		if b.State == "connected" {
			up = 1
		}
		gauge(c.connected, up)
		counter(c.msgs, b.MessagesOut, "out")
		counter(c.msgs, b.MessagesIn, "in")
		counter(c.bytes, b.BytesOut, "out")
		counter(c.bytes, b.BytesIn, "in")
		gauge(c.queued, float64(b.Queued))
		gauge(c.inflight, float64(b.Inflight))
		gauge(c.inflightIn, float64(b.InflightIn))
		counter(c.inflightTimeouts, b.InflightTimeouts)
		for _, cause := range sortedKeys(b.Dropped) {
			counter(c.dropped, b.Dropped[cause], cause)
		}
		counter(c.links, b.Links)
		counter(c.reconnects, b.Reconnects)
		for _, cause := range sortedKeys(b.Failures) {
			counter(c.failures, b.Failures[cause], cause)
		}
		gauge(c.backoff, b.BackoffSeconds)
		counter(c.loops, b.LoopsPrevented)
		counter(c.subsFail, b.SubscriptionsRefused)
	}
}
