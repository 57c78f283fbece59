package core

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
)

// socketConn offers the socket under it, as a listener's conn for plain
// TCP with a connection limit or a PROXY header does.
type socketConn struct {
	net.Conn
	tcp *net.TCPConn
}

func (c socketConn) SyscallConn() (syscall.RawConn, error) { return c.tcp.SyscallConn() }

// refusingConn has the method but no socket to offer.
type refusingConn struct{ net.Conn }

func (refusingConn) SyscallConn() (syscall.RawConn, error) {
	return nil, errors.New("no socket")
}

// TestRawPathByCapability: the raw I/O path (and the idle read-buffer
// release that needs it) is chosen by syscall.Conn, not by *net.TCPConn,
// so a conn a listener wraps keeps it; a conn that declines keeps its own
// Read and Write.
func TestRawPathByCapability(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cli, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	srvSide, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer srvSide.Close()
	tcp := srvSide.(*net.TCPConn)
	pipe, _ := net.Pipe()
	defer pipe.Close()

	srv, err := New(Options{}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Shutdown(context.Background()) }()
	for _, tt := range []struct {
		name string
		conn net.Conn
		raw  bool
	}{
		{"bare socket", tcp, true},
		{"wrapper offering the socket", socketConn{Conn: tcp, tcp: tcp}, true},
		{"wrapper declining", refusingConn{tcp}, false},
		{"wrapper hiding the socket", struct{ net.Conn }{tcp}, false},
		{"pipe", pipe, false},
	} {
		if c := newClient(srv, tt.conn, "test"); (c.raw != nil) != tt.raw {
			t.Errorf("%s: raw path %v, want %v", tt.name, c.raw != nil, tt.raw)
		}
	}
}
