package shard

import (
	"testing"
	"time"
)

func TestDiffer(t *testing.T) {
	mk := func(c Config) Rule {
		t.Helper()
		r, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	hash44 := Config{Type: TypeHash, Nodes: 2, Locations: []int{4, 4}}
	cases := []struct {
		a, b Config
		same bool
	}{
		{hash44, hash44, true},
		{hash44, Config{Type: TypeHash, Nodes: 2, Locations: []int{2, 2}}, false},
		{hash44, Config{Type: TypeHash, Nodes: 2, Locations: []int{3, 5}}, false},
		{hash44, Config{Type: TypeConsistentHash, Nodes: 2, Locations: []int{4, 4}}, false},
		{Config{Type: TypeRange, Nodes: 2, Locations: []int{2, 2}, TableRowLimit: 10}, Config{Type: TypeRange, Nodes: 2, Locations: []int{2, 2}, TableRowLimit: 10}, true},
		{Config{Type: TypeRange, Nodes: 2, Locations: []int{2, 2}, TableRowLimit: 10}, Config{Type: TypeRange, Nodes: 2, Locations: []int{2, 2}, TableRowLimit: 20}, false},
		{Config{Type: TypeList, Nodes: 2, ListValues: map[string]int{"1": 0, "2": 1}}, Config{Type: TypeList, Nodes: 2, ListValues: map[string]int{"1": 0, "2": 1}}, true},
		{Config{Type: TypeList, Nodes: 2, ListValues: map[string]int{"1": 0, "2": 1}}, Config{Type: TypeList, Nodes: 2, ListValues: map[string]int{"1": 1, "2": 0}}, false},
		{Config{Type: TypeDateYear, Nodes: 1, DateRange: []string{"2015-2016"}, Location: time.UTC}, Config{Type: TypeDateYear, Nodes: 1, DateRange: []string{"2015-2016"}, Location: time.UTC}, true},
		{Config{Type: TypeDateYear, Nodes: 1, DateRange: []string{"2015-2016"}, Location: time.UTC}, Config{Type: TypeDateYear, Nodes: 1, DateRange: []string{"2015-2016"}, Location: time.FixedZone("X", 3600)}, false},
	}
	for i, c := range cases {
		d := Differ(mk(c.a), mk(c.b))
		if (d == "") != c.same {
			t.Errorf("case %d: Differ = %q, want same %v", i, d, c.same)
		}
	}
}

func TestSamePlaces(t *testing.T) {
	mk := func(c Config) Rule {
		t.Helper()
		r, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, c := range []struct {
		name string
		a, b Config
		want bool
	}{
		{"hash, whole sub-tables to new nodes", Config{Type: TypeHash, Nodes: 2, Locations: []int{4, 4}}, Config{Type: TypeHash, Nodes: 4, Locations: []int{2, 2, 2, 2}}, true},
		{"hash split", Config{Type: TypeHash, Nodes: 2, Locations: []int{4, 4}}, Config{Type: TypeHash, Nodes: 2, Locations: []int{8, 8}}, false},
		{"hash to consistent_hash", Config{Type: TypeHash, Nodes: 2, Locations: []int{4, 4}}, Config{Type: TypeConsistentHash, Nodes: 2, Locations: []int{4, 4}}, false},
		{"range grown at the end", Config{Type: TypeRange, Nodes: 2, Locations: []int{2, 2}, TableRowLimit: 100}, Config{Type: TypeRange, Nodes: 3, Locations: []int{2, 2, 2}, TableRowLimit: 100}, true},
		{"range with new rows per sub-table", Config{Type: TypeRange, Nodes: 2, Locations: []int{2, 2}, TableRowLimit: 100}, Config{Type: TypeRange, Nodes: 2, Locations: []int{4, 4}, TableRowLimit: 50}, false},
		{"list with values added", Config{Type: TypeList, Nodes: 2, Locations: []int{1, 1}, ListValues: map[string]int{"1": 0, "2": 1}}, Config{Type: TypeList, Nodes: 3, Locations: []int{1, 1, 1}, ListValues: map[string]int{"1": 0, "2": 1, "3": 2}}, true},
		{"list with a value moved", Config{Type: TypeList, Nodes: 2, Locations: []int{1, 1}, ListValues: map[string]int{"1": 0, "2": 1}}, Config{Type: TypeList, Nodes: 2, Locations: []int{1, 1}, ListValues: map[string]int{"1": 1, "2": 0}}, false},
		{"global on a new node", Config{Type: TypeGlobal, Nodes: 2}, Config{Type: TypeGlobal, Nodes: 3}, true},
	} {
		if got := SamePlaces(mk(c.a), mk(c.b)); got != c.want {
			t.Errorf("%s: SamePlaces = %v, want %v", c.name, got, c.want)
		}
	}
}
