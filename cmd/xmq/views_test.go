package main

import (
	"reflect"
	"testing"
	"time"

	"github.com/xmq-io/xmq/bridge"
	"github.com/xmq-io/xmq/cluster"
	"github.com/xmq-io/xmq/web"
)

// TestViewsMirrorSources: web's view types copy other packages' types
// (web imports neither cluster nor bridge), field by field, here in
// cmd/xmq. A field the source gains must reach the view, or be named below
// as left out with the reason; a view field must come from a source field;
// and the copy must carry every field.
func TestViewsMirrorSources(t *testing.T) {
	for _, tc := range []struct {
		src, view reflect.Type
		renamed   map[string]string // source field → its view field
		omitted   map[string]string // source field → why the API leaves it out
		copy      func(src any) any // nil: checked through the type that holds it
	}{
		{
			src: reflect.TypeFor[cluster.NodeStatus](), view: reflect.TypeFor[web.Node](),
			omitted: map[string]string{
				// Not added by the restructure (issue 25), which changes no
				// behaviour: candidates for the API, reported there.
				"Leaving": "set in a node's last heartbeat only, at Close: the other nodes drop it from their tables on it",
				"Groups":  "the sticky shared groups a heartbeat lists for the other nodes' routing (sticky.go)",
			},
			copy: func(src any) any { return nodeView(src.(cluster.NodeStatus)) },
		},
		{
			src: reflect.TypeFor[bridge.Status](), view: reflect.TypeFor[web.Bridge](),
			renamed: map[string]string{"Backoff": "BackoffSeconds"},
			copy:    func(src any) any { return bridgeView(src.(bridge.Status)) },
		},
		{src: reflect.TypeFor[bridge.Rule](), view: reflect.TypeFor[web.BridgeRule]()},
	} {
		t.Run(tc.view.String(), func(t *testing.T) {
			fromSource := map[string]bool{}
			for f := range tc.src.Fields() {
				if !f.IsExported() {
					continue
				}
				name := f.Name
				if r, ok := tc.renamed[name]; ok {
					name = r
				}
				_, inView := tc.view.FieldByName(name)
				switch _, left := tc.omitted[f.Name]; {
				case left && inView:
					t.Errorf("%s.%s is named as left out of %s, which has it: drop it from the list", tc.src, f.Name, tc.view)
				case !left && !inView:
					t.Errorf("%s.%s is not in %s: add it to the view and its copy, or name it here as left out, with why",
						tc.src, f.Name, tc.view)
				}
				fromSource[name] = true
			}
			for f := range tc.view.Fields() {
				if !fromSource[f.Name] {
					t.Errorf("%s.%s comes from no field of %s", tc.view, f.Name, tc.src)
				}
			}
			if tc.copy == nil {
				return
			}
			src := reflect.New(tc.src).Elem()
			fill(t, src)
			for _, path := range zeroFields(reflect.ValueOf(tc.copy(src.Interface())), tc.view.String()) {
				t.Errorf("%s is not copied from %s", path, tc.src)
			}
		})
	}
}

// fill gives v, and each field, element and value in it, a non-zero value.
func fill(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(7)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(t, v.Index(0))
	case reflect.Map:
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k)
		fill(t, e)
		v.Set(reflect.MakeMap(v.Type()))
		v.SetMapIndex(k, e)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(7, 0)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i))
			}
		}
	default:
		t.Fatalf("%s: kind %s not handled by fill", v.Type(), v.Kind())
	}
}

// zeroFields lists the paths of the zero fields in v, looking into
// structs and the first element of slices.
func zeroFields(v reflect.Value, path string) []string {
	switch {
	case v.Kind() == reflect.Struct && v.Type() != reflect.TypeFor[time.Time]():
		var out []string
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				out = append(out, zeroFields(v.Field(i), path+"."+v.Type().Field(i).Name)...)
			}
		}
		return out
	case v.Kind() == reflect.Slice && v.Len() > 0:
		return zeroFields(v.Index(0), path+"[0]")
	case v.IsZero() || v.Kind() == reflect.Map && v.Len() == 0:
		return []string{path}
	}
	return nil
}
