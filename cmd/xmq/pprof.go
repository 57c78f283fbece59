package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/internal/config"
)

// startPprof serves net/http/pprof on addr, which must be a loopback
// address: the profiles show message contents and client ids. It is off
// unless -pprof is given, and never part of the configuration file. The
// returned function stops it.
func startPprof(addr string, log *zap.Logger) (func(), error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, config.UsageError{Err: fmt.Errorf("-pprof %q: %w", addr, err)}
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, config.UsageError{Err: fmt.Errorf("-pprof %q: only a loopback address (127.0.0.1, ::1, localhost)", addr)}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-pprof: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("pprof server stopped", zap.Error(err))
		}
	}()
	log.Info("pprof debug server", zap.Stringer("address", ln.Addr()))
	return func() { _ = hs.Close() }, nil
}
