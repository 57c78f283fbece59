package loadtest

import (
	"bufio"
	"errors"
	"net"
	"sync"
	"sync/atomic"

	"github.com/xmq-io/xmq/codec"
)

// Sink is a discard server: it speaks just enough MQTT for a publisher
// (CONNACK, PUBACK/PUBREC/PUBCOMP, SUBACK, PINGRESP) and routes nothing.
// Pointing the generator at a Sink on another core measures the
// generator's own ceiling, with no broker in the way.
type Sink struct {
	Messages atomic.Uint64
	Bytes    atomic.Uint64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
}

// Serve accepts connections from l until it is closed, then closes every
// connection and waits for them.
func (s *Sink) Serve(l net.Listener) error {
	defer func() {
		s.mu.Lock()
		for c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		s.mu.Lock()
		if s.conns == nil {
			s.conns = map[net.Conn]struct{}{}
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Go(func() {
			s.serve(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		})
	}
}

func (s *Sink) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 64<<10)
	bw := bufio.NewWriterSize(c, 4<<10)
	rd := codec.NewReader(br, 0)
	var out []byte
	var msgs, bytes uint64
	flushCounts := func() {
		s.Messages.Add(msgs)
		s.Bytes.Add(bytes)
		msgs, bytes = 0, 0
	}
	defer flushCounts()
	for {
		p, err := rd.ReadPacket()
		if err != nil {
			return
		}
		out = out[:0]
		switch p := p.(type) {
		case *codec.Connect:
			rd.Version = p.ProtocolVersion
			ack := codec.Connack{}
			out = ack.Append(out, rd.Version)
		case *codec.Publish:
			msgs++
			bytes += uint64(len(p.Payload))
			switch p.QoS {
			case 1:
				out = append(out, byte(codec.PUBACK)<<4, 2, byte(p.PacketID>>8), byte(p.PacketID))
			case 2:
				out = append(out, byte(codec.PUBREC)<<4, 2, byte(p.PacketID>>8), byte(p.PacketID))
			}
		case *codec.Ack:
			if p.Kind == codec.PUBREL {
				out = append(out, byte(codec.PUBCOMP)<<4, 2, byte(p.PacketID>>8), byte(p.PacketID))
			}
		case *codec.Subscribe:
			ack := codec.Suback{PacketID: p.PacketID}
			for _, sub := range p.Subscriptions {
				ack.ReasonCodes = append(ack.ReasonCodes, codec.ReasonCode(sub.QoS))
			}
			out = ack.Append(out, rd.Version)
		case *codec.Pingreq:
			out = append(out, byte(codec.PINGRESP)<<4, 0)
			flushCounts()
		case *codec.Disconnect:
			return
		}
		if len(out) > 0 {
			if _, err := bw.Write(out); err != nil {
				return
			}
		}
		if rd.Buffered() == 0 && bw.Buffered() > 0 {
			if err := bw.Flush(); err != nil {
				return
			}
		}
	}
}
