package cluster

import (
	"context"
	"encoding/base64"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// The replicated state lives in two JetStream key-value buckets per
// cluster, whatever the number of clients, subscriptions or topics (never
// one JetStream object per MQTT subscription or client):
//
//	NAME_clients   client id → the node holding its connection (the registry)
//	NAME_retained  topic → its retained message
//
// Keys are the client id or topic in unpadded base64url (KV keys allow
// few characters). Each node watches both buckets with one ordered
// consumer each.

// stateTimeout bounds one request to JetStream (a claim, a bucket setup).
const stateTimeout = 2 * time.Second

// state is the JetStream side once its buckets exist.
type state struct {
	js       jetstream.JetStream
	clients  jetstream.KeyValue
	retained jetstream.KeyValue
	// sessions is the session replicas' stream (replica.go), nil
	// without session replicas.
	sessions jetstream.Stream
	// retainedSubject is the subject prefix of retained's keys, for
	// asynchronous puts.
	retainedSubject string
}

func key(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func unkey(k string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(k)
	return string(b), err == nil
}

// replicas is the buckets' replica count: Options.Replicas, or min(3,
// nodes) with the nodes counted from the embedded routes (this node's
// own listed route aside) or, with an external NATS, from the servers
// the connection knows.
func (c *Cluster) replicas() int {
	if c.opts.Replicas > 0 {
		return c.opts.Replicas
	}
	return min(3, c.nodeCount())
}

// stateLoop makes the buckets, retrying until JetStream answers (a
// clustered JetStream needs a quorum of its servers), then watches them
// until Close, making the watches again when they end.
func (c *Cluster) stateLoop() {
	defer c.done.Done()
	js, err := jetstream.New(c.nc, jetstream.WithPublishAsyncMaxPending(4096), jetstream.WithPublishAsyncTimeout(stateTimeout))
	if err != nil {
		c.log.Error("JetStream unavailable: no client id registry, retained messages stay on their node", zap.Error(err))
		return
	}
	r := c.replicas()
	var st *state
	for st == nil {
		st, err = c.makeBuckets(js, r)
		if err != nil {
			c.warn("JetStream not ready yet: client ids are held per node and retained messages stay local meanwhile",
				zap.Int("replicas", r), zap.Error(err))
			select {
			case <-c.stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The watches exist before any claim is made (state is stored after):
	// a claim by another node must not slip in before the registry's
	// watch, which sees only updates.
	cw := c.startWatch(ctx, st.clients, jetstream.UpdatesOnly())
	rw := c.startWatch(ctx, st.retained)
	if cw == nil || rw == nil {
		return // stopping
	}
	var wg sync.WaitGroup
	wg.Go(func() { c.watch(ctx, st.clients, cw, c.reg.clientEntry, nil, jetstream.UpdatesOnly()) })
	// Topics the bucket has (or had: a cleared one keeps a delete marker)
	// when this node starts watching; the others among this node's own
	// retained messages were kept before it joined, and are uploaded.
	known := map[string]bool{}
	wg.Go(func() {
		c.watch(ctx, st.retained, rw, func(e jetstream.KeyValueEntry) {
			if known != nil {
				known[e.Key()] = true
			}
			c.retained.retainedEntry(e)
		}, func() {
			c.retained.uploadRetained(known)
			known = nil
		})
	})
	wg.Go(func() { c.retained.retainLoop(st) })
	if st.sessions != nil {
		wg.Go(func() { c.rep.replicaLoop(st) })
	}
	wg.Go(func() { c.members.livenessLoop(st) })
	c.state.Store(st)
	wg.Go(func() { c.sessions.reconcile(st) })
	c.log.Info("cluster state ready", zap.Int("replicas", r))
	select { // changes queued before the bucket existed
	case c.retained.wake <- struct{}{}:
	default:
	}
	<-c.stop
	cancel()
	wg.Wait()
}

func (c *Cluster) makeBuckets(js jetstream.JetStream, replicas int) (*state, error) {
	st := &state{js: js}
	// JetStream drops API requests until its servers have elected a meta
	// leader: ask a cheap one first, with a short wait.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, err := js.AccountInfo(ctx)
	cancel()
	if err != nil {
		return nil, err
	}
	st.clients, err = c.bucket(js, jetstream.KeyValueConfig{Bucket: c.opts.Name + "_clients",
		Description: "xmq: the node of each connected client id", Replicas: replicas, Storage: jetstream.FileStorage})
	if err != nil {
		return nil, err
	}
	st.retained, err = c.bucket(js, jetstream.KeyValueConfig{Bucket: c.opts.Name + "_retained",
		Description: "xmq: retained messages", Replicas: replicas, Storage: jetstream.FileStorage})
	if err != nil {
		return nil, err
	}
	st.retainedSubject = "$KV." + c.opts.Name + "_retained."
	if c.opts.SessionReplicas > 1 {
		n := min(c.opts.SessionReplicas, c.nodeCount())
		if st.sessions, err = c.rep.makeSessionStream(js, n); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// bucket binds to a bucket, creating it if it does not exist. Every node
// starting at once tries: one creates it (its replicas elect a leader,
// which takes seconds), the others find it.
func (c *Cluster) bucket(js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	// A request lost to a meta leader change is not answered: a short
	// wait, and the caller tries again.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return kv, err
	}
	kv, err = js.CreateKeyValue(ctx, cfg)
	if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return js.KeyValue(ctx, cfg.Bucket)
	}
	return kv, err
}

// startWatch watches kv, trying again until it can or ctx ends (nil).
func (c *Cluster) startWatch(ctx context.Context, kv jetstream.KeyValue, opts ...jetstream.WatchOpt) jetstream.KeyWatcher {
	for {
		w, err := kv.WatchAll(ctx, opts...)
		if err == nil {
			return w
		}
		c.warn("cannot watch a cluster bucket", zap.String("bucket", kv.Bucket()), zap.Error(err))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// watch hands every entry of w to handle until ctx ends, and calls
// initial (when not nil) once the bucket's values at the start are all
// in; when the watch ends early (its consumer lost with a server), it
// watches again from the revision after the last one handled, so no
// change is skipped (with first's options when none was).
func (c *Cluster) watch(ctx context.Context, kv jetstream.KeyValue, w jetstream.KeyWatcher, handle func(jetstream.KeyValueEntry),
	initial func(), first ...jetstream.WatchOpt) {
	var last uint64
	for {
		for e := range w.Updates() {
			if e == nil { // the initial values are all in
				if initial != nil {
					initial()
					initial = nil
				}
				continue
			}
			last = e.Revision()
			handle(e)
		}
		_ = w.Stop()
		if ctx.Err() != nil {
			return
		}
		opts := first // nothing handled yet: as the first time
		if last > 0 {
			opts = []jetstream.WatchOpt{jetstream.ResumeFromRevision(last + 1)}
		}
		if w = c.startWatch(ctx, kv, opts...); w == nil {
			return
		}
	}
}

// isLeaderless reports a request no stream leader answered (in time).
func isLeaderless(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
}

func isWrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// isMidWrite reports the replicated stream's refusal that names no
// revision: among other cases, a write of the same key is in flight.
func isMidWrite(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}
