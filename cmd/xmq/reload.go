package main

import (
	"errors"
	"reflect"
	"sync"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/xmq-io/xmq/auth"
	"github.com/xmq-io/xmq/bridge"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/config"
	"github.com/xmq-io/xmq/internal/logging"
)

// reloader applies the configuration file (and the environment and flags
// of the start) again while xmq runs: SIGHUP and POST /api/v1/reload. What
// can change live changes — the broker's limits (core.Limits), log.level,
// auth.password_file and auth.acl_file, the TLS certificate files of the
// listeners and of the tls section, the bridges — and every other key that
// changed is logged as needing a restart, its running value staying in
// force. The files already named are read again too (certificates,
// password and ACL files), as before.
type reloader struct {
	mu      sync.Mutex // one reload at a time; guards cur
	args    []string
	cur     config.Config // what runs: the start's configuration and what reloads applied
	lg      *logging.Logger
	srv     *core.Server
	authn   *auth.Auth
	ts      *tlsSetup
	bridges *bridge.Manager
	log     *zap.Logger
}

// reloadResult is what a reload did.
type reloadResult struct {
	bridges      bridge.Changes
	changed      []string // keys changed live
	needsRestart []string // keys that changed but apply only at the next start
}

// reload reads the configuration again and applies it; by names who asked
// (SIGHUP, API). An invalid configuration changes nothing and is the
// error; a part that fails to apply (a certificate that does not load)
// leaves that part as it was and is logged and returned, the other parts
// applied.
func (r *reloader) reload(by string) (reloadResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var res reloadResult
	r.log.Info(by + ": reloading the configuration, the certificates, the password and ACL files")
	r.ts.reload(r.log.Named("certs"))
	if err := r.authn.Reload(); err != nil {
		r.log.Named("auth").Error("reload failed; the previous version stays in force", zap.Error(err))
	}
	next, err := loadConfig(r.args)
	if err != nil {
		r.log.Error("reload: the configuration is not valid; nothing in it changed", zap.Error(err))
		return res, err
	}
	var applied []config.KeyPath
	var errs []error

	// The broker's limits, compared with their defaults filled in.
	curOpts, nextOpts := r.cur.Broker.Options(), next.Broker.Options()
	curOpts.SetDefaults()
	nextOpts.SetDefaults()
	if curOpts.Limits() != nextOpts.Limits() {
		if err := r.srv.SetLimits(nextOpts.Limits()); err != nil {
			errs = append(errs, err)
		} else {
			for f := range reflect.TypeFor[core.Limits]().Fields() {
				applied = append(applied, config.Path("broker", config.BrokerKey(f.Name)))
			}
		}
	}
	if next.Broker.MemoryLimit != r.cur.Broker.MemoryLimit {
		applyMemoryLimit(next.Broker.MemoryLimit, r.log)
		applied = append(applied, config.Path("broker", "memory_limit"))
	}
	if next.Log.Level != r.cur.Log.Level {
		var l zapcore.Level
		if err := l.UnmarshalText([]byte(next.Log.Level)); err == nil {
			r.lg.SetLevel(l)
			applied = append(applied, config.Path("log", "level"))
		}
	}
	if next.Auth.PasswordFile != r.cur.Auth.PasswordFile || next.Auth.ACLFile != r.cur.Auth.ACLFile {
		if err := r.authn.SetFiles(next.Auth.PasswordFile, next.Auth.ACLFile); err != nil {
			errs = append(errs, err)
		} else {
			applied = append(applied, config.Path("auth", "password_file"), config.Path("auth", "acl_file"))
		}
	}
	tlsKeys, err := r.ts.applyFiles(&r.cur, &next)
	applied = append(applied, tlsKeys...)
	errs = append(errs, err)
	ch, err := r.bridges.Apply(next.BridgeConfigs())
	if err == nil {
		applied = append(applied, config.Path("bridges"))
		res.bridges = ch
	}
	errs = append(errs, err)

	// What changed of the applied keys is in force now; whatever else
	// differs from what runs needs a restart.
	for _, p := range applied {
		if !reflect.DeepEqual(config.ValueAt(&r.cur, p), config.ValueAt(&next, p)) {
			res.changed = append(res.changed, p.String())
		}
		config.CopyKey(&r.cur, &next, p)
	}
	var restart []config.KeyPath
	config.DiffKeys(reflect.ValueOf(r.cur), reflect.ValueOf(next), nil, &restart)
	for _, p := range restart {
		res.needsRestart = append(res.needsRestart, p.String())
		r.log.Warn(p.String()+" changed in the configuration: needs a restart (the running value stays until then)",
			zap.String("key", p.String()))
	}
	err = errors.Join(errs...)
	if err != nil {
		r.log.Error("reload: part of the configuration was not applied; it stays as it was", zap.Error(err))
	}
	r.log.Info("configuration reloaded", zap.Strings("changed", res.changed), zap.Strings("needs_restart", res.needsRestart),
		zap.Strings("bridges_added", ch.Added), zap.Strings("bridges_changed", ch.Changed), zap.Strings("bridges_removed", ch.Removed))
	return res, err
}
