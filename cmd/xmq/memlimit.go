package main

import (
	"math"
	"os"
	"runtime/debug"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/internal/config"
)

// applyMemoryLimit sets the Go runtime's soft memory limit from
// broker.memory_limit (0: none), unless GOMEMLIMIT is set in the
// environment: the runtime read that at start, and the operator who set it
// meant it. A reload applies it again: the limit may change while serving.
func applyMemoryLimit(limit config.ByteSize, log *zap.Logger) {
	if env := os.Getenv("GOMEMLIMIT"); env != "" {
		if limit != 0 {
			log.Info("GOMEMLIMIT is set: broker.memory_limit is not applied", zap.String("GOMEMLIMIT", env))
		}
		return
	}
	if limit == 0 {
		debug.SetMemoryLimit(math.MaxInt64) // none; also after a reload that removed the key
		return
	}
	debug.SetMemoryLimit(int64(limit))
}
