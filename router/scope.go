package router

import (
	"fmt"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// Co-location of a statement naming several sharded tables, or a sharded
// table inside a subquery.
//
// Each SELECT (and the UPDATE or DELETE itself) is a scope whose FROM has
// sources: tables and derived tables. A column names a source: by its
// qualifier, or, unqualified, by the Columns snapshot (the one source of
// the innermost scope that owns the name; several owners or a source whose
// columns are unknown leave it unresolved, with one exception kept from
// before Columns: a shard key's name, when the statement names no unsharded
// or global table).
//
// Equalities between columns tie sources together (tie): those of WHERE
// and of ON (inner or outer join), the columns of JOIN ... USING and
// NATURAL JOIN, a derived table's output column and the column it
// selects, x IN (SELECT y ...), and the equalities of any subquery's WHERE
// (correlation). Every sharded table must have its key in one tie class:
// then each sub-table index holds every row a row of the statement can
// meet, and running the statement on each index and concatenating is
// exact.
//
// Equalities that hold in every row the statement produces (val) are the
// subset from WHERE conjuncts, inner-join ON (when the scope has no outer
// join), positive IN and EXISTS, derived tables of such scopes; with the
// constants of such conjuncts they fix the key: w_id = 1 AND c_w_id = w_id
// puts both tables on sub(1).
//
// A derived table or an uncorrelated IN subquery that holds sharded rows
// must keep each row's sub-table: no LIMIT, no window function, and
// aggregation only grouped by a column of the key class.

// source is one table of a FROM.
type source struct {
	sc      *scope
	ref     *tableRef // a table; nil: a derived table (or a CTE)
	sub     *scope    // a derived table's SELECT
	name    string    // alias or table name, lower case
	db      string    // a table without alias: its database
	aliased bool
	// out: a derived table's output columns (known false: not all named).
	out   map[string]bool
	known bool
	node  ast.ResultSetNode // its TableSource (or TableName) in the FROM
}

type scope struct {
	parent *scope
	sel    *ast.SelectStmt // nil: the UPDATE or DELETE
	srcs   []*source
	kids   []*scope
	outer  bool      // the FROM has an outer join
	value  bool      // its conjuncts hold for every row the statement produces
	check  bool      // must keep each row's sub-table (derived, IN)
	corr   []colNode // its columns tied to an outer scope's by its conjuncts
	direct bool      // the statement's own WHERE scope (condOf reads it)
	// coalesced: the columns of JOIN ... USING and NATURAL JOIN, which an
	// unqualified name names without ambiguity.
	coalesced map[string]colNode
	done      map[ast.Node]bool
}

type colNode struct {
	src  *source
	name string
}

type unionFind map[colNode]colNode

func (u unionFind) find(n colNode) colNode {
	for {
		p, ok := u[n]
		if !ok || p == n {
			return n
		}
		if gp, ok := u[p]; ok {
			u[n] = gp
		}
		n = p
	}
}

func (u unionFind) union(a, b colNode) {
	ra, rb := u.find(a), u.find(b)
	if ra != rb {
		u[ra] = rb
	}
}

// constEq is column = constant (or IN a list), from a conjunct that holds
// for every row.
type constEq struct {
	node colNode
	col  *ast.ColumnName
	vals []operand
	top  bool // a conjunct of the statement's own WHERE
}

type analysis struct {
	b      *builder
	cols   *Columns
	top    *scope
	tie    unionFind
	val    unionFind
	consts []constEq
	srcOf  map[*tableRef]*source
	byNode map[ast.ResultSetNode]*source
	all    []*source
	checks []*scope
	plain  bool // no unsharded or global table: the key-name fallback applies
}

// analyze builds the scopes of an UPDATE, DELETE or SELECT.
func (b *builder) analyze(stmt ast.StmtNode) *analysis {
	a := &analysis{b: b, cols: b.cols, tie: unionFind{}, val: unionFind{}, srcOf: map[*tableRef]*source{}, byNode: map[ast.ResultSetNode]*source{},
		plain: len(b.plan.unsharded) == 0 && !b.globals}
	switch st := stmt.(type) {
	case *ast.SelectStmt:
		a.top = a.selectScope(st, nil, true, false)
	case *ast.UpdateStmt:
		a.top = a.dmlScope(st.TableRefs, st.Where, func(v ast.Visitor) {
			for _, as := range st.List {
				as.Expr.Accept(v)
			}
			if st.Order != nil {
				st.Order.Accept(v)
			}
		})
	case *ast.DeleteStmt:
		a.top = a.dmlScope(st.TableRefs, st.Where, func(v ast.Visitor) {
			if st.Order != nil {
				st.Order.Accept(v)
			}
		})
	default:
		return nil
	}
	return a
}

func (a *analysis) newScope(parent *scope, sel *ast.SelectStmt, value, check bool) *scope {
	sc := &scope{parent: parent, sel: sel, value: value, check: check, done: map[ast.Node]bool{}}
	if parent != nil {
		parent.kids = append(parent.kids, sc)
	}
	if check {
		a.checks = append(a.checks, sc)
	}
	return sc
}

func (a *analysis) dmlScope(from *ast.TableRefsClause, where ast.ExprNode, rest func(ast.Visitor)) *scope {
	sc := a.newScope(nil, nil, true, false)
	sc.direct = true
	var j ast.ResultSetNode
	if from != nil {
		j = from.TableRefs
	}
	a.fill(sc, j, where)
	v := &subqueryFinder{a: a, sc: sc}
	rest(v)
	return sc
}

func (a *analysis) selectScope(sel *ast.SelectStmt, parent *scope, value, check bool) *scope {
	sc := a.newScope(parent, sel, value, check)
	sc.direct = parent == nil && !check
	var j ast.ResultSetNode
	if sel.From != nil {
		j = sel.From.TableRefs
	}
	a.fill(sc, j, sel.Where)
	v := &subqueryFinder{a: a, sc: sc}
	if sel.Fields != nil {
		sel.Fields.Accept(v)
	}
	for _, n := range []ast.Node{sel.GroupBy, sel.Having, sel.OrderBy} {
		if n != nil && !isNilNode(n) {
			n.Accept(v)
		}
	}
	return sc
}

func isNilNode(n ast.Node) bool {
	switch x := n.(type) {
	case *ast.GroupByClause:
		return x == nil
	case *ast.HavingClause:
		return x == nil
	case *ast.OrderByClause:
		return x == nil
	}
	return false
}

// fill reads a scope's FROM and WHERE.
func (a *analysis) fill(sc *scope, from ast.ResultSetNode, where ast.ExprNode) {
	var derived []*source
	var joins []*ast.Join
	add := func(n ast.ResultSetNode, src *source) {
		src.node = n
		a.byNode[n] = src
		a.all = append(a.all, src)
		sc.srcs = append(sc.srcs, src)
	}
	var walk func(n ast.ResultSetNode)
	walk = func(n ast.ResultSetNode) {
		switch x := n.(type) {
		case *ast.Join:
			walk(x.Left)
			if x.Right != nil {
				walk(x.Right)
			}
			if x.Tp == ast.LeftJoin || x.Tp == ast.RightJoin {
				sc.outer = true
			}
			joins = append(joins, x)
		case *ast.TableSource:
			switch s := x.Source.(type) {
			case *ast.TableName:
				src := &source{sc: sc, name: s.Name.L, db: s.Schema.L, aliased: x.AsName.L != ""}
				if src.aliased {
					src.name = x.AsName.L
				}
				src.ref = a.b.refOf(s)
				if src.db == "" {
					src.db = a.b.db
				}
				if src.ref != nil {
					a.srcOf[src.ref] = src
				}
				add(x, src)
			case *ast.SelectStmt:
				src := &source{sc: sc, name: x.AsName.L, aliased: true}
				add(x, src)
				derived = append(derived, src)
				src.sub = &scope{} // placeholder until the FROM is read
				src.sub.sel = s
			case *ast.Join:
				walk(s)
			default:
				// UNION in FROM: unknown columns, its tables unplaced.
				add(x, &source{sc: sc, name: x.AsName.L, aliased: true})
			}
		case *ast.TableName:
			src := &source{sc: sc, name: x.Name.L, db: x.Schema.L, ref: a.b.refOf(x)}
			if src.db == "" {
				src.db = a.b.db
			}
			if src.ref != nil {
				a.srcOf[src.ref] = src
			}
			add(x, src)
		}
	}
	if from != nil {
		walk(from)
	}
	value := sc.value && !sc.outer
	for _, d := range derived {
		sel := d.sub.sel
		d.sub = a.selectScope(sel, nil, value, true)
		d.sub.parent = nil
		sc.kids = append(sc.kids, d.sub)
		a.derivedColumns(d)
	}
	for _, j := range joins {
		if j.On != nil {
			for _, e := range conjuncts(j.On.Expr) {
				a.conjunct(sc, e, value, false)
			}
			j.On.Expr.Accept(&subqueryFinder{a: a, sc: sc})
		}
		if j.Right == nil {
			continue
		}
		var names []string
		for _, c := range j.Using {
			names = append(names, c.Name.L)
		}
		if j.NaturalJoin {
			names = a.common(j.Left, j.Right)
		}
		for _, n := range names {
			l, lok := a.owner(j.Left, n, true)
			r, rok := a.owner(j.Right, n, true)
			if lok && rok {
				a.tie.union(l, r)
				if value {
					a.val.union(l, r)
				}
				if sc.coalesced == nil {
					sc.coalesced = map[string]colNode{}
				}
				if j.Tp == ast.RightJoin {
					sc.coalesced[n] = r
				} else {
					sc.coalesced[n] = l
				}
			}
		}
	}
	for _, e := range conjuncts(where) {
		a.conjunct(sc, e, sc.value, sc.direct)
	}
	if where != nil {
		where.Accept(&subqueryFinder{a: a, sc: sc})
	}
}

// refOf is the tableRef collected for a table name (nil: a CTE).
func (b *builder) refOf(tn *ast.TableName) *tableRef {
	for _, r := range b.refs {
		if r.tn == tn {
			return r
		}
	}
	return nil
}

// derivedColumns ties a derived table's output columns to the columns
// they select.
func (a *analysis) derivedColumns(d *source) {
	sel := d.sub.sel
	d.out, d.known = map[string]bool{}, true
	if sel.Fields == nil {
		d.known = false
		return
	}
	for _, f := range sel.Fields.Fields {
		if f.WildCard != nil {
			d.known = false
			continue
		}
		name := f.AsName.L
		c, isCol := f.Expr.(*ast.ColumnNameExpr)
		if name == "" && isCol {
			name = c.Name.Name.L
		}
		if name == "" {
			d.known = false
			continue
		}
		d.out[name] = true
		if isCol {
			if n, ok := a.resolve(d.sub, c.Name); ok {
				a.tie.union(colNode{d, name}, n)
				a.val.union(colNode{d, name}, n)
			}
		}
	}
}

// owns says whether src has column name: yes, no, or unknown.
func (a *analysis) owns(src *source, name string) (yes, known bool) {
	if src.sub != nil || src.out != nil {
		if src.out[name] {
			return true, true
		}
		return false, src.known
	}
	if src.ref == nil {
		return false, false
	}
	tc := a.cols.table(src.db, src.ref.name)
	if tc == nil {
		return false, false
	}
	_, ok := tc.pos[name]
	return ok, true
}

// sources lists the sources of a join subtree.
func (a *analysis) sources(n ast.ResultSetNode, out []*source) []*source {
	switch x := n.(type) {
	case *ast.Join:
		out = a.sources(x.Left, out)
		if x.Right != nil {
			out = a.sources(x.Right, out)
		}
	case *ast.TableSource:
		if j, ok := x.Source.(*ast.Join); ok {
			return a.sources(j, out)
		}
		if s := a.byNode[x]; s != nil {
			out = append(out, s)
		}
	case *ast.TableName:
		if s := a.byNode[x]; s != nil {
			out = append(out, s)
		}
	}
	return out
}

// owner finds the one source of a join subtree holding column name (the
// coalesced one of a USING or NATURAL join below). single: a subtree of one
// source owns the name even when its columns are unknown (the SQL says it
// does).
func (a *analysis) owner(n ast.ResultSetNode, name string, single bool) (colNode, bool) {
	if ts, ok := n.(*ast.TableSource); ok {
		if j, ok := ts.Source.(*ast.Join); ok {
			n = j
		}
	}
	j, ok := n.(*ast.Join)
	if !ok {
		srcs := a.sources(n, nil)
		if len(srcs) != 1 {
			return colNode{}, false
		}
		yes, known := a.owns(srcs[0], name)
		if yes || single && !known {
			return colNode{srcs[0], name}, true
		}
		return colNode{}, false
	}
	if j.Right == nil {
		return a.owner(j.Left, name, single)
	}
	l, lok := a.owner(j.Left, name, false)
	r, rok := a.owner(j.Right, name, false)
	switch {
	case lok && rok:
		coalesced := j.NaturalJoin
		for _, c := range j.Using {
			coalesced = coalesced || c.Name.L == name
		}
		if !coalesced {
			return colNode{}, false
		}
		if j.Tp == ast.RightJoin {
			return r, true
		}
		return l, true
	case lok || rok:
		// The other side must be known not to own it.
		other := j.Right
		found := l
		if rok {
			other, found = j.Left, r
		}
		for _, s := range a.sources(other, nil) {
			if yes, known := a.owns(s, name); yes || !known {
				return colNode{}, false
			}
		}
		return found, true
	}
	return colNode{}, false
}

// common is the columns a NATURAL JOIN joins on (nil: unknown).
func (a *analysis) common(l, r ast.ResultSetNode) []string {
	names := func(n ast.ResultSetNode) (map[string]bool, bool) {
		out := map[string]bool{}
		for _, s := range a.sources(n, nil) {
			if s.sub != nil || s.out != nil {
				if !s.known {
					return nil, false
				}
				for c := range s.out {
					out[c] = true
				}
				continue
			}
			if s.ref == nil {
				return nil, false
			}
			tc := a.cols.table(s.db, s.ref.name)
			if tc == nil {
				return nil, false
			}
			for _, c := range tc.names {
				out[c] = true
			}
		}
		return out, true
	}
	ln, ok1 := names(l)
	rn, ok2 := names(r)
	if !ok1 || !ok2 {
		return nil
	}
	var out []string
	for c := range ln {
		if rn[c] {
			out = append(out, c)
		}
	}
	return out
}

// resolve finds the source a column names, from scope sc outwards.
func (a *analysis) resolve(sc *scope, c *ast.ColumnName) (colNode, bool) {
	name := c.Name.L
	if c.Table.L != "" {
		for s := sc; s != nil; s = s.parent {
			for _, src := range s.srcs {
				switch {
				case src.aliased && c.Table.L == src.name && c.Schema.L == "":
				case !src.aliased && c.Table.L == src.name && (c.Schema.L == "" || c.Schema.L == src.db):
				default:
					continue
				}
				return colNode{src, name}, true
			}
		}
		return colNode{}, false
	}
	for s := sc; s != nil; s = s.parent {
		if n, ok := s.coalesced[name]; ok {
			return n, true
		}
		var found *source
		n, unknown := 0, false
		for _, src := range s.srcs {
			yes, known := a.owns(src, name)
			if !known {
				unknown = true
			}
			if yes {
				n++
				if found == nil {
					found = src
				}
			}
		}
		switch {
		case unknown:
			// A table with unknown columns may own it: only a shard
			// key's name, in a statement of sharded tables only.
			if !a.plain {
				return colNode{}, false
			}
			for _, src := range s.srcs {
				if src.ref != nil && src.ref.rule != nil && !src.ref.rule.Global && src.ref.rule.Key == name {
					return colNode{src, name}, true
				}
			}
			if n > 0 {
				return colNode{}, false
			}
		case n == 1:
			return colNode{found, name}, true
		case n > 1:
			return colNode{}, false // ambiguous
		}
	}
	return colNode{}, false
}

// keyOf is the sharded table whose key c names in the statement's own
// scope, or nil.
func (a *analysis) keyOf(c *ast.ColumnName) *tableRef {
	n, ok := a.resolve(a.top, c)
	if !ok || n.src.ref == nil || n.src.ref.rule == nil || n.src.ref.rule.Global || n.name != n.src.ref.rule.Key {
		return nil
	}
	return n.src.ref
}

// conjunct reads one conjunct of scope sc; value: it holds for every row
// the statement produces; top: of the statement's own WHERE.
func (a *analysis) conjunct(sc *scope, e ast.ExprNode, value, top bool) {
	switch x := e.(type) {
	case *ast.ParenthesesExpr:
		a.conjunct(sc, x.Expr, value, top)
	case *ast.BinaryOperationExpr:
		if x.Op != opcode.EQ {
			return
		}
		l, lok := x.L.(*ast.ColumnNameExpr)
		r, rok := x.R.(*ast.ColumnNameExpr)
		switch {
		case lok && rok:
			a.equal(sc, l.Name, r.Name, value)
		case lok:
			a.constant(sc, l.Name, value, top, x.R)
		case rok:
			a.constant(sc, r.Name, value, top, x.L)
		}
	case *ast.PatternInExpr:
		c, ok := x.Expr.(*ast.ColumnNameExpr)
		if x.Not || !ok {
			return
		}
		if x.Sel != nil {
			sq, ok := x.Sel.(*ast.SubqueryExpr)
			if !ok {
				return
			}
			sel, ok := sq.Query.(*ast.SelectStmt)
			if !ok {
				return
			}
			sc.done[sq] = true
			child := a.selectScope(sel, sc, value, true)
			if sel.Fields != nil && len(sel.Fields.Fields) == 1 {
				if f, ok := sel.Fields.Fields[0].Expr.(*ast.ColumnNameExpr); ok {
					if in, ok := a.resolve(child, f.Name); ok {
						if out, ok := a.resolve(sc, c.Name); ok {
							a.tie.union(in, out)
							if value {
								a.val.union(in, out)
							}
						}
					}
				}
			}
			return
		}
		a.constant(sc, c.Name, value, top, x.List...)
	case *ast.ExistsSubqueryExpr:
		sq, ok := x.Sel.(*ast.SubqueryExpr)
		if !ok {
			return
		}
		sel, ok := sq.Query.(*ast.SelectStmt)
		if !ok {
			return
		}
		sc.done[sq] = true
		a.selectScope(sel, sc, value && !x.Not, false)
	}
}

func (a *analysis) equal(sc *scope, l, r *ast.ColumnName, value bool) {
	ln, lok := a.resolve(sc, l)
	rn, rok := a.resolve(sc, r)
	if !lok || !rok {
		return
	}
	a.tie.union(ln, rn)
	if value {
		a.val.union(ln, rn)
	}
	if ln.src.sc != sc {
		sc.corr = append(sc.corr, ln)
	}
	if rn.src.sc != sc {
		sc.corr = append(sc.corr, rn)
	}
}

func (a *analysis) constant(sc *scope, c *ast.ColumnName, value, top bool, vals ...ast.ExprNode) {
	if !value || len(vals) == 0 {
		return
	}
	n, ok := a.resolve(sc, c)
	if !ok {
		return
	}
	ce := constEq{node: n, col: c, top: top}
	for _, v := range vals {
		o, ok := operandOf(v)
		if !ok {
			return
		}
		ce.vals = append(ce.vals, o)
	}
	a.consts = append(a.consts, ce)
}

// subqueryFinder finds a scope's subqueries that no conjunct read: their
// equalities tie, none of their conjuncts holds for every row.
type subqueryFinder struct {
	a  *analysis
	sc *scope
}

func (v *subqueryFinder) Enter(n ast.Node) (ast.Node, bool) {
	if sq, ok := n.(*ast.SubqueryExpr); ok {
		if !v.sc.done[sq] {
			v.sc.done[sq] = true
			if sel, ok := sq.Query.(*ast.SelectStmt); ok {
				v.a.selectScope(sel, v.sc, false, false)
			}
		}
		return n, true
	}
	return n, false
}

func (v *subqueryFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// sharded lists the sharded tables of every scope.
func (a *analysis) sharded() []*source {
	var out []*source
	for _, s := range a.all {
		if s.ref != nil && s.ref.rule != nil && !s.ref.rule.Global {
			out = append(out, s)
		}
	}
	return out
}

func (s *source) key() colNode { return colNode{s, s.ref.rule.Key} }

func (s *source) label() string {
	if s.aliased {
		return s.name
	}
	return s.ref.name
}

// holdsSharded reports whether a scope or one below it reads a sharded
// table.
func holdsSharded(sc *scope) bool { return firstSharded(sc) != nil }

// firstSharded is the first sharded table of a scope or one below it (nil:
// none).
func firstSharded(sc *scope) *source {
	for _, s := range sc.srcs {
		if s.ref != nil && s.ref.rule != nil && !s.ref.rule.Global {
			return s
		}
	}
	for _, k := range sc.kids {
		if s := firstSharded(k); s != nil {
			return s
		}
	}
	return nil
}

// partitioned reports whether each row of the scope's FROM comes from one
// sub-table index: a sharded table, or a derived table whose rows do.
func partitioned(sc *scope) bool {
	for _, s := range sc.srcs {
		if s.ref != nil && s.ref.rule != nil && !s.ref.rule.Global {
			return true
		}
		if s.sub != nil && s.sub.sel != nil && partitioned(s.sub) {
			return true
		}
	}
	return false
}

// colocate checks that the sharded tables are co-located; nil when they
// are.
func (a *analysis) colocate() error {
	srcs := a.sharded()
	if len(srcs) == 0 {
		return nil
	}
	nested := false
	for _, s := range srcs {
		if s.sc != a.top {
			nested = true
		}
	}
	if nested && !partitioned(a.top) {
		for _, s := range srcs {
			if s.sc != a.top {
				return errorf("sharded table %s in a subquery is not supported", s.ref.rule.Table)
			}
		}
	}
	root := a.tie.find(srcs[0].key())
	for _, s := range srcs[1:] {
		if a.tie.find(s.key()) == root {
			continue
		}
		f := srcs[0]
		if s.sc == a.top && f.sc == a.top {
			return errorf("cross-shard join not supported: %s and %s are not joined on their shard keys (%s.%s = %s.%s)",
				f.ref.rule.Table, s.ref.rule.Table, f.label(), f.ref.rule.Key, s.label(), s.ref.rule.Key)
		}
		return errorf("cross-shard subquery not supported: sharded table %s in a subquery is not tied to %s by equalities on their shard keys (%s.%s = %s.%s)",
			s.ref.rule.Table, f.ref.rule.Table, s.label(), s.ref.rule.Key, f.label(), f.ref.rule.Key)
	}
	for _, sc := range a.checks {
		if !holdsSharded(sc) {
			continue
		}
		if why := a.keepsSubTable(sc, root); why != "" {
			return errorf("cross-shard subquery not supported: a subquery on sharded table %s %s", firstSharded(sc).ref.rule.Table, why)
		}
	}
	return nil
}

// keepsSubTable says why a derived table or IN subquery may mix rows of
// several sub-tables ("" when it does not).
func (a *analysis) keepsSubTable(sc *scope, root colNode) string {
	for _, n := range sc.corr {
		if a.tie.find(n) == root {
			return "" // it reads only the rows tied to an outer row
		}
	}
	sel := sc.sel
	if sel.Limit != nil {
		return "has LIMIT: each sub-table would apply it to its own rows"
	}
	agg := sel.GroupBy != nil || sel.Having != nil
	if sel.Fields != nil {
		v := &aggFinder{}
		for _, f := range sel.Fields.Fields {
			if f.Expr != nil {
				f.Expr.Accept(v)
			}
		}
		if v.found != "" {
			if len(v.found) > 6 && v.found[:6] == "window" {
				return fmt.Sprintf("uses %s over rows of every sub-table", v.found)
			}
			agg = true
		}
	}
	if !agg {
		return ""
	}
	if sel.GroupBy != nil {
		for _, it := range sel.GroupBy.Items {
			if c, ok := it.Expr.(*ast.ColumnNameExpr); ok {
				if n, ok := a.resolve(sc, c.Name); ok && a.tie.find(n) == root {
					return ""
				}
			}
		}
	}
	return "aggregates rows of several sub-tables: group it by the shard key"
}

// narrow returns the key conditions the constants fix beyond those condOf
// reads in the statement's own WHERE.
func (a *analysis) narrow() []*cond {
	keys := map[colNode]bool{}
	for _, s := range a.sharded() {
		keys[a.val.find(s.key())] = true
	}
	var out []*cond
	for _, ce := range a.consts {
		if ce.top && a.b.keyColumn(ce.col) != nil {
			continue // condOf has it
		}
		if keys[a.val.find(ce.node)] {
			out = append(out, &cond{op: condEq, vals: ce.vals})
		}
	}
	return out
}
