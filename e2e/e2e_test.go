// Package e2e_test runs the broker end to end: core.Server behind a real
// TCP listener on 127.0.0.1, driven by third-party MQTT clients
// (eclipse/paho.golang for MQTT 5, eclipse/paho.mqtt.golang for 3.1.1) and,
// for byte-level cases, by the project's codec.
package e2e_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// timeout bounds every wait in these tests.
const timeout = 5 * time.Second

// quiet is how long a test waits to be sure something does not arrive.
const quiet = 300 * time.Millisecond

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startBroker serves a new broker on 127.0.0.1:0 and returns its address;
// the broker is shut down when the test ends, after the test's clients.
func startBroker(t *testing.T, opts core.Options) string {
	t.Helper()
	if opts.SysInterval == 0 {
		opts.SysInterval = -1
	}
	srv, err := core.New(opts, core.Config{})
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l, "tcp") }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, core.ErrServerClosed) {
			t.Errorf("Serve: %v, want ErrServerClosed", err)
		}
	})
	return l.Addr().String()
}

// ctx is a context bounded by timeout and cancelled when the test ends.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return c
}

// receive takes the next value from ch within timeout.
func receive[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		var zero T
		t.Fatalf("nothing received in %v", timeout)
		return zero
	}
}

// nothing asserts that ch stays empty for quiet.
func nothing[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("received %v, want nothing", v)
	case <-time.After(quiet):
	}
}

// rawConn is a TCP connection spoken to byte by byte with the codec.
type rawConn struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
	v    byte
}

func dialRaw(t *testing.T, addr string, v byte) *rawConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &rawConn{t: t, conn: conn, br: bufio.NewReader(conn), v: v}
}

func (c *rawConn) send(p codec.Packet) {
	c.t.Helper()
	c.sendRaw(p.Append(nil, c.v))
}

func (c *rawConn) sendRaw(b []byte) {
	c.t.Helper()
	_ = c.conn.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := c.conn.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// readRaw reads one whole packet; the error is io.EOF (or a reset) once the
// broker has closed the connection.
func (c *rawConn) readRaw() ([]byte, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(timeout))
	first, err := c.br.ReadByte()
	if err != nil {
		return nil, err
	}
	hdr := []byte{first}
	n, mul := 0, 1
	for {
		b, err := c.br.ReadByte()
		if err != nil {
			return nil, err
		}
		hdr = append(hdr, b)
		n += int(b&0x7f) * mul
		mul *= 128
		if b&0x80 == 0 {
			break
		}
	}
	raw := make([]byte, len(hdr)+n)
	copy(raw, hdr)
	_, err = io.ReadFull(c.br, raw[len(hdr):])
	return raw, err
}

// next reads and decodes the next packet.
func (c *rawConn) next() codec.Packet {
	c.t.Helper()
	raw, err := c.readRaw()
	if err != nil {
		c.t.Fatalf("want a packet: %v", err)
	}
	p, _, err := codec.Decode(raw, c.v)
	if err != nil {
		c.t.Fatalf("decoding % x: %v", raw, err)
	}
	return p
}

func expect[T codec.Packet](c *rawConn) T {
	c.t.Helper()
	p := c.next()
	q, ok := p.(T)
	if !ok {
		var want T
		c.t.Fatalf("got %s %+v, want %T", p.Type(), p, want)
	}
	return q
}

func (c *rawConn) expectAck(kind codec.Type, id uint16) *codec.Ack {
	c.t.Helper()
	a := expect[*codec.Ack](c)
	if a.Kind != kind || a.PacketID != id {
		c.t.Fatalf("got %s id %d, want %s id %d", a.Kind, a.PacketID, kind, id)
	}
	return a
}

// expectClosed reads until the broker closes the connection, which must
// happen without any further packet.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	raw, err := c.readRaw()
	var ne net.Error
	switch {
	case err == nil:
		c.t.Fatalf("got % x, want the connection closed", raw)
	case errors.As(err, &ne) && ne.Timeout():
		c.t.Fatalf("connection still open after %v", timeout)
	}
}

// connect sends a clean CONNECT for id and requires a successful CONNACK.
func (c *rawConn) connect(id string, clean bool, mods ...func(*codec.Connect)) *codec.Connack {
	c.t.Helper()
	p := &codec.Connect{ProtocolVersion: c.v, CleanStart: clean, ClientID: []byte(id)}
	if !clean && c.v == codec.V5 {
		p.Props.SetNum(codec.PropSessionExpiry, 60)
	}
	for _, m := range mods {
		m(p)
	}
	c.send(p)
	ack := expect[*codec.Connack](c)
	if ack.ReasonCode != codec.Success {
		c.t.Fatalf("CONNACK %s", ack.ReasonCode)
	}
	return ack
}

func (c *rawConn) subscribe(id uint16, qos byte, filter string) {
	c.t.Helper()
	c.send(&codec.Subscribe{PacketID: id, Subscriptions: []codec.Subscription{{Filter: []byte(filter), QoS: qos}}})
	if ack := expect[*codec.Suback](c); ack.PacketID != id || ack.ReasonCodes[0] != codec.ReasonCode(qos) {
		c.t.Fatalf("SUBACK id %d codes %v, want id %d granted %d", ack.PacketID, ack.ReasonCodes, id, qos)
	}
}
