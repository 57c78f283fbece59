package core

import "fmt"

// StoreHealthy reports whether the broker can keep its promises, for a
// readiness probe: nil while it serves and Store.Sync succeeds; an error
// once Shutdown has begun (the store is being closed) or when Sync fails.
//
// It changes nothing. Sync returns at once when every write is durable
// already, and otherwise shares the flush that acknowledgements wait for
// (group commit), so a probe costs at most one flush that was due anyway.
// It is not counted in the Store.Sync latency histogram of Stats.
func (s *Server) StoreHealthy() error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrServerClosed
	}
	if err := s.store.Sync(); err != nil {
		return fmt.Errorf("core: store sync failed: %w", err)
	}
	return nil
}
