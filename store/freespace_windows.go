package store

import "golang.org/x/sys/windows"

// freeBytes is how many bytes of dir's volume the calling user may still
// write (GetDiskFreeSpaceEx, which honours quotas).
func freeBytes(dir string) (int64, error) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, err
	}
	var avail uint64
	if err := windows.GetDiskFreeSpaceEx(p, &avail, nil, nil); err != nil {
		return 0, err
	}
	return int64(min(avail, 1<<63-1)), nil
}
