package router

import "testing"

func TestRedactSecrets(t *testing.T) {
	for _, c := range [][2]string{
		{"SELECT 'secret' FROM t", "SELECT 'secret' FROM t"},
		{"CREATE USER 'bob'@'%' IDENTIFIED BY 's3cret'", "CREATE USER 'bob'@'%' IDENTIFIED BY '<redacted>'"},
		{"alter user bob identified by \"p'w\", amy IDENTIFIED BY 'x'", "alter user bob identified by '<redacted>', amy IDENTIFIED BY '<redacted>'"},
		{"SET PASSWORD FOR 'bob'@'%' = PASSWORD('pw')", "SET PASSWORD FOR '<redacted>'@'<redacted>' = PASSWORD('<redacted>')"},
		{"GRANT SELECT ON *.* TO 'u'@'h' IDENTIFIED BY 'pw'", "GRANT SELECT ON *.* TO 'u'@'h' IDENTIFIED BY '<redacted>'"},
		{"CREATE USER u IDENTIFIED VIA ed25519 USING PASSWORD('pw')", "CREATE USER u IDENTIFIED VIA ed25519 USING PASSWORD('<redacted>')"},
		{"CHANGE MASTER TO MASTER_USER='r', MASTER_PASSWORD='pw'", "CHANGE MASTER TO MASTER_USER='r', MASTER_PASSWORD='<redacted>'"},
		{"SELECT `password` FROM t WHERE a = 'x'", "SELECT `password` FROM t WHERE a = 'x'"},
	} {
		if got := RedactSecrets(c[0]); got != c[1] {
			t.Errorf("%s\n got %s\nwant %s", c[0], got, c[1])
		}
	}
}
