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
		{"rule removed", SchemaConfig{Tables: []TableConfig{hash}}, ""},
		{"type", with(func(h, d *TableConfig) { h.Shard.Type = "consistent_hash" }), "table app.orders: type hash -> consistent_hash"},
		{"locations", with(func(h, d *TableConfig) { h.Shard.Locations[1] = 5 }), "table app.orders: locations [4 4] -> [4 5]"},
		{"key", with(func(h, d *TableConfig) { h.Key = "user_id" }), "table app.orders: shard key id -> user_id"},
		{"nodes", with(func(h, d *TableConfig) { h.Nodes = []string{"n2", "n1"} }), "table app.orders: nodes [n1 n2] -> [n2 n1]"},
		{"date widened", with(func(h, d *TableConfig) { d.Shard.DateRange[1] = "201503-201512" }), ""},
		{"date narrowed", with(func(h, d *TableConfig) { d.Shard.DateRange[1] = "201503-201503" }), "table app.ev: date_range: sub-table ev_201504 is no longer covered"},
		{"date moved", with(func(h, d *TableConfig) { d.Shard.DateRange = []string{"201501-201501", "201502-201504"} }),
			"table app.ev: date_range: sub-table ev_201502 moves from node n1 to n2"},
	} {
		got := strings.Join(PlacementChanges(old, c.cur), "; ")
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
