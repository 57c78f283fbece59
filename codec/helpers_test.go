package codec_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/codec/codectest"
)

// Every test in this package reports failures the same way: "what: got X,
// want Y" through t.Errorf, or t.Fatalf when the rest of the test depends on
// it. The helpers below keep that shape.

// checkErr fails unless err matches want: errors.Is, and when want is a
// *codec.Error, err carries the same reason code.
func checkErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Errorf("%s: got error %v, want none", what, err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Errorf("%s: got error %v, want %v", what, err, want)
		return
	}
	var wantCE, gotCE *codec.Error
	if errors.As(want, &wantCE) {
		if !errors.As(err, &gotCE) {
			t.Errorf("%s: got %T, want a *codec.Error", what, err)
		} else if gotCE.Code != wantCE.Code {
			t.Errorf("%s: got reason code %v, want %v", what, gotCE.Code, wantCE.Code)
		}
	}
}

// checkPacket fails unless got and want are codectest.Equal.
func checkPacket(t *testing.T, what string, got, want codec.Packet) {
	t.Helper()
	if !codectest.Equal(got, want) {
		t.Errorf("%s:\n got  %s\n want %s", what, codectest.Format(got), codectest.Format(want))
	}
}

// readerErr is the error a Reader returns for a fixture whose Decode error is
// want: a packet cut short is a stream that ended early.
func readerErr(want error) error {
	if want == codec.ErrNeedMore {
		return io.ErrUnexpectedEOF
	}
	return want
}

// newReader returns a Reader at level v over r with a bufio buffer of size
// bytes (16 is bufio's minimum, which sends most packets down the large-body
// path).
func newReader(r io.Reader, size int, v byte) *codec.Reader {
	cr := codec.NewReader(bufio.NewReaderSize(r, size), 0)
	cr.Version = v
	return cr
}

// chunkReader returns its data in reads of the given sizes, cycling through
// them; a zero size is read as one byte.
type chunkReader struct {
	data  []byte
	sizes []int
	i     int
	// block makes every other Read fail with codec.ErrWouldBlock, as a
	// non-blocking socket does between arrivals.
	block   bool
	blocked bool
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.block && !c.blocked {
		c.blocked = true
		return 0, fmt.Errorf("read: %w", codec.ErrWouldBlock)
	}
	c.blocked = false
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(c.sizes) > 0 {
		n = max(c.sizes[c.i%len(c.sizes)], 1)
		c.i++
	}
	n = min(n, len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// repeatReader returns data over and over, forever, without allocating.
type repeatReader struct {
	data []byte
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m := copy(p[n:], r.data[r.off:])
		n += m
		r.off = (r.off + m) % len(r.data)
	}
	return n, nil
}

// readAll reads packets until an error and returns each packet's encoding
// (a packet is only valid until the next read) and the final error.
func readAll(r *codec.Reader) ([][]byte, error) {
	var out [][]byte
	for {
		p, err := r.ReadPacket()
		if errors.Is(err, codec.ErrWouldBlock) {
			continue // a non-blocking source: try again, as after a readiness wait
		}
		if err != nil {
			return out, err
		}
		out = append(out, p.Append(nil, r.Version))
	}
}

func equalEncodings(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
