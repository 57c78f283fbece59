package auth

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/crypto/bcrypt"
)

// unsafeString views b as a string, as core does with a topic in its read
// buffer.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func benchAuth(tb testing.TB) *Auth {
	tb.Helper()
	aclFile := filepath.Join(tb.TempDir(), "acl")
	if err := os.WriteFile(aclFile, []byte(testACL), 0o600); err != nil {
		tb.Fatal(err)
	}
	a, err := New(Options{ACLFile: aclFile, ReloadInterval: -1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = a.Close() })
	return a
}

// TestCanPublishHitAllocs: a cached decision allocates nothing, even for a
// topic that aliases the caller's buffer.
func TestCanPublishHitAllocs(t *testing.T) {
	a := benchAuth(t)
	topic := []byte("sensors/room1/temp")
	a.CanPublish("client-1", "alice", unsafeString(topic))
	if n := testing.AllocsPerRun(1000, func() {
		if !a.CanPublish("client-1", "alice", unsafeString(topic)) {
			t.Fatal("denied")
		}
	}); n != 0 {
		t.Errorf("CanPublish cache hit: %v allocations, want 0", n)
	}
}

// BenchmarkCanPublishHit is the publish path: a client publishing to a
// topic it published to before.
func BenchmarkCanPublishHit(b *testing.B) {
	a := benchAuth(b)
	topic := []byte("sensors/room1/temp")
	a.CanPublish("client-1", "alice", unsafeString(topic))
	b.ReportAllocs()
	for b.Loop() {
		a.CanPublish("client-1", "alice", unsafeString(topic))
	}
}

// BenchmarkCanPublishHitParallel: many clients at once, each with its own
// topics, on every core.
func BenchmarkCanPublishHitParallel(b *testing.B) {
	a := benchAuth(b)
	const clients = 256
	ids := make([]string, clients)
	for i := range ids {
		ids[i] = "client-" + strconv.Itoa(i)
		a.CanPublish(ids[i], "alice", "sensors/"+ids[i]+"/temp")
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		id := ids[int(next.Add(1))%clients]
		topic := []byte("sensors/" + id + "/temp")
		for pb.Next() {
			a.CanPublish(id, "alice", unsafeString(topic))
		}
	})
}

// BenchmarkCanPublishMiss is the first publish to a topic: the rules are
// scanned and the decision stored.
func BenchmarkCanPublishMiss(b *testing.B) {
	a := benchAuth(b)
	topics := make([]string, 4096)
	for i := range topics {
		topics[i] = "sensors/room" + strconv.Itoa(i) + "/temp"
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%len(topics) == 0 {
			a.acl.Load().cache = newDecisionCache(DefaultACLCacheSize)
		}
		a.CanPublish("client-1", "alice", topics[i%len(topics)])
		i++
	}
}

func BenchmarkCanSubscribe(b *testing.B) {
	a := benchAuth(b)
	b.ReportAllocs()
	for b.Loop() {
		a.CanSubscribe("client-1", "alice", "$share/g/sensors/room1/#")
	}
}

// BenchmarkFirstLoginUnderAttack measures how long a first login (no
// cached proof, bcrypt at the default cost) from an address that has not
// failed takes while 1,000 wrong logins from 100 other addresses are in
// progress: the fairness the hash queue promises, with the CPU the attack
// takes. Run it on one core (-cpu 1, under taskset -c 0) as the broker
// runs. It reports the legitimate login's latency as ms/login.
func BenchmarkFirstLoginUnderAttack(b *testing.B) {
	const sources, each = 100, 10
	file := writeUsers(b, bcrypt.DefaultCost, map[string]string{"alice": "wonderland", "bob": "builder"})
	var total time.Duration
	for i := range b.N {
		a, err := New(Options{PasswordFile: file, AllowAnonymous: AnonymousDeny, ReloadInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		for s := range sources {
			addr := &net.TCPAddr{IP: net.IPv4(198, 51, byte(100+s/250), byte(1+s%250)), Port: 1}
			for range each {
				wg.Go(func() { _ = a.Authenticate("bot", "alice", []byte("guess"), addr, "tcp", "") })
			}
		}
		for a.Stats().HashWaiting < sources*each/2 {
			time.Sleep(time.Millisecond)
		}
		start := time.Now()
		if err := a.Authenticate("good", "bob", []byte("builder"), &net.TCPAddr{IP: net.IPv4(203, 0, 113, byte(1+i%250)), Port: 1}, "tcp", ""); err != nil {
			b.Fatalf("legitimate login: %v", err)
		}
		total += time.Since(start)
		wg.Wait()
		_ = a.Close()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/login")
}
