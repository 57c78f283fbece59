package core

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xmq-io/xmq/codec"
)

// MaxTopicMetrics bounds the registered topic metrics (as EMQX does, 512):
// each is matched against every routed PUBLISH and is one set of
// Prometheus series, so neither the publish path nor the metrics'
// cardinality may grow without bound.
const MaxTopicMetrics = 512

// Topic metric errors.
var (
	ErrTopicMetricsFull   = fmt.Errorf("core: at most %d topic metrics", MaxTopicMetrics)
	ErrTopicMetricExists  = errors.New("core: the topic metric exists")
	ErrTopicMetricInvalid = errors.New("core: a topic metric is a topic name or a (non-shared) filter")
)

// TopicMetric is one registered topic (or filter) and what the broker
// counted for it since it was registered.
type TopicMetric struct {
	Topic string // a topic name or a filter with '+' or '#'
	// MessagesInQoS counts the PUBLISH packets (and wills) routed on a
	// matching topic, by the QoS they were published with.
	MessagesInQoS [3]int64
	MessagesIn    int64 // the sum of MessagesInQoS
	// MessagesOut counts the deliveries queued for a subscriber on this
	// node (one per matching subscription).
	MessagesOut int64
	// MessagesDropped counts the messages routed to no subscriber (on a
	// node outside a cluster) and the deliveries dropped or refused when
	// queued (offline, full queue, full store).
	MessagesDropped int64
	Created         time.Time
}

// topicMetric is a registered entry's counters: one atomic add each.
type topicMetric struct {
	filter  string
	created time.Time
	in      [3]atomic.Int64
	out     atomic.Int64
	dropped atomic.Int64
}

// topicMetricSet is the registered entries, never changed once published
// (copy on write): the publish path reads it without a lock.
type topicMetricSet struct {
	exact map[string]*topicMetric // topic names: one map lookup per message
	wild  []*topicMetric          // filters: matched one by one
	all   []*topicMetric          // in registration order
}

// topicMetrics holds the registered entries. set is nil while none is
// registered, so the publish path then costs one atomic load.
type topicMetrics struct {
	mu  sync.Mutex // serializes writers (Add, Remove); readers only load set
	set atomic.Pointer[topicMetricSet]
}

// count adds one routed message on topic to every matching entry: in at
// qos, out deliveries and dropped drops. It allocates nothing.
func (t *topicMetrics) count(topic string, qos byte, out, dropped int) {
	set := t.set.Load()
	if set == nil {
		return
	}
	if m := set.exact[topic]; m != nil {
		m.add(qos, out, dropped)
	}
	for _, m := range set.wild {
		if codec.Match(unsafeBytes(m.filter), unsafeBytes(topic)) {
			m.add(qos, out, dropped)
		}
	}
}

func (m *topicMetric) add(qos byte, out, dropped int) {
	m.in[qos].Add(1) // the codec checked qos is 0..2
	if out > 0 {
		m.out.Add(int64(out))
	}
	if dropped > 0 {
		m.dropped.Add(int64(dropped))
	}
}

// publishSet builds and publishes the set of all (nil for none).
func (t *topicMetrics) publishSet(all []*topicMetric) {
	if len(all) == 0 {
		t.set.Store(nil)
		return
	}
	set := &topicMetricSet{exact: map[string]*topicMetric{}, all: all}
	for _, m := range all {
		if codec.HasWildcard(unsafeBytes(m.filter)) {
			set.wild = append(set.wild, m)
		} else {
			set.exact[m.filter] = m
		}
	}
	t.set.Store(set)
}

// AddTopicMetric registers a topic name or filter ('+' and '#' allowed,
// $share not) whose messages in, out and dropped are counted from now on:
// ErrTopicMetricExists, ErrTopicMetricsFull (MaxTopicMetrics) or
// ErrTopicMetricInvalid.
func (s *Server) AddTopicMetric(filter string) error {
	if codec.ValidFilter([]byte(filter)) != nil {
		return fmt.Errorf("%w: %q", ErrTopicMetricInvalid, filter)
	}
	if _, _, shared, _ := codec.ParseShared([]byte(filter)); shared {
		return fmt.Errorf("%w: %q", ErrTopicMetricInvalid, filter)
	}
	t := &s.topicMetrics
	t.mu.Lock()
	defer t.mu.Unlock()
	var all []*topicMetric
	if set := t.set.Load(); set != nil {
		all = set.all
	}
	if slices.ContainsFunc(all, func(m *topicMetric) bool { return m.filter == filter }) {
		return fmt.Errorf("%w: %q", ErrTopicMetricExists, filter)
	}
	if len(all) >= MaxTopicMetrics {
		return ErrTopicMetricsFull
	}
	t.publishSet(append(slices.Clip(all), &topicMetric{filter: filter, created: time.Now()}))
	return nil
}

// RemoveTopicMetric unregisters a topic metric and forgets its counts;
// false if it was not registered.
func (s *Server) RemoveTopicMetric(filter string) bool {
	t := &s.topicMetrics
	t.mu.Lock()
	defer t.mu.Unlock()
	set := t.set.Load()
	if set == nil {
		return false
	}
	i := slices.IndexFunc(set.all, func(m *topicMetric) bool { return m.filter == filter })
	if i < 0 {
		return false
	}
	t.publishSet(slices.Delete(slices.Clone(set.all), i, i+1))
	return true
}

// TopicMetrics returns the registered topic metrics in registration order.
func (s *Server) TopicMetrics() []TopicMetric {
	set := s.topicMetrics.set.Load()
	if set == nil {
		return []TopicMetric{}
	}
	out := make([]TopicMetric, len(set.all))
	for i, m := range set.all {
		tm := TopicMetric{Topic: m.filter, Created: m.created, MessagesOut: m.out.Load(), MessagesDropped: m.dropped.Load()}
		for q := range m.in {
			tm.MessagesInQoS[q] = m.in[q].Load()
			tm.MessagesIn += tm.MessagesInQoS[q]
		}
		out[i] = tm
	}
	return out
}
