package cluster

import (
	"slices"
	"testing"

	"go.uber.org/zap/zaptest"
)

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

// nopStore is a Store that keeps nothing: the replica's side is tested.
type nopStore struct{}

func (nopStore) PutSession(string, []byte) error            { return nil }
func (nopStore) DeleteSession(string) error                 { return nil }
func (nopStore) PutMessage(string, uint64, []byte) error    { return nil }
func (nopStore) UpdateMessage(string, uint64, []byte) error { return nil }
func (nopStore) DeleteMessage(string, uint64) error         { return nil }
func (nopStore) PutRetained(string, []byte) error           { return nil }
func (nopStore) DeleteRetained(string) error                { return nil }
func (nopStore) PutInbound(string, []byte) error            { return nil }
func (nopStore) DeleteInbound(string) error                 { return nil }
func (nopStore) PutWill(string, []byte) error               { return nil }
func (nopStore) DeleteWill(string) error                    { return nil }
func (nopStore) Sync() error                                { return nil }
func (nopStore) Close() error                               { return nil }
func (nopStore) Load(func(string, []byte) error, func(string, uint64, []byte) error, func(string, []byte) error) error {
	return nil
}
func (nopStore) LoadInbound(func(string, []byte) error) error { return nil }
func (nopStore) LoadWills(func(string, []byte) error) error   { return nil }

// TestReplicaStoreRecords: what the store wrapper writes is what a
// rebuild reads: the last record per key, deleted messages and wills
// gone, a session's end purging it all; ids with nothing replicated cost
// no write; RestoreSession gets the records in sequence order.
func TestReplicaStoreRecords(t *testing.T) {
	o := Options{Node: "r1", SessionReplicas: 2, Embedded: EmbeddedOptions{Listen: "127.0.0.1:0", ClientListen: "127.0.0.1:0", Dir: t.TempDir()}}
	c, err := New(o, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	local := newFakeLocal()
	local.restored = make(chan restoredSession, 1)
	c.Start(local)
	t.Cleanup(func() { _ = c.Close() })
	waitReady(t, &testNode{Cluster: c, local: local})
	st := c.state.Load()
	if st.sessions == nil {
		t.Fatal("no session stream")
	}
	s := c.ReplicateStore(nopStore{})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.PutSession("a", []byte("S1")))
	for seq, m := range []string{"M1", "M2", "M3", "M10"} {
		must(s.PutMessage("a", uint64([]int{1, 2, 3, 10}[seq]), []byte(m)))
	}
	must(s.DeleteMessage("a", 2))
	must(s.UpdateMessage("a", 3, []byte("M3b")))
	must(s.PutInbound("a", []byte("I")))
	must(s.PutWill("a", []byte("W")))
	must(s.Sync())
	recs, err := c.rep.readReplica(st, "r1", "a")
	if err != nil || recs == nil {
		t.Fatalf("read: %v, %v", recs, err)
	}
	if string(recs.session) != "S1" || string(recs.inbound) != "I" || string(recs.will) != "W" ||
		!slices.Equal(recs.seqs, []uint64{1, 3, 10}) || len(recs.msgs) != 3 || string(recs.msgs[1]) != "M3b" || string(recs.msgs[2]) != "M10" {
		t.Fatalf("records %+v", recs)
	}
	ok, err := c.replay.restoreFromReplica(st, "r1", "a", true)
	if !ok || err != nil {
		t.Fatalf("restore: %v, %v", ok, err)
	}
	if r := <-local.restored; r.id != "a" || r.session != "S1" || !r.withWill || r.will != "W" || !slices.Equal(r.msgs, []string{"M1", "M3b", "M10"}) {
		t.Errorf("restored %+v", r)
	}

	must(s.DeleteWill("a"))
	must(s.Sync())
	if recs, _ = c.rep.readReplica(st, "r1", "a"); recs == nil || recs.will != nil {
		t.Errorf("will still there: %+v", recs)
	}
	must(s.DeleteSession("a"))
	must(s.PutSession("a", []byte("S2")))
	must(s.Sync())
	if recs, _ = c.rep.readReplica(st, "r1", "a"); recs == nil || string(recs.session) != "S2" || len(recs.msgs) != 0 || recs.inbound != nil {
		t.Errorf("after the session's end and a new one: %+v", recs)
	}
	c.rep.mu.Lock()
	before := c.rep.queued
	c.rep.mu.Unlock()
	must(s.DeleteSession("never"))
	must(s.DeleteMessage("never", 1))
	c.rep.mu.Lock()
	after := c.rep.queued
	c.rep.mu.Unlock()
	if after != before {
		t.Errorf("%d writes for an id with nothing replicated", after-before)
	}
	if recs, err = c.rep.readReplica(st, "r1", "none"); recs != nil || err != nil {
		t.Errorf("an unknown id read %+v, %v", recs, err)
	}
}
