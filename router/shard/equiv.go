package shard

import (
	"fmt"
	"maps"
	"slices"
)

// Differ says why rules a and b may place one key on different sub-table
// indexes or nodes ("" when they never do): two rules are co-located when
// they have the same type, the same sub-tables on the same node indexes
// (so the same counts per node) and the same type-specific settings (a
// range rule's rows per sub-table, a list rule's values, a date rule's
// periods and time zone). Table names and key names do not matter. The
// caller compares the node names themselves.
func Differ(a, b Rule) string {
	if a.Type() != b.Type() {
		return fmt.Sprintf("types %s and %s", a.Type(), b.Type())
	}
	ta, tb := a.Tables(), b.Tables()
	if len(ta) != len(tb) {
		return fmt.Sprintf("%d and %d sub-tables", len(ta), len(tb))
	}
	for i := range ta {
		if ta[i].Node != tb[i].Node {
			return fmt.Sprintf("sub-table %d is on node %d and on node %d", i, ta[i].Node, tb[i].Node)
		}
		if ta[i].Suffix != tb[i].Suffix {
			return fmt.Sprintf("sub-table %d is %s and %s", i, ta[i].Suffix, tb[i].Suffix)
		}
	}
	switch x := a.(type) {
	case *rangeRule:
		y := b.(*rangeRule)
		if x.limit != y.limit {
			return fmt.Sprintf("table_row_limit %d and %d", x.limit, y.limit)
		}
	case *listRule:
		y := b.(*listRule)
		if !maps.Equal(x.values, y.values) {
			return "different list_values"
		}
	case *dateRule:
		y := b.(*dateRule)
		if x.unit != y.unit || !maps.Equal(x.index, y.index) || !slices.Equal(x.sorted, y.sorted) {
			return "different date_range"
		}
		if x.loc.String() != y.loc.String() {
			return fmt.Sprintf("time zones %s and %s", x.loc, y.loc)
		}
	}
	return ""
}

// Describe is a short account of a rule for messages: "hash, 4
// sub-tables", "range of 1000 keys per sub-table, 4 sub-tables".
func Describe(r Rule) string {
	n := len(r.Tables())
	switch x := r.(type) {
	case *rangeRule:
		return fmt.Sprintf("range of %d keys per sub-table, %d sub-tables", x.limit, n)
	case *listRule:
		return fmt.Sprintf("list of %d values, %d sub-tables", len(x.values), n)
	case *dateRule:
		return fmt.Sprintf("%s in %s, %d sub-tables", x.typ, x.loc, n)
	}
	return fmt.Sprintf("%s, %d sub-tables", r.Type(), n)
}

// SamePlaces says whether b places every key a accepts on the sub-table
// index a places it on: growing a rule without moving a row (more
// sub-tables at the end of a range rule, list values or date periods
// added) or moving whole sub-tables between nodes keeps it true; changing
// how keys are spread (a hash or consistent_hash rule's sub-table count, a
// range rule's rows per sub-table) makes it false, and then rows change
// sub-table (see proxy/reshard). Nodes do not matter here.
func SamePlaces(a, b Rule) bool {
	if a.Type() != b.Type() {
		return false
	}
	na, nb := len(a.Tables()), len(b.Tables())
	switch x := a.(type) {
	case *hashRule, *consistentRule:
		return na == nb
	case *globalRule:
		return true
	case *rangeRule:
		return x.limit == b.(*rangeRule).limit && na <= nb
	case *listRule:
		y := b.(*listRule)
		for v, i := range x.values {
			if j, ok := y.values[v]; !ok || j != i {
				return false
			}
		}
		return true
	case *dateRule:
		y := b.(*dateRule)
		if x.unit != y.unit || x.loc.String() != y.loc.String() {
			return false
		}
		for p, i := range x.index {
			if j, ok := y.index[p]; !ok || j != i {
				return false
			}
		}
		return true
	}
	return false
}
