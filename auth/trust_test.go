package auth

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
)

// writeUsers makes a password file of bcrypt users at the given cost.
func writeUsers(t testing.TB, cost int, users map[string]string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "passwd")
	for user, pass := range users {
		if err := SetPassword(file, user, []byte(pass), false, PasswordOptions{Cost: cost}); err != nil {
			t.Fatal(err)
		}
	}
	return file
}

// loginAll runs n logins, conc at a time, and returns the reason codes
// they got, counted.
func loginAll(t *testing.T, a *Auth, n, conc int, login func(i int) error) map[codec.ReasonCode]int {
	t.Helper()
	var mu sync.Mutex
	got := map[codec.ReasonCode]int{}
	var next atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			<-start
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				rc := reasonOf(login(i))
				mu.Lock()
				got[rc]++
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	return got
}

// TestConcurrentCorrectLoginsAdmitted: 30 simultaneous correct logins from
// one address are all admitted. Checks in progress are not failures (the
// old limiter reserved one failure per check in progress and refused 20
// of them with Not Authorized).
func TestConcurrentCorrectLoginsAdmitted(t *testing.T) {
	file := writeUsers(t, 6, map[string]string{"alice": "wonderland", "bob": "builder"})
	a := newAuth(t, Options{PasswordFile: file, AllowAnonymous: AnonymousDeny})
	src := tcpAddr("192.0.2.40:1")
	got := loginAll(t, a, 30, 30, func(i int) error {
		return a.Authenticate(fmt.Sprint("c", i), "alice", []byte("wonderland"), src, "tcp", "")
	})
	if got[codec.Success] != 30 {
		t.Errorf("30 simultaneous correct logins from one address: %v, want 30 successes", got)
	}
	if st := a.Stats(); st.LoginFailures != 0 || st.LockedOut != 0 {
		t.Errorf("correct logins counted as failures: %+v", st)
	}
}

// TestLoginStormOneHashPerUser: a reconnect storm of a fleet behind one
// address, two users, 200 at a time: every login is admitted and each
// user's password hash is checked once; the rest come from the login
// cache (or wait for the check in flight).
func TestLoginStormOneHashPerUser(t *testing.T) {
	file := writeUsers(t, 6, map[string]string{"alice": "wonderland", "bob": "builder"})
	a := newAuth(t, Options{PasswordFile: file, AllowAnonymous: AnonymousDeny})
	var verified atomic.Int64
	a.verify = func(h hasher, pw []byte) bool { verified.Add(1); return h.verify(pw) }
	src := tcpAddr("192.0.2.41:1")
	const n = 3000
	got := loginAll(t, a, n, 200, func(i int) error {
		user, pass := "alice", "wonderland"
		if i%2 == 1 {
			user, pass = "bob", "builder"
		}
		return a.Authenticate(fmt.Sprint("dev-", i), user, []byte(pass), src, "tcp", "")
	})
	if got[codec.Success] != n {
		t.Fatalf("storm: %v, want %d successes", got, n)
	}
	st := a.Stats()
	if verified.Load() != 2 || st.HashChecks != 2 || st.LoginCacheHits != n-2 || st.LoginsCached != 2 {
		t.Errorf("%d hashes verified (stats %+v); want one per user, 2", verified.Load(), st)
	}
}

// TestLoginCache: what the cache admits and what it never does.
func TestLoginCache(t *testing.T) {
	clk := newClock()
	file := writeUsers(t, 4, map[string]string{"alice": "wonderland", "bob": "builder"})
	a := newAuth(t, Options{PasswordFile: file, AllowAnonymous: AnonymousDeny, now: clk.now, LoginCacheTTL: time.Minute,
		Limits: Limits{MaxFailedLogins: 3}})
	var verified atomic.Int64
	a.verify = func(h hasher, pw []byte) bool { verified.Add(1); return h.verify(pw) }
	src := tcpAddr("192.0.2.42:1")
	login := func(user, pass string, addr net.Addr) codec.ReasonCode {
		t.Helper()
		return reasonOf(a.Authenticate("c-"+user, user, []byte(pass), addr, "tcp", ""))
	}
	step := func(what string, got, want codec.ReasonCode, hashes int64) {
		t.Helper()
		if got != want || verified.Load() != hashes {
			t.Errorf("%s: %v after %d hash checks, want %v after %d", what, got, verified.Load(), want, hashes)
		}
	}
	step("first login", login("alice", "wonderland", src), codec.Success, 1)
	step("cached login", login("alice", "wonderland", src), codec.Success, 1)
	step("wrong password", login("alice", "wonderlan", src), codec.BadUserNameOrPassword, 2)
	step("wrong password again", login("alice", "wonderlan", src), codec.BadUserNameOrPassword, 3)
	step("another user's password", login("bob", "wonderland", src), codec.BadUserNameOrPassword, 4)
	step("locked out, though cached", login("alice", "wonderland", src), codec.NotAuthorized, 4)
	other := tcpAddr("192.0.2.43:1")
	step("cached from another address", login("alice", "wonderland", other), codec.Success, 4)
	if err := a.Ban(Ban{Kind: BanUsername, Value: "alice"}); err != nil {
		t.Fatal(err)
	}
	step("banned, though cached", login("alice", "wonderland", other), codec.Banned, 4)
	a.Unban(BanUsername, "alice")
	clk.advance(time.Minute)
	step("expired", login("alice", "wonderland", other), codec.Success, 5)
	// A reload empties the cache, and a changed password is needed at once.
	if err := SetPassword(file, "alice", []byte("looking-glass"), false, PasswordOptions{Cost: 4}); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	step("old password after the reload", login("alice", "wonderland", other), codec.BadUserNameOrPassword, 6)
	step("new password", login("alice", "looking-glass", other), codec.Success, 7)
	step("new password cached", login("alice", "looking-glass", other), codec.Success, 7)

	off := newAuth(t, Options{PasswordFile: file, AllowAnonymous: AnonymousDeny, LoginCacheTTL: -1})
	var offVerified atomic.Int64
	off.verify = func(h hasher, pw []byte) bool { offVerified.Add(1); return h.verify(pw) }
	for range 3 {
		if err := off.Authenticate("c", "alice", []byte("looking-glass"), src, "tcp", ""); err != nil {
			t.Fatal(err)
		}
	}
	if offVerified.Load() != 3 || off.Stats().LoginsCached != 0 {
		t.Errorf("cache off: %d hash checks for 3 logins, want 3", offVerified.Load())
	}
}

// TestHashQueueFair: while 30 addresses each have a backlog of wrong
// logins waiting for the hash, a login from another address gets the next
// free check: it finishes within about two check times, not after the
// backlog (the old global semaphore served it after most of the queue).
func TestHashQueueFair(t *testing.T) {
	const checkTime = 20 * time.Millisecond
	file := writeUsers(t, 4, map[string]string{"alice": "wonderland"})
	a := newAuth(t, Options{PasswordFile: file, AllowAnonymous: AnonymousDeny,
		Limits: Limits{MaxHashes: 2, MaxFailedLogins: 3, HashWait: 30 * time.Second}})
	// A check takes checkTime and no CPU, so the test times the queue,
	// not a loaded machine.
	var checks atomic.Int64
	a.verify = func(_ hasher, pw []byte) bool {
		checks.Add(1)
		time.Sleep(checkTime)
		return string(pw) == "wonderland"
	}
	const sources, each = 30, 5
	var wg sync.WaitGroup
	for s := range sources {
		addr := tcpAddr(fmt.Sprintf("198.51.100.%d:1", s+1))
		for range each {
			wg.Go(func() { _ = a.Authenticate("bot", "alice", []byte("guess"), addr, "tcp", "") })
		}
	}
	t.Cleanup(wg.Wait)
	// Wait until the backlog is queued (a few checks may have ended already).
	deadline := time.Now().Add(5 * time.Second)
	for a.Stats().HashWaiting < sources*each-20 {
		if time.Now().After(deadline) {
			t.Fatalf("backlog not queued: %d waiting", a.Stats().HashWaiting)
		}
		time.Sleep(time.Millisecond)
	}
	before := checks.Load()
	start := time.Now()
	if err := a.Authenticate("good", "alice", []byte("wonderland"), tcpAddr("203.0.113.9:1"), "tcp", ""); err != nil {
		t.Fatalf("legitimate login: %v", err)
	}
	took := time.Since(start)
	// Its own check, and at most one more per slot that started before it.
	if started := checks.Load() - before; started > int64(1+a.opts.Limits.MaxHashes) {
		t.Errorf("%d checks started before the legitimate login finished; want at most %d", started, 1+a.opts.Limits.MaxHashes)
	}
	t.Logf("legitimate login took %v behind a backlog of %d logins from %d addresses", took, sources*each, sources)
	if took > 5*checkTime {
		t.Errorf("legitimate login took %v, want about 2 check times (%v)", took, 2*checkTime)
	}
	wg.Wait()
	if st := a.Stats(); st.LoginFailures != sources*3 || st.LockedOut != sources*(each-3) {
		t.Errorf("attackers: %d failures and %d lockouts, want %d and %d (stats %+v)",
			st.LoginFailures, st.LockedOut, sources*3, sources*(each-3), st)
	}
}

// TestHashQueueBounds: a source's queue and the whole queue are bounded,
// a wait is bounded, and a lockout refuses the waiting logins of its
// source without a check.
func TestHashQueueBounds(t *testing.T) {
	k1, k2, k3 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")
	var mu sync.Mutex
	locked := map[netip.Addr]bool{}
	q := newHashQueue(1, 2, 3, func(k netip.Addr) (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		return 1, locked[k]
	})
	if q.acquire(k1, time.Second) != turnRun {
		t.Fatal("first login waits with a free slot")
	}
	turns := make(chan hashTurn, 10)
	wait := func(k netip.Addr, d time.Duration) { go func() { turns <- q.acquire(k, d) }() }
	waitQueued := func(n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for q.waiting() != n {
			if time.Now().After(deadline) {
				t.Fatalf("%d waiting, want %d", q.waiting(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	wait(k2, time.Minute)
	wait(k2, time.Minute)
	waitQueued(2)
	if got := q.acquire(k2, time.Minute); got != turnBusy {
		t.Errorf("third login of a source with 2 waiting: %v, want busy", got)
	}
	wait(k3, 20*time.Millisecond)
	waitQueued(3)
	if got := q.acquire(k1, time.Minute); got != turnBusy {
		t.Errorf("login with 3 waiting in all: %v, want busy", got)
	}
	if got := <-turns; got != turnBusy {
		t.Errorf("a wait that ran out: %v, want busy", got)
	}
	mu.Lock()
	locked[k2] = true
	mu.Unlock()
	q.release(k1)
	for range 2 {
		if got := <-turns; got != turnLocked {
			t.Errorf("login of a source locked out while waiting: %v, want locked", got)
		}
	}
	if q.waiting() != 0 || q.free != 1 || len(q.sources) != 0 || len(q.ready) != 0 {
		t.Errorf("queue not empty: %d waiting, %d free, %d sources", q.waiting(), q.free, len(q.sources))
	}
}

// TestFlappingIdentity: flapping is counted and banned per identity, never
// per client id alone: a client reusing a victim's client id, under its
// own user name or from its own address, gets itself banned, not the
// victim, and the victim's ban does not block it either. Taking the
// victim's connection over does not count against the victim.
func TestFlappingIdentity(t *testing.T) {
	clk := newClock()
	file := writeUsers(t, 4, map[string]string{"alice": "wonderland", "bob": "builder"})
	a := newAuth(t, Options{PasswordFile: file, AllowAnonymous: AnonymousAllow, now: clk.now,
		Limits: Limits{FlapMax: 15, FlapWindow: time.Minute, FlapBan: 5 * time.Minute}})
	victimAddr, attackerAddr := tcpAddr("192.0.2.10:1"), tcpAddr("192.0.2.99:1")
	connect := func(id, user, pass string, addr net.Addr) codec.ReasonCode {
		t.Helper()
		return reasonOf(a.Authenticate(id, user, []byte(pass), addr, "tcp", ""))
	}
	// bob takes alice's client id over and over, and drops uncleanly.
	if rc := connect("sensor-1", "alice", "wonderland", victimAddr); rc != codec.Success {
		t.Fatal(rc)
	}
	for range 16 {
		if rc := connect("sensor-1", "bob", "builder", attackerAddr); rc != codec.Success {
			t.Fatalf("bob: %v", rc)
		}
		a.ClientDisconnected("sensor-1", "alice", victimAddr, "tcp", time.Second, "taken_over")
		a.ClientDisconnected("sensor-1", "bob", attackerAddr, "tcp", time.Second, "peer_gone")
	}
	if rc := connect("sensor-1", "alice", "wonderland", victimAddr); rc != codec.Success {
		t.Errorf("victim after 16 drops of its client id by another user: %v, want Success", rc)
	}
	if rc := connect("sensor-1", "bob", "builder", victimAddr); rc != codec.Banned {
		t.Errorf("the flapping identity: %v, want Banned", rc)
	}
	// Anonymous clients are told apart by address.
	for range 16 {
		a.ClientDisconnected("cam-1", "", attackerAddr, "tcp", time.Second, "keepalive_timeout")
	}
	if rc := connect("cam-1", "", "", victimAddr); rc != codec.Success {
		t.Errorf("anonymous victim from its own address: %v, want Success", rc)
	}
	if rc := connect("cam-1", "", "", attackerAddr); rc != codec.Banned {
		t.Errorf("anonymous flapper: %v, want Banned", rc)
	}
	bans := a.Bans()
	want := []Ban{
		{Kind: BanClientAddress, Value: "cam-1@192.0.2.99", Reason: "flapping"},
		{Kind: BanClientUser, Value: "sensor-1@bob", Reason: "flapping"},
	}
	if len(bans) != len(want) {
		t.Fatalf("Bans() = %+v, want %+v", bans, want)
	}
	for i, b := range bans {
		if b.Kind != want[i].Kind || b.Value != want[i].Value || b.Reason != "flapping" || !b.Until.Equal(clk.now().Add(5*time.Minute)) {
			t.Errorf("ban %d = %+v, want %+v until in 5m", i, b, want[i])
		}
	}
	// The same identity taking itself over (a device reconnecting before
	// its old connection was noticed dead) does flap.
	for range 16 {
		if rc := connect("sensor-2", "alice", "wonderland", victimAddr); rc != codec.Success {
			t.Fatalf("alice: %v", rc)
		}
		a.ClientDisconnected("sensor-2", "alice", victimAddr, "tcp", time.Second, "taken_over")
	}
	if rc := connect("sensor-2", "alice", "wonderland", victimAddr); rc != codec.Banned {
		t.Errorf("an identity taking itself over 16 times: %v, want Banned", rc)
	}
	// The operator lifts a flapping ban by the value listed.
	if !a.Unban(BanClientUser, "sensor-1@bob") || a.Unban(BanClientUser, "sensor-1@bob") {
		t.Error("Unban of the listed flapping ban")
	}
	if rc := connect("sensor-1", "bob", "builder", attackerAddr); rc != codec.Success {
		t.Errorf("after Unban: %v", rc)
	}
	if err := a.Ban(Ban{Kind: BanClientUser, Value: "x@y"}); err == nil {
		t.Error("Ban of an identity kind accepted; they are set by flap detection only")
	}
}
