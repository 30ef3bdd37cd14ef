package backend

import "testing"

func TestReplication(t *testing.T) {
	s := func(v string) *string { return &v }
	cols := []string{"Slave_IO_State", "Master_Host", "Master_Port", "Slave_IO_Running", "Slave_SQL_Running"}
	for _, c := range []struct {
		name   string
		r      *Result
		repl   bool
		source string
	}{
		{"no replication", &Result{Columns: cols}, false, ""},
		{"running", &Result{Columns: cols, Rows: [][]*string{{s(""), s("10.0.0.1"), s("3306"), s("Yes"), s("Yes")}}}, true, "10.0.0.1:3306"},
		// The master died: the IO thread retries.
		{"connecting", &Result{Columns: cols, Rows: [][]*string{{s(""), s("10.0.0.1"), s("3306"), s("Connecting"), s("Yes")}}}, true, "10.0.0.1:3306"},
		{"stopped", &Result{Columns: cols, Rows: [][]*string{{s(""), s("10.0.0.1"), s("3306"), s("No"), s("No")}}}, false, "10.0.0.1:3306"},
		{"sql thread only", &Result{Columns: cols, Rows: [][]*string{{s(""), s("10.0.0.1"), s("3306"), s("No"), s("Yes")}}}, true, "10.0.0.1:3306"},
		{"mysql 8.4 names", &Result{Columns: []string{"Source_Host", "Source_Port", "Replica_IO_Running", "Replica_SQL_Running"},
			Rows: [][]*string{{s("db1"), s("3306"), s("Yes"), s("No")}}}, true, "db1:3306"},
	} {
		repl, source := replication(c.r)
		if repl != c.repl || source != c.source {
			t.Errorf("%s: replicating %v from %q, want %v from %q", c.name, repl, source, c.repl, c.source)
		}
	}
	if !(ServerRole{}).Writable() || (ServerRole{ReadOnly: true}).Writable() || (ServerRole{Replicating: true}).Writable() {
		t.Error("Writable: want only read_only off and not replicating")
	}
}
