package core

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
)

// benchRetained is a server with n retained messages on
// site/{i%100}/dev/{i}/temp and ten on alerts/{i}.
func benchRetained(b *testing.B, n int) *Server {
	b.Helper()
	srv, err := New(Options{SysInterval: -1}, Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	payload := []byte("21.5")
	for i := range n {
		srv.retained.set(&Message{Message: codec.Message{Topic: fmt.Sprintf("site/%d/dev/%d/temp", i%100, i), Payload: payload, Retain: true}}, 0)
	}
	for i := range 10 {
		srv.retained.set(&Message{Message: codec.Message{Topic: fmt.Sprintf("alerts/%d", i), Payload: payload, Retain: true}}, 0)
	}
	return srv
}

// BenchmarkRetained measures the retained set with 200,000 topics: a
// retained PUBLISH replacing a topic's message, one retaining a new topic
// and clearing it (both within the default budget, as a client's are), the
// reads of a SUBSCRIBE's retained stream, in batches of maxBatch into the
// writer's scratch (exact, a small branch with #, 2,000 topics under +),
// and the admin API's first page of one message.
func BenchmarkRetained(b *testing.B) {
	const n = 200_000
	srv := benchRetained(b, n)
	now := time.Now()
	b.Run("set-replace", func(b *testing.B) {
		m := &Message{Message: codec.Message{Topic: "site/42/dev/4242/temp", Payload: []byte("22"), Retain: true}}
		budget := retainedBudget{msgs: 500_000, bytes: 128 << 20}
		b.ReportAllocs()
		for b.Loop() {
			srv.retained.setWithin(m, 0, budget)
		}
	})
	b.Run("set-new-and-clear", func(b *testing.B) {
		// A topic retained for the first time, then cleared: the ordered
		// index's insert and delete.
		m := &Message{Message: codec.Message{Topic: "site/42/dev/new/temp", Payload: []byte("22"), Retain: true}}
		clear := &Message{Message: codec.Message{Topic: m.Topic, Retain: true}}
		budget := retainedBudget{msgs: 500_000, bytes: 128 << 20}
		b.ReportAllocs()
		for b.Loop() {
			srv.retained.setWithin(m, 0, budget)
			srv.retained.setWithin(clear, 0, budget)
		}
	})
	for _, tc := range []struct {
		name, filter string
		want         int
	}{
		{"stream-exact", "site/42/dev/4242/temp", 1},
		{"stream-alerts-hash", "alerts/#", 10},
		{"stream-plus-2000", "site/7/dev/+/temp", n / 100},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var buf []*Message
			b.ReportAllocs()
			for b.Loop() {
				got, after := 0, ""
				for done := false; !done; {
					buf, after, done = srv.retained.read(tc.filter, after, maxBatch, now, buf[:0])
					got += len(buf)
				}
				if got != tc.want {
					b.Fatalf("%d matches, want %d", got, tc.want)
				}
			}
		})
	}
	b.Run("page-1", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if len(retainedFirstPage(srv, 1)) != 1 {
				b.Fatal("empty page")
			}
		}
	})
}

func retainedFirstPage(srv *Server, limit int) []*Message {
	return srv.RetainedPage(RetainedQuery{Limit: limit}).Messages
}
