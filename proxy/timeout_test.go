package proxy

import (
	"errors"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/router"
)

func TestHintTimeout(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want time.Duration
		ok   bool
	}{
		{"SELECT /*+ MAX_EXECUTION_TIME(1000) */ * FROM t", time.Second, true},
		{"/* c */ select\n/*+ BKA(t) max_execution_time ( 250 ) */ 1", 250 * time.Millisecond, true},
		{"SELECT /*+ MAX_EXECUTION_TIME(0) */ 1", 0, true},
		{"SELECT 1 /*+ MAX_EXECUTION_TIME(10) */", 0, false},           // not right after SELECT
		{"SELECT /* MAX_EXECUTION_TIME(10) */ 1", 0, false},            // not a hint comment
		{"SELECT /*+ MAX_EXECUTION_TIME(-1) */ 1", 0, false},           // not a count
		{"UPDATE /*+ MAX_EXECUTION_TIME(10) */ t SET a = 1", 0, false}, // SELECT only, as MySQL
	} {
		got, ok := hintTimeout(c.sql, router.Classify(c.sql))
		if got != c.want || ok != c.ok {
			t.Errorf("%q: %v %v, want %v %v", c.sql, got, ok, c.want, c.ok)
		}
	}
}

func TestTimed(t *testing.T) {
	for sql, want := range map[string]bool{
		"SELECT 1": true, "UPDATE t SET a = 1": true, "CALL p()": true, "SHOW TABLES": true, "DO SLEEP(1)": true,
		"COMMIT": false, "ROLLBACK": false, "XA COMMIT 'x'": false, "BEGIN": false, "ALTER TABLE t ADD c INT": false,
		"SET @a = 1": false, "OPTIMIZE TABLE t": false, "SAVEPOINT a": false,
	} {
		if got := timed(sql, router.Classify(sql)); got != want {
			t.Errorf("timed(%q) = %v, want %v", sql, got, want)
		}
	}
}

// A client of a MariaDB server gets ER_STATEMENT_TIMEOUT, of MySQL
// ER_QUERY_TIMEOUT.
func TestTimeoutError(t *testing.T) {
	for mariaDB, code := range map[bool]uint16{true: 1969, false: 3024} {
		var me *mysql.MyError
		if err := timeoutError(mariaDB, time.Second); !errors.As(err, &me) || me.Code != code {
			t.Errorf("mariaDB %v: %v, want %d", mariaDB, err, code)
		}
	}
}
