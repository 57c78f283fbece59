package core_test

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// The figures of docs/benchmarks.md "What one client can make the broker
// hold": the heap that one client's retained messages or subscriptions
// add to a broker with the default options. They take a while and print
// rather than check, so they run only when asked:
//
//	XMQ_MEASURE=1 go test -count=1 -run 'TestMeasure' -v ./core/

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func measuring(t *testing.T) {
	t.Helper()
	if os.Getenv("XMQ_MEASURE") == "" {
		t.Skip("set XMQ_MEASURE=1 to measure")
	}
}

// diskStore is the in-memory store without its copy of the retained
// messages: what the broker holds with the on-disk store, whose copy is
// on disk.
type diskStore struct{ *core.MemStore }

func (diskStore) PutRetained(string, []byte) error { return nil }

// TestMeasureRetainedMemory: one client retains 500,000 or 1,000,000
// messages (topic fleet/NNNNNN/state, QoS 0) of 100 bytes, or 500,000 of
// 1,000 bytes, with the in-memory store (-data "") and without its copy
// (as with the on-disk store).
func TestMeasureRetainedMemory(t *testing.T) {
	measuring(t)
	for _, tc := range []struct{ n, size int }{{500_000, 100}, {1_000_000, 100}, {500_000, 1000}} {
		t.Run(fmt.Sprintf("%dx%dB", tc.n, tc.size), func(t *testing.T) {
			t.Run("in-memory store", func(t *testing.T) { measureRetained(t, tc.n, tc.size, core.NewMemStore()) })
			t.Run("on-disk store", func(t *testing.T) { measureRetained(t, tc.n, tc.size, diskStore{core.NewMemStore()}) })
		})
	}
}

func measureRetained(t *testing.T, n, size int, store core.Store) {
	srv := newServer(t, core.Options{}, core.Config{Store: store})
	c := client(t, srv, codec.V311, "retainer")
	before := liveHeap()
	payload := make([]byte, size)
	var buf []byte
	for i := range n {
		p := codec.Publish{Topic: fmt.Appendf(nil, "fleet/%06d/state", i), Payload: payload, Retain: true}
		buf = p.Append(buf, codec.V311)
		if len(buf) > 256<<10 || i == n-1 {
			c.SendRaw(buf)
			buf = buf[:0]
		}
	}
	// A QoS 1 PUBLISH's PUBACK comes after every message before it is handled.
	c.Pub("sync", "x", 1)
	after := liveHeap()
	st := srv.Stats()
	t.Logf("retained %d of %d messages, %d bytes of topic and payload; heap +%.1f MB (%.0f B per message kept)",
		st.Retained, n, st.RetainedBytes, float64(after-before)/1e6, float64(after-before)/float64(max(st.Retained, 1)))
	runtime.KeepAlive(srv)
}

// TestMeasureSubscriptionMemory: one client with a persistent session
// subscribes to 100,000 filters (fleet/NNNNNN/cmd), 1,000 per SUBSCRIBE.
func TestMeasureSubscriptionMemory(t *testing.T) {
	measuring(t)
	const n, per = 100_000, 1000
	srv := newServer(t, core.Options{}, core.Config{})
	before := liveHeap()
	c := client(t, srv, codec.V5, "subscriber", persistent)
	granted := 0
	for i := 0; i < n; i += per {
		s := &codec.Subscribe{}
		for j := i; j < i+per; j++ {
			s.Subscriptions = append(s.Subscriptions, sub(fmt.Sprintf("fleet/%06d/cmd", j), 1))
		}
		for _, rc := range c.SubscribePacket(s).ReasonCodes {
			if !rc.IsError() {
				granted++
			}
		}
	}
	after := liveHeap()
	t.Logf("%d of %d subscriptions granted (%d in the router); heap +%.1f MB (%.0f B per subscription granted)",
		granted, n, srv.Stats().Subscriptions, float64(after-before)/1e6, float64(after-before)/float64(max(granted, 1)))
	runtime.KeepAlive(c)
}
