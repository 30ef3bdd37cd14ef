package router

import (
	"errors"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	driver "github.com/pingcap/tidb/pkg/parser/test_driver"
)

// A SELECT answered by several sub-tables whose result is not simply the
// concatenation of theirs (ORDER BY, LIMIT, aggregates, GROUP BY,
// DISTINCT) is merged by the proxy. The plan rewrites the statement each
// sub-table runs so that the merge can stream:
//
//   - Sort mode (no aggregation across sub-tables): each sub-table runs the
//     statement with its ORDER BY and LIMIT offset+count; the proxy merges
//     the ordered streams (a k-way heap), skips offset rows and stops after
//     count.
//   - Grouped mode (GROUP BY not on the shard key, aggregates, DISTINCT):
//     each sub-table groups by the group keys (and by the arguments of a
//     DISTINCT aggregate) ordered by them, returning partial aggregates;
//     the proxy merges the streams, combines adjacent rows of one group,
//     evaluates the select list and HAVING, and re-sorts (bounded) only
//     when the final ORDER BY is not on the group keys.
//
// The columns the merge needs that the client did not ask for are appended
// to the select list as hidden columns and stripped from what the client
// sees. Every value the merge compares comes with a hidden
// WEIGHT_STRING(RTRIM(expr)) column: string values compare by their
// collation's weights, computed by the server itself (RTRIM: MariaDB's
// collations pad with spaces), so the merge orders and groups exactly as
// the server does for any collation.

// MergeSpec is the immutable description of a merge, shared by every
// execution of a plan.
type MergeSpec struct {
	// Visible is the number of columns the client sees, -1 when the select
	// list has a wildcard (then it is the column count less Hidden).
	Visible int
	Hidden  int
	// Sort is the order of every sub-table's rows.
	Sort []SortKey
	// Grouped: rows of one group (equal on Sort[:GroupKeys]) come from
	// several sub-tables and are combined.
	Grouped   bool
	GroupKeys int
	// DistinctArgs: the sort keys after the group keys are the arguments
	// of the DISTINCT aggregates.
	DistinctArgs int
	// Fields (grouped mode) says how each visible column is made: nil is
	// the group's first row's cell as it came, else the expression's
	// value.
	Fields []*Expr
	Aggs   []Agg
	Having *Expr
	// Final, when set, is the client's ORDER BY: the merged groups are
	// buffered (up to max_merge_rows) and sorted by it.
	Final []FinalKey
	// Offset and Count are the client's LIMIT (nil: none).
	Offset, Count *Expr
	// Table is the sharded table, for messages.
	Table string
}

// SortKey is one key of the sub-tables' common order: hidden column Col
// holds the value, Col+1 its weight string; or, with Visible, the
// client's column Col (ORDER BY a position with * in the select list),
// whose strings compare by an approximation of their collation.
type SortKey struct {
	Col     int
	Desc    bool
	Visible bool
}

// FinalKey is one key of a re-sort.
type FinalKey struct {
	E    *Expr
	Desc bool
}

// AggKind is an aggregate function the merge combines.
type AggKind uint8

// Aggregates.
const (
	AggCount         AggKind = iota + 1 // partial: COUNT in hidden A
	AggSum                              // partial: SUM in A
	AggAvg                              // partials: SUM in A, COUNT in B
	AggMin                              // partial: MIN in A, its weight in A+1
	AggMax                              // partial: MAX in A, its weight in A+1
	AggCountDistinct                    // the distinct arguments
	AggSumDistinct                      // the distinct argument (hidden A)
	AggAvgDistinct                      // the distinct argument (hidden A)
	AggGroupConcat                      // partial: GROUP_CONCAT in A; Sep separates
)

// Agg is one aggregate of the select list, HAVING or ORDER BY.
type Agg struct {
	Kind AggKind
	A, B int // hidden columns
	Sep  *Expr
	Text string // as written, for messages
}

// ExprOp is an operation of a merge expression.
type ExprOp uint8

// Expression operations. Binary operations take Args[0] and Args[1].
const (
	ExprCol   ExprOp = iota + 1 // hidden column Col (value) and Col+1 (weight), of the group's first row
	ExprAgg                     // aggregate Agg
	ExprLit                     // the statement's literal number Lit (bound per execution)
	ExprConst                   // Val
	ExprNeg
	ExprNot
	ExprAdd
	ExprSub
	ExprMul
	ExprDiv
	ExprIntDiv
	ExprMod
	ExprEQ
	ExprNE
	ExprLT
	ExprLE
	ExprGT
	ExprGE
	ExprNullEQ
	ExprAnd
	ExprOr
	ExprXor
	ExprIsNull
	ExprIsNotNull
	ExprCoalesce // IFNULL and COALESCE
	ExprIf
	ExprIn    // Args[0] IN (Args[1:])
	ExprNotIn // Args[0] NOT IN (Args[1:])
)

// Expr is an expression over the merged groups: the select list items
// that contain aggregates, HAVING and a re-sort's keys. Anything without
// an aggregate is computed by the sub-tables (a hidden column).
type Expr struct {
	Op   ExprOp
	Args []*Expr
	Col  int
	Agg  int
	Lit  int
	Val  any // ExprConst: nil, int64, uint64, float64, Decimal, string, []byte
	Text string
}

// Decimal is an exact decimal number as text ("-12.50").
type Decimal string

// LitValue is a literal's value for merge expressions: int64 or uint64
// for integers, Decimal for exact decimals, float64 for numbers with an
// exponent, string, []byte (hex), nil.
func LitValue(l Literal) any {
	switch l.Kind {
	case LitInt:
		if v, err := strconv.ParseInt(l.Text, 10, 64); err == nil {
			return v
		}
		if v, err := strconv.ParseUint(l.Text, 10, 64); err == nil {
			return v
		}
		return Decimal(l.Text)
	case LitNumber:
		if strings.ContainsAny(l.Text, "eE") {
			f, _ := strconv.ParseFloat(l.Text, 64)
			return f
		}
		return Decimal(l.Text)
	}
	return l.Value()
}

const limitMarker = markerBase - 2 // stands for the LIMIT a sub-table runs

// errMergeUnsupported marks a statement the merge cannot do; its message
// says why, and the plan keeps it for when several sub-tables answer.
type errMergeUnsupported struct{ msg string }

func (e *errMergeUnsupported) Error() string { return e.msg }

func unsupported(format string, args ...any) error {
	return &errMergeUnsupported{msg: errorf(format, args...).Msg}
}

// errPositional: an ORDER BY/GROUP BY position came from a literal of the
// shape; the statement is planned as written instead.
var errPositional = errors.New("keyshard: ORDER BY/GROUP BY position in a shape")

type mergeBuilder struct {
	b       *builder
	st      *ast.SelectStmt
	spec    *MergeSpec
	fields  []*ast.SelectField // the client's select list
	hidden  []*ast.SelectField
	seen    map[string]int
	wild    bool
	distArg string // restored arguments of the DISTINCT aggregates
	// distinctNodes are those arguments.
	distinctNodes []ast.ExprNode
}

// buildMerge rewrites st, already planned for one sub-table, into the
// statement every sub-table runs when several answer, and returns its
// merge spec.
func (b *builder) buildMerge(st *ast.SelectStmt) (*MergeSpec, error) {
	if st.SelectStmtOpts != nil && st.SelectStmtOpts.CalcFoundRows {
		return nil, unsupported("SQL_CALC_FOUND_ROWS over several sub-tables is not supported")
	}
	if st.GroupBy != nil && st.GroupBy.Rollup {
		return nil, unsupported("GROUP BY ... WITH ROLLUP over several sub-tables is not supported")
	}
	m := &mergeBuilder{b: b, st: st, spec: &MergeSpec{Table: b.plan.tables[0].Table}, seen: map[string]int{}}
	m.fields = st.Fields.Fields
	for _, f := range m.fields {
		if f.WildCard != nil {
			m.wild = true
		}
	}
	if why := b.windowWhy(st); why != "" {
		return nil, unsupported("%s", why)
	}
	aggs := false
	for _, f := range m.fields {
		if f.Expr != nil && hasAgg(f.Expr) {
			aggs = true
		}
	}
	if st.Having != nil && hasAgg(st.Having.Expr) {
		aggs = true
	}
	if st.OrderBy != nil {
		for _, it := range st.OrderBy.Items {
			if hasAgg(it.Expr) {
				aggs = true
			}
		}
	}
	if st.Distinct && (aggs || st.GroupBy != nil) {
		return nil, unsupported("SELECT DISTINCT with GROUP BY or aggregates over several sub-tables is not supported")
	}
	var err error
	switch {
	case st.GroupBy != nil && m.local(st.GroupBy.Items):
		err = m.sortMode(true)
	case st.Distinct && !m.wild && m.localFields():
		err = m.sortMode(false)
	case st.GroupBy != nil || aggs || st.Distinct:
		err = m.groupedMode()
	default:
		err = m.sortMode(false)
	}
	if err != nil {
		return nil, err
	}
	m.spec.Visible = len(m.fields)
	if m.wild {
		m.spec.Visible = -1
	}
	m.spec.Hidden = len(m.hidden)
	st.Fields.Fields = append(append([]*ast.SelectField(nil), m.fields...), m.hidden...)
	return m.spec, nil
}

// local reports whether the group keys include the shard key: then every
// group lives in one sub-table and the sub-tables' groups are final.
func (m *mergeBuilder) local(items []*ast.ByItem) bool {
	for _, it := range items {
		e, err := m.resolveGroupBy(it.Expr)
		if err != nil {
			continue
		}
		if c, ok := e.(*ast.ColumnNameExpr); ok && m.b.keyColumn(c.Name) != nil {
			return true
		}
	}
	return false
}

// localFields: a DISTINCT whose columns include the shard key.
func (m *mergeBuilder) localFields() bool {
	for _, f := range m.fields {
		if c, ok := f.Expr.(*ast.ColumnNameExpr); ok && m.b.keyColumn(c.Name) != nil {
			return true
		}
	}
	return false
}

// resolve turns an ORDER BY/GROUP BY/HAVING item into the expression it
// stands for: a position or a select-list alias becomes that item's
// expression. group: GROUP BY and HAVING, where a name of the form
// `alias` that is also the aliased column itself stays a column.
func (m *mergeBuilder) resolve(e ast.ExprNode, group bool) (ast.ExprNode, error) {
	switch x := e.(type) {
	case *driver.ValueExpr:
		// ORDER BY 2 in a shape is ORDER BY ?: a position known only
		// from the literal.
		if n, ok := x.GetValue().(int64); ok && n >= markerBase && n < markerBase+1_000_000 {
			return nil, errPositional
		}
	case *ast.PositionExpr:
		if x.P != nil {
			return nil, errPositional
		}
		if m.wild {
			return e, nil // sortMode takes it as it is
		}
		if x.N < 1 || x.N > len(m.fields) {
			return nil, unsupported("ORDER BY/GROUP BY position %d is out of range", x.N)
		}
		return m.fields[x.N-1].Expr, nil
	case *ast.ColumnNameExpr:
		if x.Name.Table.L != "" {
			return e, nil
		}
		for _, f := range m.fields {
			if f.AsName.L != "" && f.AsName.L == x.Name.Name.L {
				if c, ok := f.Expr.(*ast.ColumnNameExpr); group && ok && c.Name.Name.L == x.Name.Name.L {
					return e, nil
				}
				return f.Expr, nil
			}
		}
	}
	return e, nil
}

// shadowed reports whether e is an unqualified column whose name is also
// a select-list alias of another expression: in an ORDER BY, that name
// is the alias.
func (m *mergeBuilder) shadowed(e ast.ExprNode) bool {
	c, ok := e.(*ast.ColumnNameExpr)
	if !ok || c.Name.Table.L != "" {
		return false
	}
	for _, f := range m.fields {
		if f.AsName.L == c.Name.Name.L {
			if fc, ok := f.Expr.(*ast.ColumnNameExpr); !ok || fc.Name.Name.L != c.Name.Name.L {
				return true
			}
		}
	}
	return false
}

// resolveGroupBy is resolve for a GROUP BY item: a name that is both a
// select-list alias and a column of a table the statement reads is the
// column, as MariaDB reads it (in HAVING and a bare ORDER BY name the
// alias wins).
func (m *mergeBuilder) resolveGroupBy(e ast.ExprNode) (ast.ExprNode, error) {
	if c, ok := e.(*ast.ColumnNameExpr); ok && c.Name.Table.L == "" && m.tableColumn(c.Name.Name.L) {
		return e, nil
	}
	return m.resolve(e, true)
}

// add appends a hidden column (or finds the same one) and returns its index.
func (m *mergeBuilder) add(e ast.ExprNode) (int, error) {
	text, err := restore(e)
	if err != nil {
		return 0, unsupported("cannot rewrite %T for a merge: %v", e, err)
	}
	if j, ok := m.seen[text]; ok {
		return j, nil
	}
	j := len(m.hidden)
	m.hidden = append(m.hidden, &ast.SelectField{Expr: e})
	m.seen[text] = j
	return j, nil
}

// value appends hidden columns for e and its weight string; it returns
// the first.
func (m *mergeBuilder) value(e ast.ExprNode) (int, error) {
	text, err := restore(e)
	if err != nil {
		return 0, unsupported("cannot rewrite %T for a merge: %v", e, err)
	}
	if j, ok := m.seen["v:"+text]; ok {
		return j, nil
	}
	j := len(m.hidden)
	w := &ast.FuncCallExpr{FnName: ast.NewCIStr("WEIGHT_STRING"), Args: []ast.ExprNode{
		&ast.FuncCallExpr{FnName: ast.NewCIStr("RTRIM"), Args: []ast.ExprNode{e}}}}
	m.hidden = append(m.hidden, &ast.SelectField{Expr: e}, &ast.SelectField{Expr: w})
	m.seen["v:"+text] = j
	return j, nil
}

// limit takes the client's LIMIT into the spec and, when push, gives the
// sub-tables LIMIT offset+count (rendered per execution).
func (m *mergeBuilder) limit(push bool) error {
	l := m.st.Limit
	if l == nil {
		return nil
	}
	var err error
	if l.Offset != nil {
		if m.spec.Offset, err = m.literal(l.Offset); err != nil {
			return err
		}
	}
	if m.spec.Count, err = m.literal(l.Count); err != nil {
		return err
	}
	if push {
		m.st.Limit = &ast.Limit{Count: ast.NewValueExpr(int64(limitMarker), "", "")}
	} else {
		m.st.Limit = nil
	}
	return nil
}

// literal converts a literal (a marker of the shape or a constant).
func (m *mergeBuilder) literal(e ast.ExprNode) (*Expr, error) {
	v, ok := e.(*driver.ValueExpr)
	if !ok {
		return nil, unsupported("LIMIT must be a number")
	}
	if n, ok := v.GetValue().(int64); ok && n >= markerBase && n < markerBase+1_000_000 {
		return &Expr{Op: ExprLit, Lit: int(n - markerBase)}, nil
	}
	text, err := restore(v)
	if err != nil {
		return nil, unsupported("literal: %v", err)
	}
	var val any
	switch x := v.GetValue().(type) {
	case nil:
	case int64, uint64, float64:
		val = x
	case string:
		val = x
	case []byte:
		val = x
	default:
		val = Decimal(text)
	}
	return &Expr{Op: ExprConst, Val: val, Text: text}, nil
}

// sortMode: the sub-tables' rows are final; merge them in ORDER BY order
// and apply the LIMIT. grouped: a GROUP BY on the shard key, whose
// implicit order (the group keys) is kept when there is no ORDER BY.
func (m *mergeBuilder) sortMode(grouped bool) error {
	if m.st.OrderBy == nil && grouped {
		var items []*ast.ByItem
		for _, it := range m.st.GroupBy.Items {
			items = append(items, &ast.ByItem{Expr: it.Expr})
		}
		m.st.OrderBy = &ast.OrderByClause{Items: items}
	}
	if m.st.OrderBy != nil {
		for _, it := range m.st.OrderBy.Items {
			e, err := m.orderExpr(it.Expr)
			if err != nil {
				return err
			}
			if pos, ok := it.Expr.(*ast.PositionExpr); ok && m.wild && pos.P == nil {
				// The position of a column of *: compared as it comes.
				m.spec.Sort = append(m.spec.Sort, SortKey{Col: pos.N - 1, Desc: it.Desc, Visible: true})
				continue
			}
			j, err := m.value(e)
			if err != nil {
				return err
			}
			m.spec.Sort = append(m.spec.Sort, SortKey{Col: j, Desc: it.Desc})
		}
	}
	return m.limit(true)
}

// groupedMode plans a merge that combines groups across sub-tables.
func (m *mergeBuilder) groupedMode() error {
	if m.wild {
		return unsupported("* in the select list of an aggregating SELECT over several sub-tables is not supported")
	}
	st := m.st
	spec := m.spec
	spec.Grouped = true
	var keys []ast.ExprNode
	if st.Distinct {
		for _, f := range m.fields {
			keys = append(keys, f.Expr)
		}
	} else if st.GroupBy != nil {
		for _, it := range st.GroupBy.Items {
			e, err := m.resolveGroupBy(it.Expr)
			if err != nil {
				return err
			}
			if hasAgg(e) {
				return unsupported("GROUP BY an aggregate is not allowed")
			}
			keys = append(keys, e)
		}
	}
	keyText := make([]string, len(keys))
	for i, k := range keys {
		t, err := restore(k)
		if err != nil {
			return unsupported("cannot rewrite a group key: %v", err)
		}
		keyText[i] = t
	}
	// The select list, HAVING and ORDER BY register the aggregates (and
	// the DISTINCT arguments) they use.
	spec.Fields = make([]*Expr, len(m.fields))
	for i, f := range m.fields {
		if hasAgg(f.Expr) {
			x, err := m.convert(f.Expr) // no aliases in scope in the select list
			if err != nil {
				return err
			}
			spec.Fields[i] = x
		}
	}
	if st.Having != nil {
		x, err := m.expr(st.Having.Expr)
		if err != nil {
			return err
		}
		spec.Having = x
	}
	// The sub-tables' order: the group keys, in the client's ORDER BY
	// directions when that ORDER BY is on group keys only; otherwise the
	// merged groups are re-sorted.
	order := make([]ast.ExprNode, 0, len(keys))
	desc := make([]bool, 0, len(keys))
	used := make([]bool, len(keys))
	pushed := true
	if st.OrderBy != nil && len(st.OrderBy.Items) == 1 {
		if v, ok := st.OrderBy.Items[0].Expr.(*driver.ValueExpr); ok && v.GetValue() == nil {
			st.OrderBy = nil // ORDER BY NULL: any order, no re-sort
		}
	}
	if st.OrderBy != nil {
		for _, it := range st.OrderBy.Items {
			e, err := m.resolve(it.Expr, false)
			if err != nil {
				return err
			}
			t, err := restore(e)
			if err != nil {
				return unsupported("cannot rewrite ORDER BY: %v", err)
			}
			k := -1
			for i := range keys {
				if keyText[i] == t {
					k = i
				}
			}
			if k < 0 {
				pushed = false
				break
			}
			if !used[k] {
				used[k] = true
				order = append(order, keys[k])
				desc = append(desc, it.Desc)
			}
		}
	}
	if !pushed {
		order, desc = order[:0], desc[:0]
		clear(used)
		for _, it := range st.OrderBy.Items {
			e, err := m.orderExpr(it.Expr)
			if err != nil {
				return err
			}
			x, err := m.convert(e)
			if err != nil {
				return err
			}
			spec.Final = append(spec.Final, FinalKey{E: x, Desc: it.Desc})
		}
	}
	for i, k := range keys {
		if !used[i] {
			order = append(order, k)
			desc = append(desc, false)
		}
	}
	var items, groupBy []*ast.ByItem
	for i, e := range order {
		j, err := m.value(e)
		if err != nil {
			return err
		}
		spec.Sort = append(spec.Sort, SortKey{Col: j, Desc: desc[i]})
		var by ast.ExprNode = e
		if m.shadowed(e) {
			// ORDER BY name would be the alias: sort by the hidden
			// column's position.
			by = &ast.PositionExpr{N: len(m.fields) + j + 1}
		}
		items = append(items, &ast.ByItem{Expr: by, Desc: desc[i]})
		groupBy = append(groupBy, &ast.ByItem{Expr: e})
	}
	spec.GroupKeys = len(order)
	for _, a := range m.distinctArgs() {
		j, err := m.value(a)
		if err != nil {
			return err
		}
		spec.Sort = append(spec.Sort, SortKey{Col: j})
		items = append(items, &ast.ByItem{Expr: a})
		groupBy = append(groupBy, &ast.ByItem{Expr: a})
		spec.DistinctArgs++
	}
	for i, f := range m.fields {
		if spec.Fields[i] != nil {
			blankField(f)
		}
	}
	st.Distinct = false
	st.GroupBy = nil
	if len(groupBy) > 0 {
		st.GroupBy = &ast.GroupByClause{Items: groupBy}
	}
	st.Having = nil
	st.OrderBy = nil
	if len(items) > 0 {
		st.OrderBy = &ast.OrderByClause{Items: items}
	}
	return m.limit(spec.Final == nil && spec.Having == nil && spec.DistinctArgs == 0)
}

// distinctArgs returns the arguments of the DISTINCT aggregates (all of
// which must have the same ones).
func (m *mergeBuilder) distinctArgs() []ast.ExprNode {
	for _, a := range m.spec.Aggs {
		if a.Kind == AggCountDistinct || a.Kind == AggSumDistinct || a.Kind == AggAvgDistinct {
			return m.distinctNodes
		}
	}
	return nil
}

// expr converts an expression over aggregates (of HAVING or a re-sort,
// where select-list aliases are in scope).
func (m *mergeBuilder) expr(e ast.ExprNode) (*Expr, error) {
	return m.convert(m.substAliases(e))
}

// orderExpr is the expression an ORDER BY item stands for: a position or
// an alias is the select list's expression as it is (aliases are not in
// scope inside it); any other expression has the aliases it names
// replaced, but for a name that is also a column of a table the statement
// reads: inside an ORDER BY expression MariaDB takes the column
// (`SELECT b AS t ... ORDER BY DATE(t)` sorts by the column t).
func (m *mergeBuilder) orderExpr(it ast.ExprNode) (ast.ExprNode, error) {
	e, err := m.resolve(it, false)
	if err != nil || e != it {
		return e, err
	}
	n, _ := e.Accept(&aliasSubst{m: m, columnsFirst: true})
	return n.(ast.ExprNode), nil
}

// substAliases replaces the select-list aliases e names by their
// expressions, parenthesized. It rewrites e in place; the select list's
// expressions it inserts are shared and never visited again.
func (m *mergeBuilder) substAliases(e ast.ExprNode) ast.ExprNode {
	n, _ := e.Accept(&aliasSubst{m: m})
	return n.(ast.ExprNode)
}

// tableColumn reports whether name (lower case) is a column of a table
// the statement reads; false when keyshard does not know their columns.
func (m *mergeBuilder) tableColumn(name string) bool {
	for _, r := range m.b.refs {
		if r.subquery {
			continue
		}
		db := m.b.db
		if r.tn != nil && r.tn.Schema.L != "" {
			db = r.tn.Schema.L
		}
		if tc := m.b.cols.table(db, r.name); tc != nil {
			if _, ok := tc.pos[name]; ok {
				return true
			}
		}
	}
	return false
}

type aliasSubst struct {
	m            *mergeBuilder
	columnsFirst bool // a name that is a table's column stays that column
}

func (v *aliasSubst) Enter(n ast.Node) (ast.Node, bool) {
	switch n.(type) {
	case *ast.SubqueryExpr, *ast.AggregateFuncExpr:
		return n, true // their names are columns
	}
	return n, false
}

func (v *aliasSubst) Leave(n ast.Node) (ast.Node, bool) {
	if c, ok := n.(*ast.ColumnNameExpr); ok {
		if v.columnsFirst && c.Name.Table.L == "" && v.m.tableColumn(c.Name.Name.L) {
			return n, true
		}
		if r, err := v.m.resolve(c, true); err == nil && r != n {
			return &ast.ParenthesesExpr{Expr: r}, true
		}
	}
	return n, true
}

func (m *mergeBuilder) convert(e ast.ExprNode) (*Expr, error) {
	if !hasAgg(e) {
		switch x := e.(type) {
		case *driver.ValueExpr:
			return m.literal(x)
		case *ast.ParenthesesExpr:
			return m.convert(x.Expr)
		}
		j, err := m.value(e)
		if err != nil {
			return nil, err
		}
		return &Expr{Op: ExprCol, Col: j}, nil
	}
	args := func(op ExprOp, in ...ast.ExprNode) (*Expr, error) {
		x := &Expr{Op: op}
		for _, a := range in {
			y, err := m.convert(a)
			if err != nil {
				return nil, err
			}
			x.Args = append(x.Args, y)
		}
		return x, nil
	}
	switch x := e.(type) {
	case *ast.AggregateFuncExpr:
		return m.agg(x)
	case *ast.ParenthesesExpr:
		return m.convert(x.Expr)
	case *ast.BinaryOperationExpr:
		op, ok := binOps[x.Op]
		if !ok {
			break
		}
		return args(op, x.L, x.R)
	case *ast.UnaryOperationExpr:
		switch x.Op {
		case opcode.Minus:
			return args(ExprNeg, x.V)
		case opcode.Plus:
			return m.convert(x.V)
		case opcode.Not, opcode.Not2:
			return args(ExprNot, x.V)
		}
	case *ast.IsNullExpr:
		if x.Not {
			return args(ExprIsNotNull, x.Expr)
		}
		return args(ExprIsNull, x.Expr)
	case *ast.BetweenExpr:
		lo, err := args(ExprGE, x.Expr, x.Left)
		if err != nil {
			return nil, err
		}
		hi, err := args(ExprLE, x.Expr, x.Right)
		if err != nil {
			return nil, err
		}
		and := &Expr{Op: ExprAnd, Args: []*Expr{lo, hi}}
		if x.Not {
			return &Expr{Op: ExprNot, Args: []*Expr{and}}, nil
		}
		return and, nil
	case *ast.PatternInExpr:
		if x.Sel != nil {
			break
		}
		op := ExprIn
		if x.Not {
			op = ExprNotIn
		}
		return args(op, append([]ast.ExprNode{x.Expr}, x.List...)...)
	case *ast.FuncCallExpr:
		switch x.FnName.L {
		case "ifnull", "coalesce":
			return args(ExprCoalesce, x.Args...)
		case "if":
			if len(x.Args) == 3 {
				return args(ExprIf, x.Args...)
			}
		}
	}
	text, _ := restore(e)
	return nil, unsupported("%s over several sub-tables is not supported (the merge evaluates + - * / DIV %% comparisons AND OR NOT IS NULL IN BETWEEN IF IFNULL COALESCE over aggregates)", text)
}

var binOps = map[opcode.Op]ExprOp{
	opcode.Plus: ExprAdd, opcode.Minus: ExprSub, opcode.Mul: ExprMul, opcode.Div: ExprDiv,
	opcode.IntDiv: ExprIntDiv, opcode.Mod: ExprMod,
	opcode.EQ: ExprEQ, opcode.NE: ExprNE, opcode.LT: ExprLT, opcode.LE: ExprLE, opcode.GT: ExprGT, opcode.GE: ExprGE,
	opcode.NullEQ: ExprNullEQ, opcode.LogicAnd: ExprAnd, opcode.LogicOr: ExprOr, opcode.LogicXor: ExprXor,
}

// agg registers an aggregate and its partial columns.
func (m *mergeBuilder) agg(x *ast.AggregateFuncExpr) (*Expr, error) {
	text, err := restore(x)
	if err != nil {
		return nil, unsupported("cannot rewrite an aggregate: %v", err)
	}
	for i, a := range m.spec.Aggs {
		if a.Text == text {
			return &Expr{Op: ExprAgg, Agg: i}, nil
		}
	}
	a := Agg{Text: text}
	f := strings.ToLower(x.F)
	distinct := x.Distinct && (f == "count" || f == "sum" || f == "avg")
	if distinct {
		if err := m.setDistinct(x.Args); err != nil {
			return nil, err
		}
	}
	switch {
	case f == "count" && distinct:
		a.Kind = AggCountDistinct
	case f == "count":
		a.Kind = AggCount
		a.A, err = m.add(x)
	case f == "sum" && distinct:
		a.Kind = AggSumDistinct
		a.A, err = m.value(x.Args[0])
	case f == "sum":
		a.Kind = AggSum
		a.A, err = m.add(x)
	case f == "avg" && distinct:
		a.Kind = AggAvgDistinct
		a.A, err = m.value(x.Args[0])
	case f == "avg":
		a.Kind = AggAvg
		if a.A, err = m.add(&ast.AggregateFuncExpr{F: "SUM", Args: x.Args}); err == nil {
			a.B, err = m.add(&ast.AggregateFuncExpr{F: "COUNT", Args: x.Args})
		}
	case f == "min" || f == "max":
		a.Kind = AggMin
		if f == "max" {
			a.Kind = AggMax
		}
		a.A, err = m.value(&ast.AggregateFuncExpr{F: x.F, Args: x.Args})
	case f == "group_concat":
		if x.Distinct || x.Order != nil {
			return nil, unsupported("GROUP_CONCAT with DISTINCT or ORDER BY over several sub-tables is not supported")
		}
		a.Kind = AggGroupConcat
		if a.A, err = m.add(x); err == nil {
			a.Sep, err = m.literal(x.Args[len(x.Args)-1])
		}
	default:
		return nil, unsupported("aggregate %s over several sub-tables is not supported (COUNT, SUM, AVG, MIN, MAX, GROUP_CONCAT are)", strings.ToUpper(x.F))
	}
	if err != nil {
		return nil, err
	}
	m.spec.Aggs = append(m.spec.Aggs, a)
	return &Expr{Op: ExprAgg, Agg: len(m.spec.Aggs) - 1}, nil
}

// setDistinct records the arguments of a DISTINCT aggregate; every
// DISTINCT aggregate of a statement must take the same ones.
func (m *mergeBuilder) setDistinct(args []ast.ExprNode) error {
	var sb strings.Builder
	for _, a := range args {
		t, err := restore(a)
		if err != nil {
			return unsupported("cannot rewrite a DISTINCT argument: %v", err)
		}
		sb.WriteString(t)
		sb.WriteByte(0)
	}
	if m.distArg == "" {
		m.distArg = sb.String()
		m.distinctNodes = args
		return nil
	}
	if m.distArg != sb.String() {
		return unsupported("DISTINCT aggregates over different arguments over several sub-tables are not supported")
	}
	return nil
}

// hasAgg reports whether e contains an aggregate (outside subqueries).
func hasAgg(e ast.Node) bool {
	if e == nil {
		return false
	}
	v := &aggFinder{}
	e.Accept(v)
	return v.found != "" && !strings.HasPrefix(v.found, "window")
}

// String describes the merge, for EXPLAIN and tests: the sort keys (hidden
// columns), grouping, aggregates, re-sort and limit.
func (s *MergeSpec) String() string {
	var sb strings.Builder
	if s.Grouped {
		sb.WriteString("group")
	} else {
		sb.WriteString("sort")
	}
	for i, k := range s.Sort {
		sep := " "
		if i > 0 {
			sep = ", "
		}
		sb.WriteString(sep + "h" + strconv.Itoa(k.Col))
		if k.Desc {
			sb.WriteString(" desc")
		}
		if s.Grouped && i+1 == s.GroupKeys {
			sb.WriteString(" |")
		}
	}
	for _, a := range s.Aggs {
		sb.WriteString("; " + a.Text)
	}
	if s.Having != nil {
		sb.WriteString("; having")
	}
	if s.Final != nil {
		sb.WriteString("; re-sort")
	}
	if s.Count != nil {
		sb.WriteString("; limit")
	}
	return sb.String()
}
