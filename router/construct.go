package router

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// construct names where in stmt table tn is read, for a refusal: "a WITH
// (common table expression)", "a UNION", "a derived table", "a
// subquery", innermost first ("a UNION in a derived table"); "a
// subquery" when it is found nowhere.
func construct(stmt ast.StmtNode, tn *ast.TableName) string {
	v := &constructFinder{tn: tn}
	stmt.Accept(v)
	if v.found == nil {
		return "a subquery"
	}
	var names []string
	for i := len(v.found) - 1; i >= 0 && len(names) < 2; i-- {
		names = append(names, v.found[i])
	}
	return strings.Join(names, " in ")
}

type constructFinder struct {
	tn    *ast.TableName
	stack []string
	kinds []bool // per Enter: whether it pushed
	found []string
	cte   bool // the node entered last is a CTE (its body is no subquery of its own)
}

func (v *constructFinder) Enter(n ast.Node) (ast.Node, bool) {
	name, cte := "", v.cte
	v.cte = false
	switch x := n.(type) {
	case *ast.CommonTableExpression:
		name, v.cte = "a WITH (common table expression)", true
	case *ast.SetOprStmt:
		name = "a UNION"
	case *ast.SubqueryExpr:
		if !cte {
			name = "a subquery"
		}
	case *ast.TableSource:
		switch x.Source.(type) {
		case *ast.SelectStmt, *ast.SetOprStmt:
			name = "a derived table"
		}
	case *ast.InsertStmt:
		if x.Select != nil {
			name = "an INSERT ... SELECT"
		}
	case *ast.TableName:
		if x == v.tn && v.found == nil {
			v.found = append([]string{}, v.stack...)
		}
	}
	if name != "" {
		v.stack = append(v.stack, name)
	}
	v.kinds = append(v.kinds, name != "")
	return n, false
}

func (v *constructFinder) Leave(n ast.Node) (ast.Node, bool) {
	if last := len(v.kinds) - 1; last >= 0 {
		if v.kinds[last] {
			v.stack = v.stack[:len(v.stack)-1]
		}
		v.kinds = v.kinds[:last]
	}
	return n, true
}
