package router

import (
	"slices"
	"testing"
)

func TestTables(t *testing.T) {
	p := NewParser()
	for _, c := range []struct {
		sql, db string
		want    []string
		ok      bool
	}{
		{"SELECT c FROM sbtest1 WHERE id = 1", "sbtest", []string{"sbtest.sbtest1"}, true},
		{"select * from A.T1 join t2 on t1.id = t2.id where x in (select y from b.t3)", "d", []string{"a.t1", "b.t3", "d.t2"}, true},
		{"UPDATE t SET a = 1", "db", []string{"db.t"}, true},
		{"INSERT INTO t (a) SELECT a FROM u", "db", []string{"db.t", "db.u"}, true},
		{"WITH c AS (SELECT 1 FROM t) SELECT * FROM c", "db", []string{"db.t"}, true},
		{"SELECT 1", "db", nil, true},
		{"SELECT * FROM t", "", []string{".t"}, false},
		{"SELEC nonsense", "db", nil, false},
	} {
		got, ok := p.Tables(c.sql, c.db)
		if !slices.Equal(got, c.want) || ok != c.ok {
			t.Errorf("%q: %v %v, want %v %v", c.sql, got, ok, c.want, c.ok)
		}
	}
}
