package fuzzsql

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Value kinds of columns.
const (
	kInt  = "int"  // small integers: group keys
	kWide = "wide" // integers over a wide range, negatives too
	kStr  = "str"  // words under utf8mb4_general_ci ('abc' = 'ABC')
	kBin  = "bin"  // words under utf8mb4_bin: string shard keys
	kDec  = "dec"  // DECIMAL(10,2)
	kDate = "date" // DATE
	kDT   = "dt"   // DATETIME
)

type column struct {
	name string
	sql  string // its type as in CREATE TABLE
	kind string
}

// numeric: SUM and AVG take it.
func (c column) numeric() bool { return c.kind == kInt || c.kind == kWide || c.kind == kDec }

// table is one generated table: its columns (the first is the primary
// key: the shard key of a sharded table), its rule, and the key values
// writes draw from.
type table struct {
	name   string
	rule   string // hash, range, list, consistent_hash, date_*, global, "" (default node)
	cols   []column
	keys   []string // SQL literals of key values the generator uses
	bad    []string // key literals no sub-table holds: writes get 1526 on both sides
	auto   bool     // the key is AUTO_INCREMENT (default-node table)
	ksDDL  string   // CREATE TABLE through keyshard
	refDDL string   // CREATE TABLE on the reference (partitioned like the rule)
	yaml   string   // the shard rule, %DB% for the database
	pairOf string   // co-located with this table (same rule): joins on the keys
}

func (t *table) key() column { return t.cols[0] }

func (t *table) col(name string) (column, bool) {
	for _, c := range t.cols {
		if c.name == name {
			return c, true
		}
	}
	return column{}, false
}

var (
	words    = []string{"abc", "ABC", "Abc", "abd", "b", "B", "zeta", "Zeta", "a_c", "", "m", "mm"}
	binWords = []string{"k1", "k2", "k10", "k11", "x", "xy", "7", "42", "042", "100", "abc", "zz", "q9", "q19", "m", "0"}
	day0     = time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC)
)

// schema is one seed's set of tables.
type schema struct {
	tables []*table
	byName map[string]*table
}

func (s *schema) add(t *table) {
	s.tables = append(s.tables, t)
	s.byName[t.name] = t
}

// rules is the YAML of every shard rule for database db.
func (s *schema) rules(db string) string {
	var b strings.Builder
	for _, t := range s.tables {
		if t.yaml != "" {
			b.WriteString(strings.ReplaceAll(t.yaml, "%DB%", db))
		}
	}
	return b.String()
}

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }

// extraCols returns a table's non-key columns: a (small INT) and s
// (general_ci words) always, b, d and t sometimes; suffix makes the
// names of a joined table's columns its own.
func extraCols(r *rand.Rand, suffix string) []column {
	cols := []column{{"a" + suffix, "INT NULL", kInt}, {"s" + suffix, "VARCHAR(12) NULL", kStr}}
	if r.IntN(3) != 0 {
		cols = append(cols, column{"b" + suffix, "INT NULL", kWide})
	}
	if r.IntN(3) != 0 {
		cols = append(cols, column{"d" + suffix, "DECIMAL(10,2) NULL", kDec})
	}
	if r.IntN(2) == 0 {
		cols = append(cols, column{"t" + suffix, "DATETIME NULL", kDT})
	}
	r.Shuffle(len(cols), func(i, j int) { cols[i], cols[j] = cols[j], cols[i] })
	return cols
}

func createSQL(name string, cols []column, pk, tail string) string {
	var defs []string
	for i, c := range cols {
		d := c.name + " " + c.sql
		if i == 0 {
			d = c.name + " " + strings.Replace(c.sql, " NULL", "", 1) + " NOT NULL"
			if strings.Contains(c.sql, "AUTO_INCREMENT") {
				d = c.name + " " + c.sql
			}
		}
		defs = append(defs, d)
	}
	defs = append(defs, "PRIMARY KEY ("+pk+")")
	return fmt.Sprintf("CREATE TABLE %s (%s) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci%s", name, strings.Join(defs, ", "), tail)
}

func ints(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, strconv.Itoa(i))
	}
	return out
}

func locations(r *rand.Rand) (locs [2]int, yaml string) {
	locs = [2]int{1 + r.IntN(3), 1 + r.IntN(3)}
	return locs, fmt.Sprintf("[%d, %d]", locs[0], locs[1])
}

// newSchema generates the tables of one seed.
func newSchema(r *rand.Rand) *schema {
	s := &schema{byName: map[string]*table{}}
	rule := func(name, key, typ, more string) string {
		return fmt.Sprintf("      - db: %%DB%%\n        table: %s\n        key: %s\n        nodes: [node1, node2]\n        type: %s\n%s", name, key, typ, more)
	}

	// th and th2: hash on k, the same rule: joined on their keys.
	keyCol := pick(r, []column{{"k", "INT", kWide}, {"k", "BIGINT", kWide}, {"k", "VARCHAR(12) COLLATE utf8mb4_bin", kBin}})
	_, locYAML := locations(r)
	var hashKeys []string
	if keyCol.kind == kBin {
		for _, w := range binWords {
			hashKeys = append(hashKeys, "'"+w+"'")
		}
	} else {
		hashKeys = ints(-20, 140)
		hashKeys = append(hashKeys, "2147483647", "-2147483648")
		if keyCol.sql == "BIGINT" {
			hashKeys = append(hashKeys, "9223372036854775807", "-9223372036854775808", "4294967296")
		}
	}
	for _, name := range []string{"th", "th2"} {
		suffix := ""
		if name == "th2" {
			suffix = "2"
		}
		cols := append([]column{keyCol}, extraCols(r, suffix)...)
		t := &table{name: name, rule: "hash", cols: cols, keys: hashKeys,
			yaml: rule(name, "k", "hash", "        locations: "+locYAML+"\n")}
		if name == "th2" {
			t.pairOf = "th"
		}
		t.ksDDL = createSQL(name, cols, "k", "")
		t.refDDL = t.ksDDL
		s.add(t)
	}

	// tr: range on k.
	{
		locs, locYAML := locations(r)
		limit := pick(r, []int{5, 10, 25, 40})
		n := (locs[0] + locs[1]) * limit
		cols := append([]column{{"k", "INT", kWide}}, extraCols(r, "")...)
		var parts []string
		for i := range locs[0] + locs[1] {
			parts = append(parts, fmt.Sprintf("PARTITION p%d VALUES LESS THAN (%d)", i, (i+1)*limit))
		}
		t := &table{name: "tr", rule: "range", cols: cols, keys: ints(0, n-1), bad: []string{strconv.Itoa(n), strconv.Itoa(n + 7)},
			yaml: rule("tr", "k", "range", fmt.Sprintf("        locations: %s\n        table_row_limit: %d\n", locYAML, limit))}
		t.ksDDL = createSQL("tr", cols, "k", "")
		t.refDDL = createSQL("tr", cols, "k", " PARTITION BY RANGE (k) ("+strings.Join(parts, ", ")+")")
		s.add(t)
	}

	// tl: list on k.
	{
		locs, locYAML := locations(r)
		nsub := locs[0] + locs[1]
		vals := r.Perm(4 * nsub)
		lists := make([][]string, nsub)
		for i, v := range vals {
			lists[i%nsub] = append(lists[i%nsub], strconv.Itoa(v))
		}
		var yamlVals, parts []string
		var keys []string
		for i, l := range lists {
			yamlVals = append(yamlVals, `"`+strings.Join(l, ",")+`"`)
			parts = append(parts, fmt.Sprintf("PARTITION p%d VALUES IN (%s)", i, strings.Join(l, ", ")))
			keys = append(keys, l...)
		}
		slices.SortFunc(keys, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
		cols := append([]column{{"k", "INT", kWide}}, extraCols(r, "")...)
		t := &table{name: "tl", rule: "list", cols: cols, keys: keys, bad: []string{strconv.Itoa(4 * nsub), "-1"},
			yaml: rule("tl", "k", "list", fmt.Sprintf("        locations: %s\n        list_values: [%s]\n", locYAML, strings.Join(yamlVals, ", ")))}
		t.ksDDL = createSQL("tl", cols, "k", "")
		t.refDDL = createSQL("tl", cols, "k", " PARTITION BY LIST (k) ("+strings.Join(parts, ", ")+")")
		s.add(t)
	}

	// tc: consistent_hash on k.
	{
		key := pick(r, []column{{"k", "INT", kWide}, {"k", "VARCHAR(12) COLLATE utf8mb4_bin", kBin}})
		_, locYAML := locations(r)
		keys := ints(-10, 90)
		if key.kind == kBin {
			keys = nil
			for _, w := range binWords {
				keys = append(keys, "'"+w+"'")
			}
		}
		cols := append([]column{key}, extraCols(r, "")...)
		t := &table{name: "tc", rule: "consistent_hash", cols: cols, keys: keys,
			yaml: rule("tc", "k", "consistent_hash", "        locations: "+locYAML+"\n")}
		t.ksDDL = createSQL("tc", cols, "k", "")
		t.refDDL = t.ksDDL
		s.add(t)
	}

	// td: a date rule on a DATE or DATETIME key.
	{
		typ := pick(r, []string{"date_year", "date_month", "date_day"})
		key := pick(r, []column{{"k", "DATE", kDate}, {"k", "DATETIME", kDT}})
		var periods []time.Time // start of each period, and the end of the last
		var ranges [2]string
		switch typ {
		case "date_year":
			a, b := 1+r.IntN(2), 1+r.IntN(2)
			for i := range a + b + 1 {
				periods = append(periods, day0.AddDate(i, 0, 0))
			}
			ranges = [2]string{fmt.Sprintf("%d-%d", 2015, 2015+a-1), fmt.Sprintf("%d-%d", 2015+a, 2015+a+b-1)}
		case "date_month":
			a, b := 1+r.IntN(4), 1+r.IntN(4)
			for i := range a + b + 1 {
				periods = append(periods, day0.AddDate(0, i, 0))
			}
			f := func(i int) string { return day0.AddDate(0, i, 0).Format("200601") }
			ranges = [2]string{f(0) + "-" + f(a-1), f(a) + "-" + f(a+b-1)}
		default:
			a, b := 1+r.IntN(4), 1+r.IntN(4)
			for i := range a + b + 1 {
				periods = append(periods, day0.AddDate(0, 0, i))
			}
			f := func(i int) string { return day0.AddDate(0, 0, i).Format("20060102") }
			ranges = [2]string{f(0) + "-" + f(a-1), f(a) + "-" + f(a+b-1)}
		}
		end := periods[len(periods)-1]
		span := end.Sub(day0)
		format := "'2006-01-02'"
		if key.kind == kDT {
			format = "'2006-01-02 15:04:05'"
		}
		var keys []string
		seen := map[string]bool{}
		for range 150 {
			ts := day0.Add(time.Duration(r.Int64N(int64(span))))
			if key.kind == kDate {
				ts = ts.Truncate(24 * time.Hour)
			} else {
				ts = ts.Truncate(time.Second)
				if r.IntN(5) == 0 {
					ts = ts.Truncate(24 * time.Hour)
				}
			}
			if k := ts.Format(format); !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		// Period edges: the first and last instants.
		for _, p := range periods[1 : len(periods)-1] {
			if k := p.Format(format); !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		var parts []string
		for i, p := range periods[1:] {
			parts = append(parts, fmt.Sprintf("PARTITION p%d VALUES LESS THAN ('%s')", i, p.Format("2006-01-02")))
		}
		cols := append([]column{key}, extraCols(r, "")...)
		t := &table{name: "td", rule: typ, cols: cols, keys: keys, bad: []string{end.Format(format), end.AddDate(1, 0, 0).Format(format)},
			yaml: rule("td", "k", typ, fmt.Sprintf("        date_range: [%s, %s]\n", ranges[0], ranges[1]))}
		t.ksDDL = createSQL("td", cols, "k", "")
		t.refDDL = createSQL("td", cols, "k", " PARTITION BY RANGE COLUMNS (k) ("+strings.Join(parts, ", ")+")")
		s.add(t)
	}

	// g: a global table, joined with th on th.a = g.gk.
	{
		cols := []column{{"gk", "INT", kInt}, {"gname", "VARCHAR(12) NULL", kStr}, {"gv", "INT NULL", kWide}}
		t := &table{name: "g", rule: "global", cols: cols, keys: ints(0, 14),
			yaml: "      - db: %DB%\n        table: g\n        nodes: [node1, node2]\n        type: global\n"}
		t.ksDDL = createSQL("g", cols, "gk", "")
		t.refDDL = t.ksDDL
		s.add(t)
	}

	// dp: a table on the default node, with an AUTO_INCREMENT key.
	{
		cols := append([]column{{"id", "INT AUTO_INCREMENT", kWide}}, extraCols(r, "")...)
		t := &table{name: "dp", cols: cols, keys: ints(1, 80), auto: true}
		t.ksDDL = createSQL("dp", cols, "id", "")
		t.refDDL = t.ksDDL
		s.add(t)
	}
	return s
}

// valueGen writes random values of a column kind as SQL literals.
type valueGen struct {
	r    *rand.Rand
	decs []string
}

func newValueGen(r *rand.Rand) *valueGen {
	v := &valueGen{r: r}
	for range 40 {
		cents := r.IntN(200001) - 100000
		v.decs = append(v.decs, decimal(cents))
	}
	v.decs = append(v.decs, "0.00", "-0.50", "99999999.99")
	return v
}

func decimal(cents int) string {
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	return fmt.Sprintf("%s%d.%02d", sign, cents/100, cents%100)
}

// literal returns a random non-NULL literal of kind and the argument a
// prepared statement binds for it.
func (v *valueGen) literal(kind string) (string, any) {
	r := v.r
	switch kind {
	case kInt:
		n := r.IntN(10)
		return strconv.Itoa(n), int64(n)
	case kWide:
		n := r.IntN(401) - 200
		if r.IntN(20) == 0 {
			n = pick(r, []int{2147483647, -2147483648, 0})
		}
		return strconv.Itoa(n), int64(n)
	case kStr:
		w := pick(r, words)
		return "'" + w + "'", w
	case kBin:
		w := pick(r, binWords)
		return "'" + w + "'", w
	case kDec:
		d := pick(r, v.decs)
		return d, d
	case kDate:
		s := day0.AddDate(0, 0, r.IntN(900)-30).Format("2006-01-02")
		return "'" + s + "'", s
	default: // kDT
		ts := day0.AddDate(0, 0, r.IntN(900)-30)
		if r.IntN(4) != 0 {
			ts = ts.Add(time.Duration(r.IntN(86400)) * time.Second)
		}
		s := ts.Format("2006-01-02 15:04:05")
		return "'" + s + "'", s
	}
}

// keyArg is the prepared-statement argument for key literal lit.
func keyArg(lit string) any {
	if strings.HasPrefix(lit, "'") {
		return strings.Trim(lit, "'")
	}
	n, err := strconv.ParseInt(lit, 10, 64)
	if err != nil {
		return lit
	}
	return n
}

// timeArg is a date or datetime literal as a time.Time argument: the
// driver binds it as MYSQL_TYPE_DATETIME.
func timeArg(lit string) any {
	s := strings.Trim(lit, "'")
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02"} {
		if ts, err := time.Parse(layout, s); err == nil {
			return ts
		}
	}
	return s
}

// row returns one random row of t as SQL literals in column order; the
// key from t.keys (rarely t.bad).
func (v *valueGen) row(t *table, bad bool) []string {
	out := make([]string, len(t.cols))
	out[0] = pick(v.r, t.keys)
	if bad && len(t.bad) > 0 {
		out[0] = pick(v.r, t.bad)
	}
	for i, c := range t.cols[1:] {
		if v.r.IntN(8) == 0 {
			out[i+1] = "NULL"
			continue
		}
		out[i+1], _ = v.literal(c.kind)
	}
	return out
}
