package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
)

// shardYAML: user ks on node1 (basePort) and node2 (basePort+1), database
// shard_e2e; sh_user is hash-sharded 2 nodes x 4 sub-tables, sh_order is
// co-located with it, sh_log is range-sharded (100 rows per sub-table),
// sh_ev is date_month, sh_reg is a list rule; plain lives on node1.
func shardYAML(addr string) string {
	return twoNodeYAML(addr, `      - db: shard_e2e
        table: sh_user
        key: id
        nodes: [node1, node2]
        type: hash
        locations: [4, 4]
      - db: shard_e2e
        table: sh_order
        key: user_id
        nodes: [node1, node2]
        type: hash
        locations: [4, 4]
      - db: shard_e2e
        table: sh_log
        key: id
        nodes: [node1, node2]
        type: range
        locations: [2, 2]
        table_row_limit: 100
      - db: shard_e2e
        table: sh_ev
        key: ts
        nodes: [node1, node2]
        type: date_month
        date_range: [201501-201502, 201503-201504]
      - db: shard_e2e
        table: sh_reg
        key: code
        nodes: [node1, node2]
        type: list
        locations: [1, 1]
        list_values: ["1,2", "3"]
`)
}

// twoNodeYAML is a config with user ks on node1 (basePort) and node2
// (basePort+1), default node1, and the given shard rules (YAML list items
// indented for schema_list[0].shard); more top-level keys may follow.
func twoNodeYAML(addr, rules string) string {
	return fmt.Sprintf(`addr: %s
user_list:
  - user: ks
    password: ks
nodes:
  - name: node1
    user: ks
    password: ks
    master: 127.0.0.1:%d
    max_conns_limit: 16
  - name: node2
    user: ks
    password: ks
    master: 127.0.0.1:%d
    max_conns_limit: 16
schema_list:
  - user: ks
    nodes: [node1, node2]
    default: node1
    shard:
%s`, addr, basePort, basePort+1, rules)
}

// subTableRows reads the ids of table straight from the backend at port.
func subTableRows(t *testing.T, port int, table string) []string {
	t.Helper()
	return subTableRows2(t, port, table, "id")
}

func wantErrContains(t *testing.T, what string, err error, number uint16, substr string) {
	t.Helper()
	var me *gomysql.MySQLError
	if !errors.As(err, &me) {
		t.Fatalf("%s: got %v, want MySQL error %d", what, err, number)
	}
	if me.Number != number || !strings.Contains(me.Message, substr) {
		t.Fatalf("%s: got %d %q, want %d containing %q", what, me.Number, me.Message, number, substr)
	}
}

func setupShardDB(t *testing.T) {
	t.Helper()
	for _, port := range []int{basePort, basePort + 1} {
		d := direct(t, port, "")
		mustExec(t, d, "DROP DATABASE IF EXISTS shard_e2e")
		mustExec(t, d, "CREATE DATABASE shard_e2e")
	}
}

func TestShardRouting(t *testing.T) {
	setupShardDB(t)
	p := startProxy(t, shardYAML("%ADDR%"))
	db := p.open(t, "ks:ks", "shard_e2e", "")
	db.SetMaxOpenConns(4)

	// DDL fans out: every sub-table exists on its node afterwards.
	mustExec(t, db, "CREATE TABLE sh_user (id BIGINT PRIMARY KEY, name VARCHAR(32) NOT NULL DEFAULT '', n INT NOT NULL DEFAULT 0)")
	mustExec(t, db, "CREATE TABLE sh_order (id BIGINT AUTO_INCREMENT PRIMARY KEY, user_id BIGINT NOT NULL, amount INT)")
	mustExec(t, db, "CREATE TABLE plain (id INT PRIMARY KEY, label VARCHAR(16))")
	for i := range 8 {
		port := basePort
		if i >= 4 {
			port = basePort + 1
		}
		if got := subTableRows(t, port, fmt.Sprintf("sh_user_%04d", i)); len(got) != 0 {
			t.Fatalf("fresh sh_user_%04d has rows %v", i, got)
		}
	}
	mustExec(t, db, "ALTER TABLE sh_user ADD COLUMN email VARCHAR(64)")
	if _, err := direct(t, basePort+1, "shard_e2e").Exec("SELECT email FROM sh_user_0006"); err != nil {
		t.Fatalf("ALTER did not reach sh_user_0006 on node2: %v", err)
	}

	// A multi-row INSERT is split by sub-table; rows land where the rule says.
	r := mustExec(t, db, "INSERT INTO sh_user (id, name) VALUES (1,'a'),(2,'b'),(5,'e'),(9,'i'),(12,'l'),(-1,'neg'),(15,'o')")
	if n, _ := r.RowsAffected(); n != 7 {
		t.Fatalf("affected %d, want 7", n)
	}
	want := map[string][]string{ // kingshard placement: id mod 8 (uint64 wrap for -1 -> 7)
		"sh_user_0001": {"1", "9"}, "sh_user_0002": {"2"}, "sh_user_0005": {"5"},
		"sh_user_0004": {"12"}, "sh_user_0007": {"-1", "15"},
	}
	for i := range 8 {
		name := fmt.Sprintf("sh_user_%04d", i)
		port := basePort
		if i >= 4 {
			port = basePort + 1
		}
		got := subTableRows(t, port, name)
		if strings.Join(got, ",") != strings.Join(want[name], ",") {
			t.Errorf("%s holds %v, want %v", name, got, want[name])
		}
	}

	// Point reads, IN lists spanning nodes, scans of all sub-tables.
	var name string
	if err := db.QueryRow("SELECT name FROM sh_user WHERE id = 12").Scan(&name); err != nil || name != "l" {
		t.Fatalf("point read: %q %v", name, err)
	}
	if got := queryCol(t, db, "SELECT id FROM sh_user WHERE id IN (1, 5, 12, 100)"); sortedJoin(got) != "1,12,5" {
		t.Fatalf("IN across nodes: %v", got)
	}
	if got := queryCol(t, db, "SELECT id FROM sh_user WHERE name <> 'zzz'"); sortedJoin(got) != "-1,1,12,15,2,5,9" {
		t.Fatalf("scan of every sub-table: %v", got)
	}
	if got := queryCol(t, db, "SELECT u.id FROM sh_user AS u WHERE u.id = 1 OR u.id = 2 AND u.name = 'x'"); sortedJoin(got) != "1" {
		t.Fatalf("AND binds tighter than OR: %v", got)
	}
	// An empty answer with its columns.
	rows, err := db.Query("SELECT id, name FROM sh_user WHERE id = 1000")
	if err != nil {
		t.Fatal(err)
	}
	if cols, _ := rows.Columns(); len(cols) != 2 || rows.Next() {
		t.Fatalf("empty point read: cols %v", cols)
	}
	rows.Close()

	// UPDATE and DELETE on one sub-table and on several.
	if n, _ := mustExec(t, db, "UPDATE sh_user SET n = n + 1 WHERE id IN (1, 12)").RowsAffected(); n != 2 {
		t.Fatalf("update IN: affected %d", n)
	}
	if n, _ := mustExec(t, db, "UPDATE sh_user SET n = n + 10").RowsAffected(); n != 7 {
		t.Fatalf("update all: affected %d", n)
	}
	var nv int
	if err := db.QueryRow("SELECT n FROM sh_user WHERE id = 12").Scan(&nv); err != nil || nv != 11 {
		t.Fatalf("after updates n = %d %v", nv, err)
	}
	if n, _ := mustExec(t, db, "DELETE FROM sh_user WHERE id = 15").RowsAffected(); n != 1 {
		t.Fatalf("delete: affected %d", n)
	}
	if got := subTableRows(t, basePort+1, "sh_user_0007"); strings.Join(got, ",") != "-1" {
		t.Fatalf("after delete sh_user_0007 = %v", got)
	}

	// Co-located join on the shard key; a join that is not is refused.
	mustExec(t, db, "INSERT INTO sh_order (user_id, amount) VALUES (12, 100), (12, 50), (1, 7)")
	var total int
	if err := db.QueryRow("SELECT SUM(o.amount) FROM sh_user u JOIN sh_order o ON u.id = o.user_id WHERE u.id = 12").Scan(&total); err != nil || total != 150 {
		t.Fatalf("co-located join: %d %v", total, err)
	}
	// A join not on the keys runs in the proxy (proxy/join), but for
	// join columns it cannot compare as the server would.
	if got := queryRows(t, db, "SELECT o.amount, u.id FROM sh_order o JOIN sh_user u ON u.id = o.amount ORDER BY o.amount"); len(got) != 0 {
		t.Fatalf("join not on the keys: %v", got)
	}
	_, err = db.Exec("SELECT * FROM sh_user u JOIN sh_order o ON u.name = o.amount")
	wantErrContains(t, "join of a string with a number", err, 1235, "join columns of different kinds")
	// A sharded table with the default node's plain table, when the route is node1.
	mustExec(t, db, "INSERT INTO plain VALUES (1, 'one')")
	var label string
	if err := db.QueryRow("SELECT p.label FROM sh_user u JOIN plain p ON p.id = u.id WHERE u.id = 1").Scan(&label); err != nil || label != "one" {
		t.Fatalf("sharded + plain on the default node: %q %v", label, err)
	}
	// On node2: joined in the proxy.
	mustExec(t, db, "INSERT INTO plain VALUES (5, 'five')")
	if err := db.QueryRow("SELECT p.label FROM sh_user u JOIN plain p ON p.id = u.id WHERE u.id = 5").Scan(&label); err != nil || label != "five" {
		t.Fatalf("sharded on node2 + plain: %q %v", label, err)
	}
	_, err = db.Exec("SELECT COUNT(*) FROM sh_user u JOIN plain p ON p.id = u.id WHERE u.id = 5")
	wantErrContains(t, "sharded on node2 + plain, aggregated", err, 1235, "lives on default node node1")

	// Refusals with clear messages, the connection stays usable.
	_, err = db.Exec("INSERT INTO sh_user (name) VALUES ('nokey')")
	wantErrContains(t, "insert without key", err, 1235, "must give shard key id")
	_, err = db.Exec("UPDATE sh_user SET id = 3 WHERE id = 1")
	wantErrContains(t, "update of the key", err, 1235, "cannot update shard key id")
	_, err = db.Exec("SELECT id, ROW_NUMBER() OVER (ORDER BY id) FROM sh_user")
	wantErrContains(t, "merge not done", err, 1235, "window function ROW_NUMBER() over several sub-tables is not supported")
	_, err = db.Exec("SELECT * FROM sh_user WHERE id = 1 RETURNING junk")
	wantErrContains(t, "parser", err, 1064, "sh_user")
	if err := db.QueryRow("SELECT name FROM sh_user WHERE id = 1").Scan(&name); err != nil || name != "a" {
		t.Fatalf("after refusals: %q %v", name, err)
	}

	// tbl.* is renamed with the table; a parenthesized statement stays one.
	if err := db.QueryRow("SELECT sh_user.* FROM sh_user WHERE id = 12").Scan(new(int), &name, new(int), new(sql.NullString)); err != nil || name != "l" {
		t.Fatalf("tbl.*: %q %v", name, err)
	}
	if err := db.QueryRow("(SELECT name FROM sh_user WHERE id = 2)").Scan(&name); err != nil || name != "b" {
		t.Fatalf("parenthesized: %q %v", name, err)
	}
	// Per-connection functions still answer for this client in a sharded
	// schema.
	c1, _ := db.Conn(context.Background())
	defer c1.Close()
	mustExecConn(t, c1, "CREATE TABLE IF NOT EXISTS ai_plain (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
	mustExecConn(t, c1, "INSERT INTO ai_plain (v) VALUES (1)")
	var mine int64
	if err := c1.QueryRowContext(context.Background(), "SELECT LAST_INSERT_ID()").Scan(&mine); err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, "INSERT INTO ai_plain (v) VALUES (2), (3)") // other connections
	var again int64
	if err := c1.QueryRowContext(context.Background(), "SELECT LAST_INSERT_ID()").Scan(&again); err != nil || again != mine {
		t.Fatalf("LAST_INSERT_ID() = %d, want this client's %d (%v)", again, mine, err)
	}

	// Hints: /*node2*/ sends the statement as written to node2.
	var port int
	if err := db.QueryRow("/*node2*/ SELECT @@port").Scan(&port); err != nil || port != basePort+1 {
		t.Fatalf("/*node2*/ hint: port %d %v", port, err)
	}
	if err := db.QueryRow("SELECT @@port").Scan(&port); err != nil || port != basePort {
		t.Fatalf("no hint: port %d %v", port, err)
	}

	// EXPLAIN SHARD shows the plan without running it.
	ex, err := db.Query("EXPLAIN SHARD INSERT INTO sh_user (id, name) VALUES (3, 'c'), (4, 'd')")
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for ex.Next() {
		var node, sub, q string
		if err := ex.Scan(&node, &sub, &q); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, node+" "+sub+" "+q)
	}
	ex.Close()
	if len(plan) != 2 || !strings.HasPrefix(plan[0], "node1 sh_user_0003 INSERT INTO `sh_user_0003`") || !strings.HasPrefix(plan[1], "node2 sh_user_0004 ") {
		t.Fatalf("EXPLAIN SHARD: %q", plan)
	}
	if got := subTableRows(t, basePort, "sh_user_0003"); len(got) != 0 {
		t.Fatalf("EXPLAIN SHARD ran the insert: %v", got)
	}

	// Range, date and list rules.
	mustExec(t, db, "CREATE TABLE sh_log (id INT PRIMARY KEY, msg VARCHAR(8))")
	mustExec(t, db, "INSERT INTO sh_log (id, msg) VALUES (5,'a'),(150,'b'),(250,'c'),(399,'d')")
	if got := subTableRows(t, basePort+1, "sh_log_0002"); strings.Join(got, ",") != "250" {
		t.Fatalf("range rule: sh_log_0002 = %v", got)
	}
	if got := queryCol(t, db, "SELECT id FROM sh_log WHERE id BETWEEN 100 AND 260"); sortedJoin(got) != "150,250" {
		t.Fatalf("range scan: %v", got)
	}
	_, err = db.Exec("INSERT INTO sh_log (id, msg) VALUES (400, 'x')")
	wantErrContains(t, "past the last range", err, 1526, "out of range") // as MariaDB for a value no partition holds
	mustExec(t, db, "CREATE TABLE sh_ev (ts DATETIME, v INT)")
	mustExec(t, db, "INSERT INTO sh_ev (ts, v) VALUES ('2015-01-15 10:00:00', 1), ('2015-04-01', 2)")
	if got := subTableRows2(t, basePort+1, "sh_ev_201504", "v"); strings.Join(got, ",") != "2" {
		t.Fatalf("date_month: sh_ev_201504 = %v", got)
	}
	if got := queryCol(t, db, "SELECT v FROM sh_ev WHERE ts >= '2015-02-01'"); sortedJoin(got) != "2" {
		t.Fatalf("date range scan: %v", got)
	}
	mustExec(t, db, "CREATE TABLE sh_reg (code INT, v INT)")
	mustExec(t, db, "INSERT INTO sh_reg (code, v) VALUES (1, 10), (3, 30)")
	if got := subTableRows2(t, basePort+1, "sh_reg_0001", "v"); strings.Join(got, ",") != "30" {
		t.Fatalf("list: sh_reg_0001 = %v", got)
	}

	// DROP fans out too.
	mustExec(t, db, "DROP TABLE sh_reg")
	if _, err := direct(t, basePort+1, "shard_e2e").Exec("SELECT 1 FROM sh_reg_0001"); err == nil {
		t.Fatal("DROP TABLE did not reach sh_reg_0001")
	}
}

// Transactions stay on one node: BEGIN opens on the node of the first
// statement; a statement for another node is refused and the transaction
// goes on; ROLLBACK and COMMIT act on that node.
func TestShardTransactions(t *testing.T) {
	ctx := context.Background()
	c := shardUserConnYAML(t, singleMode(shardYAML("%ADDR%")))
	var err error
	mustExecConn(t, c, "BEGIN")
	mustExecConn(t, c, "INSERT INTO sh_user (id, name) VALUES (5, 'five')")         // node2
	_, err = c.ExecContext(ctx, "INSERT INTO sh_user (id, name) VALUES (1, 'one')") // node1
	wantErrContains(t, "second node in a transaction", err, 1235, "transaction is on node node2")
	mustExecConn(t, c, "INSERT INTO sh_user (id, name) VALUES (13, 'thirteen')") // node2 again
	mustExecConn(t, c, "ROLLBACK")
	// A first statement that spans nodes cannot open a transaction: refused,
	// nothing written, the transaction still usable.
	mustExecConn(t, c, "BEGIN")
	_, err = c.ExecContext(ctx, "INSERT INTO sh_user (id, name) VALUES (2, 'two'), (6, 'six')")
	wantErrContains(t, "multi-node first statement", err, 1235, "would touch nodes node1 and node2")
	mustExecConn(t, c, "ROLLBACK")
	if got := subTableRows(t, basePort+1, "sh_user_0006"); len(got) != 0 {
		t.Fatalf("refused multi-node insert left rows: %v", got)
	}
	if got := subTableRows(t, basePort+1, "sh_user_0005"); len(got) != 0 {
		t.Fatalf("rolled back rows are in sh_user_0005: %v", got)
	}
	mustExecConn(t, c, "START TRANSACTION")
	mustExecConn(t, c, "INSERT INTO sh_user (id, name) VALUES (1, 'one'), (9, 'nine')") // node1 only
	var n int
	if err := c.QueryRowContext(ctx, "SELECT COUNT(*) FROM sh_user WHERE id = 9").Scan(&n); err != nil || n != 1 {
		t.Fatalf("read own write in the transaction: %d %v", n, err)
	}
	mustExecConn(t, c, "COMMIT")
	if got := subTableRows(t, basePort, "sh_user_0001"); strings.Join(got, ",") != "1,9" {
		t.Fatalf("committed rows: %v", got)
	}
	// An empty transaction is fine.
	mustExecConn(t, c, "BEGIN")
	mustExecConn(t, c, "COMMIT")
	// A multi-node write outside a transaction still works afterwards.
	r, err := c.ExecContext(ctx, "DELETE FROM sh_user WHERE id IN (1, 9)")
	if err != nil || rowsAffected(r) != 2 {
		t.Fatalf("delete after transactions: %v", err)
	}
}

func queryCol(t *testing.T, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

func sortedJoin(s []string) string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return strings.Join(s, ",")
}

func subTableRows2(t *testing.T, port int, table, col string) []string {
	t.Helper()
	return queryCol(t, direct(t, port, "shard_e2e"), "SELECT CAST("+col+" AS CHAR) FROM "+table+" ORDER BY 1")
}

// Prepared statements route like text ones: planned at PREPARE with their
// ? parameters, sub-tables picked at each EXECUTE from the bound values,
// rows landing where the rule says.
func TestShardPrepared(t *testing.T) {
	setupShardDB(t)
	p := startProxy(t, shardYAML("%ADDR%"))
	db := p.open(t, "ks:ks", "shard_e2e", "") // go-sql-driver prepares every query with arguments
	db.SetMaxOpenConns(4)
	mustExec(t, db, "CREATE TABLE sh_user (id BIGINT PRIMARY KEY, name VARCHAR(32))")
	mustExec(t, db, "CREATE TABLE sh_ev (id INT, ts DATETIME, v VARCHAR(8))")
	mustExec(t, db, "CREATE TABLE plain (id INT PRIMARY KEY)")

	ins, err := db.Prepare("INSERT INTO sh_user (id, name) VALUES (?, ?)")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{1, 2, 5, 12, -1} {
		if _, err := ins.Exec(id, fmt.Sprint("u", id)); err != nil {
			t.Fatalf("prepared insert %d: %v", id, err)
		}
	}
	ins.Close()
	// A multi-row prepared INSERT split across sub-tables: each sub-table
	// gets its own rows' parameters.
	r, err := db.Exec("INSERT INTO sh_user (id, name) VALUES (?, ?), (?, ?), (?, ?)", 9, "u9", 6, "u6", 17, "u17")
	if err != nil {
		t.Fatalf("split prepared insert: %v", err)
	}
	if n, _ := r.RowsAffected(); n != 3 {
		t.Fatalf("split insert affected %d, want 3", n)
	}
	want := map[string]string{"sh_user_0001": "1,17,9", "sh_user_0002": "2", "sh_user_0005": "5", "sh_user_0004": "12",
		"sh_user_0006": "6", "sh_user_0007": "-1"}
	for i := range 8 {
		name := fmt.Sprintf("sh_user_%04d", i)
		port := basePort
		if i >= 4 {
			port = basePort + 1
		}
		if got := sortedJoin(subTableRows(t, port, name)); got != sortedJoin(strings.Split(want[name], ",")) && !(got == "" && want[name] == "") {
			t.Errorf("%s holds %q, want %q", name, got, want[name])
		}
	}
	sel, err := db.Prepare("SELECT name FROM sh_user WHERE id = ?")
	if err != nil {
		t.Fatal(err)
	}
	defer sel.Close()
	for range 3 { // re-executed on whichever pooled connection: same answers
		for _, id := range []int64{1, 2, 5, 6, 9, 12, 17, -1} {
			var name string
			if err := sel.QueryRow(id).Scan(&name); err != nil || name != fmt.Sprint("u", id) {
				t.Fatalf("prepared point read %d: %q %v", id, name, err)
			}
		}
	}
	if err := sel.QueryRow(3).Scan(new(string)); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("missing id: %v, want no rows", err)
	}
	// IN across both nodes and a scan of every sub-table: binary rows of
	// every leg relayed as one result set.
	rows := func(q string, args ...any) string {
		t.Helper()
		return sortedJoin(queryCol(t, db, q, args...))
	}
	if got := rows("SELECT id FROM sh_user WHERE id IN (?, ?, ?, ?)", 1, 5, 12, 100); got != "1,12,5" {
		t.Fatalf("prepared IN across nodes: %s", got)
	}
	if got := rows("SELECT id FROM sh_user WHERE name <> ?", "zzz"); got != "-1,1,12,17,2,5,6,9" {
		t.Fatalf("prepared scan: %s", got)
	}
	// UPDATE and DELETE by key; the key's value picks the sub-table.
	if r := mustExec(t, db, "UPDATE sh_user SET name = ? WHERE id = ?", "twelve", 12); rowsAffected(r) != 1 {
		t.Fatal("prepared update affected != 1")
	}
	if got := subTableRows2(t, basePort+1, "sh_user_0004", "name"); strings.Join(got, ",") != "twelve" {
		t.Fatalf("update landed wrong: %v", got)
	}
	if r := mustExec(t, db, "DELETE FROM sh_user WHERE id IN (?, ?)", 2, 6); rowsAffected(r) != 2 {
		t.Fatal("prepared delete affected != 2")
	}
	if got := rows("SELECT id FROM sh_user WHERE id >= ?", 0); got != "1,12,17,5,9" {
		t.Fatalf("after delete: %s", got)
	}
	// Date rule: a DATETIME parameter routes by month.
	mustExec(t, db, "INSERT INTO sh_ev (id, ts, v) VALUES (?, ?, ?)", 1, time.Date(2015, 3, 9, 10, 0, 0, 0, time.UTC), "mar")
	mustExec(t, db, "INSERT INTO sh_ev (id, ts, v) VALUES (?, ?, ?)", 2, "2015-01-20 08:00:00", "jan")
	if got := subTableRows(t, basePort+1, "sh_ev_201503"); strings.Join(got, ",") != "1" {
		t.Fatalf("sh_ev_201503: %v", got)
	}
	if got := subTableRows(t, basePort, "sh_ev_201501"); strings.Join(got, ",") != "2" {
		t.Fatalf("sh_ev_201501: %v", got)
	}
	if got := rows("SELECT v FROM sh_ev WHERE ts BETWEEN ? AND ?", "2015-03-01", "2015-03-31"); got != "mar" {
		t.Fatalf("prepared date range: %s", got)
	}
	// Refusals come at PREPARE (plan) or EXECUTE (values) with 1235.
	_, err = db.Prepare("UPDATE sh_user SET id = ? WHERE id = ?")
	wantErrContains(t, "prepared update of the shard key", err, 1235, "shard key")
	_, err = db.Exec("INSERT INTO sh_user (id, name) VALUES (?, ?)", nil, "null key")
	wantErrContains(t, "NULL shard key", err, 1235, "NULL")
	// A transaction reaches a second node (transaction_mode xa, the
	// default); its rollback undoes both.
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("UPDATE sh_user SET name = ? WHERE id = ?", "tx", 1); err != nil {
		t.Fatal(err)
	}
	if _, err = tx.Exec("UPDATE sh_user SET name = ? WHERE id = ?", "tx", 12); err != nil {
		t.Fatalf("second node in a transaction: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if got := subTableRows2(t, basePort, "sh_user_0001", "name"); strings.Join(got, ",") != "u1,u17,u9" {
		t.Fatalf("rolled back prepared update visible: %v", got)
	}
	// PREPARE itself opens nothing: a transaction whose first statement
	// is prepared on node1 (its first sub-table) but runs on node2 is on
	// node2.
	tx, err = db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("UPDATE sh_user SET name = ? WHERE id = ?", "tx2", 12); err != nil {
		t.Fatalf("first statement of a transaction on node2: %v", err)
	}
	if _, err = tx.Exec("UPDATE sh_user SET name = ? WHERE id = ?", "tx2", 1); err != nil {
		t.Fatalf("node1 after node2 in a transaction: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := subTableRows2(t, basePort+1, "sh_user_0004", "name"); strings.Join(got, ",") != "tx2" {
		t.Fatalf("committed prepared update on node2: %v", got)
	}
	if got := subTableRows2(t, basePort, "sh_user_0001", "name"); !slices.Contains(got, "tx2") {
		t.Fatalf("committed prepared update on node1: %v", got)
	}
	// A multi-statement batch naming a sharded table runs statement by
	// statement (not sent whole to one node); one without sharded tables
	// runs as it is.
	multi := p.open(t, "ks:ks", "shard_e2e", "multiStatements=true")
	mustExec(t, multi, "UPDATE sh_user SET name = 'm' WHERE id = 1; SELECT 1")
	if got := subTableRows2(t, basePort, "sh_user_0001", "name"); !slices.Contains(got, "m") {
		t.Fatalf("a batch's update on node1: %v", got)
	}
	mustExec(t, multi, "INSERT INTO plain VALUES (1); DELETE FROM plain WHERE id = 1")
	// Unsharded tables in a sharded schema: default node.
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM plain WHERE id > ?", 0).Scan(&n); err != nil || n != 0 {
		t.Fatalf("prepared on plain: %d %v", n, err)
	}
	// EXPLAIN SHARD shows the same routing for the text form.
	var node, sub, stmt string
	if err := db.QueryRow("EXPLAIN SHARD SELECT name FROM sh_user WHERE id = 12").Scan(&node, &sub, &stmt); err != nil || sub != "sh_user_0004" {
		t.Fatalf("explain: %s %s %s %v", node, sub, stmt, err)
	}
}

func rowsAffected(r sql.Result) int64 {
	n, _ := r.RowsAffected()
	return n
}

// PREPARE / EXECUTE USING / DEALLOCATE in SQL route like the binary kind:
// the user variables' values pick the sub-tables.
func TestShardTextPrepare(t *testing.T) {
	ctx := context.Background()
	c := shardUserConn(t)
	var err error
	mustExecConn(t, c, "PREPARE ins FROM 'INSERT INTO sh_user (id, name) VALUES (?, ?)'")
	for _, id := range []int{3, 6, 11} {
		mustExecConn(t, c, fmt.Sprintf("SET @id = %d, @name = 'n%d'", id, id))
		mustExecConn(t, c, "EXECUTE ins USING @id, @name")
	}
	if got := subTableRows(t, basePort, "sh_user_0003"); sortedJoin(got) != "11,3" {
		t.Fatalf("sh_user_0003: %v", got)
	}
	if got := subTableRows(t, basePort+1, "sh_user_0006"); strings.Join(got, ",") != "6" {
		t.Fatalf("sh_user_0006: %v", got)
	}
	mustExecConn(t, c, "SET @q = 'SELECT name FROM sh_user WHERE id = ?'")
	mustExecConn(t, c, "PREPARE sel FROM @q")
	mustExecConn(t, c, "SET @k = 6")
	var name string
	if err := c.QueryRowContext(ctx, "EXECUTE sel USING @k").Scan(&name); err != nil || name != "n6" {
		t.Fatalf("EXECUTE sel: %q %v", name, err)
	}
	// A string variable stays a string: quoted in the rewritten statement.
	mustExecConn(t, c, "SET @s = 'n11'")
	mustExecConn(t, c, "PREPARE byname FROM 'SELECT id FROM sh_user WHERE name = ?'")
	var id int
	if err := c.QueryRowContext(ctx, "EXECUTE byname USING @s").Scan(&id); err != nil || id != 11 {
		t.Fatalf("EXECUTE byname: %d %v", id, err)
	}
	_, err = c.ExecContext(ctx, "EXECUTE sel USING @k, @k")
	wantErrContains(t, "wrong parameter count", err, 1210, "EXECUTE")
	mustExecConn(t, c, "DEALLOCATE PREPARE sel")
	_, err = c.ExecContext(ctx, "EXECUTE sel USING @k")
	wantErrContains(t, "deallocated statement", err, 1243, "")
}

// shardUserConn starts the shard proxy on a fresh shard_e2e with sh_user
// created through it, and returns one client connection.
func shardUserConn(t *testing.T) *sql.Conn {
	t.Helper()
	return shardUserConnYAML(t, shardYAML("%ADDR%"))
}

// singleMode is yaml (shardYAML's) with transaction_mode single: a
// transaction stays on its first node.
func singleMode(yaml string) string {
	return strings.Replace(yaml, "    default: node1\n", "    default: node1\n    transaction_mode: single\n", 1)
}

// shardUserConnYAML is shardUserConn with another config.
func shardUserConnYAML(t *testing.T, yaml string) *sql.Conn {
	t.Helper()
	setupShardDB(t)
	p := startProxy(t, yaml)
	db := p.open(t, "ks:ks", "shard_e2e", "")
	mustExec(t, db, "CREATE TABLE sh_user (id BIGINT PRIMARY KEY, name VARCHAR(32))")
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Autocommit is session state replicated to whichever connection serves
// the session, not a pin: with it off, each transaction opens on the node
// of its first statement and, once committed or rolled back, the next may
// open on another node; statements that would open transactions on two
// nodes at once are refused, saying why.
func TestShardAutocommitOff(t *testing.T) {
	ctx := context.Background()
	c := shardUserConnYAML(t, singleMode(shardYAML("%ADDR%")))
	mustExecConn(t, c, "SET autocommit = 0")
	mustExecConn(t, c, "INSERT INTO sh_user (id, name) VALUES (5, 'five')") // node2: opens a transaction there
	_, err := c.ExecContext(ctx, "INSERT INTO sh_user (id, name) VALUES (1, 'one')")
	wantErrContains(t, "node1 inside node2's implicit transaction", err, 1235, "transaction is on node node2")
	if got := subTableRows(t, basePort+1, "sh_user_0005"); len(got) != 0 {
		t.Fatalf("uncommitted row visible outside the session: %v", got)
	}
	mustExecConn(t, c, "ROLLBACK")
	// The next transaction may open on node1.
	mustExecConn(t, c, "INSERT INTO sh_user (id, name) VALUES (1, 'one')")
	if got := subTableRows(t, basePort, "sh_user_0001"); len(got) != 0 {
		t.Fatalf("uncommitted row visible outside the session: %v", got)
	}
	mustExecConn(t, c, "COMMIT")
	if got := subTableRows(t, basePort, "sh_user_0001"); strings.Join(got, ",") != "1" {
		t.Fatalf("committed rows on node1: %v", got)
	}
	if got := subTableRows(t, basePort+1, "sh_user_0005"); len(got) != 0 {
		t.Fatalf("rolled back row on node2: %v", got)
	}
	var ac int
	if err := c.QueryRowContext(ctx, "SELECT @@autocommit").Scan(&ac); err != nil || ac != 0 {
		t.Fatalf("@@autocommit = %d, %v; want 0", ac, err)
	}
	mustExecConn(t, c, "COMMIT")
	_, err = c.ExecContext(ctx, "DELETE FROM sh_user WHERE id IN (1, 5)")
	wantErrContains(t, "a two-node write with autocommit off", err, 1235, "with autocommit off")
	// A read over both nodes, no transaction open yet, reads as of now
	// (as DB-API drivers and ORMs, autocommit off by default, need)...
	var n int
	if err := c.QueryRowContext(ctx, "SELECT COUNT(*) FROM sh_user").Scan(&n); err != nil || n != 1 {
		t.Fatalf("a read over both nodes with autocommit off: %d, %v", n, err)
	}
	if got := queryColConn(t, c, "SELECT id FROM sh_user ORDER BY id", 0); strings.Join(got, ",") != "1" {
		t.Fatalf("a merged read with autocommit off: %v", got)
	}
	// ...and leaves the session's autocommit off, with no transaction.
	if err := c.QueryRowContext(ctx, "SELECT @@autocommit").Scan(&ac); err != nil || ac != 0 {
		t.Fatalf("@@autocommit after the read = %d, %v; want 0", ac, err)
	}
	// Inside a transaction it is refused.
	mustExecConn(t, c, "INSERT INTO sh_user (id, name) VALUES (2, 'two')")
	err = c.QueryRowContext(ctx, "SELECT COUNT(*) FROM sh_user").Scan(&n)
	wantErrContains(t, "a read over both nodes inside a transaction", err, 1235, "inside a transaction")
	mustExecConn(t, c, "ROLLBACK")
	mustExecConn(t, c, "SET autocommit = 1")
	if r, err := c.ExecContext(ctx, "DELETE FROM sh_user WHERE id IN (1, 5)"); err != nil || rowsAffected(r) != 1 {
		t.Fatalf("two-node delete with autocommit on: %v", err)
	}
}
