package router

import "testing"

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
		{"INSTALL SONAME 'ha_connect'", "plugin installation (INSTALL/UNINSTALL PLUGIN/SONAME)"},
		{"UNINSTALL PLUGIN x", "plugin installation (INSTALL/UNINSTALL PLUGIN/SONAME)"},
		{"LOAD DATA INFILE '/etc/passwd' INTO TABLE t", "server-side files (LOAD DATA INFILE without LOCAL)"},
		{"SELECT * FROM t INTO OUTFILE '/tmp/x'", "server-side files (SELECT ... INTO OUTFILE/DUMPFILE)"},
		{"SELECT 1 INTO DUMPFILE '/tmp/x'", "server-side files (SELECT ... INTO OUTFILE/DUMPFILE)"},
		{"SELECT 1; SHUTDOWN", "SHUTDOWN"},
		{"INSERT INTO t VALUES (1); SET GLOBAL x = 1", "SET GLOBAL"},
		{"PREPARE s FROM 'SHUTDOWN'", "SHUTDOWN"},
		{"/*M!100300 SHUTDOWN */", "SHUTDOWN"},
		{"SELECT /*M! 1; SET GLOBAL x = 1 */", "SET GLOBAL"},
		{"PREPARE s FROM 'SELECT 1; SELECT 2'; SET GLOBAL x = 1", "SET GLOBAL"},
		{"EXECUTE IMMEDIATE 'SHUTDOWN'", "SHUTDOWN"},
	} {
		if got := p.ServerAdmin(c.sql, Classify(c.sql)); got != c.want {
			t.Errorf("%s: %q, want %q", c.sql, got, c.want)
		}
	}
}
