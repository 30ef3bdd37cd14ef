package proxy

import (
	"testing"

	"github.com/keyshard/keyshard/router"
)

// DDL commits the session's transaction first, as on the server; a
// temporary table's does not.
func TestCommitsImplicitly(t *testing.T) {
	for sql, want := range map[string]bool{
		"CREATE TABLE t (a INT)":                      true,
		"create table if not exists t (a int)":        true,
		"/* c */ ALTER TABLE t ADD b INT":             true,
		"DROP TABLE t":                                true,
		"TRUNCATE TABLE t":                            true,
		"RENAME TABLE a TO b":                         true,
		"CREATE INDEX i ON t (a)":                     true,
		"CREATE TEMPORARY TABLE t (a INT)":            false,
		"drop temporary table if exists t":            false,
		"CREATE OR REPLACE TEMPORARY TABLE t (a INT)": false,
		"CREATE OR REPLACE TABLE t (a INT)":           true,
		"INSERT INTO t VALUES (1)":                    false,
		"SELECT 1":                                    false,
	} {
		if got := commitsImplicitly(sql, router.Classify(sql)); got != want {
			t.Errorf("commitsImplicitly(%q) = %v, want %v", sql, got, want)
		}
	}
}
