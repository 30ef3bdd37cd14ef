package e2e

import (
	"database/sql"
	"fmt"
	"strconv"
	"testing"
)

// xaStatusVars are the statement counters TestXAStatementsPerTransaction
// reads from the backends.
var xaStatusVars = []string{"Com_xa_start", "Com_xa_end", "Com_xa_prepare", "Com_xa_commit", "Com_xa_rollback",
	"Com_begin", "Com_commit", "Com_do", "Com_insert", "Questions"}

// xaCounters reads xaStatusVars of the server behind db.
func xaCounters(t *testing.T, db *sql.DB) map[string]int64 {
	t.Helper()
	rows, err := db.Query("SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_xa_start', 'Com_xa_end', 'Com_xa_prepare', " +
		"'Com_xa_commit', 'Com_xa_rollback', 'Com_begin', 'Com_commit', 'Com_do', 'Com_insert', 'Questions')")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name, v string
		if err := rows.Scan(&name, &v); err != nil {
			t.Fatal(err)
		}
		out[name], _ = strconv.ParseInt(v, 10, 64)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// What a write over two nodes costs the backends, in statements per
// transaction, counted by the servers (SHOW GLOBAL STATUS deltas around
// n transactions of one client, on a database of this test's own):
//
//   - an autocommit INSERT of a row on each node: the first node runs its
//     part in a local transaction that also records the commit decision
//     (BEGIN, INSERT, the decision INSERT, COMMIT: no XA statement there),
//     the other an XA branch (XA START, INSERT, XA END, XA PREPARE, XA
//     COMMIT): one branch prepared, not two;
//   - a transaction writing on both: no DO 0 on the first node to learn
//     whether its transaction is still open (its last OK says), one
//     branch prepared and committed;
//   - a transaction writing on node1 and only reading on node2: node2's
//     branch ends with XA ROLLBACK, no XA PREPARE nor XA COMMIT, and
//     node1 commits alone, with no decision row.
//
// The statements of each node go out in fewer writes than they are
// (XA START with the branch's first statement, XA END with XA PREPARE);
// the bench (bench/xa.sh) shows what that saves in time.
func TestXAStatementsPerTransaction(t *testing.T) {
	const dbName = "xa_rt_e2e"
	node1, node2 := direct(t, basePort, ""), direct(t, basePort+1, "")
	for _, d := range []*sql.DB{node1, node2} {
		mustExec(t, d, "DROP DATABASE IF EXISTS "+dbName)
		mustExec(t, d, "CREATE DATABASE "+dbName)
	}
	p := startProxy(t, twoNodeYAML("%ADDR%", `      - db: xa_rt_e2e
        table: acct
        key: id
        nodes: [node1, node2]
        type: hash
        locations: [4, 4]
`))
	db := p.open(t, "ks:ks", dbName, "")
	// One client session: its next statement on a node waits for the XA
	// COMMITs that run there behind its last COMMIT's answer.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	mustExec(t, db, "CREATE TABLE acct (id BIGINT PRIMARY KEY, n INT NOT NULL)")
	// id % 8 < 4 on node1, else node2: 1 on node1, 5 on node2.
	mustExec(t, db, "INSERT INTO acct (id, n) VALUES (1, 100), (5, 100)")
	const n = 10
	tx := func(qs ...string) {
		t.Helper()
		txn, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			if _, err := txn.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		if err := txn.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	measure := func(name string, op func(i int)) (d1, d2 map[string]int64) {
		t.Helper()
		b1, b2 := xaCounters(t, node1), xaCounters(t, node2)
		for i := range n {
			op(i)
		}
		// Through the same session, on both nodes: after its XA COMMITs.
		if got := queryCol(t, db, "SELECT COUNT(*) FROM acct"); len(got) != 1 {
			t.Fatalf("%s: COUNT(*): %v", name, got)
		}
		a1, a2 := xaCounters(t, node1), xaCounters(t, node2)
		d1, d2 = map[string]int64{}, map[string]int64{}
		for _, v := range xaStatusVars {
			d1[v], d2[v] = a1[v]-b1[v], a2[v]-b2[v]
		}
		t.Logf("%s, per transaction: node1 %s; node2 %s", name, perTx(d1, n), perTx(d2, n))
		return d1, d2
	}
	want := func(what, node string, got map[string]int64, exp map[string]int64) {
		t.Helper()
		for k, v := range exp {
			if got[k] != v {
				t.Errorf("%s: %s %s = %d over %d transactions, want %d", what, node, k, got[k], n, v)
			}
		}
	}

	d1, d2 := measure("autocommit INSERT over two nodes", func(i int) {
		mustExec(t, db, fmt.Sprintf("INSERT INTO acct (id, n) VALUES (%d, 0), (%d, 0)", 8*(i+1)+2, 8*(i+1)+6))
	})
	want("autocommit INSERT", "node1", d1, map[string]int64{"Com_xa_start": 0, "Com_xa_prepare": 0, "Com_xa_commit": 0,
		"Com_begin": n, "Com_commit": n})
	want("autocommit INSERT", "node2", d2, map[string]int64{"Com_xa_start": n, "Com_xa_end": n, "Com_xa_prepare": n,
		"Com_xa_commit": n, "Com_xa_rollback": 0})

	d1, d2 = measure("transaction writing on two nodes", func(int) {
		tx("UPDATE acct SET n = n - 1 WHERE id = 1", "UPDATE acct SET n = n + 1 WHERE id = 5")
	})
	want("transaction writing on both nodes", "node1", d1, map[string]int64{"Com_xa_start": 0, "Com_xa_prepare": 0, "Com_do": 0,
		"Com_commit": n})
	want("transaction writing on both nodes", "node2", d2, map[string]int64{"Com_xa_start": n, "Com_xa_end": n, "Com_xa_prepare": n,
		"Com_xa_commit": n, "Com_xa_rollback": 0})

	d1, d2 = measure("transaction writing on node1, reading on node2", func(int) {
		tx("UPDATE acct SET n = n - 1 WHERE id = 1", "SELECT n FROM acct WHERE id = 5")
	})
	want("transaction reading on node2", "node1", d1, map[string]int64{"Com_xa_start": 0, "Com_do": 0, "Com_insert": 0,
		"Com_commit": n})
	want("transaction reading on node2", "node2", d2, map[string]int64{"Com_xa_start": n, "Com_xa_end": n, "Com_xa_prepare": 0,
		"Com_xa_commit": 0, "Com_xa_rollback": n})

	// And the data: every transfer landed, on both nodes.
	if got := queryCol(t, db, "SELECT n FROM acct WHERE id IN (1, 5) ORDER BY id"); len(got) != 2 || got[0] != "80" || got[1] != "110" {
		t.Errorf("balances after the transactions: %v, want [80 110]", got)
	}
	noPreparedBranches(t)
}

// perTx formats counter deltas as per-transaction figures.
func perTx(d map[string]int64, n int) string {
	s := ""
	for _, v := range xaStatusVars {
		if d[v] != 0 {
			s += fmt.Sprintf(" %s %.1f", v, float64(d[v])/float64(n))
		}
	}
	return s
}
