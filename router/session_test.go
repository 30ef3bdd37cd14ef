package router

import "testing"

func TestParseSet(t *testing.T) {
	p := NewParser()
	items, err := p.ParseSet("set names utf8mb4 collate utf8mb4_bin, session sql_mode='ANSI', @a=1, @@global.max_connections=10, autocommit=0")
	if err != nil {
		t.Fatal(err)
	}
	want := []SetItem{
		{Kind: SetNames, Name: "utf8mb4", Collation: "utf8mb4_bin"},
		{Kind: SetSysVar, Name: "sql_mode"},
		{Kind: SetUserVar, Name: "a"},
		{Kind: SetGlobal, Name: "max_connections"},
		{Kind: SetAutocommit, Name: "autocommit"},
	}
	if len(items) != len(want) {
		t.Fatalf("got %d items: %+v", len(items), items)
	}
	for i := range want {
		if items[i] != want[i] {
			t.Errorf("item %d = %+v, want %+v", i, items[i], want[i])
		}
	}
	items, err = p.ParseSet("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
	if err != nil || len(items) != 1 || items[0].Kind != SetOneShot {
		t.Fatalf("one-shot: %+v %v", items, err)
	}
	items, err = p.ParseSet("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
	if err != nil || len(items) != 1 || items[0].Kind != SetSysVar || items[0].Name != "tx_isolation" {
		t.Fatalf("session isolation: %+v %v", items, err)
	}
	if _, err := p.ParseSet("SET garbage garbage"); err == nil {
		t.Fatal("want a parse error")
	}
}

func TestRewriteSessionFuncs(t *testing.T) {
	p := NewParser()
	v := SessionValues{LastInsertID: 42, RowCount: -1, FoundRows: 7, ConnectionID: 9}
	cases := []struct{ in, out string }{
		{"select last_insert_id()", "SELECT IFNULL(CAST(CAST(42 AS CHAR(21)) AS UNSIGNED)+0, CAST(0 AS UNSIGNED)) AS `last_insert_id()`"},
		{"SELECT @@identity, ROW_COUNT() rc", "SELECT CAST(CAST(42 AS CHAR(21)) AS UNSIGNED)+0 AS `@@identity`,IFNULL(CAST(CAST(-1 AS CHAR(20)) AS SIGNED), 0) AS `rc`"},
		{"select found_rows(), connection_id()", "SELECT IFNULL(CAST(CAST(7 AS CHAR(20)) AS SIGNED), 0) AS `found_rows()`,9 AS `connection_id()`"},
		{"insert into t values (LAST_INSERT_ID())", "INSERT INTO `t` VALUES (IFNULL(CAST(CAST(42 AS CHAR(21)) AS UNSIGNED)+0, CAST(0 AS UNSIGNED)))"},
		{"select last_insert_id(5)", "select last_insert_id(5)"},
	}
	for _, c := range cases {
		got, _, err := p.RewriteSessionFuncs(c.in, v)
		if err != nil || got != c.out {
			t.Errorf("Rewrite(%q) = %q, %v; want %q", c.in, got, err, c.out)
		}
	}
}
