package wire

import "testing"

func TestTrackedSchema(t *testing.T) {
	state := AppendTrackVariable(nil, "autocommit", "OFF")
	state = AppendTrackSchema(state, "app")
	state = append(state, 5, 1, 'x') // an entry of a type that does not matter here
	if db, ok := TrackedSchema(state); !ok || db != "app" {
		t.Fatalf("TrackedSchema = %q, %v; want app", db, ok)
	}
	if _, ok := TrackedSchema(AppendTrackVariable(nil, "sql_mode", "''")); ok {
		t.Fatal("a state without a schema entry reported one")
	}
	if _, ok := TrackedSchema([]byte{TrackSchema, 9, 1}); ok {
		t.Fatal("a truncated entry was decoded")
	}
	// The OK packet's decoder hands the state to it unchanged.
	p := AppendOKState(nil, 0, 0, StatusAutocommit|StatusSessionStateChange, 0, "", AppendTrackSchema(nil, "b"))
	ok, err := ParseOK(p)
	if err != nil {
		t.Fatal(err)
	}
	if db, found := TrackedSchema(ok.State); !found || db != "b" {
		t.Fatalf("from an OK packet: %q, %v", db, found)
	}
}

func TestTrackedVars(t *testing.T) {
	state := AppendTrackVariable(nil, "time_zone", "+01:00")
	state = AppendTrackSchema(state, "app")
	state = AppendTrackVariable(state, "sql_mode", "")
	var got []string
	TrackedVars(state, func(name, value []byte) { got = append(got, string(name)+"="+string(value)) })
	if len(got) != 2 || got[0] != "time_zone=+01:00" || got[1] != "sql_mode=" {
		t.Fatalf("TrackedVars = %q", got)
	}
	got = nil
	TrackedVars([]byte{TrackSystemVariables, 4, 9, 'a'}, func(name, value []byte) { got = append(got, string(name)) })
	if len(got) != 0 {
		t.Fatalf("a truncated entry was decoded: %q", got)
	}
}

func TestRenameColumnTable(t *testing.T) {
	col := func(table, org string) []byte {
		b := AppendLenEncString(nil, "def")
		b = AppendLenEncString(b, "db")
		b = AppendLenEncString(b, table)
		b = AppendLenEncString(b, org)
		b = AppendLenEncString(b, "id")
		b = AppendLenEncString(b, "id")
		return append(b, 0x0c, 63, 0, 20, 0, 0, 0, 8, 0, 0, 0, 0, 0)
	}
	rename := func(n []byte) (string, bool) {
		if string(n) == "t_0003" {
			return "t", true
		}
		return "", false
	}
	out, ok := RenameColumnTable(nil, col("t_0003", "t_0003"), rename)
	if !ok || string(out) != string(col("t", "t")) {
		t.Fatalf("renamed: %q", out)
	}
	out, ok = RenameColumnTable(out, col("a", "t_0003"), rename)
	if !ok || string(out) != string(col("a", "t")) {
		t.Fatalf("alias kept, org_table renamed: %q", out)
	}
	if _, ok := RenameColumnTable(nil, col("x", "y"), rename); ok {
		t.Fatal("nothing to rename: want false")
	}
}
