package router

import (
	"strings"
	"testing"
)

func TestServerAdmin(t *testing.T) {
	p := NewParser()
	for _, c := range []struct {
		sql, want string
	}{
		{"SELECT 1", ""},
		{"SELECT * FROM t WHERE name = 'profile'", ""},
		{"INSERT INTO t VALUES (1)", ""},
		{"SET NAMES utf8mb4", ""},
		{"SET SESSION sql_mode = ''", ""},
		{"LOAD DATA LOCAL INFILE 'x' INTO TABLE t", ""},
		{"CREATE TABLE t (id INT)", ""},
		{"SHUTDOWN", "SHUTDOWN"},
		{"/*!50000 SHUTDOWN */", "SHUTDOWN"},
		{"/* hi */ shutdown", "SHUTDOWN"},
		{"SET GLOBAL max_connections = 10", "SET GLOBAL"},
		{"SET @@global.max_connections = 10", "SET GLOBAL"},
		{"SET sql_mode = '', GLOBAL wait_timeout = 5", "SET GLOBAL"},
		{"CREATE USER 'x'@'%' IDENTIFIED BY 'y'", "account management (CREATE/ALTER/DROP/RENAME USER, SET PASSWORD)"},
		{"DROP USER x", "account management (CREATE/ALTER/DROP/RENAME USER, SET PASSWORD)"},
		{"SET PASSWORD = PASSWORD('x')", "account management (CREATE/ALTER/DROP/RENAME USER, SET PASSWORD)"},
		{"GRANT ALL ON *.* TO x", "GRANT/REVOKE"},
		{"REVOKE ALL ON *.* FROM x", "GRANT/REVOKE"},
		{"INSTALL SONAME 'ha_connect'", "plugin installation (INSTALL/UNINSTALL PLUGIN/SONAME, CREATE FUNCTION ... SONAME)"},
		{"UNINSTALL PLUGIN x", "plugin installation (INSTALL/UNINSTALL PLUGIN/SONAME, CREATE FUNCTION ... SONAME)"},
		{"LOAD DATA INFILE '/etc/passwd' INTO TABLE t", "server-side files (LOAD DATA INFILE without LOCAL)"},
		{"SELECT * FROM t INTO OUTFILE '/tmp/x'", "server-side files (SELECT ... INTO OUTFILE/DUMPFILE, LOAD_FILE)"},
		{"SELECT 1 INTO DUMPFILE '/tmp/x'", "server-side files (SELECT ... INTO OUTFILE/DUMPFILE, LOAD_FILE)"},
		{"SELECT 1; SHUTDOWN", "SHUTDOWN"},
		{"INSERT INTO t VALUES (1); SET GLOBAL x = 1", "SET GLOBAL"},
		{"PREPARE s FROM 'SHUTDOWN'", "SHUTDOWN"},
		{"/*M!100300 SHUTDOWN */", "SHUTDOWN"},
		{"SELECT /*M! 1; SET GLOBAL x = 1 */", "SET GLOBAL"},
		{"PREPARE s FROM 'SELECT 1; SELECT 2'; SET GLOBAL x = 1", "SET GLOBAL"},
		{"EXECUTE IMMEDIATE 'SHUTDOWN'", "SHUTDOWN"},
	} {
		if got, _ := p.Denied(c.sql, Classify(c.sql), DenyAdmin); got != c.want {
			t.Errorf("%s: %q, want %q", c.sql, got, c.want)
		}
	}
}

func TestDeniedClasses(t *testing.T) {
	p := NewParser()
	const ro = DenyAdmin | DenyDDL | DenyWrite
	for _, c := range []struct {
		sql  string
		deny Deny
		want Deny // 0: allowed
	}{
		{"SELECT * FROM t", ro, 0},
		{"SELECT * FROM t FOR UPDATE", ro, 0},
		{"WITH x AS (SELECT 1) SELECT * FROM x", ro, 0},
		{"SHOW TABLES", ro, 0},
		{"SET NAMES utf8mb4", ro, 0},
		{"BEGIN", ro, 0},
		{"EXPLAIN SELECT 1", ro, 0},
		{"EXPLAIN DELETE FROM t", ro, 0},
		{"EXPLAIN ANALYZE DELETE FROM t", ro, DenyWrite},
		{"ANALYZE DELETE FROM t", ro, DenyWrite},
		{"INSERT INTO t VALUES (1)", ro, DenyWrite},
		{"/*!INSERT INTO t VALUES (1)*/", ro, DenyWrite},
		{"/*M!INSERT INTO t VALUES (1)*/", ro, DenyWrite},
		{"UPDATE t SET a = 1", ro, DenyWrite},
		{"DELETE FROM t", ro, DenyWrite},
		{"REPLACE INTO t VALUES (1)", ro, DenyWrite},
		{"CALL p()", ro, DenyWrite},
		{"LOAD DATA LOCAL INFILE 'x' INTO TABLE t", ro, DenyWrite},
		{"LOCK TABLES t WRITE", ro, DenyWrite},
		{"SELECT 1; DELETE FROM t", ro, DenyWrite},
		{"PREPARE s FROM 'DELETE FROM t'", ro, DenyWrite},
		{"PREPARE s FROM 'SELECT 1'", ro, 0},
		{"PREPARE s FROM @q", ro, DenyAdmin},
		{"EXECUTE IMMEDIATE 'DELETE FROM t'", ro, DenyWrite},
		{"EXECUTE IMMEDIATE 'SELECT 1'", ro, 0},
		{"EXECUTE IMMEDIATE @q", ro, DenyAdmin},
		{"CREATE TABLE t (id INT)", ro, DenyDDL},
		{"CREATE TABLE t (id INT)", DenyAdmin | DenyDDL, DenyDDL},
		{"ALTER TABLE t ADD c INT", DenyDDL, DenyDDL},
		{"DROP TABLE t", DenyDDL, DenyDDL},
		{"TRUNCATE TABLE t", DenyDDL, DenyDDL},
		{"RENAME TABLE t TO u", DenyDDL, DenyDDL},
		{"CREATE INDEX i ON t (a)", DenyDDL, DenyDDL},
		{"CREATE OR REPLACE SEQUENCE s", DenyDDL, DenyDDL},
		{"INSERT INTO t VALUES (1)", DenyDDL, 0},
		{"CREATE USER x", DenyDDL, 0}, // account management, not DDL
		{"CREATE USER x", ro, DenyAdmin},
		{"SHUTDOWN", ro, DenyAdmin},
		{"DROP TABLE t", DenyAdmin, 0},
		{"DELETE FROM t", DenyAdmin | DenyDDL, 0},
		{"SELECT 1; /* x */ SHUTDOWN", DenyAdmin, DenyAdmin},
		{"SELECT 1; /*M! SHUTDOWN */", DenyAdmin, DenyAdmin},
		{"SELECT 1; /**/ DELETE FROM t", ro, DenyWrite},
		{"SELECT 1 # '\n; /*M! SHUTDOWN */ # '", DenyAdmin, DenyAdmin},
		{"BEGIN NOT ATOMIC DELETE FROM t; END", ro, DenyAdmin},
		{"BEGIN NOT ATOMIC SELECT 1; END", DenyAdmin, DenyAdmin},
		{"IF 1 THEN SHUTDOWN; END IF", DenyAdmin, DenyAdmin},
		{"SET STATEMENT max_statement_time=0 FOR SHUTDOWN", DenyAdmin, DenyAdmin},
		{"SET STATEMENT max_statement_time=0 FOR DROP TABLE t", DenyDDL, DenyDDL},
		{"SET STATEMENT max_statement_time=0 FOR SELECT 1", ro, 0},
		{"EXECUTE IMMEDIATE CONCAT('SHUT', 'DOWN')", DenyAdmin, DenyAdmin},
		{"EXECUTE IMMEDIATE 'SHUT' 'DOWN'", DenyAdmin, DenyAdmin},
		{"PREPARE s FROM 'SHUT' 'DOWN'", DenyAdmin, DenyAdmin},
		{"PREPARE s FROM @q", DenyDDL, DenyDDL},
		{"SELECT LOAD_FILE('/etc/passwd')", DenyAdmin, DenyAdmin},
		{"SELECT 'profile', filename FROM t", DenyAdmin, 0},
		{"CREATE FUNCTION f RETURNS STRING SONAME 'x.so'", DenyAdmin, DenyAdmin},
		{"RESET MASTER", DenyAdmin, DenyAdmin},
		{"PURGE BINARY LOGS TO 'x'", DenyAdmin, DenyAdmin},
		{"CHANGE MASTER TO master_host='x'", DenyAdmin, DenyAdmin},
		{"STOP SLAVE", DenyAdmin, DenyAdmin},
		{"FLUSH PRIVILEGES", DenyAdmin, DenyAdmin},
		{"START TRANSACTION", DenyAdmin, 0},
	} {
		class, got := p.Denied(c.sql, Classify(c.sql), c.deny)
		if got != c.want || (got == 0) != (class == "") {
			t.Errorf("%s (deny %b): %q %b, want %b", c.sql, c.deny, class, got, c.want)
		}
	}
}

// With VarText, PREPARE ... FROM @v and EXECUTE IMMEDIATE @v are checked
// on the variable's value; without a value they stay uncheckable.
func TestDeniedVarText(t *testing.T) {
	p := NewParser()
	vars := map[string]string{"bad": "SHUTDOWN", "ok": "SELECT 1"}
	p.VarText = func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
	for sql, want := range map[string]string{
		"PREPARE s FROM @bad":           "SHUTDOWN",
		"EXECUTE IMMEDIATE @bad":        "SHUTDOWN",
		"PREPARE s FROM @ok":            "",
		"EXECUTE IMMEDIATE @ok":         "",
		"EXECUTE IMMEDIATE @ok USING 1": "",
		"PREPARE s FROM @none":          "a statement whose text cannot be checked",
		"EXECUTE IMMEDIATE @ok + 1":     "a statement whose text cannot be checked",
	} {
		got, _ := p.Denied(sql, Classify(sql), DenyAdmin)
		if !strings.HasPrefix(got, want) || (want == "") != (got == "") {
			t.Errorf("%s: %q, want %q", sql, got, want)
		}
	}
}
