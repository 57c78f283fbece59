//go:build unix

package main

// Bridges against a real Mosquitto (Debian's mosquitto, started here on
// loopback): xmq bridged to Mosquitto over TCP and TLS in MQTT 5 and
// 3.1.1, and Mosquitto's own bridge connected to xmq.

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/certs/certstest"
	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// mosquittoProc is a Mosquitto broker listening on loopback: plain TCP
// at tcp, TLS at tls (a certificate of ca).
type mosquittoProc struct {
	cmd    *exec.Cmd
	tcp    string
	tls    string
	caFile string
	log    *mqtttest.Buffer
	exited chan struct{}
}

// startMosquitto runs mosquitto with extra configuration lines. Without
// the binary the test is skipped, or fails in CI (CI=true; .ci/deps
// installs it). Its websockets listener is left out: Debian's 2.0.11
// cannot bind one to loopback only, so ws bridges are tested against
// xmq (bridge.TestTransports).
func startMosquitto(t *testing.T, extra string) *mosquittoProc {
	t.Helper()
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		bin, err = exec.LookPath("/usr/sbin/mosquitto")
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("mosquitto is not installed (.ci/deps installs it)")
		}
		t.Skip("mosquitto is not installed")
	}
	ca := certstest.NewCA(t)
	cert, key := ca.WriteServerFiles()
	m := &mosquittoProc{tcp: mqtttest.FreeAddr(t), tls: mqtttest.FreeAddr(t), caFile: ca.WriteCAFile(), log: &mqtttest.Buffer{}, exited: make(chan struct{})}
	port := func(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }
	conf := fmt.Sprintf("per_listener_settings false\nallow_anonymous true\nset_tcp_nodelay true\n"+
		"listener %s 127.0.0.1\nlistener %s 127.0.0.1\ncertfile %s\nkeyfile %s\n%s",
		port(m.tcp), port(m.tls), cert, key, extra)
	if os.Geteuid() == 0 {
		conf += "user root\n" // else it drops to the mosquitto user, who cannot read the test's key file
	}
	path := writeFile(t, conf)
	m.cmd = exec.Command(bin, "-c", path)
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = m.cmd.Wait(); close(m.exited) }()
	t.Cleanup(func() { _ = m.cmd.Process.Kill(); <-m.exited })
	deadline := time.Now().Add(10 * time.Second)
	for _, a := range []string{m.tcp, m.tls} {
		for {
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-m.exited:
				t.Fatalf("mosquitto exited: %v\n%s", m.cmd.ProcessState, m.log)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("mosquitto not listening on %s\n%s", a, m.log)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return m
}

// bridgeLoopPrevention waits for run b's bridge to connect and returns
// how its link prevents loops.
func bridgeLoopPrevention(t *testing.T, b *broker) string {
	t.Helper()
	re := regexp.MustCompile(`"msg":"bridge connected".*"loop_prevention":"([a-z_]+)"`)
	var m []string
	waitUntil(t, "the bridge to connect", func() bool {
		m = re.FindStringSubmatch(b.stderr.String())
		return m != nil
	})
	return m[1]
}

// TestBridgeMosquitto: xmq bridged to Mosquitto over TCP and TLS, MQTT 5
// and 3.1.1: out, in and both ways at each QoS; retain flags as
// published and kept by the far side; MQTT 5 properties across; the bridge
// bit accepted by Mosquitto; nothing comes back.
func TestBridgeMosquitto(t *testing.T) {
	m := startMosquitto(t, "")
	for _, tc := range []struct{ transport, proto string }{{"tcp", "5"}, {"tcp", "3.1.1"}, {"tls", "5"}, {"tls", "3.1.1"}} {
		t.Run(tc.transport+"/"+tc.proto, func(t *testing.T) {
			ns := tc.transport + strings.ReplaceAll(tc.proto, ".", "") // this subtest's topics at Mosquitto
			addr, tlsConf := "mqtt://"+m.tcp, ""
			if tc.transport == "tls" {
				addr, tlsConf = "mqtts://"+m.tls, "    tls: {ca_file: "+m.caFile+"}\n"
			}
			cfg := fmt.Sprintf(`bridges:
  - name: mosq
    addresses: [%s]
    protocol: "%s"
%s    topics:
      - {topic: "out/#", direction: out, qos: 2, remote_prefix: %s/}
      - {topic: "in/#", direction: in, qos: 2, remote_prefix: %s/}
      - {topic: "both/#", direction: both, qos: 2, remote_prefix: %s/}
`, addr, tc.proto, tlsConf, ns, ns, ns)
			x := startRun(t, "-listen", "127.0.0.1:0", "-data", "", "-web", "", "-log-format", "json", "-c", writeFile(t, cfg))
			want := map[string]string{"5": "no_local", "3.1.1": "bridge_bit"}[tc.proto]
			if lp := bridgeLoopPrevention(t, x); lp != want {
				t.Errorf("loop prevention %q, want %q", lp, want)
			}
			xurl, murl := "mqtt://"+x.addrs[0].String(), "mqtt://"+m.tcp
			msub := mqtttest.Dial(t, murl, ns+"-msub", codec.V5)
			msub.Subscribe(ns+"/#", 2, mqtttest.RAP)
			xsub := mqtttest.Dial(t, xurl, "xsub", codec.V5)
			xsub.Subscribe("#", 2, mqtttest.RAP)
			xpub := mqtttest.Dial(t, xurl, "xpub", codec.V5)
			mpub := mqtttest.Dial(t, murl, ns+"-mpub", codec.V5)
			for qos := byte(0); qos <= 2; qos++ {
				payload := fmt.Sprint("q", qos)
				xpub.Pub("out/x", payload, qos, false)
				xsub.Expect(1)
				if p := msub.Expect(1)[0]; string(p.Topic) != ns+"/out/x" || string(p.Payload) != payload || p.QoS != qos {
					t.Errorf("out at QoS %d: got %q %q QoS %d", qos, p.Topic, p.Payload, p.QoS)
				}
				mpub.Pub(ns+"/in/y", payload, qos, false)
				msub.Expect(1)
				if p := xsub.Expect(1)[0]; string(p.Topic) != "in/y" || string(p.Payload) != payload || p.QoS != qos {
					t.Errorf("in at QoS %d: got %q %q QoS %d", qos, p.Topic, p.Payload, p.QoS)
				}
				xpub.Pub("both/x", "x"+payload, qos, false)
				mpub.Pub(ns+"/both/m", "m"+payload, qos, false)
				for _, s := range []*mqtttest.Client{xsub, msub} {
					got := mqtttest.Payloads(s.Expect(2))
					slices.Sort(got)
					if want := []string{"m" + payload, "x" + payload}; !slices.Equal(got, want) {
						t.Errorf("both at QoS %d: got %q, want %q", qos, got, want)
					}
				}
			}
			// Live retained messages keep their flag each way, and the far
			// side keeps them.
			xpub.Pub("out/r", "kept out", 1, true)
			mpub.Pub(ns+"/in/r", "kept in", 1, true)
			for _, s := range []*mqtttest.Client{xsub, msub} {
				for _, p := range s.Expect(2) {
					if !p.Retain {
						t.Errorf("%q on %q lost its retain flag", p.Payload, p.Topic)
					}
				}
			}
			if p := mqtttest.Dial(t, murl, ns+"-late", codec.V5); true {
				p.Subscribe(ns+"/out/r", 1)
				if got := p.Expect(1)[0]; string(got.Payload) != "kept out" || !got.Retain {
					t.Errorf("Mosquitto did not keep the retained message: %q", got.Payload)
				}
			}
			if p := mqtttest.Dial(t, xurl, "late", codec.V5); true {
				p.Subscribe("in/r", 1)
				if got := p.Expect(1)[0]; string(got.Payload) != "kept in" || !got.Retain {
					t.Errorf("xmq did not keep the retained message: %q", got.Payload)
				}
			}
			if tc.proto == "5" {
				props := func(topic string) *codec.Publish {
					p := &codec.Publish{Topic: []byte(topic), QoS: 1, Payload: []byte{0, 0xff}}
					p.Props.ContentType = []byte("application/cbor")
					p.Props.ResponseTopic = []byte("reply/to")
					p.Props.CorrelationData = []byte{1, 2, 3}
					p.Props.SetNum(codec.PropMessageExpiry, 600)
					p.Props.User = []codec.UserProperty{{Key: []byte("site"), Value: []byte("a")}, {Key: []byte("site"), Value: []byte("b")}}
					return p
				}
				xpub.Publish(props("out/p"))
				mpub.Publish(props(ns + "/in/p"))
				xsub.Expect(1)
				msub.Expect(1)
				for dir, s := range map[string]*mqtttest.Client{"out": msub, "in": xsub} {
					p := s.Expect(1)[0]
					if string(p.Props.ContentType) != "application/cbor" || string(p.Props.ResponseTopic) != "reply/to" ||
						!bytes.Equal(p.Props.CorrelationData, []byte{1, 2, 3}) || len(p.Props.User) != 2 ||
						string(p.Props.User[1].Value) != "b" || p.Props.MessageExpiry == 0 || p.Props.MessageExpiry > 600 {
						t.Errorf("%s: properties %+v", dir, p.Props)
					}
				}
			}
			xsub.Nothing()
			msub.Nothing()
		})
	}
}

// TestBridgeMosquittoBothWays: xmq and Mosquitto bridged both ways on #
// (MQTT 5 and 3.1.1): a message published on each side arrives once on
// each side, with no loop.
func TestBridgeMosquittoBothWays(t *testing.T) {
	for _, proto := range []string{"5", "3.1.1"} {
		t.Run(proto, func(t *testing.T) {
			m := startMosquitto(t, "")
			cfg := fmt.Sprintf("bridges:\n  - {name: mosq, addresses: [mqtt://%s], protocol: %q, topics: [{topic: '#', direction: both, qos: 1}]}\n", m.tcp, proto)
			x := startRun(t, "-listen", "127.0.0.1:0", "-data", "", "-web", "", "-log-format", "json", "-c", writeFile(t, cfg))
			bridgeLoopPrevention(t, x)
			xurl, murl := "mqtt://"+x.addrs[0].String(), "mqtt://"+m.tcp
			xsub := mqtttest.Dial(t, xurl, "xsub", codec.V311)
			xsub.Subscribe("#", 1)
			msub := mqtttest.Dial(t, murl, "msub", codec.V311)
			msub.Subscribe("#", 1)
			mqtttest.Dial(t, xurl, "xpub", codec.V311).Pub("from/xmq", "X", 1, false)
			mqtttest.Dial(t, murl, "mpub", codec.V311).Pub("from/mosquitto", "M", 1, false)
			bothSides(t, xsub, msub)
		})
	}
}

// TestMosquittoBridgesToXMQ: Mosquitto's own bridge (a connection with
// try_private, protocol level 0x84) connects to xmq, which takes the
// bridge bit as No Local and Retain As Published: topics go both ways on
// # without a loop.
func TestMosquittoBridgesToXMQ(t *testing.T) {
	x := startRun(t, "-listen", "127.0.0.1:0", "-data", "", "-web", "", "-log-format", "json")
	m := startMosquitto(t, fmt.Sprintf("connection toxmq\naddress %s\ntopic # both 1\nbridge_protocol_version mqttv311\n"+
		"try_private true\ncleansession false\nrestart_timeout 1\n", x.addrs[0]))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mosquitto:\n%s\nxmq:\n%s", m.log, x.stderr)
		}
	})
	waitUntil(t, "Mosquitto's bridge", func() bool {
		return regexp.MustCompile(`"msg":"client connected".*"bridge":true`).MatchString(x.stderr.String())
	})
	xurl, murl := "mqtt://"+x.addrs[0].String(), "mqtt://"+m.tcp
	probe := mqtttest.Dial(t, murl, "probe", codec.V5)
	probe.Subscribe("probe", 0)
	xpub := mqtttest.Dial(t, xurl, "xpub", codec.V5)
	// Mosquitto's bridge subscribes at xmq after its CONNACK: probe until
	// what xmq gets reaches Mosquitto.
	waitUntil(t, "Mosquitto's bridge subscription at xmq", func() bool {
		xpub.Pub("probe", "", 0, false)
		select {
		case <-probe.Msgs:
			return true
		case <-time.After(20 * time.Millisecond):
			return false
		}
	})
	msub := mqtttest.Dial(t, murl, "msub", codec.V5)
	msub.Subscribe("from/#", 1)
	xsub := mqtttest.Dial(t, xurl, "xsub", codec.V5)
	xsub.Subscribe("from/#", 1, mqtttest.RAP)
	xpub.Pub("from/xmq", "X", 1, false)
	mqtttest.Dial(t, murl, "mpub", codec.V5).Pub("from/mosquitto", "M", 1, true)
	bothSides(t, xsub, msub)
}

// bothSides checks that each of subs gets the message published on the
// xmq side (X) and the one on the Mosquitto side (M), in either order,
// once: the bridge loops nothing back.
func bothSides(t *testing.T, subs ...*mqtttest.Client) {
	t.Helper()
	for _, s := range subs {
		got := mqtttest.Payloads(s.Expect(2))
		slices.Sort(got)
		if !slices.Equal(got, []string{"M", "X"}) {
			t.Errorf("got %q", got)
		}
		s.Nothing()
	}
}
