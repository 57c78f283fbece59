package auth

import (
	"errors"
	"fmt"
	"strings"

	"xmq/codec"
)

// The ACL file uses Mosquitto's acl_file syntax:
//
//	# comment
//	topic [read|write|readwrite|deny] FILTER     rules for anonymous clients until the first user line
//	user NAME                                    the rules below are NAME's, until the next user line
//	topic [read|write|readwrite|deny] FILTER     a rule for NAME
//	pattern [read|write|readwrite|deny] FILTER   a rule for every client, anywhere in the file;
//	                                             %c is the client id, %u the user name
//
// The access defaults to readwrite. A client may do what some rule of its
// own (its user section, or the anonymous rules when it has no user name)
// or some pattern allows, unless a deny rule among them matches: deny
// always wins, wherever it is in the file. Mosquitto too checks deny rules
// first within each list; xmq lets a pattern deny win over a user allow as
// well. A client without a user name never matches a pattern using %u, and
// when the file has patterns a client whose id or user name contains '+',
// '#' or '/' gets nothing from them (and nothing at all if a pattern denies).
//
// Wildcards in rules work as in subscriptions, including the '$' rule: '#'
// and '+' at the first level do not match $SYS or other '$' topics, so
// $SYS needs its own rule.
//
// PUBLISH needs write access to the topic. SUBSCRIBE needs read access to
// the whole filter (of a shared subscription, the filter after
// $share/GROUP/): some read rule must cover every topic the filter can
// match, and no deny rule may overlap it. So with `topic read sensors/#`,
// sensors/+/temp is allowed and + or # is not; with `topic read #` and
// `topic deny secret/#`, # is refused (it would receive secret/...) and
// sensors/# is allowed. (Mosquitto 2 checks each delivered message
// instead; checking at SUBSCRIBE keeps the delivery path free of ACL work.)

// access is what a rule grants: read and/or write, or nothing (deny).
type access uint8

const (
	accDeny  access = 0
	accRead  access = 1
	accWrite access = 2
)

// level kinds of a rule's filter.
const (
	lvLiteral  = iota
	lvPlus     // +
	lvHash     // #
	lvTemplate // a pattern level containing %c or %u
)

type level struct {
	kind uint8
	s    string
}

// resolve returns a literal or template level's text for one client.
func (l level) resolve(clientID, username string) string {
	if l.kind != lvTemplate {
		return l.s
	}
	switch l.s {
	case "%c":
		return clientID
	case "%u":
		return username
	}
	return strings.ReplaceAll(strings.ReplaceAll(l.s, "%c", clientID), "%u", username)
}

func (l level) wild() bool { return l.kind == lvPlus || l.kind == lvHash }

// rule is one topic or pattern line.
type rule struct {
	access  access
	filter  string
	levels  []level
	usesU   bool // a pattern with %u
	line    int
	pattern bool
}

// aclSet is a parsed ACL file.
type aclSet struct {
	anon        []rule
	users       map[string][]rule
	patterns    []rule
	patternDeny bool // some pattern is a deny rule
	rules       int
}

var errACLSyntax = errors.New("auth: acl file")

// parseACL reads an ACL file. Errors name the line.
func parseACL(data []byte) (*aclSet, error) {
	s := &aclSet{users: map[string][]rule{}}
	user, inUser := "", false
	for n, line := range splitLines(data) {
		line = strings.TrimRight(strings.TrimLeft(line, " \t"), " \t\r")
		if line == "" || line[0] == '#' {
			continue
		}
		kw, rest := cutSpace(line)
		switch kw {
		case "user":
			if rest == "" {
				return nil, fmt.Errorf("%w line %d: user without a name", errACLSyntax, n+1)
			}
			user, inUser = rest, true
		case "topic", "pattern":
			acc, filter := accRead|accWrite, rest
			if a, f := cutSpace(rest); f != "" {
				switch a {
				case "read":
					acc = accRead
				case "write":
					acc = accWrite
				case "readwrite":
					acc = accRead | accWrite
				case "deny":
					acc = accDeny
				default:
					return nil, fmt.Errorf("%w line %d: access %q: want read, write, readwrite or deny", errACLSyntax, n+1, a)
				}
				filter = f
			}
			if filter == "" {
				return nil, fmt.Errorf("%w line %d: %s without a topic", errACLSyntax, n+1, kw)
			}
			r, err := newRule(filter, acc, kw == "pattern")
			if err != nil {
				return nil, fmt.Errorf("%w line %d: %v", errACLSyntax, n+1, err)
			}
			r.line = n + 1
			s.rules++
			switch {
			case r.pattern:
				s.patterns = append(s.patterns, r)
				s.patternDeny = s.patternDeny || acc == accDeny
			case inUser:
				s.users[user] = append(s.users[user], r)
			default:
				s.anon = append(s.anon, r)
			}
		default:
			return nil, fmt.Errorf("%w line %d: unknown keyword %q (want topic, pattern or user)", errACLSyntax, n+1, kw)
		}
	}
	return s, nil
}

// cutSpace splits s at its first run of spaces or tabs.
func cutSpace(s string) (string, string) {
	i := strings.IndexAny(s, " \t")
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimLeft(s[i:], " \t")
}

func newRule(filter string, acc access, pattern bool) (rule, error) {
	check := filter
	if pattern {
		check = strings.ReplaceAll(strings.ReplaceAll(filter, "%c", "c"), "%u", "u")
	}
	if err := codec.ValidFilter([]byte(check)); err != nil {
		return rule{}, fmt.Errorf("filter %q: %v", filter, err)
	}
	r := rule{access: acc, filter: filter, pattern: pattern}
	for l := range strings.SplitSeq(filter, "/") {
		switch {
		case l == "+":
			r.levels = append(r.levels, level{kind: lvPlus})
		case l == "#":
			r.levels = append(r.levels, level{kind: lvHash})
		case pattern && (strings.Contains(l, "%c") || strings.Contains(l, "%u")):
			r.levels = append(r.levels, level{kind: lvTemplate, s: l})
			r.usesU = r.usesU || strings.Contains(l, "%u")
		default:
			r.levels = append(r.levels, level{kind: lvLiteral, s: l})
		}
	}
	return r, nil
}

// matchTopic reports whether the rule matches a topic name.
func (r *rule) matchTopic(topic, clientID, username string) bool {
	lv := r.levels
	if len(topic) > 0 && topic[0] == '$' && lv[0].wild() {
		return false // [MQTT-4.7.2-1]
	}
	i := 0
	for start := 0; ; {
		end := strings.IndexByte(topic[start:], '/')
		t := topic[start:]
		if end >= 0 {
			t = topic[start : start+end]
		}
		if i == len(lv) {
			return false
		}
		switch lv[i].kind {
		case lvHash:
			return true
		case lvPlus:
		default:
			if lv[i].resolve(clientID, username) != t {
				return false
			}
		}
		i++
		if end < 0 {
			break
		}
		start += end + 1
	}
	return i == len(lv) || i == len(lv)-1 && lv[i].kind == lvHash
}

// covers reports whether every topic the filter (split in levels) matches
// is matched by the rule.
func (r *rule) covers(filter []string, clientID, username string) bool {
	lv := r.levels
	if filter[0] != "+" && filter[0] != "#" && strings.HasPrefix(filter[0], "$") && lv[0].wild() {
		return false
	}
	i := 0
	for _, f := range filter {
		if i == len(lv) {
			return false
		}
		switch l := lv[i]; {
		case l.kind == lvHash:
			return true
		case f == "#":
			// The filter reaches deeper than this level of the rule, and
			// its parent too. Only "+/#" is as wide as "#": a topic has
			// at least one level.
			return i == 0 && l.kind == lvPlus && len(lv) == 2 && lv[1].kind == lvHash
		case l.kind == lvPlus:
		case f == "+" || l.resolve(clientID, username) != f:
			return false
		}
		i++
	}
	return i == len(lv) || i == len(lv)-1 && lv[i].kind == lvHash
}

// overlaps reports whether some topic matches both the rule and the filter.
func (r *rule) overlaps(filter []string, clientID, username string) bool {
	lv := r.levels
	fWild := filter[0] == "+" || filter[0] == "#"
	if fWild && lv[0].kind == lvLiteral && strings.HasPrefix(lv[0].s, "$") ||
		!fWild && strings.HasPrefix(filter[0], "$") && lv[0].wild() {
		return false
	}
	i, j := 0, 0
	for ; i < len(lv) && j < len(filter); i, j = i+1, j+1 {
		l, f := lv[i], filter[j]
		switch {
		case l.kind == lvHash || f == "#":
			return true
		case l.kind == lvPlus || f == "+":
		case l.resolve(clientID, username) != f:
			return false
		}
	}
	switch {
	case i == len(lv) && j == len(filter):
		return true
	case i == len(lv):
		return j == len(filter)-1 && filter[j] == "#" // "a/#" matches "a"
	default:
		return i == len(lv)-1 && lv[i].kind == lvHash
	}
}

// dangerous reports whether a client id or user name could bend a pattern:
// Mosquitto refuses pattern access to them.
func dangerous(s string) bool { return strings.ContainsAny(s, "+#/") }

// decide runs the rules that apply to a client: hit tells whether a rule
// applies to the topic or filter at hand, for a deny rule (overlap) or an
// allow rule (cover). want is the access needed.
func (s *aclSet) decide(clientID, username string, want access, hit func(r *rule, deny bool) bool) bool {
	own := s.anon
	if username != "" {
		own = s.users[username]
	}
	usePatterns := len(s.patterns) > 0
	if usePatterns && (dangerous(clientID) || dangerous(username)) {
		if s.patternDeny {
			return false
		}
		usePatterns = false
	}
	applies := func(r *rule) bool { return !r.usesU || username != "" }
	for i := range own {
		if own[i].access == accDeny && hit(&own[i], true) {
			return false
		}
	}
	if usePatterns {
		for i := range s.patterns {
			if r := &s.patterns[i]; r.access == accDeny && applies(r) && hit(r, true) {
				return false
			}
		}
	}
	for i := range own {
		if own[i].access&want != 0 && hit(&own[i], false) {
			return true
		}
	}
	if usePatterns {
		for i := range s.patterns {
			if r := &s.patterns[i]; r.access&want != 0 && applies(r) && hit(r, false) {
				return true
			}
		}
	}
	return false
}

// canPublish decides write access to a topic name.
func (s *aclSet) canPublish(clientID, username, topic string) bool {
	return s.decide(clientID, username, accWrite, func(r *rule, _ bool) bool {
		return r.matchTopic(topic, clientID, username)
	})
}

// canSubscribe decides read access to a filter; a shared subscription is
// decided on its inner filter.
func (s *aclSet) canSubscribe(clientID, username, filter string) bool {
	_, f, _, err := codec.ParseShared([]byte(filter))
	if err != nil || len(f) == 0 {
		return false
	}
	levels := strings.Split(string(f), "/")
	return s.decide(clientID, username, accRead, func(r *rule, deny bool) bool {
		if deny {
			return r.overlaps(levels, clientID, username)
		}
		return r.covers(levels, clientID, username)
	})
}
