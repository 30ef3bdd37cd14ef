package router

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	driver "github.com/pingcap/tidb/pkg/parser/test_driver"
)

// Joins across shards: a SELECT of two tables whose rows do not live
// together (differently sharded, on other nodes, a sharded table with a
// table of the default node, tables of one rule not joined on their keys)
// is joined by the proxy (package proxy/join), as a nested loop with
// batched lookups:
//
//   - the outer side (the left table of a LEFT JOIN; else the first, or
//     the second when ORDER BY names only the second) runs
//     SELECT <its items>, <its join columns> FROM a WHERE <a's conditions>
//     [ORDER BY ...], planned as any statement on a (merged over its
//     sub-tables when it needs it);
//   - its rows are read in batches; for each batch the inner side runs
//     SELECT <its items>, <its join columns> FROM b WHERE <b's conditions>
//     AND b.col IN (<the batch's values>), routed by those values (to the
//     sub-tables that hold them when col is b's shard key);
//   - the proxy matches the rows on every equality between the tables
//     (numbers by value, strings by their collation's weights, computed by
//     the server: each join column comes with WEIGHT_STRING(RTRIM(col)))
//     and sends the joined rows in the outer side's order, applying the
//     LIMIT.
//
// Each select-list item, condition and ORDER BY key must belong to one
// table, so that one server computes it; what does not is refused with
// 1235 and a way around it.

// JoinPlan is the plan of a join the proxy runs. Immutable.
type JoinPlan struct {
	// Left: LEFT JOIN; an outer row without a match gives one row whose
	// inner items are those of the inner side's NULL row.
	Left bool
	// Sides: 0 the outer side, 1 the inner side.
	Sides [2]JoinSide
	// Items are the client's columns in order: which side computes each.
	Items []JoinItem
	// Keys is the number of equalities the rows are matched on: each
	// side's result ends with 2*Keys hidden columns (the value and its
	// weight string, for each).
	Keys int
	// Sort: the ORDER BY the proxy sorts the joined rows by (keys of both
	// tables, or of a LEFT JOIN's right table); nil: the outer side's
	// order is the answer's.
	Sort []JoinSort
	// Offset and Count are the client's LIMIT (nil: none).
	Offset, Count *Expr
	// Name is "a JOIN b" (or LEFT JOIN), for messages.
	Name  string
	probe template
}

// JoinSide is one table of a join.
type JoinSide struct {
	Table string // the table as named in the statement, for messages
	// Items is how many of the client's items this side computes (a
	// wildcard counts one); Wild is the wildcard's index among them (-1:
	// none), whose columns are all those the side returns beyond the
	// others.
	Items, Wild int
	// Sorts is how many keys of the proxy's sort this side computes;
	// Filters how many WHERE conditions of a LEFT JOIN's right table it
	// gives the truth of (1 or 0, its last columns), which the joined
	// rows must pass.
	Sorts, Filters int
	sel            template // the side's statement (the inner side's ends where the lookup goes)
	null           template // inner: its items over no row (the NULL row of a LEFT JOIN), and its columns
	lookup         template // inner: the expression looked up
	where          bool     // inner: sel has a WHERE already
}

// JoinSort is one key of a sort in the proxy: the side computing it and
// its place among that side's sort keys (after its join values, a value
// and its weight string each).
type JoinSort struct {
	Side, Col int
	Desc      bool
}

// JoinItem is one client column: the side computing it and its place
// among that side's items.
type JoinItem struct {
	Side, Pos int
}

// Join returns the plan's join (nil: the plan is not a join the proxy
// runs).
func (p *Plan) Join() *JoinPlan { return p.join }

// SideSQL renders the outer side's statement (0) or the inner side's NULL
// row statement (1) for the literals lits (TextLiterals).
func (j *JoinPlan) SideSQL(side int, lits []Literal) string {
	var sb strings.Builder
	if side == 0 {
		j.Sides[0].sel.render(&sb, nil, lits, "")
	} else {
		j.Sides[1].null.render(&sb, nil, lits, "")
	}
	return sb.String()
}

// LookupSQL renders the inner side's statement looking up vals (SQL
// literals).
func (j *JoinPlan) LookupSQL(lits []Literal, vals []string) string {
	in := &j.Sides[1]
	var sb strings.Builder
	in.sel.render(&sb, nil, lits, "")
	if in.where {
		sb.WriteString(" AND ")
	} else {
		sb.WriteString(" WHERE ")
	}
	in.lookup.render(&sb, nil, lits, "")
	sb.WriteString(" IN (")
	for i, v := range vals {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(v)
	}
	sb.WriteByte(')')
	return sb.String()
}

// Limit binds the join's LIMIT: offset and count (-1: none).
func (j *JoinPlan) Limit(lits []Literal) (offset, count int64, err error) {
	if j.Count == nil {
		return 0, -1, nil
	}
	rt := &Routing{Args: make([]any, len(lits))}
	for i := range lits {
		rt.Args[i] = LitValue(lits[i])
	}
	if count, err = rt.limitArg(j.Count); err != nil {
		return 0, 0, err
	}
	if j.Offset != nil {
		if offset, err = rt.limitArg(j.Offset); err != nil {
			return 0, 0, err
		}
	}
	return offset, count, nil
}

// TextLiterals returns lits with every bound parameter (a prepared
// statement's ?) written as an SQL literal: the join runs its statements
// as text.
func TextLiterals(lits []Literal) []Literal {
	out := slices.Clone(lits)
	for i := range out {
		l := &out[i]
		if l.Kind != LitParam {
			continue
		}
		switch v := l.Bound.(type) {
		case nil:
			l.Kind, l.Text = LitString, "NULL"
		case int64:
			l.Kind, l.Text = LitInt, strconv.FormatInt(v, 10)
		case uint64:
			l.Kind, l.Text = LitInt, strconv.FormatUint(v, 10)
		case float64:
			l.Kind, l.Text = LitNumber, strconv.FormatFloat(v, 'e', -1, 64)
		case string:
			l.Kind, l.Text = LitString, QuoteString(v)
		case []byte:
			l.Kind, l.Text = LitString, QuoteString(string(v))
		default:
			l.Kind, l.Text = LitString, QuoteString(fmt.Sprint(v))
		}
	}
	return out
}

// QuoteString writes s as an SQL string literal.
func QuoteString(s string) string {
	var sb strings.Builder
	sb.Grow(len(s) + 2)
	sb.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'':
			sb.WriteString("''")
		case '\\':
			sb.WriteString(`\\`)
		case 0:
			sb.WriteString(`\0`)
		default:
			sb.WriteByte(c)
		}
	}
	sb.WriteByte('\'')
	return sb.String()
}

// PlanSide plans one side's statement of a join (rendered, literals
// inline); not cached.
func (s *Schema) PlanSide(p *Parser, sql, db string) (*Plan, error) {
	return s.buildWith(s.state.Load().cols, p, sql, db, KindSelect, false, 0)
}

// errNoJoin: the statement is not a join of two tables (the caller keeps
// its own error).
var errNoJoin = errors.New("not a join of two tables")

// joinOr plans the statement as a join the proxy runs, when it is a
// SELECT of two tables; else it returns err (why it is not co-located).
func (b *builder) joinOr(params bool, err error) (*Plan, error) {
	pl, jerr := b.planJoin(params)
	if errors.Is(jerr, errNoJoin) {
		return nil, err
	}
	var re, orig *Error
	if errors.As(jerr, &re) && errors.As(err, &orig) {
		// Both reasons: what the proxy's join lacks, and why the tables
		// do not run as one statement.
		re.Msg += "; and it cannot run as one statement: " + strings.TrimPrefix(orig.Msg, "keyshard: ")
	}
	return pl, jerr
}

func joinRefusal(name, format string, args ...any) error {
	return errorf("cross-shard join %s: %s", name, fmt.Sprintf(format, args...))
}

// joinSide is a side while planning.
type joinSide struct {
	ts    *ast.TableSource
	tn    *ast.TableName
	name  string // alias or table name, lower case
	db    string
	alias bool
	ref   *tableRef
	items []*ast.SelectField
	conds []ast.ExprNode
	keys  []ast.ExprNode
	sorts []ast.ExprNode // ORDER BY keys of this table, when the proxy sorts
	// filters: WHERE conditions on a LEFT JOIN's right table, checked on
	// the joined rows
	filters []ast.ExprNode
	wild    int
}

// planJoin parses the statement again (the caller's copy may be half
// rewritten) and plans it as a join of two tables.
func (b *builder) planJoin(params bool) (*Plan, error) {
	if b.p == nil || b.text == "" {
		return nil, errNoJoin
	}
	stmts, err := b.p.Parse(b.text)
	if err != nil || len(stmts) != 1 {
		return nil, errNoJoin
	}
	sel, ok := stmts[0].(*ast.SelectStmt)
	if !ok || sel.From == nil || sel.From.TableRefs == nil {
		return nil, errNoJoin
	}
	if params {
		numberParams(sel)
	}
	j := sel.From.TableRefs
	for j.Right == nil {
		inner, ok := j.Left.(*ast.Join)
		if !ok {
			return nil, errNoJoin
		}
		j = inner
	}
	if n := countSources(j); n != 2 {
		if n > 2 && !hasSubquery(sel) {
			return nil, errorf("cross-shard join of %d tables is not supported (two are, in the proxy); join the others in the application", n)
		}
		return nil, errNoJoin
	}
	j.Left = unwrapJoin(j.Left)
	j.Right = unwrapJoin(j.Right)
	var sides [2]*joinSide
	for i, n := range []ast.ResultSetNode{j.Left, j.Right} {
		ts, ok := n.(*ast.TableSource)
		if !ok {
			return nil, errNoJoin
		}
		tn, ok := ts.Source.(*ast.TableName)
		if !ok {
			return nil, errNoJoin
		}
		s := &joinSide{ts: ts, tn: tn, name: tn.Name.L, db: tn.Schema.L, wild: -1}
		if ts.AsName.L != "" {
			s.name, s.alias = ts.AsName.L, true
		}
		if s.db == "" {
			s.db = b.db
		}
		sides[i] = s
	}
	jb := &builder{s: b.s, cols: b.cols, db: b.db, plan: &Plan{Kind: PlanDefault, Stmt: KindSelect, def: b.s.Default}}
	jb.collect(sel)
	if len(jb.refs) != 2 {
		return nil, errNoJoin
	}
	for _, r := range jb.refs {
		for _, s := range sides {
			if r.tn == s.tn {
				s.ref = r
			}
		}
	}
	if sides[0].ref == nil || sides[1].ref == nil {
		return nil, errNoJoin
	}
	label := func(s *joinSide) string {
		if s.ref.rule != nil {
			return s.ref.rule.Table
		}
		return s.tn.Name.O
	}
	op := " JOIN "
	left := false
	switch {
	case j.Tp == ast.LeftJoin:
		op, left = " LEFT JOIN ", true
	case j.Tp == ast.RightJoin:
		op = " RIGHT JOIN "
	}
	name := label(sides[0]) + op + label(sides[1])
	refuse := func(format string, args ...any) (*Plan, error) {
		return nil, joinRefusal(name, format, args...)
	}
	switch {
	case j.Tp == ast.RightJoin:
		return refuse("RIGHT JOIN is not supported; write it as a LEFT JOIN with the tables swapped")
	case j.NaturalJoin || len(j.Using) > 0:
		return refuse("NATURAL JOIN and JOIN ... USING are not supported; join ON the columns")
	case sel.With != nil:
		return refuse("WITH is not supported; write the CTE's SELECT as its own statement")
	case sel.Distinct:
		return refuse("SELECT DISTINCT is not supported; remove the duplicates in the application")
	case sel.GroupBy != nil || sel.Having != nil:
		return refuse("GROUP BY and HAVING are not supported; group the joined rows in the application, or join tables sharded alike on their shard keys")
	case sel.LockInfo != nil && sel.LockInfo.LockType != ast.SelectLockNone:
		return refuse("FOR UPDATE and LOCK IN SHARE MODE are not supported; lock the rows of each table with its own SELECT")
	case sel.SelectIntoOpt != nil:
		return refuse("SELECT ... INTO is not supported")
	case sel.SelectStmtOpts != nil && sel.SelectStmtOpts.CalcFoundRows:
		return refuse("SQL_CALC_FOUND_ROWS is not supported; count the rows with a SELECT of their own")
	}
	if v := (&joinChecker{}); true {
		sel.Accept(v)
		if v.what != "" {
			return refuse("%s is not supported; %s", v.what, v.fix)
		}
	}
	// side reports which sides an expression reads: bit 0 the left, bit 1
	// the right.
	var unresolved string
	colSide := func(c *ast.ColumnName) int {
		if c.Table.L != "" {
			for i, s := range sides {
				if c.Table.L == s.name && (c.Schema.L == "" || !s.alias && c.Schema.L == s.db) {
					return 1 << i
				}
			}
			unresolved = c.String()
			return 0
		}
		owners, unknown := 0, false
		for i, s := range sides {
			tc := b.cols.table(s.db, s.tn.Name.L)
			if tc == nil {
				unknown = true
				continue
			}
			if _, ok := tc.pos[c.Name.L]; ok {
				owners |= 1 << i
			}
		}
		if owners == 1 || owners == 2 {
			if !unknown {
				return owners
			}
		}
		unresolved = c.Name.O
		return 0
	}
	mask := func(e ast.Node) (int, error) {
		v := &colFinder{side: colSide}
		e.Accept(v)
		if unresolved != "" {
			u := unresolved
			unresolved = ""
			return 0, joinRefusal(name, "cannot tell which table column %s belongs to; qualify it with its table", u)
		}
		return v.mask, nil
	}
	// The conditions.
	var keys [][2]ast.ExprNode
	addKey := func(e ast.ExprNode, m int) bool {
		x, ok := e.(*ast.BinaryOperationExpr)
		if !ok || x.Op != opcode.EQ || m != 3 {
			return false
		}
		l, _ := mask(x.L)
		r, _ := mask(x.R)
		switch {
		case l == 1 && r == 2:
			keys = append(keys, [2]ast.ExprNode{x.L, x.R})
		case l == 2 && r == 1:
			keys = append(keys, [2]ast.ExprNode{x.R, x.L})
		default:
			return false
		}
		return true
	}
	var onConds []ast.ExprNode
	if j.On != nil {
		onConds = conjuncts(j.On.Expr)
	}
	for _, e := range onConds {
		m, err := mask(e)
		if err != nil {
			return nil, err
		}
		switch {
		case addKey(e, m):
		case m == 3:
			return refuse("a condition on both tables that is not an equality of an expression of each (%s) is not supported; "+
				"join on equalities and filter the rest in the application", textOf(e))
		case left && m == 1:
			return refuse("a condition on the left table only in the ON of a LEFT JOIN (%s) is not supported; "+
				"move it to WHERE if that is what you mean, or compute it in the application", textOf(e))
		case left || m == 2:
			sides[1].conds = append(sides[1].conds, e)
		default:
			sides[0].conds = append(sides[0].conds, e)
		}
	}
	for _, e := range conjuncts(sel.Where) {
		m, err := mask(e)
		if err != nil {
			return nil, err
		}
		switch {
		case !left && addKey(e, m):
		case m == 3:
			return refuse("a condition on both tables in WHERE that is not an equality of an expression of each (%s) is not supported; "+
				"filter those rows in the application", textOf(e))
		case m == 2 && left:
			// Applies after the join, to the NULL row too: its truth is
			// a column of the right table's rows, checked by the proxy.
			sides[1].filters = append(sides[1].filters, e)
		case m == 2:
			sides[1].conds = append(sides[1].conds, e)
		default:
			sides[0].conds = append(sides[0].conds, e)
		}
	}
	if len(keys) == 0 {
		return refuse("the tables are not joined by an equality of an expression of each; a cross join is not supported")
	}
	// ORDER BY: every key on one table, which becomes the outer side.
	var order []*ast.ByItem
	var orderMask []int
	orderSide := 0
	fields := sel.Fields.Fields
	itemMask := make([]int, len(fields))
	for i, f := range fields {
		if f.WildCard != nil {
			switch {
			case f.WildCard.Table.L == "":
				itemMask[i] = 3
			default:
				itemMask[i] = colSide(&ast.ColumnName{Schema: f.WildCard.Schema, Table: f.WildCard.Table, Name: ast.NewCIStr("x")})
				if unresolved != "" {
					return refuse("%s.* names no table of the join", f.WildCard.Table.O)
				}
			}
			continue
		}
		m, err := mask(f.Expr)
		if err != nil {
			return nil, err
		}
		if m == 3 {
			return refuse("a select-list expression over both tables (%s) is not supported; select the columns and compute it in the application", f.Text())
		}
		itemMask[i] = m
	}
	// The probe's columns: as many as the statement's, * counted by the
	// tables' columns when known.
	ncols := 0
	for i, f := range fields {
		if f.WildCard == nil {
			ncols++
			continue
		}
		for side, s := range sides {
			if itemMask[i]&(1<<side) == 0 {
				continue
			}
			if tc := b.cols.table(s.db, s.tn.Name.L); tc != nil {
				ncols += len(tc.names)
			} else {
				ncols++
			}
		}
	}
	if sel.OrderBy != nil {
		for _, it := range sel.OrderBy.Items {
			e := it.Expr
			m := -1
			switch x := e.(type) {
			case *ast.PositionExpr:
				if x.P != nil || x.N < 1 || x.N > len(fields) || fields[x.N-1].WildCard != nil {
					return refuse("ORDER BY a position is supported only for a select-list item that is not *")
				}
				e, m = fields[x.N-1].Expr, itemMask[x.N-1]
			case *driver.ValueExpr, *driver.ParamMarkerExpr:
				// (A shape's ORDER BY 2 is ORDER BY ?: refused here, it
				// is planned again as written.)
				return refuse("ORDER BY a literal is not supported")
			case *ast.ColumnNameExpr:
				if x.Name.Table.L == "" {
					for i, f := range fields {
						if f.AsName.L != "" && f.AsName.L == x.Name.Name.L {
							e, m = f.Expr, itemMask[i]
							break
						}
					}
				}
			}
			if m < 0 {
				var err error
				if m, err = mask(e); err != nil {
					return nil, err
				}
			}
			if m == 3 {
				return refuse("ORDER BY an expression over both tables is not supported; order the rows in the application")
			}
			if m != 0 {
				if orderSide != 0 && orderSide != m {
					orderSide = 3 // both: sorted in the proxy
				} else if orderSide == 0 {
					orderSide = m
				}
			}
			order = append(order, &ast.ByItem{Expr: e, Desc: it.Desc})
			orderMask = append(orderMask, m)
		}
	}
	jp := &JoinPlan{Left: left, Name: name, Keys: len(keys)}
	outer := 0
	if orderSide == 3 || orderSide == 2 && left {
		// Keys of both tables, or of a LEFT JOIN's right table: the
		// joined rows are sorted in the proxy (at most max_merge_rows).
		for i, it := range order {
			if orderMask[i] == 0 {
				continue
			}
			side := orderMask[i] - 1
			sides[side].sorts = append(sides[side].sorts, it.Expr)
			jp.Sort = append(jp.Sort, JoinSort{Side: side, Col: len(sides[side].sorts) - 1, Desc: it.Desc})
		}
		order = nil
	} else if orderSide == 2 {
		outer = 1
	}
	// The select list, split by side.
	for i, f := range fields {
		m := itemMask[i]
		add := func(side int, f *ast.SelectField) {
			s := sides[side]
			if f.WildCard != nil {
				if s.wild >= 0 {
					return
				}
				s.wild = len(s.items)
			}
			jp.Items = append(jp.Items, JoinItem{Side: side, Pos: len(s.items)})
			s.items = append(s.items, f)
		}
		switch m {
		case 3: // *
			for side := range sides {
				w := &ast.SelectField{WildCard: &ast.WildCardField{Table: ast.NewCIStr(sides[side].name)}}
				if !sides[side].alias {
					w.WildCard.Schema = sides[side].tn.Schema
				}
				if sides[side].wild >= 0 {
					return refuse("* twice over one table is not supported")
				}
				add(side, w)
			}
		case 2:
			if sides[1].wild >= 0 && f.WildCard != nil {
				return refuse("* twice over one table is not supported")
			}
			add(1, f)
		default:
			if sides[0].wild >= 0 && f.WildCard != nil {
				return refuse("* twice over one table is not supported")
			}
			add(0, f)
		}
	}
	if outer == 1 {
		for i := range jp.Items {
			jp.Items[i].Side = 1 - jp.Items[i].Side
		}
	}
	for _, k := range keys {
		sides[0].keys = append(sides[0].keys, k[0])
		sides[1].keys = append(sides[1].keys, k[1])
	}
	if outer == 1 {
		sides[0], sides[1] = sides[1], sides[0]
	}
	// The LIMIT.
	if sel.Limit != nil {
		sel.Limit.Accept(&paramReplacer{n: new(int)})
		var m *mergeBuilder
		if sel.Limit.Offset != nil {
			if jp.Offset, err = m.literal(sel.Limit.Offset); err != nil {
				return refuse("LIMIT must be a number")
			}
		}
		if jp.Count, err = m.literal(sel.Limit.Count); err != nil {
			return refuse("LIMIT must be a number")
		}
	}
	// Each side's statements.
	for i, s := range sides {
		js := &jp.Sides[i]
		js.Table, js.Items, js.Wild = label(s), len(s.items), s.wild
		st := &ast.SelectStmt{Kind: ast.SelectStmtKindSelect, SelectStmtOpts: &ast.SelectStmtOpts{SQLCache: true}, Fields: &ast.FieldList{},
			From: &ast.TableRefsClause{TableRefs: &ast.Join{Left: s.ts}}}
		st.Fields.Fields = append(st.Fields.Fields, s.items...)
		for _, k := range append(slices.Clip(s.keys), s.sorts...) {
			st.Fields.Fields = append(st.Fields.Fields, &ast.SelectField{Expr: k},
				&ast.SelectField{Expr: &ast.FuncCallExpr{FnName: ast.NewCIStr("WEIGHT_STRING"), Args: []ast.ExprNode{
					&ast.FuncCallExpr{FnName: ast.NewCIStr("RTRIM"), Args: []ast.ExprNode{k}}}}})
		}
		for _, e := range s.filters {
			st.Fields.Fields = append(st.Fields.Fields, &ast.SelectField{Expr: &ast.IsTruthExpr{Expr: &ast.ParenthesesExpr{Expr: e}, True: 1}})
		}
		js.Sorts, js.Filters = len(s.sorts), len(s.filters)
		st.Where = andOf(s.conds)
		if i == 0 && len(order) > 0 {
			st.OrderBy = &ast.OrderByClause{Items: order}
		}
		aliases := nameFields(st, params)
		var np int
		replaceParams(st, &np)
		text, err := restoreStmt(st)
		if err != nil {
			return nil, err
		}
		js.sel = parseTemplate(text, params, false, aliases)
		if i == 1 {
			js.where = st.Where != nil
			look, err := restore(s.keys[0])
			if err != nil {
				return nil, errorf("cannot rewrite the statement: %v", err)
			}
			if _, col := s.keys[0].(*ast.ColumnNameExpr); !col {
				look = "(" + look + ")"
			}
			js.lookup = parseTemplate(look, params, false, nil)
			// The NULL row: the items over no row of the table.
			null := &ast.SelectStmt{Kind: ast.SelectStmtKindSelect, SelectStmtOpts: &ast.SelectStmtOpts{SQLCache: true}, Fields: st.Fields,
				From: &ast.TableRefsClause{TableRefs: &ast.Join{Tp: ast.LeftJoin,
					Left:  &ast.TableSource{Source: oneRow(), AsName: ast.NewCIStr("__ks_one")},
					Right: s.ts, On: &ast.OnCondition{Expr: ast.NewValueExpr(int64(0), "", "")}}}}
			if text, err = restoreStmt(null); err != nil {
				return nil, err
			}
			js.null = parseTemplate(text, params, false, aliases)
		}
	}
	jp.probe = probeOf(ncols, params, b.base)
	pl := &Plan{Kind: PlanSharded, Stmt: KindSelect, def: b.s.Default, join: jp}
	for _, s := range sides {
		if s.ref.rule != nil && !slices.Contains(pl.tables, s.ref.rule) {
			pl.tables = append(pl.tables, s.ref.rule)
		}
	}
	if len(pl.tables) == 0 {
		return nil, errNoJoin
	}
	return pl, nil
}

// oneRow is (SELECT 1): a derived table of one row.
func oneRow() *ast.SelectStmt {
	return &ast.SelectStmt{Kind: ast.SelectStmtKindSelect, SelectStmtOpts: &ast.SelectStmtOpts{SQLCache: true}, Fields: &ast.FieldList{Fields: []*ast.SelectField{
		{Expr: ast.NewValueExpr(int64(1), "", "")}}}}
}

// probeOf is what a prepared join is prepared as on a backend: as many
// columns and parameters as the statement (its columns are NULL).
func probeOf(nfields int, params bool, nlits int) template {
	var sb strings.Builder
	sb.WriteString("SELECT ")
	for i := range nfields {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("NULL")
	}
	if params && nlits > 0 {
		sb.WriteString(" FROM DUAL WHERE COALESCE(")
		for i := range nlits {
			sb.WriteString(strconv.FormatInt(markerBase+int64(i), 10) + ", ")
		}
		sb.WriteString("1) IS NOT NULL")
	}
	return parseTemplate(sb.String(), params, false, nil)
}

// probeSQL renders a prepared join's probe (see Probe).
func (j *JoinPlan) probeSQL(lits []Literal, prefix string) string {
	var sb strings.Builder
	sb.WriteString(prefix)
	j.probe.render(&sb, nil, lits, "")
	return sb.String()
}

func andOf(es []ast.ExprNode) ast.ExprNode {
	var out ast.ExprNode
	for _, e := range es {
		e = &ast.ParenthesesExpr{Expr: e}
		if out == nil {
			out = e
		} else {
			out = &ast.BinaryOperationExpr{Op: opcode.LogicAnd, L: out, R: e}
		}
	}
	return out
}

func textOf(e ast.ExprNode) string {
	if t, err := restore(e); err == nil {
		return t
	}
	return "?"
}

// colFinder collects the sides an expression's columns belong to.
type colFinder struct {
	side func(*ast.ColumnName) int
	mask int
}

func (v *colFinder) Enter(n ast.Node) (ast.Node, bool) {
	if c, ok := n.(*ast.ColumnNameExpr); ok {
		v.mask |= v.side(c.Name)
		return n, true
	}
	return n, false
}

func (v *colFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// joinChecker finds what a join the proxy runs cannot have.
type joinChecker struct{ what, fix string }

func (v *joinChecker) Enter(n ast.Node) (ast.Node, bool) {
	if v.what != "" {
		return n, true
	}
	switch x := n.(type) {
	case *ast.SubqueryExpr:
		v.what, v.fix = "a subquery", "run it as its own statement"
	case *ast.AggregateFuncExpr:
		v.what, v.fix = "aggregate "+strings.ToUpper(x.F)+"()", "aggregate the joined rows in the application, or join tables sharded alike on their shard keys"
	case *ast.WindowFuncExpr:
		v.what, v.fix = "window function "+strings.ToUpper(x.Name)+"()", "compute it in the application"
	case *ast.VariableExpr:
		if x.Value != nil {
			v.what, v.fix = "assigning a user variable", "assign it in a statement of its own"
		}
	case *ast.DefaultExpr:
		v.what, v.fix = "DEFAULT()", "select the column"
	}
	return n, v.what != ""
}

func (v *joinChecker) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// onlyOn reports whether every sub-table of t is on node n.
func (t *TableRule) onlyOn(n string) bool {
	for i := range t.subs {
		if t.NodeOf(i) != n {
			return false
		}
	}
	return true
}

// unwrapJoin is n without the joins of one table that wrap it (a comma
// join's first table).
func unwrapJoin(n ast.ResultSetNode) ast.ResultSetNode {
	for {
		j, ok := n.(*ast.Join)
		if !ok || j.Right != nil {
			return n
		}
		n = j.Left
	}
}

// countSources counts the table sources of a FROM (-1: one is a derived
// table or a join in parentheses).
func countSources(n ast.ResultSetNode) int {
	switch x := n.(type) {
	case *ast.Join:
		l := countSources(x.Left)
		if x.Right == nil || l < 0 {
			return l
		}
		r := countSources(x.Right)
		if r < 0 {
			return -1
		}
		return l + r
	case *ast.TableSource:
		if _, ok := x.Source.(*ast.TableName); ok {
			return 1
		}
	}
	return -1
}

func hasSubquery(n ast.Node) bool {
	v := &joinChecker{}
	n.Accept(v)
	return v.what == "a subquery"
}
