package certs

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
)

// startACME sets up the autocert manager and, when configured, the HTTP-01
// server.
func (s *Source) startACME() error {
	o := s.opts.ACME
	domains := make([]string, len(o.Domains))
	for i, d := range o.Domains {
		domains[i] = strings.ToLower(strings.TrimSuffix(d, "."))
	}
	s.opts.ACME.Domains = domains
	client := &acme.Client{DirectoryURL: o.DirectoryURL, UserAgent: "xmq"}
	if o.CAFile != "" {
		pool, err := LoadPool(o.CAFile)
		if err != nil {
			return fmt.Errorf("certs: acme ca_file: %w", err)
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		client.HTTPClient = &http.Client{Transport: tr, Timeout: time.Minute}
	}
	s.acme = &autocert.Manager{
		Prompt:      autocert.AcceptTOS,
		Cache:       autocert.DirCache(o.CacheDir),
		HostPolicy:  autocert.HostWhitelist(domains...),
		RenewBefore: o.RenewBefore,
		Client:      client,
		Email:       o.Email,
	}
	if o.HTTPAddress == "" {
		s.log.Info("acme: certificates from TLS-ALPN-01 on the TLS ports", zap.Strings("domains", domains),
			zap.String("directory", o.DirectoryURL))
		return nil
	}
	l, err := net.Listen("tcp", o.HTTPAddress)
	if err != nil {
		return fmt.Errorf("certs: acme http-01 listener: %w", err)
	}
	challenges := s.acme.HTTPHandler(http.NotFoundHandler())
	s.httpSrv = &http.Server{
		// autocert matches the Host header against the domains; a port in
		// it (HTTP-01 served on a port other than 80, behind a port
		// mapping) would fail that match.
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if h, _, err := net.SplitHostPort(r.Host); err == nil {
				r.Host = h
			}
			challenges.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       30 * time.Second,
		ErrorLog:          zap.NewStdLog(s.log.Named("http01")),
	}
	s.httpAddr = l.Addr()
	s.httpDone = make(chan struct{})
	go func() {
		defer close(s.httpDone)
		if err := s.httpSrv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("acme: http-01 server stopped", zap.Error(err))
		}
	}()
	s.log.Info("acme: certificates from TLS-ALPN-01 on the TLS ports and HTTP-01", zap.Strings("domains", domains),
		zap.Stringer("http_address", l.Addr()), zap.String("directory", o.DirectoryURL))
	return nil
}

// HTTPAddr returns the HTTP-01 server's bound address, or nil.
func (s *Source) HTTPAddr() net.Addr {
	if s.httpSrv == nil {
		return nil
	}
	return s.httpAddr
}
