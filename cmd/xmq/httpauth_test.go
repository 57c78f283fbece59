//go:build unix

package main

// The end-to-end test of auth.http, with paho clients: pahoConnect and its
// helpers live with the cluster tests, which are unix-only.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/xmq-io/xmq/codec"
)

// TestRunHTTPAuth runs xmq with auth.http pointed at a service on
// loopback and connects real clients: the service's answers decide
// CONNECT, PUBLISH and SUBSCRIBE, deliveries flow through a filter it
// allowed, and a service that is gone refuses logins (fail closed) while
// the cache still admits the logins it answered.
func TestRunHTTPAuth(t *testing.T) {
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req map[string]string
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		result := "deny"
		switch r.URL.Path {
		case "/mqtt/auth":
			if req["username"] == "alice" && req["password"] == "wonderland" && req["peerhost"] == "127.0.0.1" && req["listener"] == "tcp" {
				result = "allow"
			}
		case "/mqtt/acl":
			if strings.HasPrefix(req["topic"], "sensors/") && req["username"] == "alice" {
				result = "allow"
			}
		}
		_, _ = io.WriteString(w, `{"result":"`+result+`"}`)
	}))
	defer svc.Close()
	cfgFile := writeFile(t, "auth:\n  allow_anonymous: false\n  http:\n    url: "+svc.URL+"/mqtt/auth\n    acl_url: "+svc.URL+
		"/mqtt/acl\n    timeout: 2s\n")
	b := startRun(t, "-c", cfgFile, "-listen", "127.0.0.1:0", "-data", "", "-log-format", "json")
	addr := b.addrs[0].String()

	if rc := connack(t, addr, "alice", "wrong"); rc != codec.BadUserNameOrPassword {
		t.Errorf("alice with a wrong password: CONNACK %v, want Bad User Name or Password", rc)
	}
	login := func(id string) func(*paho.Connect) {
		return func(cp *paho.Connect) {
			cp.ClientID, cp.Username, cp.UsernameFlag, cp.Password, cp.PasswordFlag = id, "alice", true, []byte("wonderland"), true
		}
	}
	sub := pahoConnect(t, addr, "sub", login("sub"))
	pub := pahoConnect(t, addr, "pub", login("pub"))
	sub.subscribe(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "sensors/#", QoS: 1}}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if ack, err := sub.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "secret/#", QoS: 1}}}); ack == nil ||
		len(ack.Reasons) != 1 || ack.Reasons[0] != byte(codec.NotAuthorized) {
		t.Errorf("SUBSCRIBE secret/#: %+v, %v; want Not Authorized", ack, err)
	}
	pub.publish(t, &paho.Publish{Topic: "sensors/room1", QoS: 1, Payload: []byte("21.5")})
	if m := sub.next(t); m.Topic != "sensors/room1" || string(m.Payload) != "21.5" {
		t.Errorf("delivered %s %q", m.Topic, m.Payload)
	}
	if resp, err := pub.Publish(ctx, &paho.Publish{Topic: "secret/plans", QoS: 1, Payload: []byte("x")}); err == nil ||
		resp == nil || resp.ReasonCode != byte(codec.NotAuthorized) {
		t.Errorf("PUBLISH secret/plans: %+v, %v; want PUBACK Not Authorized", resp, err)
	}

	// The service goes away: new logins fail closed, logins it answered
	// lately are still admitted from the cache.
	svc.Close()
	if rc := connack(t, addr, "bob", "builder"); rc != codec.ServerUnavailable {
		t.Errorf("with the service gone: CONNACK %v, want Server Unavailable", rc)
	}
	pahoConnect(t, addr, "pub", login("pub"))
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
	log := b.stderr.String()
	if strings.Contains(log, "wonderland") || strings.Contains(log, "builder") {
		t.Errorf("the log holds a password:\n%s", log)
	}
	if !strings.Contains(log, "HTTP auth service gave no usable answer") {
		t.Errorf("the service's failure is not logged:\n%s", log)
	}
}
