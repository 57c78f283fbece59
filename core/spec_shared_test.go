package core_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// collect takes PUBLISH packets, acknowledging them, until none arrives for
// quiet; it fails on anything else.
func (c *tconn) collect() []*codec.Publish {
	c.T.Helper()
	var out []*codec.Publish
	for {
		p, _, err := c.NextWithin(quiet)
		if errors.Is(err, errTimeout) {
			return out
		}
		if err != nil {
			c.T.Fatalf("collecting: %v", err)
		}
		switch p := p.(type) {
		case *codec.Publish:
			out = append(out, p)
			c.Ack(p)
		case *codec.Ack:
			if p.Kind != codec.PUBREL {
				c.T.Fatalf("got %s while collecting", p.Kind)
			}
			c.Send(&codec.Ack{Kind: codec.PUBCOMP, PacketID: p.PacketID})
		default:
			c.T.Fatalf("got %s while collecting", p.Type())
		}
	}
}

// exactlyOnce checks that the members together got each of want once.
func exactlyOnce(t *testing.T, got [][]*codec.Publish, want []string) {
	t.Helper()
	var all []string
	for _, g := range got {
		all = append(all, payloads(g)...)
	}
	slices.Sort(all)
	w := slices.Clone(want)
	slices.Sort(w)
	if !slices.Equal(all, w) {
		t.Fatalf("members got %d messages %q, want each of %d exactly once", len(all), all, len(w))
	}
}

// [MQTT-4.8.2-?] 4.8.2: each message to a shared subscription goes to
// exactly one member of each group, and plain subscribers still get all.
func TestSharedSubscriptionOneMemberPerGroup(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	var g, h []*tconn
	for i := range 3 {
		c := client(t, srv, codec.V5, fmt.Sprint("g", i))
		c.Subscribe(1, "$share/g/sh/#")
		g = append(g, c)
	}
	for i := range 2 {
		c := client(t, srv, codec.V5, fmt.Sprint("h", i))
		c.Subscribe(1, "$share/h/sh/+")
		h = append(h, c)
	}
	plain := client(t, srv, codec.V5, "plain")
	plain.Subscribe(1, "sh/#")
	p := client(t, srv, codec.V5, "pub")
	want := seq("m", 30)
	for _, m := range want {
		p.Pub("sh/x", m, 1)
	}
	var gotG, gotH [][]*codec.Publish
	for _, c := range g {
		gotG = append(gotG, c.collect())
	}
	for _, c := range h {
		gotH = append(gotH, c.collect())
	}
	exactlyOnce(t, gotG, want)
	exactlyOnce(t, gotH, want)
	wantPayloads(t, plain.Recv(30), want...)
}

// round_robin spreads a group's messages evenly over its members.
func TestSharedRoundRobinEven(t *testing.T) {
	srv := newServer(t, core.Options{SharedStrategy: core.SharedRoundRobin}, core.Config{})
	var members []*tconn
	for i := range 3 {
		c := client(t, srv, codec.V5, fmt.Sprint("rr", i))
		c.Subscribe(0, "$share/rr/rr")
		members = append(members, c)
	}
	p := client(t, srv, codec.V5, "pub")
	for _, m := range seq("m", 30) {
		p.Pub("rr", m, 0)
	}
	var got [][]*codec.Publish
	for i, c := range members {
		ms := c.collect()
		if len(ms) != 10 {
			t.Errorf("member %d got %d messages, want 10", i, len(ms))
		}
		got = append(got, ms)
	}
	exactlyOnce(t, got, seq("m", 30))
}

// Every dispatch strategy delivers each message to exactly one member,
// whoever publishes it.
func TestSharedStrategiesDeliverOnce(t *testing.T) {
	for _, strategy := range []core.SharedStrategy{core.SharedRoundRobin, core.SharedRandom,
		core.SharedLeastInflight, core.SharedHashClient, core.SharedHashTopic} {
		t.Run(string(strategy), func(t *testing.T) {
			srv := newServer(t, core.Options{SharedStrategy: strategy}, core.Config{})
			var members []*tconn
			for i := range 3 {
				c := client(t, srv, codec.V5, fmt.Sprint("m", i))
				c.Subscribe(1, "$share/s/st/#")
				members = append(members, c)
			}
			pubs := []*tconn{client(t, srv, codec.V5, "p0"), client(t, srv, codec.V311, "p1")}
			var want []string
			for i := range 40 {
				m := fmt.Sprint("m", i)
				want = append(want, m)
				pubs[i%2].Pub(fmt.Sprintf("st/%d", i%5), m, byte(i%3))
			}
			var got [][]*codec.Publish
			for _, c := range members {
				got = append(got, c.collect())
			}
			exactlyOnce(t, got, want)
		})
	}
}

// 4.8.2: when a member's connection ends, the QoS 1 messages it had not
// acknowledged go to another member of the group.
func TestSharedRedispatchOnMemberDisconnect(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*codec.Connect)
	}{{"clean", func(*codec.Connect) {}}, {"persistent", persistent}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, core.Options{SharedStrategy: core.SharedRoundRobin}, core.Config{})
			a := client(t, srv, codec.V5, "a", tc.mod)
			a.Subscribe(1, "$share/g/rd")
			b := client(t, srv, codec.V5, "b")
			b.Subscribe(1, "$share/g/rd")
			p := client(t, srv, codec.V5, "pub")
			want := seq("m", 6)
			for _, m := range want {
				p.Pub("rd", m, 1)
			}
			var held []string
			for range 3 {
				held = append(held, string(a.ExpectPublish().Payload)) // never acknowledged
			}
			first := b.collect()
			if len(first) != 3 {
				t.Fatalf("b got %d messages before a left, want 3", len(first))
			}
			a.Close()
			second := b.collect()
			if got := payloads(second); !sameSet(got, held) {
				t.Fatalf("b got %q after a left, want a's unacknowledged %q", got, held)
			}
			exactlyOnce(t, [][]*codec.Publish{first, second}, want)
			// Handing a's messages over moves them out of its inflight
			// window once: the gauges come back to zero, not below.
			waitFor(t, "inflight and queued gauges at zero", func() bool {
				st := srv.Stats()
				return st.Inflight == 0 && st.Queued == 0
			})
		})
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// 3.1.1 clients may use $share too (the broker treats the filter the same).
func TestSharedSubscriptionV311(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	a := client(t, srv, codec.V311, "a")
	a.Subscribe(1, "$share/old/v3/#")
	b := client(t, srv, codec.V311, "b")
	b.Subscribe(1, "$share/old/v3/#")
	p := client(t, srv, codec.V311, "pub")
	want := seq("m", 10)
	for _, m := range want {
		p.Pub("v3/x", m, 1)
	}
	ga, gb := a.collect(), b.collect()
	if len(ga) == 0 || len(gb) == 0 {
		t.Errorf("one member got nothing: %d and %d", len(ga), len(gb))
	}
	exactlyOnce(t, [][]*codec.Publish{ga, gb}, want)
}

// 4.8.2: shared subscriptions get no retained messages on subscribe.
func TestSharedSubscriptionNoRetained(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	client(t, srv, codec.V5, "pub").PubRetained("shr/x", "kept", 1)
	c := client(t, srv, codec.V5, "member")
	c.Subscribe(1, "$share/g/shr/#")
	c.ExpectNothing(quiet)
}
