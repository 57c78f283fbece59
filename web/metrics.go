package web

import (
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// collector turns the broker's Stats snapshot into metrics at scrape time:
// the broker's counters are plain atomics, so metrics cost nothing on the
// message path.
type collector struct {
	b         Broker
	transport map[string]string // listener name → transport
	version   string

	connections, connected, connects, disconnects        *prometheus.Desc
	msgsIn, msgsOut, bytesIn, bytesOut, deliveries, drop *prometheus.Desc
	sessions, subscriptions, retained, authFailures      *prometheus.Desc
	uptime, info                                         *prometheus.Desc
}

func newCollector(b Broker, lns []Listener, version string) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("xmq_"+name, help, labels, nil)
	}
	c := &collector{b: b, transport: map[string]string{}, version: version,
		connections:   d("connections", "Open MQTT connections by listener and transport.", "listener", "transport"),
		connected:     d("connected_clients", "Open MQTT connections (all listeners)."),
		connects:      d("connects_total", "Successful CONNECTs since start."),
		disconnects:   d("disconnects_total", "Connections ended, by typed close reason.", "reason"),
		msgsIn:        d("messages_received_total", "PUBLISH packets received from clients, by the QoS they were published with.", "qos"),
		msgsOut:       d("messages_sent_total", "PUBLISH packets sent to clients, by the QoS they were delivered with.", "qos"),
		bytesIn:       d("received_bytes_total", "Bytes read from clients."),
		bytesOut:      d("sent_bytes_total", "Bytes written to clients."),
		deliveries:    d("deliveries_total", "Messages queued for a subscriber (one per matching subscription)."),
		drop:          d("messages_dropped_total", "Messages not delivered, by cause.", "cause"),
		sessions:      d("sessions", "Sessions, connected or waiting for their client."),
		subscriptions: d("subscriptions", "Subscriptions of all sessions."),
		retained:      d("retained_messages", "Retained messages."),
		authFailures:  d("auth_failures_total", "CONNECTs refused by authentication."),
		uptime:        d("uptime_seconds", "Seconds since the broker started."),
		info:          d("build_info", "The broker's version; always 1.", "version"),
	}
	for _, l := range lns {
		c.transport[l.Name] = l.Transport
	}
	return c
}

// Describe sends every descriptor.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.connections, c.connected, c.connects, c.disconnects, c.msgsIn, c.msgsOut,
		c.bytesIn, c.bytesOut, c.deliveries, c.drop, c.sessions, c.subscriptions, c.retained, c.authFailures,
		c.uptime, c.info} {
		ch <- d
	}
}

// Collect reads one snapshot and sends its metrics.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.b.Stats()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	// Every known listener has a series, 0 included, so rates and alerts
	// do not see series appear and vanish.
	byListener := c.b.ConnectionsByListener()
	for name := range c.transport {
		if _, ok := byListener[name]; !ok {
			byListener[name] = 0
		}
	}
	for _, name := range sortedKeys(byListener) {
		tr := c.transport[name]
		if tr == "" {
			tr = "unknown"
		}
		gauge(c.connections, float64(byListener[name]), name, tr)
	}
	gauge(c.connected, float64(st.Connected))
	counter(c.connects, st.Connects)
	for _, reason := range sortedKeys(st.Disconnects) {
		counter(c.disconnects, st.Disconnects[reason], reason)
	}
	for q := range st.MessagesInQoS {
		counter(c.msgsIn, st.MessagesInQoS[q], strconv.Itoa(q))
		counter(c.msgsOut, st.MessagesOutQoS[q], strconv.Itoa(q))
	}
	counter(c.bytesIn, st.BytesIn)
	counter(c.bytesOut, st.BytesOut)
	counter(c.deliveries, st.Deliveries)
	for _, cause := range sortedKeys(st.Dropped) {
		counter(c.drop, st.Dropped[cause], cause)
	}
	gauge(c.sessions, float64(st.Sessions))
	gauge(c.subscriptions, float64(st.Subscriptions))
	gauge(c.retained, float64(st.Retained))
	counter(c.authFailures, st.AuthFailures)
	gauge(c.uptime, time.Since(c.b.StartTime()).Seconds())
	gauge(c.info, 1, c.version)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
