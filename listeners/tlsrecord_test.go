package listeners

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
)

// records is a TLS stream of records with the given body lengths, each
// body filled with its record's index.
func records(lengths ...int) []byte {
	var b []byte
	for i, n := range lengths {
		b = append(b, 23, 3, 3, byte(n>>8), byte(n))
		b = append(b, bytes.Repeat([]byte{byte(i)}, n)...)
	}
	return b
}

// recordEnds is where each whole record of stream ends, read the plain
// way.
func recordEnds(stream []byte) map[int]bool {
	ends := map[int]bool{0: true}
	for pos := 0; pos+recordHeaderLen <= len(stream); {
		pos += recordHeaderLen + (int(stream[pos+3])<<8 | int(stream[pos+4]))
		ends[pos] = true
	}
	return ends
}

// cutReader returns stream in the pieces cuts makes of it: each read
// returns at most the rest of its piece.
type cutReader struct {
	stream []byte
	cuts   []int // ascending offsets where a piece ends
	off    int
}

func (r *cutReader) Read(p []byte) (int, error) {
	if r.off == len(r.stream) {
		return 0, io.EOF
	}
	end := len(r.stream)
	for _, c := range r.cuts {
		if c > r.off {
			end = min(end, c)
			break
		}
	}
	n := copy(p, r.stream[r.off:end])
	r.off += n
	return n, nil
}

// checkRecordReads reads src's stream through a recordReader in reads of
// readSize and checks what crypto/tls relies on: the bytes come in order
// and whole, no read goes past the end of a record, and the reader is idle
// exactly when it stands at a record's end with the socket read to there.
func checkRecordReads(t *testing.T, src *cutReader, readSize int) {
	t.Helper()
	ends := recordEnds(src.stream)
	var r recordReader
	var got []byte
	p := make([]byte, readSize)
	for range 4*len(src.stream) + 10 {
		n, err := r.read(src, p)
		pos := len(got)
		for i := pos + 1; i < pos+n; i++ {
			if ends[i] {
				t.Fatalf("a read of %d bytes at %d goes past the record end at %d", n, pos, i)
			}
		}
		got = append(got, p[:n]...)
		wantIdle := ends[len(got)] && src.off == len(got)
		if r.idle() != wantIdle {
			t.Fatalf("at %d (socket at %d): idle() = %v, want %v", len(got), src.off, r.idle(), wantIdle)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, src.stream) {
		t.Fatalf("read %d bytes %x, want %d bytes %x", len(got), got, len(src.stream), src.stream)
	}
	if r.spill != nil {
		t.Fatal("a spill buffer kept after the stream's end")
	}
}

// TestRecordReader reads streams of records cut at every byte, and in one
// piece, through reads of several sizes: one byte, less than a header,
// several records' worth.
func TestRecordReader(t *testing.T) {
	streams := []struct {
		name    string
		lengths []int
	}{
		{"one byte", []int{1}},
		{"empty record", []int{0}},
		{"empty records", []int{0, 0, 0}},
		{"empty among others", []int{3, 0, 7, 0}},
		{"small records", []int{2, 5, 11, 1, 4}},
		{"header-sized bodies", []int{5, 5, 5}},
		{"a large record then small ones", []int{3000, 2, 9}},
		{"largest record", []int{1<<14 + 256, 4}},
	}
	for _, s := range streams {
		stream := records(s.lengths...)
		for _, readSize := range []int{1, 3, 5, 6, 64, 512, 1 << 16} {
			t.Run(fmt.Sprintf("%s/read %d", s.name, readSize), func(t *testing.T) {
				checkRecordReads(t, &cutReader{stream: stream}, readSize)
				every := make([]int, len(stream))
				for i := range every {
					every[i] = i + 1
				}
				checkRecordReads(t, &cutReader{stream: stream, cuts: every}, readSize)
				if len(stream) > 200 {
					return // cut once at every point: enough on the small streams
				}
				for cut := 1; cut < len(stream); cut++ {
					checkRecordReads(t, &cutReader{stream: stream, cuts: []int{cut}}, readSize)
				}
			})
		}
	}
}

// TestRecordReaderKeepsErrorAfterSpill: an error that came with bytes past
// a record is returned once those bytes are.
func TestRecordReaderKeepsErrorAfterSpill(t *testing.T) {
	stream := records(1, 2)
	var r recordReader
	p := make([]byte, 64)
	src := io.MultiReader(bytes.NewReader(stream), errReaderAt{})
	var got []byte
	var err error
	for err == nil {
		var n int
		n, err = r.read(readAllAtOnce{src}, p)
		got = append(got, p[:n]...)
	}
	if !bytes.Equal(got, stream) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got %x, %v; want %x, %v", got, err, stream, io.ErrUnexpectedEOF)
	}
}

// errReaderAt fails every read with io.ErrUnexpectedEOF.
type errReaderAt struct{}

func (errReaderAt) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

// readAllAtOnce returns all of r's bytes that fit p with the error after
// them in one read, as a socket may.
type readAllAtOnce struct{ r io.Reader }

func (a readAllAtOnce) Read(p []byte) (int, error) {
	n, err := io.ReadFull(a.r, p)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		_, err = a.r.Read(p[n:])
	}
	return n, err
}

// FuzzRecordReader reads any bytes, cut into pieces of any sizes, through
// a recordReader: whatever the headers say, the bytes come whole and in
// order, no read crosses a record's end, and idle tells the truth.
func FuzzRecordReader(f *testing.F) {
	f.Add(records(1, 0, 5, 300), uint16(7), uint16(5))
	f.Add(records(0, 0), uint16(1), uint16(1))
	f.Add([]byte{22, 3, 1, 0xff, 0xff, 1, 2}, uint16(3), uint16(512))
	f.Fuzz(func(t *testing.T, stream []byte, piece, readSize uint16) {
		if piece == 0 || readSize == 0 {
			return
		}
		var cuts []int
		for c := int(piece); c < len(stream); c += int(piece) {
			cuts = append(cuts, c)
		}
		checkRecordReads(t, &cutReader{stream: stream, cuts: cuts}, int(readSize))
	})
}

// TestRecordReaderSmallSpill: a few bytes read past a record take a small
// buffer, not one of a whole record's size: a conn that closes holding
// them leaves little garbage.
func TestRecordReaderSmallSpill(t *testing.T) {
	var r recordReader
	p := make([]byte, 1<<16)
	if n, err := r.read(bytes.NewReader(records(100, 19)), p); n != 105 || err != nil {
		t.Fatalf("read %d, %v; want the first record's 105 bytes", n, err)
	}
	if r.spill == nil || len(*r.spill) != spillSizes[0] {
		t.Fatalf("a 24-byte spill in a buffer of %d bytes, want %d", len(*r.spill), spillSizes[0])
	}
}
