package router

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/keyshard/keyshard/router/shard"
	"github.com/pingcap/tidb/pkg/parser/ast"
	driver "github.com/pingcap/tidb/pkg/parser/test_driver"
)

// insertPlan is the part of a plan that splits INSERT/REPLACE ... VALUES
// rows by sub-table.
type insertPlan struct {
	keys []operand  // the shard key of each row
	rows []template // each row, "(v1,v2,...)", with parameter markers
	// seq: the rows' places for ids from this sequence (see seqSlot).
	seq             *Sequence
	seqBase, seqNew int // the statement's literals; the markers keyshard added after them
	slots           []seqSlot
	// ignore: INSERT IGNORE, which skips a row no sub-table holds as
	// MariaDB skips one no partition holds.
	ignore bool
}

func (b *builder) buildInsert(st *ast.InsertStmt, sharded []*tableRef) error {
	var target *tableRef
	for _, r := range sharded {
		if st.Table != nil && st.Table.TableRefs != nil {
			if ts, ok := st.Table.TableRefs.Left.(*ast.TableSource); ok && ts.Source == ast.ResultSetNode(r.tn) {
				target = r
			}
		}
	}
	if target == nil {
		// The sharded table is only read (INSERT INTO plain SELECT FROM sharded).
		return errorf("INSERT ... SELECT reading sharded table %s is not supported", sharded[0].rule.Table)
	}
	t := target.rule
	if len(sharded) > 1 || st.Select != nil {
		return errorf("INSERT ... SELECT into sharded table %s is not supported", t.Table)
	}
	for _, a := range st.OnDuplicate {
		if a.Column.Name.L == t.Key {
			return errorf("ON DUPLICATE KEY UPDATE cannot change shard key %s of sharded table %s", t.Key, t.Table)
		}
	}
	// INSERT ... SET k = v arrives as columns and one row; it is rewritten
	// in the VALUES form.
	st.Setlist = false
	if len(st.Columns) == 0 {
		// No column list: the table's own columns, in order, when keyshard
		// knows them; the rewritten statement names them.
		tc := b.cols.table(t.DB, t.Table)
		if tc == nil {
			return errorf("INSERT into sharded table %s must name its columns (the shard key %s among them): "+
				"keyshard does not know the table's columns yet", t.Table, t.Key)
		}
		for _, row := range st.Lists {
			if len(row) != len(tc.names) {
				return errorf("INSERT into %s: column count doesn't match value count", t.Table)
			}
		}
		for _, n := range tc.names {
			st.Columns = append(st.Columns, &ast.ColumnName{Name: ast.NewCIStr(n)})
		}
	}
	var slots []seqSlot
	if sq := t.Seq; sq != nil && len(st.Columns) > 0 {
		// The rows that omit the sequence's column, or give it NULL,
		// DEFAULT or 0, take an id from the sequence: a marker the bound
		// ids fill. A value that is a literal of the statement (or a ?)
		// takes one only if it binds to NULL or 0.
		ci := slices.IndexFunc(st.Columns, func(c *ast.ColumnName) bool { return c.Name.L == sq.Column })
		if ci < 0 {
			st.Columns = append(st.Columns, &ast.ColumnName{Name: ast.NewCIStr(sq.Column)})
		}
		for i, row := range st.Lists {
			if ci >= 0 && ci >= len(row) {
				continue // the column count check below says so
			}
			var e ast.ExprNode
			if ci >= 0 {
				e = row[ci]
			}
			pm, isParam := e.(*driver.ParamMarkerExpr)
			switch {
			case ci < 0:
				m := b.seqMarker()
				st.Lists[i] = append(row, m)
				slots = append(slots, seqSlot{lit: m.Order})
			case isParam && pm.Order < b.base:
				slots = append(slots, seqSlot{lit: pm.Order, maybe: true})
			case isParam:
				// A ? that is not one of the statement's literals (in an
				// executable comment): its number is not one to bind.
				return errorf("INSERT into sharded table %s: cannot tell whether column %s takes an id from sequence %s; "+
					"give it a plain value, NULL or leave it out", t.Table, sq.Column, sq.Name)
			case takesID(e):
				m := b.seqMarker()
				row[ci] = m
				slots = append(slots, seqSlot{lit: m.Order})
			}
		}
	}
	if len(st.Columns) == 0 {
		return errorf("INSERT into sharded table %s must name its columns (the shard key %s among them)", t.Table, t.Key)
	}
	ki := slices.IndexFunc(st.Columns, func(c *ast.ColumnName) bool { return c.Name.L == t.Key })
	if ki < 0 {
		return errorf("INSERT into sharded table %s must give shard key %s", t.Table, t.Key)
	}
	ip := &insertPlan{ignore: st.IgnoreErr}
	for _, row := range st.Lists {
		if len(row) != len(st.Columns) {
			return errorf("INSERT into %s: column count doesn't match value count", t.Table)
		}
		o, ok := operandOf(row[ki])
		if !ok {
			return errorf("shard key %s of sharded table %s must be a literal value in INSERT", t.Key, t.Table)
		}
		ip.keys = append(ip.keys, o)
	}
	// Row templates are restored after the parameters are replaced: build
	// them lazily in finishInsert.
	b.plan.insert = ip
	if len(slots) > 0 {
		ip.seq, ip.seqBase, ip.seqNew, ip.slots = t.Seq, b.base, b.nseq, slots
	}
	return nil
}

// seqSlot is a row's place for an id from the sequence: literal lit (a
// marker keyshard added, or with maybe, a literal or ? of the statement,
// which takes an id only when it is NULL or 0).
type seqSlot struct {
	lit   int
	maybe bool
}

// seqMarker is the place of the next id an INSERT takes from a sequence:
// a parameter numbered after the statement's literals.
func (b *builder) seqMarker() *driver.ParamMarkerExpr {
	pm := &driver.ParamMarkerExpr{Order: b.base + b.nseq}
	b.nseq++
	return pm
}

// takesID reports whether a value written in the statement for the
// sequence's column asks for an id, as for AUTO_INCREMENT: NULL, DEFAULT
// or 0.
func takesID(e ast.ExprNode) bool {
	switch x := e.(type) {
	case *ast.DefaultExpr:
		return x.Name == nil
	case *driver.ValueExpr:
		return zeroOrNull(x.GetValue())
	}
	return false
}

func zeroOrNull(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case int64:
		return x == 0
	case uint64:
		return x == 0
	case float64:
		return x == 0
	case string:
		return isZeroText(x) // '0', or a ? bound as a string (PDO, setString)
	case []byte:
		return isZeroText(string(x))
	}
	return false
}

// isZeroText reports whether s reads as the number 0, as the server
// converts a string stored in an integer column.
func isZeroText(s string) bool {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return err == nil && f == 0
}

// Sequence returns the sequence an INSERT bound to lits takes ids from and
// how many (nil, 0: none). Bind then wants the literals WithIDs returns.
func (p *Plan) Sequence(lits []Literal) (*Sequence, int) {
	if p.insert == nil || p.insert.seq == nil {
		return nil, 0
	}
	n := 0
	for _, sl := range p.insert.slots {
		if !sl.maybe || sl.lit < len(lits) && zeroOrNull(lits[sl.lit].Value()) {
			n++
		}
	}
	return p.insert.seq, n
}

// WithIDs returns, in a new slice, lits with the ids first, first+1, ...
// (as many as Sequence said) in the rows' places for them, in row order,
// and after them one literal more holding first: the statement's insert
// id for Bind.
func (p *Plan) WithIDs(lits []Literal, first uint64) []Literal {
	ip := p.insert
	out := make([]Literal, ip.seqBase+ip.seqNew, ip.seqBase+ip.seqNew+1)
	copy(out, lits[:min(len(lits), ip.seqBase)])
	id := first
	for _, sl := range ip.slots {
		if sl.maybe && !zeroOrNull(out[sl.lit].Value()) {
			continue
		}
		out[sl.lit] = Literal{Kind: LitInt, Text: strconv.FormatUint(id, 10)}
		id++
	}
	return append(out, Literal{Kind: LitInt, Text: strconv.FormatUint(first, 10)})
}

// finishInsert restores each VALUES row on its own (with markers).
func finishInsert(st *ast.InsertStmt, ip *insertPlan, params bool) error {
	for _, row := range st.Lists {
		var sb strings.Builder
		sb.WriteByte('(')
		for i, e := range row {
			if i > 0 {
				sb.WriteByte(',')
			}
			s, err := restore(e)
			if err != nil {
				return err
			}
			sb.WriteString(s)
		}
		sb.WriteByte(')')
		ip.rows = append(ip.rows, parseTemplate(sb.String(), params, false, nil))
	}
	return nil
}

// Route is what one node runs for a statement: one SQL statement per
// sub-table.
type Route struct {
	Node      string
	SubTables []string
	SQL       []string
	// Params is set for a prepared statement whose parameters are not all
	// passed in order to every SQL (a split INSERT): Params[i] lists, in
	// order, the statement's parameters that SQL[i] takes. nil means every
	// SQL takes them all, as the client sent them.
	Params [][]int
}

// Routing is a bound plan: where the statement goes and as what.
type Routing struct {
	Routes []Route
	// InsertID: the first id an INSERT took from a sequence, which its OK
	// and LAST_INSERT_ID() report (0: none).
	InsertID uint64
	// Copies: the routes run one statement on the copies of a global
	// table; its OK counts the first route's rows only.
	Copies bool
	// FirstRow: for a split INSERT, the route and statement index holding
	// the statement's first row (whose insert id MySQL reports).
	FirstRoute, FirstSQL int
	// Merge is set when several sub-tables answer a statement whose result
	// needs a merge step keyshard does not do: it says which.
	Merge string
	// Spec is set when several sub-tables answer a SELECT that the proxy
	// merges; Offset and Count are its LIMIT (Count -1: none) and Args the
	// values of the statement's literals, for its expressions.
	Spec          *MergeSpec
	Offset, Count int64
	Args          []any
	// Join is set when the statement is a join the proxy runs (package
	// proxy/join): nothing else is.
	Join *JoinPlan

	// Inline storage: a routing to one sub-table (the common case) needs
	// no allocation beyond the Routing itself and its SQL.
	one    [1]Route
	oneSub [1]string
	oneSQL [1]string
	subs   [8]int
}

// Targets counts the sub-tables the routing touches.
func (r *Routing) Targets() int {
	n := 0
	for _, rt := range r.Routes {
		n += len(rt.SQL)
	}
	return n
}

// Bind computes the routing of a sharded plan for the given literals.
// prefix (leading comments of the client's statement) is kept in front of
// every rewritten statement.
func (p *Plan) Bind(lits []Literal, prefix string) (*Routing, error) {
	rt := &Routing{}
	if err := p.BindTo(rt, lits, prefix); err != nil {
		return nil, err
	}
	return rt, nil
}

// BindTo is Bind into rt, which it resets first: a caller that keeps one
// Routing per session routes a point statement with no allocation but its
// SQL.
func (p *Plan) BindTo(rt *Routing, lits []Literal, prefix string) error {
	*rt = Routing{}
	if p.Kind != PlanSharded {
		return errors.New("keyshard: Bind on an unsharded plan")
	}
	if len(lits) < p.nparams {
		return errorf("statement has %d literals, plan wants %d", len(lits), p.nparams)
	}
	if p.copies != nil {
		return p.bindCopies(rt, lits, prefix)
	}
	if p.join != nil {
		rt.Join = p.join
		return nil
	}
	t := p.tables[0]
	var nameBuf [4]string
	names := nameBuf[:0]
	if len(p.tables) > len(nameBuf) {
		names = make([]string, 0, len(p.tables))
	}
	names = names[:len(p.tables)]
	if p.insert != nil {
		return p.bindInsert(rt, t, lits, prefix, names)
	}
	if err := p.together(t, lits); err != nil {
		return err
	}
	subs, err := p.cond.eval(t.Rule, lits, rt.subs[:0])
	if err != nil {
		if errors.Is(err, shard.ErrKeyOutOfRange) {
			subs = []int{} // no sub-table can hold the row
		} else {
			return keyErr(t, err)
		}
	}
	if subs == nil {
		subs = make([]int, len(t.subs))
		for i := range subs {
			subs[i] = i
		}
	}
	if len(subs) == 0 {
		// Nothing can match; one sub-table gives the right empty answer
		// (an INSERT ... SELECT whose key no sub-table holds inserts
		// nothing, as MariaDB's would).
		subs = []int{0}
	}
	tmpl, extra := p.tmpl, ""
	var params []int
	if len(subs) > 1 && p.spec != nil {
		var err error
		if extra, err = rt.bindMerge(p.spec, lits); err != nil {
			return err
		}
		tmpl = p.mtmpl
		if hasParams(lits) {
			// The statement drops the parameters of HAVING and LIMIT.
			params = tmpl.params([]int{}, lits, nil)
		}
	} else {
		if len(subs) > 1 && p.merge != "" {
			rt.Merge = p.merge
		}
		if hasParams(lits) {
			params = reordered(tmpl, lits)
		}
	}
	for _, i := range subs {
		for j, tr := range p.tables {
			names[j] = tr.SubTableName(i)
		}
		var sb strings.Builder
		sb.Grow(len(prefix) + tmpl.size())
		sb.WriteString(prefix)
		tmpl.render(&sb, names, lits, extra)
		rt.add(t.NodeOf(i), t.SubTableName(i), sb.String(), params)
	}
	if len(p.unsharded) > 0 {
		for _, r := range rt.Routes {
			if r.Node != p.def {
				if p.fallback != nil {
					*rt = Routing{Join: p.fallback}
					return nil
				}
				err := errorf("cross-shard join not supported: unsharded table %s lives on default node %s, but sharded %s needs node %s",
					p.unsharded[0], p.def, t.Table, r.Node)
				if p.joinWhy != "" {
					err.Msg += "; " + p.joinWhy
				}
				return err
			}
		}
	}
	return nil
}

// reordered returns the parameters in the order the rendered text holds
// them, or nil when that is the client's order (the common case, which
// then passes them all as they came). The restored text may order them
// otherwise: LIMIT ? OFFSET ? is restored as LIMIT ?,? (offset first).
func reordered(tmpl template, lits []Literal) []int {
	var buf [16]int
	ps := tmpl.params(buf[:0], lits, nil)
	inOrder := true
	for i, n := range ps {
		if n != i {
			inOrder = false
			break
		}
	}
	if inOrder && len(ps) == countParams(lits) {
		return nil
	}
	return slices.Clone(ps)
}

func countParams(lits []Literal) int {
	n := 0
	for i := range lits {
		if lits[i].Kind == LitParam {
			n++
		}
	}
	return n
}

// bindMerge binds a merge: the literal values its expressions use and the
// LIMIT. It returns the LIMIT each sub-table runs ("" when none).
func (rt *Routing) bindMerge(spec *MergeSpec, lits []Literal) (string, error) {
	rt.Spec = spec
	rt.Args = make([]any, len(lits))
	for i := range lits {
		rt.Args[i] = LitValue(lits[i])
	}
	rt.Count = -1
	if spec.Count == nil {
		return "", nil
	}
	n, err := rt.limitArg(spec.Count)
	if err != nil {
		return "", err
	}
	var off int64
	if spec.Offset != nil {
		if off, err = rt.limitArg(spec.Offset); err != nil {
			return "", err
		}
	}
	rt.Offset, rt.Count = off, n
	sum := uint64(off) + uint64(n)
	if sum > math.MaxInt64 {
		sum = math.MaxInt64
	}
	return strconv.FormatUint(sum, 10), nil
}

func (rt *Routing) limitArg(e *Expr) (int64, error) {
	v := e.Val
	if e.Op == ExprLit {
		v = rt.Args[e.Lit]
	}
	switch x := v.(type) {
	case int64:
		if x >= 0 {
			return x, nil
		}
	case uint64:
		return int64(min(x, math.MaxInt64)), nil
	}
	return 0, errorf("LIMIT takes non-negative integers, not %v", v)
}

func keyErr(t *TableRule, err error) error {
	e := errorf("shard key %s of %s: %v", t.Key, t.Table, err)
	if errors.Is(err, shard.ErrKeyOutOfRange) {
		e.Code = erNoPartitionForValue // as MariaDB for a value no partition holds
	}
	return e
}

func (rt *Routing) add(node, sub, sql string, params []int) {
	if len(rt.Routes) == 0 && params == nil {
		rt.oneSub[0], rt.oneSQL[0] = sub, sql
		rt.one[0] = Route{Node: node, SubTables: rt.oneSub[:1:1], SQL: rt.oneSQL[:1:1]}
		rt.Routes = rt.one[:1:1]
		return
	}
	for i := range rt.Routes {
		if r := &rt.Routes[i]; r.Node == node {
			r.SubTables = append(r.SubTables, sub)
			r.SQL = append(r.SQL, sql)
			if params != nil || r.Params != nil {
				if r.Params == nil {
					r.Params = make([][]int, len(r.SQL)-1)
				}
				r.Params = append(r.Params, params)
			}
			return
		}
	}
	r := Route{Node: node, SubTables: []string{sub}, SQL: []string{sql}}
	if params != nil {
		r.Params = [][]int{params}
	}
	rt.Routes = append(rt.Routes, r)
}

func (p *Plan) bindInsert(rt *Routing, t *TableRule, lits []Literal, prefix string, names []string) error {
	ip := p.insert
	if ip.seq != nil && len(lits) > ip.seqBase+ip.seqNew {
		// The first id the statement took is its insert id, as the
		// first auto-increment value MariaDB generates is (WithIDs put
		// it last, when the rows took any).
		rt.InsertID, _ = strconv.ParseUint(lits[ip.seqBase+ip.seqNew].Text, 10, 64)
	}
	bySub := map[int][]int{}
	var order []int
	skipped := false
	for r, k := range ip.keys {
		i, null, err := k.find(t.Rule, lits)
		if null {
			return errorf("shard key %s of sharded table %s cannot be NULL", t.Key, t.Table)
		}
		if err != nil && ip.ignore && errors.Is(err, shard.ErrKeyOutOfRange) {
			skipped = true // INSERT IGNORE: the row is left out, the others go in
			continue
		}
		if err != nil {
			return keyErr(t, err)
		}
		if _, ok := bySub[i]; !ok {
			order = append(order, i)
		}
		bySub[i] = append(bySub[i], r)
	}
	slices.Sort(order)
	if len(order) == 0 {
		// INSERT IGNORE of rows no sub-table holds: MariaDB answers OK,
		// 0 rows affected. So does a statement that changes nothing.
		rt.add(t.NodeOf(0), t.SubTableName(0), prefix+"DO 0", []int{})
		return nil
	}
	// Each statement's parameters, when not all are passed in order: a
	// split INSERT, one that left rows out, or one where an id replaced a ?
	// bound to NULL or 0.
	prepared := hasParams(lits) && (len(order) > 1 || skipped) || slices.ContainsFunc(ip.slots, func(s seqSlot) bool { return s.maybe })
	for _, i := range order {
		var rows strings.Builder
		var rowParams, params []int
		for n, r := range bySub[i] {
			if n > 0 {
				rows.WriteByte(',')
			}
			ip.rows[r].render(&rows, nil, lits, "")
			if prepared {
				rowParams = ip.rows[r].params(rowParams, lits, nil)
			}
		}
		if prepared {
			params = p.tmpl.params([]int{}, lits, rowParams)
		}
		for j, tr := range p.tables {
			names[j] = tr.SubTableName(i)
		}
		var sb strings.Builder
		sb.Grow(len(prefix) + p.tmpl.size() + rows.Len())
		sb.WriteString(prefix)
		p.tmpl.render(&sb, names, lits, rows.String())
		node := t.NodeOf(i)
		rt.add(node, t.SubTableName(i), sb.String(), params)
		if bySub[i][0] == 0 {
			rt.FirstRoute = slices.IndexFunc(rt.Routes, func(r Route) bool { return r.Node == node })
			rt.FirstSQL = len(rt.Routes[rt.FirstRoute].SQL) - 1
		}
	}
	return nil
}

func hasParams(lits []Literal) bool {
	for i := range lits {
		if lits[i].Kind == LitParam {
			return true
		}
	}
	return false
}

// Probe renders the statement for the first sub-table, whatever the
// literals say: a prepared statement is prepared there to learn its
// parameter and column definitions. It returns the node and the SQL.
func (p *Plan) Probe(lits []Literal, prefix string) (node, sql string) {
	if p.join != nil {
		return p.def, p.join.probeSQL(lits, prefix)
	}
	t := p.tables[0]
	names := make([]string, len(p.tables))
	for j, tr := range p.tables {
		names[j] = tr.SubTableName(0)
	}
	if ip := p.insert; ip != nil && ip.seqNew > 0 {
		// Stand-ins for the markers keyshard added (nothing runs); the
		// statement's own ? stay parameters.
		lits = append(slices.Clip(lits[:min(len(lits), ip.seqBase)]), make([]Literal, ip.seqNew)...)
		for i := ip.seqBase; i < len(lits); i++ {
			lits[i] = Literal{Kind: LitInt, Text: "1"}
		}
	}
	var rows strings.Builder
	if p.insert != nil {
		for r := range p.insert.rows {
			if r > 0 {
				rows.WriteByte(',')
			}
			p.insert.rows[r].render(&rows, nil, lits, "")
		}
	}
	var sb strings.Builder
	sb.WriteString(prefix)
	p.tmpl.render(&sb, names, lits, rows.String())
	if p.copies != nil {
		return p.copies[0], sb.String()
	}
	return t.NodeOf(0), sb.String()
}

// Explain renders a routing as rows of (node, sub-table, SQL).
func (rt *Routing) Explain() [][3]string {
	var out [][3]string
	for _, r := range rt.Routes {
		for i := range r.SQL {
			out = append(out, [3]string{r.Node, r.SubTables[i], r.SQL[i]})
		}
	}
	return out
}

// String is for tests and logs.
func (rt *Routing) String() string {
	var sb strings.Builder
	for _, e := range rt.Explain() {
		fmt.Fprintf(&sb, "%s %s: %s\n", e[0], e[1], e[2])
	}
	return sb.String()
}

// together checks that the values pinning keys no equality ties (ol_w_id
// = 1 AND s_w_id = 1) place on one sub-table: else the join would need
// rows of two sub-tables, which no sub-table can answer.
func (p *Plan) together(t *TableRule, lits []Literal) error {
	at := -1
	for _, o := range p.same {
		i, null, err := o.find(t.Rule, lits)
		if null || err != nil {
			continue // matches nothing, or the key's own error comes next
		}
		if at >= 0 && i != at {
			return errorf("cross-shard join not supported: the shard keys of %s are given values on different sub-tables (%s and %s) and not joined on each other",
				p.tableList(), t.subs[at].Suffix, t.subs[i].Suffix)
		}
		at = i
	}
	return nil
}

func (p *Plan) tableList() string {
	names := make([]string, len(p.tables))
	for i, t := range p.tables {
		names[i] = t.Table
	}
	return strings.Join(names, ", ")
}
