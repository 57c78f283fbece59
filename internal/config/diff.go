package config

import (
	"cmp"
	"reflect"
	"slices"
	"strconv"
)

// ValueAt is the value of key p in cfg; the zero Value when p is not there.
func ValueAt(cfg *Config, p KeyPath) any {
	v := fieldAt(reflect.ValueOf(cfg).Elem(), p)
	if !v.IsValid() {
		return nil
	}
	return v.Interface()
}

// fieldAt walks p below v: sections by key, lists by number.
func fieldAt(v reflect.Value, p KeyPath) reflect.Value {
	for _, k := range p {
		switch v.Kind() {
		case reflect.Struct:
			found := false
			for _, f := range YAMLFields(v.Type()) {
				if f.Key == k {
					v, found = v.Field(f.Index), true
					break
				}
			}
			if !found {
				return reflect.Value{}
			}
		case reflect.Slice:
			i, err := strconv.Atoi(k)
			if err != nil || i >= v.Len() {
				return reflect.Value{}
			}
			v = v.Index(i)
		default:
			return reflect.Value{}
		}
	}
	return v
}

// CopyKey sets key p of dst to its value in src.
func CopyKey(dst, src *Config, p KeyPath) {
	d, s := fieldAt(reflect.ValueOf(dst).Elem(), p), fieldAt(reflect.ValueOf(src).Elem(), p)
	if d.IsValid() && s.IsValid() && d.CanSet() {
		d.Set(s)
	}
}

// DiffKeys lists the keys whose values differ between a and b: the
// deepest key of a section, a list whose length changed, a map as a whole.
func DiffKeys(a, b reflect.Value, p KeyPath, out *[]KeyPath) {
	switch a.Kind() {
	case reflect.Struct:
		fs := YAMLFields(a.Type())
		slices.SortFunc(fs, func(x, y YAMLField) int { return cmp.Compare(x.Index, y.Index) }) // the file's order
		for _, f := range fs {
			DiffKeys(a.Field(f.Index), b.Field(f.Index), p.With(f.Key), out)
		}
	case reflect.Slice:
		if a.Len() != b.Len() || !section(a.Type().Elem()) {
			if !reflect.DeepEqual(a.Interface(), b.Interface()) && !(a.Len() == 0 && b.Len() == 0) {
				*out = append(*out, p)
			}
			return
		}
		for i := range a.Len() {
			DiffKeys(a.Index(i), b.Index(i), p.With(strconv.Itoa(i)), out)
		}
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, p)
		}
	}
}
