package codec_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xmq-io/xmq/codec"
)

func TestValidUTF8(t *testing.T) {
	tests := []struct {
		name string
		b    string
		want bool
	}{
		{"empty", "", true},
		{"ascii", "a/b/c", true},
		{"two-byte", "ä", true},
		{"three-byte", "€", true},
		{"four-byte", "\U0001F600", true},
		{"mixed", "sensor/ä/€/\U0001F600/x", true},
		{"U+FFFF is allowed, only discouraged", "\uFFFF", true},
		{"control character is allowed, only discouraged", "a\x01b", true},
		{"U+0000 first", "\x00a", false},
		{"U+0000 last", "a\x00", false},
		{"U+0000 after non-ASCII", "ä\x00", false},
		{"overlong U+0000", "\xC0\x80", false},
		{"overlong slash", "\xC0\xAF", false},
		{"lone continuation", "\x80", false},
		{"truncated two-byte", "a\xC3", false},
		{"truncated four-byte", "\xF0\x9F\x98", false},
		{"surrogate U+D800", "\xED\xA0\x80", false},
		{"surrogate U+DFFF", "\xED\xBF\xBF", false},
		{"surrogate after ASCII", "abc\xED\xA0\x80", false},
		{"beyond U+10FFFF", "\xF4\x90\x80\x80", false},
		{"invalid byte 0xFF", "a\xFFb", false},
		{"invalid byte 0xFE", "\xFE", false},
	}
	for _, tt := range tests {
		if got := codec.ValidUTF8([]byte(tt.b)); got != tt.want {
			t.Errorf("ValidUTF8(%s %q): got %v, want %v", tt.name, tt.b, got, tt.want)
		}
	}
}

func TestValidTopicName(t *testing.T) {
	tests := []struct {
		topic string
		want  error
	}{
		{"a", nil},
		{"a/b/c", nil},
		{"/", nil},
		{"//", nil},
		{"/a", nil},
		{"a/", nil},
		{"$SYS/broker/uptime", nil},
		{"$share/g/t", nil}, // a topic name, not a filter: only wildcards are refused
		{"a b", nil},
		{"", codec.ErrTopicEmpty},
		{"+", codec.ErrTopicWildcard},
		{"#", codec.ErrTopicWildcard},
		{"a/+/b", codec.ErrTopicWildcard},
		{"a/#", codec.ErrTopicWildcard},
		{"a+", codec.ErrTopicWildcard},
		{"a#b", codec.ErrTopicWildcard},
	}
	for _, tt := range tests {
		checkErr(t, fmt.Sprintf("ValidTopicName(%q)", tt.topic), codec.ValidTopicName([]byte(tt.topic)), tt.want)
	}
}

func TestValidFilter(t *testing.T) {
	tests := []struct {
		filter string
		want   error
	}{
		{"a", nil},
		{"a/b", nil},
		{"#", nil},
		{"+", nil},
		{"a/#", nil},
		{"a/+", nil},
		{"+/+", nil},
		{"+/#", nil},
		{"/", nil},
		{"/#", nil},
		{"/+", nil},
		{"a//b", nil},
		{"+/a/+/b/#", nil},
		{"$SYS/#", nil},
		{"$share/g/a/+", nil},
		{"$share/g/#", nil},
		{"$share/group-1/a/b", nil},
		{"$sharex/a", nil}, // not the shared prefix
		{"", codec.ErrFilterInvalid},
		{"a#", codec.ErrFilterInvalid},
		{"#a", codec.ErrFilterInvalid},
		{"a/#/b", codec.ErrFilterInvalid},
		{"a/b#", codec.ErrFilterInvalid},
		{"##", codec.ErrFilterInvalid},
		{"a+", codec.ErrFilterInvalid},
		{"+a", codec.ErrFilterInvalid},
		{"a/+b/c", codec.ErrFilterInvalid},
		{"++", codec.ErrFilterInvalid},
		{"$share/", codec.ErrSharedInvalid},
		{"$share/g", codec.ErrSharedInvalid},
		{"$share/g/", codec.ErrSharedInvalid},
		{"$share//a", codec.ErrSharedInvalid},
		{"$share/+/a", codec.ErrSharedInvalid},
		{"$share/#/a", codec.ErrSharedInvalid},
		{"$share/g+/a", codec.ErrSharedInvalid},
		{"$share/g/a#", codec.ErrSharedInvalid},
		{"$share/g/a/#/b", codec.ErrSharedInvalid},
	}
	for _, tt := range tests {
		checkErr(t, fmt.Sprintf("ValidFilter(%q)", tt.filter), codec.ValidFilter([]byte(tt.filter)), tt.want)
	}
}

func TestParseShared(t *testing.T) {
	tests := []struct {
		filter       string
		group, inner string
		shared       bool
		err          error
	}{
		{"a/b", "", "a/b", false, nil},
		{"$SYS/x", "", "$SYS/x", false, nil},
		{"$share/g/a/+", "g", "a/+", true, nil},
		{"$share/g/#", "g", "#", true, nil},
		{"$share/g//", "g", "/", true, nil},
		{"$share/consumers/$SYS/x", "consumers", "$SYS/x", true, nil},
		{"$share/g", "", "", true, codec.ErrSharedInvalid},
		{"$share//a", "", "", true, codec.ErrSharedInvalid},
		{"$share/g/", "", "", true, codec.ErrSharedInvalid},
		{"$share/a+b/x", "", "", true, codec.ErrSharedInvalid},
	}
	for _, tt := range tests {
		group, inner, shared, err := codec.ParseShared([]byte(tt.filter))
		what := fmt.Sprintf("ParseShared(%q)", tt.filter)
		checkErr(t, what, err, tt.err)
		if string(group) != tt.group || string(inner) != tt.inner || shared != tt.shared {
			t.Errorf("%s: got %q %q %v, want %q %q %v", what, group, inner, shared, tt.group, tt.inner, tt.shared)
		}
		if got := codec.IsShared([]byte(tt.filter)); got != tt.shared {
			t.Errorf("IsShared(%q): got %v, want %v", tt.filter, got, tt.shared)
		}
	}
}

func TestHasWildcard(t *testing.T) {
	for f, want := range map[string]bool{"a/b": false, "a/+": true, "#": true, "$share/g/a": false, "": false} {
		if got := codec.HasWildcard([]byte(f)); got != want {
			t.Errorf("HasWildcard(%q): got %v, want %v", f, got, want)
		}
	}
}

// matchTests is the table TestMatch checks and FuzzMatch seeds from.
var matchTests = []struct {
	filter, topic string
	want          bool
}{
	// Exact.
	{"a", "a", true},
	{"a/b/c", "a/b/c", true},
	{"a/b/c", "a/b", false},
	{"a/b", "a/b/c", false},
	{"a", "ab", false},
	{"ab", "a", false},
	{"a/b", "a/c", false},
	{"a/b", "ab", false},
	{"A", "a", false}, // case sensitive
	{"/", "/", true},
	{"/a", "/a", true},
	{"/a", "a", false},
	{"a/", "a/", true},
	{"a/", "a", false},
	{"a//b", "a//b", true},
	{"a//b", "a/b", false},
	{"ä/€", "ä/€", true},

	// '+': exactly one level, which may be empty.
	{"+", "a", true},
	{"+", "a/b", false},
	{"+", "/", false},
	{"+/+", "/", true},
	{"+/+", "a/", true},
	{"+/+", "/a", true},
	{"a/+", "a/b", true},
	{"a/+", "a/", true},
	{"a/+", "a", false},
	{"a/+", "a/b/c", false},
	{"a/+/c", "a/b/c", true},
	{"a/+/c", "a//c", true},
	{"a/+/c", "a/b/d", false},
	{"+/b", "a/b", true},
	{"+/b", "/b", true},
	{"+/+/+", "a/b/c", true},
	{"+/+/+", "a/b", false},
	{"/+", "/a", true},
	{"/+", "a", false},

	// '#': the parent level and any number below it.
	{"#", "a", true},
	{"#", "a/b/c", true},
	{"#", "/", true},
	{"#", "/a", true},
	{"a/#", "a", true},
	{"a/#", "a/", true},
	{"a/#", "a/b", true},
	{"a/#", "a/b/c", true},
	{"a/#", "ab", false},
	{"a/#", "b/a", false},
	{"a/b/#", "a/b", true},
	{"a/b/#", "a", false},
	{"a/b/#", "a/c", false},
	{"/#", "/", true},
	{"/#", "/a", true},
	{"/#", "a", false},
	{"+/#", "a", true},
	{"+/#", "a/b/c", true},
	{"a/+/#", "a/b", true},
	{"a/+/#", "a", false},
	{"a//#", "a/", true},
	{"a//#", "a", false},

	// Topics starting with '$' are not matched by a leading wildcard [MQTT-4.7.2-1].
	{"#", "$SYS", false},
	{"#", "$SYS/broker", false},
	{"+", "$SYS", false},
	{"+/broker", "$SYS/broker", false},
	{"+/#", "$SYS/x", false},
	{"$SYS/#", "$SYS", true},
	{"$SYS/#", "$SYS/broker/uptime", true},
	{"$SYS/+", "$SYS/broker", true},
	{"$SYS/broker", "$SYS/broker", true},
	{"$+", "$SYS", false},   // '+' is a whole level; "$+" is literal text (and an invalid filter)
	{"a/#", "a/$SYS", true}, // only the first level is special
	{"+/$x", "a/$x", true},
	{"$", "$", true},

	// A shared filter is matched by its inner part; the prefix itself is literal text.
	{"a/+", "a/x", true},
	{"$share/g/a/+", "$share/g/a/x", true},
	{"$share/g/a/+", "a/x", false},
}

func TestMatch(t *testing.T) {
	for _, tt := range matchTests {
		if got := codec.Match([]byte(tt.filter), []byte(tt.topic)); got != tt.want {
			t.Errorf("Match(%q, %q): got %v, want %v", tt.filter, tt.topic, got, tt.want)
		}
		if ref := refMatch(tt.filter, tt.topic); ref != tt.want {
			t.Errorf("refMatch(%q, %q): got %v, want %v (the fuzz reference is wrong)", tt.filter, tt.topic, ref, tt.want)
		}
	}
	// The shared form through ParseShared, as the router uses it.
	_, inner, _, err := codec.ParseShared([]byte("$share/g/a/+"))
	checkErr(t, "ParseShared", err, nil)
	if !codec.Match(inner, []byte("a/x")) || codec.Match(inner, []byte("b/x")) {
		t.Errorf("Match of $share/g/a/+'s filter %q against a/x and b/x: want true, false", inner)
	}
}

// refMatch is the reference implementation Match is checked against: split
// both on '/' and compare level by level.
func refMatch(filter, topic string) bool {
	if strings.HasPrefix(topic, "$") && (strings.HasPrefix(filter, "+") || strings.HasPrefix(filter, "#")) {
		return false
	}
	f, tl := strings.Split(filter, "/"), strings.Split(topic, "/")
	for i, level := range f {
		if level == "#" {
			return true
		}
		if i >= len(tl) || level != "+" && level != tl[i] {
			return false
		}
	}
	return len(f) == len(tl)
}

func TestSubscribeValidate(t *testing.T) {
	s := &codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{
		{Filter: []byte("a/+")},
		{Filter: []byte("a/#/b")},
		{Filter: []byte("$share/g/x"), NoLocal: true},
		{Filter: []byte("$share//x")},
		{Filter: []byte("x"), NoLocal: true},
	}}
	want := []error{nil, codec.ErrFilterInvalid, codec.ErrSharedNoLocal, codec.ErrSharedInvalid, nil}
	got := s.Validate(nil)
	if len(got) != len(want) {
		t.Fatalf("Validate: got %d results, want %d", len(got), len(want))
	}
	for i := range want {
		checkErr(t, fmt.Sprintf("Validate[%d] %q", i, s.Subscriptions[i].Filter), got[i], want[i])
	}
	// Validate appends, so a caller can reuse its slice.
	prev := []error{codec.ErrBadQoS}
	if got := s.Validate(prev); len(got) != 1+len(want) || got[0] != codec.ErrBadQoS {
		t.Errorf("Validate(prev): got %v, want prev followed by %d results", got, len(want))
	}
}

// TestValidUTF8EveryPosition moves each kind of bad byte through every
// position of strings up to 24 bytes, so both the eight-bytes-at-a-time
// path and the byte loop see it.
func TestValidUTF8EveryPosition(t *testing.T) {
	bad := map[string]string{"U+0000": "\x00", "lone continuation": "\x80", "surrogate": "\xED\xA0\x80", "0xFF": "\xFF"}
	for n := range 25 {
		base := strings.Repeat("a", n)
		if !codec.ValidUTF8([]byte(base)) || !codec.PlainTopic([]byte(base)) {
			t.Errorf("%d ASCII letters: got invalid, want valid", n)
		}
		for i := range n + 1 {
			for name, b := range bad {
				s := base[:i] + b + base[i:]
				if codec.ValidUTF8([]byte(s)) {
					t.Errorf("ValidUTF8(%q) with %s at %d: got true, want false", s, name, i)
				}
				if codec.PlainTopic([]byte(s)) {
					t.Errorf("PlainTopic(%q): got true, want false", s)
				}
			}
			for _, w := range []string{"+", "#"} {
				s := base[:i] + w + base[i:]
				if codec.PlainTopic([]byte(s)) {
					t.Errorf("PlainTopic(%q): got true, want false", s)
				}
			}
			s := base[:i] + "ä€" + base[i:]
			if !codec.ValidUTF8([]byte(s)) {
				t.Errorf("ValidUTF8(%q): got false, want true", s)
			}
			if codec.PlainTopic([]byte(s)) {
				t.Errorf("PlainTopic(%q): got true for non-ASCII, want false", s)
			}
		}
	}
	// Every byte value next to a word boundary: PlainTopic must agree with the slow rules.
	for c := range 256 {
		s := []byte("sensors/" + string(rune(0)) + "x")
		s[8] = byte(c)
		slow := codec.ValidUTF8(s) && codec.ValidTopicName(s) == nil
		if codec.PlainTopic(s) && !slow {
			t.Errorf("PlainTopic(%q): got true, but the topic is invalid", s)
		}
		if c > 0 && c < 0x80 && c != '+' && c != '#' && !codec.PlainTopic(s) {
			t.Errorf("PlainTopic(%q): got false for a plain ASCII topic", s)
		}
	}
}
