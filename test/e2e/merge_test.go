package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	gomysql "github.com/go-sql-driver/mysql"
	"github.com/keyshard/keyshard/test/sqldiff"
)

// Scatter-gather merge (issue 5): a SELECT on a sharded table whose WHERE
// does not pin one sub-table runs on every sub-table it may touch, and
// keyshard merges the streams (ORDER BY, LIMIT, aggregates, DISTINCT,
// GROUP BY ... HAVING).
//
// TestMergeDiff is the differential test: the same seeded random rows in a
// table sharded 2 nodes x 4 sub-tables and in one plain table on a backend
// that is no keyshard node (refPort), the same generated queries through
// keyshard and straight to the reference, and the answers compared.
// KS_MERGE_SEED=n replays a run, KS_MERGE_QUERIES=n changes how many
// queries it runs (2000).

// mergeYAML is shardYAML's two nodes with the merge tests' tables, each
// hash-sharded on id over node1 and node2 with 4 sub-tables per node
// (<table>_0000..0003 on node1, _0004..0007 on node2): merge_e2e.mg_t,
// merge_lim.mg_lim, merge_fail.mg_big and merge_fail.mg_gone. extra is
// appended at top level.
func mergeYAML(addr, extra string) string {
	var rules strings.Builder
	for _, r := range [][2]string{{"merge_e2e", "mg_t"}, {"merge_lim", "mg_lim"}, {"merge_fail", "mg_big"}, {"merge_fail", "mg_gone"}} {
		fmt.Fprintf(&rules, `      - db: %s
        table: %s
        key: id
        nodes: [node1, node2]
        type: hash
        locations: [4, 4]
`, r[0], r[1])
	}
	return twoNodeYAML(addr, rules.String()+extra)
}

// mgSubPort is the backend of sub-table i (0-7) of a mergeYAML table.
func mgSubPort(i int) int {
	if i < 4 {
		return basePort
	}
	return basePort + 1
}

// mgFreshDB drops and creates database db on the backends at ports.
func mgFreshDB(t *testing.T, db string, ports ...int) {
	t.Helper()
	for _, port := range ports {
		d := direct(t, port, "")
		mustExec(t, d, "DROP DATABASE IF EXISTS "+db)
		mustExec(t, d, "CREATE DATABASE "+db)
	}
}

// mgNull stands for SQL NULL in fetched rows.
const mgNull = sqldiff.Null

type mgQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// mgFetch runs q on db and reads the whole answer: each column as its name
// and type, every value as text (mgNull for NULL). prepared runs it as a
// prepared statement (binary protocol) even without args. An error that
// arrives after some rows is returned like one that arrives at once.
func mgFetch(ctx context.Context, db mgQuerier, prepared bool, q string, args ...any) (cols []string, out [][]string, err error) {
	var rows *sql.Rows
	if prepared {
		var st *sql.Stmt
		if st, err = db.PrepareContext(ctx, q); err != nil {
			return nil, nil, err
		}
		defer st.Close()
		rows, err = st.QueryContext(ctx, args...)
	} else {
		rows, err = db.QueryContext(ctx, q, args...)
	}
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	types, err := rows.ColumnTypes()
	if err != nil {
		return nil, nil, err
	}
	for _, ct := range types {
		cols = append(cols, ct.Name()+" "+ct.DatabaseTypeName())
	}
	vals := make([]sql.NullString, len(types))
	ptrs := make([]any, len(types))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return cols, out, err
		}
		row := make([]string, len(vals))
		for i, v := range vals {
			row[i] = mgNull
			if v.Valid {
				row[i] = v.String
			}
		}
		out = append(out, row)
	}
	return cols, out, rows.Err()
}

// waitPoolsIdle fails unless, within 10 seconds, no backend connection of
// any of p's nodes is checked out.
func waitPoolsIdle(t *testing.T, p *testProxy) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var busy []string
		for name, n := range p.Srv.Nodes() {
			if st := n.Master.Stats(); st.InUse != 0 {
				busy = append(busy, fmt.Sprintf("%s %+v", name, st))
			}
		}
		if len(busy) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend connections still in use after 10s: %s", strings.Join(busy, "; "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mgBackendQueries returns the statements (thread id -> text) that other
// connections are running on d and whose text matches the LIKE pattern.
func mgBackendQueries(t *testing.T, d *sql.DB, like string) map[int64]string {
	t.Helper()
	rows, err := d.Query("SELECT ID, INFO FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND INFO LIKE ?", like)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var id int64
		var info string
		if err := rows.Scan(&id, &info); err != nil {
			t.Fatal(err)
		}
		out[id] = info
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// mgWaitBackendQuery waits (5 s at most) until the backend at port runs a
// statement matching like and returns its thread id and text.
func mgWaitBackendQuery(t *testing.T, port int, like string) (int64, string) {
	t.Helper()
	d := direct(t, port, "")
	deadline := time.Now().Add(5 * time.Second)
	for {
		if qs := mgBackendQueries(t, d, like); len(qs) > 0 {
			ids := make([]int64, 0, len(qs))
			for id := range qs {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			return ids[0], qs[ids[0]]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no statement like %q running on the backend at %d", like, port)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// mgWaitNoBackendQuery fails unless, within 15 seconds, no backend at ports
// runs a statement matching like any more: keyshard does not leave shard
// statements running (or blocked on a full socket) after it is done.
func mgWaitNoBackendQuery(t *testing.T, like string, ports ...int) {
	t.Helper()
	dbs := make([]*sql.DB, len(ports))
	for i, port := range ports {
		dbs[i] = direct(t, port, "")
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		var left []string
		for i, d := range dbs {
			for id, q := range mgBackendQueries(t, d, like) {
				left = append(left, fmt.Sprintf("port %d thread %d: %.100s", ports[i], id, q))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("shard statements still running 15s later: %s", strings.Join(left, "; "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ---------------------------------------------------------------------
// Differential test.

const mgCreate = `CREATE TABLE mg_t (
	id INT PRIMARY KEY,
	g INT NULL,
	h INT NULL,
	s VARCHAR(16) NULL,
	d DECIMAL(10,2) NULL,
	dt DATE NULL,
	ts DATETIME NULL,
	u BIGINT UNSIGNED NULL,
	KEY (g, h)
) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci`

// mgCols are mg_t's columns in table order; mgNumCols those that SUM and
// AVG take (no DOUBLE anywhere: float sums depend on summation order).
var (
	mgCols    = []string{"id", "g", "h", "s", "d", "dt", "ts", "u"}
	mgNumCols = []string{"id", "g", "h", "d", "u"}
	// Strings that are equal under utf8mb4_general_ci only by case, '' and
	// '_' for LIKE; ASCII only, so that lower-casing is the collation's
	// equality.
	mgWords = []string{"abc", "ABC", "Abc", "abd", "b", "B", "zeta", "Zeta", "a_c", ""}
)

const mgRows = 2000

func mgDecimal(cents int) string {
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	return fmt.Sprintf("%s%d.%02d", sign, cents/100, cents%100)
}

// mgData returns mgRows rows of SQL literals in mgCols order, and the ids.
func mgData(rng *rand.Rand) (rows [][]string, ids []int) {
	decimals := make([]string, 250) // few enough for duplicates
	for i := range decimals {
		decimals[i] = mgDecimal(rng.IntN(200001) - 100000)
	}
	decimals[0], decimals[1] = "0.00", "-0.50"
	nullOr := func(n int, f func() string) string {
		if rng.IntN(n) == 0 {
			return "NULL"
		}
		return f()
	}
	day0 := time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC)
	ids = rng.Perm(6300)[:mgRows]
	for i := range ids {
		ids[i] -= 300 // a few negative keys: they hash as uint64
		rows = append(rows, []string{
			strconv.Itoa(ids[i]),
			nullOr(10, func() string { return strconv.Itoa(rng.IntN(8)) }),
			nullOr(12, func() string { return strconv.Itoa(rng.IntN(3)) }),
			nullOr(11, func() string { return "'" + mgWords[rng.IntN(len(mgWords))] + "'" }),
			nullOr(10, func() string { return decimals[rng.IntN(len(decimals))] }),
			nullOr(10, func() string { return day0.AddDate(0, 0, rng.IntN(800)).Format("'2006-01-02'") }),
			nullOr(10, func() string {
				ts := day0.AddDate(1, 0, rng.IntN(400))
				if rng.IntN(15) != 0 { // else midnight
					ts = ts.Add(time.Duration(rng.IntN(86400)) * time.Second)
				}
				return ts.Format("'2006-01-02 15:04:05'")
			}),
			nullOr(10, func() string {
				switch rng.IntN(4) {
				case 0:
					return strconv.Itoa(rng.IntN(1000))
				case 1:
					return strconv.FormatUint(1<<63+rng.Uint64N(1<<63), 10)
				case 2:
					return strconv.FormatUint(rng.Uint64N(1<<63), 10)
				default:
					return []string{"0", "18446744073709551615", "9223372036854775808", "9223372036854775807"}[rng.IntN(4)]
				}
			}),
		})
	}
	return rows, ids
}

// mgSQL is a statement being built, with the literal kinds the merge
// diff writes.
type mgSQL struct{ sqldiff.Builder }

func (w *mgSQL) int(n int) { w.Lit(strconv.Itoa(n), int64(n)) }

func (w *mgSQL) str(s string) { w.Lit("'"+s+"'", s) }

// dec writes a DECIMAL literal; its parameter is a string (go-sql-driver
// has no decimal type).
func (w *mgSQL) dec(cents int) {
	v := mgDecimal(cents)
	w.Lit(v, v)
}

// mgItem is one select-list item.
type mgItem struct {
	expr   string // as written, without the alias
	alias  string
	id     string // what it computes, lower case: "g", "min(id)", ...
	concat bool   // a GROUP_CONCAT: element order unspecified
	foldS  bool   // which of 'abc'/'ABC' it shows is unspecified
}

func (it mgItem) sql() string {
	if it.alias != "" {
		return it.expr + " AS " + it.alias
	}
	return it.expr
}

// mgKey is one ORDER BY key.
type mgKey struct {
	text string // as written, direction included
	id   string // what it sorts by (as mgItem.id)
	item int    // the select-list item it is, or -1
}

// mgQuery is a generated query and what comparing its answers needs.
type mgQuery struct {
	text  string // literals inline: the reference always runs this
	ptext string // ? for the WHERE literals, values in args
	args  []any
	// total: the ORDER BY fixes the order of the rows completely.
	total bool
	// keyCols: when every ORDER BY key is a select-list item, their
	// positions: ties leave the rows' order open, not the keys' values.
	keyCols []int
	limit   bool
	fold    bool   // compare case-insensitively
	concat  []bool // per column: a GROUP_CONCAT, compared as sorted elements
}

type mgGen struct {
	rng  *rand.Rand
	ids  []int
	dcol string // the argument of this query's DISTINCT aggregates
}

var (
	mgCountDistinctCols = []string{"g", "h", "s", "d", "dt", "u"}
	mgSumDistinctCols   = []string{"g", "h", "d", "u"}
)

// distinctArg returns the column the query's DISTINCT aggregates take,
// picked from cands the first time; "" if that column is not in cands.
// All DISTINCT aggregates of a query take the same argument: keyshard
// merges one ordered distinct stream per query and refuses several
// (error 1235).
func (g *mgGen) distinctArg(cands []string) string {
	if g.dcol == "" {
		g.dcol = g.pick(cands)
	}
	if slices.Contains(cands, g.dcol) {
		return g.dcol
	}
	return ""
}

func (g *mgGen) pick(s []string) string { return s[g.rng.IntN(len(s))] }

func (g *mgGen) dir() string { return g.pick([]string{"", "", " ASC", " DESC", " DESC"}) }

// pred writes one WHERE condition.
func (g *mgGen) pred(w *mgSQL) {
	r := g.rng
	switch r.IntN(17) {
	case 0:
		a := r.IntN(8)
		w.Add("g BETWEEN ")
		w.int(a)
		w.Add(" AND ")
		w.int(a + r.IntN(4))
	case 1:
		w.Add(g.pick([]string{"g > ", "g <= ", "g <> "}))
		w.int(r.IntN(8))
	case 2:
		w.Add(g.pick([]string{"g IS NULL", "g IS NOT NULL", "h IS NULL"}))
	case 3:
		w.Add(g.pick([]string{"h = ", "h >= "}))
		w.int(r.IntN(3))
	case 4:
		a := r.IntN(200001) - 100000
		b := a + r.IntN(100000)
		w.Add("d BETWEEN ")
		w.dec(a)
		w.Add(" AND ")
		w.dec(b)
	case 5:
		w.Add(g.pick([]string{"d < ", "d >= "}))
		w.dec(r.IntN(200001) - 100000)
	case 6:
		a := r.IntN(6300) - 300
		w.Add("id BETWEEN ")
		w.int(a)
		w.Add(" AND ")
		w.int(a + r.IntN(3000))
	case 7:
		w.Add(g.pick([]string{"id > ", "id < ", "id <> "}))
		w.int(r.IntN(6300) - 300)
	case 8: // a few sub-tables (or one)
		w.Add("id IN (")
		for i := range 1 + r.IntN(6) {
			if i > 0 {
				w.Add(", ")
			}
			w.int(g.ids[r.IntN(len(g.ids))])
		}
		w.Add(")")
	case 9:
		w.Add("s IN (")
		for i := range 1 + r.IntN(3) {
			if i > 0 {
				w.Add(", ")
			}
			w.str(g.pick(mgWords))
		}
		w.Add(")")
	case 10:
		w.Add("s LIKE ")
		w.str(g.pick([]string{"a%", "A%", "%c", "ab_", "%", "z%", "a_c"}))
	case 11:
		w.Add(g.pick([]string{"s IS NULL", "s IS NOT NULL", "s = ''"}))
	case 12:
		w.Add(g.pick([]string{"dt >= ", "dt < "}))
		w.str(time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, r.IntN(800)).Format("2006-01-02"))
	case 13:
		w.Add(g.pick([]string{"u > ", "u <= "}))
		v := []uint64{9223372036854775807, 9223372036854775808, 1000, 17000000000000000000}[r.IntN(4)]
		w.Lit(strconv.FormatUint(v, 10), v)
	case 14:
		w.Add("ts < ")
		w.str("2020-06-01 12:00:00")
	case 15:
		w.Add("(g = ")
		w.int(r.IntN(8))
		w.Add(" OR s = ")
		w.str(g.pick(mgWords))
		w.Add(")")
	default:
		w.Add("g + h > ")
		w.int(r.IntN(9))
	}
}

func (g *mgGen) where(w *mgSQL) {
	r := g.rng.IntN(20)
	switch {
	case r < 4:
		return
	case r == 4: // nothing matches: aggregates of no rows
		w.Add(" WHERE id > ")
		w.int(100000000)
		return
	}
	w.Add(" WHERE ")
	g.pred(w)
	if g.rng.IntN(3) == 0 {
		w.Add(g.pick([]string{" AND ", " OR "}))
		g.pred(w)
	}
}

func (g *mgGen) limit(w *mgSQL) {
	n := []int{0, 1, 3, 10, 50, 500, 5000}[g.rng.IntN(7)]
	m := []int{0, 1, 7, 40, 1990}[g.rng.IntN(5)]
	switch g.rng.IntN(3) {
	case 0:
		w.Add(fmt.Sprintf(" LIMIT %d", n))
	case 1:
		w.Add(fmt.Sprintf(" LIMIT %d, %d", m, n))
	default:
		w.Add(fmt.Sprintf(" LIMIT %d OFFSET %d", n, m))
	}
}

// ref writes a reference to items[i] as an ORDER BY key: by expression,
// alias or ordinal.
func (g *mgGen) ref(items []mgItem, i int) mgKey {
	it := items[i]
	forms := []string{it.expr, strconv.Itoa(i + 1)}
	if it.alias != "" {
		forms = append(forms, it.alias)
	}
	return mgKey{text: g.pick(forms) + g.dir(), id: it.id, item: i}
}

// find returns the position of the item computing id, or -1.
func mgFind(items []mgItem, id string) int {
	return slices.IndexFunc(items, func(it mgItem) bool { return it.id == id })
}

// agg returns a random aggregate (or expression over aggregates) item.
func (g *mgGen) agg() mgItem {
	col := func(cols []string) string { return g.pick(cols) }
	var e string
	switch g.rng.IntN(13) {
	case 0:
		e = "COUNT(*)"
	case 1:
		e = "COUNT(" + col(mgCols) + ")"
	case 2:
		e = "SUM(" + col(mgNumCols) + ")"
	case 3:
		e = "AVG(" + col(mgNumCols) + ")"
	case 4:
		e = "MIN(" + col(mgCols) + ")"
	case 5:
		e = "MAX(" + col(mgCols) + ")"
	case 6:
		e = "COUNT(DISTINCT " + g.distinctArg(mgCountDistinctCols) + ")"
	case 7, 8:
		e = "COUNT(DISTINCT " + g.distinctArg(mgCountDistinctCols) + ")"
		if c := g.distinctArg(mgSumDistinctCols); c != "" {
			e = []string{"SUM", "AVG"}[g.rng.IntN(2)] + "(DISTINCT " + c + ")"
		}
	case 9:
		e = "GROUP_CONCAT(" + col([]string{"g", "h", "s", "d", "dt"}) + ")"
	default:
		// No expression over AVG: MariaDB itself gives AVG(g)*2 at the
		// AVG column's scale when its GROUP BY goes through a temporary
		// table and at full precision otherwise, a choice of its plan.
		e = g.pick([]string{"SUM(d)/COUNT(*)", "MAX(id)-MIN(id)", "COUNT(*)*2+1", "SUM(g)+SUM(h)",
			"MAX(d)-MIN(d)", "SUM(g)*2-COUNT(h)", "SUM(u)/COUNT(u)", "COUNT(DISTINCT " + g.distinctArg(mgCountDistinctCols) + ")*10", "MIN(id)", "MAX(id)"})
	}
	lower := strings.ToLower(e)
	return mgItem{
		expr:   e,
		id:     lower,
		concat: strings.HasPrefix(lower, "group_concat("),
		foldS:  lower == "min(s)" || lower == "max(s)" || lower == "group_concat(s)",
	}
}

// finish fills in what the comparison needs from items and keys.
func (q *mgQuery) finish(w *mgSQL, items []mgItem, keys []mgKey) {
	q.text, q.ptext, q.args = w.Text.String(), w.PText.String(), w.Args
	for _, it := range items {
		q.concat = append(q.concat, it.concat)
		q.fold = q.fold || it.foldS
	}
	if len(keys) > 0 {
		q.keyCols = []int{}
		for _, k := range keys {
			if k.item < 0 {
				q.keyCols = nil
				break
			}
			q.keyCols = append(q.keyCols, k.item)
		}
	}
}

func (g *mgGen) orderBy(w *mgSQL, keys []mgKey) {
	if len(keys) == 0 {
		return
	}
	w.Add(" ORDER BY ")
	for i, k := range keys {
		if i > 0 {
			w.Add(", ")
		}
		w.Add(k.text)
	}
}

func (g *mgGen) aliases(items []mgItem, prefix string, pct int) {
	for i := range items {
		if g.rng.IntN(100) < pct {
			items[i].alias = fmt.Sprintf("%s%d", prefix, i+1)
		}
	}
}

func (g *mgGen) selectList(w *mgSQL, distinct bool, items []mgItem) {
	w.Add("SELECT ")
	if distinct {
		w.Add("DISTINCT ")
	}
	for i, it := range items {
		if i > 0 {
			w.Add(", ")
		}
		w.Add(it.sql())
	}
	w.Add(" FROM mg_t")
}

func colItems(cols []string) []mgItem {
	items := make([]mgItem, len(cols))
	for i, c := range cols {
		items[i] = mgItem{expr: c, id: c}
	}
	return items
}

// rowsQuery: plain rows, any ORDER BY mix, LIMIT.
func (g *mgGen) rowsQuery() mgQuery {
	var q mgQuery
	var w mgSQL
	var items []mgItem
	star := g.rng.IntN(10) == 0
	if star {
		items = colItems(mgCols)
		w.Add("SELECT * FROM mg_t")
	} else {
		cols := slices.Clone(mgCols)
		g.rng.Shuffle(len(cols), func(i, j int) { cols[i], cols[j] = cols[j], cols[i] })
		items = colItems(cols[:1+g.rng.IntN(5)])
		g.aliases(items, "c", 30)
		g.selectList(&w, false, items)
	}
	g.where(&w)
	var keys []mgKey
	if g.rng.IntN(5) != 0 {
		for range 1 + g.rng.IntN(3) {
			switch g.rng.IntN(4) {
			case 0, 1:
				keys = append(keys, g.ref(items, g.rng.IntN(len(items))))
			case 2:
				c := g.pick(mgCols)
				keys = append(keys, mgKey{text: c + g.dir(), id: c, item: mgFind(items, c)})
			default:
				e := g.pick([]string{"g+h", "id%7", "COALESCE(g,-1)", "LOWER(s)", "-d", "dt", "YEAR(ts)"})
				keys = append(keys, mgKey{text: e + g.dir(), id: strings.ToLower(e), item: -1})
			}
		}
		if g.rng.IntN(2) == 0 {
			if i := mgFind(items, "id"); i >= 0 {
				keys = append(keys, g.ref(items, i))
			} else {
				keys = append(keys, mgKey{text: "id" + g.dir(), id: "id", item: -1})
			}
		}
	}
	g.orderBy(&w, keys)
	q.total = slices.ContainsFunc(keys, func(k mgKey) bool { return k.id == "id" })
	if g.rng.IntN(5) < 2 {
		g.limit(&w)
		q.limit = true
	}
	q.finish(&w, items, keys)
	return q
}

// distinctQuery: SELECT DISTINCT over a few columns.
func (g *mgGen) distinctQuery() mgQuery {
	var q mgQuery
	var w mgSQL
	cols := []string{"g", "h", "s", "d", "dt", "ts", "u"}
	g.rng.Shuffle(len(cols), func(i, j int) { cols[i], cols[j] = cols[j], cols[i] })
	cols = cols[:1+g.rng.IntN(3)]
	if g.rng.IntN(10) == 0 {
		cols = append(cols, "id")
	}
	items := colItems(cols)
	g.aliases(items, "c", 30)
	g.selectList(&w, true, items)
	g.where(&w)
	var keys []mgKey
	if g.rng.IntN(10) < 7 {
		for _, i := range g.rng.Perm(len(items))[:1+g.rng.IntN(len(items))] {
			keys = append(keys, g.ref(items, i))
		}
	}
	g.orderBy(&w, keys)
	q.total = len(keys) == len(items) || slices.ContainsFunc(keys, func(k mgKey) bool { return k.id == "id" })
	if g.rng.IntN(5) < 2 {
		g.limit(&w)
		q.limit = true
	}
	q.finish(&w, items, keys)
	q.fold = q.fold || slices.Contains(cols, "s")
	return q
}

// aggQuery: aggregates over the whole (filtered) table: one row.
func (g *mgGen) aggQuery() mgQuery {
	q := mgQuery{total: true}
	var w mgSQL
	items := make([]mgItem, 1+g.rng.IntN(4))
	for i := range items {
		items[i] = g.agg()
	}
	g.aliases(items, "a", 40)
	g.selectList(&w, false, items)
	g.where(&w)
	if g.rng.IntN(10) == 0 {
		w.Add(g.pick([]string{" LIMIT 1", " LIMIT 1, 1", " LIMIT 0"}))
		q.limit = true
	}
	q.finish(&w, items, nil)
	return q
}

// groupQuery: GROUP BY g / g, h / s with HAVING, ORDER BY and LIMIT.
func (g *mgGen) groupQuery() mgQuery {
	var q mgQuery
	var w mgSQL
	gkeys := [][]string{{"g"}, {"g"}, {"g", "h"}, {"g", "h"}, {"s"}}[g.rng.IntN(5)]
	var items []mgItem
	for _, k := range gkeys {
		if g.rng.IntN(5) != 0 {
			it := mgItem{expr: k, id: k, foldS: k == "s"}
			if g.rng.IntN(10) < 3 {
				it.alias = "k_" + k
			}
			items = append(items, it)
		}
	}
	for range 1 + g.rng.IntN(3) {
		it := g.agg()
		if g.rng.IntN(10) < 4 {
			it.alias = fmt.Sprintf("a%d", len(items)+1)
		}
		items = append(items, it)
	}
	g.rng.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
	g.selectList(&w, false, items)
	g.where(&w)
	w.Add(" GROUP BY " + strings.Join(gkeys, ", "))

	if g.rng.IntN(10) < 4 {
		w.Add(" HAVING ")
		for i := range 1 + g.rng.IntN(2) {
			if i > 0 {
				w.Add(g.pick([]string{" AND ", " OR "}))
			}
			w.Add(g.havingCond(items, gkeys))
		}
	}

	var keys []mgKey
	if g.rng.IntN(10) < 7 {
		for range 1 + g.rng.IntN(3) {
			switch g.rng.IntN(3) {
			case 0: // a group key
				k := g.pick(gkeys)
				if i := mgFind(items, k); i >= 0 {
					keys = append(keys, g.ref(items, i))
				} else {
					keys = append(keys, mgKey{text: k + g.dir(), id: k, item: -1})
				}
			case 1: // a selected aggregate
				var aggs []int
				for i, it := range items {
					if !slices.Contains(gkeys, it.id) && !it.concat {
						aggs = append(aggs, i)
					}
				}
				if len(aggs) > 0 {
					keys = append(keys, g.ref(items, aggs[g.rng.IntN(len(aggs))]))
				}
			default: // an aggregate that is not selected (or is, by its text)
				e := g.pick([]string{"COUNT(*)", "MIN(id)", "MAX(id)", "SUM(d)", "AVG(h)", "SUM(d)/COUNT(*)", "MAX(s)"})
				keys = append(keys, mgKey{text: e + g.dir(), id: strings.ToLower(e), item: mgFind(items, strings.ToLower(e))})
			}
		}
		if g.rng.IntN(10) < 4 {
			for _, k := range gkeys {
				if !slices.ContainsFunc(keys, func(x mgKey) bool { return x.id == k }) {
					keys = append(keys, mgKey{text: k + g.dir(), id: k, item: mgFind(items, k)})
				}
			}
		}
	}
	g.orderBy(&w, keys)
	// Groups are unique on their keys; MIN(id) and MAX(id) are unique
	// across groups.
	covered := true
	for _, k := range gkeys {
		covered = covered && slices.ContainsFunc(keys, func(x mgKey) bool { return x.id == k })
	}
	q.total = covered || slices.ContainsFunc(keys, func(k mgKey) bool { return k.id == "min(id)" || k.id == "max(id)" })
	if g.rng.IntN(20) < 7 {
		g.limit(&w)
		q.limit = true
	}
	q.finish(&w, items, keys)
	q.fold = q.fold || slices.Contains(gkeys, "s")
	return q
}

func (g *mgGen) havingCond(items []mgItem, gkeys []string) string {
	n := func() string { return g.pick([]string{"0", "1", "2", "5", "10", "40", "100"}) }
	switch g.rng.IntN(4) {
	case 0: // an alias of a numeric aggregate or a group key
		var cands []string
		for _, it := range items {
			if it.alias != "" && !it.concat && !it.foldS && !strings.Contains(it.id, "(dt)") && !strings.Contains(it.id, "(ts)") {
				cands = append(cands, it.alias)
			}
		}
		if len(cands) > 0 {
			return g.pick(cands) + g.pick([]string{" > ", " <= ", " <> "}) + n()
		}
		fallthrough
	case 1: // a group key
		k := g.pick(gkeys)
		if k == "s" {
			return g.pick([]string{"s <> 'b'", "s IS NOT NULL", "s < 'b'"})
		}
		if i := mgFind(items, k); i >= 0 && items[i].alias != "" && g.rng.IntN(2) == 0 {
			k = items[i].alias
		}
		return k + g.pick([]string{" > 2", " IS NOT NULL", " <> 1", " IS NULL"})
	default: // an aggregate, selected or not
		return g.pick([]string{"COUNT(*) > ", "COUNT(*) < ", "MAX(id) >= ", "MIN(id) < ", "SUM(h) > ",
			"COUNT(DISTINCT " + g.distinctArg(mgCountDistinctCols) + ") >= ", "AVG(g) > "}) + n() + g.pick([]string{"", "", "0"})
	}
}

func (g *mgGen) query() mgQuery {
	g.dcol = ""
	switch r := g.rng.IntN(20); {
	case r < 7:
		return g.rowsQuery()
	case r < 10:
		return g.distinctQuery()
	case r < 14:
		return g.aggQuery()
	default:
		return g.groupQuery()
	}
}

// mgCompare returns why keyshard's answer differs from the reference's,
// or "".
func mgCompare(q *mgQuery, ksCols []string, ks [][]string, refCols []string, ref [][]string) string {
	if !slices.Equal(ksCols, refCols) {
		return "columns differ"
	}
	a, b := sqldiff.Normalize(ks, q.fold, q.concat), sqldiff.Normalize(ref, q.fold, q.concat)
	if q.total {
		if !slices.Equal(sqldiff.JoinRows(a), sqldiff.JoinRows(b)) {
			return "rows differ (the ORDER BY fixes their order)"
		}
		return ""
	}
	if q.keyCols != nil {
		proj := func(rows [][]string) []string {
			out := make([]string, len(rows))
			for i, r := range rows {
				var k []string
				for _, c := range q.keyCols {
					k = append(k, strings.ToLower(r[c]))
				}
				out[i] = strings.Join(k, "\x1f")
			}
			return out
		}
		if !slices.Equal(proj(a), proj(b)) {
			return "ORDER BY key values differ"
		}
	}
	if q.limit {
		if len(a) != len(b) {
			return "row counts differ"
		}
		return ""
	}
	ja, jb := sqldiff.JoinRows(a), sqldiff.JoinRows(b)
	slices.Sort(ja)
	slices.Sort(jb)
	if !slices.Equal(ja, jb) {
		return "rows differ (compared as sorted multisets)"
	}
	return ""
}

func mgShow(cols []string, rows [][]string, err error) string {
	var b strings.Builder
	if err != nil {
		fmt.Fprintf(&b, "error: %v; ", err)
	}
	fmt.Fprintf(&b, "columns %q, %d rows", cols, len(rows))
	for i, r := range rows {
		if i == 8 {
			b.WriteString("\n      ...")
			break
		}
		line := strings.ReplaceAll(strings.Join(r, " | "), mgNull, "NULL")
		if len(line) > 200 {
			line = line[:200] + "..."
		}
		b.WriteString("\n      " + line)
	}
	return b.String()
}

func TestMergeDiff(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("KS_MERGE_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("KS_MERGE_SEED: %v", err)
		}
		seed = v
	}
	nq := 2000
	if s := os.Getenv("KS_MERGE_QUERIES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("KS_MERGE_QUERIES: %q", s)
		}
		nq = v
	}
	t.Logf("seed %d (KS_MERGE_SEED=%d replays), %d queries", seed, seed, nq)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	mgFreshDB(t, "merge_e2e", basePort, basePort+1)
	mgFreshDB(t, "merge_ref", refPort)
	p := startProxy(t, mergeYAML("%ADDR%", ""))
	ks := p.open(t, "ks:ks", "merge_e2e", "")
	ks.SetMaxOpenConns(4)
	ref := direct(t, refPort, "merge_ref")
	ref.SetMaxOpenConns(4)
	mustExec(t, ks, mgCreate) // fanned out to mg_t_0000..0007
	mustExec(t, ref, mgCreate)

	rows, ids := mgData(rng)
	for start := 0; start < len(rows); start += 250 {
		var b strings.Builder
		b.WriteString("INSERT INTO mg_t (" + strings.Join(mgCols, ", ") + ") VALUES ")
		for i, r := range rows[start:min(start+250, len(rows))] {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(" + strings.Join(r, ", ") + ")")
		}
		mustExec(t, ks, b.String())
		mustExec(t, ref, b.String())
	}
	// The rows are where the rule puts them: all of them, on every
	// sub-table (id mod 8), none lost.
	total := 0
	for i := range 8 {
		var n int
		sub := fmt.Sprintf("mg_t_%04d", i)
		if err := direct(t, mgSubPort(i), "merge_e2e").QueryRow("SELECT COUNT(*) FROM " + sub).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("%s is empty", sub)
		}
		total += n
	}
	var nref int
	if err := ref.QueryRow("SELECT COUNT(*) FROM mg_t").Scan(&nref); err != nil || total != mgRows || nref != mgRows {
		t.Fatalf("loaded %d rows into the sub-tables, %d into the reference (%v), want %d", total, nref, err, mgRows)
	}

	gen := &mgGen{rng: rng, ids: ids}
	var fails []string
	nPrepared := 0
	modes := map[string]int{} // how the answers were compared
	byWhy := map[string]int{}
	start := time.Now()
	for i := range nq {
		q := gen.query()
		prepared := rng.IntN(4) == 0
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		refCols, refRows, refErr := mgFetch(ctx, ref, false, q.text)
		sqlText, how := q.text, "text"
		var ksCols []string
		var ksRows [][]string
		var ksErr error
		if prepared {
			sqlText, how = q.ptext, fmt.Sprintf("prepared, args %v", q.args)
			ksCols, ksRows, ksErr = mgFetch(ctx, ks, true, q.ptext, q.args...)
		} else {
			ksCols, ksRows, ksErr = mgFetch(ctx, ks, false, q.text)
		}
		cancel()
		if prepared {
			nPrepared++
		}
		var why string
		switch {
		case refErr != nil:
			why = "the reference failed (a generator bug)"
		case ksErr != nil:
			why = fmt.Sprintf("keyshard failed (error %d)", myErrCode(ksErr))
		default:
			why = mgCompare(&q, ksCols, ksRows, refCols, refRows)
		}
		switch {
		case q.total:
			modes["ordered"]++
		case q.keyCols != nil:
			modes["ORDER BY keys"]++
		case !q.limit:
			modes["multiset"]++
		default:
			modes["row count"]++
		}
		if why == "" {
			continue
		}
		byWhy[why]++
		msg := fmt.Sprintf("seed %d, query %d (%s): %s\n    %s\n", seed, i, how, why, sqlText)
		if prepared {
			msg += "    reference ran: " + q.text + "\n"
		}
		fails = append(fails, msg+"    reference: "+mgShow(refCols, refRows, refErr)+"\n    keyshard:  "+mgShow(ksCols, ksRows, ksErr))
	}
	t.Logf("%d queries (%d of them prepared) in %v, compared by %v", nq, nPrepared, time.Since(start).Round(time.Millisecond), modes)
	for _, f := range fails[:min(len(fails), 20)] {
		t.Error(f)
	}
	if len(fails) > 0 {
		t.Fatalf("%d of %d queries differ from the reference: %v (seed %d: KS_MERGE_SEED=%d replays)", len(fails), nq, byWhy, seed, seed)
	}
}

// ---------------------------------------------------------------------
// max_merge_rows.

func TestMergeLimits(t *testing.T) {
	mgFreshDB(t, "merge_lim", basePort, basePort+1)
	p := startProxy(t, mergeYAML("%ADDR%", "max_merge_rows: 50\n"))
	db := p.open(t, "ks:ks", "merge_lim", "")
	ctx := context.Background()
	// 1000 rows, grp = id % 200 (200 groups of 5), v = id % 7.
	mustExec(t, db, "CREATE TABLE mg_lim (id INT PRIMARY KEY, grp INT NOT NULL, v INT NOT NULL)")
	for start := 1; start <= 1000; start += 250 {
		var vals []string
		for id := start; id < start+250; id++ {
			vals = append(vals, fmt.Sprintf("(%d, %d, %d)", id, id%200, id%7))
		}
		mustExec(t, db, "INSERT INTO mg_lim (id, grp, v) VALUES "+strings.Join(vals, ", "))
	}
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fetch := func(prepared bool, q string, args ...any) ([][]string, error) {
		_, rows, err := mgFetch(ctx, c, prepared, q, args...)
		return rows, err
	}
	col := func(rows [][]string, i int) string {
		var out []string
		for _, r := range rows {
			out = append(out, r[i])
		}
		return strings.Join(out, ",")
	}
	seq := func(from, to, step int) string {
		var out []string
		for i := from; ; i += step {
			out = append(out, strconv.Itoa(i))
			if i == to {
				return strings.Join(out, ",")
			}
		}
	}
	wantLimitErr := func(what string, err error) {
		t.Helper()
		me := wantMySQLErr(t, what, err, 1038, "HY001")
		if !strings.Contains(me.Message, "max_merge_rows") {
			t.Fatalf("%s: message %q does not name max_merge_rows", what, me.Message)
		}
	}

	// Re-sorting 200 groups by COUNT(*) must hold them all: past the limit.
	_, err = fetch(false, "SELECT grp, COUNT(*) FROM mg_lim GROUP BY grp ORDER BY COUNT(*) DESC, grp")
	wantLimitErr("GROUP BY grp ORDER BY COUNT(*) over 200 groups", err)
	// The same connection goes on.
	if rows, err := fetch(false, "SELECT COUNT(*), SUM(v) FROM mg_lim"); err != nil || col(rows, 0) != "1000" {
		t.Fatalf("after the limit error: %v %v", rows, err)
	}
	_, err = fetch(true, "SELECT grp, COUNT(*) AS n FROM mg_lim WHERE id > ? GROUP BY grp ORDER BY n DESC", 0)
	wantLimitErr("prepared GROUP BY grp ORDER BY n", err)
	_, err = fetch(false, "SELECT grp, SUM(v) FROM mg_lim GROUP BY grp ORDER BY SUM(v), grp")
	wantLimitErr("GROUP BY grp ORDER BY SUM(v)", err)

	// Streaming merges are never bounded by it.
	for _, tc := range []struct {
		q    string
		args []any
		col  int
		want string
	}{
		{"SELECT id FROM mg_lim ORDER BY id LIMIT 500", nil, 0, seq(1, 500, 1)},
		{"SELECT id, grp FROM mg_lim ORDER BY id DESC", nil, 0, seq(1000, 1, -1)},
		{"SELECT id FROM mg_lim WHERE id > ? ORDER BY id LIMIT 100, 100", []any{0}, 0, seq(101, 200, 1)},
		// ORDER BY grp, id: grp 0 holds 200, 400, ..., 1000, then each
		// grp k holds k, k+200, ..., k+800. Rows 300..309 are grp 60-61.
		{"SELECT grp, id FROM mg_lim ORDER BY grp, id LIMIT 300, 10", nil, 1, "60,260,460,660,860,61,261,461,661,861"},
		// GROUP BY ordered on the group key merges groups in stream order.
		{"SELECT grp, COUNT(*) FROM mg_lim GROUP BY grp ORDER BY grp", nil, 0, seq(0, 199, 1)},
		{"SELECT grp AS k, COUNT(*) AS n FROM mg_lim GROUP BY grp ORDER BY k DESC LIMIT 10", nil, 0, seq(199, 190, -1)},
		{"SELECT grp, MAX(id) FROM mg_lim WHERE id > ? GROUP BY grp ORDER BY 1", []any{0}, 0, seq(0, 199, 1)},
		{"SELECT DISTINCT grp FROM mg_lim ORDER BY grp", nil, 0, seq(0, 199, 1)},
		{"SELECT COUNT(DISTINCT grp), COUNT(*) FROM mg_lim", nil, 0, "200"},
		// Few groups re-sorted by an aggregate: under the limit.
		// id 1..1000 mod 7: residues 1-6 hold 143 rows, 0 holds 142.
		{"SELECT v, COUNT(*) FROM mg_lim GROUP BY v ORDER BY COUNT(*) DESC, v", nil, 0, "1,2,3,4,5,6,0"},
	} {
		rows, err := fetch(len(tc.args) > 0, tc.q, tc.args...)
		if err != nil {
			t.Fatalf("%s: %v (max_merge_rows must not bound a streaming merge)", tc.q, err)
		}
		if got := col(rows, tc.col); got != tc.want {
			t.Fatalf("%s: column %d = %.200s, want %.200s", tc.q, tc.col, got, tc.want)
		}
	}
	rows, err := fetch(false, "SELECT grp, COUNT(*), SUM(id) FROM mg_lim GROUP BY grp ORDER BY grp")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 200 {
		t.Fatalf("GROUP BY grp ORDER BY grp: %d groups, want 200", len(rows))
	}
	for k, r := range rows {
		want := 5*k + 2000 // k, k+200, ..., k+800
		if k == 0 {
			want = 3000 // 200, 400, ..., 1000
		}
		if r[0] != strconv.Itoa(k) || r[1] != "5" || r[2] != strconv.Itoa(want) {
			t.Fatalf("group %d: %v, want [%d 5 %d]", k, r, k, want)
		}
	}
	waitPoolsIdle(t, p)
}

// ---------------------------------------------------------------------
// Shard failures and clients that go away in the middle of a merge.

const (
	mgBigRows = 64000 // 32 MB per sub-table: far more than the socket buffers hold
	mgBigPad  = 4000
)

func TestMergeFailures(t *testing.T) {
	mgFreshDB(t, "merge_fail", basePort, basePort+1)
	t.Cleanup(func() { // ~256 MB
		for _, port := range []int{basePort, basePort + 1} {
			d, err := sql.Open("mysql", fmt.Sprintf("ks:ks@tcp(127.0.0.1:%d)/", port))
			if err == nil {
				_, _ = d.Exec("DROP DATABASE IF EXISTS merge_fail")
				d.Close()
			}
		}
	})
	p := startProxy(t, mergeYAML("%ADDR%", ""))
	db := p.open(t, "ks:ks", "merge_fail", "")
	mustExec(t, db, fmt.Sprintf("CREATE TABLE mg_big (id INT PRIMARY KEY, pad VARCHAR(%d) NOT NULL)", mgBigPad))
	mustExec(t, db, "CREATE TABLE mg_gone (id INT PRIMARY KEY, v INT)")
	// Load mg_big straight into its sub-tables (id mod 8), in parallel.
	subs := make([]*sql.DB, 8)
	for i := range subs {
		subs[i] = direct(t, mgSubPort(i), "merge_fail")
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range subs {
		wg.Go(func() {
			_, errs[i] = subs[i].Exec(fmt.Sprintf("INSERT INTO mg_big_%04d (id, pad) SELECT seq, REPEAT(CHAR(65 + seq %% 26), %d) FROM seq_1_to_%d WHERE seq %% 8 = %d",
				i, mgBigPad, mgBigRows, i))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// keyshard finds them where the rule says they are.
	for _, id := range []int{1, 6, 12345, mgBigRows} {
		var n int
		if err := db.QueryRow("SELECT LENGTH(pad) FROM mg_big WHERE id = ?", id).Scan(&n); err != nil || n != mgBigPad {
			t.Fatalf("point read of mg_big id %d: %d %v", id, n, err)
		}
	}
	const bigLike = `%mg\_big\_%`

	t.Run("ShardKilledMidMerge", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		rows, err := db.QueryContext(ctx, "SELECT * FROM mg_big ORDER BY id")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var id int64
		var pad sql.RawBytes
		for want := int64(1); want <= 5; want++ {
			if !rows.Next() {
				t.Fatalf("row %d: no row (%v)", want, rows.Err())
			}
			if err := rows.Scan(&id, &pad); err != nil || id != want || len(pad) != mgBigPad {
				t.Fatalf("row %d: id %d, %d bytes of pad, %v", want, id, len(pad), err)
			}
		}
		// The client stops reading; node1 is still sending one sub-table's
		// rows. Kill that statement on the backend.
		victim, info := mgWaitBackendQuery(t, basePort, bigLike)
		mustExec(t, direct(t, basePort, ""), fmt.Sprintf("KILL QUERY %d", victim))
		subsKilled := regexp.MustCompile(`mg_big_\d{4}`).FindAllString(info, -1)

		type end struct {
			n, last int64
			err     error
			order   string
		}
		done := make(chan end, 1)
		go func() {
			e := end{last: 5}
			for rows.Next() {
				if err := rows.Scan(&id, &pad); err != nil {
					e.err = err
					break
				}
				if id != e.last+1 && e.order == "" {
					e.order = fmt.Sprintf("id %d after %d", id, e.last)
				}
				e.last = id
				e.n++
			}
			if e.err == nil {
				e.err = rows.Err()
			}
			done <- e
		}()
		var e end
		select {
		case e = <-done:
		case <-time.After(90 * time.Second):
			cancel()
			t.Fatalf("no end of the result 90s after KILL QUERY %d (%s): the merge hangs", victim, info)
		}
		if e.err == nil {
			t.Fatalf("after KILL QUERY of %s on node1 the result ended without an error, %d more rows up to id %d: a truncated result looks complete", subsKilled, e.n, e.last)
		}
		t.Logf("read %d more rows (to id %d) before: %v", e.n, e.last, e.err)
		if e.order != "" {
			t.Errorf("rows out of order before the error: %s", e.order)
		}
		var me *gomysql.MySQLError
		if !errors.As(e.err, &me) || me.Number != 1317 {
			t.Fatalf("want the backend's error 1317 (query interrupted), got %v", e.err)
		}
		if !slices.ContainsFunc(subsKilled, func(sub string) bool {
			return strings.HasPrefix(me.Message, "keyshard: node node1 "+sub+": ")
		}) {
			t.Fatalf("message %q does not start with \"keyshard: node node1 <sub-table>: \" for %v", me.Message, subsKilled)
		}
		if e.last >= mgBigRows {
			t.Fatalf("all %d rows arrived although a shard was killed", mgBigRows)
		}
		rows.Close()

		// The proxy goes on: the same client, new merges.
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM mg_big").Scan(&n); err != nil || n != mgBigRows {
			t.Fatalf("COUNT(*) after the failure: %d %v", n, err)
		}
		if got := queryCol(t, db, "SELECT id FROM mg_big ORDER BY id DESC LIMIT 3"); strings.Join(got, ",") != fmt.Sprintf("%d,%d,%d", mgBigRows, mgBigRows-1, mgBigRows-2) {
			t.Fatalf("ORDER BY id DESC LIMIT 3 after the failure: %v", got)
		}
		waitPoolsIdle(t, p)
		mgWaitNoBackendQuery(t, bigLike, basePort, basePort+1)
	})

	t.Run("ClientGoneMidMerge", func(t *testing.T) {
		c, err := client.Connect(p.Addr, "ks", "ks", "merge_fail")
		if err != nil {
			t.Fatal(err)
		}
		closed := false
		defer func() {
			if !closed {
				c.Close()
			}
		}()
		var got []string
		stop := errors.New("stop reading")
		err = c.ExecuteSelectStreaming("SELECT * FROM mg_big ORDER BY id", &mysql.Result{}, func(row []mysql.FieldValue) error {
			v := row[0].Value()
			if b, ok := v.([]byte); ok {
				v = string(b)
			}
			got = append(got, fmt.Sprint(v))
			if len(got) == 10 {
				return stop
			}
			return nil
		}, nil)
		if err == nil || strings.Join(got, ",") != "1,2,3,4,5,6,7,8,9,10" {
			t.Fatalf("first rows of the merge: %v (%v)", got, err)
		}
		// The merge is still running (the shards have much more to send)
		// when the client goes away.
		mgWaitBackendQuery(t, basePort, bigLike)
		c.Close()
		closed = true
		waitPoolsIdle(t, p)
		mgWaitNoBackendQuery(t, bigLike, basePort, basePort+1)
		if got := queryCol(t, db, "SELECT id FROM mg_big WHERE id > ? ORDER BY id LIMIT 3", 100); strings.Join(got, ",") != "101,102,103" {
			t.Fatalf("after the client went away: %v", got)
		}
		waitPoolsIdle(t, p)
	})

	t.Run("ShardFailsAtOnce", func(t *testing.T) {
		var vals []string
		for id := 1; id <= 40; id++ {
			vals = append(vals, fmt.Sprintf("(%d, %d)", id, id%3))
		}
		mustExec(t, db, "INSERT INTO mg_gone (id, v) VALUES "+strings.Join(vals, ", "))
		node2 := direct(t, basePort+1, "merge_fail")
		mustExec(t, node2, "DROP TABLE mg_gone_0005")
		c, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, tc := range []struct {
			q    string
			args []any
		}{
			{"SELECT * FROM mg_gone ORDER BY id", nil},
			{"SELECT id FROM mg_gone ORDER BY id DESC LIMIT 3", nil},
			{"SELECT COUNT(*), SUM(v), AVG(v) FROM mg_gone", nil},
			{"SELECT v, COUNT(*) FROM mg_gone GROUP BY v ORDER BY COUNT(*) DESC", nil},
			{"SELECT DISTINCT v FROM mg_gone", nil},
			{"SELECT id FROM mg_gone WHERE v >= ? ORDER BY id LIMIT 5", []any{0}},
		} {
			_, _, err := mgFetch(context.Background(), c, tc.args != nil, tc.q, tc.args...)
			me := wantMySQLErr(t, tc.q, err, 1146, "42S02")
			if !strings.HasPrefix(me.Message, "keyshard: node node2 mg_gone_0005: ") || !strings.Contains(me.Message, "mg_gone_0005' doesn't exist") {
				t.Fatalf("%s: message %q, want the backend's prefixed with \"keyshard: node node2 mg_gone_0005: \"", tc.q, me.Message)
			}
			// The connection goes on: a statement on one healthy sub-table.
			var v int
			if err := c.QueryRowContext(context.Background(), "SELECT v FROM mg_gone WHERE id = 6").Scan(&v); err != nil || v != 0 {
				t.Fatalf("after %s: %d %v", tc.q, v, err)
			}
		}
		mustExec(t, node2, "CREATE TABLE mg_gone_0005 LIKE mg_gone_0004")
		var n int
		if err := c.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM mg_gone").Scan(&n); err != nil || n != 35 {
			t.Fatalf("COUNT(*) with mg_gone_0005 back and empty: %d %v, want 35", n, err)
		}
		if got := queryCol(t, db, "SELECT id FROM mg_gone ORDER BY id LIMIT 6"); strings.Join(got, ",") != "1,2,3,4,6,7" {
			t.Fatalf("ORDER BY id LIMIT 6 with mg_gone_0005 empty: %v", got)
		}
		waitPoolsIdle(t, p)
	})
}
