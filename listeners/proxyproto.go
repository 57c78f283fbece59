package listeners

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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

// maxProxyHeader bounds the addresses and TLVs of a v2 header we accept;
// real load balancers send far less.
const maxProxyHeader = 1024

// errProxyHeader is wrapped by every PROXY header error.
var errProxyHeader = errors.New("listeners: bad PROXY protocol header")

// proxyV1Max is the longest v1 line, CRLF included.
const proxyV1Max = 107

// proxyFirstRead is how much readProxyHeader reads first: the shortest v1
// line ("PROXY UNKNOWN\r\n"), and less than v2's fixed 16 bytes.
const proxyFirstRead = 15

// readProxyHeader reads a PROXY v1 or v2 header from r and returns the
// addresses it carries: the real client (src) and the address it reached
// (dst), or nil, nil for a LOCAL (v2) or UNKNOWN (v1) header, which keeps
// the connection's own.
//
// It reads the header to its last byte and not one byte further, so the
// stream after it stays in the socket: the conn needs no buffer of its own
// and the broker may read the socket directly (core's raw I/O path). The
// v2 header says its length; a v1 line is read in steps no longer than
// what the rest of a valid line must hold (proxyV1Need).
func readProxyHeader(r io.Reader) (src, dst net.Addr, err error) {
	var buf [proxyV1Max]byte
	if _, err := io.ReadFull(r, buf[:proxyFirstRead]); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errProxyHeader, err)
	}
	switch {
	case bytes.HasPrefix(buf[:], proxyV2Sig):
		return readProxyV2(r, buf[:proxyFirstRead])
	case bytes.HasPrefix(buf[:], []byte("PROXY ")):
		line := buf[:proxyFirstRead]
		for !bytes.HasSuffix(line, []byte("\n")) {
			need, err := proxyV1Need(line)
			if err != nil {
				return nil, nil, err
			}
			if len(line)+need > proxyV1Max {
				return nil, nil, fmt.Errorf("%w: v1 line not ended by CRLF within %d bytes", errProxyHeader, proxyV1Max)
			}
			if _, err := io.ReadFull(r, buf[len(line):len(line)+need]); err != nil {
				return nil, nil, fmt.Errorf("%w: v1: %w", errProxyHeader, err)
			}
			line = buf[:len(line)+need]
		}
		return parseProxyV1(line)
	default:
		return nil, nil, fmt.Errorf("%w: none sent by a trusted proxy (%q…)", errProxyHeader, buf[:proxyFirstRead])
	}
}

// proxyV1Need returns how many more bytes a valid v1 line that starts with
// line holds at least, so that reading them never reads past its end. A
// TCP4/TCP6 line has five single spaces, each followed by a field of at
// least one byte, and ends with CRLF; an UNKNOWN line may hold anything up
// to its CRLF.
func proxyV1Need(line []byte) (int, error) {
	if line[len(line)-1] == '\r' {
		return 1, nil
	}
	proto, _, _ := bytes.Cut(line[len("PROXY "):], []byte(" "))
	proto, _, _ = bytes.Cut(proto, []byte("\r"))
	switch string(proto) {
	case "UNKNOWN":
		return 2, nil
	case "TCP4", "TCP6":
		return max(2*(5-bytes.Count(line, []byte(" ")))+2, 2), nil
	}
	// The first read holds the whole protocol field of a valid line.
	return 0, fmt.Errorf("%w: v1 %q: protocol not TCP4, TCP6 or UNKNOWN", errProxyHeader, line)
}

// parseProxyV1 parses "PROXY TCP4|TCP6|UNKNOWN src dst sport dport\r\n".
func parseProxyV1(line []byte) (src, dst net.Addr, err error) {
	if !bytes.HasSuffix(line, []byte("\r\n")) || bytes.Count(line, []byte("\n")) != 1 {
		return nil, nil, fmt.Errorf("%w: v1 %q: not one line ended by CRLF", errProxyHeader, line)
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

// readProxyV2 reads the rest of the binary header that starts with first:
// signature, version and command, family and protocol, length, addresses,
// TLVs (skipped).
func readProxyV2(r io.Reader, first []byte) (src, dst net.Addr, err error) {
	var hdr [16]byte
	n := copy(hdr[:], first)
	if _, err := io.ReadFull(r, hdr[n:]); err != nil {
		return nil, nil, fmt.Errorf("%w: v2: %w", errProxyHeader, err)
	}
	verCmd, fam := hdr[12], hdr[13]
	n = int(binary.BigEndian.Uint16(hdr[14:16]))
	if verCmd>>4 != 2 {
		return nil, nil, fmt.Errorf("%w: v2: version %d", errProxyHeader, verCmd>>4)
	}
	if n > maxProxyHeader {
		return nil, nil, fmt.Errorf("%w: v2: %d bytes of addresses and TLVs, more than %d", errProxyHeader, n, maxProxyHeader)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, nil, fmt.Errorf("%w: v2: %w", errProxyHeader, err)
	}
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
