package core

import (
	"testing"
	"unsafe"

	"github.com/xmq-io/xmq/codec"
)

// TestIdleConnectionSizes keeps what every connection allocates within
// the Go allocator's size classes docs/architecture.md counts ("What an
// idle connection holds"): a field added to one of these structs can cost
// every connection a whole larger class (576 bytes rather than 448 for the
// client). Fields few connections use go to clientExtra.
func TestIdleConnectionSizes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		size, want uintptr
	}{
		{"client", unsafe.Sizeof(client{}), 448},
		{"session", unsafe.Sizeof(session{}), 256},
		{"codec.Reader", unsafe.Sizeof(codec.Reader{}), 160},
	} {
		if tc.size > tc.want {
			t.Errorf("%s is %d bytes, over its %d-byte size class: move a field few connections use out of it, or update docs/architecture.md", tc.name, tc.size, tc.want)
		}
	}
}
