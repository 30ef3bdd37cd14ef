package router

import (
	"maps"
	"slices"
	"strings"
)

// TableID names a table: its database and its name.
type TableID struct{ DB, Table string }

// Columns is a snapshot of the columns of the tables a schema's statements
// name: each table's columns in order, lower case. It is immutable once
// built. The router uses it to tell which table an unqualified column
// belongs to (a name owned by exactly one table of a FROM belongs to it),
// to find the columns of NATURAL JOIN and of JOIN ... USING, and to place
// the shard key of an INSERT that gives no column list. A table it does
// not list has unknown columns: a name that such a table could own stays
// unresolved, and planning is as conservative as without Columns.
type Columns struct {
	tables map[string]*tableCols // "db.table", lower case
}

type tableCols struct {
	names []string       // in table order
	pos   map[string]int // name -> index into names
}

// NewColumns builds a snapshot from each table's columns in table order
// (for a sharded table, the logical table's: as its sub-tables have them).
// Names are compared case-insensitively; the maps and slices are copied.
func NewColumns(tables map[TableID][]string) *Columns {
	c := &Columns{tables: make(map[string]*tableCols, len(tables))}
	for id, cols := range tables {
		tc := &tableCols{names: make([]string, len(cols)), pos: make(map[string]int, len(cols))}
		for i, n := range cols {
			n = strings.ToLower(n)
			tc.names[i] = n
			if _, dup := tc.pos[n]; !dup {
				tc.pos[n] = i
			}
		}
		c.tables[strings.ToLower(id.DB)+"."+strings.ToLower(id.Table)] = tc
	}
	return c
}

// Table returns the columns of db.table in order, lower case (ok false:
// the snapshot does not list the table). The slice must not be changed.
func (c *Columns) Table(db, table string) (cols []string, ok bool) {
	tc := c.table(strings.ToLower(db), strings.ToLower(table))
	if tc == nil {
		return nil, false
	}
	return tc.names, true
}

// Len is the number of tables the snapshot lists.
func (c *Columns) Len() int {
	if c == nil {
		return 0
	}
	return len(c.tables)
}

// Equal reports whether c and o list the same tables with the same
// columns in the same order.
func (c *Columns) Equal(o *Columns) bool {
	if c.Len() != o.Len() {
		return false
	}
	if c.Len() == 0 {
		return true
	}
	return maps.EqualFunc(c.tables, o.tables, func(a, b *tableCols) bool { return slices.Equal(a.names, b.names) })
}

// table takes lower-case names; nil when unknown (or c is nil).
func (c *Columns) table(db, table string) *tableCols {
	if c == nil {
		return nil
	}
	return c.tables[db+"."+table]
}

// planState is what plans are built with (the Columns snapshot) and the
// cache that keeps them.
type planState struct {
	cols  *Columns
	cache *planCache
}

// SetColumns makes cols the schema's Columns snapshot (nil: none, the
// router then knows no table's columns). It is safe while other goroutines
// plan: a plan is built with one snapshot and cached only in the plan cache
// that goes with it, and a snapshot that changes anything replaces the
// plan cache (its counters carry on), so no plan built before the change
// is used after it. A snapshot equal to the current one changes nothing.
//
// The proxy sets it whenever it has learnt the columns of the schema's
// tables (at start, after a reload, after DDL it routed), before or while
// sessions plan; until then the router plans as without it.
func (s *Schema) SetColumns(cols *Columns) {
	for {
		old := s.state.Load()
		if old.cols.Equal(cols) {
			return
		}
		c := newPlanCache(old.cache.max)
		c.hits.Store(old.cache.hits.Load())
		c.misses.Store(old.cache.misses.Load())
		c.evicted.Store(old.cache.evicted.Load() + old.cache.size.Load())
		if s.state.CompareAndSwap(old, &planState{cols: cols, cache: c}) {
			return
		}
	}
}

// Columns returns the schema's Columns snapshot (nil: none).
func (s *Schema) Columns() *Columns { return s.state.Load().cols }
