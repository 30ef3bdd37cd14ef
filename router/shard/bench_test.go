package shard

import (
	"strconv"
	"testing"
)

// Keys are boxed once, up front: the planner holds literals as any already,
// and boxing in the loop would measure the caller, not Find.
func intKeys() []any {
	keys := make([]any, 1024)
	for i := range keys {
		keys[i] = int64(i*7919 - 300000)
	}
	return keys
}

func stringKeys() []any {
	keys := make([]any, 1024)
	for i := range keys {
		if i%2 == 0 {
			keys[i] = strconv.Itoa(i * 7919) // decimal: read as a number
		} else {
			keys[i] = "user-" + strconv.Itoa(i*7919) // crc32
		}
	}
	return keys
}

func benchFind(b *testing.B, c Config, keys []any) {
	r := mustNew(b, c)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := r.Find(keys[i&1023]); err != nil {
			b.Fatal(err)
		}
	}
}

var hash12 = Config{Type: "hash", Nodes: 3, Locations: []int{4, 4, 4}}

func BenchmarkHashFindInt(b *testing.B) { benchFind(b, hash12, intKeys()) }

func BenchmarkHashFindString(b *testing.B) { benchFind(b, hash12, stringKeys()) }

func BenchmarkConsistentHashFindInt(b *testing.B) {
	benchFind(b, Config{Type: "consistent_hash", Nodes: 3, Locations: []int{4, 4, 4}}, intKeys())
}

func BenchmarkConsistentHashFindString(b *testing.B) {
	benchFind(b, Config{Type: "consistent_hash", Nodes: 3, Locations: []int{4, 4, 4}}, stringKeys())
}

func BenchmarkRangeFindInt(b *testing.B) {
	keys := intKeys()
	for i := range keys {
		keys[i] = int64(i * 97)
	}
	benchFind(b, Config{Type: "range", Nodes: 3, Locations: []int{4, 4, 4}, TableRowLimit: 10000}, keys)
}

func BenchmarkDateDayFindString(b *testing.B) {
	keys := make([]any, 1024)
	for i := range keys {
		keys[i] = "2016-03-0" + strconv.Itoa(1+i%8) + " 12:00:00"
	}
	benchFind(b, Config{Type: "date_day", Nodes: 2, DateRange: []string{"20151201-20160122", "20160202-20160308"}}, keys)
}

func BenchmarkDateDayFindTimestamp(b *testing.B) {
	keys := make([]any, 1024)
	for i := range keys {
		keys[i] = int64(1456790400 + i*600) // from 2016-03-01 UTC, within a week
	}
	benchFind(b, Config{Type: "date_day", Nodes: 2, DateRange: []string{"20151201-20160122", "20160202-20160320"}}, keys)
}

func BenchmarkListFindString(b *testing.B) {
	keys := make([]any, 1024)
	for i := range keys {
		keys[i] = []string{"US", "CA", "CN", "7"}[i%4]
	}
	benchFind(b, Config{Type: "list", Nodes: 2, ListValues: map[string]int{"US": 0, "CA": 0, "CN": 1, "7": 1}}, keys)
}

// TestFindNoAlloc guards the allocation-free paths the benchmarks measure.
func TestFindNoAlloc(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		keys []any
	}{
		{hash12, intKeys()},
		{hash12, stringKeys()},
		{hash12, []any{[]byte("abc"), []byte("123"), uint64(5)}},
		{Config{Type: "consistent_hash", Nodes: 1, Locations: []int{8}}, append(intKeys(), stringKeys()...)},
		{Config{Type: "range", Nodes: 1, Locations: []int{8}, TableRowLimit: 1 << 40}, intKeys()[300:]},
		{Config{Type: "list", Nodes: 1, ListValues: map[string]int{"US": 0, "7": 0}}, []any{"US", int64(7), "007"}},
		{Config{Type: "date_day", Nodes: 1, DateRange: []string{"20160101-20160131"}}, []any{"2016-01-05", "2016-01-31 23:59:59"}},
	} {
		r := mustNew(t, tc.c)
		i := 0
		allocs := testing.AllocsPerRun(1000, func() {
			_, _ = r.Find(tc.keys[i%len(tc.keys)])
			i++
		})
		if allocs != 0 {
			t.Errorf("%s Find: %v allocations per call, want 0", r.Type(), allocs)
		}
	}
}
