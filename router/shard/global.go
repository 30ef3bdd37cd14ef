package shard

import "errors"

// ErrGlobal: a global table has no shard key; every node holds all rows.
var ErrGlobal = errors.New("a global table has no shard key: every node holds a copy of every row")

// globalRule is a table copied on every node: one "sub-table" per node,
// all named as the table itself (an empty suffix). keyshard writes every
// copy and reads one.
type globalRule struct{ tableSet }

func newGlobal(nodes int) *globalRule {
	tables := make([]SubTable, nodes)
	for i := range tables {
		tables[i] = SubTable{Node: i}
	}
	return &globalRule{tableSet{typ: TypeGlobal, tables: tables}}
}

// Global reports whether r copies its table on every node (type global).
func Global(r Rule) bool {
	_, ok := r.(*globalRule)
	return ok
}

// Find has no answer for a global table: no key places a row.
func (r *globalRule) Find(any) (int, error) { return -1, ErrGlobal }

// FindRange returns every copy.
func (r *globalRule) FindRange(Bound, Bound) ([]int, error) { return r.all(), nil }
