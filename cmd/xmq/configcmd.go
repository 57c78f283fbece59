package main

import (
	"errors"
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

// runConfig is `xmq config print [flags]` and `xmq config env`.
func runConfig(args, env []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{errors.New("usage: xmq config print [flags] | xmq config env (xmq config -h)")}
	}
	switch args[0] {
	case "print":
		show, rest := false, make([]string, 0, len(args)-1)
		for _, a := range args[1:] {
			if a == "-show-secrets" || a == "--show-secrets" {
				show = true
				continue
			}
			rest = append(rest, a)
		}
		cfg, src, err := loadConfigEnv(rest, env)
		switch {
		case errors.Is(err, errHelp):
			printConfigUsage(stdout)
			return nil
		case errors.Is(err, errVersion):
			printVersion(stdout)
			return nil
		case err != nil:
			return err
		}
		return printConfig(stdout, cfg, src, show)
	case "env":
		if len(args) > 1 {
			return usageError{fmt.Errorf("config env takes no arguments, got %q", args[1:])}
		}
		printConfigEnv(stdout)
		return nil
	case "-h", "-help", "--help", "help":
		printConfigUsage(stdout)
		return nil
	}
	return usageError{fmt.Errorf("config: unknown command %q (xmq config -h)", args[0])}
}

func printConfigUsage(w io.Writer) {
	fmt.Fprint(w, `xmq config shows the configuration.

Usage:
  xmq config print [-show-secrets] [flags]
                     print the configuration xmq would run with, given the
                     same flags: defaults, then the file (-c), then the XMQ_
                     environment variables, then the flags. Values set by a
                     variable or a flag are marked with it; secrets
                     (passwords, password and key hashes, the cluster
                     secret) print as "<redacted>" unless -show-secrets is
                     given. The output is a valid configuration file.
  xmq config env     list the environment variable of every key

Environment:
  Every key can be set by a variable: XMQ_ and the key's path in capitals,
  dots as underscores (broker.max_queued: XMQ_BROKER_MAX_QUEUED=5000).
  Values are written as in YAML (10s, true); a list of plain values is
  comma-separated (XMQ_ACME_DOMAINS=a.example.com,b.example.com); an entry
  of a list of sections is numbered from 0 (XMQ_LISTENERS_0_ADDRESS=:1884;
  the number after the last entry adds one); an entry of a map is named
  (XMQ_WEB_API_KEYS_CI_ROLE=viewer). XMQ_LISTENERS, XMQ_BROKER and the other
  sections' variables take YAML flow style: '[{transport: tcp}]'. An
  unknown variable that looks like a key is an error naming the closest.
`)
}

// secretMask replaces a secret's value in config print.
const secretMask = "<redacted>"

// printConfig writes cfg as YAML with every default spelled out, the keys
// in src marked with the variable or flag that set them, and, unless
// show, the fields tagged secret:"true" masked.
func printConfig(w io.Writer, cfg config, src configSources, show bool) error {
	cfg = effectiveConfig(cfg)
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

// effectiveConfig replaces the zero values that mean "the package's
// default" in the broker, auth and store sections with those defaults,
// taken from the packages themselves (fields match by name, as the tests
// of brokerConfig and authConfig keep true).
func effectiveConfig(cfg config) config {
	fillZeros(reflect.ValueOf(&cfg.Broker).Elem(), reflect.ValueOf(core.DefaultOptions()))
	ao := cfg.authOptions()
	ao.SetDefaults()
	fillZeros(reflect.ValueOf(&cfg.Auth).Elem(), reflect.ValueOf(ao))
	fillZeros(reflect.ValueOf(&cfg.Auth).Elem(), reflect.ValueOf(ao.Limits))
	cfg.Store = cfg.Store.withDefaults()
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
				v.Field(i).SetString(secretMask)
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
func annotate(n *yaml.Node, path string, src configSources) {
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

// printConfigEnv lists every key's variable: `xmq config env`.
func printConfigEnv(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tKEY\tVALUE")
	for _, t := range envTemplates(reflect.TypeFor[config](), envPrefix, "") {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", t.name, t.key, envKind(t.typ))
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\n<N> numbers a list's entries from 0; <NAME> is a map entry's name in capitals.")
	fmt.Fprintf(w, "%s (not a key) sets the dashboard admin's password.\n", adminPasswordEnv)
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
