package router

import (
	"fmt"
	"slices"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Non-recursive CTEs (WITH x AS (SELECT ...) SELECT ... FROM x). The
// planner knows derived tables: each reference to a CTE becomes the
// derived table of its SELECT ((SELECT ...) AS x, a copy per reference),
// and the statement is planned, and sent, as that. A CTE's rows are those
// of its SELECT, so the rewritten statement gives the same answer; its
// sharded tables are then routed like any derived table's (co-located on
// the outer key, or pinned to one sub-table index), and what the planner
// refuses is refused naming the derived table.

// inlineWith rewrites sel's WITH into derived tables for the planner, and
// returns what puts the WITH back, for the statement sent: the planner
// renames the CTEs' tables in place, so the WITH the client wrote runs on
// the sub-tables, its ? each once. It changes nothing and says why (""
// when done) for a WITH it cannot rewrite: the refusal should the WITH
// name a sharded table (%s: the table).
func inlineWith(sel *ast.SelectStmt, sharded func(*ast.TableName) bool) (string, func(), error) {
	w := sel.With
	names := &tableNames{}
	for _, c := range w.CTEs {
		c.Query.Accept(names)
	}
	if !slices.ContainsFunc(names.names, sharded) {
		return "", nil, nil // as written: no sharded table in a CTE
	}
	if w.IsRecursive {
		return "WITH RECURSIVE naming sharded table %s is not supported: its rows would come from every sub-table; " +
			"read the rows and recurse in the application", nil, nil
	}
	// Check first: the statement is changed only when every CTE can be.
	v := &withFinder{}
	for _, c := range w.CTEs {
		q, ok := c.Query.Query.(*ast.SelectStmt)
		if !ok {
			return fmt.Sprintf("a CTE of a UNION (WITH %s AS (SELECT ... UNION ...)) naming sharded table %%s is not supported; "+
				"run the UNION on its own", c.Name.O), nil, nil
		}
		if len(c.ColNameList) > 0 {
			if q.Fields == nil || len(q.Fields.Fields) != len(c.ColNameList) {
				return fmt.Sprintf("WITH %s (columns) naming sharded table %%s is not supported when its SELECT lists "+
					"another number of columns", c.Name.O), nil, nil
			}
			for _, f := range q.Fields.Fields {
				if f.WildCard != nil {
					return fmt.Sprintf("WITH %s (columns) AS (SELECT * ...) naming sharded table %%s is not supported; "+
						"name the columns in its SELECT", c.Name.O), nil, nil
				}
			}
		}
		q.Accept(v)
	}
	if sel.Fields != nil {
		sel.With = nil
		sel.Accept(v)
		sel.With = w
	}
	if v.nested {
		return "a WITH inside a CTE or a subquery naming sharded table %s is not supported; give the statement one WITH " +
			"at its start", nil, nil
	}
	bodies := map[string]*ast.SelectStmt{}
	r := &cteReplacer{bodies: bodies, used: map[string]bool{}}
	var named []*ast.SelectField
	var asNames []ast.CIStr
	for _, c := range w.CTEs {
		q := c.Query.Query.(*ast.SelectStmt)
		for i, name := range c.ColNameList {
			f := q.Fields.Fields[i]
			named, asNames = append(named, f), append(asNames, f.AsName)
			f.AsName = name
		}
		r.replace(q)
		bodies[c.Name.L] = q
	}
	sel.With = nil
	r.replace(sel)
	undo := func() {
		sel.With = w
		for i := len(r.done) - 1; i >= 0; i-- {
			d := r.done[i]
			d.ts.Source, d.ts.AsName = d.tn, d.as
		}
		for i, f := range named {
			f.AsName = asNames[i]
		}
	}
	if r.err != nil {
		undo()
		return "", nil, r.err
	}
	return "", undo, nil
}

// withFinder finds a WITH below the statement's own.
type withFinder struct{ nested bool }

func (v *withFinder) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.SelectStmt:
		if x.With != nil {
			v.nested = true
		}
	case *ast.SetOprStmt:
		if x.With != nil {
			v.nested = true
		}
	case *ast.SetOprSelectList:
		if x.With != nil {
			v.nested = true
		}
	}
	return n, v.nested
}

func (v *withFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// cteReplacer replaces each unqualified table name that names a CTE of
// bodies with a derived table of the CTE's SELECT: the first reference
// takes the SELECT itself, the others a copy.
type cteReplacer struct {
	bodies map[string]*ast.SelectStmt
	used   map[string]bool
	done   []cteRef
	err    error
}

// cteRef is one reference replaced: its TableSource and what it was.
type cteRef struct {
	ts *ast.TableSource
	tn *ast.TableName
	as ast.CIStr
}

func (r *cteReplacer) replace(n ast.Node) {
	if len(r.bodies) > 0 {
		n.Accept(r)
	}
}

func (r *cteReplacer) Enter(n ast.Node) (ast.Node, bool) {
	ts, ok := n.(*ast.TableSource)
	if !ok || r.err != nil {
		return n, r.err != nil
	}
	tn, ok := ts.Source.(*ast.TableName)
	if !ok || tn.Schema.L != "" {
		return n, false
	}
	body := r.bodies[tn.Name.L]
	if body == nil {
		return n, false
	}
	if r.used[tn.Name.L] {
		c, err := cloneSelect(body)
		if err != nil {
			r.err = err
			return n, true
		}
		body = c
	}
	r.used[tn.Name.L] = true
	r.done = append(r.done, cteRef{ts: ts, tn: tn, as: ts.AsName})
	if ts.AsName.L == "" {
		ts.AsName = tn.Name
	}
	ts.Source = body
	// The body's own references were replaced already.
	return n, true
}

func (r *cteReplacer) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// cloneSelect copies sel by writing it out and reading it again; its ?
// keep their places among the statement's parameters.
func cloneSelect(sel *ast.SelectStmt) (*ast.SelectStmt, error) {
	text, err := restoreEscaped(sel)
	if err != nil {
		return nil, errorf("cannot rewrite the CTE: %v", err)
	}
	stmts, _, err := parser.New().ParseSQL(text)
	if err != nil || len(stmts) != 1 {
		return nil, errorf("cannot rewrite the CTE: %v", err)
	}
	c, ok := stmts[0].(*ast.SelectStmt)
	if !ok {
		return nil, errorf("cannot rewrite the CTE: %T", stmts[0])
	}
	from, to := &paramCollector{}, &paramCollector{}
	sel.Accept(from)
	c.Accept(to)
	if len(from.params) != len(to.params) {
		return nil, errorf("cannot rewrite the CTE: its parameters moved")
	}
	for i, pm := range to.params {
		pm.Order = from.params[i].Order
	}
	return c, nil
}
