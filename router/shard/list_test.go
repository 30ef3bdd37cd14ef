package shard

import (
	"hash/fnv"
	"math"
	"testing"
)

func TestListFind(t *testing.T) {
	r := mustNew(t, Config{Type: "list", Nodes: 2, Locations: []int{2, 2}, ListValues: map[string]int{
		"US": 0, "CA": 0, "CN": 2, "7": 1, "-3": 3, "042": 3, "18446744073709551615": 1, "1.5": 2, "": 1,
	}})
	if got, want := suffixes(r), "_0000@0 _0001@0 _0002@1 _0003@1"; got != want {
		t.Fatalf("tables = %s, want %s", got, want)
	}
	checkFind(t, r, []findCase{
		{v: "US", want: 0},
		{v: "CA", want: 0},
		{v: []byte("CN"), want: 2},
		{v: "", want: 1},
		{v: int64(7), want: 1},
		{v: 7, want: 1},
		{v: uint64(7), want: 1},
		{v: "7", want: 1},
		{v: "007", want: 1},
		{v: "+7", want: 1},
		{v: 7.0, want: 1},
		{v: int64(-3), want: 3},
		{v: "-03", want: 3},
		{v: int64(42), want: 3}, // listed as "042"
		{v: uint64(math.MaxUint64), want: 1},
		{v: 1.5, want: 2},
		{v: "1.5", want: 2},
		{v: "us", err: ErrKeyOutOfRange}, // bytes compare exactly
		{v: " US", err: ErrKeyOutOfRange},
		{v: int64(8), err: ErrKeyOutOfRange},
		{v: "1.50", err: ErrKeyOutOfRange},
		{v: nil, err: ErrNullKey},
		{v: true, err: ErrKeyType},
	})
	checkRange(t, r, []rangeCase{{lo: incl("US"), hi: incl("US"), want: []int{0, 1, 2, 3}}})
	if _, err := r.Find(nil); err == nil || err.Error() != "shard key cannot be NULL" {
		t.Errorf("NULL error = %v", err)
	}
}

func TestListDefaultLocations(t *testing.T) {
	r := mustNew(t, Config{Type: "list", Nodes: 3, ListValues: map[string]int{"a": 2}})
	if got, want := suffixes(r), "_0000@0 _0001@1 _0002@2"; got != want {
		t.Fatalf("tables = %s, want %s", got, want)
	}
}

func TestCanonical(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{int64(0), "0"}, {"-0", "0"}, {"+0", "0"}, {"000", "0"}, {int64(-42), "-42"}, {"-042", "-42"},
		{"-9223372036854775808", "-9223372036854775808"}, {"-9223372036854775809", "-9223372036854775809"},
		{"18446744073709551615", "18446744073709551615"}, {"18446744073709551616", "18446744073709551616"},
		{math.Copysign(0, -1), "0"}, {2.0, "2"}, {-2.0, "-2"}, {1e19, "10000000000000000000"}, {0.25, "0.25"},
		{"abc", "abc"}, {[]byte("x1"), "x1"}, {"1e3", "1e3"}, {" 1", " 1"},
	} {
		var buf [24]byte
		got, err := canonical(tc.v, buf[:0])
		if err != nil || string(got) != tc.want {
			t.Errorf("canonical(%T %v) = %q, %v; want %q", tc.v, tc.v, got, err, tc.want)
		}
	}
}

// Expected buckets come from an independent Python implementation of
// FNV-1a 64 and the paper's jump hash.
func TestConsistentHashFind(t *testing.T) {
	for _, tc := range []struct {
		key     any
		fnv     uint64
		buckets [6]int // for 1, 2, 3, 8, 10, 100 sub-tables
	}{
		{"42", 0x07ee7e07b4b19223, [6]int{0, 1, 1, 4, 4, 42}},
		{"0", 0xaf63ad4c86019caf, [6]int{0, 0, 0, 6, 9, 84}},
		{"-1", 0x07d00b07b497d12b, [6]int{0, 0, 0, 3, 3, 33}},
		{"abc", 0xe71fa2190541574b, [6]int{0, 0, 2, 5, 5, 92}},
		{"", 0xcbf29ce484222325, [6]int{0, 1, 1, 1, 1, 90}},
		{"user:1001", 0x49b8f2bfae7b40d6, [6]int{0, 1, 2, 2, 2, 82}},
		{"18446744073709551615", 0xedf2a76b38fc3c54, [6]int{0, 0, 0, 0, 0, 73}},
		{"-9223372036854775808", 0x5cc2383abc21cb79, [6]int{0, 1, 1, 5, 5, 74}},
		{"1.5", 0x457d3818182e17b9, [6]int{0, 1, 1, 1, 1, 47}},
		{"hello world", 0x779a65e7023cd2e7, [6]int{0, 0, 2, 5, 8, 43}},
	} {
		s := tc.key.(string)
		if got := fnv1a64([]byte(s)); got != tc.fnv {
			t.Errorf("fnv1a64(%q) = %#x, want %#x", s, got, tc.fnv)
		}
		h := fnv.New64a()
		h.Write([]byte(s))
		if h.Sum64() != tc.fnv {
			t.Errorf("hash/fnv disagrees on %q", s)
		}
		for i, n := range []int{1, 2, 3, 8, 10, 100} {
			r := mustNew(t, Config{Type: "consistent_hash", Nodes: 1, Locations: []int{n}})
			checkFind(t, r, []findCase{{v: s, want: tc.buckets[i]}, {v: []byte(s), want: tc.buckets[i]}})
		}
	}
	r := mustNew(t, Config{Type: "consistent_hash", Nodes: 2, Locations: []int{4, 4}})
	checkFind(t, r, []findCase{
		// integers hash as their decimal text: all of these are "42" -> 4
		{v: int64(42), want: 4}, {v: 42, want: 4}, {v: uint64(42), want: 4}, {v: "042", want: 4}, {v: "+42", want: 4}, {v: 42.0, want: 4},
		{v: int64(-1), want: 3}, {v: "-01", want: 3},
		{v: int64(0), want: 6}, {v: "-0", want: 6},
		{v: uint64(math.MaxUint64), want: 0},
		{v: int64(math.MinInt64), want: 5},
		{v: 1.5, want: 1},
		{v: nil, err: ErrNullKey},
		{v: int8(1), err: ErrKeyType},
	})
	checkRange(t, r, []rangeCase{{lo: unbounded(), hi: incl(int64(3)), want: seq(0, 7)}})
}

// TestJumpMoves checks the property jump hash exists for: going from n to
// n+1 buckets, a key either stays or moves to the new bucket n.
func TestJumpMoves(t *testing.T) {
	for k := uint64(0); k < 2000; k++ {
		key := fnv1a64([]byte{byte(k), byte(k >> 8)})
		prev := jump(key, 1)
		for n := int64(2); n <= 64; n++ {
			b := jump(key, n)
			if b != prev && b != n-1 {
				t.Fatalf("key %d: %d buckets -> %d, %d buckets -> %d", k, n-1, prev, n, b)
			}
			prev = b
		}
	}
}
