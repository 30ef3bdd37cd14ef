package router

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keyshard/keyshard/router/shard"
)

var update = flag.Bool("update", false, "rewrite testdata/*_cases.json with the current plans")

// testSchema has one table per rule type, over two nodes.
func testSchema(t testing.TB) *Schema {
	t.Helper()
	nodes := []string{"node1", "node2"}
	s, err := NewSchema(SchemaConfig{Default: "node1", Nodes: nodes, Tables: []TableConfig{
		{DB: "kingshard", Table: "user", Key: "id", Nodes: nodes, Shard: shard.Config{Type: "hash", Nodes: 2, Locations: []int{4, 4}}},
		{DB: "kingshard", Table: "orders", Key: "user_id", Nodes: nodes, Shard: shard.Config{Type: "hash", Nodes: 2, Locations: []int{4, 4}}},
		{DB: "kingshard", Table: "item", Key: "id", Nodes: nodes, Shard: shard.Config{Type: "hash", Nodes: 2, Locations: []int{2, 2}}},
		{DB: "kingshard", Table: "log", Key: "id", Nodes: nodes, Shard: shard.Config{Type: "range", Nodes: 2, Locations: []int{2, 2}, TableRowLimit: 1000}},
		{DB: "kingshard", Table: "ev_y", Key: "ts", Nodes: nodes, Shard: shard.Config{Type: "date_year", Nodes: 2, DateRange: []string{"2015-2016", "2017"}, Location: time.UTC}},
		{DB: "kingshard", Table: "ev_m", Key: "ts", Nodes: nodes, Shard: shard.Config{Type: "date_month", Nodes: 2, DateRange: []string{"201501-201502", "201503"}, Location: time.UTC}},
		{DB: "kingshard", Table: "ev_d", Key: "ts", Nodes: nodes, Shard: shard.Config{Type: "date_day", Nodes: 2, DateRange: []string{"20150101-20150102", "20150103"}, Location: time.UTC}},
		{DB: "kingshard", Table: "region", Key: "code", Nodes: nodes, Shard: shard.Config{Type: "list", Nodes: 2, Locations: []int{1, 1}, ListValues: map[string]int{"1": 0, "2": 0, "3": 1}}},
		{DB: "kingshard", Table: "sess", Key: "token", Nodes: nodes, Shard: shard.Config{Type: "consistent_hash", Nodes: 2, Locations: []int{4, 4}}},
		{DB: "kingshard", Table: "acct", Key: "id", Nodes: nodes, Shard: shard.Config{Type: "hash", Nodes: 2, Locations: []int{2, 2}},
			Seq: &Sequence{Name: "acct_id", Column: "id", Cache: 100}},
		{DB: "kingshard", Table: "acct_log", Key: "acct_id", Nodes: nodes, Shard: shard.Config{Type: "hash", Nodes: 2, Locations: []int{2, 2}},
			Seq: &Sequence{Name: "acct_log_id", Column: "id", Cache: 100}},
		{DB: "kingshard", Table: "country", Nodes: nodes, Shard: shard.Config{Type: "global", Nodes: 2}},
		{DB: "kingshard", Table: "rate", Nodes: nodes, Shard: shard.Config{Type: "global", Nodes: 2}},
		{DB: "kingshard", Table: "currency", Nodes: []string{"node2"}, Shard: shard.Config{Type: "global", Nodes: 1}},
	}}, 64)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tpccColumns are the columns of the TPC-C-style schema of tpccSchema.
var tpccColumns = map[string][]string{
	"warehouse1":  {"w_id", "w_name", "w_tax", "w_ytd"},
	"district1":   {"d_id", "d_w_id", "d_name", "d_tax", "d_ytd", "d_next_o_id"},
	"customer1":   {"c_id", "c_d_id", "c_w_id", "c_last", "c_credit", "c_discount", "c_balance"},
	"stock1":      {"s_i_id", "s_w_id", "s_quantity"},
	"orders1":     {"o_id", "o_d_id", "o_w_id", "o_c_id", "o_entry_d"},
	"new_orders1": {"no_o_id", "no_d_id", "no_w_id"},
	"order_line1": {"ol_o_id", "ol_d_id", "ol_w_id", "ol_number", "ol_i_id", "ol_amount"},
	"history1":    {"h_c_id", "h_c_d_id", "h_c_w_id", "h_d_id", "h_w_id", "h_amount"},
	"item":        {"i_id", "i_name", "i_price"},
	"item2":       {"i_id", "i_name", "i_price"},
	"stock_log":   {"s_w_id", "s_i_id", "qty"},
	"cust8":       {"c_w_id", "c_id", "c_note"},
	"note":        {"n_w_id", "n_text"},
}

// tpccSchema is a TPC-C-style schema sharded by warehouse: every table's
// rule is hash over node1, node2 with 2 sub-tables each (4 in all), but for
// item (global), item2 (range), cust8 (hash, 8 sub-tables) and note
// (unsharded). withCols: the router knows every table's columns.
func tpccSchema(t testing.TB, withCols bool) *Schema {
	t.Helper()
	nodes := []string{"node1", "node2"}
	hash := shard.Config{Type: "hash", Nodes: 2, Locations: []int{2, 2}}
	var tables []TableConfig
	for _, tk := range [][2]string{{"warehouse1", "w_id"}, {"district1", "d_w_id"}, {"customer1", "c_w_id"}, {"stock1", "s_w_id"},
		{"orders1", "o_w_id"}, {"new_orders1", "no_w_id"}, {"order_line1", "ol_w_id"}, {"history1", "h_w_id"}, {"stock_log", "s_w_id"}} {
		tables = append(tables, TableConfig{DB: "tpcc", Table: tk[0], Key: tk[1], Nodes: nodes, Shard: hash})
	}
	tables = append(tables,
		TableConfig{DB: "tpcc", Table: "item", Nodes: nodes, Shard: shard.Config{Type: "global", Nodes: 2}},
		TableConfig{DB: "tpcc", Table: "item2", Key: "i_id", Nodes: nodes, Shard: shard.Config{Type: "range", Nodes: 2, Locations: []int{2, 2}, TableRowLimit: 1000}},
		TableConfig{DB: "tpcc", Table: "cust8", Key: "c_w_id", Nodes: nodes, Shard: shard.Config{Type: "hash", Nodes: 2, Locations: []int{4, 4}}},
	)
	s, err := NewSchema(SchemaConfig{Default: "node1", Nodes: nodes, Tables: tables}, 64)
	if err != nil {
		t.Fatal(err)
	}
	if withCols {
		m := map[TableID][]string{}
		for tb, cols := range tpccColumns {
			m[TableID{"tpcc", tb}] = cols
		}
		s.SetColumns(NewColumns(m))
	}
	return s
}

type planCase struct {
	Comment string      `json:"comment,omitempty"`
	DB      string      `json:"db,omitempty"`
	Query   string      `json:"query"`
	Plan    string      `json:"plan,omitempty"` // "default" or "sharded"
	Routes  [][3]string `json:"routes,omitempty"`
	Merge   string      `json:"merge,omitempty"`
	Error   string      `json:"error,omitempty"`
	// Args binds the ? parameters of a prepared statement (JSON numbers
	// that are whole become int64); Params is then, per route row, the
	// parameters the rewritten SQL takes when not all in order.
	Args   []any   `json:"args,omitempty"`
	Params [][]int `json:"params,omitempty"`
	// Join is a join the proxy runs: its name, the outer side's statement,
	// the inner side's looking up ?v, and the inner side's NULL row.
	Join []string `json:"join,omitempty"`
}

// TestPlanGolden plans every query in testdata/*_cases.json and compares
// node, sub-table and rewritten SQL with the file. go test -run
// TestPlanGolden -update rewrites the files; review the diff.
func TestPlanGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*_cases.json")
	if len(files) == 0 {
		t.Fatal("no testdata/*_cases.json")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var cases []planCase
			if err := json.Unmarshal(data, &cases); err != nil {
				t.Fatal(err)
			}
			s := testSchema(t)
			switch {
			case strings.HasPrefix(filepath.Base(f), "tpcc_nocols"):
				s = tpccSchema(t, false)
			case strings.HasPrefix(filepath.Base(f), "tpcc"):
				s = tpccSchema(t, true)
			}
			p := NewParser()
			for i := range cases {
				c := &cases[i]
				got := runCase(s, p, c)
				// Twice: the second run is a plan cache hit and must agree.
				again := runCase(s, p, c)
				if g, a := mustJSON(got), mustJSON(again); g != a {
					t.Errorf("%s: cache hit differs from miss:\n%s\n%s", c.Query, g, a)
				}
				if *update {
					*c = got
					continue
				}
				if g, w := mustJSON(got), mustJSON(*c); g != w {
					t.Errorf("%s\n got: %s\nwant: %s", c.Query, g, w)
				}
			}
			if *update {
				out, _ := json.MarshalIndent(cases, "", "  ")
				if err := os.WriteFile(f, append(out, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func runCase(s *Schema, p *Parser, c *planCase) planCase {
	out := planCase{Comment: c.Comment, DB: c.DB, Query: c.Query, Args: c.Args}
	db := c.DB
	if db == "" {
		db = "kingshard"
		if _, ok := s.tables["tpcc.warehouse1"]; ok {
			db = "tpcc"
		}
	}
	info := Classify(c.Query)
	pl, lits, err := s.Plan(p, c.Query, db, info.Kind)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	if pl.Kind == PlanDefault {
		out.Plan = "default"
		return out
	}
	out.Plan = "sharded"
	if c.Args != nil {
		lits = append([]Literal(nil), lits...)
		for i := range lits {
			if l := &lits[i]; l.Kind == LitParam && l.Param < len(c.Args) {
				l.Bound = c.Args[l.Param]
				if f, ok := l.Bound.(float64); ok && f == float64(int64(f)) {
					l.Bound = int64(f)
				}
			}
		}
	}
	if _, n := pl.Sequence(lits); n > 0 {
		lits = pl.WithIDs(lits, 1001) // ids 1001, 1002, ... from the sequence
	}
	rt, err := pl.Bind(lits, LeadingComments(c.Query[:info.Start]))
	if err != nil {
		out.Error = err.Error()
		return out
	}
	if rt.Join != nil {
		tl := TextLiterals(lits)
		out.Plan = "join"
		out.Join = []string{rt.Join.Name, rt.Join.SideSQL(0, tl), rt.Join.LookupSQL(tl, []string{"?v"}), rt.Join.SideSQL(1, tl)}
		return out
	}
	out.Routes = rt.Explain()
	out.Merge = rt.Merge
	if rt.Spec != nil {
		out.Merge = rt.Spec.String()
	}
	for _, r := range rt.Routes {
		for i := range r.SQL {
			if r.Params != nil {
				out.Params = append(out.Params, r.Params[i])
			} else if out.Params != nil {
				out.Params = append(out.Params, nil)
			}
		}
	}
	return out
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// BenchmarkRoutePointSelectHit is the per-query routing cost of a point
// select once its shape is cached: Normalize, a map lookup, Bind. The one
// allocation is the rewritten SQL, the outgoing statement itself.
func BenchmarkRoutePointSelectHit(b *testing.B) {
	s := testSchema(b)
	p := NewParser()
	const q = "SELECT c FROM user WHERE id = 12345"
	if _, _, err := s.Plan(p, q, "kingshard", KindSelect); err != nil {
		b.Fatal(err)
	}
	var rt Routing // a session keeps one
	b.ReportAllocs()
	for b.Loop() {
		pl, lits, err := s.Plan(p, q, "kingshard", KindSelect)
		if err != nil {
			b.Fatal(err)
		}
		if err := pl.BindTo(&rt, lits, ""); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRoutePointSelectMiss parses and plans every time.
func BenchmarkRoutePointSelectMiss(b *testing.B) {
	s := testSchema(b)
	p := NewParser()
	const q = "SELECT c FROM user WHERE id = 12345"
	b.ReportAllocs()
	for b.Loop() {
		shape, lits := Normalize(q)
		if _, err := s.build(p, shape, "kingshard", KindSelect, true, len(lits)); err != nil {
			b.Fatal(err)
		}
	}
}

func TestNormalize(t *testing.T) {
	cases := []struct {
		in, shape string
		lits      []string
	}{
		{"select * from t where id = 5", "select * from t where id = ?", []string{"5"}},
		{"SELECT  a,b FROM t1 WHERE x='it''s' AND y = \"q\\\"\" -- c\n", "SELECT a,b FROM t1 WHERE x=? AND y = ?", []string{"'it''s'", `"q\""`}},
		{"select 1.5e3, .5, 0x1F, x'ab', b'101', 0b11 from t", "select ?, ?, ?, ?, ?, ? from t", []string{"1.5e3", ".5", "0x1F", "x'ab'", "b'101'", "0b11"}},
		{"select /* c */ t1.c2, 1abc from `t``x` where d = DATE '2020-01-01' and s = _utf8mb4'x'", "select t1.c2, 1abc from `t``x` where d = DATE '2020-01-01' and s = _utf8mb4'x'", nil},
		{"insert into t values (-1, N'x')", "insert into t values (-?, N'x')", []string{"1"}},
	}
	for _, c := range cases {
		shape, lits := Normalize(c.in)
		var got []string
		for _, l := range lits {
			got = append(got, l.Text)
		}
		if shape != c.shape || strings.Join(got, "|") != strings.Join(c.lits, "|") {
			t.Errorf("Normalize(%q) = %q %q, want %q %q", c.in, shape, got, c.shape, c.lits)
		}
	}
	if v := (Literal{Kind: LitString, Text: `'a\'b''c\n'`}).Value(); v != "a'b'c\n" {
		t.Errorf("unquote: %q", v)
	}
	if v := (Literal{Kind: LitInt, Text: "18446744073709551615"}).Value(); v != uint64(18446744073709551615) {
		t.Errorf("uint: %v", v)
	}
}
