package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/xmq-io/xmq/internal/config"
)

// TestBinaryMappings: only the executable's private mappings that are not
// writable and hold no written page qualify.
func TestBinaryMappings(t *testing.T) {
	smaps := `00400000-00402000 r--p 00000000 103:02 1 /usr/bin/xmq
Rss:                   8 kB
Anonymous:             0 kB
00402000-01420000 r-xp 00002000 103:02 1 /usr/bin/xmq
Rss:                9208 kB
Anonymous:             0 kB
0240f000-02410000 r--p 0200e000 103:02 1 /usr/bin/xmq
Rss:                   4 kB
Anonymous:             4 kB
02410000-024d0000 rw-p 0200f000 103:02 1 /usr/bin/xmq
Rss:                 696 kB
Anonymous:           152 kB
7f8ee3048000-7f8ee319e000 r-xp 00028000 103:02 2 /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                 920 kB
Anonymous:             0 kB
7f8ee4000000-7f8ee4001000 r--s 00000000 103:02 1 /usr/bin/xmq
Rss:                   4 kB
Anonymous:             0 kB
`
	got := binaryMappings([]byte(smaps), "/usr/bin/xmq")
	want := []mapping{{0x400000, 0x402000, 8 << 10}, {0x402000, 0x1420000, 9208 << 10}}
	if !slices.Equal(got, want) {
		t.Errorf("binaryMappings = %x, want %x", got, want)
	}
}

// TestTrimBinaryPages trims the test binary's own pages and goes on
// running: the code and read-only data come back from the page cache.
func TestTrimBinaryPages(t *testing.T) {
	n, err := trimBinaryPages()
	if err != nil {
		t.Fatal(err)
	}
	if n <= 0 {
		t.Errorf("trimmed %d bytes, want some", n)
	}
	// Code and read-only data used after the trim: a configuration
	// loaded and printed.
	var out strings.Builder
	if err := config.Print(&out, mustLoad(t, "-c", writeFile(t, "broker:\n  memory_limit: 1GiB\n")), config.Sources{}, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "memory_limit: 1GiB") {
		t.Errorf("after the trim, config print:\n%s", out.String())
	}
}
