package router

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	driver "github.com/pingcap/tidb/pkg/parser/test_driver"
)

// PlanKind says how a statement is executed.
type PlanKind uint8

// Plan kinds.
const (
	// PlanDefault: the statement touches no sharded table; the client's
	// own bytes go to the schema's default node.
	PlanDefault PlanKind = iota
	// PlanSharded: Bind computes the sub-tables and the rewritten SQL.
	PlanSharded
)

// Plan is the routing plan of one statement shape. It is immutable once
// built and shared by every session through the plan cache; everything that
// depends on the literal values happens in Bind.
type Plan struct {
	Kind PlanKind
	Stmt Kind // statement kind (select, insert, ...)
	// Alters: DDL that changes the existing sub-tables (ALTER TABLE,
	// CREATE or DROP INDEX): they must agree before it runs, or it would
	// leave them further apart.
	Alters bool
	// Creates: CREATE TABLE without IF NOT EXISTS: no sub-table may exist
	// before it runs, or it would create some and fail on the others.
	Creates bool
	// Drops: DROP TABLE without IF EXISTS, or TRUNCATE TABLE: every
	// sub-table must exist before it runs.
	Drops bool

	tables    []*TableRule // sharded tables referenced; all share one layout
	cond      *cond        // which sub-tables the WHERE allows; nil = all
	same      []operand    // keys not tied by equalities, each pinned by a value: must place together
	tmpl      template
	insert    *insertPlan
	merge     string     // non-empty: why a result from several sub-tables needs a merge keyshard lacks
	spec      *MergeSpec // the merge of a SELECT answered by several sub-tables
	mtmpl     template   // what each sub-table runs then
	unsharded []string   // unsharded tables also referenced: the route must be the default node
	copies    []string   // a statement on global table tables[0]: the nodes it runs on, as written
	readNodes []string   // a read of global tables only: the nodes that could answer it
	join      *JoinPlan  // a join the proxy runs (join.go)
	fallback  *JoinPlan  // the join the proxy runs when the sub-tables bound are not all on the default node
	joinWhy   string     // why a join with a table of the default node cannot run in the proxy
	def       string     // default node
	nparams   int
}

// Logical returns the logical table whose sub-table is named name, among
// the plan's tables (ok false: none): what a column definition's table
// says to the client.
func (p *Plan) Logical(name []byte) (string, bool) {
	for _, t := range p.tables {
		if len(name) > len(t.Table) && t.subSet[string(name)] {
			return t.Table, true
		}
	}
	return "", false
}

// Tables returns the sharded tables the plan touches, for EXPLAIN.
func (p *Plan) Tables() []*TableRule { return p.tables }

// Error is a routing error: the statement cannot be routed as written. The
// proxy maps it to ER_NOT_SUPPORTED_YET or, with Parse set, ER_PARSE_ERROR.
type Error struct {
	Msg   string
	Parse bool   // the parser rejected the statement
	Code  uint16 // the errno, when not one of those (0)
}

// erNoPartitionForValue is ER_NO_PARTITION_FOR_GIVEN_VALUE: what MariaDB
// answers for a row no partition holds, and keyshard for a row no
// sub-table of a range or date rule holds.
const erNoPartitionForValue = 1526

func (e *Error) Error() string { return e.Msg }

func errorf(format string, args ...any) *Error {
	return &Error{Msg: "keyshard: " + fmt.Sprintf(format, args...)}
}

// Plan returns the plan for sql run with current database db, and the
// literals to bind it with. A cache hit costs one Normalize pass and a map
// lookup, and allocates nothing: the literals live in p's scratch space and
// are valid until the next Plan or Shape with p (clone them to keep them).
// Statements the router cannot route return an *Error.
func (s *Schema) Plan(p *Parser, sql string, db string, kind Kind) (*Plan, []Literal, error) {
	if kind == KindDDL {
		// DDL keeps its literals (DEFAULT 'x', COMMENT '...'): never cached.
		pl, err := s.build(p, sql, db, kind, false, 0)
		return pl, nil, err
	}
	return s.PlanShape(p, p.Shape(sql, db), sql, db, kind)
}

// Shape is a statement normalized (see Normalize): Key is the plan cache
// key (the current database, a NUL, the shape), which is also the
// statement's digest key; Lits are the literals taken out of it.
type Shape struct {
	Key  []byte
	Lits []Literal
}

// Shape normalizes sql run with current database db. The result lives in
// p's scratch space, valid until the next Shape or Plan with p, except for
// a big statement's, which gets buffers of its own (so the session keeps
// neither a big key buffer nor literals pointing into the big packet once
// the caller drops the Shape).
func (p *Parser) Shape(sql, db string) Shape {
	kb, lits := p.key[:0], p.lits[:0]
	big := len(sql) > 64<<10
	if big {
		kb, lits = nil, nil
	}
	kb, lits = appendShape(append(append(kb, db...), 0), lits, sql)
	if !big {
		p.key, p.lits = kb, lits
	}
	return Shape{Key: kb, Lits: lits}
}

// PlanShape is Plan for sql whose Shape the caller has already (for its
// digest).
func (s *Schema) PlanShape(p *Parser, sh Shape, sql, db string, kind Kind) (*Plan, []Literal, error) {
	if kind == KindDDL {
		pl, err := s.build(p, sql, db, kind, false, 0)
		return pl, nil, err
	}
	kb, lits := sh.Key, sh.Lits
	st := s.state.Load()
	if pl := st.cache.get(kb); pl != nil {
		return pl, lits, nil
	}
	key := string(kb)
	shape := key[len(db)+1:]
	pl, err := s.buildWith(st.cols, p, shape, db, kind, true, len(lits))
	if err == nil {
		st.cache.put(key, pl)
		return pl, lits, nil
	}
	// The shape may not parse where the grammar wants a literal, or the
	// plan may depend on one (ORDER BY 2); plan the statement as written
	// (not cached: its literals are baked in), keeping a prepared
	// statement's own parameters as parameters.
	var params []Literal
	for _, l := range lits {
		if l.Kind == LitParam {
			params = append(params, l)
		}
	}
	if len(params) > 0 {
		pl, err2 := s.buildWith(st.cols, p, sql, db, kind, true, len(params))
		if err2 != nil {
			return nil, nil, err2
		}
		return pl, params, nil
	}
	pl, err2 := s.buildWith(st.cols, p, sql, db, kind, false, 0)
	if err2 != nil {
		return nil, nil, err2
	}
	return pl, nil, nil
}

// build parses text (a shape with ? parameters when params) and plans it.
// nlits is the number of literals Normalize took out of the shape.
func (s *Schema) build(p *Parser, text, db string, kind Kind, params bool, nlits int) (*Plan, error) {
	return s.buildWith(s.state.Load().cols, p, text, db, kind, params, nlits)
}

// buildWith is build with the Columns snapshot cols.
func (s *Schema) buildWith(cols *Columns, p *Parser, text, db string, kind Kind, params bool, nlits int) (*Plan, error) {
	stmts, err := p.Parse(text)
	if err != nil || len(stmts) != 1 {
		if params {
			if err == nil {
				// Not one statement (a batch): PlanShape plans the text
				// as written instead, as for a shape that does not parse.
				err = errors.New("not one statement")
			}
			return nil, err
		}
		// Unparseable: harmless on the default node unless it may touch a
		// sharded table.
		if name := s.mentionsShardedName(text); name != "" {
			msg := "statement could not be parsed"
			if err != nil {
				msg = err.Error()
			}
			return nil, &Error{Msg: fmt.Sprintf("keyshard: cannot route a statement on sharded table %s: %s", name, msg), Parse: true}
		}
		return &Plan{Kind: PlanDefault, Stmt: kind, def: s.Default}, nil
	}
	if params && numberParams(stmts[0]) != nlits {
		// Some ? of the shape is not a parameter the parser saw (inside a
		// comment it skips, say): binding by order would be wrong.
		return nil, errors.New("parameters do not line up with the literals")
	}
	b := &builder{s: s, cols: cols, db: strings.ToLower(db), plan: &Plan{Kind: PlanDefault, Stmt: kind, def: s.Default}, p: p, text: text}
	if params {
		b.base = nlits
	}
	return b.build(stmts[0], params)
}

type tableRef struct {
	tn       *ast.TableName
	rule     *TableRule
	alias    string // lower case; "" when none
	name     string // lower case table name as written
	subquery bool
	index    int       // into plan.tables
	dupOf    *tableRef // the first mention of the same table, if this is a repeat
}

type builder struct {
	s       *Schema
	cols    *Columns  // the tables' columns (nil: none known)
	an      *analysis // scopes and equalities of a statement of several tables; nil: one table
	db      string
	plan    *Plan
	refs    []*tableRef
	aliases []template // the names nameFields gave the select list
	globals bool       // the statement names a global table
	base    int        // the statement's parameters: ids from a sequence are numbered after them
	nseq    int        // ids an INSERT takes from a sequence
	p       *Parser    // the session's parser, and
	text    string     // the text it planned: a join the proxy runs parses it again (join.go)
}

func (b *builder) build(stmt ast.StmtNode, params bool) (*Plan, error) {
	switch stmt.(type) {
	case *ast.SelectStmt, *ast.SetOprStmt, *ast.InsertStmt, *ast.UpdateStmt, *ast.DeleteStmt:
	case *ast.CreateTableStmt, *ast.AlterTableStmt, *ast.DropTableStmt, *ast.TruncateTableStmt,
		*ast.CreateIndexStmt, *ast.DropIndexStmt, *ast.RenameTableStmt:
		return b.buildDDL(stmt)
	default:
		// SHOW, SET, transaction control, ...: the default node.
		return b.plan, nil
	}
	cteWhy, undoWith := "", func() {}
	if sel, ok := stmt.(*ast.SelectStmt); ok && sel.With != nil {
		why, undo, err := inlineWith(sel, func(tn *ast.TableName) bool { // cte.go
			r := b.ddlRule(tn)
			return r != nil && !r.Global
		})
		if err != nil {
			return nil, err
		}
		cteWhy = why
		if undo != nil {
			undoWith = undo
		}
	}
	b.collect(stmt)
	var sharded, globals []*tableRef
	for _, r := range b.refs {
		switch {
		case r.dupOf != nil:
		case r.rule != nil && r.rule.Global:
			globals = append(globals, r)
		case r.rule != nil:
			sharded = append(sharded, r)
		case !slices.Contains(b.plan.unsharded, r.name):
			b.plan.unsharded = append(b.plan.unsharded, r.name)
		}
	}
	if len(globals) > 0 {
		b.globals = true
		if pl, err := b.withGlobals(stmt, sharded, globals, params); pl != nil || err != nil {
			return pl, err
		}
	}
	if len(sharded) == 0 {
		return b.plan, nil
	}
	if _, ok := stmt.(*ast.SelectStmt); ok && len(b.plan.unsharded) > 0 && len(sharded) == 1 && len(globals) == 0 &&
		len(b.refs) == 2 && !sharded[0].rule.onlyOn(b.plan.def) {
		// A sharded table with a table of the default node, whose
		// sub-tables are not all there: joined in the proxy when the
		// statement reaches a sub-table off the default node.
		jpl, err := b.planJoin(params)
		if err == nil {
			b.plan.fallback = jpl.join
		} else if !errors.Is(err, errNoJoin) {
			b.plan.joinWhy = strings.TrimPrefix(err.Error(), "keyshard: ")
		}
	}
	if pl, err := b.pushdown(stmt, params); pl != nil || err != nil {
		return pl, err // UNION, INSERT ... SELECT: pushdown.go
	}
	pl := b.plan
	pl.Kind = PlanSharded
	if _, ins := stmt.(*ast.InsertStmt); !ins && (len(b.refs) > 1 || sharded[0].subquery) {
		b.an = b.analyze(stmt)
	}
	for _, r := range b.refs {
		// A sharded table in a subquery must be one the analysis placed
		// (not in a UNION, a CTE, an INSERT's SELECT), repeats included.
		if r.subquery && r.rule != nil && !r.rule.Global && (b.an == nil || b.an.srcOf[r] == nil) {
			if cteWhy != "" {
				return nil, errorf(cteWhy, r.rule.Table)
			}
			return nil, errorf("sharded table %s in %s is not supported", r.rule.Table, construct(stmt, r.tn))
		}
	}
	for _, r := range sharded {
		i := slices.Index(pl.tables, r.rule)
		if i < 0 {
			i = len(pl.tables)
			pl.tables = append(pl.tables, r.rule)
		}
		r.index = i
	}
	for _, r := range b.refs {
		if r.dupOf != nil {
			r.index = r.dupOf.index
		}
	}
	for _, t := range pl.tables[1:] {
		if why := pl.tables[0].differ(t); why != "" {
			return b.joinOr(params, errorf("cross-shard join not supported: %s (%s) and %s (%s) do not place equal keys together: %s",
				pl.tables[0].Table, pl.tables[0].layout(), t.Table, t.layout(), why))
		}
	}
	if b.an != nil {
		if err := b.an.colocate(); err != nil {
			return b.joinOr(params, err)
		}
		pl.same = b.an.same
	}

	var where ast.ExprNode
	switch st := stmt.(type) {
	case *ast.SelectStmt:
		where = st.Where
		pl.merge = selectMerge(st)
		if strings.HasPrefix(pl.merge, "window function") {
			// Only window functions: exact per sub-table when each
			// partition lives in one (window.go).
			pl.merge = b.windowWhy(st)
		}
	case *ast.SetOprStmt:
		pl.merge = "UNION over several sub-tables is not supported"
	case *ast.UpdateStmt:
		where = st.Where
		for _, a := range st.List {
			if r := b.keyColumn(a.Column); r != nil {
				return nil, errorf("cannot update shard key %s of sharded table %s: delete and re-insert the row", r.rule.Key, r.rule.Table)
			}
		}
		if st.Limit != nil || st.Order != nil {
			pl.merge = "UPDATE/DELETE with ORDER BY or LIMIT over several sub-tables is not supported"
		}
	case *ast.DeleteStmt:
		where = st.Where
		if st.Limit != nil || st.Order != nil {
			pl.merge = "UPDATE/DELETE with ORDER BY or LIMIT over several sub-tables is not supported"
		}
	case *ast.InsertStmt:
		if err := b.buildInsert(st, sharded); err != nil {
			return nil, err
		}
		// Ids from a sequence are bound as parameters, whatever the
		// statement's own literals are.
		params = params || b.nseq > 0
	}
	if where != nil {
		pl.cond = b.condOf(where)
	}
	if b.an != nil {
		for _, c := range b.an.narrow() {
			if pl.cond == nil {
				pl.cond = c
			} else {
				pl.cond = &cond{op: condAnd, kids: []*cond{pl.cond, c}}
			}
		}
	}
	if sel, ok := stmt.(*ast.SelectStmt); ok {
		b.aliases = nameFields(sel, params)
	}
	undoWith() // the WITH as the client wrote it, its tables renamed below
	if params {
		replaceParams(stmt, &pl.nparams)
	}
	b.renameTables(stmt)
	if pl.insert != nil {
		ins := stmt.(*ast.InsertStmt)
		if err := finishInsert(ins, pl.insert, params); err != nil {
			return nil, errorf("cannot rewrite the statement: %v", err)
		}
		ins.Lists = [][]ast.ExprNode{{ast.NewValueExpr(int64(rowsMarker), "", "")}}
	}
	text, err := restoreStmt(stmt)
	if err != nil {
		return nil, err
	}
	pl.tmpl = parseTemplate(text, params, false, b.aliases)
	if sel, ok := stmt.(*ast.SelectStmt); ok && pl.merge != "" {
		spec, err := b.buildMerge(sel)
		var un *errMergeUnsupported
		switch {
		case errors.As(err, &un):
			pl.merge = strings.TrimPrefix(un.msg, "keyshard: ")
		case err != nil:
			return nil, err
		default:
			if text, err = restoreStmt(stmt); err != nil {
				return nil, err
			}
			pl.spec, pl.mtmpl = spec, parseTemplate(text, params, true, b.aliases)
		}
	}
	return pl, nil
}

// restoreStmt restores a planned statement as MariaDB reads it.
func restoreStmt(stmt ast.StmtNode) (string, error) {
	text, err := restore(stmt)
	if err != nil {
		return "", errorf("cannot rewrite the statement: %v", err)
	}
	if sel, ok := stmt.(*ast.SelectStmt); ok && sel.LockInfo != nil && sel.LockInfo.LockType == ast.SelectLockForShare &&
		strings.HasSuffix(text, " FOR SHARE") {
		// TiDB writes LOCK IN SHARE MODE as FOR SHARE, which MariaDB
		// before 10.12 does not know.
		text = strings.TrimSuffix(text, " FOR SHARE") + " LOCK IN SHARE MODE"
	}
	return text, nil
}

// collect finds every table the statement names, with its alias.
func (b *builder) collect(stmt ast.StmtNode) {
	v := &refCollector{b: b, seen: map[*ast.TableName]bool{}}
	if _, ok := stmt.(*ast.SelectStmt); ok {
		v.selects = -1 // the statement itself is not a subquery
	}
	stmt.Accept(v)
}

type refCollector struct {
	b       *builder
	seen    map[*ast.TableName]bool
	selects int
	cte     map[string]bool
}

func (v *refCollector) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.SelectStmt:
		v.selects++
		if x.With != nil {
			if v.cte == nil {
				v.cte = map[string]bool{}
			}
			for _, c := range x.With.CTEs {
				v.cte[c.Name.L] = true
			}
		}
	case *ast.SetOprStmt:
		v.selects++
	case *ast.TableSource:
		if tn, ok := x.Source.(*ast.TableName); ok {
			v.add(tn, x.AsName.L)
		}
	case *ast.TableName:
		v.add(x, "")
	}
	return n, false
}

func (v *refCollector) Leave(n ast.Node) (ast.Node, bool) {
	switch n.(type) {
	case *ast.SelectStmt, *ast.SetOprStmt:
		v.selects--
	}
	return n, true
}

func (v *refCollector) add(tn *ast.TableName, alias string) {
	if v.seen[tn] {
		return
	}
	v.seen[tn] = true
	if tn.Schema.L == "" && v.cte[tn.Name.L] {
		return
	}
	db := tn.Schema.L
	if db == "" {
		db = v.b.db
	}
	r := &tableRef{tn: tn, alias: alias, name: tn.Name.L, subquery: v.selects > 0}
	if db != "" {
		r.rule = v.b.s.Table(db, tn.Name.L)
	}
	if alias == "" && tn.Schema.L == "" {
		for _, o := range v.b.refs {
			if o.alias == tn.Name.L {
				// DELETE a FROM t AS a: the target names an alias already
				// recorded; nothing to route or rename.
				return
			}
		}
	}
	if alias == "" {
		for _, o := range v.b.refs {
			if o.alias == "" && o.dupOf == nil && o.name == r.name && o.rule == r.rule && (o.rule != nil || o.tn.Schema.L == tn.Schema.L) {
				// The same unaliased table named twice (DELETE t FROM t):
				// one table, renamed in both places.
				r.dupOf = o
				break
			}
		}
	}
	v.b.refs = append(v.b.refs, r)
}

// keyColumn returns the sharded table whose shard key c names, or nil.
func (b *builder) keyColumn(c *ast.ColumnName) *tableRef {
	if c == nil {
		return nil
	}
	if b.an != nil {
		return b.an.keyOf(c)
	}
	var found *tableRef
	for _, r := range b.refs {
		if r.rule == nil || c.Name.L != r.rule.Key {
			continue
		}
		switch {
		case c.Table.L == "":
		case r.alias != "" && c.Table.L == r.alias:
		case r.alias == "" && c.Table.L == r.name && (c.Schema.L == "" || c.Schema.L == r.rule.DB):
		default:
			continue
		}
		if found == nil {
			found = r
		}
	}
	if found != nil && c.Table.L == "" {
		// An unqualified name is the key only if no unsharded table could
		// own a column of that name; with unsharded tables present we
		// cannot tell, so we do not narrow by it... unless it is the only
		// table.
		if len(b.refs) > 1 && (len(b.plan.unsharded) > 0 || b.globals) {
			return nil
		}
	}
	return found
}

func conjuncts(e ast.ExprNode) []ast.ExprNode {
	if e == nil {
		return nil
	}
	switch x := e.(type) {
	case *ast.ParenthesesExpr:
		return conjuncts(x.Expr)
	case *ast.BinaryOperationExpr:
		if x.Op == opcode.LogicAnd {
			return append(conjuncts(x.L), conjuncts(x.R)...)
		}
	}
	return []ast.ExprNode{e}
}

// selectMerge says why a SELECT answered by several sub-tables would need
// a merge step ("" when concatenating the results is exact).
func selectMerge(st *ast.SelectStmt) string {
	switch {
	case st.GroupBy != nil:
		return "GROUP BY"
	case st.Having != nil:
		return "HAVING"
	case st.OrderBy != nil:
		return "ORDER BY"
	case st.Limit != nil:
		return "LIMIT"
	case st.Distinct:
		return "DISTINCT"
	case st.SelectStmtOpts != nil && st.SelectStmtOpts.CalcFoundRows:
		return "SQL_CALC_FOUND_ROWS"
	}
	if st.Fields != nil {
		v := &aggFinder{}
		for _, f := range st.Fields.Fields {
			if f.Expr != nil {
				f.Expr.Accept(v)
			}
		}
		if v.found != "" {
			return v.found
		}
	}
	return ""
}

type aggFinder struct{ found string }

func (v *aggFinder) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.AggregateFuncExpr:
		v.found = strings.ToUpper(x.F) + "()"
		return n, true
	case *ast.WindowFuncExpr:
		v.found = "window function " + strings.ToUpper(x.Name) + "()"
		return n, true
	case *ast.SubqueryExpr:
		return n, true
	}
	return n, false
}
func (v *aggFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// numberParams gives each ? its order in the text (the parser leaves Order
// to the planner that usually runs after it).
func numberParams(stmt ast.StmtNode) int {
	v := &paramCollector{}
	stmt.Accept(v)
	slices.SortFunc(v.params, func(a, b *driver.ParamMarkerExpr) int { return a.Offset - b.Offset })
	for i, pm := range v.params {
		pm.Order = i
	}
	return len(v.params)
}

type paramCollector struct{ params []*driver.ParamMarkerExpr }

func (v *paramCollector) Enter(n ast.Node) (ast.Node, bool) {
	if pm, ok := n.(*driver.ParamMarkerExpr); ok {
		v.params = append(v.params, pm)
	}
	return n, false
}
func (v *paramCollector) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// replaceParams turns every ? into an integer marker carrying its order.
func replaceParams(stmt ast.StmtNode, n *int) {
	stmt.Accept(&paramReplacer{n: n})
}

type paramReplacer struct{ n *int }

func (v *paramReplacer) Enter(n ast.Node) (ast.Node, bool) { return n, false }
func (v *paramReplacer) Leave(n ast.Node) (ast.Node, bool) {
	if pm, ok := n.(*driver.ParamMarkerExpr); ok {
		*v.n = max(*v.n, pm.Order+1)
		return ast.NewValueExpr(int64(markerBase+pm.Order), "", ""), true
	}
	return n, true
}

// renameTables puts table markers on sharded table names and on column
// qualifiers that use the table's own name.
func (b *builder) renameTables(stmt ast.StmtNode) {
	byTN := map[*ast.TableName]*tableRef{}
	for _, r := range b.refs {
		if r.rule != nil && !r.rule.Global {
			byTN[r.tn] = r
		}
	}
	stmt.Accept(&renamer{b: b, byTN: byTN})
}

type renamer struct {
	b    *builder
	byTN map[*ast.TableName]*tableRef
}

func (v *renamer) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.TableName:
		if r := v.byTN[x]; r != nil {
			x.Name = ast.NewCIStr(tableMarker(r.index))
		}
	case *ast.SelectField:
		// tbl.* (and db.tbl.*) name the table like a column qualifier; the
		// wildcard is not a node Accept visits.
		if x.WildCard != nil {
			v.qualifier(x.WildCard.Schema, &x.WildCard.Table)
		}
	case *ast.WildCardField:
		v.qualifier(x.Schema, &x.Table)
	case *ast.ColumnName:
		v.qualifier(x.Schema, &x.Table)
	}
	return n, false
}
func (v *renamer) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// qualifier marks a column or wildcard qualifier that names a sharded
// table by its own name (an alias needs no change).
func (v *renamer) qualifier(schema ast.CIStr, table *ast.CIStr) {
	if table.L == "" {
		return
	}
	for _, r := range v.b.refs {
		if r.rule != nil && !r.rule.Global && r.alias == "" && table.L == r.name && (schema.L == "" || schema.L == r.rule.DB) {
			*table = ast.NewCIStr(tableMarker(r.index))
			return
		}
	}
}

// buildDDL plans DDL on a sharded table: run on every sub-table.
// ddlRule is the shard rule of table tn of a DDL statement, or nil.
func (b *builder) ddlRule(tn *ast.TableName) *TableRule {
	db := tn.Schema.L
	if db == "" {
		db = b.db
	}
	return b.s.Table(db, tn.Name.L)
}

// tableNames collects the tables a statement names.
type tableNames struct{ names []*ast.TableName }

func (v *tableNames) Enter(n ast.Node) (ast.Node, bool) {
	if tn, ok := n.(*ast.TableName); ok {
		v.names = append(v.names, tn)
	}
	return n, false
}

func (v *tableNames) Leave(n ast.Node) (ast.Node, bool) { return n, true }

func (b *builder) buildDDL(stmt ast.StmtNode) (*Plan, error) {
	var names []*ast.TableName
	switch st := stmt.(type) {
	case *ast.CreateTableStmt:
		names = []*ast.TableName{st.Table}
		if st.ReferTable != nil {
			if r := b.ddlRule(st.ReferTable); r != nil {
				return nil, errorf("CREATE TABLE ... LIKE %s is not supported: it is not one table on one node "+
					"(SHOW CREATE TABLE %s gives its definition)", r.Named(), r.Table)
			}
		}
		if st.Select != nil {
			v := &tableNames{}
			st.Select.Accept(v)
			for _, tn := range append(v.names, st.Table) {
				if r := b.ddlRule(tn); r != nil {
					return nil, errorf("CREATE TABLE ... SELECT with %s is not supported: its rows are in tables "+
						"on several nodes; create the table, then copy the rows", r.Named())
				}
			}
		}
	case *ast.AlterTableStmt:
		names = []*ast.TableName{st.Table}
		for _, spec := range st.Specs {
			if spec.Tp == ast.AlterTableRenameTable {
				if r := b.ddlRule(st.Table); r != nil {
					return nil, errorf("RENAME TABLE of %s is not supported: its sub-tables and its shard rule "+
						"keep their names (rename them and the rule together, then reload)", r.Named())
				}
			}
		}
	case *ast.DropTableStmt:
		names = st.Tables
	case *ast.TruncateTableStmt:
		names = []*ast.TableName{st.Table}
	case *ast.CreateIndexStmt:
		names = []*ast.TableName{st.Table}
	case *ast.DropIndexStmt:
		names = []*ast.TableName{st.Table}
	case *ast.RenameTableStmt:
		for _, t := range st.TableToTables {
			for _, tn := range []*ast.TableName{t.OldTable, t.NewTable} {
				if r := b.ddlRule(tn); r != nil {
					return nil, errorf("RENAME TABLE of %s is not supported: its sub-tables and its shard rule "+
						"keep their names (rename them and the rule together, then reload)", r.Named())
				}
			}
		}
	}
	var hit *tableRef
	for _, tn := range names {
		db := tn.Schema.L
		if db == "" {
			db = b.db
		}
		if r := b.s.Table(db, tn.Name.L); r != nil {
			if hit != nil || len(names) > 1 {
				return nil, errorf("DDL naming %s together with other tables is not supported: one table per statement", r.Named())
			}
			hit = &tableRef{tn: tn, rule: r, name: tn.Name.L}
		}
	}
	if hit == nil {
		return b.plan, nil
	}
	switch st := stmt.(type) {
	case *ast.AlterTableStmt, *ast.CreateIndexStmt, *ast.DropIndexStmt:
		b.plan.Alters = true
	case *ast.CreateTableStmt:
		b.plan.Creates = !st.IfNotExists && st.TemporaryKeyword == ast.TemporaryNone
	case *ast.DropTableStmt:
		b.plan.Drops = !st.IfExists && !st.IsView && st.TemporaryKeyword == ast.TemporaryNone
	case *ast.TruncateTableStmt:
		b.plan.Drops = true
	}
	if hit.rule.Global {
		return b.copiesPlan(stmt, hit.rule, hit.rule.Nodes, false)
	}
	b.refs = []*tableRef{hit}
	b.plan.Kind = PlanSharded
	b.plan.tables = []*TableRule{hit.rule}
	b.renameTables(stmt)
	text, err := restore(stmt)
	if err != nil {
		return nil, errorf("cannot rewrite the statement: %v", err)
	}
	b.plan.tmpl = parseTemplate(text, false, false, nil)
	return b.plan, nil
}
