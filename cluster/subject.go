package cluster

import (
	"errors"
	"strings"

	"github.com/xmq-io/xmq/codec"
)

// The MQTT topic ↔ NATS subject mapping. NATS applications may use it to
// read MQTT traffic and to publish into it; docs/cluster.md states it.
//
// A topic is its levels, each escaped into one subject token, under a
// root: prefix for ordinary topics, prefix + "$" for topics starting with
// '$' (so that "#", which maps to "prefix.>", never matches them, as MQTT
// requires [MQTT-4.7.2-1]). With prefix "mqtt":
//
//	a/b/c         mqtt.a.b.c
//	$SYS/x        mqtt$.$SYS.x
//	a//b          mqtt.a.%.b      (an empty level is the token "%")
//	a.b/c d       mqtt.a%2Eb.c%20d
//
// A level is escaped byte by byte: '%', '.', '*', '>', space, the other
// ASCII controls and DEL become %XX (two upper-case hex digits), every
// other byte (UTF-8 included) stays. '+' and '#' cannot occur in a topic;
// in a filter a '+' level maps to "*" and a '#' level to ">", and a filter
// ending in "/#" also matches its parent level, so it needs the parent's
// subject too (FilterSubjects).

// errSubject refuses a subject that is not the mapping of a topic.
var errSubject = errors.New("cluster: subject is not a mapped MQTT topic")

// escapeLevel appends level escaped as one subject token.
func escapeLevel(dst []byte, level string) []byte {
	if level == "" {
		return append(dst, '%')
	}
	for i := 0; i < len(level); i++ {
		b := level[i]
		if needsEscape(b) {
			dst = append(dst, '%', hexDigits[b>>4], hexDigits[b&15])
			continue
		}
		dst = append(dst, b)
	}
	return dst
}

const hexDigits = "0123456789ABCDEF"

// needsEscape reports the bytes a subject token cannot hold literally, or
// that the mapping reserves ('%').
func needsEscape(b byte) bool {
	return b <= ' ' || b == 0x7f || b == '.' || b == '*' || b == '>' || b == '%'
}

// root is the subject root of topic (or filter) under prefix.
func root(prefix, topic string) string {
	if strings.HasPrefix(topic, "$") {
		return prefix + "$"
	}
	return prefix
}

// AppendSubject appends the subject of a valid MQTT topic name under prefix.
func AppendSubject(dst []byte, prefix, topic string) []byte {
	dst = append(dst, root(prefix, topic)...)
	for {
		i := strings.IndexByte(topic, '/')
		lvl := topic
		if i >= 0 {
			lvl = topic[:i]
		}
		dst = append(dst, '.')
		dst = escapeLevel(dst, lvl)
		if i < 0 {
			return dst
		}
		topic = topic[i+1:]
	}
}

// Subject returns the subject of a valid MQTT topic name under prefix.
func Subject(prefix, topic string) string {
	return string(AppendSubject(make([]byte, 0, len(prefix)+len(topic)+8), prefix, topic))
}

// FilterSubjects returns the subjects a NATS subscription needs to receive
// what a valid (non-shared) MQTT filter matches: one, or two for a filter
// ending in "/#", which also matches its parent level ("a/#" matches "a").
func FilterSubjects(prefix, filter string) []string {
	b := []byte(root(prefix, filter))
	parent := -1 // the length of b before "/#"'s level
	for f := filter; ; {
		i := strings.IndexByte(f, '/')
		lvl := f
		if i >= 0 {
			lvl = f[:i]
		}
		switch lvl {
		case "#":
			parent = len(b)
			b = append(b, ".>"...)
		case "+":
			b = append(b, ".*"...)
		default:
			b = append(b, '.')
			b = escapeLevel(b, lvl)
		}
		if i < 0 {
			break
		}
		f = f[i+1:]
	}
	subs := []string{string(b)}
	if parent > len(root(prefix, filter)) {
		subs = append(subs, string(b[:parent]))
	}
	return subs
}

// Topic returns the MQTT topic name of a subject mapped under prefix, or
// errSubject when the subject is not one (another root, a token that is
// not escaped as the mapping escapes, a wildcard).
func Topic(prefix, subject string) (string, error) {
	var rest string
	switch {
	case strings.HasPrefix(subject, prefix+"$."):
		rest = subject[len(prefix)+2:]
	case strings.HasPrefix(subject, prefix+"."):
		rest = subject[len(prefix)+1:]
	default:
		return "", errSubject
	}
	dollar := len(subject) > len(prefix) && subject[len(prefix)] == '$'
	var b strings.Builder
	b.Grow(len(rest))
	first := true
	for {
		i := strings.IndexByte(rest, '.')
		tok := rest
		if i >= 0 {
			tok = rest[:i]
		}
		if !first {
			b.WriteByte('/')
		}
		if err := unescapeLevel(&b, tok); err != nil {
			return "", err
		}
		if first && dollar != strings.HasPrefix(tok, "$") {
			return "", errSubject // "$" topics live under their own root
		}
		first = false
		if i < 0 {
			break
		}
		rest = rest[i+1:]
	}
	topic := b.String()
	if codec.ValidTopicName([]byte(topic)) != nil || !codec.ValidUTF8([]byte(topic)) {
		return "", errSubject // a NUL, or bytes that are not UTF-8
	}
	return topic, nil
}

// unescapeLevel writes the level of one token; only the mapping's own
// spelling is accepted, so that a topic has exactly one subject.
func unescapeLevel(b *strings.Builder, tok string) error {
	switch tok {
	case "":
		return errSubject
	case "%":
		return nil // an empty level
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c == '%' {
			if i+2 >= len(tok) {
				return errSubject
			}
			hi, lo := unhex(tok[i+1]), unhex(tok[i+2])
			if hi < 0 || lo < 0 {
				return errSubject
			}
			v := byte(hi<<4 | lo)
			if !needsEscape(v) {
				return errSubject
			}
			b.WriteByte(v)
			i += 2
			continue
		}
		if needsEscape(c) || c == '+' || c == '#' || c == '/' {
			return errSubject
		}
		b.WriteByte(c)
	}
	return nil
}

// unhex is the value of an upper-case hex digit, -1 for anything else.
func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}
