package certs

import (
	"crypto/tls"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"
)

// fileStamp identifies a version of a file by its size and modification time.
type fileStamp struct {
	size int64
	mod  time.Time
}

func stamp(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{size: fi.Size(), mod: fi.ModTime()}, nil
}

// Reload re-reads the certificate and key files now and serves them to the
// handshakes that follow. On an error the previous certificate stays in
// service. For the development CA and ACME it does nothing.
func (s *Source) Reload() error {
	if s.kind != KindFiles {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loadLocked()
}

// loadLocked loads the pair; s.mu is held.
func (s *Source) loadLocked() error {
	cs, err1 := stamp(s.opts.CertFile)
	ks, err2 := stamp(s.opts.KeyFile)
	pair, err := tls.LoadX509KeyPair(s.opts.CertFile, s.opts.KeyFile)
	if err != nil {
		return fmt.Errorf("certs: loading %s and %s: %w", s.opts.CertFile, s.opts.KeyFile, err)
	}
	if err1 == nil && err2 == nil {
		s.certStamp, s.keyStamp = cs, ks
	}
	old := s.cert.Swap(&pair)
	if old != nil {
		s.log.Info("certificate reloaded", zap.String("cert_file", s.opts.CertFile),
			zap.Strings("names", pair.Leaf.DNSNames), zap.Time("not_after", pair.Leaf.NotAfter))
	}
	return nil
}

// watch reloads the files when either changes, until Close. A pair caught
// half-written fails to load and is tried again at the next tick.
func (s *Source) watch() {
	defer close(s.reloadStopped)
	t := time.NewTicker(s.opts.ReloadInterval)
	defer t.Stop()
	var lastErr string
	for {
		select {
		case <-s.stopReload:
			return
		case <-t.C:
		}
		cs, err1 := stamp(s.opts.CertFile)
		ks, err2 := stamp(s.opts.KeyFile)
		s.mu.Lock()
		changed := err1 == nil && err2 == nil && (cs != s.certStamp || ks != s.keyStamp)
		var err error
		if changed {
			err = s.loadLocked()
		}
		s.mu.Unlock()
		if err != nil && err.Error() != lastErr {
			s.log.Warn("certificate files changed but do not load; keeping the previous certificate", zap.Error(err))
		}
		if err != nil {
			lastErr = err.Error()
		} else {
			lastErr = ""
		}
	}
}
