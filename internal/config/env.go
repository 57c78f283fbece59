package config

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The environment layer sets configuration keys from XMQ_ variables, so a
// container needs no file. The keys and their variables come from the
// config struct's yaml tags by reflection: a new key has its variable with
// nothing to add here. The rule, documented in the README and xmq.yaml(5):
//
//   - The name is XMQ_ and the key's path in capitals with underscores:
//     broker.max_queued is XMQ_BROKER_MAX_QUEUED, data_dir XMQ_DATA_DIR.
//   - The value is written as in YAML: 5000, 10s, true. An empty value is
//     the key's zero value, as a key with nothing after it in YAML.
//   - A list of plain values is comma-separated (XMQ_ACME_DOMAINS=a,b) or
//     a YAML flow sequence ([a, b]).
//   - An entry of a list of sections is numbered from 0:
//     XMQ_LISTENERS_0_ADDRESS sets the address of the first listener of the
//     file (or of the defaults); the number after the last entry adds one.
//   - An entry of a map is named in capitals: XMQ_WEB_API_KEYS_CI_ROLE sets
//     web.api_keys.ci.role (the name is lower-cased).
//   - The variable of a section, list or map (XMQ_BROKER, XMQ_LISTENERS,
//     XMQ_WEB_API_KEYS) takes its whole value in YAML flow style; a list or
//     map given so replaces the one from the file, a section is merged.
//     Shorter names apply first, so XMQ_LISTENERS_0_ADDRESS refines the list
//     XMQ_LISTENERS set.
//   - An XMQ_ variable that is no key but looks like one (it starts with a
//     section's variable, or is a couple of letters from a key's) is an
//     error naming the closest key. Other XMQ_ variables are not
//     configuration (XMQ_ADMIN_PASSWORD) and are left alone.

// envPrefix starts every configuration variable.
const envPrefix = "XMQ_"

// envNotKeys are the XMQ_ variables that are not configuration keys.
var envNotKeys = []string{AdminPasswordEnv}

// envSetting is one configuration variable that was applied.
type envSetting struct {
	name, value string
	path        []string // the key's path: "listeners", "0", "address"
}

// Key is the dotted key path, as config print and xmq.yaml(5) show it.
func (s envSetting) Key() string { return strings.Join(s.path, ".") }

// applyEnv sets the keys named by the XMQ_ variables of env (os.Environ's
// form) over cfg. It returns what it applied, in order, and every mistake
// at once (Errors): malformed values, each under its key and
// variable, and unknown variables that look like keys.
func applyEnv(cfg *Config, env []string) ([]envSetting, error) {
	root := reflect.TypeFor[Config]()
	var sets []envSetting
	var errs Errors
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, envPrefix) || slices.Contains(envNotKeys, name) {
			continue
		}
		path, ok := resolveEnv(root, strings.TrimPrefix(name, envPrefix))
		if !ok {
			if hint, looks := closestEnv(name); looks {
				errs = append(errs, &Problem{where: "environment",
					msg: fmt.Sprintf("%s is not a configuration variable; closest: %s (xmq config env lists them)", name, hint)})
			}
			continue
		}
		sets = append(sets, envSetting{name: name, value: value, path: path})
	}
	// Shorter paths first, so a whole list, map or section is set before
	// its entries; entries in number order, so each added one follows the
	// last.
	slices.SortFunc(sets, func(a, b envSetting) int {
		if c := cmp.Compare(len(a.path), len(b.path)); c != 0 {
			return c
		}
		for i := range a.path {
			ai, aerr := strconv.Atoi(a.path[i])
			bi, berr := strconv.Atoi(b.path[i])
			if aerr == nil && berr == nil {
				if c := cmp.Compare(ai, bi); c != 0 {
					return c
				}
			} else if c := strings.Compare(a.path[i], b.path[i]); c != 0 {
				return c
			}
		}
		return 0
	})
	for _, s := range sets {
		var ps Problems
		setPath(reflect.ValueOf(cfg).Elem(), s.path, KeyPath(s.path), s.value, &ps)
		for _, p := range ps.List {
			p.where = "environment " + s.name
		}
		errs = append(errs, ps.List...)
	}
	if len(errs) > 0 {
		return sets, errs
	}
	return sets, nil
}

// YAMLField is one configuration key of a struct.
type YAMLField struct {
	Key   string       // the YAML name
	Index int          // the field's index in its struct
	Type  reflect.Type // the field's type
}

// YAMLFields lists t's keys, the longest first, so that max_queued_bytes
// is tried before max_queued when a variable name is resolved.
func YAMLFields(t reflect.Type) []YAMLField {
	var fs []YAMLField
	for i := range t.NumField() {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || key == "" || key == "-" {
			continue
		}
		fs = append(fs, YAMLField{Key: key, Index: i, Type: f.Type})
	}
	slices.SortStableFunc(fs, func(a, b YAMLField) int { return cmp.Compare(len(b.Key), len(a.Key)) })
	return fs
}

var durationType = reflect.TypeFor[time.Duration]()

// section reports whether t holds keys of its own (a struct that is not a
// scalar in YAML).
func section(t reflect.Type) bool { return t.Kind() == reflect.Struct }

// entries reports whether t is a list or map of sections, whose entries
// variables address by number or name.
func entries(t reflect.Type) bool {
	return (t.Kind() == reflect.Slice || t.Kind() == reflect.Map && t.Key().Kind() == reflect.String) &&
		section(t.Elem())
}

// maxEnvIndex bounds a list entry's number in a variable name.
const maxEnvIndex = 9999

// resolveEnv finds the key path a variable name (without XMQ_) names in a
// value of type t.
func resolveEnv(t reflect.Type, rest string) ([]string, bool) {
	switch {
	case section(t):
		for _, f := range YAMLFields(t) {
			up := strings.ToUpper(f.Key)
			if rest == up {
				return []string{f.Key}, true
			}
			if sub, ok := strings.CutPrefix(rest, up+"_"); ok {
				if p, ok := resolveEnv(f.Type, sub); ok {
					return append([]string{f.Key}, p...), true
				}
			}
		}
	case entries(t) && t.Kind() == reflect.Slice:
		idx, sub, more := strings.Cut(rest, "_")
		n, err := strconv.Atoi(idx)
		if err != nil || n < 0 || n > maxEnvIndex || strconv.Itoa(n) != idx {
			return nil, false
		}
		if !more {
			return []string{idx}, true
		}
		if p, ok := resolveEnv(t.Elem(), sub); ok {
			return append([]string{idx}, p...), true
		}
	case entries(t):
		for _, f := range YAMLFields(t.Elem()) {
			if name, ok := strings.CutSuffix(rest, "_"+strings.ToUpper(f.Key)); ok && name != "" && !section(f.Type) {
				return []string{strings.ToLower(name), f.Key}, true
			}
		}
		if rest != "" {
			return []string{strings.ToLower(rest)}, true
		}
	}
	return nil, false
}

// setPath sets the key at path below v (addressable) from a variable's
// value; full is the whole key's path, for the problems it adds to ps.
func setPath(v reflect.Value, path []string, full KeyPath, value string, ps *Problems) {
	if len(path) == 0 {
		setValue(v, value, full, ps)
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for _, f := range YAMLFields(v.Type()) {
			if f.Key == path[0] {
				setPath(v.Field(f.Index), path[1:], full, value, ps)
				return
			}
		}
	case reflect.Slice:
		n, _ := strconv.Atoi(path[0])
		if n > v.Len() {
			ps.Add(full, "entry %d of a list of %d: number the entries without gaps", n, v.Len())
			return
		}
		if n == v.Len() {
			v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
		}
		setPath(v.Index(n), path[1:], full, value, ps)
		return
	case reflect.Map:
		// Map entries are not addressable: set a copy and store it.
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		k := reflect.ValueOf(path[0]).Convert(v.Type().Key())
		e := reflect.New(v.Type().Elem()).Elem()
		if old := v.MapIndex(k); old.IsValid() {
			e.Set(old)
		}
		setPath(e, path[1:], full, value, ps)
		v.SetMapIndex(k, e)
		return
	}
	ps.Add(full, "no key %q", path[0])
}

// setValue decodes one variable's value into v as YAML would, with the
// same checks as the file's values (checkNode).
func setValue(v reflect.Value, value string, p KeyPath, ps *Problems) {
	flow := strings.HasPrefix(strings.TrimSpace(value), "[") || strings.HasPrefix(strings.TrimSpace(value), "{")
	switch {
	case value == "":
		v.SetZero()
		return
	case v.Kind() == reflect.Slice && !section(v.Type().Elem()) && !flow:
		out := reflect.MakeSlice(v.Type(), 0, 4)
		for part := range strings.SplitSeq(value, ",") {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			e := reflect.New(v.Type().Elem()).Elem()
			if !setScalar(e, part, p.With(strconv.Itoa(out.Len())), ps) {
				return
			}
			out = reflect.Append(out, e)
		}
		v.Set(out)
		return
	case v.Kind() == reflect.Struct || v.Kind() == reflect.Slice || v.Kind() == reflect.Map:
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(value), &doc); err != nil {
			ps.Add(p, "not valid YAML flow style: %s", strings.TrimPrefix(err.Error(), "yaml: "))
			return
		}
		if doc.Kind == 0 || len(doc.Content) == 0 {
			v.SetZero()
			return
		}
		n := len(ps.List)
		checkNode(doc.Content[0], v.Type(), p, nil, ps)
		if len(ps.List) > n {
			return
		}
		if v.Kind() != reflect.Struct {
			v.SetZero() // a list or map given whole replaces the file's
		}
		if err := doc.Content[0].Decode(v.Addr().Interface()); err != nil {
			ps.Add(p, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		return
	}
	setScalar(v, value, p, ps)
}

// setScalar decodes a plain value: strings are taken as they are (yes,
// null or 010 stay text), everything else is resolved as YAML resolves an
// unquoted value. It reports whether the value was good.
func setScalar(v reflect.Value, value string, p KeyPath, ps *Problems) bool {
	n := yaml.Node{Kind: yaml.ScalarNode, Value: value}
	if v.Kind() == reflect.String {
		n.Tag = "!!str"
	}
	if err := n.Decode(v.Addr().Interface()); err != nil {
		ps.Add(p, "%s", scalarProblem(v.Type(), value))
		return false
	}
	return true
}

// envTemplate is one configuration variable as `xmq config env` lists it,
// with <N> for a list entry's number and <NAME> for a map entry's name.
type envTemplate struct {
	Name, Key string       // XMQ_LISTENERS_<N>_ADDRESS, listeners.<N>.address
	Type      reflect.Type // the key's type
}

// envTemplates lists the variable of every key below t, depth first.
func envTemplates(t reflect.Type, name, key string) []envTemplate {
	var out []envTemplate
	for _, f := range YAMLFields(t) {
		n, k := name+strings.ToUpper(f.Key), strings.TrimPrefix(key+"."+f.Key, ".")
		out = append(out, envTemplate{n, k, f.Type})
		switch {
		case section(f.Type):
			out = append(out, envTemplates(f.Type, n+"_", k)...)
		case entries(f.Type) && f.Type.Kind() == reflect.Slice:
			out = append(out, envTemplates(f.Type.Elem(), n+"_<N>_", k+".<N>")...)
		case entries(f.Type):
			out = append(out, envTemplates(f.Type.Elem(), n+"_<NAME>_", k+".<NAME>")...)
		}
	}
	// YAMLFields sorts by length for resolving; list in key order.
	slices.SortStableFunc(out, func(a, b envTemplate) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// closestEnv names the configuration variable closest to an unknown XMQ_
// name, and reports whether the name looks like a key's variable at all:
// it starts with a top-level key's variable, or is at most two edits from
// one.
func closestEnv(name string) (string, bool) {
	// Compare with list numbers as <N>, and answer with the caller's number.
	parts := strings.Split(name, "_")
	var nums []string
	for i, p := range parts {
		if _, err := strconv.Atoi(p); err == nil && i > 1 {
			nums = append(nums, p)
			parts[i] = "<N>"
		}
	}
	norm := strings.Join(parts, "_")
	best, dist := "", -1
	looks := false
	for _, tpl := range envTemplates(reflect.TypeFor[Config](), envPrefix, "") {
		if !strings.Contains(tpl.Key, ".") && (norm == tpl.Name || strings.HasPrefix(norm, tpl.Name+"_")) {
			looks = true
		}
		if d := editDistance(norm, tpl.Name); dist < 0 || d < dist {
			best, dist = tpl.Name, d
		}
	}
	for _, n := range nums {
		best = strings.Replace(best, "<N>", n, 1)
	}
	return best, looks || dist <= 2
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
