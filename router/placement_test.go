package router

import (
	"strings"
	"testing"

	"github.com/keyshard/keyshard/router/shard"
)

func TestPlacementChanges(t *testing.T) {
	hash := TableConfig{DB: "app", Table: "orders", Key: "id", Nodes: []string{"n1", "n2"},
		Shard: shard.Config{Type: "hash", Nodes: 2, Locations: []int{4, 4}}}
	date := TableConfig{DB: "app", Table: "ev", Key: "ts", Nodes: []string{"n1", "n2"},
		Shard: shard.Config{Type: "date_month", Nodes: 2, DateRange: []string{"201501-201502", "201503-201504"}}}
	old := SchemaConfig{Default: "n1", Nodes: []string{"n1", "n2"}, Tables: []TableConfig{hash, date}}
	with := func(edit func(h, d *TableConfig)) SchemaConfig {
		h, d := hash, date
		h.Shard.Locations = append([]int(nil), hash.Shard.Locations...)
		d.Shard.DateRange = append([]string(nil), date.Shard.DateRange...)
		edit(&h, &d)
		return SchemaConfig{Default: "n1", Nodes: []string{"n1", "n2"}, Tables: []TableConfig{h, d}}
	}
	for _, c := range []struct {
		name string
		cur  SchemaConfig
		want string // "" for none
	}{
		{"unchanged", with(func(h, d *TableConfig) {}), ""},
		{"new table", SchemaConfig{Tables: append(append([]TableConfig(nil), old.Tables...),
			TableConfig{DB: "app", Table: "more", Key: "id", Nodes: []string{"n1"}, Shard: shard.Config{Type: "hash", Nodes: 1, Locations: []int{2}}})}, ""},
		{"rule removed", SchemaConfig{Tables: []TableConfig{hash}}, "table app.ev: its shard rule is removed (its rows would be looked for on the default node)"},
		{"unused field", with(func(h, d *TableConfig) { h.Shard.TableRowLimit = 7 }), ""},
		{"type", with(func(h, d *TableConfig) { h.Shard.Type = "consistent_hash" }), "table app.orders: type hash -> consistent_hash"},
		{"locations", with(func(h, d *TableConfig) { h.Shard.Locations[1] = 5 }), "table app.orders: 8 -> 9 sub-tables (a hash rule maps every key anew)"},
		{"key", with(func(h, d *TableConfig) { h.Key = "user_id" }), "table app.orders: shard key id -> user_id"},
		{"nodes", with(func(h, d *TableConfig) { h.Nodes = []string{"n2", "n1"} }), "table app.orders: sub-table orders_0000 moves from node n1 to n2"},
		{"date widened", with(func(h, d *TableConfig) { d.Shard.DateRange[1] = "201503-201512" }), ""},
		{"date narrowed", with(func(h, d *TableConfig) { d.Shard.DateRange[1] = "201503-201503" }), "table app.ev: sub-table ev_201504 is no longer in the rule"},
		{"date moved", with(func(h, d *TableConfig) { d.Shard.DateRange = []string{"201501-201501", "201502-201504"} }),
			"table app.ev: sub-table ev_201502 moves from node n1 to n2"},
	} {
		got := strings.Join(PlacementChanges(old, c.cur), "; ")
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// Range and list rules may grow at their end without moving a key.
func TestPlacementGrowth(t *testing.T) {
	rng := func(locs []int, limit int) SchemaConfig {
		return SchemaConfig{Tables: []TableConfig{{DB: "app", Table: "log", Key: "id", Nodes: []string{"n1", "n2"},
			Shard: shard.Config{Type: "range", Nodes: 2, Locations: locs, TableRowLimit: limit}}}}
	}
	list := func(vals map[string]int, locs []int) SchemaConfig {
		return SchemaConfig{Tables: []TableConfig{{DB: "app", Table: "reg", Key: "code", Nodes: []string{"n1", "n2"},
			Shard: shard.Config{Type: "list", Nodes: 2, Locations: locs, ListValues: vals}}}}
	}
	global := func(nodes ...string) SchemaConfig {
		return SchemaConfig{Tables: []TableConfig{{DB: "app", Table: "country", Nodes: nodes,
			Shard: shard.Config{Type: "global", Nodes: len(nodes)}}}}
	}
	for _, c := range []struct {
		name     string
		old, cur SchemaConfig
		want     string
	}{
		{"range grows on the last node", rng([]int{2, 2}, 100), rng([]int{2, 3}, 100), ""},
		{"range grows on the first node", rng([]int{2, 2}, 100), rng([]int{3, 2}, 100), "table app.log: sub-table log_0002 moves from node n2 to n1"},
		{"range limit", rng([]int{2, 2}, 100), rng([]int{2, 2}, 50), "table app.log: table_row_limit 100 -> 50"},
		{"list gains a value", list(map[string]int{"1": 0, "2": 1}, []int{1, 1}), list(map[string]int{"1": 0, "2": 1, "3": 1}, []int{1, 1}), ""},
		{"list value moves", list(map[string]int{"1": 0, "2": 1}, []int{1, 1}), list(map[string]int{"1": 1, "2": 1}, []int{1, 1}), "table app.reg: list value 1 moves or goes"},
		// A global table: the same name on each node (a reload of an
		// unchanged config was refused as a move).
		{"global unchanged", global("n1", "n2"), global("n1", "n2"), ""},
		{"global loses a node", global("n1", "n2"), global("n1"), "table app.country: sub-table country moves from node n2 to n1"},
	} {
		if got := strings.Join(PlacementChanges(c.old, c.cur), "; "); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
