package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/keyshard/keyshard/proxy/engine"
)

// DDL on sharded tables as applications send it: with autocommit off (the
// default of sysbench and of Python's DB-API drivers) or inside an open
// transaction. As on one server, the DDL commits what the session has open
// first, then runs on every sub-table outside any transaction; the session
// keeps autocommit off, with no transaction open. A plain CREATE TABLE
// whose sub-tables exist on some nodes only is refused before anything
// changes.

const ddlDB = "ddl_e2e"

// ddlTables are the tables ddlYAML shards: by hash of id, 2 nodes x 2
// sub-tables (sub-tables 0 and 1 on node1, 2 and 3 on node2).
var ddlTables = []string{"warehouse1", "dt_commit", "dt_alter", "dt_part", "dt_prep", "dt_prep2"}

func ddlYAML(addr string) string {
	var b strings.Builder
	for _, tb := range ddlTables {
		fmt.Fprintf(&b, "      - db: %s\n        table: %s\n        key: id\n        nodes: [node1, node2]\n"+
			"        type: hash\n        locations: [2, 2]\n", ddlDB, tb)
	}
	fmt.Fprintf(&b, "      - db: %s\n        table: dt_glob\n        nodes: [node1, node2]\n        type: global\n", ddlDB)
	return twoNodeYAML(addr, b.String())
}

func setupDDLDB(t *testing.T) {
	t.Helper()
	for _, port := range []int{basePort, basePort + 1} {
		d := direct(t, port, "")
		mustExec(t, d, "DROP DATABASE IF EXISTS "+ddlDB)
		mustExec(t, d, "CREATE DATABASE "+ddlDB)
	}
}

// ddlPort is the backend of sub-table i of a ddlYAML table.
func ddlPort(i int) int {
	if i < 2 {
		return basePort
	}
	return basePort + 1
}

// ddlSubTables lists the sub-tables of table that exist on their nodes.
func ddlSubTables(t *testing.T, table string) []string {
	t.Helper()
	var out []string
	for i := range 4 {
		name := fmt.Sprintf("%s_%04d", table, i)
		var n int
		q := "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?"
		if err := direct(t, ddlPort(i), "").QueryRow(q, ddlDB, name).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if n == 1 {
			out = append(out, name)
		}
	}
	return out
}

// wantAllSubTables fails unless all four sub-tables of table exist.
func wantAllSubTables(t *testing.T, table string) {
	t.Helper()
	want := []string{table + "_0000", table + "_0001", table + "_0002", table + "_0003"}
	if got := ddlSubTables(t, table); !slices.Equal(got, want) {
		t.Fatalf("sub-tables of %s on their nodes: %v, want %v", table, got, want)
	}
}

// noXALeft fails if an XA transaction is left prepared on a node.
func noXALeft(t *testing.T) {
	t.Helper()
	for _, port := range []int{basePort, basePort + 1} {
		if rows := allRows(t, direct(t, port, ""), "XA RECOVER"); len(rows) != 0 {
			t.Fatalf("XA transactions left on backend %d: %v", port, rows)
		}
	}
}

// ddlRows reads the ids in sub-table i of table straight from its node
// (committed rows only).
func ddlRows(t *testing.T, table string, i int) []string {
	t.Helper()
	return queryCol(t, direct(t, ddlPort(i), ddlDB), fmt.Sprintf("SELECT CAST(id AS CHAR) FROM %s_%04d ORDER BY id", table, i))
}

// wantRows fails unless sub-table i of table holds the ids want (committed).
func wantRows(t *testing.T, what, table string, want ...[]string) {
	t.Helper()
	for i := range 4 {
		if got := ddlRows(t, table, i); !slices.Equal(got, want[i]) {
			t.Fatalf("%s: %s_%04d holds %v, want %v", what, table, i, got, want[i])
		}
	}
}

func scalarConn(t *testing.T, c *sql.Conn, q string) string {
	t.Helper()
	var v sql.NullString
	if err := c.QueryRowContext(context.Background(), q).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v.String
}

// ddlSession opens keyshard with ddlYAML and one client connection, with
// autocommit off when off.
func ddlSession(t *testing.T, off bool) (*testProxy, *sql.DB, *sql.Conn) {
	t.Helper()
	setupDDLDB(t)
	p := startProxy(t, ddlYAML("%ADDR%"))
	db := p.open(t, "ks:ks", ddlDB, "interpolateParams=false")
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if off {
		mustExecConn(t, c, "SET autocommit=0")
	}
	return p, db, c
}

var noRows = [][]string{nil, nil, nil, nil}

// CREATE TABLE IF NOT EXISTS with autocommit off creates every sub-table
// on its node, leaves no XA transaction behind, and the session goes on
// with autocommit off: its next writes open a transaction ROLLBACK undoes.
func TestDDLAutocommitOffCreate(t *testing.T) {
	_, _, c := ddlSession(t, true)
	const create = "CREATE TABLE IF NOT EXISTS warehouse1 (id BIGINT PRIMARY KEY, v INT NOT NULL)"
	mustExecConn(t, c, create)
	if rc := scalarConn(t, c, "SELECT ROW_COUNT()"); rc != "0" {
		t.Fatalf("ROW_COUNT() after the DDL: %s, want 0", rc)
	}
	wantAllSubTables(t, "warehouse1")
	noXALeft(t)
	if ac := scalarConn(t, c, "SELECT @@autocommit"); ac != "0" {
		t.Fatalf("@@autocommit after the DDL: %s, want 0", ac)
	}

	mustExecConn(t, c, "INSERT INTO warehouse1 (id, v) VALUES (0, 0), (1, 1), (2, 2), (3, 3)")
	if n := scalarConn(t, c, "SELECT COUNT(*) FROM warehouse1"); n != "4" {
		t.Fatalf("the session sees %s rows of its own transaction, want 4", n)
	}
	wantRows(t, "before ROLLBACK (not committed)", "warehouse1", noRows...)
	mustExecConn(t, c, "ROLLBACK")
	wantRows(t, "after ROLLBACK", "warehouse1", noRows...)
	if n := scalarConn(t, c, "SELECT COUNT(*) FROM warehouse1"); n != "0" {
		t.Fatalf("after ROLLBACK the session sees %s rows, want 0", n)
	}

	// Again: the sub-tables exist, nothing changes (warnings only).
	mustExecConn(t, c, create)
	wantAllSubTables(t, "warehouse1")
	noXALeft(t)

	// A global table's copies likewise, after a write to commit.
	mustExecConn(t, c, "INSERT INTO warehouse1 (id, v) VALUES (0, 0), (2, 2)")
	mustExecConn(t, c, "CREATE TABLE dt_glob (id INT PRIMARY KEY)")
	mustExecConn(t, c, "ALTER TABLE dt_glob ADD COLUMN x INT NOT NULL DEFAULT 3")
	for _, port := range []int{basePort, basePort + 1} {
		if got := queryCol(t, direct(t, port, ddlDB), "SELECT column_name FROM information_schema.columns WHERE table_schema = ? "+
			"AND table_name = 'dt_glob' ORDER BY ordinal_position", ddlDB); !slices.Equal(got, []string{"id", "x"}) {
			t.Fatalf("the copy of dt_glob on backend %d has columns %v", port, got)
		}
	}
	wantRows(t, "after DDL on a global table", "warehouse1", [][]string{{"0"}, nil, {"2"}, nil}...)
	noXALeft(t)
	if ac := scalarConn(t, c, "SELECT @@autocommit"); ac != "0" {
		t.Fatalf("@@autocommit after the DDL: %s, want 0", ac)
	}
}

// A DDL commits the session's open transaction first, as the server does:
// its rows are committed without COMMIT, over both nodes, and for a
// transaction on one node that a DDL on another follows.
func TestDDLImplicitCommit(t *testing.T) {
	_, db, c := ddlSession(t, true)
	mustExecConn(t, c, "CREATE TABLE IF NOT EXISTS dt_commit (id BIGINT PRIMARY KEY, v INT NOT NULL)")
	mustExecConn(t, c, "INSERT INTO dt_commit (id, v) VALUES (0, 0), (1, 1), (2, 2), (3, 3)") // a transaction over both nodes
	wantRows(t, "before the DDL (not committed)", "dt_commit", noRows...)
	mustExecConn(t, c, "CREATE TABLE IF NOT EXISTS warehouse1 (id BIGINT PRIMARY KEY, v INT NOT NULL)")
	committed := [][]string{{"0"}, {"1"}, {"2"}, {"3"}}
	wantRows(t, "after the DDL (committed implicitly)", "dt_commit", committed...)
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM dt_commit").Scan(&n); err != nil || n != 4 {
		t.Fatalf("another client sees %d rows (%v), want 4", n, err)
	}
	wantAllSubTables(t, "warehouse1")
	noXALeft(t)
	mustExecConn(t, c, "ROLLBACK")
	wantRows(t, "after ROLLBACK", "dt_commit", committed...)

	// A transaction on node2 only, then DDL on an unsharded table (on the
	// default node, node1).
	mustExecConn(t, c, "INSERT INTO dt_commit (id, v) VALUES (6, 6)")
	mustExecConn(t, c, "CREATE TABLE plain_ddl (id INT AUTO_INCREMENT PRIMARY KEY)")
	committed[2] = []string{"2", "6"}
	wantRows(t, "after DDL on an unsharded table", "dt_commit", committed...)
	if got := allRows(t, direct(t, basePort, ddlDB), "SHOW TABLES LIKE 'plain_ddl'"); len(got) != 1 {
		t.Fatalf("plain_ddl on node1: %v", got)
	}
	noXALeft(t)

	// After a DDL over both nodes, ROW_COUNT() is 0 and LAST_INSERT_ID()
	// what it was, as on the server.
	mustExecConn(t, c, "INSERT INTO plain_ddl VALUES (NULL), (NULL)")
	mustExecConn(t, c, "INSERT INTO dt_commit (id, v) VALUES (10, 10), (11, 11)")
	mustExecConn(t, c, "ALTER TABLE dt_commit ADD COLUMN w INT")
	var rc, id int64
	if err := c.QueryRowContext(context.Background(), "SELECT ROW_COUNT(), LAST_INSERT_ID()").Scan(&rc, &id); err != nil || rc != 0 || id != 1 {
		t.Fatalf("after the ALTER: ROW_COUNT() %d, LAST_INSERT_ID() %d (%v), want 0 and 1", rc, id, err)
	}
	committed[2] = []string{"2", "6", "10"}
	committed[3] = []string{"3", "11"}
	wantRows(t, "after the ALTER", "dt_commit", committed...)
	if got := queryCol(t, direct(t, basePort, ddlDB), "SELECT CAST(id AS CHAR) FROM plain_ddl ORDER BY id"); !slices.Equal(got, []string{"1", "2"}) {
		t.Fatalf("plain_ddl after the ALTER: %v", got)
	}
	noXALeft(t)
	if ac := scalarConn(t, c, "SELECT @@autocommit"); ac != "0" {
		t.Fatalf("@@autocommit after the DDL: %s, want 0", ac)
	}
	// The next write opens a new transaction again.
	mustExecConn(t, c, "INSERT INTO dt_commit (id, v) VALUES (5, 5)")
	mustExecConn(t, c, "ROLLBACK")
	wantRows(t, "after a rolled-back write", "dt_commit", committed...)
}

// BEGIN; INSERT ...; ALTER TABLE: the ALTER commits the transaction (over
// both nodes) and then changes every sub-table.
func TestDDLInTransaction(t *testing.T) {
	_, _, c := ddlSession(t, false)
	mustExecConn(t, c, "CREATE TABLE dt_alter (id BIGINT PRIMARY KEY, v INT NOT NULL)")
	mustExecConn(t, c, "BEGIN")
	mustExecConn(t, c, "INSERT INTO dt_alter (id, v) VALUES (0, 0), (1, 1), (2, 2), (3, 3)")
	mustExecConn(t, c, "ALTER TABLE dt_alter ADD COLUMN extra INT NOT NULL DEFAULT 7")
	for i := range 4 {
		got := queryCol(t, direct(t, ddlPort(i), ddlDB), fmt.Sprintf("SELECT CONCAT(id, ':', extra) FROM dt_alter_%04d", i))
		if want := fmt.Sprintf("%d:7", i); !slices.Equal(got, []string{want}) {
			t.Fatalf("dt_alter_%04d after the ALTER: %v, want [%s]", i, got, want)
		}
	}
	noXALeft(t)
	mustExecConn(t, c, "ROLLBACK") // nothing open: the rows stay
	wantRows(t, "after ROLLBACK", "dt_alter", [][]string{{"0"}, {"1"}, {"2"}, {"3"}}...)
	if ac := scalarConn(t, c, "SELECT @@autocommit"); ac != "1" {
		t.Fatalf("@@autocommit: %s, want 1", ac)
	}
}

// A plain CREATE TABLE whose sub-tables exist on some nodes only is
// refused before anything is created, naming those that exist; CREATE
// TABLE IF NOT EXISTS creates the missing ones. A plain DROP TABLE with a
// sub-table missing is refused before anything is dropped.
func TestDDLCreatePartial(t *testing.T) {
	_, _, c := ddlSession(t, true)
	mustExec(t, direct(t, basePort+1, ddlDB), "CREATE TABLE dt_part_0002 (id BIGINT PRIMARY KEY, v INT NOT NULL)")
	const def = " dt_part (id BIGINT PRIMARY KEY, v INT NOT NULL)"
	_, err := c.ExecContext(context.Background(), "CREATE TABLE"+def)
	wantErrContains(t, "CREATE TABLE with one sub-table there", err, 1050, "dt_part_0002")
	wantErrContains(t, "CREATE TABLE with one sub-table there", err, 1050, "IF NOT EXISTS")
	if got := ddlSubTables(t, "dt_part"); !slices.Equal(got, []string{"dt_part_0002"}) {
		t.Fatalf("after the refused CREATE TABLE: sub-tables %v, want only dt_part_0002", got)
	}
	noXALeft(t)

	mustExecConn(t, c, "CREATE TABLE IF NOT EXISTS"+def)
	wantAllSubTables(t, "dt_part")
	_, err = c.ExecContext(context.Background(), "CREATE TABLE"+def)
	wantErrContains(t, "CREATE TABLE of an existing table", err, 1050, "dt_part")
	noXALeft(t)

	// DROP TABLE likewise: refused on none when a sub-table is missing.
	mustExec(t, direct(t, basePort, ddlDB), "DROP TABLE dt_part_0001")
	_, err = c.ExecContext(context.Background(), "DROP TABLE dt_part")
	wantErrContains(t, "DROP TABLE with a sub-table missing", err, 1051, "dt_part_0001")
	if got := ddlSubTables(t, "dt_part"); !slices.Equal(got, []string{"dt_part_0000", "dt_part_0002", "dt_part_0003"}) {
		t.Fatalf("after the refused DROP TABLE: sub-tables %v", got)
	}
	mustExecConn(t, c, "DROP TABLE IF EXISTS dt_part")
	if got := ddlSubTables(t, "dt_part"); len(got) != 0 {
		t.Fatalf("after DROP TABLE IF EXISTS: sub-tables %v", got)
	}
	if ac := scalarConn(t, c, "SELECT @@autocommit"); ac != "0" {
		t.Fatalf("@@autocommit: %s, want 0", ac)
	}
}

// DDL through the prepared protocol: on an unsharded table (the default
// node) inside a transaction over both nodes, it commits the transaction
// first; on a sharded table it cannot be prepared, and nothing is created.
func TestDDLPrepared(t *testing.T) {
	_, _, c := ddlSession(t, false)
	ctx := context.Background()
	mustExecConn(t, c, "CREATE TABLE dt_prep (id BIGINT PRIMARY KEY, v INT NOT NULL)")
	mustExecConn(t, c, "BEGIN")
	mustExecConn(t, c, "INSERT INTO dt_prep (id, v) VALUES (0, 0), (2, 2)")
	st, err := c.PrepareContext(ctx, "CREATE TABLE plain_prep (id INT PRIMARY KEY)")
	if err != nil {
		t.Fatalf("PREPARE of DDL on an unsharded table: %v", err)
	}
	if _, err := st.ExecContext(ctx); err != nil {
		t.Fatalf("EXECUTE of DDL on an unsharded table inside a transaction over two nodes: %v", err)
	}
	st.Close()
	wantRows(t, "after the prepared DDL", "dt_prep", [][]string{{"0"}, nil, {"2"}, nil}...)
	if got := allRows(t, direct(t, basePort, ddlDB), "SHOW TABLES LIKE 'plain_prep'"); len(got) != 1 {
		t.Fatalf("plain_prep on node1: %v", got)
	}
	noXALeft(t)

	_, err = c.PrepareContext(ctx, "CREATE TABLE dt_prep2 (id BIGINT PRIMARY KEY)")
	wantErrContains(t, "PREPARE of DDL on a sharded table", err, 1235, "send it as text")
	if got := ddlSubTables(t, "dt_prep2"); len(got) != 0 {
		t.Fatalf("sub-tables after a refused PREPARE: %v", got)
	}
}

// In transaction_mode single (a transaction stays on one node), DDL over
// both nodes with autocommit off runs too, having committed the
// transaction open on one; so it does from a session whose connection is
// pinned for good (user variables), which keeps it.
func TestDDLAutocommitOffSingleMode(t *testing.T) {
	setupDDLDB(t)
	p := startProxy(t, singleMode(ddlYAML("%ADDR%")))
	db := p.open(t, "ks:ks", ddlDB, "")
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	mustExecConn(t, c, "SET autocommit = 0")
	mustExecConn(t, c, "SET @pinned = 42")
	mustExecConn(t, c, "CREATE TABLE IF NOT EXISTS dt_commit (id BIGINT PRIMARY KEY, v INT NOT NULL)")
	wantAllSubTables(t, "dt_commit")
	mustExecConn(t, c, "INSERT INTO dt_commit (id, v) VALUES (0, 0), (1, 1)") // node1 only
	wantRows(t, "before the DDL (not committed)", "dt_commit", noRows...)
	mustExecConn(t, c, "CREATE TABLE IF NOT EXISTS warehouse1 (id BIGINT PRIMARY KEY, v INT NOT NULL)")
	wantAllSubTables(t, "warehouse1")
	wantRows(t, "after the DDL (committed implicitly)", "dt_commit", [][]string{{"0"}, {"1"}, nil, nil}...)
	if v := scalarConn(t, c, "SELECT @pinned"); v != "42" {
		t.Fatalf("@pinned after the DDL: %q, want 42", v)
	}
	if ac := scalarConn(t, c, "SELECT @@autocommit"); ac != "0" {
		t.Fatalf("@@autocommit after the DDL: %s, want 0", ac)
	}
	mustExecConn(t, c, "INSERT INTO dt_commit (id, v) VALUES (4, 4)")
	mustExecConn(t, c, "ROLLBACK")
	wantRows(t, "after a rolled-back write", "dt_commit", [][]string{{"0"}, {"1"}, nil, nil}...)
	noXALeft(t)
}

// When the implicit commit before a DDL fails (node2's branch lost at
// XA PREPARE), the transaction is rolled back on every node, the client
// gets the commit's error, and the DDL does not run.
func TestDDLImplicitCommitFails(t *testing.T) {
	_, _, c := ddlSession(t, false)
	mustExecConn(t, c, "CREATE TABLE dt_alter (id BIGINT PRIMARY KEY, v INT NOT NULL)")
	mustExecConn(t, c, "BEGIN")
	mustExecConn(t, c, "INSERT INTO dt_alter (id, v) VALUES (0, 0), (2, 2)")
	node2 := direct(t, basePort+1, "")
	var killed atomic.Bool // set on the session's goroutine
	f := func(step, node string) {
		if step != "prepare" || node != "node2" || !killed.CompareAndSwap(false, true) {
			return
		}
		var id int64
		if err := node2.QueryRow("SELECT trx_mysql_thread_id FROM information_schema.innodb_trx").Scan(&id); err != nil {
			t.Errorf("finding the branch on node2: %v", err)
			return
		}
		if _, err := node2.Exec(fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
			t.Errorf("killing the branch on node2: %v", err)
		}
	}
	engine.Failpoint.Store(&f)
	t.Cleanup(func() { engine.Failpoint.Store(nil) })
	_, err := c.ExecContext(context.Background(), "ALTER TABLE dt_alter ADD COLUMN extra INT")
	engine.Failpoint.Store(nil)
	if !killed.Load() {
		t.Fatalf("the ALTER did not commit the transaction first: %v", err)
	}
	wantErrContains(t, "ALTER whose implicit commit failed", err, 1181, "rolled back on every node")
	for i := range 4 {
		cols := queryCol(t, direct(t, ddlPort(i), ddlDB), "SELECT column_name FROM information_schema.columns WHERE table_schema = ? "+
			"AND table_name = ? ORDER BY ordinal_position", ddlDB, fmt.Sprintf("dt_alter_%04d", i))
		if !slices.Equal(cols, []string{"id", "v"}) {
			t.Fatalf("dt_alter_%04d has columns %v after the refused ALTER", i, cols)
		}
	}
	wantRows(t, "after the failed implicit commit", "dt_alter", noRows...)
	noXALeft(t)
	// The session goes on, with no transaction open.
	mustExecConn(t, c, "INSERT INTO dt_alter (id, v) VALUES (1, 1)")
	wantRows(t, "a write after it", "dt_alter", [][]string{nil, {"1"}, nil, nil}...)
}
