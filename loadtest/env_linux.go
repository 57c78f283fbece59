package loadtest

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/prometheus/procfs"
)

// procFS is the machine's /proc; its error is that /proc is not mounted.
var procFS = sync.OnceValues(procfs.NewDefaultFS)

// readProc fills in what /proc tells of the machine.
func (e *Env) readProc() {
	if fs, err := procFS(); err == nil {
		e.readProcFS(fs)
	}
}

// readProcFS reads the kernel release, the ephemeral port range, the CPU
// model, the memory and the CPU count from fs (a fixture in tests).
func (e *Env) readProcFS(fs procfs.FS) {
	if n := machineCPUOf(fs).cpus; n > 0 {
		e.Cores = n
	}
	if v, err := fs.SysctlStrings("kernel/osrelease"); err == nil && len(v) > 0 {
		e.Kernel = strings.Join(v, " ")
	}
	if r, err := fs.SysctlInts("net/ipv4/ip_local_port_range"); err == nil && len(r) == 2 {
		e.PortRange = fmt.Sprintf("%d-%d (%d)", r[0], r[1], r[1]-r[0]+1)
	}
	if cpus, err := fs.CPUInfo(); err == nil && len(cpus) > 0 {
		e.CPUModel = strings.TrimSpace(cpus[0].ModelName)
	}
	if m, err := fs.Meminfo(); err == nil && m.MemTotal != nil {
		e.MemTotal = *m.MemTotal << 10 // kB
	}
}

// machineCPU reads the machine's CPU time from /proc/stat.
func machineCPU() cpuTicks {
	fs, err := procFS()
	if err != nil {
		return cpuTicks{}
	}
	return machineCPUOf(fs)
}

// machineCPUOf sums the "cpu" line of fs's stat: busy is all but idle and
// iowait; guest time is left out, as it is already in user.
func machineCPUOf(fs procfs.FS) cpuTicks {
	st, err := fs.Stat()
	if err != nil {
		return cpuTicks{}
	}
	c := st.CPUTotal
	busy := c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal
	return cpuTicks{busy: busy, total: busy + c.Idle + c.Iowait, cpus: len(st.CPU)}
}

// pidProbe reads /proc/PID/stat (utime+stime) and /proc/PID/statm
// (resident pages).
func pidProbe(pid int) brokerProbe {
	return func(context.Context) (float64, uint64, error) {
		fs, err := procFS()
		if err != nil {
			return 0, 0, err
		}
		return pidUsage(fs, pid)
	}
}

// pidUsage is process pid's cumulative CPU seconds and resident bytes in fs.
func pidUsage(fs procfs.FS, pid int) (float64, uint64, error) {
	p, err := fs.Proc(pid)
	if err != nil {
		return 0, 0, err
	}
	st, err := p.Stat()
	if err != nil {
		return 0, 0, err
	}
	m, err := p.Statm()
	if err != nil {
		return 0, 0, err
	}
	return st.CPUTime(), m.ResidentBytes(), nil
}
