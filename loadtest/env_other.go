//go:build !linux

package loadtest

import (
	"context"
	"errors"
)

// readProc leaves the fields /proc gives on Linux empty.
func (e *Env) readProc() {}

// machineCPU is unknown without /proc: reports leave the machine's CPU out.
func machineCPU() cpuTicks { return cpuTicks{} }

// errNoProc is -broker-pid's error where there is no /proc.
var errNoProc = errors.New("loadtest: -broker-pid reads /proc/PID, which only Linux has; use -metrics-url")

func pidProbe(int) brokerProbe {
	return func(context.Context) (float64, uint64, error) { return 0, 0, errNoProc }
}
