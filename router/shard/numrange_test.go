package shard

import (
	"math"
	"testing"
)

// kingshard's router_test range rule: 12 sub-tables of 10000 rows on 3
// nodes; sub-table k holds [k*10000, (k+1)*10000).
func newRange12(t *testing.T) Rule {
	return mustNew(t, Config{Type: "range", Nodes: 3, Locations: []int{4, 4, 4}, TableRowLimit: 10000})
}

func TestRangeFind(t *testing.T) {
	r := newRange12(t)
	checkFind(t, r, []findCase{
		{v: int64(0), want: 0},
		{v: int64(1), want: 0},
		{v: int64(9999), want: 0},
		{v: int64(10000), want: 1},
		{v: int64(20000), want: 2},
		{v: int64(39999), want: 3},
		{v: int64(40000), want: 4},
		{v: int64(119999), want: 11},
		{v: 55555, want: 5},
		{v: uint64(79999), want: 7},
		{v: "10000", want: 1},
		{v: "+10000", want: 1}, // strconv.ParseInt takes a sign, as kingshard's NumValue
		{v: "0010000", want: 1},
		{v: []byte("119999"), want: 11},
		{v: int64(120000), err: ErrKeyOutOfRange},
		{v: int64(-1), err: ErrKeyOutOfRange},
		{v: int64(math.MinInt64), err: ErrKeyOutOfRange},
		{v: int64(math.MaxInt64), err: ErrKeyOutOfRange},
		{v: uint64(math.MaxUint64), err: ErrKeyOutOfRange},
		{v: "-1", err: ErrKeyOutOfRange},
		{v: "120000", err: ErrKeyOutOfRange},
		{v: "abc", err: ErrKeyType},
		{v: "1.5", err: ErrKeyType},
		{v: " 5", err: ErrKeyType},
		{v: "99999999999999999999", err: ErrKeyType},
		{v: 1.0, err: ErrKeyType},
		{v: nil, err: ErrNullKey},
		{v: struct{}{}, err: ErrKeyType},
	})
	idx, _ := r.Find(int64(9999))
	if n := r.Tables()[idx].Node; n != 0 {
		t.Errorf("9999 on node %d, want 0 (kingshard's TestParseRule)", n)
	}
	idx, _ = r.Find(int64(40000))
	if n := r.Tables()[idx].Node; n != 1 {
		t.Errorf("40000 on node %d, want 1", n)
	}
}

func TestRangeFindRange(t *testing.T) {
	r := newRange12(t)
	all := seq(0, 11)
	checkRange(t, r, []rangeCase{
		// kingshard's TestSelectPlan
		{lo: incl(int64(10000)), hi: incl(int64(20000)), want: []int{1, 2}},
		{lo: excl(int64(10000)), hi: unbounded(), want: seq(1, 11)},
		{lo: incl(int64(9999)), hi: unbounded(), want: all},
		{lo: unbounded(), hi: incl(int64(10000)), want: []int{0, 1}},
		{lo: unbounded(), hi: excl(int64(10000)), want: []int{0}},
		{lo: incl(int64(10000)), hi: incl(int64(30000)), want: []int{1, 2, 3}},
		{lo: excl(int64(10000)), hi: excl(int64(30000)), want: []int{1, 2}},
		{lo: unbounded(), hi: unbounded(), want: all},
		// single points and boundaries
		{lo: incl(int64(9999)), hi: incl(int64(9999)), want: []int{0}},
		{lo: incl(int64(10000)), hi: incl(int64(10000)), want: []int{1}},
		{lo: excl(int64(9999)), hi: excl(int64(10001)), want: []int{1}},
		{lo: excl(int64(9999)), hi: excl(int64(10000)), want: nil},
		{lo: incl(int64(5)), hi: incl(int64(4)), want: nil},
		// clipped to the covered keys [0, 120000) instead of failing
		{lo: unbounded(), hi: excl(int64(0)), want: nil},
		{lo: unbounded(), hi: incl(int64(-5)), want: nil},
		{lo: incl(int64(-100)), hi: incl(int64(5)), want: []int{0}},
		{lo: excl(int64(119999)), hi: unbounded(), want: nil},
		{lo: incl(int64(119999)), hi: unbounded(), want: []int{11}},
		{lo: incl(int64(200000)), hi: unbounded(), want: nil},
		{lo: incl(int64(115000)), hi: incl(int64(999999)), want: []int{11}},
		{lo: excl(int64(math.MaxInt64)), hi: unbounded(), want: nil},
		{lo: unbounded(), hi: excl(int64(math.MinInt64)), want: nil},
		{lo: incl(int64(math.MinInt64)), hi: incl(int64(math.MaxInt64)), want: all},
		// uint64
		{lo: incl(uint64(10000)), hi: incl(uint64(10000)), want: []int{1}},
		{lo: incl(uint64(math.MaxUint64)), hi: unbounded(), want: nil},
		{lo: incl(int64(110000)), hi: excl(uint64(math.MaxUint64)), want: []int{11}},
		// floats round inward
		{lo: excl(9999.5), hi: unbounded(), want: seq(1, 11)},
		{lo: incl(9999.5), hi: unbounded(), want: seq(1, 11)},
		{lo: incl(9999.0), hi: unbounded(), want: all},
		{lo: excl(9999.0), hi: unbounded(), want: seq(1, 11)},
		{lo: unbounded(), hi: excl(10000.5), want: []int{0, 1}},
		{lo: unbounded(), hi: incl(9999.9), want: []int{0}},
		{lo: unbounded(), hi: excl(10000.0), want: []int{0}},
		{lo: unbounded(), hi: incl(10000.0), want: []int{0, 1}},
		{lo: incl(math.Inf(-1)), hi: incl(math.Inf(1)), want: all},
		{lo: incl(math.Inf(1)), hi: unbounded(), want: nil},
		{lo: incl(1e300), hi: unbounded(), want: nil},
		{lo: unbounded(), hi: incl(-1e300), want: nil},
		{lo: incl(math.NaN()), hi: unbounded(), err: ErrKeyType},
		// strings are numbers, as MySQL compares them with an integer column
		{lo: incl("10000"), hi: incl("20000"), want: []int{1, 2}},
		{lo: excl("9999.5"), hi: incl([]byte("10000")), want: []int{1}},
		{lo: incl("1e4"), hi: incl("1.5e4"), want: []int{1}},
		{lo: incl("99999999999999999999"), hi: unbounded(), want: nil},
		{lo: unbounded(), hi: incl("99999999999999999999"), want: all},
		{lo: incl("abc"), hi: unbounded(), err: ErrKeyType},
		{lo: incl("0x10"), hi: unbounded(), err: ErrKeyType},
		{lo: incl("inf"), hi: unbounded(), err: ErrKeyType},
		{lo: incl(" 5"), hi: unbounded(), err: ErrKeyType},
		{lo: unbounded(), hi: incl(true), err: ErrKeyType},
		// NULL: no key compares true with it
		{lo: incl(nil), hi: unbounded(), want: nil},
		{lo: unbounded(), hi: excl(nil), want: nil},
	})
}

func TestPlainDecimal(t *testing.T) {
	for s, want := range map[string]bool{
		"1": true, "-1": true, "+1.5": true, ".5": true, "5.": true, "1e3": true, "1E-3": true, "-2.5e+10": true,
		"": false, ".": false, "-": false, "e3": false, "1e": false, "1e+": false, "0x10": false,
		"inf": false, "NaN": false, "1_000": false, " 1": false, "1 ": false, "1.2.3": false,
	} {
		if got := plainDecimal(s); got != want {
			t.Errorf("plainDecimal(%q) = %v, want %v", s, got, want)
		}
	}
}
