package bridge

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// A link is one connected period of a bridge: a connection to the remote
// and an in-process connection to the local broker, each a client
// session, with the messages relayed between them.
//
// Packet identifiers are not translated: a PUBLISH keeps its packet id
// from one side to the other, and acknowledgements are relayed back with
// it. The local broker assigns the ids of what goes out, the remote those
// of what comes in, and each side's ids are unique among its unacknowledged
// messages, which are exactly those the bridge has in flight on the other
// side, since it acknowledges a message only once the other side has. So a
// QoS 2 message redelivered after a crash of either broker or of the link
// (DUP, same id) meets the receiver's record of that id and is not
// delivered twice, without the bridge keeping any state of its own.
//
// Goroutines: remoteLoop reads the remote (messages in, acknowledgements
// of messages out), localLoop reads the local broker (messages out,
// acknowledgements of messages in), each side has a sender that alone
// writes to it, and watch pings the remote and times the exchanges in
// flight. mu guards the per-id flow states that both readers touch and
// the watchdog's clocks. The link ends, for both sides at once, when
// either reader, either sender (a failed write) or the watchdog fails.

// Flow states by packet id, for the cases where an acknowledgement is not
// simply relayed.
const (
	// inHeld: a message in holds a slot of the local broker's Receive
	// Maximum until its flow ends.
	inHeld uint8 = 1 << iota
	// inDropped: a QoS 2 message in was not forwarded; its PUBREL is
	// answered here.
	inDropped
	// outDowngraded: a QoS 2 message out went at QoS 1 (the remote's
	// Maximum QoS); its PUBACK becomes the local PUBREC.
	outDowngraded
	// outLocalOnly: a QoS 2 message out is done with at the remote (or
	// never went there); the local PUBREL is answered here.
	outLocalOnly
)

// What the exchange of a packet id awaits, in the top bits of its flow
// state (awaitMask): the step of a QoS 1/2 exchange that the in-flight
// watchdog times. awaitNone: no exchange is under way.
const (
	awaitShift       = 4
	awaitMask  uint8 = 7 << awaitShift
	awaitNone  uint8 = 0

	inAwaitAck   uint8 = 1 << awaitShift // a message in: the local broker's PUBACK or PUBREC
	inAwaitRel   uint8 = 2 << awaitShift // the remote's PUBREL
	inAwaitComp  uint8 = 3 << awaitShift // the local broker's PUBCOMP
	outAwaitAck  uint8 = 4 << awaitShift // a message out: the remote's PUBACK or PUBREC
	outAwaitRel  uint8 = 5 << awaitShift // the local broker's PUBREL
	outAwaitComp uint8 = 6 << awaitShift // the remote's PUBCOMP
)

var awaitNames = [8]string{1: "PUBACK or PUBREC from the local broker", 2: "PUBREL from the remote",
	3: "PUBCOMP from the local broker", 4: "PUBACK or PUBREC from the remote", 5: "PUBREL from the local broker",
	6: "PUBCOMP from the remote"}

// awaitsRemote reports a step the remote must answer.
func awaitsRemote(await uint8) bool {
	return await == inAwaitRel || await == outAwaitAck || await == outAwaitComp
}

// inflightTicks is how many times per inflight_timeout the watchdog
// looks at the exchanges.
const inflightTicks = 8

// overdueTicks is how many ticks of its clock a step may wait. A remote
// step's clock counts a tick only once everything queued at the tick
// before was written, so the first tick after the step began may have
// come before its packet was queued, the second before it was written;
// from the third on, it had left, and inflightTicks more are the
// timeout. One number for both clocks: a local step, whose clock counts
// every tick, is given up after 1.25 to 1.375 timeouts, which costs
// nothing, since the local broker answers at once.
const overdueTicks = inflightTicks + 3

// flows are one direction's QoS 1/2 exchanges, by packet id; the link's
// mu guards state and since.
type flows struct {
	state []uint8      // flags (inHeld …) and what the exchange awaits (awaitMask)
	since []uint16     // the tick its step began, on the clock of the side awaited
	open  atomic.Int32 // ids with an exchange under way, for Status
}

func newFlows() flows {
	return flows{state: make([]uint8, 65536), since: make([]uint16, 65536)}
}

// maxHeldQoS0 bounds the QoS 0 messages the remote may send while the
// bridge subscribes, before the local side is connected; more are dropped.
const maxHeldQoS0 = 1000

// maxHeld bounds all the packets held then: an MQTT 5 remote sends at
// most the bridge's Receive Maximum of QoS 1/2 messages unacknowledged.
const maxHeld = 65535 + maxHeldQoS0

type link struct {
	b     *Bridge
	cfg   *Config
	rules *rules
	addr  string
	log   *zap.Logger

	remote side
	rv     byte // protocol level spoken to the remote
	local  side
	caps   remoteCaps
	// remoteSession and localSession are the CONNACKs' Session Present.
	remoteSession, localSession bool
	origin                      *originTracker // nil: the remote stops loops itself

	// slots holds one token per message in flight to the local broker:
	// its Receive Maximum, which a 3.1.1 remote knows nothing of.
	slots chan struct{}

	mu  sync.Mutex
	in  flows // messages in
	out flows // messages out
	wd  watchClock

	held       []heldPacket  // read from the remote before the local side was ready
	localReady chan struct{} // closed once the local subscriptions are acknowledged

	localAcks int // local SUBACK and UNSUBACK still awaited (localLoop)

	reads   atomic.Uint64 // remote packets read, for the keepalive
	waiting atomic.Bool   // remoteLoop waits for a slot, not reading the remote
	closed  chan struct{}
	once    sync.Once
	err     error // why the link ended; set before closed is closed
	wg      sync.WaitGroup
}

// side is one end of a link, the remote broker or the local one: the
// connection, its reader (owned by that side's loop, remoteLoop or
// localLoop), the sender that writes to it, and the loop's own buffers.
type side struct {
	conn net.Conn
	r    *codec.Reader
	s    *sender
	// Owned by the side's loop.
	pub   codec.Publish // a message read here, as it goes to the other side
	topic []byte        // its topic when the rules map it
	skip  int           // PUBCOMPs from this side answering a sweep
}

// remoteCaps is what the remote accepts, from its CONNACK.
type remoteCaps struct {
	maxQoS    byte
	retainOK  bool
	maxPacket int  // 0: no limit
	subIDs    bool // it sends the Subscription Identifiers of its deliveries
	recvMax   int  // what it accepts unacknowledged
	bridgeBit bool // a 3.1.1 remote took Mosquitto's bridge bit
}

// watchClock is the watchdog's clocks, in ticks of
// inflight_timeout/inflightTicks (uint16: a step is given up long before
// one wraps), guarded by link.mu but for tick. ticks counts every tick;
// remoteTicks only those at which the remote sender had written all that
// it held at the tick before (queuedAtTick), so the time a slow link takes
// to carry the bridge's own backlog is not held against the remote.
type watchClock struct {
	ticks, remoteTicks uint16
	queuedAtTick       uint64
	tick               time.Duration // the period, set once
}

// heldPacket is a PUBLISH or PUBREL from the remote kept, copied, until
// the local side is ready.
type heldPacket struct {
	pub *codec.Publish // nil: a PUBREL
	id  uint16
}

// serve runs the link until it fails or stop closes; then it closes both
// connections and returns why the link ended.
func (l *link) serve(stop <-chan struct{}) error {
	l.wg.Add(3)
	go func() { defer l.wg.Done(); l.fail(l.remoteLoop()) }()
	go func() { defer l.wg.Done(); l.fail(l.localLoop()) }()
	go func() { defer l.wg.Done(); l.watch() }()
	select {
	case <-l.closed:
	case <-l.remote.s.done:
		// A write failed (a sender stops only so, until fail stops it):
		// the link is broken even if neither reader has noticed, say one
		// waiting for the local broker's window while the remote is gone.
		l.fail(fmt.Errorf("writing to the remote: %w", l.remote.s.failure()))
	case <-l.local.s.done:
		l.fail(fmt.Errorf("writing to the local broker: %w", l.local.s.failure()))
	case <-stop:
		// A normal DISCONNECT on both sides: the sessions stay, and what
		// is in flight is resent when the bridge comes back.
		_ = l.remote.s.send(&codec.Disconnect{})
		_ = l.local.s.send(&codec.Disconnect{})
		l.remote.s.finish(time.Second)
		l.local.s.finish(time.Second)
		l.fail(errStopped)
	}
	l.wg.Wait()
	l.remote.s.wait()
	l.local.s.wait()
	return l.err
}

var errStopped = errors.New("bridge: stopped")

// fail ends the link for err: the first reason counts.
func (l *link) fail(err error) {
	l.once.Do(func() {
		l.err = err
		close(l.closed)
		_ = l.remote.conn.Close()
		_ = l.local.conn.Close()
		l.remote.s.stop(errClosed)
		l.local.s.stop(errClosed)
	})
}

// step moves the exchange of packet id on: it sets and clears flags and
// makes the exchange await await (awaitNone: it is over), from now on
// the clock of the side awaited. It returns the state before. A caller
// steps before it sends what the other side answers, so that the answer,
// read by the other reader, finds the step made.
func (l *link) step(f *flows, id uint16, set, clear, await uint8) uint8 {
	l.mu.Lock()
	st := f.state[id]
	f.state[id] = st&^(clear|awaitMask) | set | await
	if await != awaitNone {
		f.since[id] = l.clock(await)
	}
	switch was := st & awaitMask; {
	case was == awaitNone && await != awaitNone:
		f.open.Add(1)
	case was != awaitNone && await == awaitNone:
		f.open.Add(-1)
	}
	l.mu.Unlock()
	return st
}

// clock is the watchdog's clock for a step that awaits await; l.mu is held.
func (l *link) clock(await uint8) uint16 {
	if awaitsRemote(await) {
		return l.wd.remoteTicks
	}
	return l.wd.ticks
}

// ---- remote → local ----

// remoteLoop reads the remote: messages in, and the acknowledgements of
// messages out. It starts once the local subscriptions are acknowledged,
// with the packets held while they were made.
func (l *link) remoteLoop() error {
	select {
	case <-l.localReady:
	case <-l.closed:
		return errClosed
	}
	for i, h := range l.held {
		var err error
		if h.pub != nil {
			err = l.fromRemote(h.pub)
		} else {
			err = l.remotePubrel(h.id)
		}
		l.held[i] = heldPacket{}
		if err != nil {
			return err
		}
	}
	l.held = nil
	ka := l.cfg.KeepAlive
	for {
		if ka > 0 && l.remote.r.Buffered() == 0 {
			_ = l.remote.conn.SetReadDeadline(time.Now().Add(ka + ka/2))
		}
		p, err := l.remote.r.ReadPacket()
		if err != nil {
			return remoteReadError(err)
		}
		l.reads.Add(1)
		if err := l.remotePacket(p); err != nil {
			return err
		}
	}
}

// remoteReadError says why reading the remote failed.
func remoteReadError(err error) error {
	if isTimeout(err) {
		return fmt.Errorf("remote silent for 1.5 × keepalive: %w", err)
	}
	return fmt.Errorf("reading the remote: %w", err)
}

func (l *link) remotePacket(p codec.Packet) error {
	switch p := p.(type) {
	case *codec.Publish:
		return l.fromRemote(p)
	case *codec.Ack:
		switch p.Kind {
		case codec.PUBREL:
			return l.remotePubrel(p.PacketID)
		case codec.PUBCOMP:
			if l.remote.skip > 0 {
				l.remote.skip--
				return nil
			}
		}
		return l.remoteAck(p)
	case *codec.Pingresp:
		return nil
	case *codec.Suback, *codec.Unsuback:
		return nil // late answers of a resubscription: none is sent after setup
	case *codec.Disconnect:
		return fmt.Errorf("the remote disconnected the bridge: %s%s", p.ReasonCode, reasonString(&p.Props))
	default:
		return fmt.Errorf("the remote sent %s", p.Type())
	}
}

func reasonString(p *codec.Properties) string {
	if len(p.ReasonString) > 0 {
		return " (" + string(p.ReasonString) + ")"
	}
	return ""
}

// fromRemote forwards a message from the remote to the local broker, or
// drops it (acknowledged at once) when no rule forwards it or it is the
// bridge's own message come back.
func (l *link) fromRemote(p *codec.Publish) error {
	if len(p.Topic) == 0 {
		return errors.New("the remote used a topic alias, which the bridge does not accept")
	}
	var ids []uint32
	if l.caps.subIDs {
		ids = p.Props.SubscriptionIDs
	}
	r, ok := l.rules.pickIn(p.Topic, ids)
	if !ok {
		l.b.c.drops[dropNoRule].Add(1)
		return l.ackRemote(p)
	}
	if l.origin != nil && l.origin.echo(p.Topic, p.Payload, time.Now()) {
		l.b.c.loops.Add(1)
		return l.ackRemote(p)
	}
	q := &l.remote.pub
	*q = codec.Publish{Dup: p.Dup, QoS: p.QoS, Retain: p.Retain, Topic: p.Topic, PacketID: p.PacketID, Payload: p.Payload}
	if !r.sameMapping() {
		l.remote.topic = r.localTopic(l.remote.topic[:0], p.Topic)
		q.Topic = l.remote.topic
	}
	if l.rv == codec.V5 {
		forwardProps(&q.Props, &p.Props)
	}
	if q.QoS > 0 {
		select {
		case l.slots <- struct{}{}:
		default:
			// Every slot is taken: the remote is not read until one frees,
			// so the watchdog's pings alone can find it gone meanwhile.
			l.waiting.Store(true)
			select {
			case l.slots <- struct{}{}:
				l.waiting.Store(false)
			case <-l.closed:
				return errClosed
			}
		}
		l.step(&l.in, q.PacketID, inHeld, inDropped, inAwaitAck)
	}
	if err := l.local.s.publish(q); err != nil {
		return err
	}
	l.b.c.msgsIn.Add(1)
	return nil
}

// forwardProps copies the properties a message keeps across the bridge:
// all but the Topic Alias and the Subscription Identifiers, which belong
// to one connection.
func forwardProps(dst, src *codec.Properties) {
	*dst = *src
	dst.SubscriptionIDs = nil
	dst.Clear(codec.PropTopicAlias)
	dst.TopicAlias = 0
}

// ackRemote acknowledges a message from the remote that is not forwarded.
func (l *link) ackRemote(p *codec.Publish) error {
	return l.ackHere(l.remote.s, &l.in, inDropped, inHeld, inAwaitRel, p)
}

// ackHere acknowledges on s a message that goes no further: PUBACK, or
// PUBREC with flag set (and clear cleared) in f, so that its PUBREL,
// awaited as await, is answered here too.
func (l *link) ackHere(s *sender, f *flows, set, clear, await uint8, p *codec.Publish) error {
	switch p.QoS {
	case 1:
		return s.ack(codec.PUBACK, p.PacketID, codec.Success)
	case 2:
		l.step(f, p.PacketID, set, clear, await)
		return s.ack(codec.PUBREC, p.PacketID, codec.Success)
	}
	return nil
}

// remotePubrel continues a QoS 2 message in.
func (l *link) remotePubrel(id uint16) error {
	if l.step(&l.in, id, 0, inDropped, inAwaitComp)&inDropped != 0 {
		// Answered here (the rare case of a message not forwarded).
		l.step(&l.in, id, 0, 0, awaitNone)
		return l.remote.s.ack(codec.PUBCOMP, id, codec.Success)
	}
	// Relayed, known or not: after a reconnection the local broker knows
	// the flow from before, and answers PUBCOMP either way.
	return l.local.s.ack(codec.PUBREL, id, codec.Success)
}

// remoteAck relays the remote's acknowledgement of a message out to the
// local broker, which then counts the message delivered.
func (l *link) remoteAck(a *codec.Ack) error {
	if a.ReasonCode.IsError() {
		l.b.c.drops[dropRemoteRefused].Add(1)
		l.b.warnRarely("the remote refused a message", zap.Stringer("ack", a.Kind), zap.Stringer("reason_code", a.ReasonCode))
	}
	id := a.PacketID
	switch a.Kind {
	case codec.PUBACK:
		if l.step(&l.out, id, 0, outDowngraded, awaitNone)&outDowngraded != 0 {
			// A QoS 2 message the remote took at QoS 1: done there; the
			// local flow goes on to PUBREL, answered by localAck.
			l.step(&l.out, id, outLocalOnly, 0, outAwaitRel)
			return l.local.s.ack(codec.PUBREC, id, codec.Success)
		}
		return l.local.s.ack(codec.PUBACK, id, a.ReasonCode)
	case codec.PUBREC:
		if a.ReasonCode.IsError() {
			l.step(&l.out, id, 0, 0, awaitNone)
		} else {
			l.step(&l.out, id, 0, 0, outAwaitRel)
		}
		return l.local.s.ack(a.Kind, id, a.ReasonCode)
	case codec.PUBCOMP:
		l.step(&l.out, id, 0, 0, awaitNone)
		return l.local.s.ack(a.Kind, id, a.ReasonCode)
	}
	return nil
}

// ---- local → remote ----

// localLoop reads the local broker: messages out, and the
// acknowledgements of messages in.
func (l *link) localLoop() error {
	for {
		p, err := l.local.r.ReadPacket()
		if err != nil {
			return fmt.Errorf("reading the local broker: %w", err)
		}
		switch p := p.(type) {
		case *codec.Publish:
			err = l.fromLocal(p)
		case *codec.Ack:
			err = l.localAck(p)
		case *codec.Suback:
			l.subscribed("local", p.PacketID, p.ReasonCodes)
		case *codec.Unsuback:
			l.subscribed("local", p.PacketID, nil)
		case *codec.Disconnect:
			return fmt.Errorf("the local broker disconnected the bridge: %s%s", p.ReasonCode, reasonString(&p.Props))
		case *codec.Pingresp:
		default:
			return fmt.Errorf("the local broker sent %s", p.Type())
		}
		if err != nil {
			return err
		}
	}
}

// subscribed counts a local SUBACK or UNSUBACK; the last one opens the
// remote side.
func (l *link) subscribed(side string, id uint16, codes []codec.ReasonCode) {
	l.logRefusedFilters(side, id, codes)
	if l.localAcks > 0 {
		if l.localAcks--; l.localAcks == 0 {
			close(l.localReady)
		}
	}
}

// fromLocal forwards a message from the local broker to the remote, or
// acknowledges it at once when it does not go (no rule, an overlapping
// rule's copy, too large for the remote).
func (l *link) fromLocal(p *codec.Publish) error {
	r, ok := l.rules.pickOut(p.Topic, p.Props.SubscriptionIDs)
	if !ok {
		l.b.c.drops[dropNoRule].Add(1)
		return l.ackLocal(p)
	}
	q := &l.local.pub
	*q = codec.Publish{Dup: p.Dup, QoS: min(p.QoS, l.caps.maxQoS), Retain: p.Retain && l.caps.retainOK, Topic: p.Topic,
		PacketID: p.PacketID, Payload: p.Payload}
	if q.QoS == 0 {
		q.PacketID, q.Dup = 0, false
	}
	if !r.sameMapping() {
		l.local.topic = r.remoteTopic(l.local.topic[:0], p.Topic)
		q.Topic = l.local.topic
	}
	if l.rv == codec.V5 {
		forwardProps(&q.Props, &p.Props)
	}
	if l.caps.maxPacket > 0 && q.Len(l.rv) > l.caps.maxPacket {
		l.b.c.drops[dropTooLarge].Add(1)
		l.b.warnRarely("a message is larger than the remote's Maximum Packet Size: dropped",
			zap.ByteString("topic", q.Topic), zap.Int("maximum_packet_size", l.caps.maxPacket))
		return l.ackLocal(p)
	}
	if l.origin != nil && l.rules.echoes(q.Topic) {
		l.origin.sent(q.Topic, q.Payload, time.Now())
	}
	switch {
	case p.QoS == 0:
	case q.QoS == 0:
		// Sent at most once, as the remote's Maximum QoS says: the local
		// flow ends when it is on its way.
		if err := l.remote.s.publish(q); err != nil {
			return err
		}
		l.b.c.msgsOut.Add(1)
		return l.ackLocal(p)
	case p.QoS == 2 && q.QoS == 1:
		l.step(&l.out, p.PacketID, outDowngraded, outLocalOnly, outAwaitAck)
	default:
		l.step(&l.out, p.PacketID, 0, outDowngraded|outLocalOnly, outAwaitAck)
	}
	if err := l.remote.s.publish(q); err != nil {
		return err
	}
	l.b.c.msgsOut.Add(1)
	return nil
}

// ackLocal acknowledges a message from the local broker that does not go
// to the remote (or goes at QoS 0).
func (l *link) ackLocal(p *codec.Publish) error {
	return l.ackHere(l.local.s, &l.out, outLocalOnly, outDowngraded, outAwaitRel, p)
}

// localAck handles the local broker's acknowledgements of messages in
// (relayed to the remote) and its PUBREL of a QoS 2 message out.
func (l *link) localAck(a *codec.Ack) error {
	id := a.PacketID
	switch a.Kind {
	case codec.PUBREL:
		if l.step(&l.out, id, 0, outLocalOnly, outAwaitComp)&outLocalOnly != 0 {
			// Answered here: the remote has nothing of it.
			l.step(&l.out, id, 0, 0, awaitNone)
			return l.local.s.ack(codec.PUBCOMP, id, codec.Success)
		}
		return l.remote.s.ack(codec.PUBREL, id, codec.Success)
	case codec.PUBCOMP:
		if l.local.skip > 0 {
			l.local.skip--
			return nil
		}
	}
	if a.ReasonCode == codec.UnspecifiedError || a.ReasonCode == codec.ImplementationSpecificError {
		// The local store failed to keep the message: no acknowledgement,
		// so the remote sends it again when the link comes back.
		return fmt.Errorf("the local broker could not keep a message (%s): reconnecting so the remote sends it again", a.ReasonCode)
	}
	if a.ReasonCode.IsError() {
		l.b.c.drops[dropLocalRefused].Add(1)
	}
	// A slot is free when the flow ends here: PUBACK, PUBCOMP, or a
	// PUBREC that refuses; a PUBREC that accepts waits for the remote's
	// PUBREL.
	if a.Kind == codec.PUBACK || a.Kind == codec.PUBCOMP || a.ReasonCode.IsError() {
		if l.step(&l.in, id, 0, inHeld, awaitNone)&inHeld != 0 {
			<-l.slots
		}
	} else if a.Kind == codec.PUBREC {
		l.step(&l.in, id, 0, 0, inAwaitRel)
	}
	return l.remote.s.ack(a.Kind, id, a.ReasonCode)
}

// ---- keepalive and in-flight watchdog ----

// watch pings the remote when half a keepalive passed without a write or
// without a read, so a remote that only receives still answers, and a
// dead one is found by the read deadline. While the reader waits for a
// slot and reads nothing, it pings every quarter keepalive: a remote gone
// then shows only as a failed write, which takes two (the first draws the
// reset), so the link is found broken within half a keepalive. And it
// gives up the link when an exchange in flight waited past the in-flight
// timeout. It never waits on a full sender: a write is under way then,
// which fails or times out by itself.
func (l *link) watch() {
	var ping <-chan time.Time
	if ka := l.cfg.KeepAlive; ka > 0 {
		t := time.NewTicker(ka / 4)
		defer t.Stop()
		ping = t.C
	}
	check := time.NewTicker(l.wd.tick)
	defer check.Stop()
	lastR, lastW := l.reads.Load(), l.remote.s.writes.Load()
	pings := 0 // ticks of ping
	for {
		select {
		case <-ping:
			pings++
			due := l.waiting.Load()
			if pings%2 == 0 { // every half keepalive
				r, w := l.reads.Load(), l.remote.s.writes.Load()
				due = due || r == lastR || w == lastW
				lastR, lastW = r, w
			}
			if !due {
				continue
			}
			if err := l.remote.s.trySend(&codec.Pingreq{}); err != nil && !errors.Is(err, errFull) {
				l.fail(fmt.Errorf("pinging the remote: %w", err))
				return
			}
		case <-check.C:
			if err := l.checkInflight(); err != nil {
				l.fail(err)
				return
			}
		case <-l.closed:
			return
		}
	}
}

// overdue is an exchange that waited past the in-flight timeout.
type overdue struct {
	id     uint16
	dir    string // "in" (from the remote) or "out"
	await  uint8
	waited uint16 // ticks
}

// checkInflight advances the watchdog's clocks by one tick and returns
// an error when an exchange waited past the in-flight timeout; it logs
// the longest-waiting one, once, and counts the timeout.
func (l *link) checkInflight() error {
	var worst overdue
	n := 0
	l.mu.Lock()
	l.wd.ticks++
	if l.remote.s.written.Load() >= l.wd.queuedAtTick {
		l.wd.remoteTicks++
	}
	l.wd.queuedAtTick = l.remote.s.queued.Load()
	for _, dir := range []struct {
		name string
		f    *flows
	}{{"in", &l.in}, {"out", &l.out}} {
		if dir.f.open.Load() == 0 {
			continue
		}
		// Every id, so that one exchange held among many that flow is
		// found too: 64 KiB read eight times per timeout, about 55 µs
		// (measured on a 2-core test machine) with the readers held.
		for id, st := range dir.f.state {
			await := st & awaitMask
			if await == awaitNone {
				continue
			}
			waited := l.clock(await) - dir.f.since[id]
			if waited < overdueTicks {
				continue
			}
			n++
			if waited > worst.waited {
				worst = overdue{id: uint16(id), dir: dir.name, await: await, waited: waited}
			}
		}
	}
	l.mu.Unlock()
	if n == 0 {
		return nil
	}
	l.b.c.inflightTimeouts.Add(1)
	awaited := awaitNames[worst.await>>awaitShift]
	l.log.Warn("bridge closes the link: a message in flight was not acknowledged within inflight_timeout; reconnecting, what is unfinished is sent again",
		zap.String("address", l.addr), zap.Uint16("packet_id", worst.id), zap.String("direction", worst.dir),
		zap.String("awaited", awaited), zap.Duration("waited", time.Duration(worst.waited)*l.wd.tick),
		zap.Int("overdue", n), zap.Duration("inflight_timeout", l.cfg.InflightTimeout))
	return fmt.Errorf("no %s for packet id %d (%s) within inflight_timeout %v", awaited, worst.id, worst.dir, l.cfg.InflightTimeout)
}

// ---- setup ----

// subscribeRemote sends the remote subscriptions of the in rules (and
// unsubscribes stale filters) and reads until they are acknowledged,
// holding what else the remote sends meanwhile. The local side is not
// connected yet, so no message out can use a packet id the subscriptions
// use.
func (l *link) subscribeRemote(stale []string, deadline time.Time) error {
	var id uint16
	awaited := map[uint16]bool{}
	current := l.rules.inFilters()
	var unsub [][]byte
	for _, f := range stale {
		if !slices.Contains(current, f) {
			unsub = append(unsub, []byte(f))
		}
	}
	if len(unsub) > 0 {
		id++
		awaited[id] = true
		if err := l.remote.s.send(&codec.Unsubscribe{PacketID: id, Filters: unsub}); err != nil {
			return err
		}
	}
	if len(l.rules.in) > 0 {
		if l.rv == codec.V5 {
			// One SUBSCRIBE per rule: a Subscription Identifier is per packet.
			for _, r := range l.rules.in {
				id++
				awaited[id] = true
				s := &codec.Subscribe{PacketID: id, Subscriptions: []codec.Subscription{{Filter: r.remote, QoS: r.QoS,
					NoLocal: true, RetainAsPublished: true, RetainHandling: 1}}}
				if l.caps.subIDs {
					s.Props.SubscriptionIDs = []uint32{r.subID}
				}
				if err := l.remote.s.send(s); err != nil {
					return err
				}
			}
		} else {
			id++
			awaited[id] = true
			s := &codec.Subscribe{PacketID: id}
			for _, r := range l.rules.in {
				s.Subscriptions = append(s.Subscriptions, codec.Subscription{Filter: r.remote, QoS: r.QoS})
			}
			if err := l.remote.s.send(s); err != nil {
				return err
			}
		}
	}
	_ = l.remote.conn.SetReadDeadline(deadline)
	defer func() { _ = l.remote.conn.SetReadDeadline(time.Time{}) }()
	for len(awaited) > 0 {
		p, err := l.remote.r.ReadPacket()
		if err != nil {
			return fmt.Errorf("subscribing at the remote: %w", err)
		}
		switch p := p.(type) {
		case *codec.Suback:
			delete(awaited, p.PacketID)
			l.logRefusedFilters("remote", p.PacketID, p.ReasonCodes)
		case *codec.Unsuback:
			delete(awaited, p.PacketID)
		case *codec.Publish:
			if len(l.held) >= maxHeld {
				return errors.New("the remote sent more unacknowledged messages than the bridge's Receive Maximum")
			}
			if p.QoS == 0 && l.heldQoS0() >= maxHeldQoS0 {
				l.b.c.drops[dropSetup].Add(1)
				continue
			}
			l.held = append(l.held, heldPacket{pub: copyPublish(p)})
		case *codec.Ack:
			if p.Kind == codec.PUBREL {
				l.held = append(l.held, heldPacket{id: p.PacketID})
			}
		case *codec.Pingresp:
		case *codec.Disconnect:
			return fmt.Errorf("the remote disconnected the bridge: %s%s", p.ReasonCode, reasonString(&p.Props))
		default:
			return fmt.Errorf("the remote sent %s while the bridge subscribed", p.Type())
		}
	}
	return nil
}

func (l *link) heldQoS0() int {
	n := 0
	for _, h := range l.held {
		if h.pub != nil && h.pub.QoS == 0 {
			n++
		}
	}
	return n
}

// copyPublish copies a PUBLISH out of a reader's buffer.
func copyPublish(p *codec.Publish) *codec.Publish {
	q := *p
	q.Topic = clone(p.Topic)
	q.Payload = clone(p.Payload)
	q.Props.ContentType = clone(p.Props.ContentType)
	q.Props.ResponseTopic = clone(p.Props.ResponseTopic)
	q.Props.CorrelationData = clone(p.Props.CorrelationData)
	q.Props.SubscriptionIDs = slices.Clone(p.Props.SubscriptionIDs)
	q.Props.User = nil
	for _, u := range p.Props.User {
		q.Props.User = append(q.Props.User, codec.UserProperty{Key: clone(u.Key), Value: clone(u.Value)})
	}
	return &q
}

// subscribeLocal sends the local subscriptions of the out rules (and
// unsubscribes filters the local session holds from an older
// configuration); localLoop counts their acknowledgements.
func (l *link) subscribeLocal(stale []string) error {
	var id uint16
	current := l.rules.outFilters()
	var unsub [][]byte
	for _, f := range stale {
		if !slices.Contains(current, f) {
			unsub = append(unsub, []byte(f))
		}
	}
	if len(unsub) > 0 {
		id++
		l.localAcks++
		if err := l.local.s.send(&codec.Unsubscribe{PacketID: id, Filters: unsub}); err != nil {
			return err
		}
	}
	for _, r := range l.rules.out {
		id++
		l.localAcks++
		// No Local: what the bridge publishes here (messages in) does not
		// go back out. Retain As Published: the remote gets the retain
		// flag as published. Retain Handling 1: the retained messages go
		// out once, when the rule is new, not at every reconnection.
		s := &codec.Subscribe{PacketID: id, Subscriptions: []codec.Subscription{{Filter: r.local, QoS: r.QoS,
			NoLocal: true, RetainAsPublished: true, RetainHandling: 1}}}
		s.Props.SubscriptionIDs = []uint32{r.subID}
		if err := l.local.s.send(s); err != nil {
			return err
		}
	}
	if l.localAcks == 0 {
		close(l.localReady)
	}
	return nil
}

// logRefusedFilters logs the filters a SUBACK refused.
func (l *link) logRefusedFilters(side string, id uint16, codes []codec.ReasonCode) {
	for i, rc := range codes {
		if rc.IsError() || l.rv != codec.V5 && side == "remote" && rc == 0x80 {
			l.b.c.subRefused.Add(1)
			l.log.Error("bridge subscription refused: its messages are not forwarded",
				zap.String("side", side), zap.Uint16("packet_id", id), zap.Int("filter_index", i), zap.Stringer("reason_code", rc))
		}
	}
}

// sweep sends PUBREL for every packet id, so that the receiving side
// forgets the QoS 2 receipts of a session whose other half is gone (the
// ids will be used again for new messages, which it would take for
// redeliveries and drop). Each PUBREL is answered with a PUBCOMP, which
// the reader of that side skips. 65,535 PUBRELs are 256 KiB.
func sweep(s *sender) error {
	for id := 1; id <= 65535; id++ {
		if err := s.ack(codec.PUBREL, uint16(id), codec.Success); err != nil {
			return err
		}
	}
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
