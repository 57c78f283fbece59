package cluster

// restoredSession is what RestoreSession got.
type restoredSession struct {
	id                     string
	session, inbound, will string
	seqs                   []uint64
	msgs                   []string
	withWill               bool
}

// RestoreSession records the session on restored.
func (f *fakeLocal) RestoreSession(clientID string, session, inbound []byte, seqs []uint64, msgs [][]byte, will []byte, withWill bool) error {
	r := restoredSession{id: clientID, session: string(session), inbound: string(inbound), will: string(will), seqs: seqs, withWill: withWill}
	for _, m := range msgs {
		r.msgs = append(r.msgs, string(m))
	}
	f.mu.Lock()
	ch := f.restored
	f.mu.Unlock()
	if ch != nil {
		ch <- r
	}
	return nil
}

// StaleSessions returns stale.
func (f *fakeLocal) StaleSessions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stale
}

// MergeSession records the merge on merged.
func (f *fakeLocal) MergeSession(clientID string, data []byte) (int, error) {
	f.mu.Lock()
	ch := f.merged
	f.mu.Unlock()
	if ch != nil {
		ch <- [2]string{clientID, string(data)}
	}
	return 1, nil
}
