package core

import (
	"sync"
	"testing"
	"time"
)

// TestKAWheel drives the wheel tick by tick: a parked connection is
// expired once its due tick has passed, never before; one that parked
// again meanwhile moves on; one that is reading waits for its next park;
// a due tick beyond the span comes round again; a removed one is forgotten.
func TestKAWheel(t *testing.T) {
	w := &kaWheel{}
	var mu sync.Mutex
	var expired []string
	names := map[*client]string{}
	w.expire = func(c *client) {
		mu.Lock()
		expired = append(expired, names[c])
		mu.Unlock()
	}
	mk := func(name string, keepAlive time.Duration) *client {
		c := &client{keepAlive: keepAlive, kaSlot: -1}
		names[c] = name
		c.pstate.Store(parked)
		due := w.due(c.keepAliveDeadline())
		c.kaDue.Store(due)
		w.add(c, due)
		return c
	}
	short := mk("short", time.Second)   // 1.5 s: due 7 ticks on
	again := mk("again", time.Second)   // parks again at tick 3
	busy := mk("busy", time.Second)     // reading when due
	long := mk("long", 100*time.Second) // 150 s: beyond the 64 s span
	gone := mk("gone", time.Second)     // removed at once
	busy.pstate.Store(reading)
	w.remove(gone)
	expiredAt := map[string]int64{}
	for tick := int64(1); tick <= 700; tick++ {
		if tick == 3 {
			again.kaDue.Store(w.due(again.keepAliveDeadline()))
		}
		w.advance()
		time.Sleep(time.Millisecond) // the expire goroutines
		mu.Lock()
		for _, n := range expired {
			if _, ok := expiredAt[n]; !ok {
				expiredAt[n] = tick
			}
		}
		mu.Unlock()
	}
	for name, want := range map[string][2]int64{
		"short": {7, 8},  // 1.5 s = 6 ticks, expired in the tick after
		"again": {9, 10}, // re-parked before tick 3
		"long":  {601, 602},
	} {
		if got, ok := expiredAt[name]; !ok || got < want[0] || got > want[1] {
			t.Errorf("%s expired at tick %d (%v), want %d..%d", name, got, ok, want[0], want[1])
		}
	}
	if _, ok := expiredAt["busy"]; ok {
		t.Error("a reading connection was expired")
	}
	if _, ok := expiredAt["gone"]; ok {
		t.Error("a removed connection was expired")
	}
	// busy parks now: it is expired after its deadline from here.
	busy.kaDue.Store(w.due(busy.keepAliveDeadline()))
	busy.pstate.Store(parked)
	for range 300 {
		w.advance()
	}
	time.Sleep(10 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(expired) != 4 {
		t.Errorf("expired %q, want short, again, long and busy", expired)
	}
	for _, c := range []*client{short, again, busy, long, gone} {
		if c.kaSlot != -1 {
			t.Errorf("%s still in the wheel", names[c])
		}
	}
}
