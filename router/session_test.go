package router

import (
	"strings"
	"testing"
)

func TestParseSet(t *testing.T) {
	p := NewParser()
	items, err := p.ParseSet("set names utf8mb4 collate utf8mb4_bin, session sql_mode='ANSI', @a=1, @@global.max_connections=10, autocommit=0")
	if err != nil {
		t.Fatal(err)
	}
	want := []SetItem{
		{Kind: SetNames, Name: "utf8mb4", Collation: "utf8mb4_bin"},
		{Kind: SetSysVar, Name: "sql_mode", Value: "'ANSI'"},
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
	// READ ONLY / READ WRITE: the parser names the session variable
	// either way; without SESSION it is for the next transaction only.
	for _, q := range []string{"SET TRANSACTION READ ONLY", "/* c */ set  transaction read write"} {
		if items, err = p.ParseSet(q); err != nil || len(items) != 1 || items[0].Kind != SetOneShot {
			t.Fatalf("%s: %+v %v", q, items, err)
		}
	}
	if items, err = p.ParseSet("SET SESSION TRANSACTION READ ONLY"); err != nil || len(items) != 1 || items[0].Kind != SetSysVar || items[0].Name != "tx_read_only" {
		t.Fatalf("session read only: %+v %v", items, err)
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

func TestSetValues(t *testing.T) {
	var p Parser
	for sql, want := range map[string][]string{
		"SET sql_mode = 'ANSI', @@session.time_zone = '+00:00'":            {"'ANSI'", "'+00:00'"},
		"SET SESSION sort_buffer_size = 262144, max_join_size = 1.5":       {"262144", "1.5"},
		"SET sql_mode = ANSI, sql_safe_updates = ON":                       {"'ANSI'", "'ON'"},
		"SET sql_mode = DEFAULT":                                           {"DEFAULT"},
		"SET sql_mode = CONCAT(@@sql_mode, ',STRICT_ALL_TABLES')":          {""},
		"SET time_zone = @@global.time_zone, div_precision_increment = -1": {"", ""},
		"SET lc_time_names = 'it''s'":                                      {"'it''s'"},
		`SET lc_time_names = 'a\\b'`:                                       {""},
	} {
		items, err := p.ParseSet(sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if len(items) != len(want) {
			t.Fatalf("%s: %d items", sql, len(items))
		}
		for i, it := range items {
			if it.Kind != SetSysVar || it.Value != want[i] {
				t.Errorf("%s: item %d = %+v, want value %q", sql, i, it, want[i])
			}
		}
	}
}

func TestBatchKills(t *testing.T) {
	p := NewParser()
	sql := "SELECT 'kill 1'; KILL 5 ;\n/* c */ kill query 7; SELECT 2"
	ks, err := p.BatchKills(sql)
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) != 2 || sql[ks[0].Start:ks[0].End] != "KILL 5" || ks[0].ID != 5 || ks[0].Query ||
		!strings.HasSuffix(sql[ks[1].Start:ks[1].End], "kill query 7") || ks[1].ID != 7 || !ks[1].Query {
		t.Fatalf("BatchKills = %+v", ks)
	}
	if Classify(sql).Flags&FlagKill == 0 {
		t.Error("Classify: no FlagKill")
	}
	if _, err := p.BatchKills("KILL 5; SELEC 1"); err == nil {
		t.Error("an unparsable batch: want an error")
	}
	// A KILL inside a compound body, or a batch whose statements do not
	// start with KILL, holds none to run, parsable or not.
	for _, sql := range []string{"CREATE PROCEDURE kq(i INT) BEGIN KILL QUERY i; END",
		"CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO BEGIN KILL 5; END; SELECT 1",
		"DELETE FROM t WHERE kill = 1 RETURNING id; SELECT 2"} {
		if ks, err := p.BatchKills(sql); err != nil || len(ks) != 0 {
			t.Errorf("BatchKills(%q) = %v, %v; want none", sql, ks, err)
		}
	}
}
