package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// A transaction on one node whose COMMIT's answer is lost after the server
// committed: the client must not be told it was rolled back (it is
// there), but that its outcome is unknown, as a lost connection during
// COMMIT tells a client of the server itself. Before, keyshard answered
// "the session held an open transaction (rolled back)".
func TestLostLocalCommitOutcomeUnknown(t *testing.T) {
	setupShardDB(t)
	cc := newCommitCutter(t, fmt.Sprintf("127.0.0.1:%d", basePort))
	yaml := strings.Replace(shardYAML("%ADDR%"), fmt.Sprintf("master: 127.0.0.1:%d\n", basePort), "master: "+cc.ln.Addr().String()+"\n", 1)
	p := startProxy(t, yaml)
	db := p.open(t, "ks:ks", "shard_e2e", "")
	mustExec(t, db, "CREATE TABLE sh_user (id BIGINT PRIMARY KEY, name VARCHAR(32))")
	mustExec(t, db, "INSERT INTO sh_user (id, name) VALUES (1, 'one')")
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mustExecConn(t, c, "BEGIN")
	mustExecConn(t, c, "UPDATE sh_user SET name = 'committed' WHERE id = 1") // node1 only
	cc.arm(false)                                                            // the server commits, its answer is dropped
	_, err = c.ExecContext(ctx, "COMMIT")
	<-cc.cut
	wantErrContains(t, "COMMIT whose answer was lost", err, 1181, "whether it committed is unknown")
	if strings.Contains(err.Error(), "rolled back") {
		t.Errorf("COMMIT whose answer was lost: %v; it committed, it must not say rolled back", err)
	}
	var name string
	if err := db.QueryRow("SELECT name FROM sh_user WHERE id = 1").Scan(&name); err != nil || name != "committed" {
		t.Fatalf("row: %q %v, want committed", name, err)
	}
}
