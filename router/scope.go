package router

import (
	"fmt"
	"slices"
	"strings"

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
// Each scope ties columns by its own equalities (scope.uf): its WHERE
// conjuncts, its ON conjuncts, the columns of JOIN ... USING and NATURAL
// JOIN. The statement's own scope and derived tables, whose rows are
// concatenated over the sub-tables, may tie by an outer join's ON (a row
// either matches on the key or is NULL-extended, on its own sub-table). A
// subquery expression (IN, EXISTS, scalar), evaluated once per outer row,
// must see every row it would see on one server: its sharded tables must be
// tied, by equalities that hold for each row it reads (WHERE, or ON without
// outer joins), to a column of an outer scope that is itself tied to that
// scope's shard key (correlation), or, for x IN (SELECT y ...), y = x when
// the subquery keeps each row's sub-table. Within each scope every sharded
// table (and each derived table holding sharded rows, by a column that
// selects its key) must be in one class.
//
// A derived table that holds sharded rows must keep each row's sub-table:
// no LIMIT, no window function, and aggregation only grouped by a column
// of its key class.
//
// Equalities that hold in every row the statement produces (val: the
// conjuncts of WHERE and inner-join ON of the scopes whose rows all
// contribute, positive IN and EXISTS, derived tables of such scopes), with
// the constants of such conjuncts, fix the key: w_id = 1 AND c_w_id = w_id
// puts both tables on sub(1).

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

// scope kinds
const (
	scopeTop     = iota // the statement itself
	scopeDerived        // a derived table
	scopeExpr           // a subquery expression: IN, EXISTS, scalar
)

type scope struct {
	kind   int
	uf     unionFind // its equalities (see the package comment above)
	parent *scope
	sel    *ast.SelectStmt // nil: the UPDATE or DELETE
	srcs   []*source
	kids   []*scope
	outer  bool // the FROM has an outer join
	value  bool // its conjuncts hold for every row the statement produces
	// out: a derived table's output columns and what they select.
	out map[string]colNode
	// in: x IN (SELECT y ...): y and x, tied when the subquery keeps
	// each row's sub-table.
	in [2]colNode
	// hasIn: in is set.
	hasIn bool
	// key: a node of its key class; keyed: it has one.
	key    colNode
	keyed  bool
	direct bool // the statement's own WHERE scope (condOf reads it)
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
	for _, n := range []colNode{a, b} {
		if _, ok := u[n]; !ok {
			u[n] = n
		}
	}
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
	val    unionFind
	consts []constEq
	srcOf  map[*tableRef]*source
	byNode map[ast.ResultSetNode]*source
	all    []*source
	scopes []*scope // children before parents
	plain  bool     // no unsharded or global table: the key-name fallback applies
	// same: the values that pin key classes of the statement's own scope
	// that no equality ties (ol_w_id = 1 AND s_w_id = 1): they must
	// place on one sub-table when the plan is bound.
	same []operand
}

// analyze builds the scopes of an UPDATE, DELETE or SELECT.
func (b *builder) analyze(stmt ast.StmtNode) *analysis {
	a := &analysis{b: b, cols: b.cols, val: unionFind{}, srcOf: map[*tableRef]*source{}, byNode: map[ast.ResultSetNode]*source{},
		plain: len(b.plan.unsharded) == 0 && !b.globals}
	switch st := stmt.(type) {
	case *ast.SelectStmt:
		a.top = a.selectScope(st, nil, true, scopeTop)
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

func (a *analysis) newScope(parent *scope, sel *ast.SelectStmt, value bool, kind int) *scope {
	sc := &scope{kind: kind, uf: unionFind{}, parent: parent, sel: sel, value: value, done: map[ast.Node]bool{}}
	if parent != nil {
		parent.kids = append(parent.kids, sc)
	}
	return sc
}

func (a *analysis) dmlScope(from *ast.TableRefsClause, where ast.ExprNode, rest func(ast.Visitor)) *scope {
	sc := a.newScope(nil, nil, true, scopeTop)
	sc.direct = true
	var j ast.ResultSetNode
	if from != nil {
		j = from.TableRefs
	}
	a.fill(sc, j, where)
	v := &subqueryFinder{a: a, sc: sc}
	rest(v)
	a.scopes = append(a.scopes, sc)
	return sc
}

func (a *analysis) selectScope(sel *ast.SelectStmt, parent *scope, value bool, kind int) *scope {
	sc := a.newScope(parent, sel, value, kind)
	sc.direct = kind == scopeTop
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
	a.scopes = append(a.scopes, sc)
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
		d.sub = a.selectScope(sel, nil, value, scopeDerived)
		sc.kids = append(sc.kids, d.sub)
		a.derivedColumns(d)
	}
	// A subquery expression ties by ON only without outer joins.
	tieOn := sc.kind != scopeExpr || !sc.outer
	for _, j := range joins {
		if j.On != nil {
			for _, e := range conjuncts(j.On.Expr) {
				a.conjunct(sc, e, value, false, tieOn)
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
				if tieOn {
					sc.uf.union(l, r)
				}
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
		a.conjunct(sc, e, sc.value, sc.direct, true)
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
	d.sub.out = map[string]colNode{}
	if sel.Fields == nil {
		d.known = false
		return
	}
	for _, f := range sel.Fields.Fields {
		if f.WildCard != nil {
			// * and t.*: the columns of the sources, when known.
			for _, src := range d.sub.srcs {
				w := f.WildCard
				switch {
				case w.Table.L == "":
				case src.aliased && w.Table.L == src.name && w.Schema.L == "":
				case !src.aliased && w.Table.L == src.name && (w.Schema.L == "" || w.Schema.L == src.db):
				default:
					continue
				}
				names, ok := a.columnsOf(src)
				if !ok {
					d.known = false
					continue
				}
				for _, name := range names {
					if d.out[name] {
						continue
					}
					d.out[name] = true
					n := colNode{src, name}
					if c, ok := d.sub.coalesced[name]; ok {
						n = c
					}
					d.sub.out[name] = n
					a.val.union(colNode{d, name}, n)
				}
			}
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
				if _, dup := d.sub.out[name]; !dup {
					d.sub.out[name] = n
				}
				a.val.union(colNode{d, name}, n)
			}
		}
	}
}

// columnsOf lists a source's columns (ok false: unknown).
func (a *analysis) columnsOf(src *source) ([]string, bool) {
	if src.sub != nil || src.out != nil {
		if !src.known {
			return nil, false
		}
		names := make([]string, 0, len(src.out))
		for n := range src.out {
			names = append(names, n)
		}
		slices.Sort(names)
		return names, true
	}
	if src.ref == nil {
		return nil, false
	}
	tc := a.cols.table(src.db, src.ref.name)
	if tc == nil {
		return nil, false
	}
	return tc.names, true
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
			var key *source
			for _, src := range s.srcs {
				if src.ref != nil && src.ref.rule != nil && !src.ref.rule.Global && src.ref.rule.Key == name {
					if key != nil {
						return colNode{}, false // the key of two tables
					}
					key = src
				}
			}
			if key != nil {
				return colNode{key, name}, true
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
// tie: its equalities tie the scope's columns.
func (a *analysis) conjunct(sc *scope, e ast.ExprNode, value, top, tie bool) {
	switch x := e.(type) {
	case *ast.ParenthesesExpr:
		a.conjunct(sc, x.Expr, value, top, tie)
	case *ast.BinaryOperationExpr:
		if x.Op != opcode.EQ {
			return
		}
		l, lok := x.L.(*ast.ColumnNameExpr)
		r, rok := x.R.(*ast.ColumnNameExpr)
		switch {
		case lok && rok:
			a.equal(sc, l.Name, r.Name, value, tie)
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
			child := a.selectScope(sel, sc, value, scopeExpr)
			if sel.Fields != nil && len(sel.Fields.Fields) == 1 {
				if f, ok := sel.Fields.Fields[0].Expr.(*ast.ColumnNameExpr); ok {
					if in, ok := a.resolve(child, f.Name); ok {
						if out, ok := a.resolve(sc, c.Name); ok {
							child.in, child.hasIn = [2]colNode{in, out}, true
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
		a.selectScope(sel, sc, value && !x.Not, scopeExpr)
	}
}

func (a *analysis) equal(sc *scope, l, r *ast.ColumnName, value, tie bool) {
	ln, lok := a.resolve(sc, l)
	rn, rok := a.resolve(sc, r)
	if !lok || !rok {
		return
	}
	if tie {
		sc.uf.union(ln, rn)
	}
	if value {
		a.val.union(ln, rn)
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
				v.a.selectScope(sel, v.sc, false, scopeExpr)
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
// are. Scopes are checked children first.
func (a *analysis) colocate() error {
	srcs := a.sharded()
	if len(srcs) == 0 {
		return nil
	}
	if !partitioned(a.top) {
		for _, s := range srcs {
			if s.sc != a.top {
				return errorf("sharded table %s in a subquery is not supported", s.ref.rule.Table)
			}
		}
	}
	for _, sc := range a.scopes {
		if err := a.colocateScope(sc); err != nil {
			return err
		}
	}
	for _, sc := range a.scopes {
		if err := a.anchor(sc); err != nil {
			return err
		}
	}
	return nil
}

// keyNodes are a scope's sources holding sharded rows, each with the nodes
// that stand for its key (a derived table's: its columns that select a
// column of its key class; none when it shows none).
func (a *analysis) keyNodes(sc *scope) (srcs []*source, keys [][]colNode) {
	for _, s := range sc.srcs {
		switch {
		case s.ref != nil && s.ref.rule != nil && !s.ref.rule.Global:
			srcs, keys = append(srcs, s), append(keys, []colNode{s.key()})
		case s.sub != nil && s.sub.sel != nil && holdsSharded(s.sub) && partitioned(s.sub):
			var ks []colNode
			if d := s.sub; d.keyed {
				for name, n := range d.out {
					if d.uf.find(n) == d.uf.find(d.key) {
						ks = append(ks, colNode{s, name})
					}
				}
				slices.SortFunc(ks, func(x, y colNode) int { return strings.Compare(x.name, y.name) })
			}
			srcs, keys = append(srcs, s), append(keys, ks)
		}
	}
	return srcs, keys
}

func (a *analysis) colocateScope(sc *scope) error {
	if sc.kind == scopeExpr && sc.hasIn && a.keepsSubTable(sc) == "" {
		sc.uf.union(sc.in[0], sc.in[1])
	}
	srcs, keys := a.keyNodes(sc)
	if len(srcs) == 0 {
		return nil
	}
	// The class: the first source's key.
	first := -1
	for i := range srcs {
		if len(keys[i]) > 0 {
			first = i
			break
		}
	}
	if first < 0 {
		if len(srcs) > 1 || sc.kind == scopeExpr {
			return errorf("cross-shard subquery not supported: a derived table on sharded table %s does not select its shard key",
				firstSharded(srcs[0].sub).ref.rule.Table)
		}
		return nil
	}
	root := sc.uf.find(keys[first][0])
	sc.key, sc.keyed = keys[first][0], true
	for i, s := range srcs {
		if len(keys[i]) == 0 {
			return errorf("cross-shard join not supported: a derived table on sharded table %s does not select its shard key, "+
				"which the join with %s needs", firstSharded(s.sub).ref.rule.Table, srcs[first].tableName())
		}
		if !slices.ContainsFunc(keys[i], func(n colNode) bool { return sc.uf.find(n) == root }) {
			if p, ok := a.pin(sc, root); ok {
				if q, ok := a.pin(sc, sc.uf.find(keys[i][0])); ok {
					a.same = append(a.same, p, q)
					continue
				}
			}
			err := a.notJoined(srcs[first], s)
			if sc.kind == scopeExpr && sc.outer {
				err.Msg += " (inside a subquery with an outer join only WHERE equalities tie tables)"
			}
			return err
		}
	}
	if sc.kind == scopeDerived {
		if why := a.keepsSubTable(sc); why != "" {
			return errorf("cross-shard subquery not supported: a derived table on sharded table %s %s", firstSharded(sc).ref.rule.Table, why)
		}
	}
	return nil
}

// pin returns the one value a conjunct of the statement's own WHERE (or
// an inner join's ON) gives key class root of the statement's scope sc
// (w_id = ?): tables whose keys are pinned so are together when their
// values place on one sub-table, which Bind checks.
func (a *analysis) pin(sc *scope, root colNode) (operand, bool) {
	if sc.kind != scopeTop {
		return operand{}, false
	}
	for _, ce := range a.consts {
		if ce.node.src.sc == sc && len(ce.vals) == 1 && sc.uf.find(ce.node) == root {
			return ce.vals[0], true
		}
	}
	return operand{}, false
}

// anchor checks that a subquery expression's sharded tables are tied to
// an outer scope's key.
func (a *analysis) anchor(sc *scope) error {
	if sc.kind != scopeExpr || !sc.keyed {
		return nil
	}
	srcs, keys := a.keyNodes(sc)
	first := slices.IndexFunc(keys, func(k []colNode) bool { return len(k) > 0 })
	if !a.anchored(sc, sc.uf.find(sc.key)) {
		if sc.hasIn {
			if why := a.keepsSubTable(sc); why != "" {
				return errorf("cross-shard subquery not supported: an IN subquery on sharded table %s %s", srcs[first].tableName(), why)
			}
		}
		s := srcs[first]
		what := "sharded table " + s.name
		if s.ref != nil {
			what = "sharded table " + s.ref.rule.Table
		} else if f := firstSharded(s.sub); f != nil {
			what = "sharded table " + f.ref.rule.Table
		}
		return errorf("cross-shard subquery not supported: %s in a subquery is not tied to the outer statement's shard key "+
			"(by an equality in the subquery's WHERE, %s = outer key, or by key IN (SELECT %s ...))", what, keyName(keys[first][0]), keyName(keys[first][0]))
	}
	return nil
}

func keyName(n colNode) string { return n.src.label() + "." + n.name }

func (s *source) tableName() string {
	if s.ref != nil {
		return s.ref.rule.Table
	}
	if fs := firstSharded(s.sub); fs != nil {
		return fs.ref.rule.Table
	}
	return s.name
}

func (a *analysis) notJoined(f, s *source) *Error {
	name := func(x *source) (string, string) {
		if x.ref != nil {
			return x.ref.rule.Table, x.ref.rule.Key
		}
		t := x.name
		if fs := firstSharded(x.sub); fs != nil {
			t = fs.ref.rule.Table
		}
		return t, "?"
	}
	ft, fk := name(f)
	st, sk := name(s)
	return errorf("cross-shard join not supported: %s and %s are not joined on their shard keys (%s.%s = %s.%s)",
		ft, st, f.label(), fk, s.label(), sk)
}

// anchored reports whether class root of scope sc holds a column of an
// outer scope that is tied to that scope's key.
func (a *analysis) anchored(sc *scope, root colNode) bool {
	for n := range sc.uf {
		if n.src.sc == sc || sc.uf.find(n) != root {
			continue
		}
		if a.tiedToKey(n.src.sc, n) {
			return true
		}
	}
	return false
}

// tiedToKey reports whether column n of scope sc is in its key class, or
// in a class of sc anchored further out.
func (a *analysis) tiedToKey(sc *scope, n colNode) bool {
	if sc.keyed && sc.uf.find(n) == sc.uf.find(sc.key) {
		return true
	}
	return sc.kind == scopeExpr && a.anchored(sc, sc.uf.find(n))
}

// keepsSubTable says why a derived table or IN subquery may mix rows of
// several sub-tables ("" when it does not).
func (a *analysis) keepsSubTable(sc *scope) string {
	sel := sc.sel
	if sel.Limit != nil {
		return "has LIMIT: each sub-table would apply it to its own rows"
	}
	agg := sel.GroupBy != nil || sel.Having != nil || hasAggFields(sel)
	for _, w := range windowFuncs(sel) {
		// Exact when each partition is on one sub-table (window.go).
		if pb := partitionOf(sel, &w.Spec); pb == nil || !a.byKey(sc, pb.Items) {
			return fmt.Sprintf("uses window function %s() over rows of every sub-table: partition it by the shard key",
				strings.ToUpper(w.Name))
		}
	}
	if !agg {
		return ""
	}
	if sel.GroupBy != nil && a.byKey(sc, sel.GroupBy.Items) {
		return ""
	}
	return "aggregates rows of several sub-tables: group it by the shard key"
}

// byKey reports whether items (a GROUP BY or PARTITION BY of scope sc)
// have a column tied to the shard key of sc's sharded tables.
func (a *analysis) byKey(sc *scope, items []*ast.ByItem) bool {
	srcs, keys := a.keyNodes(sc)
	if len(srcs) == 0 {
		return false
	}
	for _, it := range items {
		c, ok := stripParens(it.Expr).(*ast.ColumnNameExpr)
		if !ok {
			continue
		}
		n, ok := a.resolve(sc, c.Name)
		if !ok {
			continue
		}
		for _, ks := range keys {
			for _, k := range ks {
				if sc.uf.find(n) == sc.uf.find(k) {
					return true
				}
			}
		}
	}
	return false
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
