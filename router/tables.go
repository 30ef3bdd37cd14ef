package router

import (
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Tables lists the tables sql names, as lower-case "db.table" (db: the
// table's schema, else the current database db), sorted, each once; CTE
// names are left out. ok is false when sql does not parse or names a
// table without a database while there is none: its tables are unknown.
func (p *Parser) Tables(sql, db string) (tables []string, ok bool) {
	stmts, err := p.Parse(sql)
	if err != nil {
		return nil, false
	}
	v := tableLister{db: strings.ToLower(db), ok: true}
	for _, st := range stmts {
		st.Accept(&v)
	}
	slices.Sort(v.tables)
	return slices.Compact(v.tables), v.ok
}

type tableLister struct {
	db     string
	tables []string
	ctes   []string
	ok     bool
}

func (v *tableLister) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.WithClause:
		for _, c := range x.CTEs {
			v.ctes = append(v.ctes, c.Name.L)
		}
	case *ast.TableName:
		schema := x.Schema.L
		if schema == "" {
			if slices.Contains(v.ctes, x.Name.L) {
				return n, false
			}
			schema = v.db
		}
		if schema == "" {
			v.ok = false
		}
		v.tables = append(v.tables, schema+"."+x.Name.L)
	}
	return n, false
}

func (v *tableLister) Leave(n ast.Node) (ast.Node, bool) { return n, true }
