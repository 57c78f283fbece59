package cluster

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// retainedValue is a retained message in its bucket.
type retainedValue struct {
	Topic   string      `json:"t"`
	Payload []byte      `json:"p,omitempty"`
	QoS     byte        `json:"q,omitempty"`
	Expires int64       `json:"e,omitempty"` // Unix milliseconds
	From    string      `json:"f,omitempty"`
	Props   nats.Header `json:"h,omitempty"` // as the message's headers (message.go)
}

// maxRetainPending bounds the retained changes waiting to be replicated
// (distinct topics: a topic changed again while waiting keeps one entry).
const maxRetainPending = 64 << 10

// retainedSync replicates retained messages through the cluster's
// bucket: this node's changes wait here, one per topic, in the order their
// topics first changed, for retainLoop to write them; every node, this one
// included, keeps what the bucket's watch brings (retainedEntry).
type retainedSync struct {
	*link
	mu            sync.Mutex
	order         []string
	ops           map[string]*nats.Msg
	wake          chan struct{}
	retainDropped atomic.Int64 // changes that stayed on this node (too many waiting)
}

// Retain records a retained message in the cluster's bucket (an empty
// payload deletes it); core.Cluster's contract: it queues the change and
// returns. One goroutine (retainLoop) writes the queue to the bucket and
// retries what JetStream did not take (a leader election after a node's
// loss), so a change is lost only when the queue is full (logged,
// counted) or the node stops first.
func (c *Cluster) Retain(m codec.Message) { c.retained.queueRetain(m, false) }

// queueRetain queues a retained change for the bucket; with create, only
// if the topic has no change queued already, and to be written only if
// the bucket has no entry for it (a refusal drops it). It reports whether
// it queued the change.
func (rs *retainedSync) queueRetain(rm codec.Message, create bool) bool {
	if rs.closed.Load() {
		return false
	}
	topic := rm.Topic
	m := &nats.Msg{Header: nats.Header{}}
	if create {
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	}
	if len(rm.Payload) == 0 {
		m.Header.Set("KV-Operation", "DEL")
	} else {
		v := retainedValue{Topic: topic, Payload: rm.Payload, QoS: rm.QoS, From: rm.From}
		if !rm.Expires.IsZero() {
			v.Expires = rm.Expires.UnixMilli()
		}
		if rm.Props != nil {
			v.Props = nats.Header{}
			setProps(v.Props, rm.Props)
		}
		m.Data, _ = json.Marshal(v) // cannot fail: plain fields
	}
	q := rs
	q.mu.Lock()
	if _, queued := q.ops[topic]; !queued {
		if len(q.order) >= maxRetainPending {
			q.mu.Unlock()
			rs.retainDropped.Add(1)
			rs.warn("retained message kept on this node only: too many waiting to be replicated", zap.String("topic", topic))
			return false
		}
		q.order = append(q.order, topic)
	} else if create {
		q.mu.Unlock()
		return false // a change of this node is on its way
	}
	q.ops[topic] = m
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// retainLoop writes the queued retained changes to the bucket, in
// batches: each published asynchronously, the batch awaited; a failed
// change goes back to the queue unless its topic changed again meanwhile.
func (rs *retainedSync) retainLoop(st *state) {
	q := rs
	for {
		select {
		case <-rs.stop:
			return
		case <-q.wake:
		}
		for {
			q.mu.Lock()
			order := q.order
			batch := make([]*nats.Msg, len(order))
			for i, topic := range order {
				batch[i] = q.ops[topic]
			}
			q.order = nil
			clear(q.ops)
			q.mu.Unlock()
			if len(order) == 0 {
				break
			}
			futures := make([]jetstream.PubAckFuture, len(batch))
			for i, m := range batch {
				m.Subject = st.retainedSubject + key(order[i])
				futures[i], _ = st.js.PublishMsgAsync(m)
			}
			failed := false
			for i, f := range futures {
				err, stopped := rs.awaitAck(f)
				if stopped {
					return
				}
				if err == nil {
					continue
				}
				if isWrongRevision(err) && batch[i].Header.Get(jetstream.ExpectedLastSubjSeqHeader) == "0" {
					continue // an upload (uploadRetained) of a topic another node set meanwhile: theirs wins
				}
				failed = true
				rs.warn("retained message not replicated yet: retrying", zap.String("topic", order[i]), zap.Error(err))
				q.mu.Lock()
				if _, newer := q.ops[order[i]]; !newer {
					q.order = append(q.order, order[i])
					q.ops[order[i]] = batch[i]
				}
				q.mu.Unlock()
			}
			if failed {
				select {
				case <-rs.stop:
					return
				case <-time.After(250 * time.Millisecond):
				}
			}
		}
	}
}

// uploadRetained queues for the bucket this node's retained messages
// whose topic the bucket has never had (known holds the keys it has):
// those a broker kept before it became a node of the cluster, or set
// while alone. Each is written only if the topic still has no entry
// then: a value another node set meanwhile wins.
func (rs *retainedSync) uploadRetained(known map[string]bool) {
	n := 0
	rs.local.LocalRetained(func(m codec.Message) {
		if known[key(m.Topic)] || len(m.Payload) == 0 {
			return
		}
		if rs.queueRetain(m, true) {
			n++
		}
	})
	if n > 0 {
		rs.log.Info("retained messages kept before joining the cluster are replicated", zap.Int("topics", n))
	}
}

// retainedEntry keeps a retained message of the bucket on this node. Every
// node, the one that set it included, applies the bucket's changes in the
// bucket's order, so all end with the same message per topic.
func (rs *retainedSync) retainedEntry(e jetstream.KeyValueEntry) {
	topic, ok := unkey(e.Key())
	if !ok || codec.ValidTopicName([]byte(topic)) != nil {
		return
	}
	if e.Operation() != jetstream.KeyValuePut {
		rs.local.SetRetained(codec.Message{Topic: topic})
		return
	}
	var v retainedValue
	if err := json.Unmarshal(e.Value(), &v); err != nil || v.Topic != topic {
		rs.warn("a retained message in the cluster's bucket does not decode", zap.String("topic", topic))
		return
	}
	m := codec.Message{Topic: topic, Payload: v.Payload, QoS: v.QoS, Props: decodeProps(v.Props), From: v.From}
	if v.Expires != 0 {
		m.Expires = time.UnixMilli(v.Expires)
	}
	rs.local.SetRetained(m)
}
