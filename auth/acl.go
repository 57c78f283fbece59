package auth

import (
	"fmt"
	"strings"

	"github.com/xmq-io/xmq/codec"
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
// A file means what it means in Mosquitto 2. The access defaults to
// readwrite. A topic is decided by the client's own rules (its user
// section, or the anonymous rules when it has no user name) — a deny rule
// matching it refuses, else an allow rule with the access wanted grants —
// and when none of them matches, by the patterns the same way; when
// nothing matches, access is refused. A client without a user name never
// matches a pattern using %u, and when the file has patterns a client
// whose id or user name contains '+', '#' or '/' gets nothing from them
// (and nothing at all if a pattern denies).
//
// Wildcards in rules work as in subscriptions, including the '$' rule: '#'
// and '+' at the first level do not match $SYS or other '$' topics, so
// $SYS needs its own rule.
//
// PUBLISH (and a will) needs write access to the topic. A SUBSCRIBE filter
// is granted when some read rule could match one of its topics and no deny
// rule covers the whole filter (so a filter equal to a denied one is
// refused), and each message is then checked on delivery: with `topic read
// #` and `topic deny secret/#`, # is granted and delivers everything but
// secret/.... A shared subscription is decided on the filter after
// $share/GROUP/. A comment must stand on its own line, as in Mosquitto.

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
	claim   bool // a rule of a token's ACL claim (jwt.go); line is its number there
}

// aclSet is a parsed ACL file.
type aclSet struct {
	anon        []rule
	users       map[string][]rule
	patterns    []rule
	patternDeny bool // some pattern is a deny rule
	rules       int
}

// parseACL reads an ACL file. Errors name the line; they quote no more of
// it than what a rule's keyword shows is an ACL line: a file given as the
// ACL file by mistake (a password file, /etc/shadow) is not echoed into
// logs or xmq check-config's report.
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
				return nil, fmt.Errorf("line %d: user without a name", n+1)
			}
			if i := strings.IndexAny(rest, "#"); i > 0 && (rest[i-1] == ' ' || rest[i-1] == '\t') {
				return nil, inlineComment(n+1, rest[i:])
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
					return nil, fmt.Errorf("line %d: access %q: want read, write, readwrite or deny", n+1, a)
				}
				filter = f
			}
			if filter == "" {
				return nil, fmt.Errorf("line %d: %s without a topic", n+1, kw)
			}
			r, err := newRule(filter, acc, kw == "pattern")
			if i := strings.IndexAny(filter, "#"); err != nil && i > 0 && (filter[i-1] == ' ' || filter[i-1] == '\t') {
				return nil, inlineComment(n+1, filter[i:])
			}
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", n+1, err)
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
			return nil, fmt.Errorf("line %d: not an ACL line (one starts with topic, pattern or user)", n+1)
		}
	}
	return s, nil
}

// inlineComment is the error for a comment after a rule, which Mosquitto
// refuses too: "topic read a/b # note" would read as the filter "a/b # note".
func inlineComment(line int, comment string) error {
	return fmt.Errorf("line %d: inline comments are not supported: put %q on a line of its own", line, strings.TrimSpace(comment))
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

// scope returns the rules that apply to a client, in the order Mosquitto 2
// reads them: its own section (the anonymous rules without a user name),
// then the patterns. ok is false when the client may do nothing at all: its
// id or user name could bend a pattern and some pattern denies; with no
// pattern deny such a client just gets no pattern.
func (s *aclSet) scope(clientID, username string) (own, patterns []rule, ok bool) {
	own = s.anon
	if username != "" {
		own = s.users[username]
	}
	patterns = s.patterns
	if len(patterns) > 0 && (dangerous(clientID) || dangerous(username)) {
		if s.patternDeny {
			return nil, nil, false
		}
		patterns = nil
	}
	return own, patterns, true
}

// applies reports whether a rule can apply to a client: a %u pattern never
// applies to a client without a user name.
func (r *rule) applies(username string) bool { return !r.usesU || username != "" }

// decideTopic decides access to a topic name as Mosquitto 2 does: the
// client's own rules, deny rules first, then its allow rules with the
// access wanted; when none of them matches, the patterns the same way;
// when nothing matches, no access. It returns the rule that decided (nil:
// no rule allows it), for the log.
func (s *aclSet) decideTopic(clientID, username, topic string, want access) (bool, *rule) {
	own, patterns, ok := s.scope(clientID, username)
	if !ok {
		return false, nil
	}
	for _, list := range [2][]rule{own, patterns} {
		for i := range list {
			if r := &list[i]; r.access == accDeny && r.applies(username) && r.matchTopic(topic, clientID, username) {
				return false, r
			}
		}
		for i := range list {
			if r := &list[i]; r.access&want != 0 && r.applies(username) && r.matchTopic(topic, clientID, username) {
				return true, r
			}
		}
	}
	return false, nil
}

// canPublish decides write access to a topic name.
func (s *aclSet) canPublish(clientID, username, topic string) (bool, *rule) {
	return s.decideTopic(clientID, username, topic, accWrite)
}

// canRead decides whether a message on topic may be delivered to a client.
func (s *aclSet) canRead(clientID, username, topic string) (bool, *rule) {
	return s.decideTopic(clientID, username, topic, accRead)
}

// canSubscribe decides a SUBSCRIBE filter as Mosquitto 2 means the file:
// the subscription is granted when some read rule could match a topic of
// it and no deny rule covers all of it (so a filter equal to a denied one
// is refused); each message is then filtered on delivery (canRead).
// readAll reports that every topic the filter matches is readable — a read
// rule covers it and no deny rule overlaps it — so that deliveries need no
// check. A shared subscription is decided on its inner filter. by is the
// rule that refused, or nil.
func (s *aclSet) canSubscribe(clientID, username, filter string) (ok, readAll bool, by *rule) {
	_, f, _, err := codec.ParseShared([]byte(filter))
	if err != nil || len(f) == 0 {
		return false, false, nil
	}
	own, patterns, inScope := s.scope(clientID, username)
	if !inScope {
		return false, false, nil
	}
	levels := strings.Split(string(f), "/")
	// What each list says about the filter's topics: a deny rule covering
	// all of them or overlapping some, a read rule covering all or some.
	type verdict struct {
		denyCover                        *rule
		denyOverlap, readCover, readSome bool
	}
	judge := func(list []rule) (v verdict) {
		for i := range list {
			r := &list[i]
			if !r.applies(username) {
				continue
			}
			switch {
			case r.access == accDeny:
				if v.denyCover == nil && r.covers(levels, clientID, username) {
					v.denyCover = r
				}
				v.denyOverlap = v.denyOverlap || r.overlaps(levels, clientID, username)
			case r.access&accRead != 0:
				v.readCover = v.readCover || r.covers(levels, clientID, username)
				v.readSome = v.readSome || r.overlaps(levels, clientID, username)
			}
		}
		return v
	}
	o, p := judge(own), judge(patterns)
	switch {
	case o.denyCover != nil:
		return false, false, o.denyCover
	case !o.readSome && p.denyCover != nil:
		// The own rules read none of it, and a pattern denies all of it.
		return false, false, p.denyCover
	case !o.readSome && !p.readSome:
		return false, false, nil
	}
	readAll = !o.denyOverlap && (o.readCover || !p.denyOverlap && p.readCover)
	return true, readAll, nil
}

// describe names a rule for the log: its line and text.
func (r *rule) describe() string {
	switch {
	case r == nil:
		return "no rule allows it"
	case r.line < 0:
		return r.filter // not a line of the file: the HTTP service (httpauth.go)
	}
	if r.claim {
		return fmt.Sprintf("token acl claim, rule %d: %s", r.line, r.filter)
	}
	kw, acc := "topic", "readwrite"
	if r.pattern {
		kw = "pattern"
	}
	switch r.access {
	case accDeny:
		acc = "deny"
	case accRead:
		acc = "read"
	case accWrite:
		acc = "write"
	}
	return fmt.Sprintf("line %d: %s %s %s", r.line, kw, acc, r.filter)
}
