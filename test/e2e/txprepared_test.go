package e2e

import (
	"context"
	"testing"
)

// A prepared statement on a default-node table inside a transaction that
// began on another node runs on the default node (a branch of the
// transaction there), as its text form does, not on the transaction's
// first connection, where the table does not exist (found by test/fuzzsql,
// seed 12, statement 304: `SELECT ... FROM dp ... LIMIT ? OFFSET ?` after
// `START TRANSACTION; DELETE FROM tr WHERE k IN (...)` on node2: 1146
// Table 'fz.dp' doesn't exist).
func TestPreparedDefaultTableInTransaction(t *testing.T) {
	ctx := context.Background()
	c := shardUserConn(t)
	mustExecConn(t, c, "CREATE TABLE plain (id INT PRIMARY KEY, label VARCHAR(16))")
	mustExecConn(t, c, "INSERT INTO plain VALUES (1, 'one')")
	for _, end := range []string{"ROLLBACK", "COMMIT"} {
		mustExecConn(t, c, "BEGIN")
		mustExecConn(t, c, "INSERT INTO sh_user (id, name) VALUES (5, 'five')") // node2: the transaction's first node
		up, err := c.PrepareContext(ctx, "UPDATE plain SET label = ? WHERE id = ?")
		if err != nil {
			t.Fatalf("%s: preparing an UPDATE of a default-node table in a transaction on node2: %v", end, err)
		}
		if _, err := up.ExecContext(ctx, end, 1); err != nil {
			t.Fatalf("%s: executing it: %v", end, err)
		}
		up.Close()
		sel, err := c.PrepareContext(ctx, "SELECT label FROM plain WHERE id = ?")
		if err != nil {
			t.Fatalf("%s: preparing a SELECT of a default-node table in a transaction on node2: %v", end, err)
		}
		var label string
		if err := sel.QueryRowContext(ctx, 1).Scan(&label); err != nil || label != end {
			t.Fatalf("%s: the transaction's own update: %q, %v", end, label, err)
		}
		sel.Close()
		mustExecConn(t, c, end)
		mustExecConn(t, c, "DELETE FROM sh_user WHERE id = 5")
	}
	wantColConn(t, c, "SELECT label FROM plain WHERE id = 1", "COMMIT", "after the ROLLBACK and the COMMIT")
	noPreparedBranches(t)
}
