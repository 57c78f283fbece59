//go:build unix

package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/xmq-io/xmq/auth"
	"github.com/xmq-io/xmq/codec"
)

// usersFile writes a password file with user:password pairs.
func usersFile(t *testing.T, pairs ...string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "passwd")
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := auth.SetPassword(file, pairs[i], []byte(pairs[i+1]), false, auth.PasswordOptions{Cost: 4, SCRAM: auth.PasswordSCRAMs}); err != nil {
			t.Fatal(err)
		}
	}
	return file
}

func asUser(user, pass string) func(*paho.Connect) {
	return func(cp *paho.Connect) {
		cp.Username, cp.UsernameFlag, cp.Password, cp.PasswordFlag = user, true, []byte(pass), true
	}
}

// TestClusterSessionOwner: a session belongs to its owner on every node.
// alice's persistent session on n1 holds 3 acknowledged messages; bob,
// connecting with her client id on n2 — with Clean Start or without, MQTT
// 5 or 3.1.1, while she is away and while she is connected on n1 — is
// refused (0x87 / 0x05): her connection stays, her session and its 3
// messages are hers when she comes back. (On today's main bob's Clean
// Start on n2 was accepted and wiped her session.)
func TestClusterSessionOwner(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two brokers")
	}
	passwd := usersFile(t, "alice", "alice-pass", "bob", "bob-pass")
	nodes, _ := clusterNodesConfig(t, 2, 2, fmt.Sprintf("auth:\n  password_file: %s\n", passwd))
	waitStateReady(t, nodes...)
	n1, n2 := nodes[0].addr, nodes[1].addr

	alice := pahoConnect(t, n1, "alice-phone", persistentV5, asUser("alice", "alice-pass"))
	alice.subscribe(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "alice/inbox", QoS: 1}}})
	pub := pahoConnect(t, n2, "pub", asUser("bob", "bob-pass"))
	awaitInterest(t, pub, "alice/inbox", alice)
	time.Sleep(100 * time.Millisecond) // the last probes
	for len(alice.msgs) > 0 {
		<-alice.msgs
	}
	_ = alice.Disconnect(&paho.Disconnect{})
	awaitRegistry(t, nodes...)
	for i := 1; i <= 3; i++ {
		pub.publish(t, &paho.Publish{Topic: "alice/inbox", QoS: 1, Payload: fmt.Appendf(nil, "m%d", i)})
	}
	time.Sleep(300 * time.Millisecond) // forwarded to n1, queued in her session

	bob := func(version byte, clean bool) codec.ReasonCode {
		return connackOf(t, n2, codec.Connect{ProtocolVersion: version, CleanStart: clean, ClientID: []byte("alice-phone"),
			UsernameFlag: true, Username: []byte("bob"), PasswordFlag: true, Password: []byte("bob-pass")})
	}
	for _, tt := range []struct {
		version byte
		clean   bool
	}{{codec.V5, true}, {codec.V5, false}, {codec.V311, true}, {codec.V311, false}} {
		if rc := bob(tt.version, tt.clean); rc != codec.NotAuthorized {
			t.Errorf("bob on n2 (protocol %d, clean %v) with alice's offline session on n1: CONNACK %v, want not authorized", tt.version, tt.clean, rc)
		}
	}

	// She is back on n1; bob on n2 neither takes over nor ends it.
	alice = pahoConnect(t, n1, "alice-phone", persistentV5, asUser("alice", "alice-pass"))
	var got []string
	for range 3 {
		got = append(got, string(alice.next(t).Payload))
	}
	if fmt.Sprint(got) != "[m1 m2 m3]" {
		t.Fatalf("alice got %v, want her 3 messages", got)
	}
	if rc := bob(codec.V5, true); rc != codec.NotAuthorized {
		t.Errorf("bob on n2 with alice connected on n1: CONNACK %v, want not authorized", rc)
	}
	select {
	case d := <-alice.gone:
		t.Fatalf("alice's connection on n1 was closed: %+v", d)
	case <-time.After(500 * time.Millisecond):
	}
	pub.publish(t, &paho.Publish{Topic: "alice/inbox", QoS: 1, Payload: []byte("m4")})
	if p := alice.next(t); string(p.Payload) != "m4" {
		t.Fatalf("alice got %q after bob's attempt, want m4", p.Payload)
	}
	if !strings.Contains(nodes[1].stderr.String(), "belongs to another user") {
		t.Error("n2 logged no refusal naming the reason")
	}
}
