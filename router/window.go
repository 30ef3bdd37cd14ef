package router

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Window functions over several sub-tables. A window function whose
// PARTITION BY has a column tied to the shard key sees, on each
// sub-table, every row of each of its partitions (the rows of one key are
// on one sub-table): its values are those over all the rows, and the
// statement runs on every sub-table, its rows concatenated, or merged
// (ORDER BY, LIMIT, DISTINCT) as any column's. One partitioned otherwise,
// or by nothing, needs the rows of every sub-table together: refused over
// several sub-tables, and exact on one (the key a constant).

// windowFuncs lists the window functions of st's select list, HAVING and
// ORDER BY (not those of its subqueries, planned on their own).
func windowFuncs(st *ast.SelectStmt) []*ast.WindowFuncExpr {
	v := &windowFinder{}
	if st.Fields != nil {
		for _, f := range st.Fields.Fields {
			if f.Expr != nil {
				f.Expr.Accept(v)
			}
		}
	}
	if st.Having != nil {
		st.Having.Expr.Accept(v)
	}
	if st.OrderBy != nil {
		for _, it := range st.OrderBy.Items {
			it.Expr.Accept(v)
		}
	}
	return v.found
}

type windowFinder struct{ found []*ast.WindowFuncExpr }

func (v *windowFinder) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.WindowFuncExpr:
		v.found = append(v.found, x)
		return n, true
	case *ast.SubqueryExpr:
		return n, true
	}
	return n, false
}

func (v *windowFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// partitionOf returns the PARTITION BY of window spec, following the named
// windows of st it refers to (nil: none).
func partitionOf(st *ast.SelectStmt, spec *ast.WindowSpec) *ast.PartitionByClause {
	for range len(st.WindowSpecs) + 1 {
		if spec.PartitionBy != nil {
			return spec.PartitionBy
		}
		name := spec.Ref.L
		if spec.OnlyAlias {
			name = spec.Name.L
		}
		if name == "" {
			return nil
		}
		var next *ast.WindowSpec
		for i := range st.WindowSpecs {
			if st.WindowSpecs[i].Name.L == name {
				next = &st.WindowSpecs[i]
				break
			}
		}
		if next == nil || next == spec {
			return nil
		}
		spec = next
	}
	return nil
}

// windowWhy says why the window functions of st are not exact over
// several sub-tables ("" when st has none, or all are partitioned by a
// column tied to the shard key).
func (b *builder) windowWhy(st *ast.SelectStmt) string {
	ws := windowFuncs(st)
	if len(ws) == 0 {
		return ""
	}
	t := b.plan.tables[0]
	for _, w := range ws {
		keyed := false
		if pb := partitionOf(st, &w.Spec); pb != nil {
			for _, it := range pb.Items {
				if c, ok := stripParens(it.Expr).(*ast.ColumnNameExpr); ok && b.keyColumn(c.Name) != nil {
					keyed = true
					break
				}
			}
		}
		if !keyed {
			return "window function " + strings.ToUpper(w.Name) + "() over several sub-tables is not supported unless its PARTITION BY " +
				"has shard key " + t.Key + " of " + t.Table + " (each partition then lives in one sub-table): partition by it, or give " +
				t.Key + " one value so that the statement runs on one sub-table"
		}
	}
	if (st.GroupBy != nil || st.Having != nil || hasAggFields(st)) && !b.groupsByKey(st) {
		return "a window function with aggregates not grouped by shard key " + t.Key + " over several sub-tables is not supported (the window would see " +
			"each sub-table's groups); give " + t.Key + " one value so that the statement runs on one sub-table"
	}
	return ""
}

// groupsByKey reports whether st's GROUP BY has a column tied to the
// shard key: each group, and so each partition of a window partitioned by
// the key, is then on one sub-table.
func (b *builder) groupsByKey(st *ast.SelectStmt) bool {
	if st.GroupBy == nil {
		return false
	}
	for _, it := range st.GroupBy.Items {
		if c, ok := stripParens(it.Expr).(*ast.ColumnNameExpr); ok && b.keyColumn(c.Name) != nil {
			return true
		}
	}
	return false
}

// hasAggFields reports whether st's select list has an aggregate (not a
// window function).
func hasAggFields(st *ast.SelectStmt) bool {
	if st.Fields == nil {
		return false
	}
	for _, f := range st.Fields.Fields {
		if f.Expr != nil && hasAgg(f.Expr) {
			return true
		}
	}
	return false
}

func stripParens(e ast.ExprNode) ast.ExprNode {
	for {
		p, ok := e.(*ast.ParenthesesExpr)
		if !ok {
			return e
		}
		e = p.Expr
	}
}
