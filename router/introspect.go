package router

import (
	"slices"
	"strings"

	"github.com/keyshard/keyshard/router/shard"
	"github.com/pingcap/tidb/pkg/parser/ast"
	driver "github.com/pingcap/tidb/pkg/parser/test_driver"
)

// Introspection: the statements ORMs, migration tools and DBAs use to look
// at a table answer for a sharded table as for the one logical table its
// users see, not for a sub-table or for nothing (1146 on the default node).
// A statement about one sharded table runs on a sub-table (the first: all
// have the same definition) with the sub-table's name put back as the
// logical one in the answer; the table lists (SHOW TABLES, SHOW TABLE
// STATUS) list the logical tables instead of their sub-tables.

// LookKind says how an introspection statement is answered.
type LookKind uint8

// Introspection kinds.
const (
	// LookOne: SQL runs on Node; values equal to a key of Rename are
	// renamed in the answer (and the DDL of SHOW CREATE TABLE).
	LookOne LookKind = iota + 1
	// LookTables: SHOW [FULL] TABLES: the default node's list with the
	// sub-tables replaced by the logical tables.
	LookTables
	// LookStatus: SHOW TABLE STATUS: as LookTables, a logical table's row
	// made from its sub-tables' (sizes and rows summed).
	LookStatus
	// LookInfo: a read of information_schema that names no sharded table
	// (table_schema = 'db'): it runs on Node, the default node, and each
	// row whose TABLE_NAME is a sub-table (Subs) is renamed to its logical
	// table or dropped, so that the tables are listed as SHOW TABLES lists
	// them.
	LookInfo
)

// InfoSub is what a LookInfo answer does with a row naming a sub-table of
// database DB: rename it to Logical, or drop it (Logical "": one
// sub-table on the default node stands for the logical table, the others
// are left out).
type InfoSub struct{ DB, Logical string }

// Look is how one introspection statement is answered.
type Look struct {
	Kind   LookKind
	Node   string            // LookOne: where SQL runs
	SQL    string            // LookOne: the statement, on the sub-table
	Rename map[string]string // LookOne: physical name -> logical name
	// DDL: LookOne for SHOW CREATE TABLE: the answer's second column is a
	// CREATE TABLE statement whose table name is renamed.
	DDL bool

	// LookTables, LookStatus: the database listed, the sharded tables in
	// it (sorted by name) and the statement's filter (LIKE pattern, or a
	// WHERE condition restored as SQL; both empty: none).
	DB     string
	Tables []*TableRule
	Like   string
	Where  string
	Full   bool // SHOW FULL TABLES: with Table_type

	// LookInfo: the sub-tables by lower-case name.
	Subs map[string]InfoSub
}

// Look returns how sql, an introspection statement (SHOW CREATE TABLE,
// DESCRIBE, SHOW COLUMNS, SHOW INDEX, SHOW TABLES, SHOW TABLE STATUS, a
// SELECT on information_schema naming a sharded table), is answered in
// this schema with current database db; nil when it concerns no sharded
// table (it runs on the default node as it is).
func (s *Schema) Look(p *Parser, sql, db string) *Look {
	if len(s.tables) == 0 {
		return nil
	}
	stmts, err := p.Parse(sql)
	if err != nil || len(stmts) != 1 {
		return nil
	}
	switch st := stmts[0].(type) {
	case *ast.ExplainStmt:
		if show, ok := st.Stmt.(*ast.ShowStmt); ok && show.Tp == ast.ShowColumns {
			// DESCRIBE t: MariaDB answers it as SHOW COLUMNS.
			return s.lookTable(show, st, db)
		}
	case *ast.ShowStmt:
		switch st.Tp {
		case ast.ShowCreateTable, ast.ShowColumns, ast.ShowIndex:
			return s.lookTable(st, st, db)
		case ast.ShowTables, ast.ShowTableStatus:
			return s.lookList(st, db)
		}
	case *ast.SelectStmt, *ast.SetOprStmt:
		return s.lookInfoSchema(stmts[0])
	}
	return nil
}

// lookTable answers a statement about one table (show) with stmt, the
// statement to restore, run on the table's first sub-table.
func (s *Schema) lookTable(show *ast.ShowStmt, stmt ast.StmtNode, db string) *Look {
	if show.Table == nil {
		return nil
	}
	tdb := show.Table.Schema.O
	if show.DBName != "" {
		tdb = show.DBName
	}
	if tdb == "" {
		tdb = db
	}
	t := s.Table(tdb, show.Table.Name.O)
	if t == nil {
		return nil
	}
	logical := show.Table.Name.O
	show.Table.Name = ast.NewCIStr(t.subNames[0])
	text, err := restoreEscaped(stmt)
	if err != nil {
		return nil
	}
	return &Look{Kind: LookOne, Node: t.NodeOf(0), SQL: text, Rename: map[string]string{t.subNames[0]: logical},
		DDL: show.Tp == ast.ShowCreateTable}
}

// lookList answers SHOW [FULL] TABLES and SHOW TABLE STATUS in a database
// with sharded tables.
func (s *Schema) lookList(show *ast.ShowStmt, db string) *Look {
	if show.DBName != "" {
		db = show.DBName
	}
	db = strings.ToLower(db)
	l := &Look{Kind: LookTables, DB: db, Full: show.Full}
	if show.Tp == ast.ShowTableStatus {
		l.Kind = LookStatus
	}
	for _, t := range s.tables {
		if t.DB == db {
			l.Tables = append(l.Tables, t)
		}
	}
	if len(l.Tables) == 0 {
		return nil
	}
	slices.SortFunc(l.Tables, func(a, b *TableRule) int { return strings.Compare(a.Table, b.Table) })
	if show.Pattern != nil {
		v, ok := show.Pattern.Pattern.(*driver.ValueExpr)
		if !ok {
			return nil
		}
		l.Like = v.GetString()
	}
	if show.Where != nil {
		w, err := restoreEscaped(show.Where)
		if err != nil {
			return nil
		}
		l.Where = w
	}
	return l
}

// TableNamed returns the sharded table whose bare name is name when one
// rule alone has that name, else nil.
func (s *Schema) TableNamed(name string) *TableRule {
	name = strings.ToLower(name)
	if !s.names[name] {
		return nil
	}
	var found *TableRule
	for _, t := range s.tables {
		if t.Table == name {
			if found != nil {
				return nil
			}
			found = t
		}
	}
	return found
}

// IsSubTable reports whether name is a sub-table of a sharded table of
// this schema in database db.
func (s *Schema) IsSubTable(db, name string) bool {
	db, name = strings.ToLower(db), strings.ToLower(name)
	for _, t := range s.tables {
		if t.DB == db && strings.HasPrefix(name, t.Table) && slices.Contains(t.subNames, name) {
			return true
		}
	}
	return false
}

// lookInfoSchema answers a query on information_schema that names a
// sharded table by a string literal (table_name = 'orders'): the literal
// becomes the first sub-table's name, the query runs on its node, and the
// answer says the logical name again.
func (s *Schema) lookInfoSchema(stmt ast.StmtNode) *Look {
	v := &infoSchemaFinder{s: s}
	stmt.Accept(v)
	if v.infoSchema && v.rule == nil && !v.other {
		return s.lookInfoList()
	}
	if !v.infoSchema || v.rule == nil || v.other {
		return nil
	}
	for _, lit := range v.lits {
		lit.SetString(v.rule.subNames[0])
	}
	text, err := restoreEscaped(stmt)
	if err != nil {
		return nil
	}
	return &Look{Kind: LookOne, Node: v.rule.NodeOf(0), SQL: text, Rename: map[string]string{v.rule.subNames[0]: v.logical}}
}

// lookInfoList answers a read of information_schema naming no sharded
// table on the default node, whose rows naming sub-tables become the
// logical tables': the first sub-table of each on the default node stands
// for it (a table with none there is not listed), the others are dropped.
func (s *Schema) lookInfoList() *Look {
	subs := map[string]InfoSub{}
	for _, t := range s.tables {
		keep := slices.IndexFunc(t.subs, func(sub shard.SubTable) bool { return t.Nodes[sub.Node] == s.Default })
		for i, name := range t.subNames {
			if name == t.Table {
				continue // a global table: the same name everywhere
			}
			is := InfoSub{DB: t.DB}
			if i == keep {
				is.Logical = t.Table
			}
			subs[name] = is
		}
	}
	if len(subs) == 0 {
		return nil
	}
	return &Look{Kind: LookInfo, Node: s.Default, Subs: subs}
}

// infoSchemaFinder looks for information_schema tables and for string
// literals naming one sharded table.
type infoSchemaFinder struct {
	s          *Schema
	infoSchema bool
	rule       *TableRule
	logical    string
	lits       []*driver.ValueExpr
	other      bool // literals name two different sharded tables
}

func (v *infoSchemaFinder) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.TableName:
		if x.Schema.L == "information_schema" {
			v.infoSchema = true
		}
	case *driver.ValueExpr:
		if x.Kind() != driver.KindString {
			break
		}
		name := x.GetString()
		t := v.s.TableNamed(name)
		if t == nil {
			break
		}
		if v.rule != nil && v.rule != t {
			v.other = true
			break
		}
		v.rule, v.logical = t, name
		v.lits = append(v.lits, x)
	}
	return n, false
}

func (v *infoSchemaFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }
