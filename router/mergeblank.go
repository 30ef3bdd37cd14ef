package router

import (
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// In grouped mode the proxy computes each select-list expression over
// aggregates (MAX(k)-MIN(k), SUM(a)/SUM(b)) from the merged aggregates; the
// sub-tables' value of it is never used, only its column definition. A
// sub-table computing it anyway could fail or warn where one server does
// not: on a partial group, or on a group the LIMIT or HAVING drops (one
// server computes select-list expressions only for the rows it sends):
// `SELECT MAX(k)-MIN(k) ... GROUP BY a ORDER BY ... LIMIT 10, 2` over a
// BIGINT key holding -2^63 and 2^63-1 gave 1690 "BIGINT value is out of
// range" (test/fuzzsql). blankField makes the sub-tables send
// IF(0, expr, NULL) instead: the same column definition (type, length,
// decimals, charset), never evaluated, except the NOT NULL flag, which
// IF(..., NULL) clears; so only expressions that are nullable anyway are
// blanked: those over an aggregate other than COUNT, with nothing that
// hides a NULL (COALESCE, IFNULL, IF, CASE, IS NULL, <=>, CONCAT_WS...).
func blankField(f *ast.SelectField) {
	if f.Expr == nil || f.AsName.L == "" {
		return // the name would change (nameFields gave every expression one it could)
	}
	if _, ok := f.Expr.(*ast.AggregateFuncExpr); ok {
		return // a bare aggregate: the merge needs the sub-tables' MIN/MAX cells; others cannot fail
	}
	v := &nullableFinder{}
	f.Expr.Accept(v)
	if !v.nullable || v.hides {
		return
	}
	f.Expr = &ast.FuncCallExpr{FnName: ast.NewCIStr("IF"), Args: []ast.ExprNode{
		ast.NewValueExpr(int64(0), "", ""), f.Expr, ast.NewValueExpr(nil, "", ""),
	}}
}

// nullableFinder looks for an aggregate that can be NULL (nullable) and for
// anything that can turn a NULL into a value (hides).
type nullableFinder struct {
	nullable, hides bool
}

var nullHiders = map[string]bool{
	"coalesce": true, "ifnull": true, "nvl": true, "nvl2": true, "if": true, "isnull": true,
	"concat_ws": true, "nullif": true, "interval": true, "make_set": true, "elt": true, "field": true,
}

func (v *nullableFinder) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.AggregateFuncExpr:
		if x.F != ast.AggFuncCount {
			v.nullable = true
		}
		return n, true
	case *ast.WindowFuncExpr, *ast.SubqueryExpr, *ast.CaseExpr, *ast.IsNullExpr, *ast.IsTruthExpr:
		v.hides = true
		return n, true
	case *ast.FuncCallExpr:
		if nullHiders[x.FnName.L] {
			v.hides = true
			return n, true
		}
	case *ast.BinaryOperationExpr:
		if x.Op == opcode.NullEQ {
			v.hides = true
			return n, true
		}
	}
	return n, false
}

func (v *nullableFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }
