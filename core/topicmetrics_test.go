package core_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// TestTopicMetricsCount: registered exact topics and filters count the
// messages published on matching topics (by QoS), their deliveries and the
// messages no one received; unregistered topics are counted nowhere.
func TestTopicMetricsCount(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	if got := srv.TopicMetrics(); len(got) != 0 {
		t.Fatalf("TopicMetrics() = %v before any is registered", got)
	}
	for _, f := range []string{"a/b", "s/+/t", "w/#", "#"} {
		if err := srv.AddTopicMetric(f); err != nil {
			t.Fatalf("AddTopicMetric(%q): %v", f, err)
		}
	}
	s := client(t, srv, codec.V311, "sub")
	s.Subscribe(1, "a/b", "s/#")
	p := client(t, srv, codec.V311, "pub")
	publish := func(topic string, qos byte) {
		t.Helper()
		pk := &codec.Publish{Topic: []byte(topic), QoS: qos, Payload: []byte("x")}
		if qos > 0 {
			pk.PacketID = p.NextID()
		}
		p.Send(pk)
		if qos > 0 {
			p.ExpectAck(codec.PUBACK, pk.PacketID)
		}
	}
	publish("a/b", 1)
	s.ExpectPublish()
	publish("s/x/t", 0)
	s.ExpectPublish()
	publish("s/x/u", 0) // delivered, counted only by "#"
	s.ExpectPublish()
	publish("w/z", 0) // no subscriber: dropped
	publish("u/v", 1) // no subscriber: dropped, counted only by "#"
	want := map[string]core.TopicMetric{
		"a/b":   {MessagesInQoS: [3]int64{0, 1, 0}, MessagesIn: 1, MessagesOut: 1},
		"s/+/t": {MessagesInQoS: [3]int64{1, 0, 0}, MessagesIn: 1, MessagesOut: 1},
		"w/#":   {MessagesInQoS: [3]int64{1, 0, 0}, MessagesIn: 1, MessagesDropped: 1},
		"#":     {MessagesInQoS: [3]int64{3, 2, 0}, MessagesIn: 5, MessagesOut: 3, MessagesDropped: 2},
	}
	got := srv.TopicMetrics()
	if len(got) != len(want) {
		t.Fatalf("%d topic metrics, want %d", len(got), len(want))
	}
	for _, m := range got {
		w := want[m.Topic]
		w.Topic, w.Created = m.Topic, m.Created
		if m != w {
			t.Errorf("%q: got %+v, want %+v", m.Topic, m, w)
		}
		if m.Created.IsZero() {
			t.Errorf("%q: no creation time", m.Topic)
		}
	}
	if !srv.RemoveTopicMetric("#") || srv.RemoveTopicMetric("#") {
		t.Error("RemoveTopicMetric: want true once, then false")
	}
	publish("u/v", 0)
	for _, m := range srv.TopicMetrics() {
		if m.Topic == "#" {
			t.Errorf("%q still listed after RemoveTopicMetric", m.Topic)
		}
	}
}

// TestTopicMetricsBound: at most MaxTopicMetrics entries, each once, and
// only topic names or non-shared filters.
func TestTopicMetricsBound(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	for i := range core.MaxTopicMetrics {
		if err := srv.AddTopicMetric(fmt.Sprintf("t/%d/+", i)); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	if err := srv.AddTopicMetric("one/more"); !errors.Is(err, core.ErrTopicMetricsFull) {
		t.Errorf("entry %d: %v, want ErrTopicMetricsFull", core.MaxTopicMetrics+1, err)
	}
	if err := srv.AddTopicMetric("t/0/+"); !errors.Is(err, core.ErrTopicMetricExists) {
		t.Errorf("a second t/0/+: %v, want ErrTopicMetricExists", err)
	}
	srv.RemoveTopicMetric("t/0/+")
	if err := srv.AddTopicMetric("one/more"); err != nil {
		t.Errorf("after a removal: %v", err)
	}
	for _, f := range []string{"", "a/#/b", "a+", "$share/g/a"} {
		if err := srv.AddTopicMetric(f); !errors.Is(err, core.ErrTopicMetricInvalid) {
			t.Errorf("AddTopicMetric(%q): %v, want ErrTopicMetricInvalid", f, err)
		}
	}
	if n := len(srv.TopicMetrics()); n != core.MaxTopicMetrics {
		t.Errorf("%d entries, want %d", n, core.MaxTopicMetrics)
	}
}
