package core

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// poller lets idle TCP connections wait for bytes without a goroutine
// (Linux). A connection's reader that finds its socket empty parks: it
// arms the socket in an epoll set of the server's own (one-shot, level
// triggered) and returns, so the connection holds no goroutine and no
// stack — 2.5 KiB and one entry in every GC's stack scan, per idle
// connection. When the socket becomes readable (or is hung up) the poller
// starts a goroutine that reads on.
//
// The epoll set's own descriptor is registered with Go's network poller, so
// the poller goroutine waits like any socket reader — no thread blocked in
// epoll_wait, no scheduler hand-off — and collects the ready connections
// with a non-blocking epoll_wait when Go's poller reports the set readable.
//
// Every epoll_ctl on a connection's socket runs inside its RawConn.Control,
// which holds the descriptor open: a socket closed meanwhile (by the writer,
// a takeover, shutdown) is never confused with a new one that got its
// number. Closing a socket removes it from the set; an event already taken
// for it is recognised as stale by the slot's generation.
type poller struct {
	epfd   int             // the epoll set: open until close, after every connection ended
	f      *os.File        // the epoll set, in Go's network poller
	rc     syscall.RawConn // of f
	events []syscall.EpollEvent
	waitFn func(fd uintptr) bool // bound once: rc.Read would otherwise allocate a closure
	err    error                 // what ended wait

	mu    sync.Mutex // guards slots and free
	slots []pollSlot
	free  []int32

	stop chan struct{}
	done chan struct{}
}

// pollSlot is a connection registered in the set; gen tells its epoll
// events from those of an earlier connection in the same slot.
type pollSlot struct {
	c   *client
	gen int32
}

// Events a parked connection waits for: bytes or the peer's FIN, once.
const pollEvents = syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT

func newPoller() (*poller, error) {
	fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		_ = syscall.Close(fd)
		return nil, os.NewSyscallError("fcntl", err)
	}
	p := &poller{epfd: fd, f: os.NewFile(uintptr(fd), "xmq-epoll"), events: make([]syscall.EpollEvent, 128),
		stop: make(chan struct{}), done: make(chan struct{})}
	if p.rc, err = p.f.SyscallConn(); err != nil {
		_ = p.f.Close()
		return nil, err
	}
	p.waitFn = p.wait
	go p.run()
	return p, nil
}

// wait hands the ready connections to readers, collecting them without
// blocking (epoll_pwait with no signal mask is epoll_wait, which arm64
// lacks), until the set is empty; then false asks Go's poller to wait
// until it is readable again, and wait runs again — inside the one
// rc.Read that run makes. Each rc.Read starts by forgetting what Go's
// poller reported before it: a Read per batch had to ask the set once
// more before parking, a system call per wake-up, or lose the events
// that came in between.
func (p *poller) wait(fd uintptr) bool {
	for {
		r, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, fd, uintptr(unsafe.Pointer(&p.events[0])),
			uintptr(len(p.events)), 0, 0, 0)
		switch e {
		case 0:
			p.dispatch(p.events[:r])
			if int(r) < len(p.events) {
				return false // the set is empty: an event from now on makes it readable
			}
		case syscall.EINTR:
		default:
			p.err = e
			return true
		}
	}
}

// dispatch starts a reader for each parked connection in events.
func (p *poller) dispatch(events []syscall.EpollEvent) {
	if len(events) == 0 {
		return
	}
	p.mu.Lock()
	for _, ev := range events {
		slot, gen := ev.Fd, ev.Pad
		if int(slot) < len(p.slots) && p.slots[slot].gen == gen {
			if c := p.slots[slot].c; c != nil && c.pstate.CompareAndSwap(parked, reading) {
				c.srv.workers.run(job{c, jobResume})
			}
		}
	}
	p.mu.Unlock()
}

// run waits for and dispatches events until close, which ends rc.Read
// by closing the set's file.
func (p *poller) run() {
	defer close(p.done)
	err := p.rc.Read(p.waitFn)
	select {
	case <-p.stop:
		return
	default:
	}
	// The set is ours and only closed by close: nothing else can fail
	// here but resources, and the readers it holds would hang.
	panic("core: epoll_wait: " + errors.Join(err, p.err).Error())
}

// pollArm is what arming a parked connection's socket takes, prepared
// while the reader still holds the connection: afterwards it may not touch
// the client's fields (park.go).
type pollArm struct {
	op   int
	slot int32
	gen  int32
}

// prepare takes c's slot on its first park and says how to arm its socket.
func (p *poller) prepare(c *client) pollArm {
	if c.pslot < 0 {
		p.mu.Lock()
		if n := len(p.free); n > 0 {
			c.pslot = p.free[n-1]
			p.free = p.free[:n-1]
		} else {
			c.pslot = int32(len(p.slots))
			p.slots = append(p.slots, pollSlot{})
		}
		s := &p.slots[c.pslot]
		s.gen++
		s.c = c
		c.pgen = s.gen
		p.mu.Unlock()
	}
	a := pollArm{op: syscall.EPOLL_CTL_MOD, slot: c.pslot, gen: c.pgen}
	if !c.padded {
		a.op = syscall.EPOLL_CTL_ADD
		c.padded = true
	}
	return a
}

// arm (re)arms a parked connection's socket in the set, so that bytes, a
// hang-up or an error start a reader for it once. It touches nothing of
// the client but rc, which never changes.
func (p *poller) arm(rc syscall.RawConn, a pollArm) error {
	ev := syscall.EpollEvent{Events: pollEvents, Fd: a.slot, Pad: a.gen}
	var errno error
	err := rc.Control(func(fd uintptr) {
		errno = syscall.EpollCtl(p.epfd, a.op, int(fd), &ev)
	})
	if err == nil && errno != nil {
		err = os.NewSyscallError("epoll_ctl", errno)
	}
	return err
}

// release frees c's slot once its socket is closed (so out of the set).
func (p *poller) release(c *client) {
	if c.pslot < 0 {
		return
	}
	p.mu.Lock()
	p.slots[c.pslot].c = nil
	p.free = append(p.free, c.pslot)
	p.mu.Unlock()
	c.pslot = -1
}

// close stops the poller goroutine and closes the set.
func (p *poller) close() {
	close(p.stop)
	// Closing the file wakes the goroutine parked on it.
	_ = p.f.Close()
	<-p.done
}
