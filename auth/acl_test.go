package auth

import (
	"strings"
	"testing"

	"github.com/xmq-io/xmq/codec"
)

const testACL = `# Mosquitto-style ACL file used by the tests.

# Anonymous clients: the rules before the first user line.
topic read public/#
topic deny public/secret

user alice
topic readwrite sensors/#
topic write alerts/+
  topic deny sensors/private/#
topic read $SYS/#

user bob
topic sensors/bob/#
topic read #

user carol smith
topic write spaced name

# Patterns apply to every client, wherever they stand.
pattern readwrite devices/%c/#
pattern read users/%u/inbox
pattern write fleet/%u-%c/status
`

func mustACL(t *testing.T, text string) *aclSet {
	t.Helper()
	s, err := parseACL([]byte(text))
	if err != nil {
		t.Fatalf("parseACL: %v", err)
	}
	return s
}

func TestACLPublish(t *testing.T) {
	s := mustACL(t, testACL)
	withDeny := mustACL(t, testACL+"pattern deny devices/%c/config\n")
	tests := []struct {
		name              string
		set               *aclSet
		client, user, top string
		want              bool
	}{
		{"anonymous read-only rule", s, "dev1", "", "public/news", false},
		{"anonymous pattern %c", s, "dev1", "", "devices/dev1/temp", true},
		{"anonymous other device", s, "dev1", "", "devices/dev2/temp", false},
		{"anonymous %u never matches", s, "dev1", "", "users//inbox", false},
		{"user readwrite", s, "a1", "alice", "sensors/room1/temp", true},
		{"user parent of #", s, "a1", "alice", "sensors", true},
		{"user deny wins", s, "a1", "alice", "sensors/private/key", false},
		{"deny covers its parent", s, "a1", "alice", "sensors/private", false},
		{"user write +", s, "a1", "alice", "alerts/fire", true},
		{"+ is one level", s, "a1", "alice", "alerts/fire/now", false},
		{"read-only $SYS", s, "a1", "alice", "$SYS/broker/uptime", false},
		{"user gets no anonymous rules", s, "a1", "alice", "public/news", false},
		{"user gets patterns", s, "a1", "alice", "devices/a1/x", true},
		{"default readwrite", s, "b1", "bob", "sensors/bob/t", true},
		{"read # is not write", s, "b1", "bob", "anything", false},
		{"user name with spaces", s, "c1", "carol smith", "spaced name", true},
		{"topic with space", s, "c1", "carol", "spaced name", false},
		{"unknown user: patterns only", s, "z1", "zed", "devices/z1/a", true},
		{"unknown user", s, "z1", "zed", "sensors/x", false},
		{"mixed pattern level", s, "b1", "bob", "fleet/bob-b1/status", true},
		{"mixed pattern other", s, "b1", "bob", "fleet/bob-b2/status", false},
		{"%c is literal in topic rules", mustACL(t, "topic write a/%c\n"), "x", "", "a/%c", true},
		{"dangerous id: no pattern grant", s, "a/b", "alice", "devices/a/b/x", false},
		{"dangerous id: user rules still apply", s, "a+", "alice", "sensors/x", true},
		{"dangerous user name", s, "ok", "ev/il", "devices/ok/x", false},
		{"pattern deny beats pattern allow", withDeny, "d1", "", "devices/d1/config", false},
		{"user allow beats pattern deny (Mosquitto's order)", mustACL(t, "user u\ntopic write #\npattern deny private/%u/#\n"), "c", "u", "private/u/x", true},
		{"pattern deny when the own rules say nothing", mustACL(t, "user u\ntopic write a\npattern deny private/%u/#\npattern write private/#\n"), "c", "u", "private/u/x", false},
		{"read-only own rule falls through to patterns", mustACL(t, "user u\ntopic read #\npattern write x/%u\n"), "c", "u", "x/u", true},
		{"pattern deny spares others", withDeny, "d1", "", "devices/d1/temp", true},
		{"dangerous id and a pattern deny: nothing", withDeny, "a#", "alice", "sensors/x", false},
		{"$ topic needs a $ rule", mustACL(t, "topic #\n"), "c", "", "$SYS/x", false},
		{"+ does not match $", mustACL(t, "topic +/x\n"), "c", "", "$SYS/x", false},
		{"$ rule", mustACL(t, "topic $SYS/#\n"), "c", "", "$SYS/x", true},
		{"empty file denies", mustACL(t, "# nothing\n"), "c", "", "a", false},
		{"empty level", mustACL(t, "topic a//b\n"), "c", "", "a//b", true},
		{"leading slash", mustACL(t, "topic /a/+\n"), "c", "", "/a/b", true},
		{"multiple user sections merge", mustACL(t, "user u\ntopic a\nuser v\ntopic b\nuser u\ntopic c\n"), "x", "u", "c", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := tt.set.canPublish(tt.client, tt.user, tt.top); got != tt.want {
				t.Errorf("canPublish(%q, %q, %q) = %v, want %v", tt.client, tt.user, tt.top, got, tt.want)
			}
		})
	}
}

func TestACLSubscribe(t *testing.T) {
	s := mustACL(t, testACL)
	// The Eclipse Paho interoperability suite's ACL.
	paho := mustACL(t, "topic readwrite #\ntopic deny test/nosubscribe\n")
	own := mustACL(t, "user u\ntopic read a/#\npattern deny a/%u/#\npattern deny b/#\npattern read b/+/x\n")
	tests := []struct {
		name                 string
		set                  *aclSet
		client, user, filter string
		want, readAll        bool
	}{
		{"anonymous covered", s, "d", "", "public/news", true, true},
		{"anonymous covered wildcard", s, "d", "", "public/news/+", true, true},
		{"deny inside #: granted, filtered per message", s, "d", "", "public/#", true, false},
		{"deny inside +: granted, filtered", s, "d", "", "public/+", true, false},
		{"denied exactly", s, "d", "", "public/secret", false, false},
		{"# reaches a readable topic", s, "d", "", "#", true, false},
		{"nothing readable", s, "d", "", "private/#", false, false},
		{"pattern covers", s, "d", "", "devices/d/#", true, true},
		{"pattern other client", s, "d", "", "devices/e/#", false, false},
		{"pattern reaches part of +", s, "d", "", "devices/+/x", true, false},
		{"user covered", s, "a", "alice", "sensors/room1/#", true, true},
		{"user deny inside", s, "a", "alice", "sensors/#", true, false},
		{"user deny inside via +", s, "a", "alice", "sensors/+/temp", true, false},
		{"user deny covers", s, "a", "alice", "sensors/private/+", false, false},
		{"write-only rule", s, "a", "alice", "alerts/fire", false, false},
		{"$SYS rule", s, "a", "alice", "$SYS/#", true, true},
		{"$SYS with +", s, "a", "alice", "$SYS/broker/+", true, true},
		{"shared covered", s, "a", "alice", "$share/g/sensors/room1/#", true, true},
		{"shared with a deny inside", s, "a", "alice", "$share/g/sensors/#", true, false},
		{"shared denied", s, "a", "alice", "$share/g/sensors/private/#", false, false},
		{"bad shared", s, "a", "alice", "$share/g", false, false},
		{"read # covers #", s, "b", "bob", "#", true, true},
		{"read # covers +/x", s, "b", "bob", "+/x", true, true},
		{"read # does not reach $SYS", s, "b", "bob", "$SYS/#", false, false},
		{"shared #", s, "b", "bob", "$share/g/#", true, true},
		{"pattern %u", s, "a", "alice", "users/alice/inbox", true, true},
		{"pattern %u other user", s, "a", "alice", "users/bob/inbox", false, false},
		{"pattern %u anonymous", s, "d", "", "users//inbox", false, false},
		{"paho: #", paho, "c", "", "#", true, false},
		{"paho: +/+", paho, "c", "", "+/+", true, false},
		{"paho: test/nosubscribe", paho, "c", "", "test/nosubscribe", false, false},
		{"paho: test/#", paho, "c", "", "test/#", true, false},
		{"paho: elsewhere", paho, "c", "", "TopicA/#", true, true},
		{"own read beats a pattern deny", own, "c", "u", "a/u/#", true, true},
		{"pattern deny covers, own rules read none", own, "c", "u", "b/#", false, false},
		{"pattern read inside a pattern deny", own, "c", "u", "b/+/x", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, readAll, _ := tt.set.canSubscribe(tt.client, tt.user, tt.filter)
			if ok != tt.want || readAll != tt.readAll {
				t.Errorf("canSubscribe(%q, %q, %q) = %v, readAll %v; want %v, %v", tt.client, tt.user, tt.filter, ok, readAll, tt.want, tt.readAll)
			}
		})
	}
}

// TestACLSubscribeAgreesWithRead checks canSubscribe against canRead by
// brute force: a granted filter reaches some readable topic, readAll means
// every topic it matches is readable, and a refused one reaches none (or
// is covered by a deny rule).
func TestACLSubscribeAgreesWithRead(t *testing.T) {
	sets := map[string]*aclSet{
		"paho":     mustACL(t, "topic readwrite #\ntopic deny a/b\n"),
		"mixed":    mustACL(t, "topic read a/#\ntopic deny a/+/z\npattern read +/%c\npattern deny z/#\n"),
		"patterns": mustACL(t, "user u\ntopic read z/a\npattern read z/#\npattern deny z/%u\npattern write a/#\n"),
	}
	levels := []string{"a", "b", "z", "u", "c"}
	var topics []string
	for _, x := range levels {
		topics = append(topics, x)
		for _, y := range levels {
			topics = append(topics, x+"/"+y)
			for _, z := range levels {
				topics = append(topics, x+"/"+y+"/"+z)
			}
		}
	}
	filters := []string{"#", "+", "+/+", "a/#", "a/+", "a/b", "a/+/z", "z/#", "z/u", "z/+", "+/c", "b/#", "u/+/+"}
	for name, s := range sets {
		for _, user := range []string{"", "u"} {
			for _, f := range filters {
				ok, readAll, _ := s.canSubscribe("c", user, f)
				some, all := false, true
				for _, tp := range topics {
					if !codec.Match([]byte(f), []byte(tp)) {
						continue
					}
					r, _ := s.canRead("c", user, tp)
					some = some || r
					all = all && r
				}
				if readAll && !all {
					t.Errorf("%s user %q filter %q: readAll, but a topic it matches is not readable", name, user, f)
				}
				if ok && !some && readAll {
					t.Errorf("%s user %q filter %q: granted with readAll but nothing is readable", name, user, f)
				}
				if !ok && some {
					// Refused while a topic is readable: only when a deny rule covers the filter.
					if _, _, by := s.canSubscribe("c", user, f); by == nil || by.access != accDeny {
						t.Errorf("%s user %q filter %q: refused, yet a topic it matches is readable", name, user, f)
					}
				}
			}
		}
	}
}

func TestACLInlineComment(t *testing.T) {
	for _, file := range []string{"topic read a/b # note\n", "topic read a/b\t# note\n", "user alice # admin\n"} {
		_, err := parseACL([]byte(file))
		if err == nil || !strings.Contains(err.Error(), "inline comments are not supported") || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("parseACL(%q) = %v, want an inline comment error", file, err)
		}
	}
}

func TestParseACL(t *testing.T) {
	s := mustACL(t, "\t# indented comment\r\ntopic  read   a/b \r\n topic write\tc\npattern deny x/%u\nuser  u v \ntopic d\n")
	if s.rules != 4 || len(s.anon) != 2 || len(s.patterns) != 1 || len(s.users["u v"]) != 1 || !s.patternDeny {
		t.Fatalf("parsed %+v", s)
	}
	if r := s.anon[0]; r.filter != "a/b" || r.access != accRead {
		t.Errorf("rule 1 = %+v", r)
	}
	if r := s.anon[1]; r.filter != "c" || r.access != accWrite {
		t.Errorf("rule 2 = %+v", r)
	}
	if r := s.users["u v"][0]; r.access != accRead|accWrite || r.line != 6 {
		t.Errorf("user rule = %+v", r)
	}
	tests := []struct{ name, file, err string }{
		{"unknown keyword", "topic a\nallow a\n", "line 2: not an ACL line"},
		{"bad access", "topic rw a/b\n", `access "rw"`},
		{"no topic", "topic\n", "without a topic"},
		{"user without name", "user\n", "without a name"},
		{"bad filter", "topic read a/#/b\n", `filter "a/#/b"`},
		{"bad pattern", "pattern read a/%c#\n", `filter "a/%c#"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseACL([]byte(tt.file))
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("error = %v, want one containing %q", err, tt.err)
			}
		})
	}
}

// TestFilterRelations checks covers, overlaps and matchTopic against
// brute force over a universe of topics: covers(A, S) iff every topic S
// matches is matched by A; overlaps iff some topic matches both.
func TestFilterRelations(t *testing.T) {
	var filters []string
	var gen func(prefix string, depth int)
	gen = func(prefix string, depth int) {
		for _, l := range []string{"a", "$s", "+", "#"} {
			f := l
			if prefix != "" {
				f = prefix + "/" + l
			}
			if codec.ValidFilter([]byte(f)) == nil {
				filters = append(filters, f)
			}
			if depth > 1 && l != "#" {
				gen(f, depth-1)
			}
		}
	}
	gen("", 3)
	var topics []string
	var genT func(prefix string, depth int)
	genT = func(prefix string, depth int) {
		for _, l := range []string{"a", "$s", "z"} {
			tp := l
			if prefix != "" {
				tp = prefix + "/" + l
			}
			topics = append(topics, tp)
			if depth > 1 {
				genT(tp, depth-1)
			}
		}
	}
	genT("", 4)
	for _, af := range filters {
		r, err := newRule(af, accRead, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, tp := range topics {
			if got, want := r.matchTopic(tp, "", ""), codec.Match([]byte(af), []byte(tp)); got != want {
				t.Fatalf("matchTopic(%q, %q) = %v, codec.Match says %v", af, tp, got, want)
			}
		}
		for _, sf := range filters {
			levels := strings.Split(sf, "/")
			cover, overlap := true, false
			for _, tp := range topics {
				a, s := codec.Match([]byte(af), []byte(tp)), codec.Match([]byte(sf), []byte(tp))
				if s && !a {
					cover = false
				}
				if s && a {
					overlap = true
				}
			}
			if got := r.covers(levels, "", ""); got != cover {
				t.Errorf("covers(%q, %q) = %v, want %v", af, sf, got, cover)
			}
			if got := r.overlaps(levels, "", ""); got != overlap {
				t.Errorf("overlaps(%q, %q) = %v, want %v", af, sf, got, overlap)
			}
		}
	}
}
