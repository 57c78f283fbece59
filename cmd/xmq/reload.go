package main

import (
	"cmp"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"sync"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/xmq-io/xmq/auth"
	"github.com/xmq-io/xmq/bridge"
	"github.com/xmq-io/xmq/core"
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
	cur     config // what runs: the start's configuration and what reloads applied
	lg      *logger
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
	var applied []keyPath
	var errs []error

	// The broker's limits, compared with their defaults filled in.
	curOpts, nextOpts := r.cur.Broker.options(), next.Broker.options()
	curOpts.SetDefaults()
	nextOpts.SetDefaults()
	if curOpts.Limits() != nextOpts.Limits() {
		if err := r.srv.SetLimits(nextOpts.Limits()); err != nil {
			errs = append(errs, err)
		} else {
			for f := range reflect.TypeFor[core.Limits]().Fields() {
				applied = append(applied, path("broker", brokerKey(f.Name)))
			}
		}
	}
	if next.Broker.MemoryLimit != r.cur.Broker.MemoryLimit {
		applyMemoryLimit(next.Broker.MemoryLimit, r.log)
		applied = append(applied, path("broker", "memory_limit"))
	}
	if next.Log.Level != r.cur.Log.Level {
		var l zapcore.Level
		if err := l.UnmarshalText([]byte(next.Log.Level)); err == nil {
			r.lg.level.SetLevel(l)
			applied = append(applied, path("log", "level"))
		}
	}
	if next.Auth.PasswordFile != r.cur.Auth.PasswordFile || next.Auth.ACLFile != r.cur.Auth.ACLFile {
		if err := r.authn.SetFiles(next.Auth.PasswordFile, next.Auth.ACLFile); err != nil {
			errs = append(errs, err)
		} else {
			applied = append(applied, path("auth", "password_file"), path("auth", "acl_file"))
		}
	}
	tlsKeys, err := r.ts.applyFiles(&r.cur, &next)
	applied = append(applied, tlsKeys...)
	errs = append(errs, err)
	ch, err := r.bridges.Apply(next.bridgeConfigs())
	if err == nil {
		applied = append(applied, path("bridges"))
		res.bridges = ch
	}
	errs = append(errs, err)

	// What changed of the applied keys is in force now; whatever else
	// differs from what runs needs a restart.
	for _, p := range applied {
		if !reflect.DeepEqual(valueAt(&r.cur, p), valueAt(&next, p)) {
			res.changed = append(res.changed, p.String())
		}
		copyKey(&r.cur, &next, p)
	}
	var restart []keyPath
	diffKeys(reflect.ValueOf(r.cur), reflect.ValueOf(next), nil, &restart)
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

// valueAt is the value of key p in cfg; the zero Value when p is not there.
func valueAt(cfg *config, p keyPath) any {
	v := fieldAt(reflect.ValueOf(cfg).Elem(), p)
	if !v.IsValid() {
		return nil
	}
	return v.Interface()
}

// fieldAt walks p below v: sections by key, lists by number.
func fieldAt(v reflect.Value, p keyPath) reflect.Value {
	for _, k := range p {
		switch v.Kind() {
		case reflect.Struct:
			found := false
			for _, f := range yamlFields(v.Type()) {
				if f.key == k {
					v, found = v.Field(f.index), true
					break
				}
			}
			if !found {
				return reflect.Value{}
			}
		case reflect.Slice:
			i, err := strconv.Atoi(k)
			if err != nil || i >= v.Len() {
				return reflect.Value{}
			}
			v = v.Index(i)
		default:
			return reflect.Value{}
		}
	}
	return v
}

// copyKey sets key p of dst to its value in src.
func copyKey(dst, src *config, p keyPath) {
	d, s := fieldAt(reflect.ValueOf(dst).Elem(), p), fieldAt(reflect.ValueOf(src).Elem(), p)
	if d.IsValid() && s.IsValid() && d.CanSet() {
		d.Set(s)
	}
}

// diffKeys lists the keys whose values differ between a and b: the
// deepest key of a section, a list whose length changed, a map as a whole.
func diffKeys(a, b reflect.Value, p keyPath, out *[]keyPath) {
	switch a.Kind() {
	case reflect.Struct:
		fs := yamlFields(a.Type())
		slices.SortFunc(fs, func(x, y yamlField) int { return cmp.Compare(x.index, y.index) }) // the file's order
		for _, f := range fs {
			diffKeys(a.Field(f.index), b.Field(f.index), p.with(f.key), out)
		}
	case reflect.Slice:
		if a.Len() != b.Len() || !section(a.Type().Elem()) {
			if !reflect.DeepEqual(a.Interface(), b.Interface()) && !(a.Len() == 0 && b.Len() == 0) {
				*out = append(*out, p)
			}
			return
		}
		for i := range a.Len() {
			diffKeys(a.Index(i), b.Index(i), p.with(strconv.Itoa(i)), out)
		}
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, p)
		}
	}
}
