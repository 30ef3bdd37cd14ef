package fuzzsql

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/keyshard/keyshard/test/sqldiff"
)

// reTrailingNum splits a condition from the number it ends with.
var reTrailingNum = regexp.MustCompile(`^(.*[^0-9-])(-?[0-9]+)$`)

// stmt is a generated statement and what comparing its answers needs.
type stmt struct {
	text  string // literals inline
	ptext string // ? for the values, their arguments in args
	args  []any
	write bool
	table *table // the table a write changes

	// Reads.
	total   bool   // the ORDER BY fixes the rows' order completely
	keyCols []int  // every ORDER BY key is a select-list item: their positions
	limit   bool   // a LIMIT, and the order is not total
	full    string // the statement without its LIMIT, when limit
	fullP   string // the same with ? (its arguments are args[:nfull])
	nfull   int
	fold    bool   // compare case-insensitively ('abc' and 'ABC' are one group)
	concat  []bool // per column: a GROUP_CONCAT, its elements in any order
}

// item is one select-list item.
type item struct {
	expr   string
	plit   string // a value after expr: ? in the binary protocol (then the item has an alias)
	parg   any
	alias  string
	id     string // what it computes, lower case
	concat bool
	fold   bool
}

func (it item) sql() string {
	if it.alias != "" {
		return it.expr + " AS " + it.alias
	}
	return it.expr
}

// orderKey is one ORDER BY key.
type orderKey struct {
	text string
	id   string
	item int // the select-list item it is, or -1
}

type gen struct {
	r    *rand.Rand
	s    *schema
	v    *valueGen
	rows map[string]int // rows in each table now (the reference's)
	dcol string         // this statement's DISTINCT aggregate argument
}

func (g *gen) pick(s []string) string { return s[g.r.IntN(len(s))] }
func (g *gen) chance(pct int) bool    { return g.r.IntN(100) < pct }
func (g *gen) dir() string            { return g.pick([]string{"", "", " ASC", " DESC", " DESC"}) }

// keyLit writes a key value of t: one of its keys mostly.
func (g *gen) keyLit(w *sqldiff.Builder, t *table) {
	if g.chance(90) {
		k := pick(g.r, t.keys)
		if kind := t.key().kind; (kind == kDate || kind == kDT) && g.chance(30) {
			w.Lit(k, timeArg(k)) // bound as MYSQL_TYPE_DATETIME
			return
		}
		if !strings.HasPrefix(k, "'") && !strings.HasPrefix(k, "-") && g.chance(8) {
			// An integer key written as a string: '42'.
			w.Lit("'"+k+"'", k)
			return
		}
		w.Lit(k, keyArg(k))
		return
	}
	w.Lit(g.v.literal(t.key().kind))
}

// litLess orders two literals of one kind.
func litLess(a, b string) bool {
	x, err1 := strconv.ParseInt(a, 10, 64)
	y, err2 := strconv.ParseInt(b, 10, 64)
	if err1 == nil && err2 == nil {
		return x < y
	}
	return a < b
}

// keyPred writes a condition on t's key, qualified by q ("" or "th.").
func (g *gen) keyPred(w *sqldiff.Builder, t *table, q string) {
	k := q + t.key().name
	switch g.r.IntN(10) {
	case 0, 1, 2:
		w.Add(k + " = ")
		g.keyLit(w, t)
	case 3, 4:
		w.Add(k + " IN (")
		for i := range 1 + g.r.IntN(5) {
			if i > 0 {
				w.Add(", ")
			}
			g.keyLit(w, t)
		}
		w.Add(")")
	case 5:
		a, b := pick(g.r, t.keys), pick(g.r, t.keys)
		if litLess(b, a) {
			a, b = b, a
		}
		w.Add(k + " BETWEEN ")
		w.Lit(a, keyArg(a))
		w.Add(" AND ")
		w.Lit(b, keyArg(b))
	case 6:
		w.Add(k + g.pick([]string{" > ", " < ", " >= ", " <= ", " <> "}))
		g.keyLit(w, t)
	case 7:
		w.Add("(" + k + " = ")
		g.keyLit(w, t)
		w.Add(" OR " + k + " = ")
		g.keyLit(w, t)
		w.Add(")")
	case 8:
		w.Add("(" + k + g.pick([]string{" >= ", " > "}))
		g.keyLit(w, t)
		w.Add(" AND " + k + g.pick([]string{" < ", " <= "}))
		g.keyLit(w, t)
		w.Add(")")
	default:
		w.Add(g.pick([]string{k + " IS NULL", k + " IS NOT NULL", "NOT (" + k + " IS NULL)"}))
	}
}

// colPred writes a condition on a non-key column c.
func (g *gen) colPred(w *sqldiff.Builder, c column, q string) {
	n := q + c.name
	switch g.r.IntN(10) {
	case 7:
		w.Add(n + " NOT IN (")
		w.Lit(g.v.literal(c.kind))
		w.Add(", ")
		w.Lit(g.v.literal(c.kind))
		w.Add(")")
	case 8:
		if c.numeric() {
			w.Add(g.pick([]string{"COALESCE(" + n + ", -1) = ", n + " + 1 > ", "ABS(" + n + ") >= ", n + " % 3 = "}))
			w.Lit(g.v.literal(kInt))
			return
		}
		w.Add(g.pick([]string{"COALESCE(" + n + ", '') = ", "NOT (" + n + " <=> "}))
		if strings.HasSuffix(w.Text.String(), "<=> ") {
			w.Lit(g.v.literal(c.kind))
			w.Add(")")
			return
		}
		w.Lit(g.v.literal(c.kind))
	case 9:
		w.Add("NOT (" + n + g.pick([]string{" = ", " > "}))
		w.Lit(g.v.literal(c.kind))
		w.Add(")")
	case 0:
		w.Add(n + g.pick([]string{" IS NULL", " IS NOT NULL"}))
	case 1:
		w.Add(n + " IN (")
		for i := range 1 + g.r.IntN(3) {
			if i > 0 {
				w.Add(", ")
			}
			w.Lit(g.v.literal(c.kind))
		}
		w.Add(")")
	case 2:
		if c.kind == kStr {
			w.Add(n + " LIKE ")
			w.Lit(func(s string) (string, any) { return "'" + s + "'", s }(g.pick([]string{"a%", "A%", "%c", "ab_", "%", "z%", "a_c"})))
			return
		}
		a, _ := g.v.literal(c.kind)
		b, _ := g.v.literal(c.kind)
		if litLess(b, a) {
			a, b = b, a
		}
		w.Add(n + " BETWEEN ")
		w.Lit(a, keyArg(a))
		w.Add(" AND ")
		w.Lit(b, keyArg(b))
	default:
		w.Add(n + g.pick([]string{" = ", " = ", " <> ", " < ", " >= "}))
		w.Lit(g.v.literal(c.kind))
	}
}

// pred writes one condition on t, on its key about half the time.
func (g *gen) pred(w *sqldiff.Builder, t *table, q string) {
	if t.key().kind != kInt && g.chance(45) || g.chance(15) {
		g.keyPred(w, t, q)
		return
	}
	if g.chance(10) {
		w.Add("(")
		g.keyPred(w, t, q)
		w.Add(" OR ")
		g.colPred(w, pick(g.r, t.cols[1:]), q)
		w.Add(")")
		return
	}
	g.colPred(w, pick(g.r, t.cols[1:]), q)
}

func (g *gen) where(w *sqldiff.Builder, t *table, q string) {
	if g.chance(15) {
		return
	}
	w.Add(" WHERE ")
	if a := g.colsOf(t, func(c column) bool { return c.kind == kInt }); g.chance(5) && t.name != "g" {
		// A subquery on the global table.
		w.Add(q + a[0].name + g.pick([]string{" IN ", " NOT IN "}) + "(SELECT gk FROM g WHERE gv > ")
		w.Lit(g.v.literal(kWide))
		w.Add(")")
		return
	}
	g.pred(w, t, q)
	if g.chance(30) {
		w.Add(g.pick([]string{" AND ", " AND ", " OR "}))
		g.pred(w, t, q)
	}
}

func (g *gen) limit(w *sqldiff.Builder) {
	n := int64(pick(g.r, []int{0, 1, 2, 3, 5, 10, 50, 1000}))
	m := int64(pick(g.r, []int{0, 1, 3, 10, 100}))
	num := func(v int64) { w.Lit(strconv.FormatInt(v, 10), v) }
	switch g.r.IntN(3) {
	case 0:
		w.Add(" LIMIT ")
		num(n)
	case 1:
		w.Add(" LIMIT ")
		num(m)
		w.Add(", ")
		num(n)
	default:
		w.Add(" LIMIT ")
		num(n)
		w.Add(" OFFSET ")
		num(m)
	}
}

// ref is items[i] as an ORDER BY key: by expression, alias or ordinal.
func (g *gen) ref(items []item, i int) orderKey {
	it := items[i]
	forms := []string{it.expr, strconv.Itoa(i + 1)}
	if it.plit != "" {
		forms = forms[1:]
	}
	if it.alias != "" {
		forms = append(forms, it.alias)
	}
	return orderKey{text: g.pick(forms) + g.dir(), id: it.id, item: i}
}

func find(items []item, id string) int {
	return slices.IndexFunc(items, func(it item) bool { return it.id == id })
}

func (g *gen) aliases(items []item, prefix string, pct int) {
	for i := range items {
		if g.chance(pct) {
			items[i].alias = fmt.Sprintf("%s%d", prefix, i+1)
		}
	}
}

func selectList(w *sqldiff.Builder, distinct bool, items []item) {
	w.Add("SELECT ")
	if distinct {
		w.Add("DISTINCT ")
	}
	for i, it := range items {
		if i > 0 {
			w.Add(", ")
		}
		if it.plit != "" {
			w.Add(it.expr)
			w.Lit(it.plit, it.parg)
			w.Add(" AS " + it.alias)
			continue
		}
		w.Add(it.sql())
	}
}

func orderBy(w *sqldiff.Builder, keys []orderKey) {
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

// finish fills in s from the builder and the select list, and adds the
// LIMIT (whose prefix s.full keeps) when lim.
func (s *stmt) finish(w *sqldiff.Builder, items []item, keys []orderKey, lim func(*sqldiff.Builder)) {
	if lim != nil && !s.total {
		s.limit = true
		s.full, s.fullP, s.nfull = w.Text.String(), w.PText.String(), len(w.Args)
	}
	if lim != nil {
		lim(w)
	}
	s.text, s.ptext, s.args = w.Text.String(), w.PText.String(), w.Args
	for _, it := range items {
		s.concat = append(s.concat, it.concat)
		s.fold = s.fold || it.fold
	}
	if len(keys) > 0 {
		s.keyCols = []int{}
		for _, k := range keys {
			if k.item < 0 {
				s.keyCols = nil
				break
			}
			s.keyCols = append(s.keyCols, k.item)
		}
	}
}

func colItem(c column, q string) item {
	return item{expr: q + c.name, id: c.name}
}

// rowsQuery: rows of one table, any ORDER BY, LIMIT.
func (g *gen) rowsQuery(t *table) stmt {
	var s stmt
	var w sqldiff.Builder
	var items []item
	if g.chance(10) {
		for _, c := range t.cols {
			items = append(items, colItem(c, ""))
		}
		w.Add("SELECT * FROM " + t.name)
	} else {
		cols := slices.Clone(t.cols)
		g.r.Shuffle(len(cols), func(i, j int) { cols[i], cols[j] = cols[j], cols[i] })
		q, from := "", " FROM "+t.name
		switch g.r.IntN(10) {
		case 0:
			q = t.name + "."
		case 1:
			q, from = "x.", " FROM "+t.name+" AS x"
		case 2:
			q, from = "`"+t.name+"`.", " FROM `"+t.name+"`"
		}
		for _, c := range cols[:1+g.r.IntN(min(4, len(cols)))] {
			items = append(items, colItem(c, q))
		}
		if g.chance(30) {
			items = append(items, g.exprItem(t))
		}
		if g.chance(10) {
			// A value in the select list: a parameter when prepared.
			a := g.colsOf(t, func(c column) bool { return c.kind == kInt })[0].name
			n := int64(g.r.IntN(10))
			items = append(items, item{expr: g.pick([]string{a + " + ", "COALESCE(" + a + ", 0) * "}), plit: strconv.FormatInt(n, 10), parg: n, id: "param"})
		}
		g.aliases(items, "c", 25)
		for i := range items {
			if items[i].plit != "" && items[i].alias == "" {
				items[i].alias = fmt.Sprintf("p%d", i+1)
			}
		}
		if g.chance(15) {
			// An alias that is another column's name: ORDER BY that name
			// sorts by the alias (never the key's name: its order is total).
			i := g.r.IntN(len(items))
			c := pick(g.r, t.cols[1:])
			if c.name != items[i].id && find(items, c.name) < 0 {
				items[i].alias = c.name
			}
		}
		selectList(&w, false, items)
		w.Add(from)
	}
	g.where(&w, t, "")
	var keys []orderKey
	if g.chance(80) {
		for range 1 + g.r.IntN(2) {
			if g.chance(50) {
				keys = append(keys, g.ref(items, g.r.IntN(len(items))))
			} else {
				c := pick(g.r, t.cols)
				k := orderKey{text: c.name + g.dir(), id: c.name, item: find(items, c.name)}
				if j := slices.IndexFunc(items, func(it item) bool { return it.alias == c.name }); j >= 0 {
					k.id, k.item = items[j].id, j // the alias, not the column
				}
				keys = append(keys, k)
			}
		}
		if g.chance(60) {
			k := t.key().name
			if i := find(items, k); i >= 0 {
				keys = append(keys, g.ref(items, i))
			} else {
				keys = append(keys, orderKey{text: k + g.dir(), id: k, item: -1})
			}
		}
	}
	orderBy(&w, keys)
	s.total = slices.ContainsFunc(keys, func(k orderKey) bool { return k.id == t.key().name })
	var lim func(*sqldiff.Builder)
	if g.chance(40) {
		lim = g.limit
	}
	s.finish(&w, items, keys, lim)
	return s
}

// exprItem is an expression over a row's columns.
func (g *gen) exprItem(t *table) item {
	a := g.colsOf(t, func(c column) bool { return c.kind == kInt })[0].name
	cands := []string{a + " + 1", "COALESCE(" + a + ", 0)", "CASE WHEN " + a + " > 4 THEN 'hi' ELSE 'lo' END", a + " * 2 - 1", "IFNULL(" + a + ", -1)"}
	for _, c := range t.cols {
		switch c.kind {
		case kStr:
			cands = append(cands, "CONCAT("+c.name+", '-')", "LENGTH("+c.name+")", "UPPER("+c.name+")")
		case kDec:
			cands = append(cands, c.name+" * 2", "ROUND("+c.name+")", "-"+c.name)
		case kDT, kDate:
			cands = append(cands, "YEAR("+c.name+")", "DATE("+c.name+")")
		}
	}
	e := g.pick(cands)
	return item{expr: e, id: strings.ToLower(e)}
}

// distinctQuery: SELECT DISTINCT over a few non-key columns.
func (g *gen) distinctQuery(t *table) stmt {
	var s stmt
	var w sqldiff.Builder
	cols := slices.Clone(t.cols[1:])
	g.r.Shuffle(len(cols), func(i, j int) { cols[i], cols[j] = cols[j], cols[i] })
	cols = cols[:1+g.r.IntN(min(3, len(cols)))]
	items := make([]item, len(cols))
	for i, c := range cols {
		items[i] = colItem(c, "")
		items[i].fold = c.kind == kStr
	}
	g.aliases(items, "c", 25)
	selectList(&w, true, items)
	w.Add(" FROM " + t.name)
	g.where(&w, t, "")
	var keys []orderKey
	if g.chance(70) {
		for _, i := range g.r.Perm(len(items))[:1+g.r.IntN(len(items))] {
			keys = append(keys, g.ref(items, i))
		}
	}
	orderBy(&w, keys)
	s.total = len(keys) == len(items)
	var lim func(*sqldiff.Builder)
	if g.chance(35) {
		lim = g.limit
	}
	s.finish(&w, items, keys, lim)
	return s
}

func (g *gen) colsOf(t *table, f func(column) bool) []column {
	var out []column
	for _, c := range t.cols {
		if f(c) {
			out = append(out, c)
		}
	}
	return out
}

// distinctArg is the one column this statement's DISTINCT aggregates take
// (keyshard merges one distinct stream per statement).
func (g *gen) distinctArg(t *table, f func(column) bool) string {
	if g.dcol == "" {
		g.dcol = pick(g.r, g.colsOf(t, func(c column) bool { return c.kind != kStr })).name
	}
	c, _ := t.col(g.dcol)
	if f(c) {
		return g.dcol
	}
	return ""
}

// agg returns an aggregate, or an expression over aggregates, of t.
func (g *gen) agg(t *table) item {
	all := func(column) bool { return true }
	num := func(c column) bool { return c.numeric() }
	var e string
	fold := false
	switch g.r.IntN(14) {
	case 0:
		e = "COUNT(*)"
	case 1:
		e = "COUNT(" + pick(g.r, t.cols).name + ")"
	case 2:
		e = "SUM(" + pick(g.r, g.colsOf(t, num)).name + ")"
	case 3:
		e = "AVG(" + pick(g.r, g.colsOf(t, num)).name + ")"
	case 4, 5:
		c := pick(g.r, t.cols)
		e = g.pick([]string{"MIN(", "MAX("}) + c.name + ")"
		fold = c.kind == kStr
	case 6, 7:
		e = "COUNT(DISTINCT " + g.distinctArg(t, all) + ")"
		if c := g.distinctArg(t, num); c != "" && g.chance(50) {
			e = g.pick([]string{"SUM", "AVG"}) + "(DISTINCT " + c + ")"
		}
	case 8:
		c := pick(g.r, g.colsOf(t, func(c column) bool { return c.kind == kInt || c.kind == kStr }))
		e = "GROUP_CONCAT(" + c.name + ")"
		fold = c.kind == kStr
	default:
		a := g.colsOf(t, func(c column) bool { return c.kind == kInt })[0].name
		cands := []string{"COUNT(*)*2+1", "SUM(" + a + ")+COUNT(*)", "MAX(" + a + ")-MIN(" + a + ")", "COUNT(" + a + ")*10-COUNT(*)"}
		if c, ok := t.col("d"); ok {
			cands = append(cands, "SUM("+c.name+")/COUNT(*)", "MAX(d)-MIN(d)")
		}
		// Over a BIGINT key MAX(k)-MIN(k) can overflow: 1690 for the
		// rows sent, nothing for groups a LIMIT skips (README.md).
		if t.key().numeric() {
			k := t.key().name
			cands = append(cands, "MAX("+k+")-MIN("+k+")", "SUM("+k+")", "MIN("+k+")")
		}
		e = g.pick(cands)
	}
	lower := strings.ToLower(e)
	return item{expr: e, id: lower, concat: strings.HasPrefix(lower, "group_concat("), fold: fold}
}

// aggQuery: aggregates over the whole (filtered) table: one row.
func (g *gen) aggQuery(t *table) stmt {
	s := stmt{total: true}
	var w sqldiff.Builder
	items := make([]item, 1+g.r.IntN(4))
	for i := range items {
		items[i] = g.agg(t)
	}
	g.aliases(items, "x", 30)
	selectList(&w, false, items)
	w.Add(" FROM " + t.name)
	g.where(&w, t, "")
	if g.chance(10) {
		a := g.colsOf(t, func(c column) bool { return c.kind == kInt })[0].name
		w.Add(" HAVING " + g.pick([]string{"COUNT(*) > 3", "COUNT(*) = 0", "MAX(" + a + ") > 5", "SUM(" + a + ") < 100"}))
	}
	if g.chance(5) {
		w.Add(g.pick([]string{" LIMIT 1", " LIMIT 1, 1", " LIMIT 0"}))
	}
	s.finish(&w, items, nil, nil)
	return s
}

// groupQuery: GROUP BY one or two small-domain columns, HAVING, ORDER BY,
// LIMIT.
func (g *gen) groupQuery(t *table) stmt {
	var s stmt
	var w sqldiff.Builder
	cands := g.colsOf(t, func(c column) bool { return c.kind == kInt || c.kind == kStr })
	g.r.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	gcols := cands[:1+g.r.IntN(len(cands))]
	var gkeys []string
	var items []item
	exprKey := false
	if g.chance(15) {
		// A group key that is an expression, or the shard key itself.
		e := g.exprItem(t)
		if g.chance(40) {
			e = item{expr: t.key().name, id: t.key().name}
		}
		exprKey = e.expr != t.key().name
		gkeys = append(gkeys, e.expr)
		items = append(items, item{expr: e.expr, id: strings.ToLower(e.expr)})
		s.fold = s.fold || strings.Contains(e.expr, "UPPER") || strings.Contains(e.expr, "CONCAT")
	}
	for _, c := range gcols {
		gkeys = append(gkeys, c.name)
		if g.chance(80) {
			it := item{expr: c.name, id: c.name, fold: c.kind == kStr}
			if g.chance(30) {
				it.alias = "g_" + c.name
			}
			items = append(items, it)
		}
		s.fold = s.fold || c.kind == kStr
	}
	for range 1 + g.r.IntN(3) {
		it := g.agg(t)
		for exprKey && it.concat {
			// MariaDB 10.11 merges a NULL group into the next with
			// GROUP_CONCAT, GROUP BY an expression and ORDER BY it DESC
			// (README.md, MariaDB's own).
			it = g.agg(t)
		}
		if g.chance(40) {
			it.alias = fmt.Sprintf("x%d", len(items)+1)
		}
		items = append(items, it)
	}
	g.r.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
	if g.chance(8) {
		// An aggregate named like a group key column: GROUP BY that name
		// is the column (MariaDB), never the aggregate. No HAVING, ORDER
		// BY or LIMIT then (there the name is the alias).
		for i := range items {
			if find(items, items[i].id) == i && !slices.Contains(gkeys, items[i].id) && items[i].id != "param" {
				for _, k := range gkeys {
					if find(items, k) < 0 && !strings.ContainsAny(k, " (") {
						items[i].alias = k
						selectList(&w, false, items)
						w.Add(" FROM " + t.name)
						g.where(&w, t, "")
						w.Add(" GROUP BY " + strings.Join(gkeys, ", "))
						s.finish(&w, items, nil, nil)
						return s
					}
				}
			}
		}
	}
	selectList(&w, false, items)
	w.Add(" FROM " + t.name)
	g.where(&w, t, "")
	w.Add(" GROUP BY " + strings.Join(gkeys, ", "))
	if g.chance(40) {
		w.Add(" HAVING ")
		for i := range 1 + g.r.IntN(2) {
			if i > 0 {
				w.Add(g.pick([]string{" AND ", " OR "}))
			}
			h := g.having(t, items, gcols)
			if m := reTrailingNum.FindStringSubmatch(h); m != nil {
				w.Add(m[1])
				n, _ := strconv.ParseInt(m[2], 10, 64)
				w.Lit(m[2], n)
			} else {
				w.Add(h)
			}
		}
	}
	var keys []orderKey
	if g.chance(70) {
		for range 1 + g.r.IntN(2) {
			switch g.r.IntN(3) {
			case 0:
				k := pick(g.r, gkeys)
				if i := find(items, k); i >= 0 {
					keys = append(keys, g.ref(items, i))
				} else {
					keys = append(keys, orderKey{text: k + g.dir(), id: k, item: -1})
				}
			case 1:
				var aggs []int
				for i, it := range items {
					// A division or an AVG too: MariaDB sorts by the
					// value rounded to its scale, and so does keyshard.
					if !slices.Contains(gkeys, it.id) && !it.concat && !it.fold {
						aggs = append(aggs, i)
					}
				}
				if len(aggs) > 0 {
					keys = append(keys, g.ref(items, pick(g.r, aggs)))
				}
			default:
				a := g.colsOf(t, func(c column) bool { return c.kind == kInt })[0].name
				e := g.pick([]string{"COUNT(*)", "SUM(" + a + ")", "MAX(" + a + ")", "MIN(" + t.key().name + ")", "MAX(" + t.key().name + ")"})
				keys = append(keys, orderKey{text: e + g.dir(), id: strings.ToLower(e), item: find(items, strings.ToLower(e))})
			}
		}
		if g.chance(40) {
			for _, k := range gkeys {
				if !slices.ContainsFunc(keys, func(x orderKey) bool { return x.id == k }) {
					keys = append(keys, orderKey{text: k + g.dir(), id: k, item: find(items, k)})
				}
			}
		}
	}
	orderBy(&w, keys)
	covered := true
	for _, k := range gkeys {
		covered = covered && slices.ContainsFunc(keys, func(x orderKey) bool { return x.id == k })
	}
	kmin, kmax := "min("+t.key().name+")", "max("+t.key().name+")"
	s.total = covered || slices.ContainsFunc(keys, func(k orderKey) bool { return k.id == kmin || k.id == kmax })
	var lim func(*sqldiff.Builder)
	if g.chance(30) {
		lim = g.limit
	}
	s.finish(&w, items, keys, lim)
	return s
}

func (g *gen) having(t *table, items []item, gcols []column) string {
	n := func() string { return g.pick([]string{"0", "1", "2", "3", "5", "10", "100"}) }
	switch g.r.IntN(4) {
	case 0:
		var cands []string
		for _, it := range items {
			if it.alias != "" && !it.concat && !it.fold && !strings.Contains(it.id, "(t") && !strings.Contains(it.id, "("+t.key().name+")") {
				cands = append(cands, it.alias)
			}
		}
		if len(cands) > 0 {
			return g.pick(cands) + g.pick([]string{" > ", " <= ", " <> "}) + n()
		}
		fallthrough
	case 1:
		c := pick(g.r, gcols)
		if c.kind == kStr {
			return g.pick([]string{c.name + " <> 'b'", c.name + " IS NOT NULL", c.name + " < 'b'"})
		}
		return c.name + g.pick([]string{" > 2", " IS NOT NULL", " <> 1", " IS NULL"})
	default:
		a := g.colsOf(t, func(c column) bool { return c.kind == kInt })[0].name
		h := []string{"COUNT(*) > ", "COUNT(*) < ", "SUM(" + a + ") > ", "MAX(" + a + ") >= "}
		if g.dcol == "" || g.dcol == a {
			g.dcol = a
			h = append(h, "COUNT(DISTINCT "+a+") >= ")
		}
		return g.pick(h) + n()
	}
}

// joinQuery: th with th2 on their keys (co-located), or th with the
// global table g.
func (g *gen) joinQuery() stmt {
	var s stmt
	var w sqldiff.Builder
	th := g.s.byName["th"]
	other := g.s.byName["th2"]
	global := g.chance(35)
	self := !global && g.chance(20)
	if global {
		other = g.s.byName["g"]
	}
	if self {
		other = th
	}
	x, y := "th", other.name
	if g.chance(25) || self {
		x, y = "x", "y"
	}
	oq := "" // the qualifier of other's columns: unambiguous but in a self-join
	if self {
		oq = "y."
	}
	from := " FROM th"
	if x == "x" {
		from += " AS x"
	}
	on := x + ".k = " + y + ".k"
	if global {
		on = x + ".a = " + y + ".gk"
	}
	yref := other.name
	if y == "y" {
		yref += " AS y"
	}
	comma := false
	switch g.r.IntN(4) {
	case 0:
		from += ", " + yref
		comma = true
	case 1:
		from += " LEFT JOIN " + yref + " ON " + on
	default:
		from += " JOIN " + yref + " ON " + on
	}
	// Columns: th's key qualified; the others unqualified where their
	// names are unambiguous (th2's carry a 2, g's a g).
	var items []item
	items = append(items, item{expr: x + ".k", id: "k"})
	for _, c := range th.cols[1:] {
		if g.chance(40) {
			expr := c.name
			if g.chance(30) {
				expr = x + "." + c.name
			}
			items = append(items, item{expr: expr, id: c.name})
		}
	}
	for _, c := range other.cols {
		if c.name == "k" {
			continue
		}
		if g.chance(50) {
			items = append(items, item{expr: oq + c.name, id: oq + c.name})
		}
	}
	if self {
		for i := range items {
			if !strings.Contains(items[i].expr, ".") {
				items[i].expr = x + "." + items[i].expr
			}
		}
	}
	agg := g.chance(30)
	if agg {
		var gk string
		if g.chance(50) {
			gk = "a"
			if self {
				gk = "x.a"
			}
			items = []item{{expr: gk, id: "a"}}
		} else {
			items = nil
		}
		items = append(items, item{expr: "COUNT(*)", id: "count(*)"})
		for _, c := range other.cols {
			if c.numeric() && c.name != "k" && c.name != "gk" {
				items = append(items, item{expr: "SUM(" + oq + c.name + ")", id: "sum(" + c.name + ")"})
				break
			}
		}
		selectList(&w, false, items)
		w.Add(from)
		g.joinWhere(&w, th, x, on, comma)
		if gk != "" {
			w.Add(" GROUP BY " + gk + " ORDER BY " + gk)
			s.total = true
		} else {
			s.total = true
		}
		s.finish(&w, items, nil, nil)
		return s
	}
	g.r.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
	selectList(&w, false, items)
	w.Add(from)
	g.joinWhere(&w, th, x, on, comma)
	var keys []orderKey
	if g.chance(80) {
		keys = append(keys, g.ref(items, find(items, "k")))
	}
	orderBy(&w, keys)
	// th's key is unique in the answer: th2 and g match at most one row.
	s.total = len(keys) > 0
	var lim func(*sqldiff.Builder)
	if g.chance(40) {
		lim = g.limit
	}
	s.finish(&w, items, keys, lim)
	return s
}

func (g *gen) joinWhere(w *sqldiff.Builder, th *table, x, on string, comma bool) {
	if comma {
		w.Add(" WHERE " + on)
		if g.chance(60) {
			w.Add(" AND ")
			g.pred(w, th, x+".")
		}
		return
	}
	if g.chance(70) {
		w.Add(" WHERE ")
		g.pred(w, th, x+".")
	}
}

// ---------------------------------------------------------------------
// Writes.

func (g *gen) values(w *sqldiff.Builder, t *table, cols []column, nrows int) {
	bad := len(t.bad) > 0 && g.chance(6)
	for i := range nrows {
		if i > 0 {
			w.Add(", ")
		}
		// The row no sub-table holds comes first: with a duplicate key
		// before it MariaDB reports 1062, keyshard 1526 (README.md, known
		// differences).
		row := g.v.row(t, bad && i == 0)
		w.Add("(")
		for j, c := range cols {
			if j > 0 {
				w.Add(", ")
			}
			ci := slices.IndexFunc(t.cols, func(x column) bool { return x.name == c.name })
			lit := row[ci]
			switch {
			case lit == "NULL":
				w.Add("NULL")
			case ci == 0 && (c.kind == kDate || c.kind == kDT) && g.chance(30):
				w.Lit(lit, timeArg(lit))
			case ci == 0:
				w.Lit(lit, keyArg(lit))
			case c.kind == kDec:
				w.Lit(lit, lit)
			default:
				w.Lit(lit, keyArg(lit))
			}
		}
		w.Add(")")
	}
}

func names(cols []column) string {
	var n []string
	for _, c := range cols {
		n = append(n, c.name)
	}
	return strings.Join(n, ", ")
}

// insert: INSERT [IGNORE] ... [ON DUPLICATE KEY UPDATE] or REPLACE, several rows.
func (g *gen) insert(t *table) stmt {
	var w sqldiff.Builder
	verb := g.pick([]string{"INSERT INTO ", "INSERT INTO ", "INSERT IGNORE INTO ", "REPLACE INTO ", "INSERT INTO "})
	odku := strings.HasPrefix(verb, "INSERT INTO") && g.chance(40)
	cols := slices.Clone(t.cols)
	if g.chance(30) {
		cols = append(cols[:1:1], cols[1:1+g.r.IntN(len(cols))]...)
	}
	if t.auto && g.chance(40) && len(cols) > 1 {
		cols = cols[1:] // AUTO_INCREMENT gives the ids (not all: INSERT ... SET needs one)
	}
	w.Add(verb + t.name)
	if g.chance(10) && !odku {
		// INSERT ... SET: one row.
		w.Add(" SET ")
		row := g.v.row(t, false)
		for j, c := range cols {
			if j > 0 {
				w.Add(", ")
			}
			ci := slices.IndexFunc(t.cols, func(x column) bool { return x.name == c.name })
			w.Add(c.name + " = ")
			if row[ci] == "NULL" {
				w.Add("NULL")
			} else {
				w.Lit(row[ci], keyArg(row[ci]))
			}
		}
		return stmt{text: w.Text.String(), ptext: w.PText.String(), args: w.Args, write: true, table: t}
	}
	if len(cols) == len(t.cols) && g.chance(25) {
		w.Add(" VALUES ")
	} else {
		w.Add(" (" + names(cols) + ") VALUES ")
	}
	g.values(&w, t, cols, 1+g.r.IntN(6))
	if odku {
		w.Add(" ON DUPLICATE KEY UPDATE ")
		var sets []string
		for _, c := range t.cols[1:] {
			if g.chance(50) || len(sets) == 0 {
				switch {
				case c.kind == kInt && g.chance(50):
					sets = append(sets, c.name+" = COALESCE("+c.name+", 0) + 1")
				case g.chance(60):
					sets = append(sets, c.name+" = VALUES("+c.name+")")
				default:
					v, _ := g.v.literal(c.kind)
					sets = append(sets, c.name+" = "+v)
				}
			}
		}
		w.Add(strings.Join(sets, ", "))
	}
	return stmt{text: w.Text.String(), ptext: w.PText.String(), args: w.Args, write: true, table: t}
}

func (g *gen) update(t *table) stmt {
	var w sqldiff.Builder
	w.Add("UPDATE " + t.name + " SET ")
	n := 0
	for _, c := range t.cols[1:] {
		if g.chance(40) || n == 0 && c.name == t.cols[len(t.cols)-1].name {
			if n > 0 {
				w.Add(", ")
			}
			n++
			switch {
			case c.kind == kInt && g.chance(40):
				w.Add(c.name + " = " + c.name + " + 1")
			case g.chance(10):
				w.Add(c.name + " = NULL")
			default:
				w.Add(c.name + " = ")
				w.Lit(g.v.literal(c.kind))
			}
		}
	}
	if g.chance(4) && !t.auto {
		w.Add(", " + t.key().name + " = ")
		g.keyLit(&w, t)
	}
	if g.chance(95) {
		w.Add(" WHERE ")
		g.pred(&w, t, "")
	}
	if g.chance(5) {
		w.Add(" ORDER BY " + t.key().name + fmt.Sprintf(" LIMIT %d", 1+g.r.IntN(3)))
	}
	return stmt{text: w.Text.String(), ptext: w.PText.String(), args: w.Args, write: true, table: t}
}

func (g *gen) delete(t *table) stmt {
	var w sqldiff.Builder
	w.Add("DELETE FROM " + t.name)
	if g.chance(98) {
		w.Add(" WHERE ")
		g.pred(&w, t, "")
	}
	if g.chance(5) {
		w.Add(" ORDER BY " + t.key().name + fmt.Sprintf(" LIMIT %d", 1+g.r.IntN(3)))
	}
	return stmt{text: w.Text.String(), ptext: w.PText.String(), args: w.Args, write: true, table: t}
}

// joinWrite: a multi-table UPDATE or DELETE of th joined with th2 on
// their keys (co-located); th is the table it changes.
func (g *gen) joinWrite() stmt {
	var w sqldiff.Builder
	th := g.s.byName["th"]
	th2 := g.s.byName["th2"]
	cond := func() {
		switch g.r.IntN(3) {
		case 0:
			g.pred(&w, th, "th.")
		case 1:
			g.colPred(&w, th2.cols[slices.IndexFunc(th2.cols, func(c column) bool { return c.name == "a2" })], "th2.")
		default:
			g.keyPred(&w, th2, "th2.")
		}
	}
	if g.chance(50) {
		if g.chance(50) {
			w.Add("UPDATE th JOIN th2 ON th.k = th2.k SET th.a = th2.a2")
			w.Add(" WHERE ")
		} else {
			w.Add("UPDATE th, th2 SET th.a = COALESCE(th2.a2, 0) + 1 WHERE th.k = th2.k AND ")
		}
	} else {
		w.Add("DELETE th FROM th JOIN th2 ON th.k = th2.k WHERE ")
	}
	cond()
	return stmt{text: w.Text.String(), ptext: w.PText.String(), args: w.Args, write: true, table: th}
}

// next generates one statement.
func (g *gen) next() stmt {
	g.dcol = ""
	t := pick(g.r, g.s.tables)
	if g.chance(30) {
		// Writes, more inserts while the table is small.
		n := g.rows[t.name]
		if t.name == "th" && g.chance(15) {
			return g.joinWrite()
		}
		if (t.name == "th" || t.name == "th2") && g.chance(15) {
			return g.insertSelect() // gen36_test.go
		}
		switch r := g.r.IntN(10); {
		case r < 4 || n < 20 && r < 7:
			return g.insert(t)
		case r < 7:
			return g.update(t)
		default:
			return g.delete(t)
		}
	}
	switch r := g.r.IntN(24); {
	case r == 20:
		return g.windowQuery(t) // gen36_test.go
	case r == 21:
		return g.cteQuery(t)
	case r == 22:
		return g.unionQuery()
	case r < 6:
		return g.rowsQuery(t)
	case r < 8:
		return g.distinctQuery(t)
	case r < 11:
		return g.aggQuery(t)
	case r < 16:
		return g.groupQuery(t)
	case r < 18:
		return g.joinQuery()
	case r < 20:
		return g.crossJoinQuery()
	default:
		return g.rowsQuery(t)
	}
}
