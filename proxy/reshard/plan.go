package reshard

import (
	"fmt"
	"strings"

	"github.com/keyshard/keyshard/router"
	"github.com/keyshard/keyshard/router/shard"
)

// Place is a physical table on a node.
type Place struct {
	Node string
	DB   string
	Name string
}

func (p Place) String() string { return p.Node + ":" + p.DB + "." + p.Name }

// Target is where the rows of one sub-table of the new layout are while
// the workflow runs.
type Target struct {
	// Place is where the copy and the catch-up write its rows: the
	// sub-table's own name on its node, or a shadow (Shadow) when a table
	// of that name on that node still serves the old layout with other
	// rows; the switch renames the shadow into place.
	Place
	Final  string // the name after the switch
	Shadow bool
	// Kept: the old layout's sub-table of this name on this node already
	// holds exactly these rows: nothing is written, nothing renamed.
	Kept bool
	// Create: the table does not exist yet (a shadow, a sub-table on a new
	// node, a range rule's new sub-table): START creates it with the
	// source's definition.
	Create bool
}

// TablePlan is how one table's rows get from the running layout (Old) to
// the pending one (New).
type TablePlan struct {
	DB, Table string
	Old, New  *router.TableRule
	// Split: rows change sub-table (the rule spreads keys anew), so every
	// old sub-table is read and every new one is rebuilt; else whole
	// sub-tables move between nodes and only those are copied.
	Split bool
	// Sources are the old sub-table indexes read (copied and followed).
	Sources []int
	// Targets has one entry per sub-table of New.
	Targets []Target
}

// Name is "db.table".
func (p *TablePlan) Name() string { return p.DB + "." + p.Table }

// Source is the place of old sub-table i.
func (p *TablePlan) Source(i int) Place {
	return Place{Node: p.Old.NodeOf(i), DB: p.DB, Name: p.Old.SubTableName(i)}
}

// ShadowSuffix names a sub-table built beside the one of the same name
// that still serves the old layout; OldSuffix, an old sub-table renamed
// out of the way at the switch (kept until COMPLETE for REVERSE).
const (
	ShadowSuffix = "__ksnew"
	OldSuffix    = "__ksold"
)

// PlanTable compares a table's running rule with its pending one: nil
// when no row changes place (the same rule, or one that only adds
// sub-tables no row can be in yet, which Creates still lists: see
// NeedsWork).
func PlanTable(old, cur *router.TableRule) (*TablePlan, error) {
	if old.Global != cur.Global {
		return nil, fmt.Errorf("table %s.%s: a global table cannot become sharded, or the reverse, by resharding", old.DB, old.Table)
	}
	split := !strings.EqualFold(old.Key, cur.Key) || !shard.SamePlaces(old.Rule, cur.Rule)
	p := &TablePlan{DB: old.DB, Table: old.Table, Old: old, New: cur, Split: split}
	oldAt := map[Place]int{} // (node, name) -> old index
	for i := range old.Rule.Tables() {
		oldAt[p.Source(i)] = i
	}
	n := len(cur.Rule.Tables())
	p.Targets = make([]Target, n)
	for j := range n {
		pl := Place{Node: cur.NodeOf(j), DB: p.DB, Name: cur.SubTableName(j)}
		t := Target{Place: pl, Final: pl.Name}
		i, exists := oldAt[pl]
		switch {
		case !split && exists && (old.Global || i == j):
			t.Kept = true
		case exists:
			t.Shadow, t.Create = true, true
			t.Name = pl.Name + ShadowSuffix
		default:
			t.Create = true
		}
		p.Targets[j] = t
	}
	// Sources: the old sub-tables some of whose rows go to a target that
	// is not kept.
	for i := range old.Rule.Tables() {
		switch {
		case split:
			p.Sources = append(p.Sources, i)
		case old.Global:
			if i == 0 && p.writes() {
				// One copy of a global table gives every new one.
				p.Sources = append(p.Sources, i)
			}
		case i < n && !p.Targets[i].Kept:
			p.Sources = append(p.Sources, i)
		}
	}
	if !p.NeedsWork() {
		return nil, nil
	}
	return p, nil
}

// writes says some target is not kept.
func (p *TablePlan) writes() bool {
	for _, t := range p.Targets {
		if !t.Kept {
			return true
		}
	}
	return false
}

// NeedsWork says some rows move or some table must be created.
func (p *TablePlan) NeedsWork() bool { return p.writes() }

// TargetsOf appends to dst the targets a row with shard-key value key
// goes to (none when its sub-table is kept; every copy of a global
// table).
func (p *TablePlan) TargetsOf(dst []*Target, key any) ([]*Target, error) {
	if p.New.Global {
		for j := range p.Targets {
			if !p.Targets[j].Kept {
				dst = append(dst, &p.Targets[j])
			}
		}
		return dst, nil
	}
	j, err := p.New.Rule.Find(key)
	if err != nil {
		return dst, fmt.Errorf("table %s: a row with %s = %v has no place in the new rule: %w", p.Name(), p.New.Key, key, err)
	}
	if p.Targets[j].Kept {
		return dst, nil
	}
	return append(dst, &p.Targets[j]), nil
}

// Describe is one line per table for START's answer and the status.
func (p *TablePlan) Describe() string {
	var moved, created, shadows []string
	for _, i := range p.Sources {
		moved = append(moved, p.Source(i).String())
	}
	for _, t := range p.Targets {
		if t.Create {
			created = append(created, t.Place.String())
		}
		if t.Shadow {
			shadows = append(shadows, t.Final)
		}
	}
	kind := "sub-tables move to other nodes"
	if p.Split {
		kind = "rows change sub-table"
	}
	s := fmt.Sprintf("%s: %s; read %s; write %s", p.Name(), kind, strings.Join(moved, ", "), strings.Join(created, ", "))
	if len(shadows) > 0 {
		s += "; renamed into place at the switch: " + strings.Join(shadows, ", ")
	}
	return s
}
