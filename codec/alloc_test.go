package codec_test

import (
	"bufio"
	"testing"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/codec/codectest"
)

// allocsPerRead reads packets from raw repeated forever, after a warm-up,
// and returns the average allocations per ReadPacket.
func allocsPerRead(t *testing.T, raw []byte, v byte, bufSize int, want codec.Packet) float64 {
	t.Helper()
	r := codec.NewReader(bufio.NewReaderSize(&repeatReader{data: raw}, bufSize), 0)
	r.Version = v
	for range 3 {
		p, err := r.ReadPacket()
		if err != nil {
			t.Fatalf("ReadPacket: got error %v, want none", err)
		}
		checkPacket(t, "ReadPacket", p, want)
	}
	var err error
	allocs := testing.AllocsPerRun(1000, func() {
		if _, e := r.ReadPacket(); e != nil {
			err = e
		}
	})
	if err != nil {
		t.Fatalf("ReadPacket: got error %v, want none", err)
	}
	return allocs
}

func TestReadPublishAllocs(t *testing.T) {
	subID := codectest.BenchPublish(1, 64, true)
	subID.Props.SubscriptionIDs = []uint32{7}
	tests := []struct {
		name string
		v    byte
		p    *codec.Publish
	}{
		{"v4/qos0/64B", codec.V311, codectest.BenchPublish(0, 64, false)},
		{"v4/qos1/64B", codec.V311, codectest.BenchPublish(1, 64, false)},
		{"v5/qos0/64B", codec.V5, codectest.BenchPublish(0, 64, false)},
		{"v5/qos1/64B", codec.V5, codectest.BenchPublish(1, 64, false)},
		{"v5/qos0/64B/properties", codec.V5, codectest.BenchPublish(0, 64, true)},
		{"v5/qos1/64B/user-property-and-subscription-id", codec.V5, subID},
		{"v4/qos1/1KiB", codec.V311, codectest.BenchPublish(1, 1024, false)},
		{"v5/qos1/8KiB/larger-than-the-buffer", codec.V5, codectest.BenchPublish(1, 8<<10, true)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := allocsPerRead(t, tt.p.Append(nil, tt.v), tt.v, 4096, tt.p); got != 0 {
				t.Errorf("ReadPacket: got %v allocations, want 0", got)
			}
		})
	}
}

// TestReadAllocs reads every valid fixture over and over: once the Reader's
// packet values have grown their slices, no packet type allocates.
func TestReadAllocs(t *testing.T) {
	for _, c := range codectest.Valid() {
		t.Run(c.Name, func(t *testing.T) {
			if got := allocsPerRead(t, c.Raw, c.Version, 4096, c.Packet); got != 0 {
				t.Errorf("ReadPacket: got %v allocations, want 0", got)
			}
		})
	}
}

// TestAppendAllocs encodes every valid packet into a buffer with room.
func TestAppendAllocs(t *testing.T) {
	buf := make([]byte, 0, 64<<10)
	for _, c := range codectest.Valid() {
		for _, v := range codectest.Versions {
			p := c.Packet
			got := testing.AllocsPerRun(100, func() {
				buf = p.Append(buf[:0], v)
				if p.Len(v) != len(buf) {
					panic("Len differs from Append")
				}
			})
			if got != 0 {
				t.Errorf("%s at level %d: Append got %v allocations, want 0", c.Name, v, got)
			}
		}
	}
	big := codectest.BenchPublish(1, 32<<10, true)
	if got := testing.AllocsPerRun(100, func() { buf = big.Append(buf[:0], codec.V5) }); got != 0 {
		t.Errorf("32 KiB PUBLISH: Append got %v allocations, want 0", got)
	}
}
