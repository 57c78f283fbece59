package certs

import (
	"bytes"
	"crypto/tls"
	"errors"
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

// Reload re-reads the certificate and key files, or the development CA's
// server certificate (renewed when it no longer covers this machine's
// addresses or the names `xmq certs -host` added), and the revocation
// lists, now; the handshakes that follow use them. On an error what was in
// service stays. For ACME certificates it reloads only the lists.
func (s *Source) Reload() error {
	s.mu.Lock()
	var err error
	switch s.kind {
	case KindFiles:
		err = s.loadLocked()
	case KindDev:
		err = s.reloadDevLocked()
	}
	crls := make([]*crlFile, 0, len(s.crls))
	for _, c := range s.crls {
		crls = append(crls, c)
	}
	s.mu.Unlock()
	errs := []error{err}
	for _, c := range crls {
		errs = append(errs, c.reload())
	}
	return errors.Join(errs...)
}

// reloadDevLocked serves the development certificate in the CA's
// directory, issuing a new one when the old no longer covers the names;
// s.mu is held. A CA replaced meanwhile (xmq certs -regen) serves its
// certificate, but client certificates are still checked against the CA
// of the start until a restart.
func (s *Source) reloadDevLocked() error {
	if s.opts.DevDir == "" {
		return nil
	}
	dev, err := EnsureDev(s.opts.DevDir, false)
	if err != nil {
		return err
	}
	old := s.cert.Load()
	if old != nil && bytes.Equal(old.Certificate[0], dev.Cert.Certificate[0]) {
		return nil
	}
	s.cert.Store(&dev.Cert)
	fields := []zap.Field{zap.Strings("names", dev.Hosts), zap.Time("not_after", dev.Cert.Leaf.NotAfter)}
	if !dev.CA.Cert.Equal(s.dev.CA.Cert) {
		s.log.Warn("development CA replaced: serving its certificate; client certificates are checked against the previous CA until a restart", fields...)
	} else {
		s.log.Info("development certificate reloaded", fields...)
	}
	return nil
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
