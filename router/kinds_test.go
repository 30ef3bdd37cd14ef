package router

import "testing"

func TestKindTables(t *testing.T) {
	cases := []struct {
		sql            string
		routed, ro     bool
		retry, writes  bool
		sticky, stickP string
	}{
		{"SELECT * FROM t WHERE id = 1", true, true, true, false, "", ""},
		{"SELECT @a := 1", true, false, false, false, "user variables", "user variables"},
		{"SELECT GET_LOCK('x', 1)", true, false, false, false, "GET_LOCK", "GET_LOCK"},
		{"SELECT 1; SELECT 2", true, false, false, false, "multi-statements", ""},
		{"SHOW TABLES", false, false, true, false, "", ""},
		{"INSERT INTO t VALUES (1)", true, false, false, true, "", ""},
		{"CREATE TEMPORARY TABLE t (id INT)", true, false, false, true, "temporary tables", "temporary tables"},
		{"ALTER TABLE t ADD c INT", true, false, false, true, "", ""},
		{"PREPARE s FROM 'SELECT 1'", false, false, false, false, "PREPARE", "prepared " + KindPrepare.String()},
		{"EXECUTE s", false, false, false, true, "PREPARE", "prepared " + KindExecute.String()},
		{"SET @@session.sql_mode = ''", false, false, false, false, "", "prepared " + KindSet.String()},
		{"CALL p()", false, false, false, true, "", "prepared " + KindCall.String()},
		{"BEGIN", false, false, false, false, "", ""},
	}
	for _, c := range cases {
		info := Classify(c.sql)
		if got := Routed(info.Kind); got != c.routed {
			t.Errorf("Routed(%q) = %v", c.sql, got)
		}
		if got := ReadOnly(info); got != c.ro {
			t.Errorf("ReadOnly(%q) = %v", c.sql, got)
		}
		if got := Retriable(info); got != c.retry {
			t.Errorf("Retriable(%q) = %v", c.sql, got)
		}
		if got := Writes(info); got != c.writes {
			t.Errorf("Writes(%q) = %v", c.sql, got)
		}
		if got := Sticky(info); got != c.sticky {
			t.Errorf("Sticky(%q) = %q, want %q", c.sql, got, c.sticky)
		}
		if got := StickyPrepared(info); got != c.stickP {
			t.Errorf("StickyPrepared(%q) = %q, want %q", c.sql, got, c.stickP)
		}
	}
}
