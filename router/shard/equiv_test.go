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
