package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
)

// Two transactions over two nodes take row locks in crossing order: a
// holds row 1 on node1 and waits for row 5 on node2, which b holds; b then
// waits for row 1 on node1. Each server sees only a wait; keyshard sees
// the cycle and stops the younger transaction (b, which spanned nodes
// last) with 1213 in well under a second, rolls it back on both nodes,
// and a goes on; as one server would. Text and prepared protocol, and a
// and b on two keyshard instances sharing their config in etcd.
func TestCrossNodeDeadlock(t *testing.T) {
	for _, c := range []struct {
		name      string
		prepared  bool
		instances int
	}{{"text", false, 1}, {"prepared", true, 1}, {"two instances on etcd", false, 2}} {
		t.Run(c.name, func(t *testing.T) {
			prepared := c.prepared
			setupShardDB(t)
			var pa, pb *testProxy
			if c.instances == 1 {
				pa = startProxy(t, shardYAML("%ADDR%"))
				pb = pa
			} else {
				st := sharedStore(t)
				pushDoc(t, st, shardYAML("127.0.0.1:9696"), false)
				pa, pb = startClusterProxy(t, st, "ks-a"), startClusterProxy(t, st, "ks-b")
			}
			db := pa.open(t, "ks:ks", "shard_e2e", "")
			dbB := pb.open(t, "ks:ks", "shard_e2e", "")
			mustExec(t, db, "CREATE TABLE sh_user (id BIGINT PRIMARY KEY, name VARCHAR(32), n INT NOT NULL)")
			// 1 is on node1 (sh_user_0001), 5 on node2 (sh_user_0005).
			mustExec(t, db, "INSERT INTO sh_user (id, name, n) VALUES (1, 'one', 100), (5, 'five', 100)")
			ctx := context.Background()
			conn := func(db *sql.DB) *sql.Conn {
				c, err := db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				return c
			}
			a, b := conn(db), conn(dbB)
			move := func(c *sql.Conn, id, delta int) error {
				var err error
				if prepared {
					_, err = c.ExecContext(ctx, "UPDATE sh_user SET n = n + ? WHERE id = ?", delta, id)
				} else {
					_, err = c.ExecContext(ctx, fmt.Sprintf("UPDATE sh_user SET n = n + %d WHERE id = %d", delta, id))
				}
				return err
			}
			mustExecConn(t, a, "BEGIN")
			mustExecConn(t, b, "BEGIN")
			if err := move(a, 1, -10); err != nil { // a: row 1 on node1
				t.Fatal(err)
			}
			if err := move(b, 5, -20); err != nil { // b: row 5 on node2
				t.Fatal(err)
			}
			aDone := make(chan error, 1)
			go func() { aDone <- move(a, 5, 10) }() // a waits on node2 for b
			node2 := direct(t, basePort+1, "shard_e2e")
			// Sent: waiting for b's lock.
			// (InnoDB refreshes what information_schema shows of its locks
			// only when nobody read it for 100 ms: poll slower than that.)
			for start := time.Now(); len(queryCol(t, node2, "SELECT 1 FROM information_schema.innodb_lock_waits")) == 0; {
				if time.Since(start) > 20*time.Second {
					t.Fatal("a does not wait for b's lock on node2 after 20s")
				}
				time.Sleep(250 * time.Millisecond)
			}
			start := time.Now()
			err := move(b, 1, 20) // b waits on node1 for a: the cycle
			took := time.Since(start)
			t.Logf("b's statement answered after %v", took)
			var me *gomysql.MySQLError
			if !errors.As(err, &me) || me.Number != 1213 || me.SQLState != [5]byte{'4', '0', '0', '0', '1'} ||
				me.Message != "Deadlock found when trying to get lock; try restarting transaction" {
				t.Fatalf("b, the younger transaction: %v (after %v), want 1213 40001 as from one server", err, took)
			}
			if took > time.Second {
				t.Fatalf("the deadlock was answered after %v, want under a second", took)
			}
			select {
			case err := <-aDone:
				if err != nil {
					t.Fatalf("a, the survivor: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("a still waits after b was rolled back")
			}
			mustExecConn(t, a, "COMMIT")
			// b's transaction is over on both nodes: its first update is
			// gone (read through a, which sees its own commit on every
			// node at once; another session may see a's second node a
			// moment later), the session goes on outside a transaction.
			wantColConn(t, a, "SELECT n FROM sh_user WHERE id IN (1, 5) ORDER BY id", "90,110", "after the deadlock")
			wantColConn(t, b, "SELECT @@in_transaction", "0", "b after the deadlock")
			noPreparedBranches(t)
			m := scrape(t, pb) // b's instance stopped it
			if c, v := metricValue(m, "keyshard_deadlocks_total"), metricValue(m, "keyshard_deadlock_victims_total"); c < 1 || v < 1 {
				t.Errorf("keyshard_deadlocks_total %v, keyshard_deadlock_victims_total %v; want at least 1", c, v)
			}
			// b can run the transfer again, and commit it.
			mustExecConn(t, b, "BEGIN")
			if err := move(b, 5, -20); err != nil {
				t.Fatal(err)
			}
			if err := move(b, 1, 20); err != nil {
				t.Fatal(err)
			}
			mustExecConn(t, b, "COMMIT")
			wantColConn(t, b, "SELECT SUM(n) FROM sh_user", "200", "the total")
		})
	}
}
