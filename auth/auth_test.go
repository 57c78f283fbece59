package auth

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// newAuth builds an Auth closed when the test ends. Unless the test says
// otherwise, files are not polled.
func newAuth(t *testing.T, opts Options) *Auth {
	t.Helper()
	if opts.ReloadInterval == 0 {
		opts.ReloadInterval = -1
	}
	a, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func tcpAddr(s string) net.Addr {
	ap, err := net.ResolveTCPAddr("tcp", s)
	if err != nil {
		panic(err)
	}
	return ap
}

type unixAddr struct{}

func (unixAddr) Network() string { return "pipe" }
func (unixAddr) String() string  { return "pipe" }

// writePasswd makes a password file with users alice (wonderland) and bob
// (builder), bcrypt cost 4, plus the mosquitto fixture's users.
func writePasswd(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "passwd")
	fixture, err := os.ReadFile("testdata/mosquitto.passwd")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, fixture, 0o600); err != nil {
		t.Fatal(err)
	}
	for user, pass := range map[string]string{"dave": "wonderland", "erin": "builder"} {
		if err := SetPassword(file, user, []byte(pass), false, PasswordOptions{Cost: 4}); err != nil {
			t.Fatal(err)
		}
	}
	return file
}

func TestAuthenticate(t *testing.T) {
	file := writePasswd(t)
	a := newAuth(t, Options{
		PasswordFile:      file,
		ListenerAnonymous: map[string]Anonymous{"open": AnonymousAllow, "closed": AnonymousDeny},
		CertListeners:     []string{"mtls"},
	})
	noPw := newAuth(t, Options{})
	anyone := newAuth(t, Options{AllowAnonymous: AnonymousAllow})
	local, far := tcpAddr("127.0.0.1:5000"), tcpAddr("198.51.100.7:5000")
	tests := []struct {
		name     string
		a        *Auth
		user     string
		password string
		remote   net.Addr
		listener string
		want     codec.ReasonCode
		origin   string // a foreign web page's origin
	}{
		{"mosquitto $7$", a, "alice", "correct horse battery staple", far, "tcp", codec.Success, ""},
		{"mosquitto $6$", a, "carol", "pa:ss w0rd", far, "tcp", codec.Success, ""},
		{"bcrypt", a, "dave", "wonderland", far, "tcp", codec.Success, ""},
		{"wrong password", a, "dave", "Wonderland", far, "tcp", codec.BadUserNameOrPassword, ""},
		{"no password", a, "erin", "", far, "tcp", codec.BadUserNameOrPassword, ""},
		{"unknown user", a, "mallory", "wonderland", far, "tcp", codec.BadUserNameOrPassword, ""},
		{"anonymous from loopback", a, "", "", local, "tcp", codec.Success, ""},
		{"anonymous from IPv6 loopback", a, "", "", tcpAddr("[::1]:5000"), "tcp", codec.Success, ""},
		{"anonymous from IPv4-mapped loopback", a, "", "", &net.TCPAddr{IP: net.ParseIP("::ffff:127.0.0.1")}, "tcp", codec.Success, ""},
		{"anonymous from afar", a, "", "", far, "tcp", codec.NotAuthorized, ""},
		{"anonymous in process", a, "", "", unixAddr{}, "tcp", codec.Success, ""},
		{"anonymous without address", a, "", "", nil, "tcp", codec.NotAuthorized, ""},
		{"anonymous on an open listener", a, "", "", far, "open", codec.Success, ""},
		{"anonymous on a closed listener", a, "", "", local, "closed", codec.NotAuthorized, ""},
		{"users still checked on an open listener", a, "dave", "x", far, "open", codec.BadUserNameOrPassword, ""},
		{"unknown user from loopback", a, "mallory", "", local, "tcp", codec.BadUserNameOrPassword, ""},
		{"certificate identity", a, "device-42", "", far, "mtls", codec.Success, ""},
		{"no identity on the mtls listener", a, "", "", far, "mtls", codec.NotAuthorized, ""},
		{"no password file, loopback", noPw, "anyname", "x", local, "tcp", codec.Success, ""},
		{"no password file, afar", noPw, "anyname", "x", far, "tcp", codec.NotAuthorized, ""},
		{"allow_anonymous true", anyone, "", "", far, "tcp", codec.Success, ""},
		{"anonymous foreign web page on loopback", a, "", "", local, "tcp", codec.NotAuthorized, "http://evil.example"},
		{"no password file, foreign web page on loopback", noPw, "anyname", "pw1", local, "tcp", codec.NotAuthorized, "http://evil.example"},
		{"foreign web page with credentials", a, "dave", "wonderland", local, "tcp", codec.Success, "http://evil.example"},
		{"foreign web page, allow_anonymous true", anyone, "", "", local, "tcp", codec.Success, "http://evil.example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.a.Authenticate("client-"+tt.name, tt.user, []byte(tt.password), tt.remote, tt.listener, tt.origin)
			if got := reasonOf(err); got != tt.want || (err == nil) != (tt.want == codec.Success) {
				t.Fatalf("Authenticate = %v (%v), want %v", got, err, tt.want)
			}
			if err != nil && tt.password != "" && strings.Contains(err.Error(), tt.password) {
				t.Errorf("error %q holds the password", err)
			}
		})
	}
	st := a.Stats()
	if st.Users != 5 || st.Logins != 10 || st.LoginFailures != 5 || st.AnonymousRefused != 5 {
		t.Errorf("stats %+v", st)
	}
}

// TestUnknownUserCostsTheSame checks that an unknown user's attempt takes
// about as long as a wrong password: both check one hash of the same cost.
func TestUnknownUserCostsTheSame(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	file := filepath.Join(t.TempDir(), "passwd")
	if err := SetPassword(file, "u", []byte("p"), false, PasswordOptions{Cost: 6}); err != nil {
		t.Fatal(err)
	}
	a := newAuth(t, Options{PasswordFile: file, Limits: Limits{MaxFailedLogins: -1}})
	timeIt := func(user string) time.Duration {
		best := time.Hour
		for range 5 {
			start := time.Now()
			_ = a.Authenticate("c", user, []byte("wrong"), remote, "tcp", "")
			best = min(best, time.Since(start))
		}
		return best
	}
	known, unknown := timeIt("u"), timeIt("nobody")
	if ratio := float64(unknown) / float64(known); ratio < 0.5 || ratio > 2 {
		t.Errorf("unknown user %v, wrong password %v: not the same cost", unknown, known)
	}
}

func TestBans(t *testing.T) {
	clk := newClock()
	a := newAuth(t, Options{AllowAnonymous: AnonymousAllow, now: clk.now})
	until := clk.now().Add(time.Minute)
	for _, b := range []Ban{
		{Kind: BanClientID, Value: "bad-client", Until: until},
		{Kind: BanUsername, Value: "bad-user"},
		{Kind: BanAddress, Value: "203.0.113.0/24", Reason: "abuse"},
		{Kind: BanAddress, Value: "2001:db8::/32"},
		{Kind: BanAddress, Value: "::ffff:198.51.100.9"},
	} {
		if err := a.Ban(b); err != nil {
			t.Fatalf("Ban(%+v): %v", b, err)
		}
	}
	for _, b := range []Ban{{Kind: "address", Value: "1.2.3.4"}, {Kind: BanAddress, Value: "1.2.3.4/40"}, {Kind: BanClientID}} {
		if err := a.Ban(b); !errors.Is(err, ErrBadBan) {
			t.Errorf("Ban(%+v) = %v, want ErrBadBan", b, err)
		}
	}
	tests := []struct {
		name, client, user, addr string
		want                     codec.ReasonCode
	}{
		{"client id", "bad-client", "", "192.0.2.1:1", codec.Banned},
		{"user name", "c", "bad-user", "192.0.2.1:1", codec.Banned},
		{"CIDR", "c", "", "203.0.113.77:1", codec.Banned},
		{"outside CIDR", "c", "", "203.0.114.1:1", codec.Success},
		{"IPv6 prefix", "c", "", "[2001:db8:1::5]:1", codec.Banned},
		{"mapped address banned as IPv4", "c", "", "198.51.100.9:1", codec.Banned},
		{"clean", "c", "", "192.0.2.1:1", codec.Success},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Without a password file a user name is admitted like an anonymous client.
			err := a.Authenticate(tt.client, tt.user, nil, tcpAddr(tt.addr), "tcp", "")
			if got := reasonOf(err); got != tt.want {
				t.Errorf("Authenticate = %v (%v), want %v", got, err, tt.want)
			}
		})
	}
	bans := a.Bans()
	if len(bans) != 5 || bans[0].Kind != BanClientID || bans[1].Value != "198.51.100.9" || bans[4].Value != "bad-user" {
		t.Errorf("Bans() = %+v", bans)
	}
	clk.advance(time.Minute) // the client id ban expires
	if err := a.Authenticate("bad-client", "", nil, remote, "tcp", ""); err != nil {
		t.Errorf("expired ban still refuses: %v", err)
	}
	if !a.Unban(BanAddress, "203.0.113.0/24") || a.Unban(BanAddress, "203.0.113.0/24") {
		t.Error("Unban reported wrongly")
	}
	if err := a.Authenticate("c", "", nil, tcpAddr("203.0.113.77:1"), "tcp", ""); err != nil {
		t.Errorf("after Unban: %v", err)
	}
	if got := a.Stats(); got.Bans != 3 || got.Banned != 5 {
		t.Errorf("stats %+v, want 3 bans in force and 5 refusals", got)
	}
	a.bans.sweep(clk.now())
	if len(a.bans.clientIDs) != 0 {
		t.Error("sweep kept an expired ban")
	}
}

func TestFailedLoginLimit(t *testing.T) {
	clk := newClock()
	file := writePasswd(t)
	a := newAuth(t, Options{PasswordFile: file, now: clk.now, Limits: Limits{MaxFailedLogins: 3, FailedLoginWindow: time.Minute, FailedLoginBan: 5 * time.Minute}})
	attacker, other := tcpAddr("192.0.2.66:1"), tcpAddr("192.0.2.67:1")
	login := func(addr net.Addr, pass string) codec.ReasonCode {
		return reasonOf(a.Authenticate("c", "dave", []byte(pass), addr, "tcp", ""))
	}
	for i := range 3 {
		if got := login(attacker, "guess"); got != codec.BadUserNameOrPassword {
			t.Fatalf("attempt %d: %v", i+1, got)
		}
	}
	if got := login(attacker, "wonderland"); got != codec.NotAuthorized {
		t.Fatalf("locked out source with the right password: %v, want Not Authorized", got)
	}
	if got := login(other, "wonderland"); got != codec.Success {
		t.Fatalf("other source: %v", got)
	}
	// IPv6 sources count per /64.
	for i := range 3 {
		login(tcpAddr(fmt.Sprintf("[2001:db8::%d]:1", i+1)), "guess")
	}
	if got := login(tcpAddr("[2001:db8::ffff]:1"), "wonderland"); got != codec.NotAuthorized {
		t.Errorf("same /64: %v, want locked out", got)
	}
	clk.advance(5*time.Minute + time.Second)
	if got := login(attacker, "wonderland"); got != codec.Success {
		t.Fatalf("after the lockout: %v", got)
	}
	// Failures spread wider than the window do not add up.
	for range 2 {
		login(attacker, "guess")
	}
	clk.advance(61 * time.Second)
	for range 2 {
		login(attacker, "guess")
	}
	if got := login(attacker, "wonderland"); got != codec.Success {
		t.Errorf("failures across windows locked out: %v", got)
	}
	if st := a.Stats(); st.LockedOut != 2 || st.LoginFailures != 10 {
		t.Errorf("stats %+v", st)
	}
}

// TestBruteForce: 10,000 bad logins from one address, 64 at a time, check
// at most MaxFailedLogins hashes and are refused quickly, while another
// client logs in meanwhile. The hashes are bcrypt at cost 6 (the default
// 10 takes seconds under the race detector). The attacker's logins
// beyond its checks in progress wait for them (they are not failures
// yet), and a check under the race detector on a busy machine can take a
// second: HashWait is long, so that none is refused as Server Busy.
func TestBruteForce(t *testing.T) {
	file := filepath.Join(t.TempDir(), "passwd")
	if err := SetPassword(file, "victim", []byte("correct horse"), false, PasswordOptions{Cost: 6}); err != nil {
		t.Fatal(err)
	}
	a := newAuth(t, Options{PasswordFile: file, Limits: Limits{HashWait: time.Minute}})
	attacker := tcpAddr("192.0.2.66:1")
	const attempts, workers = 10000, 64
	var next, refusedFast atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= attempts {
				err := a.Authenticate("bot", "victim", []byte("guess"), attacker, "tcp", "")
				switch reasonOf(err) {
				case codec.NotAuthorized:
					refusedFast.Add(1)
				case codec.BadUserNameOrPassword:
				default:
					t.Errorf("attacker got %v", err)
				}
			}
		})
	}
	legit := make(chan error, 1)
	go func() {
		legit <- a.Authenticate("good", "victim", []byte("correct horse"), tcpAddr("192.0.2.10:1"), "tcp", "")
	}()
	wg.Wait()
	took := time.Since(start)
	if err := <-legit; err != nil {
		t.Errorf("the legitimate client was refused: %v", err)
	}
	st := a.Stats()
	if st.LoginFailures != DefaultMaxFailedLogins || refusedFast.Load() != attempts-DefaultMaxFailedLogins {
		t.Errorf("%d hashes checked for the attacker, %d refused without one; want %d and %d",
			st.LoginFailures, refusedFast.Load(), DefaultMaxFailedLogins, attempts-DefaultMaxFailedLogins)
	}
	t.Logf("10,000 bad logins refused in %v (%d hash checks)", took, st.LoginFailures)
	if took > 20*time.Second {
		t.Errorf("took %v", took)
	}
}

func TestConnectionRate(t *testing.T) {
	clk := newClock()
	a := newAuth(t, Options{AllowAnonymous: AnonymousAllow, now: clk.now, Limits: Limits{ConnectionRate: 2, ConnectionBurst: 3}})
	src := tcpAddr("192.0.2.5:1")
	got := func() codec.ReasonCode { return reasonOf(a.Authenticate("c", "", nil, src, "tcp", "")) }
	for i := range 3 {
		if rc := got(); rc != codec.Success {
			t.Fatalf("burst connection %d: %v", i+1, rc)
		}
	}
	if rc := got(); rc != codec.ConnectionRateExceeded {
		t.Fatalf("over the burst: %v", rc)
	}
	if rc := reasonOf(a.Authenticate("c", "", nil, tcpAddr("192.0.2.6:1"), "tcp", "")); rc != codec.Success {
		t.Errorf("another source: %v", rc)
	}
	clk.advance(500 * time.Millisecond) // one token back at 2/s
	if rc := got(); rc != codec.Success {
		t.Errorf("after a token refilled: %v", rc)
	}
	if rc := got(); rc != codec.ConnectionRateExceeded {
		t.Errorf("token spent: %v", rc)
	}
	if st := a.Stats(); st.RateLimited != 2 {
		t.Errorf("RateLimited = %d", st.RateLimited)
	}
}

func TestFlapping(t *testing.T) {
	clk := newClock()
	a := newAuth(t, Options{AllowAnonymous: AnonymousAllow, now: clk.now, Limits: Limits{FlapMax: 3, FlapWindow: time.Minute, FlapBan: 10 * time.Minute}})
	drop := func(id, reason string) { a.ClientDisconnected(id, "", remote, "tcp", time.Second, reason) }
	for range 10 {
		drop("tidy", "normal") // clean disconnects never count
		drop("tidy", "server_shutdown")
	}
	for range 3 {
		drop("flappy", "keepalive_timeout")
	}
	if err := a.Authenticate("flappy", "", nil, remote, "tcp", ""); err != nil {
		t.Fatalf("3 drops (the limit) banned: %v", err)
	}
	drop("flappy", "taken_over")
	if rc := reasonOf(a.Authenticate("flappy", "", nil, remote, "tcp", "")); rc != codec.Banned {
		t.Fatalf("4th drop: %v, want Banned", rc)
	}
	if err := a.Authenticate("tidy", "", nil, remote, "tcp", ""); err != nil {
		t.Errorf("tidy client: %v", err)
	}
	if bans := a.Bans(); len(bans) != 1 || bans[0].Reason != "flapping" || !bans[0].Until.Equal(clk.now().Add(10*time.Minute)) {
		t.Errorf("Bans() = %+v", bans)
	}
	// Drops spread over more than the window do not add up.
	for range 3 {
		drop("slow", "peer_gone")
	}
	clk.advance(61 * time.Second)
	drop("slow", "peer_gone")
	if err := a.Authenticate("slow", "", nil, remote, "tcp", ""); err != nil {
		t.Errorf("slow flapper banned: %v", err)
	}
	clk.advance(10 * time.Minute)
	if err := a.Authenticate("flappy", "", nil, remote, "tcp", ""); err != nil {
		t.Errorf("flapping ban did not expire: %v", err)
	}
	if st := a.Stats(); st.FlapBans != 1 {
		t.Errorf("FlapBans = %d", st.FlapBans)
	}
}

func TestReload(t *testing.T) {
	dir := t.TempDir()
	pwFile, aclFile := filepath.Join(dir, "passwd"), filepath.Join(dir, "acl")
	if err := SetPassword(pwFile, "u", []byte("old"), false, PasswordOptions{Cost: 4}); err != nil {
		t.Fatal(err)
	}
	write := func(path, body string) {
		t.Helper()
		// Write beside and rename, as editors and xmq passwd do.
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(aclFile, "user u\ntopic write a/#\n")
	a := newAuth(t, Options{PasswordFile: pwFile, ACLFile: aclFile, ReloadInterval: 20 * time.Millisecond})
	if !a.CanPublish("c", "u", "a/1") || a.CanPublish("c", "u", "b/1") {
		t.Fatal("initial rules")
	}
	gen := a.Stats().ACLGeneration

	// A changed ACL file replaces the rules and the cached decisions.
	write(aclFile, "user u\ntopic write b/#\n")
	mqtttest.WaitFor(t, "acl change", func() bool { return a.CanPublish("c", "u", "b/1") })
	if a.CanPublish("c", "u", "a/1") {
		t.Error("a cached decision of the old rules survived the reload")
	}
	if st := a.Stats(); st.ACLGeneration != gen+1 {
		t.Errorf("generation %d, want %d", st.ACLGeneration, gen+1)
	}

	// A changed password file applies to the next login.
	if err := SetPassword(pwFile, "u", []byte("new"), false, PasswordOptions{Cost: 4}); err != nil {
		t.Fatal(err)
	}
	mqtttest.WaitFor(t, "password change", func() bool { return a.Authenticate("c", "u", []byte("new"), remote, "tcp", "") == nil })
	if a.Authenticate("c", "u", []byte("old"), remote, "tcp", "") == nil {
		t.Error("old password still works")
	}

	// A broken file leaves the previous version in force.
	write(aclFile, "user u\ntopic wrte c/#\n")
	time.Sleep(100 * time.Millisecond)
	if !a.CanPublish("c", "u", "b/1") {
		t.Error("a broken ACL file replaced the rules")
	}
	if err := a.Reload(); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("Reload with a broken file = %v", err)
	}
	write(aclFile, "user u\ntopic write c/#\n")
	if err := a.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if !a.CanPublish("c", "u", "c/1") || a.CanPublish("c", "u", "b/1") {
		t.Error("Reload did not apply the new rules")
	}
	if st := a.Stats(); st.ReloadErrors == 0 || st.Reloads < 5 {
		t.Errorf("stats %+v", st)
	}
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("frobnicate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts Options
		err  string
	}{
		{"missing password file", Options{PasswordFile: filepath.Join(dir, "none")}, "no such file"},
		{"bad acl file", Options{ACLFile: bad}, "line 1: not an ACL line"},
		{"bad password file", Options{PasswordFile: bad}, "line 1"},
		{"bad anonymous", Options{AllowAnonymous: "maybe"}, "want true, false or loopback"},
		{"bad listener anonymous", Options{ListenerAnonymous: map[string]Anonymous{"ws": "yes"}}, "listener ws"},
		{"negative window", Options{Limits: Limits{FlapWindow: -time.Second}}, "flap_window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(tt.opts)
			if err == nil {
				a.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("New error = %v, want one containing %q", err, tt.err)
			}
		})
	}
}

// TestFileErrorsQuoteNoForeignContent: a file given as the password file
// or the ACL file that is something else (/etc/shadow, an environment
// file, a token) is refused by line number, with none of its content in
// the error that New, a reload and xmq check-config (CheckFiles) report.
func TestFileErrorsQuoteNoForeignContent(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"shadow": "root:$6$leak1salt$leak1hash:19000:0:99999:7:::\n",
		"env":    "DB_PASSWORD=leak2:x\nAPI_KEY leak3\n",
		"token":  "sk-live-leak4\n",
		"hash7":  "leak5:$7$leak6$YWJj$YWJj\n",
		"plain":  "leak7:leak8\n",
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, err := range []error{CheckFiles(path, ""), CheckFiles("", path)} {
			if err == nil || !strings.Contains(err.Error(), path+": line 1: ") {
				t.Errorf("%s: error %v, want one naming the file and line 1", name, err)
			}
			if err != nil && strings.Contains(err.Error(), "leak") {
				t.Errorf("%s: the error quotes the file: %v", name, err)
			}
		}
	}
}

func TestAuthorizer(t *testing.T) {
	aclFile := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(aclFile, []byte(testACL), 0o600); err != nil {
		t.Fatal(err)
	}
	a := newAuth(t, Options{ACLFile: aclFile, ACLCacheSize: 64})
	// Cached and uncached answers agree, for many topics (the cache evicts).
	for i := range 500 {
		topic := fmt.Sprintf("sensors/%d/x", i%200)
		if i%7 == 0 {
			topic = "sensors/private/" + topic
		}
		want, _ := a.acl.Load().set.canPublish("a1", "alice", topic)
		for range 2 {
			if got := a.CanPublish("a1", "alice", topic); got != want {
				t.Fatalf("CanPublish(%q) = %v, want %v", topic, got, want)
			}
		}
	}
	if n := a.acl.Load().cache.len(); n > 64+cacheShards {
		t.Errorf("cache holds %d decisions, bound is about 64", n)
	}
	// The topic may alias a buffer the caller reuses.
	buf := []byte("sensors/1/x")
	a.CanPublish("a1", "alice", unsafeString(buf))
	copy(buf, "sensors/private/x"[:len(buf)])
	if !a.CanPublish("a1", "alice", "sensors/1/x") {
		t.Error("the cache kept the caller's buffer")
	}
	if !a.CanSubscribe("d", "", "#") || a.ReadsAll("d", "", "#") {
		t.Error("CanSubscribe(#): want granted, checked per message")
	}
	if !a.CanSubscribe("d", "", "public/news") || !a.ReadsAll("d", "", "public/news") {
		t.Error("CanSubscribe(public/news): want granted, all readable")
	}
	if a.CanSubscribe("d", "", "public/secret") || a.ReadsAll("d", "", "public/secret") {
		t.Error("CanSubscribe(public/secret) granted")
	}
	if !a.CanRead("d", "", "public/news") || a.CanRead("d", "", "public/secret") || a.CanRead("d", "", "private/x") {
		t.Error("CanRead")
	}
	if a.CanWill("d", "", "public/news") || !a.CanWill("d", "", "devices/d/will") {
		t.Error("CanWill")
	}
	if st := a.Stats(); st.SubscribeDenied != 1 || st.PublishDenied == 0 || st.DeliveryDenied != 2 || st.WillDenied != 1 || st.ACLRules != 12 {
		t.Errorf("stats %+v", st)
	}
	// Without an ACL file everything is allowed.
	open := newAuth(t, Options{})
	if !open.CanPublish("c", "", "$anything") || !open.CanSubscribe("c", "", "#") || !open.ReadsAll("c", "", "#") || !open.CanRead("c", "", "x") {
		t.Error("no ACL file should allow everything")
	}
}

// TestSetFiles: the password and ACL files change while the Auth runs (a
// configuration reload); a file that does not load changes nothing, and
// "" removes a file.
func TestSetFiles(t *testing.T) {
	dir := t.TempDir()
	pw1, pw2, acl := filepath.Join(dir, "pw1"), filepath.Join(dir, "pw2"), filepath.Join(dir, "acl")
	for file, pass := range map[string]string{pw1: "one", pw2: "two"} {
		if err := SetPassword(file, "u", []byte(pass), false, PasswordOptions{Cost: 4}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(acl, []byte("user u\ntopic write a/#\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad-acl")
	if err := os.WriteFile(bad, []byte("topic scribble a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := newAuth(t, Options{PasswordFile: pw1, AllowAnonymous: AnonymousAllow})
	login := func(pass string) error {
		return a.Authenticate("c", "u", []byte(pass), tcpAddr("192.0.2.1:1"), "tcp", "")
	}
	if login("one") != nil || login("two") == nil {
		t.Fatal("the first password file is not in force")
	}
	if err := a.SetFiles(pw2, acl); err != nil {
		t.Fatal(err)
	}
	if login("two") != nil || login("one") == nil {
		t.Error("the new password file is not in force")
	}
	if !a.CanPublish("c", "u", "a/1") || a.CanPublish("c", "u", "b/1") {
		t.Error("the new ACL file is not in force")
	}
	if err := a.SetFiles(pw1, bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("SetFiles with a bad ACL: %v, want an error naming it", err)
	}
	if login("two") != nil || a.CanPublish("c", "u", "b/1") {
		t.Error("a refused SetFiles changed the files in force")
	}
	if err := a.SetFiles("", ""); err != nil {
		t.Fatal(err)
	}
	if login("anything") != nil || !a.CanPublish("c", "u", "b/1") {
		t.Error("without files every login and topic should pass (allow_anonymous true)")
	}
}
