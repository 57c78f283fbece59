package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ByteSize is a number of bytes, written as GOMEMLIMIT writes one: a whole
// number with an optional unit, B, KiB, MiB, GiB or TiB ("256MiB"); a bare
// number is bytes.
type ByteSize int64

var byteSizeType = reflect.TypeFor[ByteSize]()

// sizeUnits are GOMEMLIMIT's units, the largest first for printing.
var sizeUnits = []struct {
	name  string
	shift uint
}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}

func parseByteSize(s string) (ByteSize, error) {
	num, shift := strings.TrimSpace(s), uint(0)
	for _, u := range sizeUnits {
		if n, ok := strings.CutSuffix(num, u.name); ok {
			num, shift = strings.TrimSpace(n), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("%q is not a size (write bytes or a number with a unit: 256MiB, 2GiB)", s)
	}
	return ByteSize(n << shift), nil
}

func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseByteSize(n.Value)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// MarshalYAML prints the size with the largest unit that divides it, so
// config print shows 256MiB as it was written.
func (b ByteSize) MarshalYAML() (any, error) {
	for _, u := range sizeUnits {
		if b != 0 && u.shift > 0 && b%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d%s", b>>u.shift, u.name), nil
		}
	}
	return int64(b), nil
}
