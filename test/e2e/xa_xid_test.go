package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// A transaction whose branch could not open (its node down) leaves no XID
// to the session's next transaction. An XID names the node keeping its
// commit decision, the first node of its own transaction: recovery looks
// for the decision there. Before, the next transaction over several nodes
// reused the stale XID, so its commit decision went into its first node's
// table under an XID naming another node; recovery, finding no decision
// where the XID pointed, rolled back the prepared branch of a committed
// transaction (a transfer half committed, found by test/torture when
// keyshard died between the decision and the branches' XA COMMIT). Here
// the decision row must land under an XID naming the node that holds it.
func TestXAFreshXIDAfterFailedBranch(t *testing.T) {
	setupShardDB(t)
	p := startProxy(t, strings.Replace(shardYAML("%ADDR%"), "user_list:\n", "user_list:\n  - user: root\n    password: rootpw\n", 1))
	adm := adminDB(t, p)
	db := p.open(t, "ks:ks", "shard_e2e", "")
	mustExec(t, db, "CREATE TABLE sh_user (id BIGINT PRIMARY KEY, name VARCHAR(32))")
	mustExec(t, db, "INSERT INTO sh_user (id, name) VALUES (1, 'on node1'), (4, 'on node2')")
	node1 := direct(t, basePort, "")
	// Decision rows on node1 under an XID naming node2 (there should be none).
	misplaced := func() int {
		var n int
		if err := node1.QueryRow("SELECT COUNT(*) FROM keyshard.xa_log WHERE gtrid LIKE 'ks-%-node2'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// First node node2; node1 taken down: the branch there cannot open.
	mustExecConn(t, c, "BEGIN")
	mustExecConn(t, c, "UPDATE sh_user SET name = 'x' WHERE id = 4")
	master1 := fmt.Sprintf("127.0.0.1:%d", basePort)
	mustExec(t, adm, "admin node(opt,node,k,v) values('down','node1','master','"+master1+"')")
	if _, err := c.ExecContext(ctx, "UPDATE sh_user SET name = 'x' WHERE id = 1"); err == nil {
		t.Fatal("a statement for node1 while it is down succeeded")
	}
	mustExecConn(t, c, "ROLLBACK")
	mustExec(t, adm, "admin node(opt,node,k,v) values('up','node1','master','"+master1+"')")

	// First node node1, a branch on node2: its XID names node1.
	before := misplaced()
	mustExecConn(t, c, "BEGIN")
	mustExecConn(t, c, "UPDATE sh_user SET name = 'committed' WHERE id = 1")
	mustExecConn(t, c, "UPDATE sh_user SET name = 'committed' WHERE id = 4")
	mustExecConn(t, c, "COMMIT")
	if n := misplaced(); n != before {
		t.Errorf("the commit decision was recorded on node1 under an XID naming node2 (%d such rows, %d before): "+
			"recovery would look for it on node2", n, before)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM sh_user WHERE name = 'committed'").Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows committed: %d %v, want 2", n, err)
	}
	noPreparedBranches(t)
}
