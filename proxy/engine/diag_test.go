package engine

import "testing"

func TestParseDiag(t *testing.T) {
	for _, c := range []struct {
		sql  string
		ok   bool
		want diagStmt
	}{
		{"SHOW WARNINGS", true, diagStmt{limit: -1}},
		{" show  warnings ; ", true, diagStmt{limit: -1}},
		{"SHOW ERRORS", true, diagStmt{errors: true, limit: -1}},
		{"SHOW COUNT(*) WARNINGS", true, diagStmt{count: true, limit: -1}},
		{"SHOW COUNT ( * ) ERRORS", true, diagStmt{count: true, errors: true, limit: -1}},
		{"SHOW WARNINGS LIMIT 2", true, diagStmt{limit: 2}},
		{"SHOW WARNINGS LIMIT 1, 3", true, diagStmt{offset: 1, limit: 3}},
		{"SELECT @@warning_count", true, diagStmt{limit: -1, vars: []string{"@@warning_count"}}},
		{"SELECT @@session.error_count, @@warning_count", true, diagStmt{limit: -1, vars: []string{"@@session.error_count", "@@warning_count"}}},
		{"SELECT @@warning_count FROM t", false, diagStmt{}},
		{"SELECT @@global.warning_count", false, diagStmt{}},
		{"SHOW WARNINGS LIMIT x", false, diagStmt{}},
		{"SHOW COUNT(*) WARNINGS LIMIT 1", false, diagStmt{}},
		{"SELECT 1", false, diagStmt{}},
		{"SHOW TABLES", false, diagStmt{}},
		{"INSERT INTO errors VALUES (1)", false, diagStmt{}},
	} {
		got, ok := parseDiag(c.sql)
		if ok != c.ok || ok && (got.count != c.want.count || got.errors != c.want.errors || got.offset != c.want.offset ||
			got.limit != c.want.limit || len(got.vars) != len(c.want.vars)) {
			t.Errorf("%q: %+v %v, want %+v %v", c.sql, got, ok, c.want, c.ok)
			continue
		}
		for i := range got.vars {
			if got.vars[i] != c.want.vars[i] {
				t.Errorf("%q: columns %q, want %q", c.sql, got.vars, c.want.vars)
			}
		}
	}
}

func BenchmarkIsDiagnosticsOther(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		IsDiagnostics("SELECT id, name FROM t WHERE id = 42")
	}
}
