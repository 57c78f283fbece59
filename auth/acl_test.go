package auth

import (
	"strings"
	"testing"

	"xmq/codec"
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
		{"pattern deny beats user allow", mustACL(t, "user u\ntopic write #\npattern deny private/%u/#\n"), "c", "u", "private/u/x", false},
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
			if got := tt.set.canPublish(tt.client, tt.user, tt.top); got != tt.want {
				t.Errorf("canPublish(%q, %q, %q) = %v, want %v", tt.client, tt.user, tt.top, got, tt.want)
			}
		})
	}
}

func TestACLSubscribe(t *testing.T) {
	s := mustACL(t, testACL)
	tests := []struct {
		name                 string
		client, user, filter string
		want                 bool
	}{
		{"anonymous covered", "d", "", "public/news", true},
		{"anonymous covered wildcard", "d", "", "public/news/+", true},
		{"deny overlaps #", "d", "", "public/#", false},
		{"deny overlaps +", "d", "", "public/+", false},
		{"denied exactly", "d", "", "public/secret", false},
		{"not covered", "d", "", "#", false},
		{"pattern covers", "d", "", "devices/d/#", true},
		{"pattern other client", "d", "", "devices/e/#", false},
		{"pattern does not cover +", "d", "", "devices/+/x", false},
		{"user covered", "a", "alice", "sensors/room1/#", true},
		{"user deny overlap", "a", "alice", "sensors/#", false},
		{"user deny overlap via +", "a", "alice", "sensors/+/temp", false},
		{"write-only rule", "a", "alice", "alerts/fire", false},
		{"$SYS rule", "a", "alice", "$SYS/#", true},
		{"$SYS with +", "a", "alice", "$SYS/broker/+", true},
		{"shared covered", "a", "alice", "$share/g/sensors/room1/#", true},
		{"shared denied", "a", "alice", "$share/g/#", false},
		{"shared deny overlap", "a", "alice", "$share/g/sensors/+/x", false},
		{"bad shared", "a", "alice", "$share/g", false},
		{"read # covers #", "b", "bob", "#", true},
		{"read # covers +/x", "b", "bob", "+/x", true},
		{"read # does not cover $SYS", "b", "bob", "$SYS/#", false},
		{"shared #", "b", "bob", "$share/g/#", true},
		{"pattern %u", "a", "alice", "users/alice/inbox", true},
		{"pattern %u other user", "a", "alice", "users/bob/inbox", false},
		{"pattern %u anonymous", "d", "", "users//inbox", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.canSubscribe(tt.client, tt.user, tt.filter); got != tt.want {
				t.Errorf("canSubscribe(%q, %q, %q) = %v, want %v", tt.client, tt.user, tt.filter, got, tt.want)
			}
		})
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
		{"unknown keyword", "topic a\nallow a\n", "line 2: unknown keyword"},
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
