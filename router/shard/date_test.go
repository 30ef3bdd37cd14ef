package shard

import (
	"math"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // America/New_York without the host's zoneinfo
)

// kingshard's router tests were written in China: 1457082679 is
// 2016-03-04 17:11:19 there. The instants below were converted with
// Python's datetime, not with the code under test.
var cst = time.FixedZone("CST", 8*3600)

// Rules of kingshard's router_test.go (newTestRouter).
func kingshardDateRules(t *testing.T, loc *time.Location) (year, month, day Rule) {
	year = mustNew(t, Config{Type: "date_year", Nodes: 2, DateRange: []string{"2012-2015", "2016-2018"}, Location: loc})
	month = mustNew(t, Config{Type: "date_month", Nodes: 2, DateRange: []string{"201512-201603", "201604-201608"}, Location: loc})
	day = mustNew(t, Config{Type: "date_day", Nodes: 2, DateRange: []string{"20151201-20160122", "20160202-20160308"}, Location: loc})
	return year, month, day
}

func TestDateTables(t *testing.T) {
	year, month, day := kingshardDateRules(t, cst)
	if got, want := suffixes(year), "_2012@0 _2013@0 _2014@0 _2015@0 _2016@1 _2017@1 _2018@1"; got != want {
		t.Errorf("year tables = %s, want %s", got, want)
	}
	if got, want := suffixes(month), "_201512@0 _201601@0 _201602@0 _201603@0 _201604@1 _201605@1 _201606@1 _201607@1 _201608@1"; got != want {
		t.Errorf("month tables = %s, want %s", got, want)
	}
	// 20151201..20160122 is 31+22 = 53 days (0..52); 20160202..20160308 is
	// 28 (leap February from the 2nd) + 8 = 36 days (53..88).
	tables := day.Tables()
	if len(tables) != 89 {
		t.Fatalf("day tables: %d, want 89", len(tables))
	}
	for i, want := range map[int]SubTable{
		0: {0, "_20151201"}, 30: {0, "_20151231"}, 31: {0, "_20160101"}, 52: {0, "_20160122"},
		53: {1, "_20160202"}, 80: {1, "_20160229"}, 81: {1, "_20160301"}, 88: {1, "_20160308"},
	} {
		if tables[i] != want {
			t.Errorf("day table %d = %+v, want %+v", i, tables[i], want)
		}
	}
	for _, tc := range []struct {
		typ, dr, want string
	}{
		{"date_day", "20160228-20160301", "_20160228@0 _20160229@0 _20160301@0"}, // leap year
		{"date_day", "20150228-20150301", "_20150228@0 _20150301@0"},
		{"date_day", "20160229", "_20160229@0"},
		{"date_day", "20001231-20010101", "_20001231@0 _20010101@0"},
		{"date_day", "20160301-20160228", "_20160228@0 _20160229@0 _20160301@0"}, // reversed, swapped as kingshard
		{"date_month", "201511-201602", "_201511@0 _201512@0 _201601@0 _201602@0"},
		{"date_month", "201602-201511", "_201511@0 _201512@0 _201601@0 _201602@0"},
		{"date_month", "201512", "_201512@0"},
		{"date_year", "2016-2015", "_2015@0 _2016@0"},
		{"date_year", "0999", "_0999@0"},
	} {
		r := mustNew(t, Config{Type: tc.typ, Nodes: 1, DateRange: []string{tc.dr}})
		if got := suffixes(r); got != tc.want {
			t.Errorf("%s %q tables = %s, want %s", tc.typ, tc.dr, got, tc.want)
		}
	}
	r := mustNew(t, Config{Type: "date_month", Nodes: 1, DateRange: []string{"201401-201612"}})
	if tables := r.Tables(); len(tables) != 36 || tables[35].Suffix != "_201612" || tables[12].Suffix != "_201501" {
		t.Errorf("201401-201612: %d tables, last %v", len(tables), tables[len(tables)-1])
	}
}

func TestDateYearFind(t *testing.T) {
	year, _, _ := kingshardDateRules(t, cst)
	checkFind(t, year, []findCase{
		{v: int64(1457082679), want: 4}, // 2016-03-04, node 1 (kingshard: node3)
		{v: 1457082679, want: 4},
		{v: uint64(1457082679), want: 4},
		{v: int64(1451577600), want: 4}, // 2016-01-01 00:00:00 +08
		{v: int64(1451577599), want: 3}, // 2015-12-31 23:59:59 +08
		{v: int64(1331012246), want: 0}, // 2012-03-06
		{v: "2015-03-06 13:37:26", want: 3},
		{v: "2015-03-06", want: 3},
		{v: "2015", want: 3},
		{v: "20150306", want: 3}, // only the first four characters count
		{v: "2015/03/06", want: 3},
		{v: "2015xx", want: 3},
		{v: []byte("2018-12-31 23:59:59"), want: 6},
		{v: "2012-01-01", want: 0},
		{v: "2019-01-01", err: ErrKeyOutOfRange},
		{v: "2011-12-31", err: ErrKeyOutOfRange},
		{v: int64(0), err: ErrKeyOutOfRange}, // 1970
		{v: uint64(math.MaxUint64), err: ErrKeyOutOfRange},
		{v: int64(math.MaxInt64), err: ErrKeyOutOfRange},
		{v: int64(math.MinInt64), err: ErrKeyOutOfRange},
		{v: "15-03-06", err: ErrKeyType},
		{v: "201", err: ErrKeyType},
		{v: "+201-01-01", err: ErrKeyType},
		{v: "", err: ErrKeyType},
		{v: 2015.0, err: ErrKeyType},
		{v: nil, err: ErrNullKey},
		{v: false, err: ErrKeyType},
	})
	_, err := year.Find("2019-01-01")
	if err == nil || !strings.Contains(err.Error(), `"2019-01-01"`) {
		t.Errorf("out-of-range error does not name the value: %v", err)
	}
}

func TestDateMonthFind(t *testing.T) {
	_, month, _ := kingshardDateRules(t, cst)
	checkFind(t, month, []findCase{
		{v: int64(1457082679), want: 3}, // 201603, node 0 (kingshard: node2)
		{v: int64(1456761599), want: 2}, // 2016-02-29 23:59:59 +08
		{v: int64(1456761600), want: 3}, // 2016-03-01 00:00:00 +08
		{v: "2016-05-07 12:23:56", want: 5},
		{v: "2016-02-29", want: 2},
		{v: "2015-12-01", want: 0},
		{v: "2016-08-31 23:59:59", want: 8},
		{v: "2016/05/07", want: 5},
		{v: "2016x05x07", want: 5}, // separators are not read, as in kingshard
		{v: []byte("2016-04-01"), want: 4},
		{v: "2016-09-01", err: ErrKeyOutOfRange},
		{v: "2015-11-30", err: ErrKeyOutOfRange},
		{v: "2016-13-01", err: ErrKeyOutOfRange},
		{v: "2016-05", err: ErrKeyType},     // shorter than YYYY-MM-DD
		{v: "20160507", err: ErrKeyType},    // shorter than YYYY-MM-DD
		{v: "2016-5-07 1", err: ErrKeyType}, // month "5-"
		{v: 1.5, err: ErrKeyType},
		{v: nil, err: ErrNullKey},
	})
	_, err := month.Find(int64(0))
	if err == nil || !strings.Contains(err.Error(), "timestamp 0") || !strings.Contains(err.Error(), "197001") {
		t.Errorf("out-of-range error does not name the value and period: %v", err)
	}
}

func TestDateDayFind(t *testing.T) {
	_, _, day := kingshardDateRules(t, cst)
	checkFind(t, day, []findCase{
		{v: int64(1457082679), want: 84}, // 20160304, node 1 (kingshard: node3)
		{v: int64(1456761600), want: 81}, // 2016-03-01 00:00:00 +08
		{v: int64(1456761599), want: 80}, // 2016-02-29 23:59:59 +08: leap day
		{v: "2016-03-07 12:23:56", want: 87},
		{v: "2016-02-29", want: 80},
		{v: "2015-12-01", want: 0},
		{v: "2016-01-22 23:59:59", want: 52},
		{v: "2016-02-02", want: 53},
		{v: "2016-03-08", want: 88},
		{v: "2016-01-23", err: ErrKeyOutOfRange}, // the gap between the nodes
		{v: "2016-02-01", err: ErrKeyOutOfRange},
		{v: "2016-03-09", err: ErrKeyOutOfRange},
		{v: "2016-02-30", err: ErrKeyOutOfRange},
		{v: "2015-11-30", err: ErrKeyOutOfRange},
		{v: "2016-02-2", err: ErrKeyType},
		{v: "2016-02-xx", err: ErrKeyType},
		{v: nil, err: ErrNullKey},
	})
}

func TestDateTimeZone(t *testing.T) {
	// 1451577600 is 2016-01-01 00:00 in China, 2015-12-31 16:00 UTC.
	for _, tc := range []struct {
		loc  *time.Location
		want int
	}{{cst, 1}, {time.UTC, 0}} {
		r := mustNew(t, Config{Type: "date_year", Nodes: 2, DateRange: []string{"2015", "2016"}, Location: tc.loc})
		checkFind(t, r, []findCase{{v: int64(1451577600), want: tc.want}})
	}
	// Location nil is time.Local, as kingshard's time.Unix(...).Year().
	implicit := mustNew(t, Config{Type: "date_day", Nodes: 1, DateRange: []string{"20151230-20160102"}})
	explicit := mustNew(t, Config{Type: "date_day", Nodes: 1, DateRange: []string{"20151230-20160102"}, Location: time.Local})
	for ts := int64(1451433600); ts < 1451779200; ts += 1800 {
		a, errA := implicit.Find(ts)
		b, errB := explicit.Find(ts)
		if a != b || (errA == nil) != (errB == nil) {
			t.Fatalf("Find(%d): nil location gives %d, %v; time.Local gives %d, %v", ts, a, errA, b, errB)
		}
	}
	// Days follow the zone's calendar across DST changes.
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	r := mustNew(t, Config{Type: "date_day", Nodes: 1, DateRange: []string{"20160312-20160313"}, Location: ny})
	checkFind(t, r, []findCase{
		{v: int64(1457845199), want: 0}, // 2016-03-12 23:59:59 EST
		{v: int64(1457845200), want: 1}, // 2016-03-13 00:00:00 EST
		{v: int64(1457852400), want: 1}, // 2016-03-13 03:00:00 EDT
		{v: "2016-03-13 02:30:00", want: 1},
	})
}

func TestDateFindRange(t *testing.T) {
	year, month, day := kingshardDateRules(t, cst)
	// kingshard's TestDatePlan, by index.
	checkRange(t, year, []rangeCase{
		{lo: excl(int64(1457242646)), hi: unbounded(), want: []int{4, 5, 6}},
		{lo: unbounded(), hi: excl(int64(1331012246)), want: []int{0}},
		{lo: excl("2015-03-06 13:37:26"), hi: unbounded(), want: []int{3, 4, 5, 6}},
		{lo: unbounded(), hi: incl("2015-03-06"), want: []int{0, 1, 2, 3}},
	})
	checkRange(t, month, []rangeCase{
		{lo: unbounded(), hi: incl(int64(1459921046)), want: []int{0, 1, 2, 3, 4}},
		{lo: excl("2016-05-06"), hi: unbounded(), want: []int{5, 6, 7, 8}},
	})
	checkRange(t, day, []rangeCase{
		{lo: excl("2016-03-07"), hi: unbounded(), want: []int{87, 88}},
		{lo: excl(int64(1457242646)), hi: unbounded(), want: []int{86, 87, 88}},
		// the leap day and the gap between the nodes
		{lo: incl("2016-02-28"), hi: incl("2016-03-01"), want: []int{79, 80, 81}},
		{lo: incl("2016-01-22"), hi: excl("2016-02-02"), want: []int{52, 53}},
		{lo: excl("2016-01-22 12:00:00"), hi: excl("2016-02-02 00:00:00"), want: []int{52, 53}},
		{lo: incl("2016-01-23"), hi: incl("2016-02-01"), want: nil},
	})
	checkRange(t, year, []rangeCase{
		{lo: unbounded(), hi: unbounded(), want: seq(0, 6)},
		// past the configured years: clipped (kingshard's planner found no
		// sub-table and failed with ErrNoCriteria)
		{lo: incl("2010-01-01"), hi: incl("2030-01-01"), want: seq(0, 6)},
		{lo: incl("2019"), hi: unbounded(), want: nil},
		{lo: unbounded(), hi: incl("2011-05-05"), want: nil},
		{lo: incl("2016-01-01"), hi: incl("2015-01-01"), want: nil},
		{lo: incl("2014-06-01"), hi: incl("2016-06-01"), want: []int{2, 3, 4}},
		{lo: incl([]byte("2018")), hi: incl(uint64(1704067200)), want: []int{6}}, // 2024-01-01
		// timestamps far out are clamped, not wrapped
		{lo: incl(int64(math.MinInt64)), hi: incl(int64(math.MaxInt64)), want: seq(0, 6)},
		{lo: unbounded(), hi: incl(uint64(math.MaxUint64)), want: seq(0, 6)},
		{lo: incl(uint64(math.MaxUint64)), hi: unbounded(), want: nil},
		{lo: incl(int64(math.MaxInt64)), hi: unbounded(), want: nil},
		{lo: unbounded(), hi: incl(int64(math.MinInt64)), want: nil},
		{lo: incl(1), hi: incl(1457082679), want: seq(0, 4)},
		// NULL, unreadable bounds
		{lo: incl(nil), hi: unbounded(), want: nil},
		{lo: unbounded(), hi: incl(nil), want: nil},
		{lo: incl(2015.5), hi: unbounded(), err: ErrKeyType},
		{lo: unbounded(), hi: incl("15-01-01"), err: ErrKeyType},
		{lo: incl(struct{}{}), hi: unbounded(), err: ErrKeyType},
	})
	// Nodes out of date order: indexes come back sorted.
	r := mustNew(t, Config{Type: "date_year", Nodes: 2, DateRange: []string{"2017-2018", "2015-2016"}, Location: cst})
	if got, want := suffixes(r), "_2017@0 _2018@0 _2015@1 _2016@1"; got != want {
		t.Fatalf("tables = %s, want %s", got, want)
	}
	checkRange(t, r, []rangeCase{
		{lo: incl("2016-03-01"), hi: incl("2017-03-01"), want: []int{0, 3}},
		{lo: unbounded(), hi: unbounded(), want: []int{0, 1, 2, 3}},
	})
	checkFind(t, r, []findCase{{v: "2016-01-01", want: 3}, {v: "2018-01-01", want: 1}})
}
