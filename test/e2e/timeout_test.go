package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"
)

// sleepsOn counts the statements running SLEEP (or BENCHMARK) on the
// backend at port.
func sleepsOn(t *testing.T, port int) int {
	t.Helper()
	var n int
	d := direct(t, port, "")
	if err := d.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE (INFO LIKE '%SLEEP(%' OR INFO LIKE '%BENCHMARK(%') " +
		"AND INFO NOT LIKE '%PROCESSLIST%'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// wantTimeout runs q on c and checks it ends with MariaDB's timeout error
// (1969) well before it would have ended by itself.
func wantTimeout(t *testing.T, c *sql.Conn, q string, before time.Duration) {
	t.Helper()
	start := time.Now()
	_, err := c.ExecContext(context.Background(), q)
	wantCode(t, q, err, 1969, "max_execution_time")
	if d := time.Since(start); d > before {
		t.Fatalf("%s: stopped after %v, want it stopped before %v", q, d, before)
	}
}

// A statement past max_execution_time (the schema's, the user's, the
// client's SET, the SELECT's hint) is stopped on its backend with
// MariaDB's error 1969; the connection and the session go on; COMMIT is
// not timed.
func TestStatementTimeout(t *testing.T) {
	yaml := strings.Replace(baseYAML("%ADDR%"), "    default: node1\n", "    default: node1\n    max_execution_time: 300\n", 1)
	p := startProxy(t, yaml)
	ks := p.open(t, "ks:ks", "ks_test", "")
	c, err := ks.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wantTimeout(t, c, "SELECT SLEEP(5)", 3*time.Second)
	waitFor(t, "the SLEEP gone from node1", func() bool { return sleepsOn(t, basePort) == 0 })
	// The session goes on, on a clean connection.
	if got := queryColConn(t, c, "SELECT 1", 0); len(got) != 1 || got[0] != "1" {
		t.Fatalf("after a timeout: %v", got)
	}
	// The client's own limit overrides the schema's: 0 is none.
	mustExecConn(t, c, "SET max_execution_time = 0")
	if got := queryColConn(t, c, "SELECT SLEEP(0.6)", 0); len(got) != 1 || got[0] != "0" {
		t.Fatalf("SLEEP(0.6) without a limit: %v", got)
	}
	mustExecConn(t, c, "SET SESSION max_execution_time = 100")
	wantTimeout(t, c, "SELECT SLEEP(0.6)", 590*time.Millisecond)
	mustExecConn(t, c, "SET max_execution_time = DEFAULT")
	wantTimeout(t, c, "SELECT SLEEP(5)", 3*time.Second)
	// A transaction: the statement stops, the transaction goes on, COMMIT
	// is never timed.
	mustExecConn(t, c, "CREATE TABLE IF NOT EXISTS to_t (id INT PRIMARY KEY)")
	mustExecConn(t, c, "DELETE FROM to_t")
	mustExecConn(t, c, "BEGIN")
	mustExecConn(t, c, "INSERT INTO to_t VALUES (1)")
	wantTimeout(t, c, "SELECT SLEEP(5)", 3*time.Second)
	mustExecConn(t, c, "COMMIT")
	if got := queryColConn(t, c, "SELECT COUNT(*) FROM to_t", 0); got[0] != "1" {
		t.Fatalf("the transaction's row after a timed-out statement in it: %v", got)
	}

	// The hint, for a user with no limit.
	other := p.open(t, "other:other", "ks_test", "")
	oc, err := other.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Close()
	if got := queryColConn(t, oc, "SELECT SLEEP(0.4)", 0); got[0] != "0" {
		t.Fatalf("no limit: %v", got)
	}
	wantTimeout(t, oc, "SELECT /*+ MAX_EXECUTION_TIME(100) */ SLEEP(3)", 2*time.Second)
	waitFor(t, "the SLEEP gone from node3", func() bool { return sleepsOn(t, downPort) == 0 })

	// The wait for a pooled connection counts: node3 has 4 connections,
	// all held by transactions.
	var held []*sql.Conn
	for range 4 {
		hc, err := other.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer hc.Close()
		mustExecConn(t, hc, "BEGIN")
		mustExecConn(t, hc, "SELECT 1")
		held = append(held, hc)
	}
	wantTimeout(t, oc, "SELECT /*+ MAX_EXECUTION_TIME(200) */ 1", 3*time.Second)
	for _, hc := range held {
		mustExecConn(t, hc, "ROLLBACK")
	}
}

// A merge over sub-tables on two nodes past its limit is stopped on every
// backend it runs on.
func TestStatementTimeoutFanOut(t *testing.T) {
	setupShardDB(t)
	yaml := strings.Replace(shardYAML("%ADDR%"), "    default: node1\n", "    default: node1\n    max_execution_time: 400\n", 1)
	p := startProxy(t, yaml)
	db := p.open(t, "ks:ks", "shard_e2e", "")
	mustExec(t, db, "CREATE TABLE sh_user (id INT PRIMARY KEY, name VARCHAR(20))")
	for i := range 16 {
		mustExec(t, db, "INSERT INTO sh_user (id, name) VALUES (?, 'u')", i)
	}
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Each sub-table's leg computes for seconds a row. (Not SLEEP: MariaDB's
	// sleeping threads share one mutex, and a KILL of one of several may
	// wait up to 2 s for it.)
	wantTimeout(t, c, "SELECT id, BENCHMARK(20000000, MD5(name)) FROM sh_user ORDER BY id", 3*time.Second)
	for _, port := range []int{basePort, basePort + 1} {
		waitFor(t, fmt.Sprintf("every leg stopped on %d", port), func() bool { return sleepsOn(t, port) == 0 })
	}
	if got := queryColConn(t, c, "SELECT COUNT(*) FROM sh_user", 0); got[0] != "16" {
		t.Fatalf("after the timeout: %v", got)
	}
}
