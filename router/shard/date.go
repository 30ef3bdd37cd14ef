package shard

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

type dateUnit int

const (
	unitYear dateUnit = iota
	unitMonth
	unitDay
)

// width is the number of digits of one date_range end: YYYY, YYYYMM,
// YYYYMMDD.
func (u dateUnit) width() int { return 4 + 2*int(u) }

func (u dateUnit) want() string {
	return [...]string{"YYYY or YYYY-YYYY", "YYYYMM or YYYYMM-YYYYMM", "YYYYMMDD or YYYYMMDD-YYYYMMDD"}[u]
}

// dateRule is kingshard's date_year, date_month and date_day: one sub-table
// per period (2015, 201501, 20150101) of each node's date_range.
type dateRule struct {
	tableSet
	unit   dateUnit
	loc    *time.Location
	index  map[int]int   // period -> index into tables
	sorted []periodIndex // by period, for FindRange
}

type periodIndex struct{ period, index int }

func newDate(c Config) (*dateRule, error) {
	unit := map[string]dateUnit{TypeDateYear: unitYear, TypeDateMonth: unitMonth, TypeDateDay: unitDay}[c.Type]
	if len(c.DateRange) != c.Nodes {
		return nil, configError(c.Type, "date_range", "has %d entries but there are %d nodes: want one per node", len(c.DateRange), c.Nodes)
	}
	r := &dateRule{
		tableSet: tableSet{typ: c.Type},
		unit:     unit,
		loc:      c.Location,
		index:    map[int]int{},
	}
	if r.loc == nil {
		r.loc = time.Local // kingshard: time.Unix(...).Year() and Format, in the process's zone
	}
	from := map[int]int{} // period -> date_range entry, for overlap messages
	for node, text := range c.DateRange {
		field := fmt.Sprintf("date_range[%d]", node)
		periods, err := parsePeriods(unit, text, maxSubTables-len(r.tables))
		if err != nil {
			return nil, configError(c.Type, field, "%q: %v", text, err)
		}
		for _, p := range periods {
			if prev, dup := from[p]; dup {
				// kingshard lets the later node win and lists the period
				// twice, so a scan reads that sub-table twice; refuse it.
				return nil, configError(c.Type, field, "%q overlaps date_range[%d] %q at %04d: each period must belong to one node",
					text, prev, c.DateRange[prev], p)
			}
			from[p] = node
			r.index[p] = len(r.tables)
			r.sorted = append(r.sorted, periodIndex{p, len(r.tables)})
			r.tables = append(r.tables, SubTable{Node: node, Suffix: fmt.Sprintf("_%04d", p)})
		}
	}
	slices.SortFunc(r.sorted, func(a, b periodIndex) int { return a.period - b.period })
	return r, nil
}

// parsePeriods expands one date_range entry as kingshard's
// Parse{Year,Month,Day}Range do: one value or two joined by '-', swapped if
// reversed. Unlike kingshard it requires exactly 4 digits on both ends of a
// year range and months 01-12 (kingshard accepts "15-2016" and month 13).
func parsePeriods(u dateUnit, s string, room int) ([]int, error) {
	a, b, isRange := strings.Cut(s, "-")
	if !isRange {
		b = a
	}
	for _, end := range []string{a, b} {
		if len(end) != u.width() {
			return nil, fmt.Errorf("want %s", u.want())
		}
		if _, ok := digits(end, 0, len(end)); !ok {
			return nil, fmt.Errorf("want %s", u.want())
		}
	}
	if b < a { // same width, so text order is date order
		a, b = b, a
	}
	var out []int
	switch u {
	case unitYear:
		ya, _ := digits(a, 0, 4)
		yb, _ := digits(b, 0, 4)
		if yb-ya+1 > room {
			return nil, fmt.Errorf("more than %d sub-tables in the rule", maxSubTables)
		}
		for y := ya; y <= yb; y++ {
			out = append(out, y)
		}
	case unitMonth:
		ya, _ := digits(a, 0, 4)
		ma, _ := digits(a, 4, 6)
		yb, _ := digits(b, 0, 4)
		mb, _ := digits(b, 4, 6)
		if ma < 1 || ma > 12 || mb < 1 || mb > 12 {
			return nil, fmt.Errorf("month must be 01-12")
		}
		n := (yb-ya)*12 + mb - ma + 1
		if n > room {
			return nil, fmt.Errorf("more than %d sub-tables in the rule", maxSubTables)
		}
		for i := range n {
			m := ma - 1 + i
			out = append(out, (ya+m/12)*100+m%12+1)
		}
	case unitDay:
		begin, err := time.Parse("20060102", a)
		if err != nil {
			return nil, fmt.Errorf("%s is not a date", a)
		}
		end, err := time.Parse("20060102", b)
		if err != nil {
			return nil, fmt.Errorf("%s is not a date", b)
		}
		n := int(end.Sub(begin).Hours()/24) + 1
		if n > room {
			return nil, fmt.Errorf("more than %d sub-tables in the rule", maxSubTables)
		}
		for i := range n {
			out = append(out, dayPeriod(begin.AddDate(0, 0, i)))
		}
	}
	return out, nil
}

// Find places a date key the way kingshard's Date*Shard.FindForKey reads it:
// integers are unix timestamps in the rule's zone, strings are read by
// character position. A period no node covers is an error; kingshard would
// have routed it to node 0 (router.go TableToNode's zero value) and a table
// that does not exist.
func (r *dateRule) Find(v any) (int, error) {
	p, err := r.period(v)
	if err != nil {
		return -1, err
	}
	if i, ok := r.index[p]; ok {
		return i, nil
	}
	return -1, fmt.Errorf("%s rule: %w: %s falls in %04d, which no node's date_range covers", r.typ, ErrKeyOutOfRange, describe(v), p)
}

func describe(v any) string {
	switch x := v.(type) {
	case string, []byte:
		return fmt.Sprintf("%q", x)
	default:
		return fmt.Sprintf("timestamp %v", x)
	}
}

func (r *dateRule) period(v any) (int, error) {
	switch x := v.(type) {
	case int64:
		return r.periodOf(time.Unix(x, 0).In(r.loc)), nil
	case int:
		return r.periodOf(time.Unix(int64(x), 0).In(r.loc)), nil
	case uint64:
		return r.periodOf(time.Unix(int64(x), 0).In(r.loc)), nil // wraps, as kingshard's int64(val)
	case string:
		return periodOfText(r, x)
	case []byte:
		return periodOfText(r, x)
	case nil:
		return 0, ErrNullKey
	case float64:
		return 0, fmt.Errorf("%s rule: %w: float %v (want a date string or an integer unix timestamp)", r.typ, ErrKeyType, x)
	default:
		return 0, keyTypeError(r.typ, v)
	}
}

func (r *dateRule) periodOf(t time.Time) int {
	switch r.unit {
	case unitYear:
		return t.Year()
	case unitMonth:
		return t.Year()*100 + int(t.Month())
	default:
		return dayPeriod(t)
	}
}

func dayPeriod(t time.Time) int {
	y, m, d := t.Date()
	return y*10000 + int(m)*100 + d
}

// periodOfText reads the year from characters 0-3, the month from 5-6 and
// the day from 8-9, as kingshard does, without looking at the separators.
// kingshard asks date_month and date_day keys for at least len("2006-01-02")
// characters, and date_year keys for four. It passes the characters to
// strconv.Atoi, which would also take a sign; only digits are taken here.
func periodOfText[T ~string | ~[]byte](r *dateRule, s T) (int, error) {
	bad := func() (int, error) {
		return 0, fmt.Errorf("%s rule: %w: %q is not a date: want YYYY-MM-DD[ hh:mm:ss] or an integer unix timestamp", r.typ, ErrKeyType, s)
	}
	if r.unit == unitYear {
		if len(s) < 4 {
			return bad()
		}
		y, ok := digits(s, 0, 4)
		if !ok {
			return bad()
		}
		return y, nil
	}
	if len(s) < len("2006-01-02") {
		return bad()
	}
	y, ok1 := digits(s, 0, 4)
	m, ok2 := digits(s, 5, 7)
	if !ok1 || !ok2 {
		return bad()
	}
	if r.unit == unitMonth {
		return y*100 + m, nil
	}
	d, ok := digits(s, 8, 10)
	if !ok {
		return bad()
	}
	return y*10000 + m*100 + d, nil
}

// digits parses s[from:to] as ASCII digits.
func digits[T ~string | ~[]byte](s T, from, to int) (int, bool) {
	n := 0
	for i := from; i < to; i++ {
		c := s[i] - '0'
		if c > 9 {
			return 0, false
		}
		n = n*10 + int(c)
	}
	return n, true
}

// maxRangeSeconds clamps timestamp bounds in FindRange: about ±34,000
// years, far past any 4-digit year, small enough for time.Unix to stay
// monotonic.
const maxRangeSeconds = 1 << 40

// FindRange returns the sub-tables whose period lies between the periods of
// lo and hi. The period holding an exclusive bound is kept (as kingshard's
// makeLeList/makeGeList do): "d > '2016-03-07'" still reaches 20160307.
func (r *dateRule) FindRange(lo, hi Bound) ([]int, error) {
	first, last := -1<<62, 1<<62
	var err error
	if !lo.Unbounded {
		if lo.Value == nil {
			return nil, nil
		}
		if first, err = r.boundPeriod(lo.Value); err != nil {
			return nil, err
		}
	}
	if !hi.Unbounded {
		if hi.Value == nil {
			return nil, nil
		}
		if last, err = r.boundPeriod(hi.Value); err != nil {
			return nil, err
		}
	}
	start := sort.Search(len(r.sorted), func(i int) bool { return r.sorted[i].period >= first })
	var out []int
	for _, pi := range r.sorted[start:] {
		if pi.period > last {
			break
		}
		out = append(out, pi.index)
	}
	slices.Sort(out)
	return out, nil
}

func (r *dateRule) boundPeriod(v any) (int, error) {
	clamp := func(s int64) int64 { return max(min(s, maxRangeSeconds), -maxRangeSeconds) }
	switch x := v.(type) {
	case int64:
		return r.period(clamp(x))
	case int:
		return r.period(clamp(int64(x)))
	case uint64:
		return r.period(int64(min(x, maxRangeSeconds)))
	}
	return r.period(v)
}
