package router

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/keyshard/keyshard/router/shard"
)

// TableConfig is one shard rule as the proxy hands it over (mirrors
// proxy/config.ShardConfig; router does not import the config package).
type TableConfig struct {
	DB, Table, Key string
	Nodes          []string
	Shard          shard.Config
	Seq            *Sequence // nil: the table takes no ids from a sequence
}

// Sequence is where a sharded table's auto-increment column takes its
// ids: a row of keyshard's sequence table, read in blocks.
type Sequence struct {
	Name   string // the sequence's name (its row)
	Column string // the column it fills, lower case
	Cache  int    // ids taken per block (one backend round trip)
}

// SchemaConfig is one schema_list entry.
type SchemaConfig struct {
	Default string   // node for everything that is not sharded
	Nodes   []string // the schema's nodes
	Tables  []TableConfig
}

// TableRule is a compiled shard rule for one table. Immutable.
type TableRule struct {
	DB, Table, Key string // lower case
	Nodes          []string
	// Global: the table is copied whole on every node (type global); its
	// sub-tables are the copies, each named as the table.
	Global bool
	// Seq: an INSERT that omits Seq.Column (or gives NULL) takes its
	// value from the sequence.
	Seq      *Sequence
	Rule     shard.Rule
	subs     []shard.SubTable
	subNames []string
	subSet   map[string]bool // subNames
}

// Named is "sharded table t" or "global table t", for messages.
func (t *TableRule) Named() string {
	if t.Global {
		return "global table " + t.Table
	}
	return "sharded table " + t.Table
}

// SubTableName returns the physical name of sub-table i.
func (t *TableRule) SubTableName(i int) string { return t.subNames[i] }

// NodeOf returns the node holding sub-table i.
func (t *TableRule) NodeOf(i int) string { return t.Nodes[t.subs[i].Node] }

// differ says why a join on the keys of t and u is not co-located ("" when
// it is): the rules must place every key on the same sub-table index and
// node (shard.Differ), over the same node names.
func (t *TableRule) differ(u *TableRule) string {
	if !slices.Equal(t.Nodes, u.Nodes) {
		return "nodes " + strings.Join(t.Nodes, ",") + " and " + strings.Join(u.Nodes, ",")
	}
	return shard.Differ(t.Rule, u.Rule)
}

// layout describes t's rule for messages: "hash over node1,node2, 8
// sub-tables".
func (t *TableRule) layout() string {
	d := shard.Describe(t.Rule)
	typ, rest, _ := strings.Cut(d, ", ")
	return typ + " over " + strings.Join(t.Nodes, ",") + ", " + rest
}

// Schema is the compiled routing configuration of one schema. Immutable:
// a reload builds a new one (with a new plan cache).
type Schema struct {
	Default string
	Nodes   []string
	tables  map[string]*TableRule // "db.table", lower case
	names   map[string]bool       // bare table names, lower case, for the lexical check
	// state is the Columns snapshot and the plan cache built with it:
	// swapped together, so that no plan built with one snapshot is cached
	// with another.
	state atomic.Pointer[planState]
}

// NewSchema compiles a schema's shard rules.
func NewSchema(c SchemaConfig, cacheSize int) (*Schema, error) {
	s := &Schema{Default: c.Default, Nodes: c.Nodes, tables: map[string]*TableRule{}, names: map[string]bool{}}
	for _, tc := range c.Tables {
		r, err := shard.New(tc.Shard)
		if err != nil {
			return nil, fmt.Errorf("shard rule for %s.%s: %w", tc.DB, tc.Table, err)
		}
		t := &TableRule{
			DB: strings.ToLower(tc.DB), Table: strings.ToLower(tc.Table), Key: strings.ToLower(tc.Key),
			Nodes: tc.Nodes, Rule: r, subs: r.Tables(), Global: shard.Global(r),
		}
		if tc.Seq != nil {
			t.Seq = &Sequence{Name: tc.Seq.Name, Column: strings.ToLower(tc.Seq.Column), Cache: max(1, tc.Seq.Cache)}
		}
		t.subSet = make(map[string]bool, len(t.subs))
		for _, st := range t.subs {
			t.subNames = append(t.subNames, t.Table+st.Suffix)
			t.subSet[t.Table+st.Suffix] = true
		}
		key := t.DB + "." + t.Table
		if _, dup := s.tables[key]; dup {
			return nil, fmt.Errorf("table %s has two shard rules", key)
		}
		s.tables[key] = t
		s.names[t.Table] = true
	}
	s.state.Store(&planState{cache: newPlanCache(cacheSize)})
	return s, nil
}

// Sharded reports whether the schema has any shard rule. When it has none,
// the proxy never asks the router to plan.
func (s *Schema) Sharded() bool { return len(s.tables) > 0 }

// Table returns the rule for db.table, or nil.
func (s *Schema) Table(db, table string) *TableRule {
	if len(s.tables) == 0 {
		return nil
	}
	return s.tables[strings.ToLower(db)+"."+strings.ToLower(table)]
}

// Rules returns the schema's shard rules, sorted by database and table.
func (s *Schema) Rules() []*TableRule {
	out := make([]*TableRule, 0, len(s.tables))
	for _, t := range s.tables {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *TableRule) int { return strings.Compare(a.DB+"."+a.Table, b.DB+"."+b.Table) })
	return out
}

// CacheStats returns the plan cache counters.
func (s *Schema) CacheStats() CacheStats { return s.state.Load().cache.stats() }

// MentionsSharded returns the first identifier of sql that names a sharded
// table ("" if none): the conservative check for statements keyshard does
// not plan (multi-statement batches, unparseable SQL).
func (s *Schema) MentionsSharded(sql string) string { return s.mentionsShardedName(sql) }

// mentionsShardedName reports whether any identifier of sql names a sharded
// table: the conservative check for statements the parser cannot read.
func (s *Schema) mentionsShardedName(sql string) string {
	n := len(sql)
	for i := 0; i < n; {
		c := sql[i]
		switch {
		case c == '\'' || c == '"':
			i = skipQuoted(sql, i, c)
		case c == '`':
			j := skipQuoted(sql, i, c)
			if j-1 > i+1 && s.names[strings.ToLower(sql[i+1:j-1])] {
				return sql[i+1 : j-1]
			}
			i = j
		case isIdent(c):
			j := i
			for j < n && isIdent(sql[j]) {
				j++
			}
			if s.names[strings.ToLower(sql[i:j])] {
				return sql[i:j]
			}
			i = j
		default:
			i++
		}
	}
	return ""
}
