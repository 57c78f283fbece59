package config

import (
	"time"

	"github.com/xmq-io/xmq/store"
)

// Store is the store section (store.Options with YAML names). Zero
// values mean the store's defaults, so the defaults live in one place.
type Store struct {
	// Durability: sync (default), interval or none.
	Durability store.Durability `yaml:"durability"`
	// FlushInterval: interval mode's flush period (default 100ms).
	FlushInterval time.Duration `yaml:"flush_interval"`
	// MaxDiskBytes: the disk budget; 0 = none.
	MaxDiskBytes int64 `yaml:"max_disk_bytes"`
	// MinFreeBytes: the free space the store leaves on its file system
	// (default 64 MiB; negative: no check).
	MinFreeBytes int64 `yaml:"min_free_bytes"`
	// ReserveBytes: the emergency reserve file (default 32 MiB; negative:
	// none).
	ReserveBytes int64 `yaml:"emergency_reserve_bytes"`
	// StallTimeout: how long a disk operation may hang before the broker
	// exits for its supervisor to restart it (default 30s).
	StallTimeout time.Duration `yaml:"stall_timeout"`
}

// WithDefaults spells out the defaults (for comparing configurations and
// config print), as store.Options.SetDefaults fills them in.
func (s Store) WithDefaults() Store {
	o := s.Options()
	o.SetDefaults()
	s.Durability, s.FlushInterval, s.MaxDiskBytes = o.Durability, o.FlushInterval, o.MaxDiskBytes
	s.MinFreeBytes, s.ReserveBytes, s.StallTimeout = o.MinFreeBytes, o.ReserveBytes, o.StallTimeout
	return s
}

// Options converts to store.Options; the store fills in its defaults. The
// caller adds the logger and OnFatal.
func (s Store) Options() store.Options {
	return store.Options{Durability: s.Durability, FlushInterval: s.FlushInterval, MaxDiskBytes: s.MaxDiskBytes,
		MinFreeBytes: s.MinFreeBytes, ReserveBytes: s.ReserveBytes, StallTimeout: s.StallTimeout}
}

// validateStore checks the store section.
func (c *Config) validateStore(ps *Problems) {
	sp := Path("store")
	if c.Store.Durability != "" &&
		!oneOf(ps, sp.With("durability"), c.Store.Durability, "a durability", store.DurabilitySync, store.DurabilityInterval, store.DurabilityNone) {
		return
	}
	opts := c.Store.Options()
	ps.AddErr(sp, opts.Validate())
}
