package core_test

import (
	"net"
	"slices"
	"testing"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

func TestViews(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	a := client(t, srv, codec.V5, "view-a", persistent)
	a.Subscribe(1, "x/+", "$share/g/y")
	b := client(t, srv, codec.V311, "view-b")
	b.PubRetained("r/1", "kept", 1)
	b.PubRetained("r/2", "also", 0)
	b.Send(&codec.Pingreq{}) // the QoS 0 PUBLISH is handled before the PINGRESP
	expect[*codec.Pingresp](b)

	clients := srv.ClientsPage(core.ClientQuery{Limit: 10}).Clients
	if len(clients) != 2 || clients[0].ClientID != "view-a" || !clients[0].Connected || clients[1].ProtocolVersion != codec.V311 {
		t.Fatalf("Clients() = %+v", clients)
	}
	ci, ok := srv.Client("view-a")
	if !ok || len(ci.Subscriptions) != 2 || ci.Subscriptions[0].Filter != "$share/g/y" || ci.Subscriptions[1].QoS != 1 || ci.Listener != "pipe" {
		t.Fatalf("Client(view-a) = %+v, %v", ci, ok)
	}
	if subs := srv.SubscriptionsPage(core.SubscriptionQuery{Limit: 10}).Subscriptions; len(subs) != 2 {
		t.Fatalf("SubscriptionsPage() = %+v", subs)
	}
	if n := srv.ConnectionsByListener()["pipe"]; n != 2 {
		t.Fatalf("ConnectionsByListener()[pipe] = %d, want 2", n)
	}
	if r := srv.RetainedPage(core.RetainedQuery{Limit: 10}).Messages; len(r) != 2 || r[0].Topic != "r/1" || string(r[1].Payload) != "also" {
		t.Fatalf("RetainedPage() = %v", r)
	}
	if !srv.DeleteRetained("r/1") || srv.DeleteRetained("r/1") {
		t.Fatal("DeleteRetained: want true then false")
	}
	if _, _, ok := srv.RetainedMessage("r/1"); ok {
		t.Fatal("r/1 still retained after DeleteRetained")
	}
	st := srv.Stats()
	if st.MessagesInQoS[1] != 1 || st.MessagesInQoS[0] != 1 {
		t.Fatalf("MessagesInQoS = %v, want one QoS 0 and one QoS 1", st.MessagesInQoS)
	}
	a.Close()
	waitFor(t, "view-a offline", func() bool { c, _ := srv.Client("view-a"); return !c.Connected })
}

func TestDisconnectWhere(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	a := client(t, srv, codec.V5, "dw-a", func(p *codec.Connect) { p.UsernameFlag, p.Username = true, []byte("mallory") })
	b := client(t, srv, codec.V5, "dw-b")
	n := srv.DisconnectWhere(func(id, user string, _ net.Addr) bool { return user == "mallory" })
	if n != 1 {
		t.Fatalf("DisconnectWhere closed %d connections, want 1", n)
	}
	a.ExpectDisconnect(codec.AdministrativeAction)
	b.Subscribe(0, "still/here")
}

// TestGauges: queued and inflight follow deliveries, shared groups follow
// subscriptions, and every Store.Sync lands in the latency histogram.
func TestGauges(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	s := client(t, srv, codec.V311, "g-sub", persistent)
	s.Subscribe(1, "g/#", "$share/grp/g/x")
	if st := srv.Stats(); st.SharedGroups != 1 {
		t.Fatalf("SharedGroups = %d, want 1", st.SharedGroups)
	}
	s.Pause() // the subscriber stops reading: deliveries stay in flight
	p := client(t, srv, codec.V311, "g-pub")
	for i := 0; i < 3; i++ {
		p.Pub("g/x", "m", 1)
	}
	waitFor(t, "6 deliveries pending", func() bool { st := srv.Stats(); return st.Inflight+st.Queued == 6 })
	s.Resume()
	for _, m := range s.Recv(6) {
		s.Ack(m)
	}
	waitFor(t, "nothing pending", func() bool { st := srv.Stats(); return st.Inflight == 0 && st.Queued == 0 })
	var syncs int64
	for _, n := range srv.Stats().StoreSyncs {
		syncs += n
	}
	if syncs == 0 {
		t.Error("no Store.Sync recorded after persistent QoS 1 traffic")
	}
}

// TestClientIndexFollowsSessions: the ordered index of client ids that
// the admin views page through follows sessions as they are created,
// taken over, replaced by a clean start, ended and expired.
func TestClientIndexFollowsSessions(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	ids := func() []string {
		t.Helper()
		if err := srv.ClientIndexError(); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range srv.ClientsPage(core.ClientQuery{Limit: 100}).Clients {
			out = append(out, c.ClientID)
		}
		return out
	}
	want := func(what string, ids func() []string, want ...string) {
		t.Helper()
		waitFor(t, what, func() bool { return slices.Equal(ids(), want) })
	}
	p := client(t, srv, codec.V5, "p", persistent)
	c := client(t, srv, codec.V311, "c")
	e := client(t, srv, codec.V5, "e", func(p *codec.Connect) {
		persistent(p)
		p.Props.SetNum(codec.PropSessionExpiry, 1)
	})
	want("three sessions", ids, "c", "e", "p")
	c.Close()
	want("clean session ended", ids, "e", "p")
	p2 := client(t, srv, codec.V5, "p", persistent) // takes the session over
	p.ExpectDisconnect(codec.SessionTakenOver)
	want("taken over", ids, "e", "p")
	p3 := client(t, srv, codec.V5, "p") // clean start: a new session
	p2.ExpectDisconnect(codec.SessionTakenOver)
	want("clean start", ids, "e", "p")
	e.Close()
	p3.Close()
	want("expired and ended", ids)
}
