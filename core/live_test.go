package core_test

import (
	"sync"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// TestSetLimits: limits changed while the server runs apply from their
// next use — a lower max_connections refuses the next CONNECT, a smaller
// queue drops what no longer fits, a subscription limit refuses the next
// SUBSCRIBE — and Options reports them; invalid limits change nothing.
func TestSetLimits(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	a := client(t, srv, codec.V5, "a")
	l := srv.Options().Limits()
	l.MaxConnections = 1
	l.MaxSubscriptionsPerClient = 1
	if err := srv.SetLimits(l); err != nil {
		t.Fatal(err)
	}
	if got := srv.Options(); got.MaxConnections != 1 || got.MaxSubscriptionsPerClient != 1 || got.MaxQueued != 1000 {
		t.Errorf("Options after SetLimits: %+v", got.Limits())
	}
	b := dial(t, srv, codec.V5)
	if ack := b.ConnectRC(connectPacket(codec.V5, "b")); ack.ReasonCode != codec.ServerBusy {
		t.Errorf("CONNECT over the new max_connections: %v, want Server busy", ack.ReasonCode)
	}
	a.Subscribe(1, "x/1")
	s := a.SubscribePacket(&codec.Subscribe{PacketID: 9, Subscriptions: []codec.Subscription{sub("x/2", 1)}})
	if s.ReasonCodes[0] != codec.QuotaExceeded {
		t.Errorf("second SUBSCRIBE under max_subscriptions_per_client 1: %v, want Quota exceeded", s.ReasonCodes[0])
	}

	bad := l
	bad.MaxInflight = 70000
	if err := srv.SetLimits(bad); err == nil {
		t.Error("SetLimits took max_inflight 70000")
	}
	if got := srv.Options().MaxInflight; got != 1024 {
		t.Errorf("a refused SetLimits changed max_inflight to %d", got)
	}
	// Zero is the default again.
	if err := srv.SetLimits(core.Limits{}); err != nil {
		t.Fatal(err)
	}
	if got := srv.Options(); got.Limits() != core.DefaultOptions().Limits() {
		t.Errorf("zero limits give %+v, want the defaults %+v", got.Limits(), core.DefaultOptions().Limits())
	}
}

// TestSetLimitsWhileServing changes the queue limits and the write timeout
// over and over while messages flow to a subscriber: with -race, every
// use of a limit must read it safely.
func TestSetLimitsWhileServing(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	s := client(t, srv, codec.V311, "sub")
	s.Subscribe(1, "t")
	p := client(t, srv, codec.V311, "pub")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			l := srv.Options().Limits()
			l.MaxQueued = 100 + i%50
			l.MaxQueuedBytes = int64(1000 + i%10)
			l.WriteTimeout = time.Duration(10+i%5) * time.Second
			l.QueueOverflow = []core.OverflowPolicy{core.OverflowDropNew, core.OverflowDisconnect}[i%2]
			if err := srv.SetLimits(l); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for range 200 {
		p.Pub("t", "m", 0)
	}
	close(stop)
	wg.Wait()
	s.Pub("done", "", 0)
}
