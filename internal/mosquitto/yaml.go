package mosquitto

import (
	"bufio"
	"bytes"
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/xmq-io/xmq/internal/config"
)

// yamlChunk is the most list items (listeners, bridges, a bridge's
// topics …) that xmq import hands to one yaml.v3 encoder at a time.
//
// yaml.v3 keeps every event of an Encode call until the call returns (its
// emitter's queue of events only grows), and Node.Encode runs the emitter
// and then the parser over its whole value: one encoder for the whole
// import of a 60,000-line Mosquitto configuration allocated 2 GB there.
// Encoding a bounded part at a time bounds that by the part; the text is
// the same as one encoder's (TestImportRenderInParts).
const yamlChunk = 256

// yamlWriter writes an import's configuration as YAML, a bounded part at a
// time: the lists heavier than chunk item by item, everything else through
// one yaml.v3 encoder per part. Each part is pruned of the keys equal to
// their default and given its comments before it is written (render says
// which).
type yamlWriter struct {
	w     *bufio.Writer
	chunk int
	keep  map[string]bool     // paths written even when equal to their default
	line  map[string][]string // Import.lineComments
	head  map[string][]string // Import.headComments
	used  map[string]bool     // the paths of line and head that were found
	// first is the prefix of the next line instead of the indentation:
	// "- " where a list item is written in parts.
	first string
	buf   bytes.Buffer
}

// value writes v, the value at path with default def (nil: none), each
// line indented by indent.
func (y *yamlWriter) value(v reflect.Value, def *yaml.Node, path, indent string) error {
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if yamlWeight(v, y.chunk) <= y.chunk {
		var n yaml.Node
		if err := n.Encode(v.Interface()); err != nil {
			return err
		}
		pruneNode(&n, def, path, y.keep)
		y.comments(nil, &n, path, false)
		return y.encode(&n, indent)
	}
	switch v.Kind() {
	case reflect.Struct:
		return y.section(v, def, path, indent)
	case reflect.Slice:
		return y.list(v, path, indent)
	}
	return fmt.Errorf("%s: a %s too large to write in parts", path, v.Kind()) // import.go writes no such value
}

// section writes the struct v key by key: each run of light keys through
// one encoder, each heavy one (a long list, or a section holding one)
// after its key line, by parts.
func (y *yamlWriter) section(v reflect.Value, def *yaml.Node, path, indent string) error {
	light := reflect.New(v.Type()).Elem()
	light.Set(v)
	heavy := map[string]reflect.Value{}
	for _, f := range config.YAMLFields(v.Type()) {
		if fv := v.Field(f.Index); yamlWeight(fv, y.chunk) > y.chunk {
			heavy[f.Key] = fv
			light.Field(f.Index).SetZero()
			y.keep[joinPath(path, f.Key)] = true // its placeholder would go as empty
		}
	}
	var n yaml.Node
	if err := n.Encode(light.Interface()); err != nil {
		return err
	}
	pruneNode(&n, def, path, y.keep)
	var run []*yaml.Node
	flush := func() error {
		if len(run) == 0 {
			return nil
		}
		err := y.encode(&yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: run}, indent)
		run = nil
		return err
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, kv := n.Content[i], n.Content[i+1]
		p := joinPath(path, k.Value)
		fv, big := heavy[k.Value]
		y.comments(k, kv, p, big)
		if !big {
			run = append(run, k, kv)
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		// The key line as yaml.v3 writes it: its head comment, then the
		// key (a Go field's tag, always plain), the value below it.
		y.comment(k.HeadComment, indent)
		y.text([]byte(k.Value+":\n"), indent)
		var dv *yaml.Node
		if def != nil {
			dv = mappingValue(def, k.Value)
		}
		if err := y.value(fv, dv, p, indent+"  "); err != nil {
			return err
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if y.first != "" { // nothing was written for this list item
		y.text([]byte("{}\n"), indent)
	}
	return nil
}

// list writes the items of the slice v: each run of light items, at most
// chunk of them in all, through one encoder; a heavy item (a bridge with
// many topics) by parts.
func (y *yamlWriter) list(v reflect.Value, path, indent string) error {
	for i := 0; i < v.Len(); {
		if item := v.Index(i); item.Kind() == reflect.Struct && yamlWeight(item, y.chunk) >= y.chunk {
			p := fmt.Sprintf("%s[%d]", path, i)
			if cs, ok := y.head[p]; ok {
				y.used[p] = true
				y.comment(wrapLines(cs), indent)
			}
			y.first = indent + "- "
			if err := y.section(item, nil, p, indent+"  "); err != nil {
				return err
			}
			i++
			continue
		}
		j, w := i, 0
		for ; j < v.Len(); j++ {
			item := v.Index(j)
			iw := 1 + yamlWeight(item, y.chunk)
			if j > i && (w+iw > y.chunk || item.Kind() == reflect.Struct && iw > y.chunk) {
				break
			}
			w += iw
		}
		var n yaml.Node
		if err := n.Encode(v.Slice(i, j).Interface()); err != nil {
			return err
		}
		for k, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i+k)
			pruneNode(item, nil, p, y.keep) // an item has no default: its empty keys go
			y.comments(nil, item, p, false)
		}
		if err := y.encode(&n, indent); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// comments attaches the comments of the key k (nil for a list item) with
// value v at path and below. A key's single short comment goes at the end
// of its value's line when that value is on it, others above the key;
// heavy says the value is written by parts, below its key.
func (y *yamlWriter) comments(k, v *yaml.Node, path string, heavy bool) {
	if cs, ok := y.line[path]; ok && k != nil {
		y.used[path] = true
		if len(cs) == 1 && len(cs[0]) <= 80 && !heavy && (v.Kind == yaml.ScalarNode || len(v.Content) == 0) {
			v.LineComment = cs[0]
		} else {
			k.HeadComment = wrapLines(cs)
		}
	}
	if cs, ok := y.head[path]; ok {
		y.used[path] = true
		v.HeadComment = wrapLines(cs)
	}
	if heavy {
		return // v is a placeholder: the value's own comments go as it is written
	}
	switch v.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(v.Content); i += 2 {
			y.comments(v.Content[i], v.Content[i+1], joinPath(path, v.Content[i].Value), false)
		}
	case yaml.SequenceNode:
		for i, item := range v.Content {
			y.comments(nil, item, fmt.Sprintf("%s[%d]", path, i), false)
		}
	}
}

// encode writes n through a new encoder.
func (y *yamlWriter) encode(n *yaml.Node, indent string) error {
	y.buf.Reset()
	enc := yaml.NewEncoder(&y.buf)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	y.text(y.buf.Bytes(), indent)
	return nil
}

// comment writes a head comment as yaml.v3 does: "# " before each line
// that has no '#' of its own, an empty line as it is.
func (y *yamlWriter) comment(c, indent string) {
	if c == "" {
		return
	}
	for l := range strings.SplitSeq(c, "\n") {
		switch {
		case l == "":
			y.text([]byte("\n"), indent)
		case l[0] == '#':
			y.text([]byte(l+"\n"), indent)
		default:
			y.text([]byte("# "+l+"\n"), indent)
		}
	}
}

// text writes lines, each after indent (the first after y.first when
// set); an empty line stays empty.
func (y *yamlWriter) text(b []byte, indent string) {
	for len(b) > 0 {
		l := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			l = b[:i+1]
		}
		b = b[len(l):]
		if len(l) > 1 {
			if y.first != "" {
				y.w.WriteString(y.first)
				y.first = ""
			} else {
				y.w.WriteString(indent)
			}
		}
		y.w.Write(l)
	}
}

// yamlWeight is the number of list items in v, counted up to just past
// limit: how much of the output v makes, in the unit of yamlChunk.
func yamlWeight(v reflect.Value, limit int) int {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return 0
		}
		return yamlWeight(v.Elem(), limit)
	case reflect.Struct:
		w := 0
		for i := range v.NumField() {
			if w += yamlWeight(v.Field(i), limit-w); w > limit {
				break
			}
		}
		return w
	case reflect.Slice, reflect.Array:
		w := 0
		for i := 0; i < v.Len() && w <= limit; i++ {
			w += 1 + yamlWeight(v.Index(i), limit-w-1)
		}
		return w
	}
	// A map goes whole with its section: none that import.go writes is
	// long or holds a list.
	return 0
}

// joinPath is the path of key below path.
func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// mappingValue is the value of key in the mapping n, nil when it has none.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
