//go:build unix

package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// TestMosquittoDifferences keeps docs/migrating-from-mosquitto.md's
// "Behaviour that differs" true: with the same password and ACL files,
// Debian's Mosquitto (2.0.11) and xmq answer a wrong password and a
// SUBSCRIBE to a filter a deny rule covers as the table says.
func TestMosquittoDifferences(t *testing.T) {
	pw := passwordFile(t) // bob/hunter2, written by mosquitto_passwd
	acl := writeFile(t, "user bob\ntopic readwrite #\ntopic deny test/nosubscribe\n")
	m := startMosquitto(t, fmt.Sprintf("password_file %s\nacl_file %s\n", pw, acl))
	b := startRun(t, "-listen", "127.0.0.1:0", "-data", "", "-password-file", pw,
		"-c", writeFile(t, "auth:\n  allow_anonymous: false\n  acl_file: "+acl+"\n"))
	xmq := b.addrs[0].String()
	for _, tt := range []struct {
		broker, addr string
		v            byte
		wrongPass    codec.ReasonCode // CONNACK (3.1.1: the code its return code maps to)
		deniedSub    codec.ReasonCode // SUBACK
	}{
		{"mosquitto", m.tcp, codec.V311, codec.NotAuthorized, 0},                 // CONNACK 5, SUBACK granted
		{"mosquitto", m.tcp, codec.V5, codec.NotAuthorized, 0},                   // 0x87, granted
		{"xmq", xmq, codec.V311, codec.BadUserNameOrPassword, 0x80},              // CONNACK 4, SUBACK failure
		{"xmq", xmq, codec.V5, codec.BadUserNameOrPassword, codec.NotAuthorized}, // 0x86, 0x87
	} {
		c := codec.Connect{ProtocolVersion: tt.v, CleanStart: true, ClientID: []byte("diff"),
			UsernameFlag: true, Username: []byte("bob"), PasswordFlag: true, Password: []byte("wrong")}
		if got := connackOf(t, tt.addr, c); got != tt.wrongPass {
			t.Errorf("%s MQTT %d, wrong password: CONNACK %v, want %v", tt.broker, tt.v, got, tt.wrongPass)
		}
		if got := subackOf(t, tt.addr, tt.v, "bob", "hunter2", "test/nosubscribe"); got != tt.deniedSub {
			t.Errorf("%s MQTT %d, SUBSCRIBE to a denied filter: SUBACK %v, want %v", tt.broker, tt.v, got, tt.deniedSub)
		}
	}
}

// subackOf logs in to addr and returns the SUBACK code of a QoS 0
// subscription to filter.
func subackOf(t *testing.T, addr string, v byte, user, pass, filter string) codec.ReasonCode {
	t.Helper()
	c := mqtttest.DialConn(t, "mqtt://"+addr, nil, v)
	defer c.Close()
	c.Timeout = 10 * time.Second
	c.Connect(mqtttest.ConnectPacket(v, "diff-sub", func(p *codec.Connect) {
		p.UsernameFlag, p.Username, p.PasswordFlag, p.Password = true, []byte(user), true, []byte(pass)
	}))
	return c.SubscribePacket(&codec.Subscribe{Subscriptions: []codec.Subscription{mqtttest.Sub(filter, 0)}}).ReasonCodes[0]
}
