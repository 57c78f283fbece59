package store_test

import (
	"net"
	"testing"
	"time"

	"github.com/xmq-io/xmq/auth"
	"github.com/xmq-io/xmq/store"
)

var _ auth.BanStore = (*store.Store)(nil)

// TestBansSurviveReopen: a ban set through auth on a Pebble store is in
// force after the store and auth are closed and opened again; one that
// expired meanwhile is gone, from auth and from the store; the bans do
// not disturb core's records.
func TestBansSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	st := openPebble(t, dir, store.Options{})
	must(t, st.PutSession("s1", []byte("session")))
	a, err := auth.New(auth.Options{AllowAnonymous: auth.AnonymousAllow, ReloadInterval: -1, BanStore: st})
	must(t, err)
	must(t, a.Ban(auth.Ban{Kind: auth.BanClientID, Value: "evil", Reason: "spam"}))
	must(t, a.Ban(auth.Ban{Kind: auth.BanAddress, Value: "203.0.113.0/24", Until: time.Now().Add(time.Hour)}))
	must(t, a.Ban(auth.Ban{Kind: auth.BanUsername, Value: "brief", Until: time.Now().Add(300 * time.Millisecond)}))
	must(t, a.Close())
	must(t, st.Close())
	time.Sleep(400 * time.Millisecond) // the brief ban expires while the broker is down

	st = openPebble(t, dir, store.Options{})
	a, err = auth.New(auth.Options{AllowAnonymous: auth.AnonymousAllow, ReloadInterval: -1, BanStore: st})
	must(t, err)
	t.Cleanup(func() { _ = a.Close() })
	addr := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1}
	if err := a.Authenticate("evil", "", nil, addr, "tcp", ""); err == nil {
		t.Error("client id ban lost in the restart")
	}
	if err := a.Authenticate("c", "", nil, &net.TCPAddr{IP: net.IPv4(203, 0, 113, 9), Port: 1}, "tcp", ""); err == nil {
		t.Error("address ban lost in the restart")
	}
	if err := a.Authenticate("c", "brief", nil, addr, "tcp", ""); err != nil {
		t.Errorf("expired ban in force after the restart: %v", err)
	}
	bans := a.Bans()
	if len(bans) != 2 || bans[0].Value != "evil" || bans[0].Reason != "spam" || bans[1].Until.IsZero() {
		t.Errorf("Bans() = %+v", bans)
	}
	n := 0
	must(t, st.LoadBans(func(key, rec []byte) error { n++; return nil }))
	ks, err := st.Check(func(err error) { t.Errorf("Check: %v", err) })
	if n != 2 || err != nil || ks.Bans != 2 || ks.Sessions != 1 {
		t.Errorf("store holds %d bans (Check %+v, %v); want 2 and the session", n, ks, err)
	}
	if !a.Unban(auth.BanAddress, "203.0.113.0/24") {
		t.Fatal("Unban")
	}
	n = 0
	must(t, st.LoadBans(func(key, rec []byte) error { n++; return nil }))
	if n != 1 {
		t.Errorf("%d bans stored after Unban, want 1", n)
	}
}
