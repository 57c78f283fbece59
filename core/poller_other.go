//go:build !linux

package core

import (
	"errors"
	"syscall"
)

// poller is Linux's epoll set for parked connections (poller_linux.go).
// Elsewhere every connection keeps its reader goroutine, which waits in Go's
// network poller: the same behaviour, a goroutine's stack more per idle
// connection.
type poller struct{}

func newPoller() (*poller, error) { return nil, errors.ErrUnsupported }

type pollArm struct{}

func (p *poller) prepare(c *client) pollArm               { return pollArm{} }
func (p *poller) arm(rc syscall.RawConn, a pollArm) error { return errors.ErrUnsupported }
func (p *poller) release(c *client)                       {}
func (p *poller) close()                                  {}
