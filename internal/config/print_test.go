package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestSecretsTagged: every key that holds a password, a hash, a token or
// a secret (not the name of a file holding one) is tagged secret, so that
// config print redacts it.
func TestSecretsTagged(t *testing.T) {
	var walk func(typ reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		for f := range typ.Fields() {
			key := path + "." + f.Tag.Get("yaml")
			switch ft := f.Type; {
			case ft.Kind() == reflect.Struct:
				walk(ft, key)
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				walk(ft.Elem(), key+"[]")
			case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
				walk(ft.Elem(), key+"{}")
			case ft.Kind() == reflect.String:
				name := f.Tag.Get("yaml")
				sensitive := strings.Contains(name, "password") || strings.Contains(name, "secret") ||
					strings.Contains(name, "token") || strings.Contains(name, "hash") || strings.Contains(name, "sha256")
				if sensitive && !strings.HasSuffix(name, "_file") && f.Tag.Get("secret") != "true" {
					t.Errorf("%s holds a secret but is not tagged secret:\"true\"", key)
				}
			}
		}
	}
	walk(reflect.TypeFor[Config](), "")
}
