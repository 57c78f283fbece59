package bridge

import (
	"strconv"
	"testing"
	"time"
)

func TestPickAndMap(t *testing.T) {
	rs := newRules([]Rule{
		{Topic: "sensors/#", Direction: Out, QoS: 1, LocalPrefix: "", RemotePrefix: "site1/"},
		{Topic: "sensors/temp/#", Direction: Out, QoS: 2}, // overlaps the first: its copies are not forwarded
		{Topic: "cmd/#", Direction: In, QoS: 1, LocalPrefix: "cloud/", RemotePrefix: "site1/"},
		{Topic: "", Direction: Both, LocalPrefix: "a/b", RemotePrefix: "x/y"}, // whole topics as prefixes
	})
	tests := []struct {
		name   string
		out    bool
		topic  string
		subIDs []uint32
		ok     bool
		mapped string
	}{
		{"out via first rule", true, "sensors/temp/1", nil, true, "site1/sensors/temp/1"},
		{"out, first rule's copy", true, "sensors/temp/1", []uint32{1}, true, "site1/sensors/temp/1"},
		{"out, overlapping rule's copy", true, "sensors/temp/1", []uint32{2}, false, ""},
		{"out, copy of a rule that does not match (older configuration)", true, "sensors/x", []uint32{3}, true, "site1/sensors/x"},
		{"out, no rule", true, "other", nil, false, ""},
		{"out, in-only rule does not forward out", true, "cloud/cmd/x", nil, false, ""},
		{"in with prefixes swapped", false, "site1/cmd/reboot", []uint32{3}, true, "cloud/cmd/reboot"},
		{"in, out-only rule does not forward in", false, "site1/sensors/x", nil, false, ""},
		{"both, whole topic out", true, "a/b", []uint32{4}, true, "x/y"},
		{"both, whole topic in", false, "x/y", nil, true, "a/b"},
		{"both, no match past the prefix", false, "x/y/z", nil, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r *rule
			var ok bool
			if tt.out {
				r, ok = rs.pickOut([]byte(tt.topic), tt.subIDs)
			} else {
				r, ok = rs.pickIn([]byte(tt.topic), tt.subIDs)
			}
			if ok != tt.ok {
				t.Fatalf("forward = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			var got []byte
			if tt.out {
				got = r.remoteTopic(nil, []byte(tt.topic))
			} else {
				got = r.localTopic(nil, []byte(tt.topic))
			}
			if string(got) != tt.mapped {
				t.Errorf("mapped to %q, want %q", got, tt.mapped)
			}
		})
	}
	if got := rs.outFilters(); len(got) != 3 || got[0] != "sensors/#" || got[2] != "a/b" {
		t.Errorf("out filters %q", got)
	}
	if got := rs.inFilters(); len(got) != 2 || got[0] != "site1/cmd/#" || got[1] != "x/y" {
		t.Errorf("in filters %q", got)
	}
}

func TestOverlapAndLoopable(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"#", "a/b", true},
		{"a/#", "a", true},
		{"a/+", "a/b", true},
		{"a/+", "a/b/c", false},
		{"a/b", "a/c", false},
		{"+/b", "a/+", true},
		{"a/b/#", "a/c/#", false},
		{"a", "a", true},
		{"a/b", "a", false},
	} {
		if got := overlap(tt.a, tt.b); got != tt.want {
			t.Errorf("overlap(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := overlap(tt.b, tt.a); got != tt.want {
			t.Errorf("overlap(%q, %q) = %v, want %v", tt.b, tt.a, got, tt.want)
		}
	}
	if newRules([]Rule{{Topic: "a/#", Direction: Out}, {Topic: "b/#", Direction: In}}).loopable() {
		t.Error("disjoint out and in rules are loopable")
	}
	if !newRules([]Rule{{Topic: "#", Direction: Both}}).loopable() {
		t.Error("a both rule is not loopable")
	}
	// The remote filters count, not the local ones.
	if newRules([]Rule{{Topic: "t", Direction: Out, RemotePrefix: "up/"}, {Topic: "t", Direction: In, RemotePrefix: "down/"}}).loopable() {
		t.Error("rules on different remote topics are loopable")
	}
}

func TestOriginTracker(t *testing.T) {
	o := newOriginTracker()
	now := time.Unix(1000, 0)
	o.sent([]byte("t"), []byte("p"), now)
	o.sent([]byte("t"), []byte("p"), now)
	if o.echo([]byte("t"), []byte("q"), now) || o.echo([]byte("u"), []byte("p"), now) || o.echo([]byte("tp"), nil, now) {
		t.Fatal("another topic or payload taken for an echo")
	}
	if !o.echo([]byte("t"), []byte("p"), now) || !o.echo([]byte("t"), []byte("p"), now) {
		t.Fatal("the two messages sent are not recognised")
	}
	if o.echo([]byte("t"), []byte("p"), now) {
		t.Fatal("a third copy recognised: each message sent is recognised once")
	}
	// A message sent after the first two came back is recognised after
	// they expire from the ring.
	o.sent([]byte("t"), []byte("p"), now.Add(originTTL/2))
	if !o.echo([]byte("t"), []byte("p"), now.Add(originTTL+time.Second)) {
		t.Fatal("the third message sent is not recognised once the older entries expired")
	}
	if o.echo([]byte("t"), []byte("p"), now.Add(3*originTTL)) || len(o.counts) != 0 || o.n != 0 {
		t.Fatalf("expired: counts %v, ring %d", o.counts, o.n)
	}
	// Bounded: the oldest fingerprints go first.
	for i := range originSize + 10 {
		o.sent([]byte("t"), []byte(strconv.Itoa(i)), now)
	}
	if o.n != originSize || o.echo([]byte("t"), []byte("0"), now) || !o.echo([]byte("t"), []byte(strconv.Itoa(originSize+9)), now) {
		t.Fatalf("ring of %d: the oldest must be forgotten, the newest kept", o.n)
	}
}
