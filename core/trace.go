package core

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xmq-io/xmq/codec"
)

// Tracing writes every packet of chosen connections to a trace's writer,
// one line each, for an operator hunting a problem (EMQX's trace). The
// hot path does not pay for it: the server holds the running traces in an
// atomic pointer that is nil almost always; a connection is matched
// against them once, at CONNECT, and again when a trace starts or stops
// (the connections are walked then), and keeps a *tracer only when some
// trace wants it. Its reader (after ReadPacket) and writer (collect) test
// that pointer and do nothing more when it is nil. A topic trace follows
// packets, not connections: while one runs every connection has a tracer
// that checks the topic of its PUBLISH, SUBSCRIBE and UNSUBSCRIBE packets.

// TraceSpec says what a trace follows, and for how long.
type TraceSpec struct {
	// Exactly one of these: the connections of a client id, of a user
	// name, from an address or prefix, or the packets (of any connection)
	// on topics a filter matches.
	ClientID    string
	Username    string
	IP          netip.Prefix
	TopicFilter string
	// Payload writes each PUBLISH payload in hex as well as its size.
	Payload bool
	// Duration stops the trace after this long (required).
	Duration time.Duration
	// MaxBytes stops the trace once it has written this much (required).
	MaxBytes int64
}

// Validate reports a spec that cannot run.
func (s *TraceSpec) Validate() error {
	n := 0
	for _, set := range []bool{s.ClientID != "", s.Username != "", s.IP.IsValid(), s.TopicFilter != ""} {
		if set {
			n++
		}
	}
	switch {
	case n != 1:
		return errors.New("core: a trace follows exactly one of a client id, a user name, an IP address or prefix, or a topic filter")
	case s.Duration <= 0:
		return errors.New("core: a trace needs a positive duration")
	case s.MaxBytes <= 0:
		return errors.New("core: a trace needs a positive size limit")
	}
	if s.TopicFilter != "" {
		if err := codec.ValidFilter([]byte(s.TopicFilter)); err != nil {
			return fmt.Errorf("core: trace topic filter %q: %w", s.TopicFilter, err)
		}
	}
	return nil
}

// Trace is a running trace. Its lines are written to its writer under its
// own lock, by the traced connections' readers and writers.
type Trace struct {
	srv    *Server
	spec   TraceSpec
	filter []byte
	done   func(why string)

	mu      sync.Mutex // guards w, line, written, packets, stopped, full, why, timer
	w       io.Writer
	line    []byte
	written int64
	packets int64
	stopped bool
	full    bool // the size limit is reached (or a write failed): stop is under way
	why     string
	timer   *time.Timer
}

// TraceStatus is what a trace has done so far.
type TraceStatus struct {
	Packets int64  // lines written for packets
	Bytes   int64  // bytes written
	Stopped bool   // no more lines will come
	Why     string // why it stopped: "duration ended", "size limit reached", "stopped"
}

// Status reports the trace's progress.
func (t *Trace) Status() TraceStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	return TraceStatus{Packets: t.packets, Bytes: t.written, Stopped: t.stopped, Why: t.why}
}

// tracing is the server's running traces: set is nil almost always, so
// the hot path tests only the connection's own tracer; mu orders starting
// and stopping traces (and the retracing of connections that follows).
type tracing struct {
	mu  sync.Mutex
	set atomic.Pointer[traceSet]
}

// traceSet is the running traces; replaced whole when one starts or stops.
type traceSet struct{ all []*Trace }

// tracer is a traced connection's share of the running traces.
type tracer struct{ traces []*Trace }

// StartTrace starts a trace writing to w until its duration ends, its size
// limit is reached or Stop; done (may be nil) is called once then, with
// why, after the last line. The connections it follows are found at once
// and at each CONNECT after.
func (s *Server) StartTrace(spec TraceSpec, w io.Writer, done func(why string)) (*Trace, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	t := &Trace{srv: s, spec: spec, w: w, done: done}
	if spec.TopicFilter != "" {
		t.filter = []byte(spec.TopicFilter)
	}
	t.header()
	s.tracing.mu.Lock()
	old := s.tracing.set.Load()
	next := &traceSet{}
	if old != nil {
		next.all = append(next.all, old.all...)
	}
	next.all = append(next.all, t)
	s.tracing.set.Store(next)
	s.retraceLocked()
	s.tracing.mu.Unlock()
	t.mu.Lock() // stop reads timer under mu: the timer may fire before this assignment ends
	t.timer = time.AfterFunc(spec.Duration, func() { t.stop("duration ended") })
	t.mu.Unlock()
	return t, nil
}

// Stop ends the trace (an operator's action); it is idempotent.
func (t *Trace) Stop() { t.stop("stopped") }

func (t *Trace) stop(why string) {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return
	}
	t.stopped, t.why = true, why
	t.line = append(t.line[:0], "# trace ended: "...)
	t.line = append(append(t.line, why...), '\n')
	n, _ := t.w.Write(t.line)
	t.written += int64(n)
	timer := t.timer
	t.mu.Unlock()
	if timer != nil {
		timer.Stop()
	}
	s := t.srv
	s.tracing.mu.Lock()
	if old := s.tracing.set.Load(); old != nil {
		var rest []*Trace
		for _, x := range old.all {
			if x != t {
				rest = append(rest, x)
			}
		}
		if len(rest) == 0 {
			s.tracing.set.Store(nil) // back to nothing to test on the hot path
		} else {
			s.tracing.set.Store(&traceSet{all: rest})
		}
	}
	s.retraceLocked()
	s.tracing.mu.Unlock()
	if t.done != nil {
		t.done(why)
	}
}

// retraceLocked gives every connection past CONNECT its tracer for the
// current traces; s.tracing.mu is held. A connection still in its handshake
// matches itself when it is through (client.matchTrace).
func (s *Server) retraceLocked() {
	set := s.tracing.set.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.clients {
		c.mu.Lock()
		connected := c.connected
		c.mu.Unlock()
		if connected {
			c.trace.Store(set.forConn(c.id, c.username, c.conn.RemoteAddr()))
		}
	}
}

// forConn is the tracer of a connection, nil when no trace follows it (or
// set is nil).
func (set *traceSet) forConn(id, username string, remote net.Addr) *tracer {
	if set == nil {
		return nil
	}
	var ip netip.Addr
	if ap, err := netip.ParseAddrPort(remoteString(remote)); err == nil {
		ip = ap.Addr().Unmap()
	}
	var tr *tracer
	for _, t := range set.all {
		sp := &t.spec
		if sp.TopicFilter != "" || sp.ClientID != "" && sp.ClientID == id || sp.Username != "" && sp.Username == username ||
			sp.IP.IsValid() && ip.IsValid() && sp.IP.Contains(ip) {
			if tr == nil {
				tr = &tracer{}
			}
			tr.traces = append(tr.traces, t)
		}
	}
	return tr
}

func remoteString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

// matchTrace gives c its tracer for the running traces, from what CONNECT
// said (id and user name may still change: an assigned id, a certificate
// identity); set is the traces it matched against, or nil.
func (c *client) matchTrace(id, username string) *traceSet {
	set := c.srv.tracing.set.Load()
	if set != nil {
		c.trace.Store(set.forConn(id, username, c.conn.RemoteAddr()))
	}
	return set
}

// traceIn writes an incoming packet to the traces that follow c.
func (t *tracer) in(c *client, p codec.Packet) {
	for _, x := range t.traces {
		x.packet(c, "in", p)
	}
}

// traceOut writes the packets of buf, which c's writer is about to send,
// to the traces that follow c. Writer only (it reads c.outAliases).
func (t *tracer) out(c *client, buf []byte) {
	for len(buf) > 0 {
		p, n, err := codec.Decode(buf, c.version)
		if err != nil {
			return // the rest of what collect encoded is not ours to judge
		}
		buf = buf[n:]
		if pub, ok := p.(*codec.Publish); ok && len(pub.Topic) == 0 && pub.Props.TopicAlias > 0 {
			for topic, a := range c.outAliases { // an alias the client knows: name its topic
				if a == pub.Props.TopicAlias {
					pub.Topic = unsafeBytes(topic)
				}
			}
		}
		for _, x := range t.traces {
			x.packet(c, "out", p)
		}
	}
}

// wants reports whether a topic trace covers p; other traces want every
// packet of the connections they follow.
func (t *Trace) wants(p codec.Packet) bool {
	if t.filter == nil {
		return true
	}
	switch p := p.(type) {
	case *codec.Publish:
		return len(p.Topic) > 0 && codec.Match(t.filter, p.Topic)
	case *codec.Subscribe:
		for _, s := range p.Subscriptions {
			if t.coversFilter(s.Filter) {
				return true
			}
		}
	case *codec.Unsubscribe:
		for _, f := range p.Filters {
			if t.coversFilter(f) {
				return true
			}
		}
	}
	return false
}

// coversFilter reports a subscription filter that is the trace's, or one
// whose topics the trace's filter matches (read as a topic).
func (t *Trace) coversFilter(f []byte) bool {
	if _, inner, ok, _ := codec.ParseShared(f); ok {
		f = inner
	}
	return string(f) == string(t.filter) || codec.Match(t.filter, f)
}

// packet writes one line: time, client id, remote address, direction,
// packet type and its fields. A password is never written.
func (t *Trace) packet(c *client, dir string, p codec.Packet) {
	if !t.wants(p) {
		return
	}
	t.mu.Lock()
	if t.stopped || t.full {
		t.mu.Unlock()
		return
	}
	b := t.line[:0]
	b = time.Now().UTC().AppendFormat(b, "2006-01-02T15:04:05.000000Z")
	id := c.id
	if cp, ok := p.(*codec.Connect); ok && id == "" {
		id = string(cp.ClientID)
	}
	b = append(b, ' ')
	b = strconv.AppendQuote(b, id)
	b = append(b, ' ')
	b = append(b, c.remoteAddr()...)
	b = append(b, ' ')
	b = append(b, dir...)
	b = append(b, ' ')
	b = append(b, p.Type().String()...)
	b = appendPacketFields(b, p, t.spec.Payload)
	b = append(b, '\n')
	t.line = b
	n, err := t.w.Write(b)
	t.written += int64(n)
	t.packets++
	full := t.written >= t.spec.MaxBytes || err != nil
	// Nothing more is written while stop (on its own goroutine) gets going:
	// the file ends within one line of its limit.
	t.full = full
	t.mu.Unlock()
	if full {
		why := "size limit reached"
		if err != nil {
			why = "write failed: " + err.Error()
		}
		go t.stop(why) // not on a connection's goroutine: stop walks the connections
	}
}

// header writes the trace's first line: what it follows.
func (t *Trace) header() {
	sp := &t.spec
	what := ""
	switch {
	case sp.ClientID != "":
		what = "client_id=" + strconv.Quote(sp.ClientID)
	case sp.Username != "":
		what = "username=" + strconv.Quote(sp.Username)
	case sp.IP.IsValid():
		what = "ip=" + sp.IP.String()
	default:
		what = "topic=" + strconv.Quote(sp.TopicFilter)
	}
	line := fmt.Sprintf("# xmq trace of %s for %v, at most %d bytes, payload %v; started %s\n"+
		"# time client_id remote direction type fields\n",
		what, sp.Duration, sp.MaxBytes, sp.Payload, time.Now().UTC().Format(time.RFC3339))
	n, _ := io.WriteString(t.w, line)
	t.written += int64(n)
}

// appendPacketFields writes a packet's fields as key=value pairs.
func appendPacketFields(b []byte, p codec.Packet, payload bool) []byte {
	kv := func(k string) { b = append(append(append(b, ' '), k...), '=') }
	num := func(k string, v int) { kv(k); b = strconv.AppendInt(b, int64(v), 10) }
	flag := func(k string, v bool) { kv(k); b = strconv.AppendBool(b, v) }
	str := func(k string, v []byte) { kv(k); b = strconv.AppendQuote(b, string(v)) }
	rc := func(r codec.ReasonCode) { kv("rc"); b = append(b, r.String()...) }
	reason := func(props *codec.Properties) {
		if len(props.ReasonString) > 0 {
			str("reason", props.ReasonString)
		}
	}
	switch p := p.(type) {
	case *codec.Connect:
		num("protocol", int(p.ProtocolVersion))
		str("client_id", p.ClientID)
		if p.UsernameFlag {
			str("username", p.Username)
		}
		flag("password", p.PasswordFlag) // whether there is one, never what
		flag("clean_start", p.CleanStart)
		num("keepalive", int(p.KeepAlive))
		if p.Props.Has(codec.PropSessionExpiry) {
			num("session_expiry", int(p.Props.SessionExpiry))
		}
		if p.WillFlag {
			str("will_topic", p.WillTopic)
			num("will_qos", int(p.WillQoS))
			flag("will_retain", p.WillRetain)
			num("will_payload", len(p.WillPayload))
		}
		if len(p.Props.AuthMethod) > 0 {
			str("auth_method", p.Props.AuthMethod)
		}
	case *codec.Connack:
		rc(p.ReasonCode)
		flag("session_present", p.SessionPresent)
		if len(p.Props.AssignedClientID) > 0 {
			str("assigned_client_id", p.Props.AssignedClientID)
		}
		reason(&p.Props)
	case *codec.Publish:
		str("topic", p.Topic)
		if p.Props.TopicAlias > 0 {
			num("alias", int(p.Props.TopicAlias))
		}
		num("qos", int(p.QoS))
		if p.QoS > 0 {
			num("id", int(p.PacketID))
		}
		flag("retain", p.Retain)
		flag("dup", p.Dup)
		num("payload_bytes", len(p.Payload))
		if n := len(p.Props.User); n > 0 {
			num("user_properties", n)
		}
		if payload {
			kv("payload")
			b = hex.AppendEncode(b, p.Payload)
		}
	case *codec.Ack:
		num("id", int(p.PacketID))
		rc(p.ReasonCode)
		reason(&p.Props)
	case *codec.Subscribe:
		num("id", int(p.PacketID))
		kv("filters")
		b = append(b, '[')
		for i, s := range p.Subscriptions {
			if i > 0 {
				b = append(b, ' ')
			}
			b = strconv.AppendQuote(b, string(s.Filter))
			b = append(b, ':')
			b = strconv.AppendInt(b, int64(s.QoS), 10)
		}
		b = append(b, ']')
	case *codec.Suback:
		num("id", int(p.PacketID))
		b = appendCodes(b, "codes", p.ReasonCodes)
	case *codec.Unsubscribe:
		num("id", int(p.PacketID))
		kv("filters")
		b = append(b, '[')
		for i, f := range p.Filters {
			if i > 0 {
				b = append(b, ' ')
			}
			b = strconv.AppendQuote(b, string(f))
		}
		b = append(b, ']')
	case *codec.Unsuback:
		num("id", int(p.PacketID))
		b = appendCodes(b, "codes", p.ReasonCodes)
	case *codec.Disconnect:
		rc(p.ReasonCode)
		reason(&p.Props)
	case *codec.Auth:
		rc(p.ReasonCode)
		if len(p.Props.AuthMethod) > 0 {
			str("auth_method", p.Props.AuthMethod)
		}
	}
	return b
}

func appendCodes(b []byte, k string, codes []codec.ReasonCode) []byte {
	b = append(append(append(b, ' '), k...), "=["...)
	for i, c := range codes {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, "0x"...)
		b = strconv.AppendUint(b, uint64(c), 16)
	}
	return append(b, ']')
}
