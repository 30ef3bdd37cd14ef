package fuzzsql

import (
	"slices"

	"github.com/keyshard/keyshard/test/sqldiff"
)

// Statements of issue 36: window functions, non-recursive CTEs, UNION
// [ALL] and INSERT ... SELECT. Window functions order by the key (unique)
// inside their partitions, so that their values are one server's too; a
// UNION's rows are compared as a multiset unless ordered by every column.

// windowQuery: window functions partitioned by the key (pushed down over
// every sub-table), by another column or by nothing (refused over several
// sub-tables, exact on one), through a named window now and then.
func (g *gen) windowQuery(t *table) stmt {
	var s stmt
	var w sqldiff.Builder
	k := t.key().name
	a := intCol(t).name
	part := "PARTITION BY " + k + " "
	switch g.r.IntN(8) {
	case 0:
		part = "PARTITION BY " + a + " "
	case 1:
		part = ""
	case 2:
		part = "PARTITION BY " + k + ", " + a + " "
	}
	fns := []string{"ROW_NUMBER()", "RANK()", "DENSE_RANK()", "COUNT(*)", "SUM(" + a + ")", "MAX(" + a + ")", "LAG(" + a + ")",
		"FIRST_VALUE(" + a + ")"}
	items := []item{colItem(t.key(), ""), colItem(t.cols[slices.IndexFunc(t.cols, func(c column) bool { return c.name == a })], "")}
	named := g.chance(20)
	for i := range 1 + g.r.IntN(2) {
		fn := g.pick(fns)
		over := "(" + part + "ORDER BY " + k + g.dir() + ")"
		if named && i == 0 {
			over = "wn"
		}
		id := "w" + string(rune('1'+i))
		items = append(items, item{expr: fn + " OVER " + over, alias: id, id: id})
	}
	selectList(&w, false, items)
	w.Add(" FROM " + t.name)
	g.where(&w, t, "")
	if named {
		w.Add(" WINDOW wn AS (" + part + "ORDER BY " + k + ")")
	}
	var keys []orderKey
	if g.chance(60) {
		if g.chance(50) {
			keys = append(keys, g.ref(items, 2))
		}
		keys = append(keys, g.ref(items, 0))
	}
	orderBy(&w, keys)
	s.total = len(keys) > 0
	var lim func(*sqldiff.Builder)
	if len(keys) > 0 && g.chance(40) {
		lim = g.limit
	}
	s.finish(&w, items, keys, lim)
	return s
}

// cteQuery: WITH over one table (its key and an INT column), read whole,
// filtered by key, aggregated by key, or joined on the key (th with th2).
func (g *gen) cteQuery(t *table) stmt {
	var s stmt
	var w sqldiff.Builder
	k := t.key().name
	ac := intCol(t)
	cols := k
	if ac.name != k {
		cols += ", " + ac.name
	}
	w.Add("WITH x AS (SELECT " + cols + " FROM " + t.name)
	if g.chance(50) {
		w.Add(" WHERE ")
		g.pred(&w, t, "")
	}
	w.Add(") ")
	var items []item
	var keys []orderKey
	switch {
	case t.name == "th" && g.chance(30):
		th2 := g.s.byName["th2"]
		a2 := intCol(th2)
		items = []item{{expr: "x.k", id: "k"}, colItem(ac, "x."), colItem(a2, "th2.")}
		selectList(&w, false, items)
		w.Add(" FROM x JOIN th2 ON th2.k = x.k")
	case g.chance(25):
		items = []item{colItem(t.key(), ""), {expr: "COUNT(*)", id: "count"}}
		selectList(&w, false, items)
		w.Add(" FROM x GROUP BY " + k)
	default:
		items = []item{colItem(t.key(), "")}
		if ac.name != k {
			items = append(items, colItem(ac, ""))
		}
		selectList(&w, false, items)
		w.Add(" FROM x")
		if g.chance(40) {
			w.Add(" WHERE ")
			g.keyPred(&w, t, "")
		}
	}
	if g.chance(60) {
		keys = append(keys, g.ref(items, 0))
	}
	orderBy(&w, keys)
	s.total = len(keys) > 0
	var lim func(*sqldiff.Builder)
	if len(keys) > 0 && g.chance(30) {
		lim = g.limit
	}
	s.finish(&w, items, keys, lim)
	return s
}

// unionQuery: th's and th2's keys and INT columns: UNION ALL (pushed down
// per sub-table), UNION (exact: the key in place), ORDER BY over it
// (exact on one sub-table), or with another table (not co-located).
func (g *gen) unionQuery() stmt {
	var s stmt
	var w sqldiff.Builder
	th := g.s.byName["th"]
	other := g.s.byName["th2"]
	if g.chance(15) {
		other = pick(g.r, g.s.tables)
	}
	arm := func(t *table) {
		a := intCol(t).name
		w.Add("SELECT " + t.key().name + ", " + a + " FROM " + t.name)
		if g.chance(60) {
			w.Add(" WHERE ")
			g.pred(&w, t, "")
		}
	}
	arm(th)
	w.Add(g.pick([]string{" UNION ALL ", " UNION ALL ", " UNION "}))
	arm(other)
	items := []item{{expr: "k", id: "k"}, {expr: "a", id: "a"}}
	var keys []orderKey
	if g.chance(20) {
		keys = []orderKey{{text: "1", id: "k", item: 0}, {text: "2", id: "a", item: 1}}
	}
	orderBy(&w, keys)
	s.total = len(keys) > 0
	s.finish(&w, items, keys, nil)
	return s
}

// insertSelect: INSERT ... SELECT between th and th2 (co-located, the key
// from the key), now and then into another table (refused: not
// co-located); IGNORE or ON DUPLICATE KEY UPDATE, for the keys both hold.
func (g *gen) insertSelect() stmt {
	var w sqldiff.Builder
	src, dst := g.s.byName["th"], g.s.byName["th2"]
	if g.chance(50) {
		src, dst = dst, src
	}
	if g.chance(10) {
		if t := pick(g.r, g.s.tables); t.name != src.name && !t.auto && t.key().kind == src.key().kind {
			dst = t
		}
	}
	sa := intCol(src).name
	da := intCol(dst).name
	odku := g.chance(30)
	if odku {
		w.Add("INSERT INTO ")
	} else {
		w.Add("INSERT IGNORE INTO ")
	}
	w.Add(dst.name + " (" + dst.key().name + ", " + da + ") SELECT " + src.key().name + ", " + sa + " FROM " + src.name)
	if g.chance(80) {
		w.Add(" WHERE ")
		g.pred(&w, src, "")
	}
	if odku {
		w.Add(" ON DUPLICATE KEY UPDATE " + da + " = COALESCE(" + da + ", 0) + 1")
	}
	return stmt{text: w.Text.String(), ptext: w.PText.String(), args: w.Args, write: true, table: dst}
}

// intCol is an INT column of t other than its key (the key if none).
func intCol(t *table) column {
	for _, c := range t.cols[1:] {
		if c.kind == kInt {
			return c
		}
	}
	return t.key()
}
