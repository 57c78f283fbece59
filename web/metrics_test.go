package web

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"xmq/codec"
	"xmq/core"
)

// countingConn counts the bytes a test client writes and reads.
type countingConn struct {
	net.Conn
	written, read *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// pipeClient is an MQTT client of a core.Server over net.Pipe.
type pipeClient struct {
	t       *testing.T
	conn    net.Conn
	r       *codec.Reader
	version byte
}

// dial connects a client; it returns the CONNACK's reason code.
func dial(t *testing.T, srv *core.Server, listener string, c codec.Connect, written, read *atomic.Int64) (*pipeClient, codec.ReasonCode) {
	t.Helper()
	client, server := net.Pipe()
	srv.ServeConn(server, listener)
	cc := countingConn{Conn: client, written: written, read: read}
	t.Cleanup(func() { _ = client.Close() })
	_ = client.SetDeadline(time.Now().Add(10 * time.Second))
	pc := &pipeClient{t: t, conn: cc, r: codec.NewReader(bufio.NewReader(cc), 0), version: c.ProtocolVersion}
	pc.r.Version = c.ProtocolVersion
	pc.send(&c)
	ack, ok := pc.next().(*codec.Connack)
	if !ok {
		t.Fatal("no CONNACK")
	}
	return pc, ack.ReasonCode
}

func (c *pipeClient) send(p interface{ Append([]byte, byte) []byte }) {
	c.t.Helper()
	if _, err := c.conn.Write(p.Append(nil, c.version)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *pipeClient) next() codec.Packet {
	c.t.Helper()
	p, err := c.r.ReadPacket()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return p
}

// refuse turns away the user name "intruder".
type refuse struct{}

func (refuse) Authenticate(_, username string, _ []byte, _ net.Addr, _ string) error {
	if username == "intruder" {
		return codec.BadUserNameOrPassword
	}
	return nil
}

// scrape fetches /metrics and parses it with the Prometheus text parser.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != 200 {
		t.Fatalf("/metrics: %d", w.Code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(w.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// value returns the value of name{labels} ("k=v,k=v"), or an error.
func value(fams map[string]*dto.MetricFamily, name, labels string) (float64, error) {
	f := fams[name]
	if f == nil {
		return 0, fmt.Errorf("no metric %s", name)
	}
	for _, m := range f.Metric {
		var ls []string
		for _, l := range m.Label {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		sort.Strings(ls)
		if strings.Join(ls, ",") != labels {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), nil
		case m.Gauge != nil:
			return m.Gauge.GetValue(), nil
		case m.Untyped != nil:
			return m.Untyped.GetValue(), nil
		}
	}
	return 0, fmt.Errorf("no series %s{%s}", name, labels)
}

func TestMetricsMatchTraffic(t *testing.T) {
	srv, err := core.New(core.Options{SysInterval: -1}, core.Config{Authenticator: refuse{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	s := newTestServer(t, srv, func(o *Options) {
		o.Listeners = []Listener{{Name: "tcp", Transport: "tcp", Address: "127.0.0.1:1883"}, {Name: "ws", Transport: "ws", Address: "127.0.0.1:8083"}}
	})
	var written, read atomic.Int64

	// A 3.1.1 subscriber, an MQTT 5 publisher, a refused intruder.
	sub, rc := dial(t, srv, "tcp", codec.Connect{ProtocolVersion: codec.V311, CleanStart: true, ClientID: []byte("sub")}, &written, &read)
	if rc != codec.Success {
		t.Fatalf("sub CONNACK %v", rc)
	}
	sub.send(&codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{{Filter: []byte("t/#"), QoS: 1}}})
	if _, ok := sub.next().(*codec.Suback); !ok {
		t.Fatal("no SUBACK")
	}
	pub, rc := dial(t, srv, "ws", codec.Connect{ProtocolVersion: codec.V5, CleanStart: true, ClientID: []byte("pub")}, &written, &read)
	if rc != codec.Success {
		t.Fatalf("pub CONNACK %v", rc)
	}
	_, rc = dial(t, srv, "tcp", codec.Connect{ProtocolVersion: codec.V5, ClientID: []byte("x"), UsernameFlag: true, Username: []byte("intruder")}, &written, &read)
	if rc != codec.BadUserNameOrPassword {
		t.Fatalf("intruder CONNACK %v", rc)
	}

	pub.send(&codec.Publish{Topic: []byte("t/a"), Payload: []byte("hello")})
	pub.send(&codec.Publish{Topic: []byte("t/b"), QoS: 1, PacketID: 7, Payload: []byte("world")})
	pub.send(&codec.Publish{Topic: []byte("nobody/listens"), Payload: []byte("void")})
	if a, ok := pub.next().(*codec.Ack); !ok || a.PacketID != 7 {
		t.Fatal("no PUBACK")
	}
	for range 2 {
		p, ok := sub.next().(*codec.Publish)
		if !ok {
			t.Fatal("subscriber got no PUBLISH")
		}
		if p.QoS == 1 {
			sub.send(&codec.Ack{Kind: codec.PUBACK, PacketID: p.PacketID})
		}
	}
	pub.send(&codec.Disconnect{})
	if _, err := pub.r.ReadPacket(); !errors.Is(err, io.EOF) {
		t.Fatalf("after DISCONNECT: %v, want EOF", err)
	}
	if err := srv.Publish("r/1", []byte("kept"), 0, true); err != nil {
		t.Fatal(err)
	}

	// What the test did, as the metrics must show it. Byte counts are
	// exact: every byte a client wrote the broker read, and every byte
	// the broker wrote a client read.
	want := func() map[string]float64 {
		return map[string]float64{
			"xmq_connected_clients":                          1,
			"xmq_connections|listener=tcp,transport=tcp":     1,
			"xmq_connections|listener=ws,transport=ws":       0,
			"xmq_connects_total":                             2,
			"xmq_disconnects_total|reason=normal":            1,
			"xmq_disconnects_total|reason=auth_failure":      1,
			"xmq_disconnects_total|reason=keepalive_timeout": 0,
			"xmq_auth_failures_total":                        1,
			"xmq_messages_received_total|qos=0":              2,
			"xmq_messages_received_total|qos=1":              1,
			"xmq_messages_received_total|qos=2":              0,
			"xmq_messages_sent_total|qos=0":                  1,
			"xmq_messages_sent_total|qos=1":                  1,
			"xmq_deliveries_total":                           2,
			"xmq_messages_dropped_total|cause=queue_full":    0,
			"xmq_subscriptions":                              1,
			"xmq_sessions":                                   1,
			"xmq_retained_messages":                          1,
			"xmq_received_bytes_total":                       float64(written.Load()),
			"xmq_sent_bytes_total":                           float64(read.Load()),
			"xmq_build_info|version=test":                    1,
		}
	}
	var problems []string
	deadline := time.Now().Add(5 * time.Second)
	for {
		problems = problems[:0]
		fams := scrape(t, s.Handler())
		for key, w := range want() {
			name, labels, _ := strings.Cut(key, "|")
			got, err := value(fams, name, labels)
			if err != nil {
				problems = append(problems, err.Error())
			} else if got != w {
				problems = append(problems, fmt.Sprintf("%s = %v, want %v", key, got, w))
			}
		}
		for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "xmq_uptime_seconds"} {
			if fams[name] == nil {
				problems = append(problems, "no "+name)
			}
		}
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // the broker finishes the disconnects on its goroutines
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}
