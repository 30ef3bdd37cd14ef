package shard

import (
	"math"
	"strconv"
	"testing"
)

// Expected values are kingshard's HashValue(key) % N worked out by hand:
// integers as uint64 (two's complement for negatives), decimal strings as
// their number, other strings crc32 IEEE (from zlib.crc32 in Python:
// "abc" = 891568578, "hello" = 907060870, "kingshard" = 1740694220,
// "-5" = 926977075, "+5" = 1629105077, " 5" = 2196697726, "1.5" =
// 2270993338, "0x10" = 1795762507, "18446744073709551616" = 653721760,
// "" = 0).

func TestHashTables(t *testing.T) {
	r := mustNew(t, Config{Type: "hash", Nodes: 2, Locations: []int{4, 4}})
	const want = "_0000@0 _0001@0 _0002@0 _0003@0 _0004@1 _0005@1 _0006@1 _0007@1"
	if got := suffixes(r); got != want {
		t.Fatalf("tables = %s, want %s", got, want)
	}
	r = mustNew(t, Config{Type: "hash", Nodes: 3, Locations: []int{1, 0, 2}})
	if got, want := suffixes(r), "_0000@0 _0001@2 _0002@2"; got != want {
		t.Fatalf("tables with an empty node = %s, want %s", got, want)
	}
	if r.Type() != "hash" {
		t.Fatalf("Type = %q", r.Type())
	}
	// Tables is a copy: changing it must not change the rule.
	r.Tables()[0].Suffix = "_x"
	if r.Tables()[0].Suffix != "_0000" {
		t.Fatal("Tables returned the rule's own slice")
	}
}

func TestHashFind8(t *testing.T) {
	r := mustNew(t, Config{Type: "hash", Nodes: 2, Locations: []int{4, 4}})
	checkFind(t, r, []findCase{
		{v: int64(0), want: 0},
		{v: int64(5), want: 5},
		{v: int64(7), want: 7},
		{v: int64(8), want: 0},
		{v: int64(1000003), want: 3},
		{v: 13, want: 5}, // Go int
		{v: uint64(11), want: 3},
		{v: uint64(math.MaxUint64), want: 7},
		{v: int64(math.MaxInt64), want: 7},
		{v: int64(math.MinInt64), want: 0},
		// negatives wrap: uint64(-1) = 2^64-1 = 7 mod 8
		{v: int64(-1), want: 7},
		{v: int64(-5), want: 3},
		{v: int64(-8), want: 0},
		{v: int64(-9), want: 7},
		// decimal strings are their number
		{v: "5", want: 5},
		{v: "0005", want: 5},
		{v: "18446744073709551615", want: 7},
		{v: []byte("13"), want: 5},
		// everything else is crc32
		{v: "abc", want: 2},
		{v: []byte("abc"), want: 2},
		{v: "hello", want: 6},
		{v: "kingshard", want: 4},
		{v: "-5", want: 3},
		{v: "+5", want: 5},
		{v: " 5", want: 6},
		{v: "1.5", want: 2},
		{v: "0x10", want: 3},
		{v: "18446744073709551616", want: 0}, // past uint64
		{v: "", want: 0},
		{v: nil, err: ErrNullKey},
		{v: 2.0, err: ErrKeyType},
		{v: true, err: ErrKeyType},
		{v: int32(1), err: ErrKeyType},
	})
}

func TestHashFind12And3(t *testing.T) {
	// kingshard's router_test: locations [4,4,4], id 5 -> table 5, id 12 -> 0.
	r12 := mustNew(t, Config{Type: "hash", Nodes: 3, Locations: []int{4, 4, 4}})
	checkFind(t, r12, []findCase{
		{v: int64(5), want: 5},
		{v: int64(12), want: 0},
		{v: int64(23), want: 11},
		{v: int64(-1), want: 3},  // (2^64-1) mod 12
		{v: int64(-5), want: 11}, // (2^64-5) mod 12
		{v: int64(-12), want: 4},
		{v: uint64(math.MaxUint64), want: 3},
		{v: "abc", want: 6},
		{v: "hello", want: 10},
		{v: "kingshard", want: 8},
		{v: "-5", want: 7},
		{v: "18446744073709551616", want: 4},
	})
	r3 := mustNew(t, Config{Type: "hash", Nodes: 3, Locations: []int{1, 1, 1}})
	checkFind(t, r3, []findCase{
		{v: int64(3), want: 0},
		{v: int64(-1), want: 0}, // not Euclidean: -1 mod 3 would be 2
		{v: int64(-2), want: 2},
		{v: int64(-3), want: 1},
		{v: int64(-4), want: 0},
		{v: "abc", want: 0},
		{v: "hello", want: 1},
		{v: "kingshard", want: 2},
	})
	if idx, _ := r12.Find(int64(5)); r12.Tables()[idx].Node != 1 {
		t.Errorf("id 5 on node %d, want node 1 (node2 in kingshard's test)", r12.Tables()[idx].Node)
	}
}

func TestHashFindRangeAll(t *testing.T) {
	r := mustNew(t, Config{Type: "hash", Nodes: 2, Locations: []int{2, 1}})
	checkRange(t, r, []rangeCase{
		{lo: incl(int64(1)), hi: incl(int64(1)), want: []int{0, 1, 2}},
		{lo: unbounded(), hi: unbounded(), want: []int{0, 1, 2}},
		{lo: incl(int64(10)), hi: excl(int64(3)), want: []int{0, 1, 2}},
	})
}

// TestDecimal pins decimal (with no sign) to strconv.ParseUint base 10.
func TestDecimal(t *testing.T) {
	for _, s := range []string{"", "0", "00", "7", "+7", "-7", "-", "+", "1_000", " 1", "1 ", "0x1f",
		"18446744073709551615", "18446744073709551616", "18446744073709551620", "99999999999999999999",
		"184467440737095516150", "１"} {
		want, werr := strconv.ParseUint(s, 10, 64)
		got, sign, ok := decimal(s)
		if (werr == nil) != (ok && sign == 0) || werr == nil && got != want {
			t.Errorf("decimal(%q) = %d, %q, %v; ParseUint = %d, %v", s, got, sign, ok, want, werr)
		}
	}
}

// TestFindIntAgreesWithFind: the unboxed path places every key where Find
// does, errors included, for each rule that has it.
func TestFindIntAgreesWithFind(t *testing.T) {
	rules := []Config{
		hash12,
		{Type: "consistent_hash", Nodes: 3, Locations: []int{4, 4, 4}},
		{Type: "range", Nodes: 2, Locations: []int{2, 2}, TableRowLimit: 1000},
	}
	keys := []int64{0, 1, -1, 42, 999, 1000, 3999, 4000, -1 << 63, 1<<63 - 1}
	for i := range int64(2000) {
		keys = append(keys, i*7919-300000)
	}
	for _, c := range rules {
		r := mustNew(t, c)
		f, ok := r.(IntFinder)
		if !ok {
			t.Fatalf("%s: no FindInt", c.Type)
		}
		for _, k := range keys {
			want, werr := r.Find(k)
			got, gerr := f.FindInt(k)
			if got != want || (werr == nil) != (gerr == nil) {
				t.Fatalf("%s: key %d: FindInt = %d, %v; Find = %d, %v", c.Type, k, got, gerr, want, werr)
			}
		}
	}
}
