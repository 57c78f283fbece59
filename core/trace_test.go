package core_test

import (
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// hasLine reports whether some line of b holds every one of parts.
func hasLine(b *mqtttest.Buffer, parts ...string) bool {
	for _, l := range b.Lines() {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			return true
		}
	}
	return false
}

func startTrace(t *testing.T, srv *core.Server, spec core.TraceSpec) (*core.Trace, *mqtttest.Buffer, chan string) {
	t.Helper()
	if spec.Duration == 0 {
		spec.Duration = time.Minute
	}
	if spec.MaxBytes == 0 {
		spec.MaxBytes = 1 << 20
	}
	buf := &mqtttest.Buffer{}
	done := make(chan string, 1)
	tr, err := srv.StartTrace(spec, buf, func(why string) { done <- why })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Stop)
	return tr, buf, done
}

// TestTraceClient: a trace of a client id writes every packet of that
// client, both ways, with its fields (never the password), and nothing of
// any other client; Stop ends it with a last line.
func TestTraceClient(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	tr, buf, done := startTrace(t, srv, core.TraceSpec{ClientID: "sensor-7", Payload: true})
	other := client(t, srv, codec.V5, "other")
	other.Subscribe(1, "t/#")
	c := client(t, srv, codec.V5, "sensor-7", func(p *codec.Connect) {
		p.UsernameFlag, p.Username, p.PasswordFlag, p.Password = true, []byte("alice"), true, []byte("s3cret")
	})
	c.Subscribe(1, "cmd/#")
	c.Pub("t/1", "hi", 1)
	other.Recv(1)
	other.Pub("cmd/x", "go", 0)
	c.Recv(1)
	tr.Stop()
	if why := <-done; why != "stopped" {
		t.Errorf("done(%q), want stopped", why)
	}
	for _, want := range [][]string{
		{`"sensor-7"`, " in CONNECT ", "protocol=5", `username="alice"`, "password=true", "clean_start=true"},
		{`"sensor-7"`, " out CONNACK ", "rc=success"},
		{" in SUBSCRIBE ", `filters=["cmd/#":1]`},
		{" out SUBACK ", "codes=[0x1]"},
		{" in PUBLISH ", `topic="t/1"`, "qos=1", "payload_bytes=2", "payload=6869"},
		{" out PUBACK "},
		{" out PUBLISH ", `topic="cmd/x"`, "qos=0", "payload_bytes=2"},
		{"# trace ended: stopped"},
	} {
		if !hasLine(buf, want...) {
			t.Errorf("no trace line with %q:\n%s", want, strings.Join(buf.Lines(), "\n"))
		}
	}
	for _, l := range buf.Lines() {
		if strings.Contains(l, `"other"`) || strings.Contains(l, "s3cret") {
			t.Errorf("trace line %q: another client or the password", l)
		}
	}
	n := len(buf.Lines())
	c.Pub("t/2", "after", 0)
	other.Recv(1)
	if len(buf.Lines()) != n {
		t.Errorf("lines after Stop:\n%s", strings.Join(buf.Lines()[n:], "\n"))
	}
}

// TestTraceStartsOnConnectedClients: a trace started while its client is
// connected follows it from then on; one started for a topic follows the
// matching packets of every connection.
func TestTraceStartsOnConnectedClients(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	a := client(t, srv, codec.V311, "a")
	b := client(t, srv, codec.V311, "b")
	b.Subscribe(0, "#")
	_, byID, _ := startTrace(t, srv, core.TraceSpec{ClientID: "a"})
	_, byTopic, _ := startTrace(t, srv, core.TraceSpec{TopicFilter: "alarm/+"})
	a.Pub("alarm/fire", "x", 0)
	a.Pub("status", "y", 0)
	b.Recv(2)
	if !hasLine(byID, `"a"`, " in PUBLISH ", `topic="alarm/fire"`) || !hasLine(byID, `"a"`, " in PUBLISH ", `topic="status"`) {
		t.Errorf("client trace:\n%s", strings.Join(byID.Lines(), "\n"))
	}
	if !hasLine(byTopic, `"a"`, " in PUBLISH ", `topic="alarm/fire"`) || !hasLine(byTopic, `"b"`, " out PUBLISH ", `topic="alarm/fire"`) {
		t.Errorf("topic trace lacks the alarm both ways:\n%s", strings.Join(byTopic.Lines(), "\n"))
	}
	if hasLine(byTopic, "status") || hasLine(byTopic, "PINGREQ") {
		t.Errorf("topic trace holds other packets:\n%s", strings.Join(byTopic.Lines(), "\n"))
	}
}

// TestTraceLimits: a trace stops itself at its size limit and at the end
// of its duration, and says so.
func TestTraceLimits(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	_, small, done := startTrace(t, srv, core.TraceSpec{ClientID: "chatty", MaxBytes: 600})
	c := client(t, srv, codec.V311, "chatty")
	for range 20 {
		c.Pub("t", "0123456789", 0)
	}
	select {
	case why := <-done:
		if why != "size limit reached" {
			t.Errorf("stopped: %q", why)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the size limit did not stop the trace")
	}
	if !hasLine(small, "# trace ended: size limit reached") {
		t.Errorf("no last line:\n%s", strings.Join(small.Lines(), "\n"))
	}
	_, _, done = startTrace(t, srv, core.TraceSpec{ClientID: "chatty", Duration: 50 * time.Millisecond})
	select {
	case why := <-done:
		if why != "duration ended" {
			t.Errorf("stopped: %q", why)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the duration did not stop the trace")
	}
}

func TestTraceSpecValidate(t *testing.T) {
	for _, spec := range []core.TraceSpec{
		{Duration: time.Second, MaxBytes: 1},
		{ClientID: "a", Username: "b", Duration: time.Second, MaxBytes: 1},
		{ClientID: "a", MaxBytes: 1},
		{ClientID: "a", Duration: time.Second},
		{TopicFilter: "a/#/b", Duration: time.Second, MaxBytes: 1},
	} {
		if err := spec.Validate(); err == nil {
			t.Errorf("%+v is valid", spec)
		}
	}
}
