package core

import (
	"sync"
	"sync/atomic"
	"time"
)

// Limits are the options that may change while the server runs
// (SetLimits). Each is read where it is used, so a change applies from its
// next use: max_connections, keepalive, connect timeout, inflight window
// and rates to the next CONNECT; the session expiry cap at the next CONNECT
// or DISCONNECT; the queue limits and overflow policy to every session's
// next message; the subscription limit to the next SUBSCRIBE; the
// retained budget to the next retained PUBLISH; the write timeout to the
// next write that has to wait. Zero values mean the defaults, as in
// Options. The other options are fixed at New.
type Limits struct {
	MaxConnections            int
	MaxKeepAlive              uint16
	MaxSessionExpiry          uint32
	ConnectTimeout            time.Duration
	WriteTimeout              time.Duration
	MaxInflight               int
	MaxQueued                 int
	MaxQueuedBytes            int64
	QueueOverflow             OverflowPolicy
	MaxSubscriptionsPerClient int
	MaxMessageRate            int
	MaxByteRate               int
	MaxRetainedMessages       int
	MaxRetainedBytes          int64
}

// liveLimits holds the Limits in force. Each field is an atomic read at
// its use, on any goroutine: no lock guards them, and a use sees either
// the old or the new value, each valid on its own.
type liveLimits struct {
	mu sync.Mutex // serializes SetLimits; readers load the atomics without it

	maxConnections   atomic.Int64
	maxKeepAlive     atomic.Uint32
	maxSessionExpiry atomic.Uint32
	connectTimeout   atomic.Int64 // time.Duration
	writeTimeout     atomic.Int64 // time.Duration
	maxInflight      atomic.Int64
	maxQueued        atomic.Int64
	maxQueuedBytes   atomic.Int64
	overflowDisc     atomic.Bool // QueueOverflow is OverflowDisconnect
	maxSubs          atomic.Int64
	maxMessageRate   atomic.Int64
	maxByteRate      atomic.Int64
	maxRetained      atomic.Int64
	maxRetainedBytes atomic.Int64
}

// store puts the limits of o (defaults filled in) in force.
func (l *liveLimits) store(o *Options) {
	l.maxConnections.Store(int64(o.MaxConnections))
	l.maxKeepAlive.Store(uint32(o.MaxKeepAlive))
	l.maxSessionExpiry.Store(o.MaxSessionExpiry)
	l.connectTimeout.Store(int64(o.ConnectTimeout))
	l.writeTimeout.Store(int64(o.WriteTimeout))
	l.maxInflight.Store(int64(o.MaxInflight))
	l.maxQueued.Store(int64(o.MaxQueued))
	l.maxQueuedBytes.Store(o.MaxQueuedBytes)
	l.overflowDisc.Store(o.QueueOverflow == OverflowDisconnect)
	l.maxSubs.Store(int64(o.MaxSubscriptionsPerClient))
	l.maxMessageRate.Store(int64(o.MaxMessageRate))
	l.maxByteRate.Store(int64(o.MaxByteRate))
	l.maxRetained.Store(int64(o.MaxRetainedMessages))
	l.maxRetainedBytes.Store(o.MaxRetainedBytes)
}

// load writes the limits in force into o.
func (l *liveLimits) load(o *Options) {
	o.MaxConnections = int(l.maxConnections.Load())
	o.MaxKeepAlive = uint16(l.maxKeepAlive.Load())
	o.MaxSessionExpiry = l.maxSessionExpiry.Load()
	o.ConnectTimeout = time.Duration(l.connectTimeout.Load())
	o.WriteTimeout = time.Duration(l.writeTimeout.Load())
	o.MaxInflight = int(l.maxInflight.Load())
	o.MaxQueued = int(l.maxQueued.Load())
	o.MaxQueuedBytes = l.maxQueuedBytes.Load()
	o.QueueOverflow = OverflowDropNew
	if l.overflowDisc.Load() {
		o.QueueOverflow = OverflowDisconnect
	}
	o.MaxSubscriptionsPerClient = int(l.maxSubs.Load())
	o.MaxMessageRate = int(l.maxMessageRate.Load())
	o.MaxByteRate = int(l.maxByteRate.Load())
	o.MaxRetainedMessages = int(l.maxRetained.Load())
	o.MaxRetainedBytes = l.maxRetainedBytes.Load()
}

// Limits returns the Limits part of o.
func (o Options) Limits() Limits {
	return Limits{
		MaxConnections: o.MaxConnections, MaxKeepAlive: o.MaxKeepAlive, MaxSessionExpiry: o.MaxSessionExpiry,
		ConnectTimeout: o.ConnectTimeout, WriteTimeout: o.WriteTimeout, MaxInflight: o.MaxInflight,
		MaxQueued: o.MaxQueued, MaxQueuedBytes: o.MaxQueuedBytes, QueueOverflow: o.QueueOverflow,
		MaxSubscriptionsPerClient: o.MaxSubscriptionsPerClient, MaxMessageRate: o.MaxMessageRate, MaxByteRate: o.MaxByteRate,
		MaxRetainedMessages: o.MaxRetainedMessages, MaxRetainedBytes: o.MaxRetainedBytes,
	}
}

// setLimits copies l into o.
func (o *Options) setLimits(l Limits) {
	o.MaxConnections, o.MaxKeepAlive, o.MaxSessionExpiry = l.MaxConnections, l.MaxKeepAlive, l.MaxSessionExpiry
	o.ConnectTimeout, o.WriteTimeout, o.MaxInflight = l.ConnectTimeout, l.WriteTimeout, l.MaxInflight
	o.MaxQueued, o.MaxQueuedBytes, o.QueueOverflow = l.MaxQueued, l.MaxQueuedBytes, l.QueueOverflow
	o.MaxSubscriptionsPerClient, o.MaxMessageRate, o.MaxByteRate = l.MaxSubscriptionsPerClient, l.MaxMessageRate, l.MaxByteRate
	o.MaxRetainedMessages, o.MaxRetainedBytes = l.MaxRetainedMessages, l.MaxRetainedBytes
}

// SetLimits puts new limits in force while the server runs (a reload);
// each applies from its next use (see Limits). Zero values mean the
// defaults. Invalid limits are refused whole and nothing changes.
func (s *Server) SetLimits(l Limits) error {
	o := s.Options()
	o.setLimits(l)
	// A zero means the default again, as at New; the other options have
	// theirs filled in already, which setDefaults leaves alone.
	o.setDefaults()
	if err := o.Validate(); err != nil {
		return err
	}
	s.live.mu.Lock()
	s.live.store(&o)
	s.live.mu.Unlock()
	return nil
}
