package cluster

import (
	"slices"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/xmq-io/xmq/codec"
)

func TestSubject(t *testing.T) {
	tests := []struct{ topic, subject string }{
		{"a/b/c", "mqtt.a.b.c"},
		{"a", "mqtt.a"},
		{"/a", "mqtt.%.a"},
		{"a/", "mqtt.a.%"},
		{"a//b", "mqtt.a.%.b"},
		{"/", "mqtt.%.%"},
		{"a.b/c d", "mqtt.a%2Eb.c%20d"},
		{"*/>/x*y", "mqtt.%2A.%3E.x%2Ay"},
		{"100%", "mqtt.100%25"},
		{"tab\there", "mqtt.tab%09here"},
		{"$SYS/broker", "mqtt$.$SYS.broker"},
		{"$", "mqtt$.$"},
		{"a/$b", "mqtt.a.$b"},
		{"温度/sensör", "mqtt.温度.sensör"},
	}
	for _, tt := range tests {
		if got := Subject("mqtt", tt.topic); got != tt.subject {
			t.Errorf("Subject(%q) = %q, want %q", tt.topic, got, tt.subject)
		}
		if !server.IsValidLiteralSubject(tt.subject) {
			t.Errorf("%q is not a valid literal NATS subject", tt.subject)
		}
		back, err := Topic("mqtt", tt.subject)
		if err != nil || back != tt.topic {
			t.Errorf("Topic(%q) = %q, %v; want %q", tt.subject, back, err, tt.topic)
		}
	}
}

func TestTopicRefuses(t *testing.T) {
	for _, s := range []string{
		"other.a", "mqtt", "mqtt.", "mqtt.a..b", "mqtt.*", "mqtt.>", "mqtt.a+b", "mqtt.a#",
		"mqtt.%2", "mqtt.%zz", "mqtt.%41", // %41 is 'A', which is never escaped
		"mqtt.%2e",                   // lower-case hex is not the mapping's spelling
		"mqtt.$SYS.x", "mqtt$.SYS.x", // '$' topics only under their own root
		"mqtt.%00", "mqtt.\xff", // not an MQTT UTF-8 string
	} {
		if got, err := Topic("mqtt", s); err == nil {
			t.Errorf("Topic(%q) = %q, want an error", s, got)
		}
	}
}

func TestFilterSubjects(t *testing.T) {
	tests := []struct {
		filter string
		want   []string
	}{
		{"a/b", []string{"mqtt.a.b"}},
		{"a/+/c", []string{"mqtt.a.*.c"}},
		{"+", []string{"mqtt.*"}},
		{"#", []string{"mqtt.>"}},
		{"a/#", []string{"mqtt.a.>", "mqtt.a"}},
		{"+/#", []string{"mqtt.*.>", "mqtt.*"}},
		{"a//#", []string{"mqtt.a.%.>", "mqtt.a.%"}},
		{"$SYS/#", []string{"mqtt$.$SYS.>", "mqtt$.$SYS"}},
		{"a.b/ /#", []string{"mqtt.a%2Eb.%20.>", "mqtt.a%2Eb.%20"}},
	}
	for _, tt := range tests {
		got := FilterSubjects("mqtt", tt.filter)
		if !slices.Equal(got, tt.want) {
			t.Errorf("FilterSubjects(%q) = %q, want %q", tt.filter, got, tt.want)
		}
		for _, s := range got {
			if !server.IsValidSubject(s) {
				t.Errorf("%q is not a valid NATS subject", s)
			}
		}
	}
}

// matches reports whether a NATS subscription to subjects receives subject.
func matches(subjects []string, subject string) bool {
	for _, s := range subjects {
		if server.SubjectMatchesFilter(subject, s) {
			return true
		}
	}
	return false
}

// TestMappingKeepsMatching checks that NATS matching of the mapped
// subjects is MQTT matching of the topics, '$' rule and parent level included.
func TestMappingKeepsMatching(t *testing.T) {
	topics := []string{"a", "a/b", "a/b/c", "/a", "a/", "$SYS/x", "$SYS", "b/a", "a.b", "a/b.c", "a/*", "a/>"}
	filters := []string{"#", "+", "a/#", "a/+", "+/+", "$SYS/#", "+/b", "a/b/#", "a.b", "a/+/c", "/+", "+/"}
	for _, f := range filters {
		subs := FilterSubjects("mqtt", f)
		for _, topic := range topics {
			want := codec.Match([]byte(f), []byte(topic))
			if got := matches(subs, Subject("mqtt", topic)); got != want {
				t.Errorf("filter %q (%q) on topic %q (%q): NATS match %v, MQTT match %v", f, subs, topic, Subject("mqtt", topic), got, want)
			}
		}
	}
}

func FuzzSubject(f *testing.F) {
	for _, s := range []string{"a/b", "", "/", "a.b c", "$SYS/x", "%%", "*>", "\x00", "\xff", "a//b/"} {
		f.Add(s, "a/+/#")
	}
	f.Fuzz(func(t *testing.T, topic, filter string) {
		if codec.ValidTopicName([]byte(topic)) != nil || !codec.ValidUTF8([]byte(topic)) {
			return
		}
		s := Subject("mqtt", topic)
		if !server.IsValidLiteralSubject(s) || !server.IsValidSubject(s) {
			t.Fatalf("Subject(%q) = %q: not a valid NATS subject", topic, s)
		}
		back, err := Topic("mqtt", s)
		if err != nil || back != topic {
			t.Fatalf("Topic(Subject(%q)) = %q, %v", topic, back, err)
		}
		if codec.ValidFilter([]byte(filter)) != nil || !codec.ValidUTF8([]byte(filter)) || codec.IsShared([]byte(filter)) {
			return
		}
		subs := FilterSubjects("mqtt", filter)
		for _, sub := range subs {
			if !server.IsValidSubject(sub) {
				t.Fatalf("FilterSubjects(%q) = %q: not valid", filter, subs)
			}
		}
		if want := codec.Match([]byte(filter), []byte(topic)); matches(subs, s) != want {
			t.Fatalf("filter %q topic %q: NATS match %v, MQTT match %v", filter, topic, !want, want)
		}
	})
}
