package proxy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/proxy/engine"
	"github.com/keyshard/keyshard/router"
)

// Introspection of sharded tables (router.Look): SHOW CREATE TABLE,
// DESCRIBE, SHOW COLUMNS and SHOW INDEX run on the first sub-table and
// answer under the logical name; SHOW TABLES and SHOW TABLE STATUS list
// the logical tables in place of their sub-tables.

// look answers sql, an introspection statement about sharded tables.
func (s *Session) look(l *router.Look, sql string, info router.Info) error {
	switch l.Kind {
	case router.LookOne:
		n := s.eng.Nodes[l.Node]
		s.eng.RowHook = func(row []byte) []byte { return renameRow(row, l) }
		defer func() { s.eng.RowHook = nil }()
		return s.eng.Lookup(n, l.SQL, &info)
	case router.LookInfo:
		h := infoRows{subs: l.Subs, cols: &s.eng.ColNames}
		s.eng.RowHook = h.row
		defer func() { s.eng.RowHook = nil }()
		return s.eng.Lookup(s.eng.Nodes[l.Node], sql, &info)
	}
	bc, err := s.lease.Acquire(s.node, engine.Extra|engine.AutocommitOn)
	if err != nil {
		return s.fail(err)
	}
	rows, cols, err := s.lookList(bc, l, sql)
	s.lease.Release(bc) // a broken one is discarded (and ends the session if it held state)
	if err != nil {
		return s.fail(err)
	}
	return s.cl.NullableResultSet(cols, rows, s.lease.Status())
}

// loadData runs LOAD DATA LOCAL INFILE into a sharded table (see
// engine.LoadData); without a column list, the table's columns are read
// from its first sub-table to find the shard key's field.
func (s *Session) loadData(ld *router.Load) error {
	t := ld.Table
	bc, err := s.lease.Acquire(s.eng.Nodes[t.NodeOf(0)], engine.Extra|engine.AutocommitOn)
	if err != nil {
		return s.fail(err)
	}
	res, err := bc.Exec("SELECT LOWER(column_name), LOWER(data_type) FROM information_schema.columns WHERE table_schema = " +
		backend.Quote(t.DB) + " AND table_name = " + backend.Quote(t.SubTableName(0)) + " ORDER BY ordinal_position")
	s.lease.Release(bc)
	if err != nil {
		return s.fail(err)
	}
	if len(res.Rows) == 0 {
		return s.fail(&mysql.MyError{Code: mysql.ER_NO_SUCH_TABLE, State: "42S02", Message: fmt.Sprintf("Table '%s.%s' doesn't exist", t.DB, t.Table)})
	}
	cols := make([]string, len(res.Rows))
	for i, r := range res.Rows {
		cols[i] = deref(r[0])
		if cols[i] == t.Key {
			switch deref(r[1]) {
			case "tinyint", "smallint", "mediumint", "int", "bigint", "year":
				ld.IntKey = true
			}
		}
	}
	if ld.Key < 0 {
		// No column list: the file's fields are the table's columns.
		if err := ld.SetColumns(cols); err != nil {
			return s.fail(err)
		}
	}
	return s.eng.LoadData(ld)
}

// explain answers EXPLAIN of a statement on sharded tables: the statement
// is routed as it would run, and the EXPLAIN runs on its first target
// (rewritten for its sub-table). handled is false when the statement is
// not routed (it runs on the default node as it is).
func (s *Session) explain(sql string, info router.Info) (handled bool, err error) {
	start := explained(sql, info.Start)
	if start < 0 {
		return false, nil
	}
	inner := sql[start:]
	in := router.Classify(inner)
	if !router.Routed(in.Kind) {
		return false, nil
	}
	pl, lits, err := s.route.Plan(s.getParser(), inner, s.vars.DB, in.Kind)
	if err != nil {
		return true, s.fail(err)
	}
	if pl.Kind == router.PlanDefault {
		return false, nil
	}
	rt := &s.rt
	if err := s.bindPlan(pl, rt, lits, ""); err != nil {
		return true, s.fail(err)
	}
	if len(rt.Routes) == 0 || len(rt.Routes[0].SQL) == 0 {
		return false, nil
	}
	q := sql[:start] + rt.Routes[0].SQL[0]
	l := &router.Look{Rename: map[string]string{}}
	for _, t := range pl.Tables() {
		for i := range t.Rule.Tables() {
			l.Rename[t.SubTableName(i)] = t.Table
		}
	}
	s.eng.RowHook = func(row []byte) []byte { return renameRow(row, l) }
	defer func() { s.eng.RowHook = nil }()
	return true, s.eng.Lookup(s.eng.Nodes[rt.Routes[0].Node], q, &info)
}

// explained returns where the statement EXPLAIN (at sql[at:]) explains
// begins, after its options (EXTENDED, PARTITIONS, FORMAT=...), or -1.
func explained(sql string, at int) int {
	i := at
	word := func() string {
		for i < len(sql) && (sql[i] == ' ' || sql[i] == '\t' || sql[i] == '\n' || sql[i] == '\r') {
			i++
		}
		j := i
		for j < len(sql) && (sql[j] >= 'a' && sql[j] <= 'z' || sql[j] >= 'A' && sql[j] <= 'Z' || sql[j] == '_') {
			j++
		}
		return sql[i:j]
	}
	w := word()
	if !strings.EqualFold(w, "explain") && !strings.EqualFold(w, "describe") && !strings.EqualFold(w, "desc") {
		return -1
	}
	i += len(w)
	for {
		w = word()
		switch {
		case strings.EqualFold(w, "extended"), strings.EqualFold(w, "partitions"):
			i += len(w)
		case strings.EqualFold(w, "format"):
			i += len(w)
			for i < len(sql) && (sql[i] == ' ' || sql[i] == '=') {
				i++
			}
			i += len(word())
		case w == "":
			return -1
		default:
			return i
		}
	}
}

// lookList answers SHOW TABLES or SHOW TABLE STATUS (sql) on bc, the
// default node's connection: its own answer without the sub-tables, and
// the logical tables that pass the statement's filter, sorted by name.
func (s *Session) lookList(bc *backend.Conn, l *router.Look, sql string) ([][]*string, []string, error) {
	res, err := bc.Exec(sql)
	if err != nil {
		return nil, nil, err
	}
	rows := res.Rows[:0:0]
	for _, r := range res.Rows {
		if len(r) > 0 && r[0] != nil && !s.route.IsSubTable(l.DB, *r[0]) {
			rows = append(rows, r)
		}
	}
	var logical [][]*string
	if l.Kind == router.LookTables {
		exist, err := s.existing(l)
		if err != nil {
			return nil, nil, err
		}
		for _, t := range l.Tables {
			if !exist[t.SubTableName(0)] {
				continue // a rule whose tables were never created
			}
			row := []*string{ptr(t.Table)}
			if l.Full {
				row = append(row, ptr("BASE TABLE"))
			}
			logical = append(logical, row)
		}
	} else if logical, err = s.tableStatus(l, len(res.Columns)); err != nil {
		return nil, nil, err
	}
	if logical, err = filterRows(bc, res.Columns, logical, l); err != nil {
		return nil, nil, err
	}
	rows = append(rows, logical...)
	slices.SortStableFunc(rows, func(a, b []*string) int { return strings.Compare(*a[0], *b[0]) })
	return rows, res.Columns, nil
}

// tableStatus makes each sharded table's SHOW TABLE STATUS row (ncols
// columns) from its sub-tables' rows, read on their nodes: the first
// sub-table's row under the logical name, with rows and sizes summed and
// the greatest AUTO_INCREMENT and update time.
func (s *Session) tableStatus(l *router.Look, ncols int) ([][]*string, error) {
	byNode := map[string][]string{}
	for _, t := range l.Tables {
		for i := range statusParts(t) {
			byNode[t.NodeOf(i)] = append(byNode[t.NodeOf(i)], t.SubTableName(i))
		}
	}
	subs := map[string][]*string{} // sub-table name -> its row
	var cols []string
	for node, names := range byNode {
		q := "SHOW TABLE STATUS FROM " + backend.QuoteName(l.DB) + " WHERE Name IN (" + quoteList(names) + ")"
		bc, err := s.lease.Acquire(s.eng.Nodes[node], engine.Extra|engine.AutocommitOn)
		if err != nil {
			return nil, err
		}
		res, err := bc.Exec(q)
		s.lease.Release(bc)
		if err != nil {
			return nil, err
		}
		cols = res.Columns
		for _, r := range res.Rows {
			if len(r) == ncols && r[0] != nil {
				subs[*r[0]] = r
			}
		}
	}
	var out [][]*string
	for _, t := range l.Tables {
		var row []*string
		for i := range statusParts(t) {
			r := subs[t.SubTableName(i)]
			if r == nil {
				continue
			}
			if row == nil {
				row = slices.Clone(r)
				row[0] = ptr(t.Table)
				continue
			}
			for c, name := range cols {
				switch name {
				case "Rows", "Data_length", "Index_length", "Data_free", "Max_data_length":
					row[c] = sum(row[c], r[c])
				case "Auto_increment":
					if r[c] != nil && (row[c] == nil || num(r[c]) > num(row[c])) {
						row[c] = r[c]
					}
				case "Update_time":
					if r[c] != nil && (row[c] == nil || *r[c] > *row[c]) {
						row[c] = r[c]
					}
				}
			}
		}
		if row == nil {
			continue // no sub-table found: nothing to show
		}
		if i := slices.Index(cols, "Avg_row_length"); i >= 0 {
			if rows, data := num(row[slices.Index(cols, "Rows")]), num(row[slices.Index(cols, "Data_length")]); rows > 0 {
				row[i] = ptr(strconv.FormatUint(data/rows, 10))
			}
		}
		out = append(out, row)
	}
	return out, nil
}

// statusParts is how many of t's sub-tables make its table status: all,
// or for a global table, its first copy (each copy holds every row).
func statusParts(t *router.TableRule) int {
	if t.Global {
		return 1
	}
	return len(t.Rule.Tables())
}

// existing returns which of the first sub-tables of l's tables exist, as
// their nodes' information_schema says.
func (s *Session) existing(l *router.Look) (map[string]bool, error) {
	byNode := map[string][]string{}
	for _, t := range l.Tables {
		byNode[t.NodeOf(0)] = append(byNode[t.NodeOf(0)], t.SubTableName(0))
	}
	out := map[string]bool{}
	for node, names := range byNode {
		bc, err := s.lease.Acquire(s.eng.Nodes[node], engine.Extra|engine.AutocommitOn)
		if err != nil {
			return nil, err
		}
		res, err := bc.Exec("SELECT table_name FROM information_schema.tables WHERE table_schema = " + backend.Quote(l.DB) +
			" AND table_name IN (" + quoteList(names) + ")")
		s.lease.Release(bc)
		if err != nil {
			return nil, err
		}
		for _, r := range res.Rows {
			out[strings.ToLower(deref(r[0]))] = true
		}
	}
	return out, nil
}

// filterRows keeps the rows that pass the statement's LIKE (on the first
// column) or WHERE, as the server evaluates it over a derived table of
// the rows.
func filterRows(bc *backend.Conn, cols []string, rows [][]*string, l *router.Look) ([][]*string, error) {
	cond := l.Where
	if l.Like != "" {
		cond = backend.QuoteName(cols[0]) + " LIKE " + backend.Quote(l.Like)
	}
	if cond == "" || len(rows) == 0 {
		return rows, nil
	}
	var q strings.Builder
	q.WriteString("SELECT ks_row FROM (")
	for i, r := range rows {
		if i > 0 {
			q.WriteString(" UNION ALL ")
		}
		q.WriteString("SELECT " + strconv.Itoa(i) + " AS ks_row")
		for c, v := range r {
			q.WriteString(", ")
			if v == nil {
				q.WriteString("NULL")
			} else {
				q.WriteString(backend.Quote(*v))
			}
			q.WriteString(" AS " + backend.QuoteName(cols[c]))
		}
	}
	q.WriteString(") AS ks_look WHERE " + cond)
	res, err := bc.Exec(q.String())
	if err != nil {
		return nil, err
	}
	var out [][]*string
	for _, r := range res.Rows {
		if i, err := strconv.Atoi(deref(r[0])); err == nil && i < len(rows) {
			out = append(out, rows[i])
		}
	}
	return out, nil
}

// lookExecute runs an execution of a prepared query on information_schema
// whose string parameter names a sharded table (table_name = ?, as ORMs
// and Connector/J send them): the parameter becomes the first sub-table's
// name, the query runs on its node, and the answer's rows say the logical
// name. handled is false when no parameter names one.
func (s *Session) lookExecute(x *execution) (handled bool, err error) {
	ex, p := x.ex, x.p
	for i := range ex.Params {
		if ex.Null(i) || i >= len(ex.Spans) || !lenEncType(ex.Types[2*i]) {
			continue
		}
		v, ok := ex.Value(p, i)
		name, isStr := v.(string)
		if !ok || !isStr {
			continue
		}
		t := s.route.TableNamed(name)
		if t == nil {
			continue
		}
		sp := ex.Spans[i]
		np := append(append(append(make([]byte, 0, len(p)+8), p[:sp[0]]...), wire.AppendLenEncString(nil, t.SubTableName(0))...), p[sp[1]:]...)
		nex, err := wire.ParseExecute(np, x.st.params, x.st.types, x.st.isLong)
		if err != nil {
			return false, nil
		}
		x.p, x.ex = np, nex
		rename := map[string]string{t.SubTableName(0): name}
		s.eng.RowHook = func(row []byte) []byte { return renameBinaryRow(row, s.eng.ColTypes, rename) }
		defer func() { s.eng.RowHook = nil }()
		return true, x.run(s.eng.Nodes[t.NodeOf(0)], x.st.sql, nil)
	}
	return false, nil
}

// lenEncType reports whether a parameter type is sent as a length-encoded
// string.
func lenEncType(t byte) bool {
	switch t {
	case wire.TypeVarchar, wire.TypeVarString, wire.TypeString, wire.TypeBlob, wire.TypeTinyBlob, wire.TypeMediumBlob, wire.TypeLongBlob:
		return true
	}
	return false
}

// renameBinaryRow is renameRow for a binary-protocol row whose columns
// have types types.
func renameBinaryRow(row []byte, types []byte, rename map[string]string) []byte {
	nb := (len(types) + 7 + 2) / 8
	if len(row) < 1+nb || row[0] != 0 {
		return row
	}
	var out []byte
	pos := 1 + nb
	for i, t := range types {
		if row[1+(i+2)/8]&(1<<((i+2)%8)) != 0 {
			continue // NULL
		}
		n, err := wire.ValueLen(t, row, pos)
		if err != nil || pos+n > len(row) {
			return row
		}
		start := pos
		pos += n
		if lenEncType(t) {
			v, _, _, err := wire.ReadLenEncString(row, start)
			if logical, ok := rename[string(v)]; err == nil && ok {
				if out == nil {
					out = append(make([]byte, 0, len(row)+16), row[:start]...)
				}
				out = wire.AppendLenEncString(out, logical)
				continue
			}
		}
		if out != nil {
			out = append(out, row[start:pos]...)
		}
	}
	if out == nil {
		return row
	}
	return out
}

// renameRow puts the logical table name in place of the sub-table's in a
// text row of l's answer: every value equal to a physical name, and the
// table name of a SHOW CREATE TABLE statement.
func renameRow(row []byte, l *router.Look) []byte {
	var out []byte
	pos, col := 0, 0
	for pos < len(row) {
		start := pos
		var val string
		if row[pos] == 0xfb { // NULL
			pos++
		} else {
			v, _, next, err := wire.ReadLenEncString(row, pos)
			if err != nil {
				return row
			}
			val, pos = string(v), next
		}
		repl, changed := val, false
		if logical, ok := l.Rename[val]; ok {
			repl, changed = logical, true
		} else if l.DDL && col == 1 {
			for phys, logical := range l.Rename {
				if rest, ok := strings.CutPrefix(val, "CREATE TABLE "+backend.QuoteName(phys)); ok {
					repl, changed = "CREATE TABLE "+backend.QuoteName(logical)+rest, true
				}
			}
		}
		if changed && out == nil {
			out = append(make([]byte, 0, len(row)+16), row[:start]...)
		}
		switch {
		case changed:
			out = wire.AppendLenEncString(out, repl)
		case out != nil:
			out = append(out, row[start:pos]...)
		}
		col++
	}
	if out == nil {
		return row
	}
	return out
}

// infoRows is the row hook of a LookInfo answer: a row whose TABLE_NAME
// (by the column's original name, whatever its alias) is a sub-table in
// its TABLE_SCHEMA (when the answer has that column) says the logical
// table instead, or is dropped.
type infoRows struct {
	subs map[string]router.InfoSub
	cols *[]string // the answer's columns' original names (engine.ColNames)
}

func (h infoRows) row(row []byte) []byte {
	tcol, scol := -1, -1
	for i, c := range *h.cols {
		switch {
		case strings.EqualFold(c, "TABLE_NAME"):
			tcol = i
		case strings.EqualFold(c, "TABLE_SCHEMA"):
			scol = i
		}
	}
	if tcol < 0 {
		return row
	}
	var spans [][2]int // each value's start and end (NULL: -1)
	for pos := 0; pos < len(row); {
		if row[pos] == 0xfb {
			spans = append(spans, [2]int{-1, -1})
			pos++
			continue
		}
		_, _, next, err := wire.ReadLenEncString(row, pos)
		if err != nil {
			return row
		}
		spans = append(spans, [2]int{pos, next})
		pos = next
	}
	val := func(i int) (string, bool) {
		if i < 0 || i >= len(spans) || spans[i][0] < 0 {
			return "", false
		}
		v, _, _, _ := wire.ReadLenEncString(row, spans[i][0])
		return string(v), true
	}
	name, ok := val(tcol)
	sub, isSub := h.subs[strings.ToLower(name)]
	if !ok || !isSub {
		return row
	}
	if db, ok := val(scol); scol >= 0 && (!ok || !strings.EqualFold(db, sub.DB)) {
		return row
	}
	if sub.Logical == "" {
		return nil
	}
	sp := spans[tcol]
	out := append(make([]byte, 0, len(row)), row[:sp[0]]...)
	out = wire.AppendLenEncString(out, sub.Logical)
	return append(out, row[sp[1]:]...)
}

func ptr(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func num(s *string) uint64 {
	n, _ := strconv.ParseUint(deref(s), 10, 64)
	return n
}

// sum adds two numeric column values (NULL + x = x).
func sum(a, b *string) *string {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return ptr(strconv.FormatUint(num(a)+num(b), 10))
}

// quoteList is names as a list of SQL strings.
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = backend.Quote(n)
	}
	return strings.Join(q, ", ")
}
