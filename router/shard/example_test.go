package shard_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/keyshard/keyshard/router/shard"
)

func ExampleNew() {
	// ks.yaml: type: hash, nodes: [node1, node2], locations: [4, 4]
	r, err := shard.New(shard.Config{Type: "hash", Nodes: 2, Locations: []int{4, 4}})
	if err != nil {
		panic(err)
	}
	tables := r.Tables()
	for _, key := range []any{int64(5), "abc", int64(-1)} {
		i, _ := r.Find(key)
		fmt.Printf("%v -> user%s on node %d\n", key, tables[i].Suffix, tables[i].Node)
	}
	_, err = r.Find(nil)
	fmt.Println(err)
	// Output:
	// 5 -> user_0005 on node 1
	// abc -> user_0002 on node 0
	// -1 -> user_0007 on node 1
	// shard key cannot be NULL
}

func ExampleRule_FindRange() {
	// ks.yaml: type: date_month, nodes: [node1, node2],
	// date_range: [201501-201506, 201507-201512]
	r, _ := shard.New(shard.Config{Type: "date_month", Nodes: 2,
		DateRange: []string{"201501-201506", "201507-201512"}, Location: time.UTC})
	idx, _ := r.FindRange(
		shard.Bound{Value: "2015-05-20", Inclusive: true},
		shard.Bound{Value: "2015-08-01 00:00:00"},
	)
	tables := r.Tables()
	for _, i := range idx {
		fmt.Println(tables[i].Suffix, tables[i].Node)
	}
	// Output:
	// _201505 0
	// _201506 0
	// _201507 1
	// _201508 1
}

// TestConcurrentUse runs every rule from many goroutines; with -race it
// checks that rules are safe to share.
func TestConcurrentUse(t *testing.T) {
	var rules []shard.Rule
	for _, c := range []shard.Config{
		{Type: "hash", Nodes: 2, Locations: []int{4, 4}},
		{Type: "range", Nodes: 2, Locations: []int{4, 4}, TableRowLimit: 100},
		{Type: "date_day", Nodes: 1, DateRange: []string{"20160101-20160131"}},
		{Type: "list", Nodes: 1, ListValues: map[string]int{"1": 0}},
		{Type: "consistent_hash", Nodes: 2},
	} {
		r, err := shard.New(c)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				for _, r := range rules {
					_, _ = r.Find(int64(i * g))
					_, _ = r.Find(fmt.Sprintf("2016-01-%02d", i%40))
					_, _ = r.FindRange(shard.Bound{Value: int64(i), Inclusive: true}, shard.Bound{Unbounded: true})
					_ = r.Tables()
				}
			}
		})
	}
	wg.Wait()
}
