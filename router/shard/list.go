package shard

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"unsafe"
)

// listRule maps explicit key values to sub-tables. kingshard has no list
// rule; this is keyshard's.
type listRule struct {
	tableSet
	values map[string]int // canonical key text -> sub-table index
}

func newList(c Config, tables []SubTable) (*listRule, error) {
	if len(c.ListValues) == 0 {
		return nil, configError(c.Type, "list_values", "at least one value is required")
	}
	r := &listRule{tableSet: tableSet{typ: TypeList, tables: tables}, values: make(map[string]int, len(c.ListValues))}
	// Sorted, so that which of two colliding values is named is stable.
	texts := make([]string, 0, len(c.ListValues))
	for t := range c.ListValues {
		texts = append(texts, t)
	}
	sort.Strings(texts)
	seen := map[string]string{}
	for _, t := range texts {
		i := c.ListValues[t]
		if i < 0 || i >= len(tables) {
			return nil, configError(c.Type, "list_values", "value %q: sub-table %d does not exist: want 0..%d", t, i, len(tables)-1)
		}
		var buf [24]byte
		b, _ := canonical(t, buf[:0])
		key := string(b)
		if prev, dup := seen[key]; dup {
			return nil, configError(c.Type, "list_values", "values %q and %q are the same number", prev, t)
		}
		seen[key] = t
		r.values[key] = i
	}
	return r, nil
}

// Find looks the key's canonical text up; a value not listed is an error.
func (r *listRule) Find(v any) (int, error) {
	if v == nil {
		return -1, ErrNullKey
	}
	var buf [24]byte
	b, err := canonical(v, buf[:0])
	if err != nil {
		return -1, fmt.Errorf("list rule: %w", err)
	}
	if i, ok := r.values[string(b)]; ok {
		return i, nil
	}
	return -1, fmt.Errorf("list rule: %w: value %q is not in list_values", ErrKeyOutOfRange, string(b))
}

// FindRange returns every sub-table: list values have no order here.
func (r *listRule) FindRange(lo, hi Bound) ([]int, error) { return r.all(), nil }

// canonical returns the text a list or consistent_hash rule compares: the
// decimal form of an integer, whether given as a number or as text (so 42,
// "42", "042" and "+42" agree, as they do against a MySQL integer column);
// a float with an integral value is that integer; other floats are their
// shortest 'f' text; other strings are their bytes. The result is built in
// buf or aliases the string, and must not be modified or kept.
func canonical(v any, buf []byte) ([]byte, error) {
	switch x := v.(type) {
	case int64:
		return strconv.AppendInt(buf, x, 10), nil
	case int:
		return strconv.AppendInt(buf, int64(x), 10), nil
	case uint64:
		return strconv.AppendUint(buf, x, 10), nil
	case string:
		if b, ok := canonicalDecimal(x, buf); ok {
			return b, nil
		}
		return unsafe.Slice(unsafe.StringData(x), len(x)), nil
	case []byte:
		if b, ok := canonicalDecimal(x, buf); ok {
			return b, nil
		}
		return x, nil
	case float64:
		if x == math.Trunc(x) && x >= -(1<<63) && x < 1<<63 {
			return strconv.AppendInt(buf, int64(x), 10), nil
		}
		if x == math.Trunc(x) && x >= 0 && x < 1<<64 {
			return strconv.AppendUint(buf, uint64(x), 10), nil
		}
		return strconv.AppendFloat(buf, x, 'f', -1, 64), nil
	case nil:
		return nil, ErrNullKey
	default:
		return nil, fmt.Errorf("%w: type %T", ErrKeyType, v)
	}
}

// canonicalDecimal rewrites an integer in [MinInt64, MaxUint64] written in
// decimal, with optional sign and leading zeros, to its plain form.
func canonicalDecimal[T ~string | ~[]byte](s T, buf []byte) ([]byte, bool) {
	mag, sign, ok := decimal(s)
	if !ok || sign == '-' && mag > 1<<63 {
		return nil, false
	}
	if sign == '-' && mag != 0 {
		buf = append(buf, '-')
	}
	return strconv.AppendUint(buf, mag, 10), true
}
