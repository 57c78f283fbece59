// Package codectest holds byte-exact MQTT wire fixtures for testing the codec
// and everything built on it (core, loadtest), in the spirit of
// net/http/httptest.
//
// Every Case is one complete control packet written by hand from the MQTT
// 3.1, 3.1.1 and 5.0 specifications, never produced by this project's
// encoder, so the fixtures check the encoder as much as the decoder. Valid
// cases carry the packet the bytes decode to; malformed cases carry the
// sentinel error the codec returns, which is an *codec.Error holding the
// reason code a broker should answer with.
//
// Cases returns fresh values on every call: a test may modify what it gets
// without disturbing other tests. The package only reads the codec's public
// API and is safe for concurrent use.
package codectest

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/xmq-io/xmq/codec"
)

// Versions lists the protocol levels the fixtures cover, oldest first.
var Versions = []byte{codec.V31, codec.V311, codec.V5}

// Case is one named wire fixture.
type Case struct {
	// Name is unique and reads "packet/version/what", for example
	// "publish/v5/qos1-properties".
	Name string
	// Version is the protocol level Raw is decoded at: codec.V31, V311 or
	// V5 (a CONNECT carries its own level; Version repeats it).
	Version byte
	// Raw is the packet as it appears on the wire: fixed header, remaining
	// length and body.
	Raw []byte
	// Packet is what Raw decodes to, or nil when Err is set.
	Packet codec.Packet
	// Err is the sentinel that codec.Decode(Raw, Version) returns (compare
	// with errors.Is), or nil when Raw is valid. codec.ErrNeedMore marks a
	// Raw that ends inside the packet; a codec.Reader reports that as
	// io.ErrUnexpectedEOF.
	Err error
	// Spec cites the specification: a normative statement such as
	// "[MQTT-3.1.2-3]" or a section such as "MQTT 5.0 §3.3".
	Spec string
	// NonCanonical marks a valid Raw that the codec encodes differently,
	// for example a PUBACK whose Success reason code and empty properties
	// the encoder omits. For every other valid case,
	// Packet.Append(nil, Version) reproduces Raw exactly.
	NonCanonical bool
}

// Valid reports whether the case is a well-formed packet.
func (c Case) Valid() bool { return c.Err == nil }

// String names the case for test output.
func (c Case) String() string { return c.Name }

// Cases returns every fixture, valid and malformed, in a stable order.
func Cases() []Case {
	var all []Case
	for _, part := range [][]Case{connectCases(), connackCases(), publishCases(), ackCases(),
		subscribeCases(), subackCases(), unsubscribeCases(), unsubackCases(), controlCases(),
		headerCases(), propertyCases()} {
		all = append(all, part...)
	}
	return all
}

// Valid returns the well-formed fixtures.
func Valid() []Case { return filter(func(c Case) bool { return c.Valid() }) }

// Invalid returns the malformed fixtures.
func Invalid() []Case { return filter(func(c Case) bool { return !c.Valid() }) }

// ValidAt returns the well-formed fixtures of protocol level v.
func ValidAt(v byte) []Case {
	return filter(func(c Case) bool { return c.Valid() && c.Version == v })
}

func filter(keep func(Case) bool) []Case {
	var out []Case
	for _, c := range Cases() {
		if keep(c) {
			out = append(out, c)
		}
	}
	return out
}

// Get returns the fixture called name. It panics when there is none, which
// in a test is a typo to fix rather than a condition to handle.
func Get(name string) Case {
	for _, c := range Cases() {
		if c.Name == name {
			return c
		}
	}
	panic("codectest: no fixture named " + name)
}

// Stream concatenates the Raw bytes of cases, in order, as a peer would send them.
func Stream(cases []Case) []byte {
	var b []byte
	for _, c := range cases {
		b = append(b, c.Raw...)
	}
	return b
}

// Equal reports whether two packets hold the same values, treating a nil
// slice and an empty one as equal (a decoded empty field is nil, a reused
// packet's may be empty) and ignoring slice capacity.
func Equal(a, b codec.Packet) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.Type() == vb.Type() && equal(va, vb)
}

func equal(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return equal(a.Elem(), b.Elem())
	case reflect.Struct:
		for i := range a.NumField() {
			if !equal(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !equal(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.String:
		return a.String() == b.String()
	}
	panic("codectest: cannot compare a " + a.Kind().String())
}

// Format renders a packet for test failures: only non-zero fields, byte
// slices quoted, so two packets that are not Equal show where they differ.
func Format(p codec.Packet) string {
	if p == nil {
		return "<nil>"
	}
	var sb strings.Builder
	format(&sb, reflect.ValueOf(p))
	return sb.String()
}

func format(sb *strings.Builder, v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			sb.WriteString("nil")
			return
		}
		sb.WriteByte('&')
		format(sb, v.Elem())
	case reflect.Struct:
		sb.WriteString(v.Type().String())
		sb.WriteByte('{')
		first := true
		for i := range v.NumField() {
			f := v.Field(i)
			if f.IsZero() || f.Kind() == reflect.Slice && f.Len() == 0 {
				continue
			}
			if !first {
				sb.WriteString(", ")
			}
			first = false
			sb.WriteString(v.Type().Field(i).Name)
			sb.WriteByte(':')
			format(sb, f)
		}
		sb.WriteByte('}')
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			fmt.Fprintf(sb, "%q", v.Bytes())
			return
		}
		sb.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				sb.WriteString(" ")
			}
			format(sb, v.Index(i))
		}
		sb.WriteByte(']')
	case reflect.Bool:
		fmt.Fprint(sb, v.Bool())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if v.Type() == reflect.TypeFor[codec.ReasonCode]() || v.Type() == reflect.TypeFor[codec.Type]() {
			fmt.Fprintf(sb, "0x%02x", v.Uint())
			return
		}
		fmt.Fprint(sb, v.Uint())
	default:
		fmt.Fprint(sb, v)
	}
}

// num is one numeric property for props.
type num struct {
	id codec.PropID
	v  uint32
}

// props returns p with the numeric properties set, which a struct literal
// cannot do because presence is tracked apart from the value.
func props(p codec.Properties, nums ...num) codec.Properties {
	for _, n := range nums {
		p.SetNum(n.id, n.v)
	}
	return p
}

// s is a short spelling of []byte(str) for fixture packets.
func s(str string) []byte { return []byte(str) }
