package listeners

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// The PROXY protocol (HAProxy, v1 text and v2 binary) puts the client's
// real address in front of the stream a load balancer forwards. See
// https://www.haproxy.org/download/2.8/doc/proxy-protocol.txt.

// proxyV2Sig starts every v2 header.
var proxyV2Sig = []byte("\r\n\r\n\x00\r\nQUIT\n")

// maxProxyHeader bounds a header we accept: the longest v1 line is 107
// bytes; v2 TLVs from real load balancers are far below this.
const maxProxyHeader = 1024

// errProxyHeader is wrapped by every PROXY header error.
var errProxyHeader = errors.New("listeners: bad PROXY protocol header")

// readProxyHeader reads a PROXY v1 or v2 header from c and returns a conn
// that reports the addresses the header carries (the real client as
// RemoteAddr) and reads on from the first byte after the header. A LOCAL
// (v2) or UNKNOWN (v1) header keeps c's own addresses.
func readProxyHeader(c net.Conn) (net.Conn, error) {
	br := bufio.NewReaderSize(c, maxProxyHeader+16)
	sig, err := br.Peek(len(proxyV2Sig))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errProxyHeader, err)
	}
	var src, dst net.Addr
	switch {
	case bytes.Equal(sig, proxyV2Sig):
		src, dst, err = readProxyV2(br)
	case bytes.HasPrefix(sig, []byte("PROXY ")):
		src, dst, err = readProxyV1(br)
	default:
		return nil, fmt.Errorf("%w: none sent by a trusted proxy (%q…)", errProxyHeader, sig)
	}
	if err != nil {
		return nil, err
	}
	pc := &proxyConn{Conn: c, remote: c.RemoteAddr(), local: c.LocalAddr()}
	if src != nil {
		pc.remote, pc.local = src, dst
	}
	if n := br.Buffered(); n > 0 {
		pc.rest, _ = br.Peek(n)
		pc.rest = bytes.Clone(pc.rest)
	}
	return pc, nil
}

// readProxyV1 parses "PROXY TCP4|TCP6|UNKNOWN src dst sport dport\r\n".
func readProxyV1(br *bufio.Reader) (src, dst net.Addr, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil || len(line) > 107 || !bytes.HasSuffix(line, []byte("\r\n")) {
		return nil, nil, fmt.Errorf("%w: v1 line not ended by CRLF within 107 bytes", errProxyHeader)
	}
	f := strings.Fields(string(line[:len(line)-2]))
	if len(f) >= 2 && f[1] == "UNKNOWN" {
		return nil, nil, nil
	}
	if len(f) != 6 || (f[1] != "TCP4" && f[1] != "TCP6") {
		return nil, nil, fmt.Errorf("%w: v1 %q", errProxyHeader, line)
	}
	s, err1 := netip.ParseAddr(f[2])
	d, err2 := netip.ParseAddr(f[3])
	sp, err3 := strconv.ParseUint(f[4], 10, 16)
	dp, err4 := strconv.ParseUint(f[5], 10, 16)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return nil, nil, fmt.Errorf("%w: v1 %q: %w", errProxyHeader, line, err)
	}
	if (f[1] == "TCP4") != s.Is4() || s.Is4() != d.Is4() {
		return nil, nil, fmt.Errorf("%w: v1 %q: addresses do not match %s", errProxyHeader, line, f[1])
	}
	return net.TCPAddrFromAddrPort(netip.AddrPortFrom(s, uint16(sp))),
		net.TCPAddrFromAddrPort(netip.AddrPortFrom(d, uint16(dp))), nil
}

// readProxyV2 parses the binary header: signature, version and command,
// family and protocol, length, addresses, TLVs (skipped).
func readProxyV2(br *bufio.Reader) (src, dst net.Addr, err error) {
	hdr, err := br.Peek(16)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: v2: %w", errProxyHeader, err)
	}
	verCmd, fam := hdr[12], hdr[13]
	n := int(binary.BigEndian.Uint16(hdr[14:16]))
	if verCmd>>4 != 2 {
		return nil, nil, fmt.Errorf("%w: v2: version %d", errProxyHeader, verCmd>>4)
	}
	if n > maxProxyHeader {
		return nil, nil, fmt.Errorf("%w: v2: %d bytes of addresses and TLVs, more than %d", errProxyHeader, n, maxProxyHeader)
	}
	full, err := br.Peek(16 + n)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: v2: %w", errProxyHeader, err)
	}
	body := bytes.Clone(full[16:])
	_, _ = br.Discard(16 + n)
	switch verCmd & 0xF {
	case 0: // LOCAL: the proxy's own connection (health check)
		return nil, nil, nil
	case 1: // PROXY
	default:
		return nil, nil, fmt.Errorf("%w: v2: command %d", errProxyHeader, verCmd&0xF)
	}
	var alen int
	switch fam {
	case 0x11: // TCP over IPv4
		alen = 4
	case 0x21: // TCP over IPv6
		alen = 16
	case 0x00: // UNSPEC
		return nil, nil, nil
	default:
		return nil, nil, fmt.Errorf("%w: v2: family/protocol %#x is not TCP", errProxyHeader, fam)
	}
	if len(body) < 2*alen+4 {
		return nil, nil, fmt.Errorf("%w: v2: %d bytes is too short for the addresses", errProxyHeader, len(body))
	}
	s, _ := netip.AddrFromSlice(body[:alen])
	d, _ := netip.AddrFromSlice(body[alen : 2*alen])
	sp := binary.BigEndian.Uint16(body[2*alen:])
	dp := binary.BigEndian.Uint16(body[2*alen+2:])
	return net.TCPAddrFromAddrPort(netip.AddrPortFrom(s, sp)), net.TCPAddrFromAddrPort(netip.AddrPortFrom(d, dp)), nil
}

// proxyConn is a conn behind a PROXY header: the addresses of the header,
// and the bytes read past the header served first.
type proxyConn struct {
	net.Conn
	remote, local net.Addr
	rest          []byte // read past the header; owned by the reader
}

func (c *proxyConn) RemoteAddr() net.Addr { return c.remote }
func (c *proxyConn) LocalAddr() net.Addr  { return c.local }

func (c *proxyConn) Read(p []byte) (int, error) {
	if len(c.rest) > 0 {
		n := copy(p, c.rest)
		c.rest = c.rest[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
