package shard

import (
	"strings"
	"testing"
)

func TestNewErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		want string // substrings of the error, naming the field
	}{
		{"no type", Config{Nodes: 1}, "shard: type: required"},
		{"unknown type", Config{Type: "modulo", Nodes: 1, Locations: []int{1}}, `unknown shard type "modulo"`},
		{"no nodes", Config{Type: "hash", Locations: []int{}}, "hash rule: nodes: at least one node"},
		{"hash no locations", Config{Type: "hash", Nodes: 2}, "hash rule: locations: has 0 entries but there are 2 nodes"},
		{"hash short locations", Config{Type: "hash", Nodes: 2, Locations: []int{4}}, "locations: has 1 entries"},
		{"negative location", Config{Type: "hash", Nodes: 2, Locations: []int{4, -1}}, "locations[1]: must not be negative"},
		{"no sub-table", Config{Type: "hash", Nodes: 2, Locations: []int{0, 0}}, "locations: the rule has no sub-table"},
		{"too many", Config{Type: "hash", Nodes: 2, Locations: []int{60000, 60000}}, "more than 100000 sub-tables"},
		{"range no limit", Config{Type: "range", Nodes: 1, Locations: []int{4}}, "range rule: table_row_limit: required"},
		{"range negative limit", Config{Type: "range", Nodes: 1, Locations: []int{4}, TableRowLimit: -5}, "table_row_limit"},
		{"range overflow", Config{Type: "range", Nodes: 1, Locations: []int{4}, TableRowLimit: 1 << 62}, "table_row_limit: 4611686018427387904 rows times 4 sub-tables overflows"},
		{"range locations", Config{Type: "range", Nodes: 2, Locations: []int{4}, TableRowLimit: 10}, "range rule: locations"},
		{"list no values", Config{Type: "list", Nodes: 1}, "list rule: list_values: at least one value"},
		{"list bad index", Config{Type: "list", Nodes: 1, Locations: []int{2}, ListValues: map[string]int{"a": 2}}, `list_values: value "a": sub-table 2 does not exist: want 0..1`},
		{"list negative index", Config{Type: "list", Nodes: 1, ListValues: map[string]int{"a": -1}}, `value "a": sub-table -1`},
		{"list same number", Config{Type: "list", Nodes: 1, ListValues: map[string]int{"7": 0, "007": 0}}, `values "007" and "7" are the same number`},
		{"list locations", Config{Type: "list", Nodes: 2, Locations: []int{1}, ListValues: map[string]int{"a": 0}}, "list rule: locations"},
		{"consistent locations", Config{Type: "consistent_hash", Nodes: 2, Locations: []int{1, 2, 3}}, "consistent_hash rule: locations"},
		{"date count", Config{Type: "date_year", Nodes: 2, DateRange: []string{"2015"}}, "date_year rule: date_range: has 1 entries but there are 2 nodes"},
		{"date empty", Config{Type: "date_year", Nodes: 1, DateRange: []string{""}}, `date_range[0]: "": want YYYY or YYYY-YYYY`},
		{"year short", Config{Type: "date_year", Nodes: 1, DateRange: []string{"15-2016"}}, `date_range[0]: "15-2016"`},
		{"year three", Config{Type: "date_year", Nodes: 1, DateRange: []string{"2015-2016-2017"}}, `"2015-2016-2017": want YYYY`},
		{"year spaces", Config{Type: "date_year", Nodes: 1, DateRange: []string{"2015 - 2016"}}, "want YYYY"},
		{"year as month", Config{Type: "date_month", Nodes: 1, DateRange: []string{"2015-2016"}}, "want YYYYMM or YYYYMM-YYYYMM"},
		{"month 13", Config{Type: "date_month", Nodes: 1, DateRange: []string{"201513-201601"}}, "month must be 01-12"},
		{"month 00", Config{Type: "date_month", Nodes: 1, DateRange: []string{"201500"}}, "month must be 01-12"},
		{"day not a date", Config{Type: "date_day", Nodes: 1, DateRange: []string{"20150229"}}, "20150229 is not a date"},
		{"day bad end", Config{Type: "date_day", Nodes: 2, DateRange: []string{"20150101", "20150301-20151301"}}, `date_range[1]: "20150301-20151301": 20151301 is not a date`},
		{"day letters", Config{Type: "date_day", Nodes: 1, DateRange: []string{"2015010a"}}, "want YYYYMMDD"},
		{"day too many", Config{Type: "date_day", Nodes: 1, DateRange: []string{"10000101-99991231"}}, "more than 100000 sub-tables"},
		{"overlap", Config{Type: "date_year", Nodes: 2, DateRange: []string{"2015-2016", "2016-2017"}}, `date_range[1]: "2016-2017" overlaps date_range[0] "2015-2016" at 2016`},
		{"overlap months", Config{Type: "date_month", Nodes: 2, DateRange: []string{"201501-201512", "201412-201501"}}, "at 201501"},
	} {
		r, err := New(tc.c)
		if err == nil {
			t.Errorf("%s: New accepted %+v (%s)", tc.name, tc.c, suffixes(r))
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q does not contain %q", tc.name, err, tc.want)
		}
	}
}

func TestNewIgnoresOtherFields(t *testing.T) {
	// kingshard ignores keys a type does not use; so does New.
	r := mustNew(t, Config{Type: "date_year", Nodes: 1, DateRange: []string{"2015"}, Locations: []int{9}, TableRowLimit: 5})
	if len(r.Tables()) != 1 {
		t.Fatalf("tables: %v", r.Tables())
	}
	r = mustNew(t, Config{Type: "hash", Nodes: 1, Locations: []int{2}, DateRange: []string{"x"}, TableRowLimit: -1})
	if len(r.Tables()) != 2 {
		t.Fatalf("tables: %v", r.Tables())
	}
	dates := map[string]string{"date_year": "2015", "date_month": "201501", "date_day": "20150101"}
	for _, typ := range Types {
		r := mustNew(t, Config{Type: typ, Nodes: 1, Locations: []int{1}, TableRowLimit: 1, DateRange: []string{dates[typ]}, ListValues: map[string]int{"a": 0}})
		if r.Type() != typ {
			t.Errorf("Type() = %q, want %q", r.Type(), typ)
		}
	}
}
