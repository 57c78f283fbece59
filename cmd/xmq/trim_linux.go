package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// trimBinaryPages drops this process's page-table entries for the
// executable's read-only file mappings (its code and read-only data), so
// that from then on RSS counts the pages in use rather than every page
// the package initialisations and the start touched (with 10,000 idle
// connections, 11.7 MB of the binary's 21.6 MB; docs/architecture.md).
// The pages stay in the page cache, shared and reclaimable as before, and
// one used again comes back by a minor fault, with no read from disk. It
// changes what RSS shows, not what a cgroup is charged: the page cache is
// charged either way.
//
// Only mappings of the executable that are not writable and hold no
// private (copied-on-write) page are touched: MADV_DONTNEED on those would
// lose what was written to them (the RELRO page the dynamic linker wrote
// before making it read-only is such a page). It returns the bytes of RSS
// given up.
func trimBinaryPages() (int64, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	var trimmed int64
	for _, m := range binaryMappings(smaps, exe) {
		if m.rss == 0 {
			continue
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(m.start), uintptr(m.end-m.start), unix.MADV_DONTNEED); errno != 0 {
			return trimmed, fmt.Errorf("madvise %#x-%#x: %w", m.start, m.end, errno)
		}
		trimmed += m.rss
	}
	return trimmed, nil
}

// mapping is one line of /proc/self/smaps with what trimBinaryPages needs.
type mapping struct {
	start, end uint64
	rss        int64
}

// binaryMappings are the mappings in smaps of the file exe that are
// private, not writable and hold no anonymous (written) page.
func binaryMappings(smaps []byte, exe string) []mapping {
	var out []mapping
	var cur *mapping // the mapping being read, nil when it does not qualify
	keep := func() {
		if cur != nil {
			out = append(out, *cur)
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(f[0], "-"); ok && len(f) >= 5 {
			keep()
			cur = nil
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			perms := f[1]
			if err1 == nil && err2 == nil && len(f) >= 6 && f[5] == exe && len(perms) == 4 && perms[1] != 'w' && perms[3] == 'p' {
				cur = &mapping{start: start, end: end}
			}
			continue
		}
		if cur == nil || len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		switch {
		case err != nil:
		case f[0] == "Rss:":
			cur.rss = kb << 10
		case f[0] == "Anonymous:" && kb != 0:
			cur = nil // a page was written: it exists nowhere else
		}
	}
	keep()
	return out
}
