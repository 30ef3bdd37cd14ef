package router

import (
	"errors"
	"fmt"
	"slices"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Statements pushed down whole to each sub-table index: a UNION of
// co-located SELECTs, and INSERT ... SELECT between co-located tables.
//
// Run on sub-table index i, each SELECT reads the rows of index i only.
// When every SELECT keeps each row's sub-table (co-located tables, no LIMIT
// or aggregate across keys), the rows the statement makes on index i are
// exactly the rows of the whole statement that come from index i: a UNION
// ALL concatenated over the indexes is the global UNION ALL, and an INSERT
// whose rows take the SELECT's key stays on index i. What needs rows of
// several indexes together (UNION without ALL, ORDER BY or LIMIT over the
// union) is exact only on one index: the plan's merge reason says why,
// and Bind refuses it over several.

// arm is one SELECT of a pushed-down statement, planned on its own.
type arm struct {
	sel     *ast.SelectStmt
	b       *builder // its own builder: refs and analysis
	sharded []*tableRef
	cond    *cond  // the sub-tables its WHERE allows; nil: all
	why     string // why its rows of several sub-tables are not its answer ("": they are)
}

// planArm analyses one SELECT: its sharded tables must be co-located as in
// a statement of their own.
func (b *builder) planArm(sel *ast.SelectStmt) (*arm, error) {
	ab := &builder{s: b.s, cols: b.cols, db: b.db, base: b.base,
		plan: &Plan{Kind: PlanDefault, Stmt: KindSelect, def: b.plan.def}}
	ab.collect(sel)
	a := &arm{sel: sel, b: ab}
	for _, r := range ab.refs {
		switch {
		case r.dupOf != nil:
		case r.rule != nil && r.rule.Global:
			ab.globals = true
		case r.rule != nil:
			a.sharded = append(a.sharded, r)
		case !slices.Contains(ab.plan.unsharded, r.name):
			ab.plan.unsharded = append(ab.plan.unsharded, r.name)
		}
	}
	if len(a.sharded) == 0 {
		return a, nil
	}
	ab.plan.Kind = PlanSharded
	ab.an = ab.analyze(sel)
	for _, r := range ab.refs {
		if r.subquery && r.rule != nil && !r.rule.Global && ab.an.srcOf[r] == nil {
			return nil, errorf("sharded table %s in a subquery is not supported", r.rule.Table)
		}
	}
	for _, r := range a.sharded {
		if !slices.Contains(ab.plan.tables, r.rule) {
			ab.plan.tables = append(ab.plan.tables, r.rule)
		}
	}
	for _, t := range ab.plan.tables[1:] {
		if why := ab.plan.tables[0].differ(t); why != "" {
			return nil, errorf("cross-shard join not supported: %s (%s) and %s (%s) do not place equal keys together: %s",
				ab.plan.tables[0].Table, ab.plan.tables[0].layout(), t.Table, t.layout(), why)
		}
	}
	if err := ab.an.colocate(); err != nil {
		return nil, err
	}
	if sel.Where != nil {
		a.cond = ab.condOf(sel.Where)
	}
	for _, c := range ab.an.narrow() {
		if a.cond == nil {
			a.cond = c
		} else {
			a.cond = &cond{op: condAnd, kids: []*cond{a.cond, c}}
		}
	}
	if why := ab.an.keepsSubTable(ab.an.top); why != "" {
		a.why = "a SELECT on sharded table " + a.sharded[0].rule.Table + " " + why
	} else if sel.SelectStmtOpts != nil && sel.SelectStmtOpts.CalcFoundRows {
		a.why = "SQL_CALC_FOUND_ROWS"
	} else if sel.Distinct && !a.selectsKey() {
		a.why = "a SELECT DISTINCT on sharded table " + a.sharded[0].rule.Table + " does not select its shard key"
	}
	return a, nil
}

// selectsKey reports whether the arm selects a column tied to its shard
// key: its rows of different sub-tables then differ.
func (a *arm) selectsKey() bool {
	if a.sel.Fields == nil {
		return false
	}
	for i := range a.sel.Fields.Fields {
		if a.keyAt(i) {
			return true
		}
	}
	return false
}

// keyAt reports whether select-list item i of the arm is a column tied to
// the shard key of its co-located tables.
func (a *arm) keyAt(i int) bool {
	if a.b.an == nil || a.sel.Fields == nil || i >= len(a.sel.Fields.Fields) {
		return false
	}
	f := a.sel.Fields.Fields[i]
	if f.WildCard != nil {
		return false
	}
	e := f.Expr
	for {
		p, ok := e.(*ast.ParenthesesExpr)
		if !ok {
			break
		}
		e = p.Expr
	}
	c, ok := e.(*ast.ColumnNameExpr)
	if !ok {
		return false
	}
	an := a.b.an
	top := an.top
	n, ok := an.resolve(top, c.Name)
	if !ok {
		return false
	}
	if n.src.ref != nil && n.src.ref.rule != nil && !n.src.ref.rule.Global && n.name == n.src.ref.rule.Key {
		return true
	}
	if !top.keyed {
		return false
	}
	root := top.uf.find(top.key)
	if top.uf.find(n) == root {
		return true
	}
	_, keys := an.keyNodes(top)
	for _, ks := range keys {
		if slices.Contains(ks, n) {
			return true
		}
	}
	return false
}

// pushdown plans a UNION or an INSERT ... SELECT naming sharded tables
// (nil, nil: neither, planned as before).
func (b *builder) pushdown(stmt ast.StmtNode, params bool) (*Plan, error) {
	switch st := stmt.(type) {
	case *ast.SetOprStmt:
		return b.buildUnion(st, params)
	case *ast.InsertStmt:
		if st.Select == nil {
			return nil, nil
		}
		var into *ast.TableName
		if st.Table != nil && st.Table.TableRefs != nil {
			if ts, ok := st.Table.TableRefs.Left.(*ast.TableSource); ok {
				into, _ = ts.Source.(*ast.TableName)
			}
		}
		var read *tableRef
		for _, r := range b.refs {
			if r.rule == nil || r.rule.Global {
				continue
			}
			if into != nil && r.tn == into {
				return b.buildInsertSelect(st, r, params)
			}
			if read == nil {
				read = r
			}
		}
		if read != nil && into != nil {
			return nil, errorf("INSERT ... SELECT from sharded table %s into %s, a table not sharded with it, is not supported: "+
				"its rows are read on several nodes and keyshard does not write them on another table's node; "+
				"read the rows and insert them with VALUES", read.rule.Table, into.Name.O)
		}
	}
	return nil, nil
}

// buildUnion plans a UNION whose SELECTs read sharded tables.
func (b *builder) buildUnion(st *ast.SetOprStmt, params bool) (*Plan, error) {
	first := b.refs[0].rule
	for _, r := range b.refs {
		if r.rule != nil && !r.rule.Global {
			first = r.rule
			break
		}
	}
	if st.With != nil || st.SelectList == nil || st.SelectList.With != nil {
		return nil, errorf("WITH over a UNION of sharded table %s is not supported: write the CTE's SELECT in each arm", first.Table)
	}
	var sels []*ast.SelectStmt
	distinct, limited := "", false
	if err := unionArms(st.SelectList, &sels, &distinct, &limited); err != nil {
		return nil, errorf("%s inside a UNION on sharded table %s is not supported", err.Error(), first.Table)
	}
	var arms []*arm
	for _, sel := range sels {
		a, err := b.planArm(sel)
		if err != nil {
			return nil, err
		}
		if len(a.sharded) == 0 && len(a.b.plan.unsharded) > 0 {
			return nil, errorf("a UNION of sharded table %s with table %s, which is only on default node %s, is not supported: "+
				"run the SELECT on %s on its own", first.Table, a.b.plan.unsharded[0], b.plan.def, a.b.plan.unsharded[0])
		}
		arms = append(arms, a)
	}
	pl := b.plan
	pl.Kind = PlanSharded
	for _, a := range arms {
		for _, r := range a.sharded {
			if !slices.Contains(pl.tables, r.rule) {
				pl.tables = append(pl.tables, r.rule)
			}
		}
	}
	t := pl.tables[0]
	for _, u := range pl.tables[1:] {
		if why := t.differ(u); why != "" {
			return nil, errorf("UNION of sharded tables %s (%s) and %s (%s) is not supported: they do not place equal keys together (%s); "+
				"run each SELECT on its own", t.Table, t.layout(), u.Table, u.layout(), why)
		}
	}
	// The sub-tables: those any arm may touch.
	var conds []*cond
	all := false
	for _, a := range arms {
		switch {
		case len(a.sharded) == 0:
			if pl.merge == "" {
				pl.merge = "a UNION mixing sharded table " + t.Table + " with a SELECT on no sharded table (it would run on every sub-table) " +
					"is not supported; run that SELECT on its own"
			}
		case a.cond == nil:
			all = true
		default:
			conds = append(conds, a.cond)
		}
		if a.why != "" && pl.merge == "" {
			pl.merge = "UNION where " + a.why
		}
	}
	if !all && len(conds) > 0 {
		pl.cond = conds[0]
		if len(conds) > 1 {
			pl.cond = &cond{op: condOr, kids: conds}
		}
	}
	if pl.merge == "" && (st.OrderBy != nil || st.Limit != nil || limited) {
		pl.merge = "ORDER BY or LIMIT over a UNION spread over several sub-tables is not supported " +
			"(each sub-table would order and limit its own rows); order and limit in the application, or run each SELECT on its own"
	}
	if pl.merge == "" && distinct != "" && !keyInPlace(arms) {
		pl.merge = distinct + " (without ALL) over several sub-tables is not supported unless every SELECT selects its shard key " +
			"in the same position; use UNION ALL, or select the shard key"
	}
	b.aliases = nameFields(arms[0].sel, params)
	return b.finishPushdown(st, params)
}

// unionArms lists the SELECTs of a set operation, at any depth of
// parentheses; distinct: the first operator that is not UNION ALL;
// limited: a parenthesized part has ORDER BY or LIMIT of its own.
func unionArms(n ast.Node, out *[]*ast.SelectStmt, distinct *string, limited *bool) error {
	var op *ast.SetOprType
	switch x := n.(type) {
	case *ast.SetOprSelectList:
		if x.With != nil {
			return errors.New("WITH")
		}
		if x.OrderBy != nil || x.Limit != nil {
			*limited = true
		}
		op = x.AfterSetOperator
		for _, k := range x.Selects {
			if err := unionArms(k, out, distinct, limited); err != nil {
				return err
			}
		}
	case *ast.SelectStmt:
		if x.With != nil {
			return errors.New("WITH")
		}
		op = x.AfterSetOperator
		*out = append(*out, x)
	default:
		return fmt.Errorf("%T", n)
	}
	if op != nil && *op != ast.UnionAll && *distinct == "" {
		*distinct = op.String()
	}
	return nil
}

// keyInPlace reports whether every arm selects a column tied to its shard
// key at one same position: rows of different sub-tables then differ, and
// a UNION, INTERSECT or EXCEPT per sub-table is exact.
func keyInPlace(arms []*arm) bool {
	if arms[0].sel.Fields == nil {
		return false
	}
	for i := range arms[0].sel.Fields.Fields {
		if !slices.ContainsFunc(arms, func(a *arm) bool { return !a.keyAt(i) }) {
			return true
		}
	}
	return false
}

// buildInsertSelect plans INSERT INTO t (...) SELECT ... where the SELECT
// reads tables sharded as t and gives t's key from its own key.
func (b *builder) buildInsertSelect(st *ast.InsertStmt, target *tableRef, params bool) (*Plan, error) {
	t := target.rule
	sel, ok := st.Select.(*ast.SelectStmt)
	if !ok {
		return nil, errorf("INSERT ... SELECT into sharded table %s: a UNION as the SELECT is not supported; insert each SELECT on its own", t.Table)
	}
	for _, a := range st.OnDuplicate {
		if a.Column.Name.L == t.Key {
			return nil, errorf("ON DUPLICATE KEY UPDATE cannot change shard key %s of sharded table %s", t.Key, t.Table)
		}
	}
	a, err := b.planArm(sel)
	if err != nil {
		return nil, err
	}
	if len(a.sharded) == 0 {
		return nil, errorf("INSERT ... SELECT into sharded table %s from no sharded table is not supported: keyshard cannot tell "+
			"each row's sub-table; insert the rows with VALUES", t.Table)
	}
	for _, r := range a.sharded {
		if why := t.differ(r.rule); why != "" {
			return nil, errorf("INSERT ... SELECT into sharded table %s (%s) from sharded table %s (%s) is not supported: "+
				"they do not place equal keys together (%s); read the rows and insert them with INSERT ... VALUES, "+
				"which keyshard routes row by row", t.Table, t.layout(), r.rule.Table, r.rule.layout(), why)
		}
	}
	cols := make([]string, 0, len(st.Columns))
	for _, c := range st.Columns {
		cols = append(cols, c.Name.L)
	}
	if len(cols) == 0 {
		tc := b.cols.table(t.DB, t.Table)
		if tc == nil {
			return nil, errorf("INSERT ... SELECT into sharded table %s must name its columns (the shard key %s among them): "+
				"keyshard does not know the table's columns yet", t.Table, t.Key)
		}
		cols = tc.names
	}
	if sq := t.Seq; sq != nil && !slices.Contains(cols, sq.Column) {
		return nil, errorf("INSERT ... SELECT into sharded table %s must give column %s: ids from sequence %s are not taken for selected rows",
			t.Table, sq.Column, sq.Name)
	}
	ki := slices.Index(cols, t.Key)
	if ki < 0 {
		return nil, errorf("INSERT into sharded table %s must give shard key %s", t.Table, t.Key)
	}
	if sel.Fields != nil && slices.ContainsFunc(sel.Fields.Fields, func(f *ast.SelectField) bool { return f.WildCard != nil }) {
		return nil, errorf("INSERT ... SELECT into sharded table %s: the SELECT must list its columns (not *), "+
			"so keyshard sees where the shard key %s comes from", t.Table, t.Key)
	}
	if sel.Fields == nil || len(sel.Fields.Fields) != len(cols) {
		return nil, errorf("INSERT into %s: column count doesn't match value count", t.Table)
	}
	if !a.keyAt(ki) {
		return nil, errorf("INSERT ... SELECT into sharded table %s is not supported: the inserted shard key %s does not come from "+
			"a co-located key column of the SELECT (select the shard key of %s, or a column equal to it, in its place)",
			t.Table, t.Key, a.sharded[0].rule.Table)
	}
	pl := b.plan
	pl.Kind = PlanSharded
	pl.tables = []*TableRule{t}
	for _, r := range a.sharded {
		if !slices.Contains(pl.tables, r.rule) {
			pl.tables = append(pl.tables, r.rule)
		}
	}
	pl.cond = a.cond
	if a.why != "" {
		pl.merge = "INSERT ... SELECT where " + a.why
	}
	return b.finishPushdown(st, params)
}

// finishPushdown renames the sharded tables of a pushed-down statement by
// pl.tables and makes its template.
func (b *builder) finishPushdown(stmt ast.StmtNode, params bool) (*Plan, error) {
	pl := b.plan
	for _, r := range b.refs {
		if r.rule != nil && !r.rule.Global && r.dupOf == nil {
			r.index = slices.Index(pl.tables, r.rule)
		}
	}
	for _, r := range b.refs {
		if r.dupOf != nil {
			r.index = r.dupOf.index
		}
	}
	if params {
		replaceParams(stmt, &pl.nparams)
	}
	b.renameTables(stmt)
	text, err := restoreStmt(stmt)
	if err != nil {
		return nil, err
	}
	pl.tmpl = parseTemplate(text, params, false, b.aliases)
	return pl, nil
}
