package main

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
)

// mqttConn is a minimal client over the codec.
type mqttConn struct {
	conn net.Conn
	r    *codec.Reader
	v    byte
	wmu  sync.Mutex
}

func dialMQTT(addr, id string, v byte, clean bool) (*mqttConn, *codec.Connack, error) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, nil, err
	}
	c := &mqttConn{conn: conn, r: codec.NewReader(bufio.NewReader(conn), 0), v: v}
	c.r.Version = v
	cp := &codec.Connect{ProtocolVersion: v, CleanStart: clean, ClientID: []byte(id)}
	if v == codec.V5 && !clean {
		cp.Props.SetNum(codec.PropSessionExpiry, 3600)
	}
	if err := c.send(cp); err != nil {
		conn.Close()
		return nil, nil, err
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	p, err := c.r.ReadPacket()
	_ = conn.SetReadDeadline(time.Time{})
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	ack, ok := p.(*codec.Connack)
	if !ok || ack.ReasonCode != codec.Success {
		conn.Close()
		return nil, nil, fmt.Errorf("CONNECT %s: got %v", id, p)
	}
	return c, ack, nil
}

func (c *mqttConn) send(p codec.Packet) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := c.conn.Write(p.Append(nil, c.v))
	return err
}

func mustSend(t *testing.T, c *mqttConn, p codec.Packet) {
	t.Helper()
	if err := c.send(p); err != nil {
		t.Fatal(err)
	}
}

func expectPacket[T codec.Packet](t *testing.T, c *mqttConn) T {
	t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	p, err := c.r.ReadPacket()
	if err != nil {
		t.Fatalf("want a packet: %v", err)
	}
	q, ok := p.(T)
	if !ok {
		var want T
		t.Fatalf("got %T %+v, want %T", p, p, want)
	}
	return q
}

// TestReadOnlyDataDir: a data directory that cannot be written stops xmq at
// once with an error that says so and how to fix it.
