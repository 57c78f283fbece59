package web

import (
	"encoding/json"
	"testing"

	"github.com/xmq-io/xmq/core"
)

// TestTopicMetricsAPI: viewers list, only admins register and remove, and
// the registered entries (only they) have Prometheus series.
func TestTopicMetricsAPI(t *testing.T) {
	b := &fakeBroker{}
	h := newTestServer(t, statsBroker{b}, nil).Handler()
	viewer := map[string]string{"X-API-Key": viewerKey}
	admin := map[string]string{"X-API-Key": adminKey}
	for _, tt := range []struct {
		name   string
		q      req
		status int
	}{
		{"viewer may not register", req{method: "POST", path: "/api/v1/topic-metrics", body: `{"topic":"a/b"}`, header: viewer}, 403},
		{"admin registers", req{method: "POST", path: "/api/v1/topic-metrics", body: `{"topic":"a/b"}`, header: admin}, 201},
		{"admin registers a filter", req{method: "POST", path: "/api/v1/topic-metrics", body: `{"topic":"s/+/t"}`, header: admin}, 201},
		{"twice", req{method: "POST", path: "/api/v1/topic-metrics", body: `{"topic":"a/b"}`, header: admin}, 409},
		{"invalid", req{method: "POST", path: "/api/v1/topic-metrics", body: `{"topic":""}`, header: admin}, 400},
		{"viewer may not remove", req{method: "DELETE", path: "/api/v1/topic-metrics/a/b", header: viewer}, 403},
		{"unknown", req{method: "DELETE", path: "/api/v1/topic-metrics/x", header: admin}, 404},
	} {
		if r := call(t, h, tt.q); r.status != tt.status {
			t.Errorf("%s: %d %s, want %d", tt.name, r.status, r.body, tt.status)
		}
	}
	b.mu.Lock()
	b.topics[0].MessagesInQoS, b.topics[0].MessagesIn, b.topics[0].MessagesOut, b.topics[0].MessagesDropped = [3]int64{2, 3, 0}, 5, 4, 1
	b.mu.Unlock()

	r := call(t, h, req{path: "/api/v1/topic-metrics", header: viewer})
	var list struct {
		TopicMetrics []topicMetricJSON `json:"topic_metrics"`
		Max          int               `json:"max"`
	}
	if err := json.Unmarshal(r.body, &list); r.status != 200 || err != nil {
		t.Fatalf("GET: %d %s (%v)", r.status, r.body, err)
	}
	if len(list.TopicMetrics) != 2 || list.Max != core.MaxTopicMetrics {
		t.Fatalf("GET: %s", r.body)
	}
	if m := list.TopicMetrics[0]; m.Topic != "a/b" || m.MessagesIn != 5 || m.MessagesInQoS["1"] != 3 || m.MessagesOut != 4 || m.MessagesDropped != 1 {
		t.Errorf("a/b listed as %+v", m)
	}

	fams := scrape(t, h)
	for _, s := range []struct {
		name, labels string
		want         float64
	}{
		{"xmq_topic_messages_in_total", "qos=0,topic=a/b", 2},
		{"xmq_topic_messages_in_total", "qos=1,topic=a/b", 3},
		{"xmq_topic_messages_in_total", "qos=2,topic=s/+/t", 0},
		{"xmq_topic_messages_out_total", "topic=a/b", 4},
		{"xmq_topic_messages_dropped_total", "topic=a/b", 1},
	} {
		if v, err := value(fams, s.name, s.labels); err != nil || v != s.want {
			t.Errorf("%s{%s} = %v (%v), want %v", s.name, s.labels, v, err, s.want)
		}
	}

	if r := call(t, h, req{method: "DELETE", path: "/api/v1/topic-metrics/a/b", header: admin}); r.status != 200 {
		t.Errorf("DELETE a/b: %d %s", r.status, r.body)
	}
	if _, err := value(scrape(t, h), "xmq_topic_messages_out_total", "topic=a/b"); err == nil {
		t.Error("a removed entry still has series")
	}
}

// statsBroker is a fakeBroker whose Stats the collector can read (it
// fills ConnectsByListener).
type statsBroker struct{ *fakeBroker }

func (b statsBroker) Stats() core.Snapshot {
	st := b.fakeBroker.Stats()
	st.ConnectsByListener = map[string]int64{}
	return st
}
