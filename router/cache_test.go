package router

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/keyshard/keyshard/router/shard"
)

func TestPlanCache(t *testing.T) {
	c := newPlanCache(100)
	plans := make([]*Plan, 300)
	for i := range plans {
		plans[i] = &Plan{}
	}
	key := func(i int) string { return fmt.Sprintf("db\x00select %d", i) }
	// A new plan is found at once (from the dirty map) and after its
	// promotion into the lock-free read map.
	c.put(key(0), plans[0])
	for range 3 {
		if got := c.get([]byte(key(0))); got != plans[0] {
			t.Fatalf("get after put: %p, want %p", got, plans[0])
		}
	}
	if c.ndirty.Load() != 0 || len(*c.read.Load()) != 1 {
		t.Fatalf("after hits: %d dirty, %d read; want the plan promoted", c.ndirty.Load(), len(*c.read.Load()))
	}
	if c.get([]byte(key(1))) != nil {
		t.Fatal("a shape never put was found")
	}
	// A flood of shapes: the cache stays bounded, and what it holds is right.
	for i := range plans {
		c.put(key(i), plans[i])
		c.get([]byte(key(i)))
	}
	st := c.stats()
	if st.Size > 100 || len(*c.read.Load())+int(c.ndirty.Load()) > 101 {
		t.Fatalf("size %d (read %d, dirty %d), want at most 100", st.Size, len(*c.read.Load()), c.ndirty.Load())
	}
	if st.Evicted == 0 {
		t.Fatal("nothing evicted past the bound")
	}
	for i := range plans {
		if got := c.get([]byte(key(i))); got != nil && got != plans[i] {
			t.Fatalf("shape %d: wrong plan", i)
		}
	}
	if st.Hits == 0 || st.Misses == 0 {
		t.Fatalf("counters: %+v", st)
	}
}

// TestPlanCacheConcurrent runs lookups and inserts from several goroutines
// (meaningful under -race).
func TestPlanCacheConcurrent(t *testing.T) {
	c := newPlanCache(64)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				k := fmt.Sprintf("k%d", (i*7+g)%100)
				if p := c.get([]byte(k)); p == nil {
					c.put(k, &Plan{})
				}
			}
		}()
	}
	wg.Wait()
	if n := c.stats().Size; n > 64 {
		t.Fatalf("size %d, want at most 64", n)
	}
}

// TestRouteHitAllocs: routing a cached point select allocates only the
// SQL it sends (BenchmarkRoutePointSelectHit measures the time).
func TestRouteHitAllocs(t *testing.T) {
	s := testSchema(t)
	p := NewParser()
	const q = "SELECT c FROM user WHERE id = 12345"
	var rt Routing
	route := func() {
		pl, lits, err := s.Plan(p, q, "kingshard", KindSelect)
		if err != nil {
			t.Fatal(err)
		}
		if err := pl.BindTo(&rt, lits, ""); err != nil {
			t.Fatal(err)
		}
	}
	route()
	route()
	if n := testing.AllocsPerRun(200, route); n > 1 {
		t.Fatalf("%v allocations per cached route, want 1 (the outgoing SQL)", n)
	}
	if len(rt.Routes) != 1 || len(rt.Routes[0].SQL) != 1 {
		t.Fatalf("routing %v, want one statement", rt.String())
	}
}

// TestPlanCachePerSchema: plans belong to the Schema compiled from one
// config. A reload compiles a new Schema, whose fresh cache never serves a
// plan made under the old rules, while statements still running on the old
// Schema keep its plans.
func TestPlanCachePerSchema(t *testing.T) {
	build := func(locations []int) *Schema {
		t.Helper()
		nodes := []string{"node1", "node2"}
		s, err := NewSchema(SchemaConfig{Default: "node1", Nodes: nodes, Tables: []TableConfig{
			{DB: "db", Table: "user", Key: "id", Nodes: nodes, Shard: shard.Config{Type: "hash", Nodes: 2, Locations: locations}},
		}}, 64)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	route := func(s *Schema) string {
		t.Helper()
		pl, lits, err := s.Plan(NewParser(), "SELECT c FROM user WHERE id = 7", "db", KindSelect)
		if err != nil {
			t.Fatal(err)
		}
		rt, err := pl.Bind(lits, "")
		if err != nil {
			t.Fatal(err)
		}
		return rt.String()
	}
	old := build([]int{4, 4})
	before := route(old)
	if got := route(old); got != before || old.CacheStats().Hits != 1 {
		t.Fatalf("second plan on the old schema: %q (hits %d), want a cache hit giving %q", got, old.CacheStats().Hits, before)
	}
	reloaded := build([]int{2, 2})
	after := route(reloaded)
	if after == before || !strings.Contains(after, "user_0003") {
		t.Fatalf("after the rule change: %q, want id 7 on user_0003 of 4 sub-tables (old rules: %q)", after, before)
	}
	if reloaded.CacheStats().Hits != 0 {
		t.Fatal("the new schema's cache served a plan it never made")
	}
	if got := route(old); got != before {
		t.Fatalf("old schema after the reload: %q, want %q", got, before)
	}
}
