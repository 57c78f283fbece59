//go:build !linux

package main

import "errors"

// trimBinaryPages is Linux only (trim_linux.go).
func trimBinaryPages() (int64, error) { return 0, errors.ErrUnsupported }
