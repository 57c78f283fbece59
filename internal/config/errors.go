package config

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Configuration errors name the key and the fix, never a Go type: a
// mistake is a Problem with the key's path (listeners[0].address),
// where the value came from (xmq.yaml:12, an XMQ_ variable or a flag) and
// what is wrong with it. The file is checked node by node against the
// config struct before it is decoded, so every mistake of a file is
// reported at once, each with its line; the environment's values go
// through the same checks, and validate's findings get the same shape.

// KeyPath is a configuration key's path: "listeners", "0", "address".
type KeyPath []string

// String writes the path as errors show it: listeners[0].tls.verify.
func (p KeyPath) String() string {
	var b strings.Builder
	for _, s := range p {
		if _, err := strconv.Atoi(s); err == nil {
			b.WriteString("[" + s + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}

// Key is the dotted form Sources and the file's line index use:
// listeners.0.address.
func (p KeyPath) Key() string { return strings.Join(p, ".") }

// With returns p extended by more, never sharing p's array.
func (p KeyPath) With(more ...string) KeyPath { return append(slices.Clip(p), more...) }

// Path builds a KeyPath from its parts; numbers are list entries.
func Path(parts ...any) KeyPath {
	p := make(KeyPath, 0, len(parts))
	for _, x := range parts {
		p = append(p, fmt.Sprint(x))
	}
	return p
}

// Problem is one mistake in the configuration.
type Problem struct {
	path  KeyPath
	where string // "xmq.yaml:12", "environment XMQ_…", "flag -…"; "" for a default
	line  int    // the file's line, when path cannot say it (a YAML syntax error)
	msg   string // what is wrong, and the fix
}

func (p *Problem) Error() string {
	s := p.msg
	if len(p.path) > 0 {
		s = p.path.String() + ": " + s
	}
	if p.where != "" {
		s = p.where + ": " + s
	}
	return s
}

// Errors are all the mistakes found in a configuration.
type Errors []*Problem

func (e Errors) Error() string {
	if len(e) == 1 {
		return e[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s in the configuration:", CountProblems(len(e)))
	for _, p := range e {
		b.WriteString("\n  " + p.Error())
	}
	return b.String()
}

// Problems collects configProblems.
type Problems struct{ List Errors }

func (ps *Problems) Add(p KeyPath, format string, a ...any) {
	ps.List = append(ps.List, &Problem{path: p, msg: fmt.Sprintf(format, a...)})
}

// AddErr adds err under p, dropping a package prefix ("auth: ") that would
// only repeat the section.
func (ps *Problems) AddErr(p KeyPath, err error) {
	for _, e := range Unjoin(err) {
		msg := e.Error()
		for _, pre := range []string{"core: ", "auth: ", "store: ", "web: ", "bridge: ", "certs: ", "listeners: "} {
			msg = strings.TrimPrefix(msg, pre)
		}
		ps.Add(p, "%s", msg)
	}
}

// Unjoin splits an errors.Join into its parts.
func Unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, Unjoin(e)...)
		}
		return out
	}
	return []error{err}
}

// Origin says where each key of a configuration came from, to point at it
// in errors: the file's lines, and the variables and flags that set keys.
type Origin struct {
	file  string
	lines map[string]int // key → line in file
	src   Sources        // key → XMQ_ variable or flag
}

// Locate fills in where each problem's value came from: the variable or
// flag that set the key or a section above it, else the file's line for
// the key or the nearest section above it that the file has.
func (o *Origin) Locate(ps Errors) {
	for _, p := range ps {
		if p.where != "" {
			continue
		}
		if p.line > 0 && o.file != "" {
			p.where = fmt.Sprintf("%s:%d", o.file, p.line)
			continue
		}
		for n := len(p.path); n >= 0; n-- {
			k := p.path[:n].Key()
			if s, ok := o.src[k]; ok {
				if strings.HasPrefix(s, "-") {
					p.where = "flag " + s
				} else {
					p.where = "environment " + s
				}
				break
			}
			if line, ok := o.lines[k]; ok && o.file != "" && n > 0 {
				p.where = fmt.Sprintf("%s:%d", o.file, line)
				break
			}
		}
		if p.where == "" && o.file != "" && len(p.path) == 0 {
			p.where = o.file
		}
	}
}

// decodeFile checks the YAML in data against the config struct and decodes
// it over cfg: keys present replace cfg's values. It reports every unknown
// key and malformed value at once, each with its path (and lines gets the
// line of every key), and decodes what it can even then, so that the
// checks after it see the rest of the file.
func decodeFile(data []byte, cfg *Config, lines map[string]int) Errors {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		p := &Problem{msg: "not valid YAML: " + msg}
		if rest, ok := strings.CutPrefix(msg, "line "); ok {
			if n, after, ok := strings.Cut(rest, ": "); ok {
				if p.line, err = strconv.Atoi(n); err == nil {
					p.msg = "not valid YAML: " + after
				}
			}
		}
		return Errors{p}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil // an empty file
	}
	var ps Problems
	checkNode(doc.Content[0], reflect.TypeFor[Config](), nil, lines, &ps)
	if err := doc.Content[0].Decode(cfg); err != nil && len(ps.List) == 0 {
		// checkNode lets nothing through that yaml refuses; should it
		// miss something, yaml's words are better than none.
		ps.Add(nil, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return ps.List
}

// checkNode reports the mistakes of n as a value of type t at path p:
// unknown and repeated keys, and values of the wrong kind. lines (may be
// nil) gets each key's line.
func checkNode(n *yaml.Node, t reflect.Type, p KeyPath, lines map[string]int, ps *Problems) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if lines != nil && len(p) > 0 {
		if _, ok := lines[p.Key()]; !ok {
			lines[p.Key()] = n.Line
		}
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // "key:" with nothing: the zero value, as yaml decodes it
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case section(t):
		if n.Kind != yaml.MappingNode {
			if len(p) == 0 && n.Kind == yaml.ScalarNode {
				// The whole file is one value: it is no configuration
				// (a token, a password given by mistake), so it is not
				// quoted.
				ps.Add(p, "want a section of keys, not a single value: is it an xmq configuration?")
				return
			}
			ps.Add(p, "want a section of keys, not %s", describeNode(n))
			return
		}
		known := YAMLFields(t)
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" { // a YAML merge key: its sections' keys count here
				checkNode(v, t, p, lines, ps)
				continue
			}
			kp := p.With(k.Value)
			if lines != nil {
				lines[kp.Key()] = k.Line
			}
			if first, dup := seen[k.Value]; dup {
				ps.Add(kp, "set twice (first on line %d)", first)
				continue
			}
			seen[k.Value] = k.Line
			i := slices.IndexFunc(known, func(f YAMLField) bool { return f.Key == k.Value })
			if i < 0 {
				ps.Add(kp, "unknown key%s", suggestKey(k.Value, known))
				continue
			}
			checkNode(v, known[i].Type, kp, lines, ps)
		}
	case t.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			ps.Add(p, "want a map of names to sections, not %s", describeNode(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			kp := p.With(n.Content[i].Value)
			if lines != nil {
				lines[kp.Key()] = n.Content[i].Line
			}
			checkNode(n.Content[i+1], t.Elem(), kp, lines, ps)
		}
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			ps.Add(p, "want a list, not %s", describeNode(n))
			return
		}
		for i, c := range n.Content {
			checkNode(c, t.Elem(), p.With(strconv.Itoa(i)), lines, ps)
		}
	default:
		if n.Kind != yaml.ScalarNode {
			ps.Add(p, "want a single value, not %s", describeNode(n))
			return
		}
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			ps.Add(p, "%s", scalarProblem(t, n.Value))
		}
	}
}

// describeNode names what a node holds, for "want X, not Y".
func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a section"
	case yaml.SequenceNode:
		return "a list"
	}
	return strconv.Quote(n.Value)
}

// scalarProblem says why value is no value of type t, with the fix.
func scalarProblem(t reflect.Type, value string) string {
	switch {
	case t == durationType:
		if _, err := strconv.ParseFloat(value, 64); err == nil {
			return fmt.Sprintf("%s is not a duration (write %ss)", value, value)
		}
		return fmt.Sprintf("%q is not a duration (write it with a unit: 500ms, 10s, 1m30s, 24h)", value)
	case t == byteSizeType:
		_, err := parseByteSize(value)
		return err.Error()
	case t.Kind() == reflect.Bool:
		return fmt.Sprintf("%q is not true or false", value)
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		lo, hi := int64(math.MinInt64)>>(64-t.Bits()), int64(math.MaxInt64)>>(64-t.Bits())
		if _, err := strconv.ParseFloat(value, 64); err == nil {
			return fmt.Sprintf("%s is not a whole number from %d to %d", value, lo, hi)
		}
		return fmt.Sprintf("%q is not a number", value)
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		hi := uint64(math.MaxUint64) >> (64 - t.Bits())
		if _, err := strconv.ParseFloat(value, 64); err == nil {
			return fmt.Sprintf("%s is not a whole number from 0 to %d", value, hi)
		}
		return fmt.Sprintf("%q is not a number", value)
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return fmt.Sprintf("%q is not a number", value)
	}
	return fmt.Sprintf("%q is not a valid value here", value)
}

// suggestKey is " (did you mean "x"?)" for the known key closest to an
// unknown one, or the list of the section's keys when none is close.
func suggestKey(name string, known []YAMLField) string {
	keys := make([]string, len(known))
	for i, f := range known {
		keys[i] = f.Key
	}
	slices.Sort(keys)
	if best, ok := closest(name, keys); ok {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return " (the keys here: " + strings.Join(keys, ", ") + ")"
}

// closest is the candidate nearest to name, if it is near enough to be a
// typo or a shortening: a couple of edits, half the name's length, or
// one a prefix of the other.
func closest(name string, candidates []string) (string, bool) {
	best, dist := "", -1
	for _, c := range candidates {
		d := editDistance(strings.ToLower(name), c)
		if strings.HasPrefix(c, name) || strings.HasPrefix(name, c) {
			d = min(d, 2)
		}
		if dist < 0 || d < dist {
			best, dist = c, d
		}
	}
	return best, dist >= 0 && dist <= max(2, len(name)/2)
}

// oneOf checks that v is one of valid (given in the order the message
// lists them; "" among them accepts the default) and, if not, adds the
// problem naming them all: what kind of value v should be, and the valid
// values.
func oneOf[T ~string](ps *Problems, p KeyPath, v T, what string, valid ...T) bool {
	if slices.Contains(valid, v) {
		return true
	}
	var names []string
	for _, x := range valid {
		if x != "" { // "" (the default) is valid where listed, but no choice to offer
			names = append(names, string(x))
		}
	}
	hint := ""
	if best, ok := closest(string(v), names); ok {
		hint = fmt.Sprintf(" (did you mean %s?)", best)
	}
	ps.Add(p, "%q is not %s: want %s%s", string(v), what, orList(names), hint)
	return false
}

// orList writes "a, b or c".
func orList(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// SortProblems orders problems by where they are, so a file's come in line
// order.
func SortProblems(ps Errors) {
	line := func(p *Problem) (string, int) {
		file, l, ok := strings.Cut(p.where, ":")
		if !ok {
			return p.where, 0
		}
		n, _ := strconv.Atoi(l)
		return file, n
	}
	slices.SortStableFunc(ps, func(a, b *Problem) int {
		fa, la := line(a)
		fb, lb := line(b)
		return cmp.Or(cmp.Compare(fa, fb), cmp.Compare(la, lb))
	})
}

// AsErrors returns err's problems when it is Errors.
func AsErrors(err error) (Errors, bool) {
	var ce Errors
	ok := errors.As(err, &ce)
	return ce, ok
}

// CountProblems is "1 problem" or "N problems".
func CountProblems(n int) string {
	if n == 1 {
		return "1 problem"
	}
	return strconv.Itoa(n) + " problems"
}
