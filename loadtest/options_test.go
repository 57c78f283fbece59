package loadtest

import (
	"strings"
	"testing"
	"time"
)

func TestOptionsURL(t *testing.T) {
	tests := []struct {
		addr, transport, wsPath string
		url, got                string
		urls                    []string // when not just url
		err                     string
	}{
		{addr: "127.0.0.1:1883", url: "mqtt://127.0.0.1:1883", got: "tcp"},
		{addr: "broker:1884", transport: "tcp", url: "mqtt://broker:1884", got: "tcp"},
		{addr: "broker", transport: "tls", url: "mqtts://broker:8883", got: "tls"},
		{addr: "broker", transport: "ws", url: "ws://broker:8083/mqtt", got: "ws"},
		{addr: "broker:9001", transport: "wss", wsPath: "ws", url: "wss://broker:9001/ws", got: "wss"},
		{addr: "::1", transport: "quic", url: "quic://[::1]:14567", got: "quic"},
		{addr: "[::1]:1883", url: "mqtt://[::1]:1883", got: "tcp"},
		{addr: "ws://b:8083", wsPath: "/mqtt", url: "ws://b:8083/mqtt", got: "ws"},
		{addr: "wss://b:8084/custom", url: "wss://b:8084/custom", got: "wss"},
		{addr: "mqtts://b:8883", transport: "tls", url: "mqtts://b:8883", got: "tls"},
		{addr: "mqtts://b:8883", transport: "ws", err: "disagrees"},
		{addr: "tcp://b", url: "tcp://b", got: "tcp"},
		{addr: "ssl://b:8883", url: "ssl://b:8883", got: "tls"},
		{addr: "tls://[::1]", transport: "tls", url: "tls://[::1]", got: "tls"},
		{addr: "ws://b:8083/", wsPath: "/x", url: "ws://b:8083/x", got: "ws"},
		{addr: "quic://b", url: "quic://b", got: "quic"},
		{addr: "http://b:80", err: "unknown scheme"},
		{addr: "mqtt://b:port:1", err: "bad host"},
		{addr: "b:1883", transport: "udp", err: "-transport"},
		{addr: ":1883", err: "no host"},
		// A list spreads connections over brokers; URL is its first.
		{addr: "127.0.0.1:1883, 127.0.0.1:1884,127.0.0.1:1885", url: "mqtt://127.0.0.1:1883", got: "tcp",
			urls: []string{"mqtt://127.0.0.1:1883", "mqtt://127.0.0.1:1884", "mqtt://127.0.0.1:1885"}},
		{addr: "a,b", transport: "ws", url: "ws://a:8083/mqtt", got: "ws", urls: []string{"ws://a:8083/mqtt", "ws://b:8083/mqtt"}},
		{addr: "mqtt://a:1883,ws://b:8083", err: "same transport"},
		{addr: "a:1883,", err: "no host"},
	}
	for _, tt := range tests {
		o := DefaultOptions()
		o.Addr, o.Transport = tt.addr, tt.transport
		if tt.wsPath != "" {
			o.WSPath = tt.wsPath
		}
		u, tr, err := o.URL()
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("URL(%q, %q) error = %v, want %q", tt.addr, tt.transport, err, tt.err)
			}
			continue
		}
		if err != nil || u != tt.url || tr != tt.got {
			t.Errorf("URL(%q, %q) = %q, %q, %v; want %q, %q", tt.addr, tt.transport, u, tr, err, tt.url, tt.got)
		}
		want := tt.urls
		if want == nil {
			want = []string{tt.url}
		}
		us, _, err := o.URLs()
		if err != nil || strings.Join(us, " ") != strings.Join(want, " ") {
			t.Errorf("URLs(%q) = %q, %v; want %q", tt.addr, us, err, want)
		}
		// Without -sub-addr the subscribers go where the publishers do.
		if sus, st, err := o.SubURLs(); strings.Join(sus, " ") != strings.Join(want, " ") || st != tr || err != nil {
			t.Errorf("SubURLs(%q) = %q, %q, %v; want URLs'", tt.addr, sus, st, err)
		}
	}
	o := DefaultOptions()
	o.SubAddr = "127.0.0.1:1884"
	if sus, _, err := o.SubURLs(); len(sus) != 1 || sus[0] != "mqtt://127.0.0.1:1884" || err != nil {
		t.Errorf("SubURLs with -sub-addr: %q %v", sus, err)
	}
	o.SubAddr = "ws://127.0.0.1:8083/mqtt"
	if _, _, err := o.SubURLs(); err == nil || !strings.Contains(err.Error(), "transport of -addr") {
		t.Errorf("SubURLs with a -sub-addr of another transport: %v, want an error", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(o *Options)
		err  string
	}{
		{"defaults", func(o *Options) {}, ""},
		{"sub-addr", func(o *Options) { o.Mode, o.SubAddr = ModePubSub, "127.0.0.1:1884" }, ""},
		{"sub-addr on another transport", func(o *Options) { o.SubAddr = "ws://127.0.0.1:8083" }, "transport of -addr"},
		{"bad sub-addr", func(o *Options) { o.SubAddr = ":1" }, "-sub-addr"},
		{"unknown mode", func(o *Options) { o.Mode = "storm" }, "-mode"},
		{"bad mqtt", func(o *Options) { o.MQTT = "4.0" }, "-mqtt"},
		{"qos 3", func(o *Options) { o.QoS = 3 }, "-qos"},
		{"no pubs", func(o *Options) { o.Pubs = 0 }, "-pubs"},
		{"pubsub no subs", func(o *Options) { o.Mode, o.Subs = ModePubSub, 0 }, "-subs"},
		{"inflight 0", func(o *Options) { o.Inflight = 0 }, "-inflight"},
		{"negative duration", func(o *Options) { o.Duration = -time.Second }, "-duration"},
		{"negative rate", func(o *Options) { o.Rate = -1 }, "-rate"},
		{"wildcard topic", func(o *Options) { o.Topic = "a/+/%i" }, "-topic"},
		{"bad filter", func(o *Options) { o.Mode, o.SubTopic = ModePubSub, "a/#/b" }, "filter"},
		{"loop outside p2p", func(o *Options) { o.Loop = true }, "-loop"},
		{"churn without subscribers", func(o *Options) { o.Churn = time.Second }, "-churn"},
		{"conn empty levels", func(o *Options) { o.Mode, o.Levels = ModeConn, nil }, "-levels"},
		{"conn zero level", func(o *Options) { o.Mode, o.Levels = ModeConn, []int{0} }, "-levels"},
		{"conn ignores pubs", func(o *Options) { o.Mode, o.Pubs = ModeConn, 0 }, ""},
		{"conn wake", func(o *Options) { o.Mode, o.Wake = ModeConn, 20 }, ""},
		{"negative wake", func(o *Options) { o.Mode, o.Wake = ModeConn, -1 }, "-wake must"},
		{"wake outside conn", func(o *Options) { o.Wake = 20 }, "-wake is for -mode conn"},
		{"wake without idle", func(o *Options) { o.Mode, o.Wake, o.WakeIdle = ModeConn, 20, 0 }, "-wake-idle"},
		{"negative wake idle", func(o *Options) { o.Mode, o.WakeIdle = ModeConn, -time.Millisecond }, "-wake-idle"},
		{"wake idle 0 while off", func(o *Options) { o.Mode, o.WakeIdle = ModeConn, 0 }, ""},
		{"dial concurrency", func(o *Options) { o.DialConcurrency = 0 }, "-dial-concurrency"},
		{"keepalive too long", func(o *Options) { o.KeepAlive = 19 * time.Hour }, "-keepalive"},
		{"payload too big", func(o *Options) { o.Payloads = []int{300 << 20} }, "-payload"},
	}
	for _, tt := range tests {
		o := DefaultOptions()
		tt.edit(&o)
		err := o.Validate()
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%s: Validate() = %v, want %q", tt.name, err, tt.err)
		}
	}
}

// TestTopicPlaceholders: %i, %c and %u as emqtt-bench has them: the
// client's number, its client id and the user name; levels that differ
// between publishers become + in the derived filter.
func TestTopicPlaceholders(t *testing.T) {
	o := DefaultOptions()
	o.token, o.User = "run1", "alice"
	o.Topic, o.Pubs, o.Subs, o.Mode = "t/%u/%c/n%i", 3, 2, ModePubSub
	if got := o.PubTopic(2); got != "t/alice/run1-p2/n2" {
		t.Errorf("PubTopic(2) = %q", got)
	}
	if got := o.SubFilter(0); got != "t/alice/+/+" {
		t.Errorf("derived filter = %q", got)
	}
	if n := newFanout(&o).of(1); n != 2 {
		t.Errorf("fan-out = %d, want both subscribers", n)
	}
	o.SubTopic = "t/%u/%c/#"
	if got := o.SubFilter(1); got != "t/alice/run1-s1/#" {
		t.Errorf("SubFilter(1) = %q", got)
	}
	if n := newFanout(&o).of(1); n != 0 {
		t.Errorf("fan-out = %d, want none (each subscriber's filter names itself)", n)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestSubFilterAndFanout(t *testing.T) {
	o := DefaultOptions()
	o.Topic, o.Pubs, o.Subs = "bench/dev%i/temp", 4, 3
	o.Mode = ModePubSub
	if f := o.SubFilter(2); f != "bench/+/temp" {
		t.Errorf("pubsub filter = %q", f)
	}
	if n := newFanout(&o).of(1); n != 3 {
		t.Errorf("pubsub fan-out = %d, want every subscriber (3)", n)
	}
	o.Mode = ModeFanIn
	if f := o.SubFilter(0); f != "$share/loadtest/bench/+/temp" {
		t.Errorf("fanin filter = %q", f)
	}
	if n := newFanout(&o).of(1); n != 1 {
		t.Errorf("fanin fan-out = %d, want one group", n)
	}
	o.Mode = ModeP2P
	if f := o.SubFilter(3); f != "bench/dev3/temp" {
		t.Errorf("p2p filter = %q", f)
	}
	// Subscriber j hears only publisher j: a filter per subscriber.
	o.Mode, o.SubTopic = ModePubSub, "bench/dev%i/temp"
	f := newFanout(&o)
	if f.of(0) != 1 || f.of(3) != 0 || f.of(99) != 0 {
		t.Errorf("per-subscriber filters: fan-out of 0, 3, 99 = %d, %d, %d; want 1, 0, 0", f.of(0), f.of(3), f.of(99))
	}
	o.SubTopic = "other/#"
	if n := newFanout(&o).of(0); n != 0 {
		t.Errorf("non-matching filter fan-out = %d", n)
	}
	o.Mode = ModePub
	if n := newFanout(&o).of(0); n != 0 {
		t.Errorf("pub mode fan-out = %d", n)
	}
}

func TestParseSrcIPs(t *testing.T) {
	ips, err := ParseSrcIPs("127.0.0.2-4, 10.0.0.1, 127.0.1.254-127.0.2.1,::1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ip := range ips {
		got = append(got, ip.String())
	}
	want := "127.0.0.2 127.0.0.3 127.0.0.4 10.0.0.1 127.0.1.254 127.0.1.255 127.0.2.0 127.0.2.1 ::1"
	if strings.Join(got, " ") != want {
		t.Errorf("ParseSrcIPs = %v, want %s", got, want)
	}
	for _, bad := range []string{"localhost", "127.0.0.9-2", "127.0.0.1-x", "::1-::2"} {
		if _, err := ParseSrcIPs(bad); err == nil {
			t.Errorf("ParseSrcIPs(%q) succeeded", bad)
		}
	}
}

func TestScenariosParseAndScale(t *testing.T) {
	for name, sc := range Scenarios {
		args := sc.Args(0.001)
		// The MQTT 3.1.1 the published test used (the default is 5), then the mode.
		if len(args) < 3 || args[0] != "-mqtt" || args[1] != "3.1.1" || args[2] != "-mode" {
			t.Errorf("%s: args %q do not start with -mqtt 3.1.1 -mode", name, args)
		}
		if sc.Name != name || sc.Source == "" || sc.About == "" {
			t.Errorf("%s: incomplete description %+v", name, sc)
		}
	}
	args := Scenarios["sharesub-50K-500-50K-50K"].Args(0.01)
	joined := strings.Join(args, " ")
	for _, want := range []string{"-pubs 500 ", "-subs 5 ", "-sub-topic $share/benchmark/test/#", "-qos 1"} {
		if !strings.Contains(joined+" ", want) {
			t.Errorf("sharesub at 0.01 = %q, missing %q", joined, want)
		}
	}
}
