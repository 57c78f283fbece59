package web

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/core"
)

// topicMetricJSON is one topic metric as the API lists it.
type topicMetricJSON struct {
	Topic           string           `json:"topic"`
	MessagesIn      int64            `json:"messages_in"`
	MessagesInQoS   map[string]int64 `json:"messages_in_qos"` // "0", "1", "2"
	MessagesOut     int64            `json:"messages_out"`
	MessagesDropped int64            `json:"messages_dropped"`
	Rates           topicRates       `json:"rates"`
	Created         time.Time        `json:"created"`
}

// topicRates are messages per second since the previous listing.
type topicRates struct {
	In      float64 `json:"messages_in"`
	Out     float64 `json:"messages_out"`
	Dropped float64 `json:"messages_dropped"`
}

// topicRateTracker turns the listings' counters into rates: core keeps
// only counters (one atomic add each on the publish path), so the rate is
// taken between two listings at least a second apart; a listing sooner
// repeats the previous rate rather than divide by a tiny interval.
type topicRateTracker struct {
	mu   sync.Mutex // guards last
	last map[string]topicReading
}

type topicReading struct {
	t                time.Time
	created          time.Time // a removed and registered again entry starts over
	in, out, dropped int64
	rates            topicRates
}

func (tr *topicRateTracker) rates(ms []core.TopicMetric, now time.Time) []topicRates {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	next := make(map[string]topicReading, len(ms)) // entries removed since are forgotten
	out := make([]topicRates, len(ms))
	for i, m := range ms {
		prev, ok := tr.last[m.Topic]
		cur := topicReading{t: now, created: m.Created, in: m.MessagesIn, out: m.MessagesOut, dropped: m.MessagesDropped}
		switch {
		case !ok || !prev.created.Equal(m.Created):
			// The first reading: no rate yet.
		case now.Sub(prev.t) < time.Second:
			cur = prev
		default:
			d := now.Sub(prev.t).Seconds()
			cur.rates = topicRates{In: float64(cur.in-prev.in) / d, Out: float64(cur.out-prev.out) / d,
				Dropped: float64(cur.dropped-prev.dropped) / d}
		}
		next[m.Topic] = cur
		out[i] = cur.rates
	}
	tr.last = next
	return out
}

// topicMetricAPI serves /api/v1/topic-metrics.
type topicMetricAPI struct {
	broker Broker
	// rates turns topic metrics' counters into rates between listings.
	rates *topicRateTracker
	log   *zap.Logger
}

// listTopicMetrics answers GET /api/v1/topic-metrics.
func (a topicMetricAPI) listTopicMetrics(w http.ResponseWriter, _ *http.Request, _ principal, _ string) error {
	ms := a.broker.TopicMetrics()
	rates := a.rates.rates(ms, time.Now())
	out := make([]topicMetricJSON, len(ms))
	for i, m := range ms {
		out[i] = topicMetricJSON{Topic: m.Topic, MessagesIn: m.MessagesIn, MessagesOut: m.MessagesOut,
			MessagesDropped: m.MessagesDropped, Rates: rates[i], Created: m.Created,
			MessagesInQoS: map[string]int64{"0": m.MessagesInQoS[0], "1": m.MessagesInQoS[1], "2": m.MessagesInQoS[2]}}
	}
	writeJSON(w, http.StatusOK, map[string]any{"topic_metrics": out, "max": core.MaxTopicMetrics})
	return nil
}

// addTopicMetric answers POST /api/v1/topic-metrics {"topic": "..."}.
func (a topicMetricAPI) addTopicMetric(w http.ResponseWriter, r *http.Request, p principal, _ string) error {
	var body struct {
		Topic string `json:"topic"`
	}
	if err := decodeBody(a.log, w, r, 4096, &body); err != nil {
		return err
	}
	switch err := a.broker.AddTopicMetric(body.Topic); {
	case errors.Is(err, core.ErrTopicMetricExists):
		return errorf(http.StatusConflict, "exists", err.Error())
	case errors.Is(err, core.ErrTopicMetricsFull):
		return errorf(http.StatusConflict, "limit_reached", err.Error()+": remove one first")
	case err != nil:
		return badRequest(err.Error())
	}
	a.log.Info("topic metric added by operator", zap.String("topic", body.Topic), zap.String("by", p.User))
	writeJSON(w, http.StatusCreated, map[string]any{"topic": body.Topic, "created": true})
	return nil
}

// removeTopicMetric answers DELETE /api/v1/topic-metrics/{topic}.
func (a topicMetricAPI) removeTopicMetric(w http.ResponseWriter, _ *http.Request, p principal, topic string) error {
	if !a.broker.RemoveTopicMetric(topic) {
		return notFound("no topic metric " + topic)
	}
	a.log.Info("topic metric removed by operator", zap.String("topic", topic), zap.String("by", p.User))
	writeJSON(w, http.StatusOK, map[string]any{"topic": topic, "deleted": true})
	return nil
}
