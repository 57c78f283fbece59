package listeners

import (
	"io"
	"sync"
)

// recordReader reads a TLS stream for crypto/tls and never returns bytes
// past the end of the current record (a 5-byte header: type, version,
// 2-byte length; then the body). crypto/tls reads a record's header, then
// its body, and keeps whatever a read returned beyond them for later; fed
// by a recordReader it keeps nothing: after a tls.Conn.Read that did not
// fill its buffer, no byte of the peer's is held above the socket except in
// the recordReader, which says so (idle). So the broker may wait on the
// socket itself (core.IdleSocket) instead of a goroutine in crypto/tls.
//
// It reads the socket freely at a record's start (one system call for many
// small records that arrived together) and keeps what went past the record
// in a pooled buffer (spill), handed out on the next reads, again up to
// each record's end, and released once drained; inside a record's body it
// reads the socket at most to the body's end. Its methods are the conn's
// reader's only.
type recordReader struct {
	hdr   [recordHeaderLen]byte // the current record's header, hdrN bytes of it seen
	hdrN  int                   // 0: at a record boundary
	body  int                   // bytes of the current record's body not yet returned
	spill *[]byte               // bytes read past the current record, from a pool; nil: none
	off   int                   // spill[off:end] is not yet returned
	end   int
	err   error // the socket's error that came with the spilled bytes, returned after them
}

const (
	recordHeaderLen = 5
	// maxRecordRead bounds a socket read at a record's start, so that what
	// goes past the record fits a spill buffer: a TLS 1.3 record's largest
	// ciphertext (2^14 + 256) and its header.
	maxRecordRead = 1<<14 + 256 + recordHeaderLen
)

// spillSizes are the size classes of the buffers of bytes read past a
// record, each with its pool; a reader takes one only while it holds such
// bytes. Most spills are a few small records (a close_notify after the
// DISCONNECT, pipelined packets), and a conn that closes holding one drops
// its buffer to the garbage collector rather than return it from another
// goroutine: small classes keep that garbage small (10,000 devices closing
// at once made 160 MB of it with 16 KiB buffers).
var spillSizes = [...]int{512, 4 << 10, maxRecordRead}

var spillPools [len(spillSizes)]sync.Pool

// getSpill returns a pooled buffer of at least n bytes, n <= maxRecordRead.
func getSpill(n int) *[]byte {
	for i, size := range spillSizes {
		if n <= size {
			if b, ok := spillPools[i].Get().(*[]byte); ok {
				return b
			}
			b := make([]byte, size)
			return &b
		}
	}
	panic("listeners: spill larger than a record read")
}

// putSpill gives b back to the pool of its size.
func putSpill(b *[]byte) {
	for i, size := range spillSizes {
		if len(*b) == size {
			spillPools[i].Put(b)
			return
		}
	}
}

// idle reports whether the reader is at a record boundary holding no byte:
// the next byte on the socket starts a record.
func (r *recordReader) idle() bool { return r.hdrN == 0 && r.spill == nil }

// read reads from src, the socket, into p, at most to the current record's
// end.
func (r *recordReader) read(src io.Reader, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if r.spill != nil {
		b := (*r.spill)[r.off:r.end]
		n := copy(p, b[:r.span(b[:min(len(b), len(p))])])
		r.off += n
		if r.off < r.end {
			return n, nil
		}
		putSpill(r.spill)
		r.spill, r.off, r.end = nil, 0, 0
		err := r.err
		r.err = nil
		return n, err
	}
	if r.hdrN == recordHeaderLen { // inside a body: up to its end
		n, err := src.Read(p[:min(len(p), r.body)])
		r.span(p[:n])
		return n, err
	}
	n, err := src.Read(p[:min(len(p), maxRecordRead)])
	k := r.span(p[:n])
	if k < n {
		r.spill = getSpill(n - k)
		r.end = copy(*r.spill, p[k:n])
		r.err, err = err, nil
	}
	return k, err
}

// span moves the reader over the start of b up to the end of the current
// record, and returns how many bytes of b that is.
func (r *recordReader) span(b []byte) int {
	i := 0
	for i < len(b) {
		if r.hdrN < recordHeaderLen {
			r.hdr[r.hdrN] = b[i]
			r.hdrN++
			i++
			if r.hdrN == recordHeaderLen {
				r.body = int(r.hdr[3])<<8 | int(r.hdr[4])
				if r.body == 0 {
					r.hdrN = 0 // an empty record ends with its header
					return i
				}
			}
			continue
		}
		m := min(r.body, len(b)-i)
		i += m
		r.body -= m
		if r.body == 0 {
			r.hdrN = 0
			return i
		}
	}
	return i
}
