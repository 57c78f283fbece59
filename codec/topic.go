package codec

import (
	"bytes"
	"encoding/binary"
	"unicode/utf8"
)

// ValidUTF8 reports whether b is a well-formed MQTT UTF-8 string: valid
// UTF-8, no surrogate code points (which Go's decoder already refuses) and no
// U+0000 [MQTT-1.5.4-1] [MQTT-1.5.4-2]. ASCII, the common case, is checked
// eight bytes at a time without decoding.
func ValidUTF8(b []byte) bool {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		if x := binary.LittleEndian.Uint64(b[i:]); x&hi8 != 0 || hasZero(x) {
			break
		}
	}
	for ; i < len(b); i++ {
		c := b[i]
		if c == 0 {
			return false
		}
		if c >= utf8.RuneSelf {
			rest := b[i:]
			return utf8.Valid(rest) && bytes.IndexByte(rest, 0) < 0
		}
	}
	return true
}

const (
	lo8 = 0x0101010101010101
	hi8 = 0x8080808080808080
)

// hasZero reports whether any byte of x is zero (the classic bit trick: the
// subtraction borrows into the high bit of a zero byte only).
func hasZero(x uint64) bool { return (x-lo8)&^x&hi8 != 0 }

// plainTopic reports whether b is ASCII without U+0000, '+' or '#': a topic
// name that needs no further checking. It is the fast path of PUBLISH
// decoding; false means "check properly", not "invalid".
func plainTopic(b []byte) bool {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		if x&hi8 != 0 || hasZero(x) || hasZero(x^('+'*lo8)) || hasZero(x^('#'*lo8)) {
			return false
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == 0 || c == '+' || c == '#' || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// ValidTopicName checks a topic name as used in PUBLISH and wills: not
// empty [MQTT-4.7.3-1] and no wildcard characters [MQTT-3.3.2-2] [MQTT-4.7.1-1].
// UTF-8 validity is checked when the string is decoded.
func ValidTopicName(topic []byte) error {
	if len(topic) == 0 {
		return ErrTopicEmpty
	}
	if bytes.IndexByte(topic, '+') >= 0 || bytes.IndexByte(topic, '#') >= 0 {
		return ErrTopicWildcard
	}
	return nil
}

var sharePrefix = []byte("$share/")

// IsShared reports whether filter names a shared subscription ($share/...).
func IsShared(filter []byte) bool { return bytes.HasPrefix(filter, sharePrefix) }

// ParseShared splits a shared subscription filter $share/{group}/{filter}
// into its group and filter. ok is false when filter is not shared; err is
// set when it is shared but badly formed [MQTT-4.8.2-1] [MQTT-4.8.2-2].
func ParseShared(filter []byte) (group, f []byte, ok bool, err error) {
	if !IsShared(filter) {
		return nil, filter, false, nil
	}
	rest := filter[len(sharePrefix):]
	i := bytes.IndexByte(rest, '/')
	if i <= 0 {
		return nil, nil, true, ErrSharedInvalid
	}
	group, f = rest[:i], rest[i+1:]
	if bytes.ContainsAny(group, "+#") || len(f) == 0 {
		return nil, nil, true, ErrSharedInvalid
	}
	return group, f, true, nil
}

// ValidFilter checks a topic filter: not empty [MQTT-4.7.3-1], '#' only as
// the whole last level [MQTT-4.7.1-2], '+' only as a whole level
// [MQTT-4.7.1-3], and for $share/{group}/{filter} a valid group and filter.
func ValidFilter(filter []byte) error {
	_, f, shared, err := ParseShared(filter)
	if err != nil {
		return err
	}
	if len(f) == 0 {
		return ErrFilterInvalid
	}
	for i, c := range f {
		switch c {
		case '#':
			if i != len(f)-1 || i > 0 && f[i-1] != '/' {
				return filterErr(shared)
			}
		case '+':
			if i > 0 && f[i-1] != '/' || i < len(f)-1 && f[i+1] != '/' {
				return filterErr(shared)
			}
		}
	}
	return nil
}

func filterErr(shared bool) error {
	if shared {
		return ErrSharedInvalid
	}
	return ErrFilterInvalid
}

// HasWildcard reports whether a (valid) filter contains '+' or '#'.
func HasWildcard(filter []byte) bool { return bytes.ContainsAny(filter, "+#") }

// Match reports whether a valid topic name matches a valid (non-shared)
// filter. '+' matches exactly one level, '#' the parent level and any
// number of levels below it, and a filter starting with a wildcard does not
// match a topic starting with '$' [MQTT-4.7.2-1].
func Match(filter, topic []byte) bool {
	if len(topic) > 0 && topic[0] == '$' && len(filter) > 0 && (filter[0] == '+' || filter[0] == '#') {
		return false
	}
	fi, ti := 0, 0
	for {
		// fi and ti are at the start of a level.
		if fi < len(filter) && filter[fi] == '#' {
			return true
		}
		if fi < len(filter) && filter[fi] == '+' {
			for ti < len(topic) && topic[ti] != '/' {
				ti++
			}
			fi++
		} else {
			for fi < len(filter) && filter[fi] != '/' {
				if ti >= len(topic) || topic[ti] != filter[fi] {
					return false
				}
				fi++
				ti++
			}
			if ti < len(topic) && topic[ti] != '/' {
				return false
			}
		}
		fEnd, tEnd := fi >= len(filter), ti >= len(topic)
		switch {
		case fEnd && tEnd:
			return true
		case tEnd:
			// "a/#" matches "a": the rest of the filter is exactly "/#".
			return len(filter)-fi == 2 && filter[fi+1] == '#'
		case fEnd:
			return false
		}
		fi++
		ti++
	}
}
