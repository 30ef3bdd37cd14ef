package router

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/keyshard/keyshard/router/shard"
)

// PlacementChanges compares the shard rules of a schema before (old) and
// after (cur) a configuration change and describes, for each table that
// has rows under the old rule, what changes where they are looked for:
// its key, type, nodes, sub-tables or their limits. After such a change,
// rows already written would be looked for in other sub-tables, so they
// would look lost. New tables, removed rules and a date rule that only
// gains periods (each old sub-table stays on its node) are not changes.
func PlacementChanges(old, cur SchemaConfig) []string {
	byName := map[string]*TableConfig{}
	for i := range cur.Tables {
		t := &cur.Tables[i]
		byName[strings.ToLower(t.DB+"."+t.Table)] = t
	}
	var out []string
	for i := range old.Tables {
		o := &old.Tables[i]
		name := strings.ToLower(o.DB + "." + o.Table)
		n := byName[name]
		if n == nil {
			continue
		}
		if why := placementChange(o, n); why != "" {
			out = append(out, "table "+name+": "+why)
		}
	}
	slices.Sort(out)
	return out
}

// placementChange says how n places rows differently from o ("" if not).
func placementChange(o, n *TableConfig) string {
	if !strings.EqualFold(o.Key, n.Key) {
		return fmt.Sprintf("shard key %s -> %s", o.Key, n.Key)
	}
	if o.Shard.Type != n.Shard.Type {
		return fmt.Sprintf("type %s -> %s", o.Shard.Type, n.Shard.Type)
	}
	if strings.HasPrefix(o.Shard.Type, "date_") {
		// A date's sub-table is named by the date alone: the rule may
		// gain periods, as long as each old sub-table stays on its node.
		if o.Shard.Location.String() != n.Shard.Location.String() {
			return fmt.Sprintf("time zone %s -> %s", o.Shard.Location, n.Shard.Location)
		}
		or, err1 := shard.New(o.Shard)
		nr, err2 := shard.New(n.Shard)
		if err1 != nil || err2 != nil {
			return "date_range"
		}
		at := map[string]string{}
		for _, st := range nr.Tables() {
			at[st.Suffix] = n.Nodes[st.Node]
		}
		for _, st := range or.Tables() {
			if node, ok := at[st.Suffix]; !ok || node != o.Nodes[st.Node] {
				if !ok {
					return fmt.Sprintf("date_range: sub-table %s%s is no longer covered", o.Table, st.Suffix)
				}
				return fmt.Sprintf("date_range: sub-table %s%s moves from node %s to %s", o.Table, st.Suffix, o.Nodes[st.Node], node)
			}
		}
		if !slices.Equal(o.Nodes[:min(len(o.Nodes), len(n.Nodes))], n.Nodes[:min(len(o.Nodes), len(n.Nodes))]) {
			return fmt.Sprintf("nodes %v -> %v", o.Nodes, n.Nodes)
		}
		return ""
	}
	switch {
	case !slices.Equal(o.Nodes, n.Nodes):
		return fmt.Sprintf("nodes %v -> %v", o.Nodes, n.Nodes)
	case !slices.Equal(o.Shard.Locations, n.Shard.Locations):
		return fmt.Sprintf("locations %v -> %v", o.Shard.Locations, n.Shard.Locations)
	case o.Shard.TableRowLimit != n.Shard.TableRowLimit:
		return fmt.Sprintf("table_row_limit %d -> %d", o.Shard.TableRowLimit, n.Shard.TableRowLimit)
	case !reflect.DeepEqual(o.Shard.ListValues, n.Shard.ListValues):
		return "list_values"
	}
	return ""
}
