package shard

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// rangeRule is kingshard's range: sub-table k holds [k*limit, (k+1)*limit).
type rangeRule struct {
	tableSet
	limit int64
	end   int64 // len(tables) * limit: first key past the last sub-table
}

func newRange(c Config, tables []SubTable) (*rangeRule, error) {
	if c.TableRowLimit < 1 {
		return nil, configError(c.Type, "table_row_limit", "required for a range rule: rows per sub-table >= 1, got %d", c.TableRowLimit)
	}
	limit := int64(c.TableRowLimit)
	if limit > math.MaxInt64/int64(len(tables)) {
		return nil, configError(c.Type, "table_row_limit", "%d rows times %d sub-tables overflows a 64-bit key", limit, len(tables))
	}
	return &rangeRule{
		tableSet: tableSet{typ: TypeRange, tables: tables},
		limit:    limit,
		end:      limit * int64(len(tables)),
	}, nil
}

// Find follows kingshard's NumRangeShard.FindForKey with NumValue: strings
// must parse with strconv.ParseInt base 10; a key below 0 or at or past the
// end of the last sub-table is an error (kingshard's ErrKeyOutOfRange).
func (r *rangeRule) Find(v any) (int, error) {
	var k int64
	switch x := v.(type) {
	case int64:
		k = x
	case int:
		k = int64(x)
	case uint64:
		if x > math.MaxInt64 {
			return -1, r.outOfRange(strconv.FormatUint(x, 10))
		}
		k = int64(x)
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return -1, fmt.Errorf("range rule: %w: %q is not a base-10 64-bit integer", ErrKeyType, x)
		}
		k = n
	case []byte:
		return r.Find(string(x))
	case nil:
		return -1, ErrNullKey
	case float64:
		return -1, fmt.Errorf("range rule: %w: float %v (kingshard ranges only integers)", ErrKeyType, x)
	default:
		return -1, keyTypeError(TypeRange, v)
	}
	return r.FindInt(k)
}

// FindInt is Find for an int64 key.
func (r *rangeRule) FindInt(k int64) (int, error) {
	if k < 0 || k >= r.end {
		return -1, r.outOfRange(strconv.FormatInt(k, 10))
	}
	return int(k / r.limit), nil
}

func (r *rangeRule) outOfRange(key string) error {
	return fmt.Errorf("range rule: %w: key %s is outside 0..%d (%d sub-tables of %d rows)",
		ErrKeyOutOfRange, key, r.end-1, len(r.tables), r.limit)
}

// FindRange clips [lo, hi] to the keys the rule covers, [0, end), so a
// bound past either end narrows the result instead of failing as in
// kingshard's planner (which errors on "id < 0" or on a bound past the last
// sub-table).
func (r *rangeRule) FindRange(lo, hi Bound) ([]int, error) {
	a, emptyLo, err := intBound(lo, true)
	if err != nil {
		return nil, err
	}
	b, emptyHi, err := intBound(hi, false)
	if err != nil {
		return nil, err
	}
	if emptyLo || emptyHi {
		return nil, nil
	}
	a = max(a, 0)
	b = min(b, r.end-1)
	if a > b {
		return nil, nil
	}
	return span(int(a/r.limit), int(b/r.limit)), nil
}

// intBound turns a bound into the smallest (low) or largest (!low) int64
// key it admits. empty reports that no int64 key satisfies it.
func intBound(b Bound, low bool) (k int64, empty bool, err error) {
	if b.Unbounded {
		if low {
			return math.MinInt64, false, nil
		}
		return math.MaxInt64, false, nil
	}
	switch x := b.Value.(type) {
	case nil:
		return 0, true, nil // comparison with NULL is never true
	case int64:
		return intEdge(x, b.Inclusive, low)
	case int:
		return intEdge(int64(x), b.Inclusive, low)
	case uint64:
		if x <= math.MaxInt64 {
			return intEdge(int64(x), b.Inclusive, low)
		}
		if low {
			return 0, true, nil // above every int64 key
		}
		return math.MaxInt64, false, nil
	case float64:
		return floatEdge(x, b.Inclusive, low)
	case []byte:
		return intBound(Bound{Value: string(x), Inclusive: b.Inclusive}, low)
	case string:
		n, perr := strconv.ParseInt(x, 10, 64)
		if perr == nil {
			return intEdge(n, b.Inclusive, low)
		}
		// MySQL compares an integer column with a string as numbers, so a
		// bound such as '2.5' or '1e30' is still meaningful. Only plain
		// decimal text is read: ParseFloat also takes "0x10" and "inf",
		// which MySQL reads as 0, and guessing wrong could narrow the range.
		f, ferr := strconv.ParseFloat(x, 64)
		if !plainDecimal(x) || ferr != nil && !errors.Is(ferr, strconv.ErrRange) {
			return 0, false, fmt.Errorf("range rule: %w: bound %q is not a number", ErrKeyType, x)
		}
		return floatEdge(f, b.Inclusive, low)
	default:
		return 0, false, fmt.Errorf("range rule: %w: bound of type %T", ErrKeyType, b.Value)
	}
}

func intEdge(v int64, inclusive, low bool) (int64, bool, error) {
	switch {
	case inclusive:
		return v, false, nil
	case low:
		if v == math.MaxInt64 {
			return 0, true, nil
		}
		return v + 1, false, nil
	default:
		if v == math.MinInt64 {
			return 0, true, nil
		}
		return v - 1, false, nil
	}
}

// floatEdge rounds a float bound inward to the integer keys it admits.
// Past the int64 range it saturates; near 2^63 float rounding can only
// widen the result, never narrow it.
func floatEdge(f float64, inclusive, low bool) (int64, bool, error) {
	if math.IsNaN(f) {
		return 0, false, fmt.Errorf("range rule: %w: NaN bound", ErrKeyType)
	}
	var x float64
	switch {
	case low && inclusive:
		x = math.Ceil(f)
	case low:
		x = math.Floor(f) + 1
	case inclusive:
		x = math.Floor(f)
	default:
		x = math.Ceil(f) - 1
	}
	const two63 = 1 << 63
	switch {
	case x >= two63:
		if low {
			return 0, true, nil
		}
		return math.MaxInt64, false, nil
	case x < -two63:
		if low {
			return math.MinInt64, false, nil
		}
		return 0, true, nil
	}
	return int64(x), false, nil
}

// plainDecimal reports whether s is [+-]digits[.digits][(e|E)[+-]digits],
// with digits on at least one side of the point.
func plainDecimal(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := func() int {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - start
	}
	n := digits()
	if i < len(s) && s[i] == '.' {
		i++
		n += digits()
	}
	if n == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}
