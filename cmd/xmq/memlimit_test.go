package main

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/internal/config"
)

// TestMemoryLimitKey: broker.memory_limit takes GOMEMLIMIT's sizes from the
// file and the environment, names a bad one, and config print shows it as
// written.
func TestMemoryLimitKey(t *testing.T) {
	for in, want := range map[string]config.ByteSize{"0": 0, "1048576": 1 << 20, "256MiB": 256 << 20, "2GiB": 2 << 30, "64KiB": 64 << 10, "100B": 100} {
		if got := mustLoad(t, "-c", writeFile(t, "broker:\n  memory_limit: "+in+"\n")).Broker.MemoryLimit; got != want {
			t.Errorf("memory_limit %s: %d, want %d", in, got, want)
		}
	}
	cfg, _, err := loadConfigEnv(nil, []string{"XMQ_BROKER_MEMORY_LIMIT=512MiB"})
	if err != nil || cfg.Broker.MemoryLimit != 512<<20 {
		t.Errorf("XMQ_BROKER_MEMORY_LIMIT=512MiB: %d, %v", cfg.Broker.MemoryLimit, err)
	}
	for _, bad := range []string{"256MB", "-1", "1.5GiB", "lots"} {
		_, err := loadConfig([]string{"-c", writeFile(t, "broker:\n  memory_limit: "+bad+"\n")})
		if err == nil || !strings.Contains(err.Error(), "broker.memory_limit") || !strings.Contains(err.Error(), "is not a size") {
			t.Errorf("memory_limit %s: %v, want a problem naming the key", bad, err)
		}
	}
	var out strings.Builder
	if err := config.Print(&out, mustLoad(t, "-c", writeFile(t, "broker:\n  memory_limit: 256MiB\n")), config.Sources{}, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "memory_limit: 256MiB") {
		t.Errorf("config print does not show memory_limit: 256MiB:\n%s", out.String())
	}
}

// TestApplyMemoryLimit: the key sets the runtime's soft limit, 0 removes
// it, and GOMEMLIMIT in the environment wins.
func TestApplyMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	log := zap.NewNop()
	t.Setenv("GOMEMLIMIT", "")
	applyMemoryLimit(300<<20, log)
	if got := debug.SetMemoryLimit(-1); got != 300<<20 {
		t.Errorf("limit %d, want 300 MiB", got)
	}
	applyMemoryLimit(0, log)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("memory_limit 0: limit %d, want none", got)
	}
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(1 << 30) // what the runtime read at start
	applyMemoryLimit(300<<20, log)
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("with GOMEMLIMIT=1GiB: limit %d, want 1 GiB", got)
	}
}
