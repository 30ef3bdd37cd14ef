package fuzzsql

import (
	"slices"

	"github.com/keyshard/keyshard/test/sqldiff"
)

// crossJoinQuery: th joined with a table whose rows do not live with
// th's (tr, tl, tc, td, dp, or th2 on columns that are not the keys),
// which keyshard joins in the proxy: JOIN, LEFT JOIN or a comma join, on
// a column of each (a, s, sometimes the keys), columns and expressions
// of either table, conditions on each, ORDER BY th's columns, LIMIT.
func (g *gen) crossJoinQuery() stmt {
	var s stmt
	var w sqldiff.Builder
	th := g.s.byName["th"]
	y := g.s.byName[g.pick([]string{"tr", "tl", "tc", "td", "dp", "th2", "th2"})]
	yq := "y."
	suffix := ""
	if y.name == "th2" {
		suffix = "2"
	}
	// The join columns: a = a (small integers), s = s (general_ci words),
	// or the keys when they are of one kind.
	pairs := [][2]string{{"a", "a" + suffix}, {"s", "s" + suffix}}
	if th.key().kind == y.key().kind {
		// th2's: co-located, joined in one statement per sub-table.
		pairs = append(pairs, [2]string{"k", y.key().name})
	}
	if y.key().kind == kWide {
		pairs = append(pairs, [2]string{"a", y.key().name})
	}
	p := pick(g.r, pairs)
	on := "x." + p[0] + " = " + yq + p[1]
	switch {
	case g.chance(25):
		on = yq + p[1] + " = x." + p[0]
	case g.chance(10) && p[0] == "a":
		on = "x.a + 1 = " + yq + p[1] // an expression of each
	case g.chance(15) && p[0] != "s":
		on += " AND x.s = y.s" + suffix // two equalities
	}
	left := false
	from := " FROM th AS x"
	switch g.r.IntN(4) {
	case 0:
		from += ", " + y.name + " AS y"
	case 1:
		from += " LEFT JOIN " + y.name + " AS y ON " + on
		if g.chance(30) {
			// A condition on y in the ON: it selects y's matching rows.
			from += " AND y.a" + suffix + g.pick([]string{" > 3", " IS NOT NULL", " <> 2"})
		}
		left = true
	default:
		from += " JOIN " + y.name + " AS y ON " + on
	}
	comma := !left && !contains(from, " ON ")
	// The select list: th's key, some of th's columns and y's, an
	// expression of each now and then, y.* sometimes.
	items := []item{{expr: "x.k", id: "k"}}
	for _, c := range th.cols[1:] {
		if g.chance(35) {
			items = append(items, item{expr: "x." + c.name, id: c.name})
		}
	}
	all := g.chance(15) // every column of y
	for _, c := range y.cols {
		if all || g.chance(40) {
			items = append(items, item{expr: yq + c.name, id: "y." + c.name})
		}
	}
	if g.chance(25) {
		e := pick(g.r, []string{"COALESCE(y.a" + suffix + ", -1)", "y.a" + suffix + " + 1", "UPPER(y.s" + suffix + ")", "x.a * 2", "CONCAT(x.s, '-')"})
		items = append(items, item{expr: e, id: e})
	}
	g.aliases(items, "c", 20)
	selectList(&w, false, items)
	w.Add(from)
	var conds []func()
	if comma {
		conds = append(conds, func() { w.Add(on) })
	}
	if g.chance(60) {
		conds = append(conds, func() { g.pred(&w, th, "x.") })
	}
	if g.chance(30) {
		// On y: for a LEFT JOIN, checked on the joined rows (the NULL
		// row's too).
		conds = append(conds, func() { g.colPred(&w, pick(g.r, y.cols[1:]), "y.") })
	}
	for i, c := range conds {
		if i == 0 {
			w.Add(" WHERE ")
		} else {
			w.Add(" AND ")
		}
		c()
	}
	var keys []orderKey
	itemOf := func(e string) int {
		return slices.IndexFunc(items, func(it item) bool { return it.expr == e && it.alias == "" })
	}
	if g.chance(20) {
		// ORDER BY columns of both tables (or of LEFT JOIN's right
		// table): sorted in the proxy. x.k with y's key is total.
		if g.chance(40) {
			c := "y." + pick(g.r, y.cols[1:]).name
			keys = append(keys, orderKey{text: c + g.dir(), id: c, item: itemOf(c)})
		}
		yk := "y." + y.key().name
		if g.chance(50) {
			keys = append(keys, orderKey{text: yk + g.dir(), id: yk, item: itemOf(yk)}, orderKey{text: "x.k" + g.dir(), id: "k", item: 0})
		} else {
			keys = append(keys, orderKey{text: "x.k" + g.dir(), id: "k", item: 0}, orderKey{text: yk + g.dir(), id: yk, item: itemOf(yk)})
		}
		s.total = true
	} else if !left && g.chance(15) {
		// ORDER BY y's columns only: y is read first.
		k := "y." + y.key().name
		keys = append(keys, orderKey{text: k + g.dir(), id: k, item: slices.IndexFunc(items, func(it item) bool { return it.expr == k && it.alias == "" })})
		if g.chance(50) {
			c := pick(g.r, y.cols[1:])
			keys = append(keys, orderKey{text: "y." + c.name + g.dir(), id: "y." + c.name,
				item: slices.IndexFunc(items, func(it item) bool { return it.expr == "y."+c.name && it.alias == "" })})
		}
	} else if g.chance(60) {
		if i := slices.IndexFunc(items, func(it item) bool { return it.alias != "" && it.id == "k" }); i >= 0 && g.chance(30) {
			keys = append(keys, orderKey{text: items[i].alias + g.dir(), id: "k", item: i})
		} else {
			keys = append(keys, orderKey{text: "x.k" + g.dir(), id: "k", item: 0})
		}
	}
	orderBy(&w, keys)
	// th's key is not unique in the answer (y may match several rows):
	// the order is never total.
	var lim func(*sqldiff.Builder)
	if g.chance(30) {
		lim = g.limit
	}
	s.finish(&w, items, keys, lim)
	return s
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
