package e2e

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyshard/keyshard/proxy/engine"
)

// A write that touches several nodes commits on all of them or on none,
// as one statement does on one server: a multi-row INSERT with a duplicate
// on one node leaves no row anywhere; one that succeeds leaves all.
func TestShardAtomicWrites(t *testing.T) {
	setupShardDB(t)
	p := startProxy(t, shardYAML("%ADDR%"))
	db := p.open(t, "ks:ks", "shard_e2e", "")
	mustExec(t, db, "CREATE TABLE sh_user (id BIGINT PRIMARY KEY, name VARCHAR(32))")
	mustExec(t, db, "INSERT INTO sh_user (id, name) VALUES (1, 'one')")
	// 4, 5, 12 on node2, 1 (a duplicate) on node1.
	_, err := db.Exec("INSERT INTO sh_user (id, name) VALUES (4, 'd'), (5, 'e'), (1, 'dup-on-node1'), (12, 'l')")
	wantErrContains(t, "a duplicate on one node", err, 1062, "nothing was changed")
	if got := queryCol(t, db, "SELECT id FROM sh_user ORDER BY id"); strings.Join(got, ",") != "1" {
		t.Fatalf("after a failed multi-node INSERT: %v, want only 1", got)
	}
	// Two sub-tables of one node: a local transaction, same outcome.
	_, err = db.Exec("INSERT INTO sh_user (id, name) VALUES (0, 'zero'), (1, 'dup'), (2, 'two')")
	wantErrContains(t, "a duplicate on one node's second sub-table", err, 1062, "nothing was changed")
	if got := queryCol(t, db, "SELECT id FROM sh_user ORDER BY id"); strings.Join(got, ",") != "1" {
		t.Fatalf("after a failed one-node INSERT: %v, want only 1", got)
	}
	r, err := db.Exec("INSERT INTO sh_user (id, name) VALUES (4, 'd'), (5, 'e'), (6, 'f'), (12, 'l'), (3, 'c')")
	if err != nil || rowsAffected(r) != 5 {
		t.Fatalf("multi-node INSERT: %v", err)
	}
	r, err = db.Exec("UPDATE sh_user SET name = CONCAT(name, '!')")
	if err != nil || rowsAffected(r) != 6 {
		t.Fatalf("scatter UPDATE: %v", err)
	}
	if got := queryCol(t, db, "SELECT name FROM sh_user ORDER BY id"); strings.Join(got, ",") != "one!,c!,d!,e!,f!,l!" {
		t.Fatalf("rows: %v", got)
	}
	// No branch is left prepared on either node.
	noPreparedBranches(t)
	// Counted: 2 two-phase commits (INSERT, UPDATE), 1 rollback (the
	// one-node INSERT was a local transaction).
	m := scrape(t, p)
	if c, r := metricValue(m, "keyshard_xa_commits_total"), metricValue(m, "keyshard_xa_rollbacks_total"); c != 2 || r != 1 {
		t.Errorf("keyshard_xa_commits_total %v, keyshard_xa_rollbacks_total %v; want 2 and 1", c, r)
	}
	// All or nothing, local transactions included: the one-node INSERT's
	// rollback counts there.
	if c, r := metricValue(m, "keyshard_atomic_commits_total"), metricValue(m, "keyshard_atomic_rollbacks_total"); c != 2 || r != 2 {
		t.Errorf("keyshard_atomic_commits_total %v, keyshard_atomic_rollbacks_total %v; want 2 and 2", c, r)
	}
	mustExec(t, db, "INSERT INTO sh_user (id, name) VALUES (16, 'p'), (17, 'q')") // sh_user_0000 and _0001: one node
	if c := metricValue(scrape(t, p), "keyshard_atomic_commits_total"); c != 3 {
		t.Errorf("keyshard_atomic_commits_total after a one-node write over two sub-tables: %v, want 3", c)
	}
}

// Recovery finishes prepared branches left behind by a keyshard that died
// between PREPARE and COMMIT: by the decision recorded on the log node,
// commit; with no decision, past xa_prepared_timeout, roll back.
func TestXARecovery(t *testing.T) {
	setupShardDB(t)
	ctx := context.Background()
	node1, node2 := direct(t, basePort, "shard_e2e"), direct(t, basePort+1, "shard_e2e")
	mustExec(t, node2, "CREATE TABLE xa_t (id INT PRIMARY KEY)")
	mustExec(t, node1, "CREATE DATABASE IF NOT EXISTS keyshard")
	mustExec(t, node1, "CREATE TABLE IF NOT EXISTS keyshard.xa_log (gtrid VARCHAR(64) NOT NULL PRIMARY KEY, outcome CHAR(1) NOT NULL, "+
		"decided_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB")
	old := time.Now().Add(-time.Hour).UnixMilli()
	commitXID, rollbackXID := fmt.Sprintf("ks-deadbeef-%d-1-node1", old), fmt.Sprintf("ks-deadbeef-%d-2-node1", old)
	// Two prepared branches on node2, as a dead keyshard leaves them.
	for i, xid := range []string{commitXID, rollbackXID} {
		c, err := node2.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{fmt.Sprintf("XA START '%s','node2'", xid), fmt.Sprintf("INSERT INTO xa_t VALUES (%d)", i+1),
			fmt.Sprintf("XA END '%s','node2'", xid), fmt.Sprintf("XA PREPARE '%s','node2'", xid)} {
			mustExecConn(t, c, q)
		}
		_ = c.Raw(func(any) error { return driver.ErrBadConn }) // closes it: the prepared branch stays
		c.Close()
	}
	mustExec(t, node1, fmt.Sprintf("INSERT INTO keyshard.xa_log (gtrid, outcome) VALUES ('%s', 'C')", commitXID))
	t.Cleanup(func() {
		for _, xid := range []string{commitXID, rollbackXID} {
			_, _ = node2.Exec(fmt.Sprintf("XA ROLLBACK '%s','node2'", xid))
		}
	})
	p := startProxy(t, shardYAML("%ADDR%")+"xa_recover_interval: 200ms\nxa_prepared_timeout: 1s\n")
	_ = p
	deadline := time.Now().Add(10 * time.Second)
	for {
		rows := allRows(t, node2, "XA RECOVER")
		ids := queryCol(t, node2, "SELECT id FROM xa_t ORDER BY id")
		if len(rows) == 0 {
			if strings.Join(ids, ",") != "1" {
				t.Fatalf("after recovery xa_t holds %v; want 1 (committed by its decision), not 2 (rolled back)", ids)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("branches still prepared after 10s: %q", rows)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var outcome string
	if err := node1.QueryRow(fmt.Sprintf("SELECT outcome FROM keyshard.xa_log WHERE gtrid = '%s'", rollbackXID)).Scan(&outcome); err != nil || outcome != "R" {
		t.Errorf("the rollback decision recorded for %s: %q, %v; want R", rollbackXID, outcome, err)
	}
}

// A backend that dies during PREPARE (here: stopped just before it) leads
// to rollback everywhere: the node already prepared rolls back, the dead
// one never had the branch prepared, nothing of the write is left.
func TestXABackendDiesAtPrepare(t *testing.T) {
	setupShardDB(t)
	p := startProxy(t, shardYAML("%ADDR%"))
	db := p.open(t, "ks:ks", "shard_e2e", "")
	mustExec(t, db, "CREATE TABLE sh_user (id BIGINT PRIMARY KEY, name VARCHAR(32))")
	port := fmt.Sprint(basePort + 1)
	var stopped atomic.Bool // set on the session's goroutine
	f := func(step, node string) {
		if step == "prepare" && node == "node2" && stopped.CompareAndSwap(false, true) {
			if out, err := backends("stop", port); err != nil {
				t.Errorf("stopping node2: %v\n%s", err, out)
			}
		}
	}
	engine.Failpoint.Store(&f)
	t.Cleanup(func() {
		engine.Failpoint.Store(nil)
		if out, err := backends("start", port); err != nil {
			t.Errorf("starting node2 again: %v\n%s", err, out)
		}
	})
	_, err := db.Exec("INSERT INTO sh_user (id, name) VALUES (1, 'node1'), (5, 'node2')")
	if err == nil || !stopped.Load() {
		t.Fatalf("INSERT with node2 dying at PREPARE: %v (node2 stopped: %v); want an error", err, stopped.Load())
	}
	engine.Failpoint.Store(nil)
	if out, err := backends("start", port); err != nil {
		t.Fatalf("starting node2 again: %v\n%s", err, out)
	}
	noPreparedBranches(t)
	if got := subTableRows(t, basePort, "sh_user_0001"); len(got) != 0 {
		t.Errorf("node1 kept the row of the failed write: %v", got)
	}
	if got := subTableRows(t, basePort+1, "sh_user_0005"); len(got) != 0 {
		t.Errorf("node2 kept the row of the failed write: %v", got)
	}
}

// A transaction reaches every node it needs (transaction_mode xa, the
// default): reads see its own writes on every node, ROLLBACK undoes all,
// COMMIT commits all in two phases; what cannot be done over several
// nodes (savepoints, LOCK TABLES' implicit commit) is refused with the transaction
// kept open; a client that disconnects leaves nothing behind.
func TestShardXATransactions(t *testing.T) {
	ctx := context.Background()
	c := shardUserConn(t)
	mustExecConn(t, c, "BEGIN")
	mustExecConn(t, c, "INSERT INTO sh_user (id, name) VALUES (5, 'five')") // node2
	mustExecConn(t, c, "INSERT INTO sh_user (id, name) VALUES (1, 'one')")  // node1
	var n int
	if err := c.QueryRowContext(ctx, "SELECT COUNT(*) FROM sh_user WHERE id IN (1, 5)").Scan(&n); err != nil || n != 2 {
		t.Fatalf("reading the transaction's own writes on two nodes: %d, %v", n, err)
	}
	_, err := c.ExecContext(ctx, "SAVEPOINT s1")
	wantErrContains(t, "a savepoint", err, 1235, "savepoints in a transaction over several nodes")
	// (A DDL commits it implicitly, in two phases: ddl_autocommit_test.go.)
	_, err = c.ExecContext(ctx, "LOCK TABLES sh_user_lock READ")
	wantErrContains(t, "LOCK TABLES", err, 1235, "COMMIT first")
	mustExecConn(t, c, "ROLLBACK")
	if a, b := subTableRows(t, basePort, "sh_user_0001"), subTableRows(t, basePort+1, "sh_user_0005"); len(a)+len(b) != 0 {
		t.Fatalf("after ROLLBACK: %v %v", a, b)
	}
	mustExecConn(t, c, "START TRANSACTION")
	mustExecConn(t, c, "INSERT INTO sh_user (id, name) VALUES (5, 'five')")
	mustExecConn(t, c, "INSERT INTO sh_user (id, name) VALUES (1, 'one')")
	mustExecConn(t, c, "COMMIT")
	if a, b := subTableRows(t, basePort, "sh_user_0001"), subTableRows(t, basePort+1, "sh_user_0005"); strings.Join(a, ",") != "1" || strings.Join(b, ",") != "5" {
		t.Fatalf("after COMMIT: %v %v", a, b)
	}
	// Autocommit off: each transaction opens where its first statement
	// runs and reaches the others.
	mustExecConn(t, c, "SET autocommit = 0")
	mustExecConn(t, c, "UPDATE sh_user SET name = 'x' WHERE id = 1")
	mustExecConn(t, c, "UPDATE sh_user SET name = 'x' WHERE id = 5")
	mustExecConn(t, c, "COMMIT")
	wantColConn(t, c, "SELECT name FROM sh_user WHERE id IN (1, 5)", "x,x", "after an autocommit-off transaction over two nodes")
	mustExecConn(t, c, "COMMIT")
	// With autocommit off, a write over two sub-tables of one node is part
	// of the open transaction: ROLLBACK undoes it.
	mustExecConn(t, c, "INSERT INTO sh_user (id, name) VALUES (2, 'two'), (3, 'three')")
	mustExecConn(t, c, "ROLLBACK")
	wantColConn(t, c, "SELECT COUNT(*) FROM sh_user WHERE id IN (2, 3)", "0", "rolled back one-node write with autocommit off")
	mustExecConn(t, c, "COMMIT")
	mustExecConn(t, c, "SET autocommit = 1")
	// What would end the transaction on one node only is refused.
	mustExecConn(t, c, "BEGIN")
	mustExecConn(t, c, "UPDATE sh_user SET name = 'y' WHERE id = 1")
	mustExecConn(t, c, "UPDATE sh_user SET name = 'y' WHERE id = 5")
	_, err = c.ExecContext(ctx, "COMMIT AND CHAIN")
	wantErrContains(t, "COMMIT AND CHAIN", err, 1235, "AND CHAIN")
	mustExecConn(t, c, "ROLLBACK")
	// Inside a transaction a write over several nodes that fails leaves
	// nothing of itself (the transaction goes on).
	mustExecConn(t, c, "BEGIN")
	mustExecConn(t, c, "INSERT INTO sh_user (id, name) VALUES (9, 'nine')")
	_, err = c.ExecContext(ctx, "INSERT INTO sh_user (id, name) VALUES (6, 'six'), (1, 'dup')")
	wantErrContains(t, "a failing write over two nodes in a transaction", err, 1062, "nothing was changed")
	wantColConn(t, c, "SELECT COUNT(*) FROM sh_user WHERE id = 6", "0", "the failed statement's row on the other node is in the transaction")
	mustExecConn(t, c, "COMMIT")
	wantColConn(t, c, "SELECT id FROM sh_user WHERE id IN (6, 9)", "9", "after COMMIT, want only 9")
	mustExecConn(t, c, "DELETE FROM sh_user WHERE id = 9")
	// A transaction whose first statement touches two nodes.
	mustExecConn(t, c, "BEGIN")
	mustExecConn(t, c, "UPDATE sh_user SET name = 'z' WHERE id IN (1, 5)")
	mustExecConn(t, c, "COMMIT")
	wantColConn(t, c, "SELECT name FROM sh_user WHERE id IN (1, 5)", "z,z", "after a transaction whose first statement touched two nodes")
	mustExecConn(t, c, "BEGIN")
	mustExecConn(t, c, "UPDATE sh_user SET name = 'x' WHERE id IN (1, 5)")
	mustExecConn(t, c, "ROLLBACK")
	wantColConn(t, c, "SELECT name FROM sh_user WHERE id IN (1, 5)", "z,z", "after rolling back a transaction whose first statement touched two nodes")
	mustExecConn(t, c, "UPDATE sh_user SET name = 'x' WHERE id IN (1, 5)")
	// A read-only transaction over two nodes commits without a decision.
	mustExecConn(t, c, "START TRANSACTION READ ONLY")
	wantColConn(t, c, "SELECT name FROM sh_user WHERE id = 1", "x", "read-only transaction, node1")
	wantColConn(t, c, "SELECT name FROM sh_user WHERE id = 5", "x", "read-only transaction, node2")
	mustExecConn(t, c, "COMMIT")
	// A client that goes away mid-transaction leaves nothing.
	mustExecConn(t, c, "BEGIN")
	mustExecConn(t, c, "DELETE FROM sh_user WHERE id = 1")
	mustExecConn(t, c, "DELETE FROM sh_user WHERE id = 5")
	_ = c.Raw(func(any) error { return driver.ErrBadConn })
	c.Close()
	waitFor(t, "the abandoned transaction to roll back", func() bool {
		a, b := subTableRows(t, basePort, "sh_user_0001"), subTableRows(t, basePort+1, "sh_user_0005")
		return len(a) == 1 && len(b) == 1
	})
	noPreparedBranches(t)
}

// A transaction's characteristics reach its XA branches: SET TRANSACTION
// ISOLATION LEVEL SERIALIZABLE (for the next transaction only) makes the
// branch on node2 read with shared locks too, which a direct writer there
// then waits for; the next transaction is REPEATABLE READ again on both.
func TestXABranchIsolation(t *testing.T) {
	c := shardUserConn(t)
	mustExecConn(t, c, "INSERT INTO sh_user (id, name) VALUES (1, 'one'), (5, 'five')")
	node2 := direct(t, basePort+1, "shard_e2e")
	node2.SetMaxOpenConns(1)
	mustExec(t, node2, "SET SESSION innodb_lock_wait_timeout = 1")
	writeOnNode2 := func() error {
		_, err := node2.Exec("UPDATE sh_user_0005 SET name = 'direct' WHERE id = 5")
		return err
	}
	mustExecConn(t, c, "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
	mustExecConn(t, c, "BEGIN")
	wantColConn(t, c, "SELECT name FROM sh_user WHERE id = 1", "one", "SERIALIZABLE transaction, node1")
	wantColConn(t, c, "SELECT name FROM sh_user WHERE id = 5", "five", "SERIALIZABLE transaction, its branch on node2")
	wantErrContains(t, "a write on node2 while a SERIALIZABLE branch has read the row", writeOnNode2(), 1205, "Lock wait timeout")
	mustExecConn(t, c, "COMMIT")
	// Used up: the next transaction's branch reads without locks.
	mustExecConn(t, c, "BEGIN")
	wantColConn(t, c, "SELECT name FROM sh_user WHERE id = 1", "one", "next transaction, node1")
	wantColConn(t, c, "SELECT name FROM sh_user WHERE id = 5", "five", "next transaction, node2")
	if err := writeOnNode2(); err != nil {
		t.Fatalf("a write on node2 beside a REPEATABLE READ branch: %v", err)
	}
	mustExecConn(t, c, "COMMIT")
	// SET TRANSACTION READ ONLY is for the next transaction only, on
	// every node: the one after writes on both.
	mustExecConn(t, c, "SET TRANSACTION READ ONLY")
	mustExecConn(t, c, "BEGIN")
	wantColConn(t, c, "SELECT name FROM sh_user WHERE id = 1", "one", "READ ONLY transaction, node1")
	_, err := c.ExecContext(context.Background(), "UPDATE sh_user SET name = 'ro' WHERE id = 5")
	wantErrContains(t, "a write on the READ ONLY transaction's branch", err, 1792, "READ ONLY")
	mustExecConn(t, c, "ROLLBACK")
	mustExecConn(t, c, "BEGIN")
	mustExecConn(t, c, "UPDATE sh_user SET name = 'rw' WHERE id = 1")
	mustExecConn(t, c, "UPDATE sh_user SET name = 'rw' WHERE id = 5")
	mustExecConn(t, c, "COMMIT")
	wantColConn(t, c, "SELECT name FROM sh_user WHERE id IN (1, 5)", "rw,rw", "the transaction after the READ ONLY one")
}

// Inside a transaction over several nodes a SELECT over several
// sub-tables of each node is merged on the transaction's own connections
// and sees its writes; one that would hold too many rows ahead fails as a
// statement, and the transaction goes on.
func TestXAMergeInTransaction(t *testing.T) {
	c := shardUserConnYAML(t, shardYAML("%ADDR%")+"max_merge_rows: 20\n")
	ctx := context.Background()
	for i := range 16 {
		mustExecConn(t, c, fmt.Sprintf("INSERT INTO sh_user (id, name) VALUES (%d, 'n%d')", i, i))
	}
	mustExecConn(t, c, "BEGIN")
	mustExecConn(t, c, "DELETE FROM sh_user WHERE id = 3")                                     // node1
	mustExecConn(t, c, "INSERT INTO sh_user (id, name) VALUES (100, 'new'), (101, 'new too')") // node1 and node2
	wantColConn(t, c, "SELECT id FROM sh_user WHERE id < 8 OR id > 99 ORDER BY id DESC LIMIT 4", "101,100,7,6", "an ordered merge in the transaction")
	wantColConn(t, c, "SELECT COUNT(*) FROM sh_user", "17", "COUNT(*) in the transaction")
	wantColConn(t, c, "SELECT name FROM sh_user GROUP BY name HAVING name LIKE 'new%' ORDER BY name", "new,new too", "GROUP BY in the transaction")
	// Prepared (binary protocol), several sub-tables per node.
	var n int
	if err := c.QueryRowContext(ctx, "SELECT COUNT(*) FROM sh_user WHERE id <> ?", 0).Scan(&n); err != nil || n != 16 {
		t.Fatalf("prepared COUNT(*) in the transaction: %d, %v", n, err)
	}
	// With 30 rows more, the sub-tables a node's connection reads ahead
	// hold more than max_merge_rows (20).
	for i := 200; i < 230; i++ {
		mustExecConn(t, c, fmt.Sprintf("INSERT INTO sh_user (id, name) VALUES (%d, 'bulk')", i))
	}
	_, err := c.ExecContext(ctx, "SELECT id FROM sh_user ORDER BY name")
	wantErrContains(t, "a merge holding too many rows ahead", err, 1038, "inside a transaction reads the sub-tables of a node one after the other")
	wantColConn(t, c, "SELECT COUNT(*) FROM sh_user WHERE id IN (3, 100, 101)", "2", "the transaction after the failed merge")
	mustExecConn(t, c, "ROLLBACK")
	wantColConn(t, c, "SELECT COUNT(*) FROM sh_user", "16", "after ROLLBACK")
}

// A deadlock that makes the transaction's first node roll it back rolls it
// back on every node at once, as one server would: the client gets 1213,
// the branch on node2 lets go of its locks, and the connection goes on.
func TestXADeadlockOnFirstNode(t *testing.T) {
	c := shardUserConn(t)
	ctx := context.Background()
	mustExecConn(t, c, "INSERT INTO sh_user (id, name) VALUES (1, 'one'), (9, 'nine'), (5, 'five')")
	node1 := direct(t, basePort, "shard_e2e")
	d, err := node1.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	mustExecConn(t, c, "BEGIN")
	mustExecConn(t, c, "UPDATE sh_user SET name = 'c' WHERE id = 1") // node1, sh_user_0001: the first node
	mustExecConn(t, c, "UPDATE sh_user SET name = 'c' WHERE id = 5") // node2: a branch
	// d, a heavier transaction on node1 (InnoDB picks the lighter victim),
	// holds id 9 and will want id 1.
	mustExecConn(t, d, "BEGIN")
	mustExecConn(t, d, "UPDATE sh_user_0001 SET name = 'd' WHERE id = 9")
	mustExecConn(t, d, "INSERT INTO sh_user_0002 (id, name) SELECT seq * 8 + 2, 'pad' FROM seq_1_to_200")
	errc := make(chan error, 1)
	go func() {
		_, err := c.ExecContext(ctx, "UPDATE sh_user SET name = 'c' WHERE id = 9")
		errc <- err
	}()
	// Sent: waiting for d's lock, or on its way to it. (Under load MariaDB
	// was seen to show the statement as Updating in a RUNNING transaction
	// for seconds before listing the wait; d's next UPDATE closes the
	// cycle either way, and InnoDB picks the lighter transaction.)
	waitFor(t, "keyshard's statement to reach node1", func() bool {
		return len(queryCol(t, node1, "SELECT 1 FROM information_schema.innodb_lock_waits")) > 0 ||
			len(queryCol(t, node1, "SELECT 1 FROM information_schema.PROCESSLIST WHERE INFO LIKE 'UPDATE `sh_user_0001` SET `name`=%WHERE `id`=9'")) > 0
	})
	if _, err := d.ExecContext(ctx, "UPDATE sh_user_0001 SET name = 'd' WHERE id = 1"); err != nil {
		t.Fatalf("d, the heavier transaction, lost the deadlock: %v", err)
	}
	wantErrContains(t, "the deadlock victim", <-errc, 1213, "Deadlock")
	mustExecConn(t, d, "ROLLBACK")
	// The branch on node2 is gone with its lock: a direct write there
	// does not wait.
	node2 := direct(t, basePort+1, "shard_e2e")
	node2.SetMaxOpenConns(1)
	mustExec(t, node2, "SET SESSION innodb_lock_wait_timeout = 1")
	mustExec(t, node2, "UPDATE sh_user_0005 SET name = 'direct' WHERE id = 5")
	noPreparedBranches(t)
	// The session goes on, outside any transaction.
	wantColConn(t, c, "SELECT name FROM sh_user WHERE id IN (1, 5, 9) ORDER BY id", "one,direct,nine", "after the deadlock")
	mustExecConn(t, c, "BEGIN")
	mustExecConn(t, c, "UPDATE sh_user SET name = 'x' WHERE id = 1")
	mustExecConn(t, c, "UPDATE sh_user SET name = 'x' WHERE id = 5")
	mustExecConn(t, c, "COMMIT")
	wantColConn(t, c, "SELECT name FROM sh_user WHERE id IN (1, 5)", "x,x", "a transaction after the deadlock")
}

// A prepared branch recovery cannot decide yet is in doubt: ADMIN XA and
// GET /api/v1/xa list it, keyshard_xa_in_doubt counts it, and ADMIN XA
// ROLLBACK (or COMMIT) finishes it by hand. Its instance (cafebabe) looks
// alive: a connection here holds its liveness lock on node1, the
// transaction's decision node.
func TestXAInDoubtByHand(t *testing.T) {
	setupShardDB(t)
	ctx := context.Background()
	node2 := direct(t, basePort+1, "shard_e2e")
	mustExec(t, node2, "CREATE TABLE xa_hand (id INT PRIMARY KEY)")
	holdLivenessLock(t, "cafebabe")
	xid := fmt.Sprintf("ks-cafebabe-%d-1-node1", time.Now().UnixMilli())
	c, err := node2.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{fmt.Sprintf("XA START '%s','node2'", xid), "INSERT INTO xa_hand VALUES (7)",
		fmt.Sprintf("XA END '%s','node2'", xid), fmt.Sprintf("XA PREPARE '%s','node2'", xid)} {
		mustExecConn(t, c, q)
	}
	_ = c.Raw(func(any) error { return driver.ErrBadConn })
	c.Close()
	t.Cleanup(func() { _, _ = node2.Exec(fmt.Sprintf("XA ROLLBACK '%s','node2'", xid)) })
	p := startProxy(t, shardYAML("%ADDR%")+"xa_recover_interval: 100ms\nxa_prepared_timeout: 1h\nadmin_users: [ks]\nweb_user: admin\nweb_password: webpw\n")
	db := p.open(t, "ks:ks", "shard_e2e", "")
	waitFor(t, "recovery to count the branch in doubt", func() bool {
		return metricValue(scrape(t, p), "keyshard_xa_in_doubt") == 1
	})
	rows := allRows(t, db, "ADMIN XA")
	if len(rows) != 1 || !strings.HasPrefix(rows[0], xid+"|node2|node2|none|") {
		t.Fatalf("ADMIN XA: %q", rows)
	}
	var listed []map[string]any
	if code := rest(t, p, "GET", "/api/v1/xa", "", true, &listed); code != 200 || len(listed) != 1 || listed[0]["xid"] != xid {
		t.Fatalf("GET /api/v1/xa: %d %v", code, listed)
	}
	r, err := db.Exec(fmt.Sprintf("ADMIN XA ROLLBACK '%s'", xid))
	if err != nil || rowsAffected(r) != 1 {
		t.Fatalf("ADMIN XA ROLLBACK: %v", err)
	}
	if rows := allRows(t, node2, "XA RECOVER"); len(rows) != 0 {
		t.Fatalf("still prepared after ADMIN XA ROLLBACK: %q", rows)
	}
	if got := queryCol(t, node2, "SELECT id FROM xa_hand"); len(got) != 0 {
		t.Fatalf("rolled back by hand, yet xa_hand holds %v", got)
	}
	_, err = db.Exec(fmt.Sprintf("ADMIN XA COMMIT '%s'", xid))
	if err == nil || !strings.Contains(err.Error(), "has no commit decision: only a rollback can finish it safely") {
		t.Fatalf("ADMIN XA COMMIT without a commit decision: %v", err)
	}
}

// noPreparedBranches fails the test if either node holds a prepared XA
// branch once the XA COMMITs that run behind a client's answer (issued
// by another session than the test's direct connection) are done: within
// 5 s, far less than any recovery would take to finish one.
func noPreparedBranches(t *testing.T) {
	t.Helper()
	var rows []string
	port := 0
	start := time.Now()
	for _, port = range []int{basePort, basePort + 1} {
		for rows = allRows(t, direct(t, port, ""), "XA RECOVER"); len(rows) != 0 && time.Since(start) < 5*time.Second; {
			time.Sleep(20 * time.Millisecond)
			rows = allRows(t, direct(t, port, ""), "XA RECOVER")
		}
		if len(rows) != 0 {
			t.Errorf("port %d: prepared branches left: %q", port, rows)
		}
	}
}

// wantColConn fails the test unless the first column of q on c, joined by
// ",", is want; what says what q checks.
func wantColConn(t *testing.T, c *sql.Conn, q, want, what string) {
	t.Helper()
	if got := queryColConn(t, c, q, 0); strings.Join(got, ",") != want {
		t.Fatalf("%s: %v, want %s", what, got, want)
	}
}

// commitCutter relays a backend's connections and, once armed, cuts the
// connection that sends COMMIT: before the server sees it (before), or
// after the server has answered, the answer dropped (!before).
type commitCutter struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	armed  bool
	before bool
	cut    chan struct{}
}

func newCommitCutter(t *testing.T, target string) *commitCutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cc := &commitCutter{ln: ln, target: target, cut: make(chan struct{}, 1)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go cc.relay(c)
		}
	}()
	return cc
}

func (cc *commitCutter) arm(before bool) {
	cc.mu.Lock()
	cc.armed, cc.before = true, before
	cc.mu.Unlock()
}

// take reports whether a COMMIT is to be cut now (disarming).
func (cc *commitCutter) take() (cut, before bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cut, before, cc.armed = cc.armed, cc.before, false
	return cut, before
}

func (cc *commitCutter) relay(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", cc.target)
	if err != nil {
		return
	}
	defer s.Close()
	var dropping atomic.Bool
	answered := make(chan struct{}, 1)
	go func() { // server -> client, until dropping: then the answer is read and dropped
		buf := make([]byte, 64<<10)
		for {
			n, err := s.Read(buf)
			if n > 0 {
				if dropping.Load() {
					answered <- struct{}{}
					return
				}
				if _, werr := c.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	hdr := make([]byte, 4)
	for {
		if _, err := io.ReadFull(c, hdr); err != nil {
			return
		}
		body := make([]byte, int(hdr[0])|int(hdr[1])<<8|int(hdr[2])<<16)
		if _, err := io.ReadFull(c, body); err != nil {
			return
		}
		if string(body) == "\x03COMMIT" {
			if cut, before := cc.take(); cut {
				if !before {
					dropping.Store(true)
					_, _ = s.Write(append(hdr, body...))
					select { // the server's OK: committed, and dropped
					case <-answered:
					case <-time.After(5 * time.Second):
					}
				}
				cc.cut <- struct{}{}
				return
			}
		}
		if _, err := s.Write(append(hdr, body...)); err != nil {
			return
		}
	}
}

// The first node's COMMIT of a transaction over two nodes: when the
// answer is lost after the server committed, keyshard reads the decision
// (committed with it) and commits the branch: the client gets OK. When the
// COMMIT never reached the server, the decision is rollback: every node
// rolls back and the client is told so.
func TestXALostCommitAnswer(t *testing.T) {
	setupShardDB(t)
	cc := newCommitCutter(t, fmt.Sprintf("127.0.0.1:%d", basePort))
	yaml := strings.Replace(shardYAML("%ADDR%"), fmt.Sprintf("master: 127.0.0.1:%d\n", basePort), "master: "+cc.ln.Addr().String()+"\n", 1)
	p := startProxy(t, yaml)
	db := p.open(t, "ks:ks", "shard_e2e", "")
	mustExec(t, db, "CREATE TABLE sh_user (id BIGINT PRIMARY KEY, name VARCHAR(32))")
	mustExec(t, db, "INSERT INTO sh_user (id, name) VALUES (1, 'one'), (5, 'five')")
	ctx := context.Background()
	for _, before := range []bool{false, true} {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mustExecConn(t, c, "BEGIN")
		mustExecConn(t, c, fmt.Sprintf("UPDATE sh_user SET name = 'v%v' WHERE id = 1", before)) // node1: the first node
		mustExecConn(t, c, fmt.Sprintf("UPDATE sh_user SET name = 'v%v' WHERE id = 5", before)) // node2: a branch
		cc.arm(before)
		_, err = c.ExecContext(ctx, "COMMIT")
		<-cc.cut
		if !before {
			if err != nil {
				t.Fatalf("COMMIT whose answer was lost after the server committed: %v", err)
			}
			wantColConn(t, c, "SELECT name FROM sh_user WHERE id IN (1, 5)", "vfalse,vfalse", "after the lost answer")
		} else {
			wantErrContains(t, "COMMIT that never reached node1", err, 1181, "rolled back on every node")
			wantColConn(t, c, "SELECT name FROM sh_user WHERE id IN (1, 5)", "vfalse,vfalse", "after the rolled-back COMMIT")
		}
		c.Close()
		noPreparedBranches(t)
	}
}
