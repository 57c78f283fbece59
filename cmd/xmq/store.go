package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/auth"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/config"
	"github.com/xmq-io/xmq/store"
)

// exitProcess ends the broker when its store fails (a variable for tests).
var exitProcess = os.Exit

// storeFailed is the store's OnFatal: the engine cannot go on (a failed
// fsync, a disk stalled past store.stall_timeout), so the broker exits
// non-zero at once for its supervisor to restart it. What was
// acknowledged is on disk; a graceful shutdown would wait on that disk.
func storeFailed(log *zap.Logger) func(error) {
	return func(err error) {
		log.Error("store failed: exiting so that the supervisor restarts xmq; acknowledged messages are on disk", zap.Error(err))
		_ = log.Sync()
		exitProcess(1)
	}
}

// storeDir is where the store lives in a data directory.
func storeDir(dataDir string) string { return filepath.Join(dataDir, "store") }

// openStore opens the data directory's store, or a memory store for
// data_dir "". The on-disk store also keeps auth's bans (bans is nil for
// the memory store: bans then live in auth's memory only). Its errors say
// what to do.
func openStore(cfg *config.Config, log *zap.Logger) (st core.Store, bans auth.BanStore, err error) {
	if cfg.DataDir == "" {
		log.Info("data directory is empty: state lives in memory and is lost on exit")
		return core.NewMemStore(), nil, nil
	}
	dir := storeDir(cfg.DataDir)
	opts := cfg.Store.Options()
	opts.Log = log.Named("store")
	opts.OnFatal = storeFailed(log)
	ps, err := store.Open(dir, opts)
	if err != nil {
		return nil, nil, storeHint(err, cfg.DataDir)
	}
	sc := cfg.Store.WithDefaults()
	if sc.Durability == store.DurabilitySync && runtime.GOMAXPROCS(0) < 2 {
		// An fsync blocks its thread and, until the runtime notices (up to
		// 10ms), the only P with it: every connection would stall behind
		// the disk. A second P lets the others run on the same CPU while
		// a thread waits for the disk; it uses no CPU while it waits.
		runtime.GOMAXPROCS(2)
		log.Info("GOMAXPROCS raised from 1 to 2 so that fsync does not stall the broker (durability sync)")
	}
	log.Info("store opened", zap.String("dir", dir), zap.String("durability", string(sc.Durability)),
		zap.Duration("flush_interval", sc.FlushInterval), zap.Int64("max_disk_bytes", sc.MaxDiskBytes),
		zap.Int64("min_free_bytes", sc.MinFreeBytes), zap.Int64("emergency_reserve_bytes", sc.ReserveBytes),
		zap.Duration("stall_timeout", sc.StallTimeout))
	return ps, ps, nil
}

// storeHint adds the fix to a store error.
func storeHint(err error, dataDir string) error {
	switch {
	case errors.Is(err, store.ErrNotWritable):
		return fmt.Errorf("%w\n  fix: make the data directory writable by this user, choose another with -data DIR, or run with -data \"\" to keep state in memory", err)
	case errors.Is(err, store.ErrFormat):
		return err // says which build to run
	case errors.Is(err, store.ErrLocked):
		// Nothing is wrong with the data: never advise moving it aside.
		return fmt.Errorf("%w\n  fix: stop that xmq first, or give this one its own data directory with -data DIR (or -data \"\" to keep state in memory)", err)
	default:
		return fmt.Errorf("the store in %s cannot be read: %w\n  fix: run `xmq store check %s` for details; to start empty, move %s aside (its sessions, queued and retained messages are then lost)",
			dataDir, err, dataDir, storeDir(dataDir))
	}
}

// restoreHint explains a failure of core.New, which restores the store.
func restoreHint(err error, dataDir string) error {
	if dataDir == "" {
		return err
	}
	return fmt.Errorf("%w\n  fix: run `xmq store check %s` for details; to start empty, move %s aside (its sessions, queued and retained messages are then lost)",
		err, dataDir, storeDir(dataDir))
}

// runStore is `xmq store check DIR`: it opens the store read-only, walks
// every key and decodes every record, and reports what it found.
func runStore(args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		return config.UsageError{Err: errors.New("usage: xmq store check [DATA_DIR] (default ./data)")}
	}
	fs := flag.NewFlagSet("xmq store check", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stdout, "usage: xmq store check [DATA_DIR]\n\nOpens the store in DATA_DIR/store read-only (DATA_DIR may also be the store\ndirectory itself), reads every key and decodes every record. Exit status 1\nwhen anything is damaged.")
			return nil
		}
		return config.UsageError{Err: err}
	}
	if fs.NArg() > 1 {
		return config.UsageError{Err: fmt.Errorf("store check takes one directory, got %q", fs.Args())}
	}
	dir := config.DefaultDataDir
	if fs.NArg() == 1 {
		dir = fs.Arg(0)
	}
	if fi, err := os.Stat(storeDir(dir)); err == nil && fi.IsDir() {
		dir = storeDir(dir)
	}
	st, err := store.Open(dir, store.Options{ReadOnly: true})
	if errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("store check %s: %w\n  fix: stop it first (the store is checked while no xmq has it open), or check a copy of the directory", dir, err)
	}
	if err != nil {
		return fmt.Errorf("store check %s: %w", dir, err)
	}
	defer st.Close()
	var problems []error
	keys, err := st.Check(func(err error) { problems = append(problems, err) })
	if err != nil {
		problems = append(problems, err)
	}
	rep, err := core.CheckStore(st)
	if err != nil {
		problems = append(problems, err)
	}
	problems = append(problems, rep.Problems...)
	fmt.Fprintf(stdout, "store %s (format %d)\n", dir, store.FormatVersion)
	fmt.Fprintf(stdout, "  sessions %d, messages %d (%d owed to no session), retained %d, inbound QoS 2 states %d, pending wills %d, bans %d\n",
		keys.Sessions, keys.Messages, rep.Orphans, keys.Retained, keys.Inbound, keys.Wills, keys.Bans)
	fmt.Fprintf(stdout, "  %d bytes of keys and values\n", keys.Bytes)
	if len(problems) == 0 {
		fmt.Fprintln(stdout, "ok")
		return nil
	}
	for _, p := range problems {
		fmt.Fprintf(stdout, "  problem: %v\n", p)
	}
	return fmt.Errorf("store %s: %d problems; to start empty, move the directory aside (its sessions, queued and retained messages are then lost)",
		dir, len(problems))
}
