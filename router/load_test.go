package router

import (
	"fmt"
	"strings"
	"testing"

	"github.com/keyshard/keyshard/router/shard"
)

func loadSchema(t *testing.T) *Schema {
	t.Helper()
	s, err := NewSchema(SchemaConfig{Default: "n1", Nodes: []string{"n1", "n2"}, Tables: []TableConfig{
		{DB: "app", Table: "orders", Key: "id", Nodes: []string{"n1", "n2"}, Shard: shard.Config{Type: "hash", Nodes: 2, Locations: []int{2, 2}}},
	}}, 16)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPlanLoad(t *testing.T) {
	s := loadSchema(t)
	p := NewParser()
	l, err := s.PlanLoad(p, `LOAD DATA LOCAL INFILE '/tmp/o.csv' REPLACE INTO TABLE orders FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '"' ESCAPED BY '\\' LINES STARTING BY '>' TERMINATED BY '\r\n' IGNORE 2 LINES (name, @skip, id) SET note = UPPER(name)`, "app")
	if err != nil || l == nil {
		t.Fatalf("PlanLoad: %v", err)
	}
	if l.Key != 2 || l.IgnoreLines != 2 || l.Path != "/tmp/o.csv" || l.Format != (LoadFormat{FieldTerm: ",", Enclosed: `"`, Escaped: `\`, OptEnclosed: true, LineStart: ">", LineTerm: "\r\n"}) {
		t.Errorf("load: %+v", l)
	}
	want := "LOAD DATA LOCAL INFILE 'keyshard' REPLACE INTO TABLE `orders_0003` FIELDS TERMINATED BY X'2c' OPTIONALLY ENCLOSED BY X'22' " +
		"ESCAPED BY X'5c' LINES STARTING BY X'3e' TERMINATED BY X'0d0a' (`name`, @`skip`, `id`) SET `note` = UPPER(`name`)"
	if got := l.Sub(3); got != want {
		t.Errorf("Sub(3) =\n%s\nwant\n%s", got, want)
	}
	if l, err := s.PlanLoad(p, "LOAD DATA LOCAL INFILE 'x' INTO TABLE orders", "app"); err != nil || l.Key != -1 || l.Columns != nil {
		t.Errorf("no column list: %+v %v", l, err)
	} else if err := l.SetColumns([]string{"a", "id"}); err != nil || l.Key != 1 {
		t.Errorf("SetColumns: %v %d", err, l.Key)
	}
	for sql, want := range map[string]string{
		`LOAD DATA LOCAL INFILE 'x' INTO TABLE orders FIELDS ENCLOSED BY '"' ESCAPED BY '"'`: "ESCAPED BY the ENCLOSED BY character",
		"LOAD DATA INFILE '/srv/x' INTO TABLE orders":                                        "use LOAD DATA LOCAL INFILE",
		"LOAD DATA LOCAL INFILE 'x' INTO TABLE orders (a, b)":                                "must read its shard key id from the file",
		"LOAD DATA LOCAL INFILE 'x' INTO TABLE orders (a, @v) SET id = @v":                   "sets its shard key id with SET",
	} {
		if _, err := s.PlanLoad(p, sql, "app"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", sql, err, want)
		}
	}
	if l, err := s.PlanLoad(p, "LOAD DATA LOCAL INFILE 'x' INTO TABLE plain", "app"); l != nil || err != nil {
		t.Errorf("plain table: %v %v", l, err)
	}
}

// scanAll feeds data in chunks of size n (0: at once) and describes the
// lines: number, key or NULL/-, raw.
func scanAll(t *testing.T, f LoadFormat, key int, data string, n int) []string {
	t.Helper()
	s := NewLoadScanner(f, key)
	var out []string
	emit := func(l *LoadLine) error {
		k := string(l.Key)
		switch {
		case l.NoKey || l.Skip:
			k = "-"
		case l.Null:
			k = "NULL"
		}
		out = append(out, fmt.Sprintf("%d %s %q", l.N, k, l.Raw))
		return nil
	}
	b := []byte(data)
	for len(b) > 0 {
		c := len(b)
		if n > 0 && n < c {
			c = n
		}
		if err := s.Feed(b[:c], emit); err != nil {
			t.Fatal(err)
		}
		b = b[c:]
	}
	if err := s.End(emit); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLoadScanner(t *testing.T) {
	csv := LoadFormat{FieldTerm: ",", Enclosed: `"`, Escaped: `\`, LineTerm: "\r\n"}
	tsv := LoadFormat{FieldTerm: "\t", Escaped: `\`, LineTerm: "\n"}
	for _, c := range []struct {
		name string
		f    LoadFormat
		key  int
		data string
		want []string
	}{
		{"tsv", tsv, 1, "a\t1\tx\nb\t22\n\\N\t\\N\n", []string{`1 1 "a\t1\tx\n"`, `2 22 "b\t22\n"`, `3 NULL "\\N\t\\N\n"`}},
		{"escaped terminators", tsv, 1, "a\\\tb\t7\\\n8\tz\nq\n", []string{`1 7
8 "a\\\tb\t7\\\n8\tz\n"`, `2 - "q\n"`}},
		{"csv enclosed", csv, 0, "\"1,\r\n2\",x\r\n\"3\"\"4\",y\r\n\"5\"", []string{`1 1,` + "\r\n" + `2 "\"1,\r\n2\",x\r\n"`, `2 3"4 "\"3\"\"4\",y\r\n"`, `3 5 "\"5\""`}},
		{"csv NULL word", csv, 1, "1,NULL\r\n2,\"NULL\"\r\n", []string{`1 NULL "1,NULL\r\n"`, `2 NULL "2,\"NULL\"\r\n"`}},
		{"starting by", LoadFormat{FieldTerm: ",", LineStart: "ks:", LineTerm: "\n", Escaped: `\`}, 0, "junk ks:5,a\nno prefix\nks:6\n",
			[]string{`1 5 "junk ks:5,a\n"`, `2 - "no prefix\n"`, `3 6 "ks:6\n"`}},
		{"no final terminator", tsv, 0, "1\n2", []string{`1 1 "1\n"`, `2 2 "2"`}},
		{"csv without escapes", LoadFormat{FieldTerm: ",", Enclosed: `"`, LineTerm: "\n"}, 0, "\"a\\b\"\"c\",1\n",
			[]string{`1 a\b"c "\"a\\b\"\"c\",1\n"`}},
	} {
		whole := scanAll(t, c.f, c.key, c.data, 0)
		if strings.Join(whole, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s:\n%q\nwant\n%q", c.name, whole, c.want)
			continue
		}
		for _, n := range []int{1, 2, 3, 7} {
			if got := scanAll(t, c.f, c.key, c.data, n); strings.Join(got, "|") != strings.Join(whole, "|") {
				t.Errorf("%s in chunks of %d:\n%q\nwant\n%q", c.name, n, got, whole)
			}
		}
	}
}

func TestKeyValue(t *testing.T) {
	for in, want := range map[string]any{"5": int64(5), "5\r": int64(5), " 5": int64(5), "5.0": int64(5), "4.5": int64(5),
		"-4.5": int64(-5), "7abc": int64(7), "18446744073709551615": uint64(18446744073709551615), "x": nil, "": nil} {
		v, ok := KeyValue([]byte(in), true)
		if want == nil && ok || want != nil && v != want {
			t.Errorf("KeyValue(%q) = %v %v, want %v", in, v, ok, want)
		}
	}
	if v, ok := KeyValue([]byte(" 5"), false); !ok || v != " 5" {
		t.Errorf("string key: %v", v)
	}
}
