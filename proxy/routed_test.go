package proxy

import "testing"

func TestIsSavepointStmt(t *testing.T) {
	for stmt, want := range map[string]bool{
		"SAVEPOINT s1": true, "release savepoint s1": true, "ROLLBACK TO s1": true, "rollback work to savepoint s1": true,
		"ROLLBACK": false, "ROLLBACK WORK": false, "COMMIT": false, "rollback and chain": false,
	} {
		if got := isSavepointStmt(stmt); got != want {
			t.Errorf("isSavepointStmt(%q) = %v, want %v", stmt, got, want)
		}
	}
}
