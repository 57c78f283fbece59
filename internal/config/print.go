package config

import (
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"

	"go.yaml.in/yaml/v3"

	"github.com/xmq-io/xmq/auth"
	"github.com/xmq-io/xmq/core"
)

// SecretMask replaces a secret's value in config print.
const SecretMask = "<redacted>"

// Print writes cfg as YAML with every default spelled out, the keys
// in src marked with the variable or flag that set them, and, unless
// show, the fields tagged secret:"true" masked.
func Print(w io.Writer, cfg Config, src Sources, show bool) error {
	cfg = Effective(cfg)
	if !show {
		maskSecrets(reflect.ValueOf(&cfg).Elem())
	}
	var n yaml.Node
	if err := n.Encode(&cfg); err != nil {
		return err
	}
	annotate(&n, "", src)
	n.HeadComment = "The configuration in effect: defaults < file < XMQ_ environment < flags.\n" +
		"Keys set by a variable or a flag are marked with it."
	if !show {
		n.HeadComment += " Secrets are redacted (xmq config print -show-secrets prints them)."
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return err
	}
	return enc.Close()
}

// Effective replaces the zero values that mean "the package's
// default" in the broker, auth and store sections with those defaults,
// taken from the packages themselves (fields match by name, as the tests
// of Broker and Auth keep true).
func Effective(cfg Config) Config {
	fillZeros(reflect.ValueOf(&cfg.Broker).Elem(), reflect.ValueOf(core.DefaultOptions()))
	ao := cfg.AuthOptions()
	ao.SetDefaults()
	fillZeros(reflect.ValueOf(&cfg.Auth).Elem(), reflect.ValueOf(ao))
	fillZeros(reflect.ValueOf(&cfg.Auth).Elem(), reflect.ValueOf(ao.Limits))
	cfg.Store = cfg.Store.WithDefaults()
	return cfg
}

// fillZeros sets each zero field of dst to the same-named field of def.
func fillZeros(dst, def reflect.Value) {
	for i := range dst.NumField() {
		f := dst.Field(i)
		d := def.FieldByName(dst.Type().Field(i).Name)
		if f.IsZero() && d.IsValid() && d.Type() == f.Type() {
			f.Set(d)
		}
	}
}

// maskSecrets replaces the non-empty strings of fields tagged
// secret:"true" below v (addressable).
func maskSecrets(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			if f.Tag.Get("secret") == "true" && f.Type.Kind() == reflect.String && v.Field(i).Len() > 0 {
				v.Field(i).SetString(SecretMask)
				continue
			}
			maskSecrets(v.Field(i))
		}
	case reflect.Slice:
		for i := range v.Len() {
			maskSecrets(v.Index(i))
		}
	case reflect.Map:
		// Entries are not addressable: mask a copy into a new map, so the
		// caller's map is left as it was.
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(it.Value())
			maskSecrets(e)
			out.SetMapIndex(it.Key(), e)
		}
		v.Set(out)
	}
}

// annotate marks the keys below n (at path) that src names with the
// variable or flag that set them.
func annotate(n *yaml.Node, path string, src Sources) {
	join := func(k string) string { return strings.TrimPrefix(path+"."+k, ".") }
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			annotate(c, path, src)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := join(k.Value)
			if s, ok := src[p]; ok {
				k.LineComment = s
			}
			annotate(v, p, src)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := join(strconv.Itoa(i))
			if s, ok := src[p]; ok {
				c.HeadComment = s
			}
			annotate(c, p, src)
		}
	}
}

// PrintEnv lists every key's variable: `xmq config env`.
func PrintEnv(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tKEY\tVALUE")
	for _, t := range envTemplates(reflect.TypeFor[Config](), envPrefix, "") {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, t.Key, envKind(t.Type))
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\n<N> numbers a list's entries from 0; <NAME> is a map entry's name in capitals.")
	fmt.Fprintf(w, "%s (not a key) sets the dashboard admin's password.\n", AdminPasswordEnv)
}

// envKind says what a variable's value is, for config env.
func envKind(t reflect.Type) string {
	switch {
	case t == durationType:
		return "duration (10s, 1m30s)"
	case t == byteSizeType:
		return "size (268435456, 256MiB)"
	case t == reflect.TypeFor[auth.Anonymous]():
		return "true, false or loopback"
	case section(t):
		return "section, YAML flow {key: value}"
	case entries(t) && t.Kind() == reflect.Slice:
		return "list, YAML flow [{key: value}]"
	case entries(t):
		return "map, YAML flow {name: {key: value}}"
	case t.Kind() == reflect.Slice:
		return "list: a,b,c"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.String:
		return "text"
	}
	return "number"
}
