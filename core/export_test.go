package core

import "fmt"

// RaceEnabled tells the external tests that the race detector runs, so
// that the large cases use fewer items.
const RaceEnabled = raceEnabled

// ClientIndexError reports how the client index differs from the sessions
// it mirrors, for tests.
func (s *Server) ClientIndexError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.clientIDs.tree()
	if t.len() != len(s.sessions) {
		return fmt.Errorf("index holds %d ids for %d sessions", t.len(), len(s.sessions))
	}
	for it := t.first(); it.valid(); it.next() {
		if s.sessions[it.item()] == nil {
			return fmt.Errorf("index holds %q, which has no session", it.item())
		}
	}
	return nil
}
