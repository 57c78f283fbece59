package loadtest

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/listeners"
)

// dialer opens transport connections through listeners.Dial, the one
// client-side entry to every transport.
type dialer struct {
	urls []string // connection i dials urls[i%len(urls)]: -addr a,b,c
	tls  *tls.Config
	src  []net.IP // -src-ips: connection i binds src[i%len(src)]
}

func (d *dialer) dial(ctx context.Context, i int) (net.Conn, error) {
	if len(d.src) > 0 {
		ctx = withLocalIP(ctx, d.src[i%len(d.src)])
	}
	return listeners.Dial(ctx, d.urls[i%len(d.urls)], d.tls)
}

// mconn is one MQTT connection after a successful CONNECT: the read side
// belongs to the client's read loop, the write side to its write loop.
type mconn struct {
	nc             net.Conn
	rd             *codec.Reader
	bw             *bufio.Writer
	sessionPresent bool
	recvMax        int // the server's Receive Maximum (65535 when it sets none)
}

// connectSpec is what one CONNECT needs.
type connectSpec struct {
	id        string
	clean     bool
	version   byte
	keepAlive time.Duration
	user      string
	pass      string
	timeout   time.Duration
	rbuf      int // read buffer size; 0 = no buffered reader kept (conn mode)
	wbuf      int
}

// ConnackError is a CONNACK that refused the connection.
type ConnackError struct{ Code codec.ReasonCode }

func (e *ConnackError) Error() string { return "CONNACK " + e.Code.String() }

// errUnexpected reports a packet that has no business arriving where it did.
var errUnexpected = errors.New("loadtest: unexpected packet")

// connectMQTT dials, sends CONNECT and waits for CONNACK, all within
// s.timeout. It returns the time from the start of the dial to CONNACK.
func connectMQTT(ctx context.Context, d *dialer, i int, s connectSpec) (*mconn, time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	nc, err := d.dial(ctx, i)
	if err != nil {
		return nil, 0, err
	}
	deadline, _ := ctx.Deadline()
	_ = nc.SetDeadline(deadline)
	c := codec.Connect{ProtocolVersion: s.version, CleanStart: s.clean, KeepAlive: uint16(s.keepAlive / time.Second),
		ClientID: []byte(s.id)}
	if s.user != "" {
		c.UsernameFlag, c.Username = true, []byte(s.user)
	}
	if s.pass != "" {
		c.PasswordFlag, c.Password = true, []byte(s.pass)
		if s.version != codec.V5 && s.user == "" {
			c.UsernameFlag = true // 3.1.1 forbids a password without a user name
		}
	}
	if s.version == codec.V5 {
		c.Props.SetNum(codec.PropReceiveMaximum, 65535)
		if !s.clean {
			c.Props.SetNum(codec.PropSessionExpiry, 3600)
		}
	}
	if _, err := nc.Write(c.Append(make([]byte, 0, c.Len(s.version)), s.version)); err != nil {
		_ = nc.Close()
		return nil, 0, err
	}
	rbuf := s.rbuf
	if rbuf == 0 {
		rbuf = 64
	}
	rd := codec.NewReader(bufio.NewReaderSize(nc, rbuf), 0)
	rd.Version = s.version
	p, err := rd.ReadPacket()
	if err != nil {
		_ = nc.Close()
		return nil, 0, err
	}
	ack, ok := p.(*codec.Connack)
	if !ok {
		_ = nc.Close()
		return nil, 0, fmt.Errorf("%w: %s instead of CONNACK", errUnexpected, p.Type())
	}
	if ack.ReasonCode.IsError() || s.version != codec.V5 && ack.ReasonCode != codec.Success {
		_ = nc.Close()
		return nil, 0, &ConnackError{Code: ack.ReasonCode}
	}
	took := time.Since(start)
	_ = nc.SetDeadline(time.Time{})
	m := &mconn{nc: nc, sessionPresent: ack.SessionPresent, recvMax: 65535}
	if v, ok := ack.Props.Num(codec.PropReceiveMaximum); ok && v > 0 {
		m.recvMax = int(v)
	}
	if s.rbuf > 0 {
		m.rd = rd
		m.bw = bufio.NewWriterSize(nc, s.wbuf)
	}
	return m, took, nil
}

// Failure reasons, as the conn table and the error counts name them.
const (
	FailRefused     = "refused"
	FailTimeout     = "timeout"
	FailPorts       = "port exhaustion"
	FailFiles       = "too many open files"
	FailReset       = "reset"
	FailClosed      = "closed by server"
	FailTLS         = "tls"
	FailUnreachable = "unreachable"
	FailProtocol    = "protocol"
	FailOther       = "other"
)

// Classify names why a connection failed or ended: refused, timeout,
// port exhaustion, CONNACK <reason>, and so on.
func Classify(err error) string {
	var ce *ConnackError
	var ne net.Error
	var re *tls.RecordHeaderError
	var ae *tls.AlertError
	var ve *tls.CertificateVerificationError
	var cerr *codec.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ce):
		return "CONNACK " + ce.Code.String()
	case errors.Is(err, syscall.ECONNREFUSED):
		return FailRefused
	case errors.Is(err, syscall.EADDRNOTAVAIL), errors.Is(err, syscall.EADDRINUSE):
		return FailPorts
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return FailFiles
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return FailReset
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return FailUnreachable
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return FailTimeout
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return FailClosed
	case errors.As(err, &re), errors.As(err, &ae), errors.As(err, &ve), strings.Contains(err.Error(), "tls:"):
		return FailTLS
	case errors.As(err, &cerr), errors.Is(err, errUnexpected):
		return FailProtocol
	}
	var de *DisconnectError
	if errors.As(err, &de) {
		return "DISCONNECT " + de.Code.String()
	}
	return FailOther
}

// DisconnectError is a DISCONNECT from the server (MQTT 5).
type DisconnectError struct{ Code codec.ReasonCode }

func (e *DisconnectError) Error() string { return "server sent DISCONNECT " + e.Code.String() }
