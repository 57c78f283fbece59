package auth

import (
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
)

// memBans is a BanStore in memory that outlives the Auths using it, as a
// store outlives a restart.
type memBans struct {
	mu   sync.Mutex
	m    map[string][]byte
	fail error // returned by PutBan and DeleteBan when set
}

func (s *memBans) LoadBans(fn func(key, rec []byte) error) error {
	s.mu.Lock()
	m := maps.Clone(s.m)
	s.mu.Unlock()
	for k, v := range m {
		if err := fn([]byte(k), v); err != nil {
			return err
		}
	}
	return nil
}

func (s *memBans) PutBan(key, rec []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	s.m[string(key)] = append([]byte(nil), rec...)
	return nil
}

func (s *memBans) DeleteBan(key []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	delete(s.m, string(key))
	return nil
}

func (s *memBans) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// TestBansSurviveRestart: bans set through Ban are in force again in a new
// Auth over the same BanStore, with their expiry; an expired one is gone
// and deleted from the store, a lifted one too; flapping bans stay in
// memory; a record that cannot be read is skipped.
func TestBansSurviveRestart(t *testing.T) {
	clk := newClock()
	st := &memBans{}
	start := func() *Auth {
		t.Helper()
		return newAuth(t, Options{AllowAnonymous: AnonymousAllow, now: clk.now, BanStore: st, Limits: Limits{FlapMax: 1}})
	}
	a := start()
	for _, b := range []Ban{
		{Kind: BanClientID, Value: "forever", Reason: "abuse"},
		{Kind: BanUsername, Value: "mallory", Until: clk.now().Add(time.Hour)},
		{Kind: BanAddress, Value: "::ffff:203.0.113.7", Until: clk.now().Add(time.Minute)},
		{Kind: BanAddress, Value: "198.51.100.0/24"},
	} {
		if err := a.Ban(b); err != nil {
			t.Fatal(err)
		}
	}
	if !a.Unban(BanAddress, "198.51.100.0/24") {
		t.Fatal("Unban")
	}
	a.ClientDisconnected("flappy", "", remote, "tcp", time.Second, "peer_gone")
	a.ClientDisconnected("flappy", "", remote, "tcp", time.Second, "peer_gone")
	if len(a.Bans()) != 4 || st.len() != 3 {
		t.Fatalf("%d bans in force, %d stored; want 4 (one flapping) and 3", len(a.Bans()), st.len())
	}
	_ = a.Close()

	st.m["junk"] = []byte("{not json")
	a = start()
	refused := func(a *Auth, client, user, addr string) bool {
		t.Helper()
		return reasonOf(a.Authenticate(client, user, nil, tcpAddr(addr), "tcp", "")) == codec.Banned
	}
	if !refused(a, "forever", "", "192.0.2.1:1") || !refused(a, "c", "mallory", "192.0.2.1:1") ||
		!refused(a, "c", "", "203.0.113.7:1") {
		t.Errorf("after a restart the stored bans are not all in force: %+v", a.Bans())
	}
	if refused(a, "c", "", "198.51.100.1:1") || refused(a, "flappy", "", remote.String()) {
		t.Errorf("a lifted or a flapping ban came back: %+v", a.Bans())
	}
	for _, b := range a.Bans() {
		if b.Kind == BanUsername && !b.Until.Equal(clk.now().Add(time.Hour)) {
			t.Errorf("expiry not kept: %+v", b)
		}
	}
	_ = a.Close()

	// An expired ban is dropped on load and deleted from the store.
	clk.advance(2 * time.Minute)
	a = start()
	if refused(a, "c", "", "203.0.113.7:1") || len(a.Bans()) != 2 {
		t.Errorf("expired ban in force after a restart: %+v", a.Bans())
	}
	if _, ok := st.m[string(banKey(BanAddress, "203.0.113.7"))]; ok || st.len() != 3 { // two bans and the junk
		t.Errorf("store holds %d records; the expired ban was not deleted", st.len())
	}
	// Expiring while running: swept from memory and from the store.
	clk.advance(time.Hour)
	a.unstoreBans(a.bans.sweep(clk.now())...)
	if st.len() != 2 {
		t.Errorf("store holds %d records after the sweep, want the permanent ban and the junk", st.len())
	}

	// A store that fails leaves the ban in force (and says so in the log).
	st.fail = errors.New("disk on fire")
	if err := a.Ban(Ban{Kind: BanClientID, Value: "still"}); err != nil || !refused(a, "still", "", "192.0.2.1:1") {
		t.Errorf("ban with a failing store: %v", err)
	}
}
