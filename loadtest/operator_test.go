package loadtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/certs/certstest"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/mqtttest"
	"github.com/xmq-io/xmq/listeners"
	"github.com/xmq-io/xmq/loadtest"
)

// TestTLSHints: a run whose clients do not accept the broker's
// certificate says which flag fixes it: -cafile (naming xmq's development
// CA) or -insecure for an unknown CA, the names the certificate covers
// for a host name it does not.
func TestTLSHints(t *testing.T) {
	ca := certstest.NewCA(t)
	for _, tt := range []struct {
		name  string
		hosts []string // the server certificate's names
		edit  func(o *loadtest.Options)
		want  []string
	}{
		{"unknown CA", nil, func(o *loadtest.Options) {}, []string{"-cafile data/certs/ca.pem", "-insecure"}},
		{"wrong name", []string{"broker.example"}, func(o *loadtest.Options) { o.CAFile = ca.WriteCAFile() },
			[]string{"not valid for 127.0.0.1", "broker.example", "xmq certs -host 127.0.0.1", "-insecure"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, err := listeners.Listen(listeners.Options{Transport: listeners.TransportTLS, Address: "127.0.0.1:0",
				TLS: ca.ServerConfig(tt.hosts...)})
			if err != nil {
				t.Fatal(err)
			}
			b := startBroker(t, l, "mqtts://"+l.Addr().String())
			for _, mode := range []loadtest.Mode{loadtest.ModePub, loadtest.ModeConn} {
				o := opts(mode, func(o *loadtest.Options) { o.Pubs, o.Levels, o.Hold = 1, []int{2}, 0; tt.edit(o) })
				o.Addr, o.IDPrefix = b.url, "tlshint"
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				rep, err := loadtest.Run(ctx, o, loadtest.Config{})
				cancel()
				text := ""
				if err != nil {
					text = err.Error()
				}
				if rep != nil {
					var sb strings.Builder
					_ = loadtest.WriteText(&sb, rep)
					text += sb.String()
				}
				for _, w := range tt.want {
					if !strings.Contains(text, w) {
						t.Errorf("%s mode: %q missing from\n%s", mode, w, text)
					}
				}
			}
		})
	}
}

// denyTopic is an Authorizer that refuses publishes to one topic.
type denyTopic string

func (d denyTopic) CanPublish(_, _, topic string) bool { return topic != string(d) }
func (d denyTopic) CanWill(_, _, _ string) bool        { return true }
func (d denyTopic) CanSubscribe(_, _, _ string) bool   { return true }
func (d denyTopic) ReadsAll(_, _, _ string) bool       { return true }
func (d denyTopic) CanRead(_, _, _ string) bool        { return true }
func (d denyTopic) Generation() uint64                 { return 0 }

// TestRefusedPublishes311: a broker that refuses one publisher's topic
// acknowledges its QoS 1 publishes all the same under MQTT 3.1.1; the
// report says 3.1.1 cannot show a refusal, suggests -mqtt 5, and finds the
// missing deliveries by checking them against the acknowledged publishes.
// Under MQTT 5 the refusals are counted by reason code instead.
func TestRefusedPublishes311(t *testing.T) {
	l, err := listeners.ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := core.New(core.Options{SysInterval: -1}, core.Config{Authorizer: denyTopic("loadtest/1")})
	if err != nil {
		t.Fatal(err)
	}
	mqtttest.Serve(t, srv, l, "test", core.ErrServerClosed)
	runVersion := func(version string) (*loadtest.Report, string) {
		o := opts(loadtest.ModePubSub, func(o *loadtest.Options) {
			o.Pubs, o.Subs, o.QoS, o.Rate, o.MQTT, o.Duration, o.Drain = 2, 1, 1, 50, version, 300*time.Millisecond, time.Second
		})
		o.Addr, o.IDPrefix = "mqtt://"+l.Addr().String(), "refused"+version
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		rep, err := loadtest.Run(ctx, o, loadtest.Config{})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		var sb strings.Builder
		_ = loadtest.WriteText(&sb, rep)
		return rep, sb.String()
	}
	rep, text := runVersion("3.1.1")
	c := rep.Cases[0]
	if c.Acked != c.Published || c.LostMessages == 0 || c.ErrorTotal() != 0 {
		t.Fatalf("3.1.1: published %d acked %d lost %d errors %v: want every publish acknowledged and some lost", c.Published, c.Acked, c.LostMessages, c.Errors)
	}
	for _, want := range []string{"MQTT 3.1.1 has no reason codes", "-mqtt 5", "never arrived although the broker acknowledged every publish"} {
		if !strings.Contains(text, want) {
			t.Errorf("3.1.1 report lacks %q:\n%s", want, text)
		}
	}
	rep, text = runVersion("5")
	if c := rep.Cases[0]; c.Errors["PUBACK not authorized"] == 0 || strings.Contains(text, "no reason codes") {
		t.Errorf("MQTT 5: errors %v; report:\n%s", c.Errors, text)
	}
}
