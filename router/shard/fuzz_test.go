package shard

import (
	"math"
	"slices"
	"strconv"
	"testing"
	"time"
)

func fuzzRules(t testing.TB) []Rule {
	utc := time.UTC
	cfgs := []Config{
		{Type: "hash", Nodes: 3, Locations: []int{4, 4, 4}},
		{Type: "hash", Nodes: 2, Locations: []int{1, 2}},
		{Type: "range", Nodes: 3, Locations: []int{4, 4, 4}, TableRowLimit: 10000},
		{Type: "range", Nodes: 1, Locations: []int{3}, TableRowLimit: 7},
		{Type: "range", Nodes: 2, Locations: []int{1, 1}, TableRowLimit: math.MaxInt64 / 2},
		{Type: "date_year", Nodes: 2, DateRange: []string{"2012-2015", "2016-2018"}, Location: cst},
		{Type: "date_year", Nodes: 2, DateRange: []string{"2017-2018", "1970-1971"}, Location: utc},
		{Type: "date_month", Nodes: 2, DateRange: []string{"201512-201603", "196912-197002"}, Location: cst},
		{Type: "date_day", Nodes: 2, DateRange: []string{"20151201-20160122", "19691231-19700102"}, Location: utc},
		{Type: "list", Nodes: 2, Locations: []int{1, 2}, ListValues: map[string]int{"a": 0, "7": 1, "-1": 2, "0": 2}},
		{Type: "consistent_hash", Nodes: 2, Locations: []int{4, 4}},
	}
	rules := make([]Rule, len(cfgs))
	for i, c := range cfgs {
		rules[i] = mustNew(t, c)
	}
	return rules
}

// FuzzFind feeds arbitrary keys and bounds to every rule type: no panic,
// indexes within Tables(), FindRange sorted and never missing a sub-table
// that Find returns for a key inside the range.
func FuzzFind(f *testing.F) {
	f.Add("2016-03-04 10:00:00", int64(1457082679), uint64(10000), 9999.5, true)
	f.Add("abc", int64(-1), uint64(math.MaxUint64), math.Inf(1), false)
	f.Add("18446744073709551615", int64(math.MinInt64), uint64(0), math.NaN(), true)
	f.Add("0042", int64(42), uint64(42), 42.0, false)
	f.Add("", int64(0), uint64(1<<63), -0.5, true)
	f.Add("1970-01-01", int64(86399), uint64(86400), 1e300, false)
	f.Add("+7", int64(7), uint64(119999), -1e300, true)
	rules := fuzzRules(f)
	f.Fuzz(func(t *testing.T, s string, i int64, u uint64, fl float64, inclusive bool) {
		keys := []any{s, []byte(s), i, u, fl, nil, int(i)}
		for _, r := range rules {
			n := len(r.Tables())
			found := make([]int, len(keys))
			for k, v := range keys {
				idx, err := r.Find(v)
				if err == nil && (idx < 0 || idx >= n) {
					t.Fatalf("%s Find(%T %v) = %d, outside 0..%d", r.Type(), v, v, idx, n-1)
				}
				if err != nil {
					idx = -1
				}
				found[k] = idx
			}
			if found[0] != found[1] {
				t.Fatalf("%s: string %q -> %d but []byte -> %d", r.Type(), s, found[0], found[1])
			}
			if found[2] != found[6] {
				t.Fatalf("%s: int64 %d -> %d but int -> %d", r.Type(), i, found[2], found[6])
			}
			switch r.Type() {
			case TypeHash:
				if n, err := strconv.ParseUint(s, 10, 64); err == nil {
					if want, _ := r.Find(n); found[0] != want {
						t.Fatalf("hash: %q -> %d but %d -> %d", s, found[0], n, want)
					}
				}
			case TypeList, TypeConsistentHash:
				if want, _ := r.Find(strconv.FormatInt(i, 10)); found[2] != want {
					t.Fatalf("%s: %d -> %d but its text -> %d", r.Type(), i, found[2], want)
				}
			}

			// FindRange over arbitrary bounds: sorted, unique, in range.
			for _, lo := range keys {
				for _, hi := range keys {
					got, err := r.FindRange(Bound{Value: lo, Inclusive: inclusive}, Bound{Value: hi, Inclusive: !inclusive})
					if err != nil {
						continue
					}
					for j, idx := range got {
						if idx < 0 || idx >= n || j > 0 && got[j-1] >= idx {
							t.Fatalf("%s FindRange(%v, %v) = %v: not sorted unique within 0..%d", r.Type(), lo, hi, got, n-1)
						}
					}
				}
			}

			// A key inside [lo, hi] must be covered by FindRange(lo, hi).
			covers := func(lo, hi Bound, key any, idx int) {
				if idx < 0 {
					return
				}
				got, err := r.FindRange(lo, hi)
				if err != nil {
					t.Fatalf("%s FindRange(%+v, %+v): %v, but Find(%v) = %d", r.Type(), lo, hi, err, key, idx)
				}
				if _, ok := slices.BinarySearch(got, idx); !ok {
					t.Fatalf("%s FindRange(%+v, %+v) = %v misses Find(%v) = %d", r.Type(), lo, hi, got, key, idx)
				}
			}
			all := Bound{Unbounded: true}
			covers(Bound{Value: s, Inclusive: true}, Bound{Value: s, Inclusive: true}, s, found[0])
			covers(Bound{Value: s, Inclusive: true}, all, s, found[0])
			covers(all, Bound{Value: s, Inclusive: true}, s, found[0])
			ordered := r.Type() == TypeRange || max(i, -i) <= maxRangeSeconds && i != math.MinInt64
			if !ordered {
				continue
			}
			covers(Bound{Value: i, Inclusive: true}, Bound{Value: i, Inclusive: true}, i, found[2])
			b := int64(u >> 1) // a second key, in int64 range
			if r.Type() != TypeRange {
				b = int64(u%(2*maxRangeSeconds)) - maxRangeSeconds
			}
			ib, err := r.Find(b)
			if err != nil {
				ib = -1
			}
			lo, hi := min(i, b), max(i, b)
			for _, c := range []struct {
				key any
				idx int
			}{{i, found[2]}, {b, ib}} {
				covers(Bound{Value: lo, Inclusive: true}, Bound{Value: hi, Inclusive: true}, c.key, c.idx)
				covers(Bound{Value: lo, Inclusive: true}, all, c.key, c.idx)
				covers(all, Bound{Value: hi, Inclusive: true}, c.key, c.idx)
			}
			if r.Type() == TypeRange && !math.IsNaN(fl) && max(i, -i) < 1<<53 && i != math.MinInt64 {
				switch {
				case float64(i) > fl:
					covers(Bound{Value: fl}, all, i, found[2])
				case float64(i) < fl:
					covers(all, Bound{Value: fl}, i, found[2])
				}
			}
		}
	})
}
