package router

import (
	"fmt"
	"slices"
	"strings"

	"github.com/keyshard/keyshard/router/shard"
)

// PlacementChanges compares the shard rules of a schema before (old) and
// after (cur) a configuration change and describes, for each table that
// has rows under the old rule, what changes where they are looked for: its
// key, type, or a sub-table that moves, goes, or now holds other keys; or
// the rule removed (its rows would be looked for on the default node).
// Rules that only grow without moving a key (a range or date rule gaining
// sub-tables at the end, a list rule gaining values) are not changes, nor
// are new tables, nor fields a rule's type does not use.
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
			out = append(out, "table "+name+": its shard rule is removed (its rows would be looked for on the default node)")
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
	or, err1 := shard.New(o.Shard)
	nr, err2 := shard.New(n.Shard)
	if err1 != nil || err2 != nil {
		return "the rule"
	}
	// Every old sub-table stays, on its node. (A global table has one of
	// the same name on each node.)
	type place struct{ suffix, node string }
	have := map[place]bool{}
	at := map[string]string{}
	for _, st := range nr.Tables() {
		have[place{st.Suffix, n.Nodes[st.Node]}] = true
		at[st.Suffix] = n.Nodes[st.Node]
	}
	for _, st := range or.Tables() {
		if have[place{st.Suffix, o.Nodes[st.Node]}] {
			continue
		}
		if node, ok := at[st.Suffix]; ok {
			return fmt.Sprintf("sub-table %s%s moves from node %s to %s", o.Table, st.Suffix, o.Nodes[st.Node], node)
		}
		return fmt.Sprintf("sub-table %s%s is no longer in the rule", o.Table, st.Suffix)
	}
	// And each key still maps to the sub-table it mapped to.
	switch t := o.Shard.Type; {
	case t == "hash" || t == "consistent_hash":
		if len(or.Tables()) != len(nr.Tables()) || t == "consistent_hash" && !slices.Equal(o.Nodes, n.Nodes) {
			return fmt.Sprintf("%d -> %d sub-tables (a %s rule maps every key anew)", len(or.Tables()), len(nr.Tables()), t)
		}
	case t == "range":
		if o.Shard.TableRowLimit != n.Shard.TableRowLimit {
			return fmt.Sprintf("table_row_limit %d -> %d", o.Shard.TableRowLimit, n.Shard.TableRowLimit)
		}
	case t == "list":
		for v, i := range o.Shard.ListValues {
			if j, ok := n.Shard.ListValues[v]; !ok || j != i {
				return fmt.Sprintf("list value %s moves or goes", v)
			}
		}
	case strings.HasPrefix(t, "date_"):
		if o.Shard.Location.String() != n.Shard.Location.String() {
			return fmt.Sprintf("time zone %s -> %s", o.Shard.Location, n.Shard.Location)
		}
	}
	return ""
}
