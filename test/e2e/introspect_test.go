package e2e

import (
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"
)

// allRows returns every row of q as text (NULL as "NULL"), each row's
// values joined by "|".
func allRows(t *testing.T, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	var out []string
	for _, r := range scanRows(t, rows) {
		out = append(out, strings.Join(r, "|"))
	}
	return out
}

// scanRows reads and closes rows: each value as text, NULL as "NULL".
func scanRows(t *testing.T, rows *sql.Rows) [][]string {
	t.Helper()
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = "NULL"
			if v.Valid {
				row[i] = v.String
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A sharded table answers the statements that look at a table as one
// table under its own name, exactly as a plain table with the same
// definition answers them; the table lists show it in place of its
// sub-tables.
func TestShardIntrospection(t *testing.T) {
	setupShardDB(t)
	p := startProxy(t, shardYAML("%ADDR%"))
	db := p.open(t, "ks:ks", "shard_e2e", "")
	const def = "(id BIGINT NOT NULL, name VARCHAR(32) DEFAULT 'x' COMMENT 'who', n INT, PRIMARY KEY (id), KEY by_name (name, n)) ENGINE=InnoDB"
	mustExec(t, db, "CREATE TABLE sh_user "+def)
	mustExec(t, db, "CREATE TABLE plain_user "+def)
	for i := range 10 {
		mustExec(t, db, fmt.Sprintf("INSERT INTO sh_user (id, name, n) VALUES (%d, 'u%d', %d)", i, i, i))
	}
	// mask leaves out column i (SHOW INDEX's Cardinality: an estimate,
	// of the first sub-table's rows alone).
	mask := func(rows []string, i int) []string {
		for r := range rows {
			f := strings.Split(rows[r], "|")
			f[i] = "-"
			rows[r] = strings.Join(f, "|")
		}
		return rows
	}
	same := func(q string) {
		t.Helper()
		got := allRows(t, db, fmt.Sprintf(q, "sh_user"))
		want := allRows(t, db, fmt.Sprintf(q, "plain_user"))
		for i := range want {
			want[i] = strings.ReplaceAll(want[i], "plain_user", "sh_user")
		}
		if strings.HasPrefix(q, "SHOW INDEX") || strings.HasPrefix(q, "SHOW KEYS") {
			got, want = mask(got, 6), mask(want, 6)
		}
		if len(want) == 0 || strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\n%s\nwant (as a plain table):\n%s", fmt.Sprintf(q, "sh_user"), strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	same("SHOW CREATE TABLE %s")
	same("SHOW CREATE TABLE shard_e2e.%s")
	same("DESCRIBE %s")
	same("DESC %s name")
	same("SHOW FULL COLUMNS FROM %s FROM shard_e2e")
	same("SHOW COLUMNS FROM %s LIKE 'n%%'")
	same("SHOW INDEX FROM %s")
	same("SHOW KEYS IN %s WHERE Key_name = 'by_name'")
	same("SELECT column_name, column_type, is_nullable, column_key, column_default, column_comment FROM information_schema.columns " +
		"WHERE table_schema = 'shard_e2e' AND table_name = '%s' ORDER BY ordinal_position")
	same("SELECT table_name, index_name, column_name, seq_in_index FROM information_schema.statistics " +
		"WHERE table_schema = DATABASE() AND table_name = '%s' ORDER BY index_name, seq_in_index")
	same("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'shard_e2e' AND table_name = '%s' AND table_type = 'BASE TABLE'")

	// Prepared, as ORMs send them (go-sql-driver: COM_STMT_PREPARE).
	for _, q := range []string{
		"SELECT table_name, column_name, column_type, column_key FROM information_schema.columns WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position",
		"SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ? AND table_type = 'BASE TABLE'",
		"SELECT table_name, index_name, non_unique FROM information_schema.statistics WHERE table_schema = ? AND table_name = ? ORDER BY index_name, seq_in_index",
	} {
		got := allRows(t, db, q, "shard_e2e", "sh_user")
		want := allRows(t, db, q, "shard_e2e", "plain_user")
		for i := range want {
			want[i] = strings.ReplaceAll(want[i], "plain_user", "sh_user")
		}
		if len(want) == 0 || strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("prepared %s:\n%s\nwant (as a plain table):\n%s", q, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}

	tables := allRows(t, db, "SHOW TABLES")
	if !slices.Equal(tables, []string{"plain_user", "sh_user"}) {
		t.Errorf("SHOW TABLES = %q, want the logical tables only", tables)
	}
	// information_schema without a table name lists the logical tables
	// as SHOW TABLES does (not the default node's sub-tables), and their
	// columns once, under the logical name, whatever the aliases.
	for _, q := range []string{
		"SELECT table_name FROM information_schema.tables WHERE table_schema = 'shard_e2e' ORDER BY table_name",
		"SELECT TABLE_NAME AS t FROM information_schema.TABLES WHERE table_schema = DATABASE() ORDER BY 1",
		"SELECT table_schema, table_name, table_type FROM information_schema.tables WHERE table_schema = 'shard_e2e' ORDER BY table_name",
	} {
		got := allRows(t, db, q)
		var want []string
		for _, tb := range tables {
			want = append(want, tb)
			if strings.Contains(q, "table_type") {
				want[len(want)-1] = "shard_e2e|" + tb + "|BASE TABLE"
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q (as SHOW TABLES)", q, got, want)
		}
	}
	cols := allRows(t, db, "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'shard_e2e' ORDER BY table_name, ordinal_position")
	if want := []string{"plain_user|id", "plain_user|name", "plain_user|n", "sh_user|id", "sh_user|name", "sh_user|n"}; !slices.Equal(cols, want) {
		t.Errorf("information_schema.columns of shard_e2e: %q, want %q", cols, want)
	}
	if got := allRows(t, db, "SHOW FULL TABLES FROM shard_e2e LIKE 'sh\\_%'"); !slices.Equal(got, []string{"sh_user|BASE TABLE"}) {
		t.Errorf("SHOW FULL TABLES LIKE: %q", got)
	}
	if got := allRows(t, db, "SHOW TABLES WHERE Tables_in_shard_e2e LIKE '%user' AND Tables_in_shard_e2e <> 'plain_user'"); !slices.Equal(got, []string{"sh_user"}) {
		t.Errorf("SHOW TABLES WHERE: %q", got)
	}
	// TABLE STATUS: one row under the logical name, rows and sizes summed
	// over the sub-tables as their nodes report them.
	var wantRows, wantData int64
	for i := range 8 {
		port := basePort
		if i >= 4 {
			port = basePort + 1
		}
		var r, d int64
		if err := direct(t, port, "shard_e2e").QueryRow(fmt.Sprintf(
			"SELECT table_rows, data_length FROM information_schema.tables WHERE table_schema = 'shard_e2e' AND table_name = 'sh_user_%04d'", i)).Scan(&r, &d); err != nil {
			t.Fatal(err)
		}
		wantRows, wantData = wantRows+r, wantData+d
	}
	st := allRows(t, db, "SHOW TABLE STATUS LIKE 'sh_user'")
	if len(st) != 1 {
		t.Fatalf("SHOW TABLE STATUS LIKE 'sh_user': %q", st)
	}
	f := strings.Split(st[0], "|")
	if f[0] != "sh_user" || f[1] != "InnoDB" || f[4] != fmt.Sprint(wantRows) || f[6] != fmt.Sprint(wantData) {
		t.Errorf("SHOW TABLE STATUS: %q, want sh_user, InnoDB, rows %d, data %d", st[0], wantRows, wantData)
	}
	all := allRows(t, db, "SHOW TABLE STATUS")
	if len(all) != 2 || !strings.HasPrefix(all[0], "plain_user|") || !strings.HasPrefix(all[1], "sh_user|") {
		t.Errorf("SHOW TABLE STATUS: %q", all)
	}
	// EXPLAIN runs where the statement would, under the logical name.
	ex := allRows(t, db, "EXPLAIN SELECT * FROM sh_user WHERE id = 5")
	if len(ex) != 1 || strings.Split(ex[0], "|")[2] != "sh_user" {
		t.Errorf("EXPLAIN: %q", ex)
	}
}

// What a sharded layout cannot do is refused with 1235 and the reason,
// never a misleading 1146, and leaves the session as it was.
func TestShardRefusals(t *testing.T) {
	setupShardDB(t)
	p := startProxy(t, shardYAML("%ADDR%"))
	db := p.open(t, "ks:ks", "shard_e2e", "")
	db.SetMaxOpenConns(1)
	mustExec(t, db, "CREATE TABLE sh_user (id BIGINT PRIMARY KEY, name VARCHAR(32))")
	mustExec(t, db, "CREATE TABLE plain (id INT)")
	for _, c := range []struct{ sql, want string }{
		{"LOCK TABLES sh_user WRITE", "LOCK TABLES of sharded table sh_user"},
		{"LOCK TABLES plain READ, sh_user READ", "LOCK TABLES of sharded table sh_user"},
		{"CREATE TABLE copy AS SELECT * FROM sh_user", "CREATE TABLE ... SELECT with sharded table sh_user"},
		{"CREATE TABLE copy LIKE sh_user", "CREATE TABLE ... LIKE sharded table sh_user"},
		{"RENAME TABLE sh_user TO sh_people", "RENAME TABLE of sharded table sh_user"},
		{"ALTER TABLE sh_user RENAME TO sh_people", "RENAME TABLE of sharded table sh_user"},
		{"/*node9*/ SELECT * FROM sh_user WHERE id = 1", "hint /*node9*/ names no node"},
	} {
		_, err := db.Exec(c.sql)
		wantErrContains(t, c.sql, err, 1235, c.want)
	}
	// A LOCK TABLES that fails holds nothing: a statement over both nodes
	// still runs.
	if _, err := db.Exec("LOCK TABLES no_such_table WRITE"); myErrCode(err) != 1146 {
		t.Fatalf("LOCK TABLES of a missing table: %v", err)
	}
	mustExec(t, db, "INSERT INTO sh_user (id, name) VALUES (1, 'a'), (6, 'b')")
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM sh_user").Scan(&n); err != nil || n != 2 {
		t.Fatalf("after a failed LOCK TABLES: %d, %v", n, err)
	}
	// A plain LOCK TABLES works and ties the session to its node until
	// UNLOCK TABLES.
	mustExec(t, db, "LOCK TABLES plain WRITE")
	mustExec(t, db, "INSERT INTO plain VALUES (1)")
	mustExec(t, db, "UNLOCK TABLES")
}

// ADMIN CHECK SHARDS (and REST) shows sub-tables that are missing or
// defined apart; a DDL that changes existing sub-tables refuses to run
// while they disagree, and one that fails part-way names the sub-tables it
// changed and those it did not.
func TestShardDDLCheck(t *testing.T) {
	setupShardDB(t)
	p := startProxy(t, shardYAML("%ADDR%")+"admin_users: [ks]\nweb_user: admin\nweb_password: webpw\n")
	db := p.open(t, "ks:ks", "shard_e2e", "")
	mustExec(t, db, "CREATE TABLE sh_user (id BIGINT PRIMARY KEY, name VARCHAR(32))")
	check := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, r := range allRows(t, db, "ADMIN CHECK SHARDS") {
			f := strings.Split(r, "|")
			if f[0] == "shard_e2e.sh_user" {
				out[f[2]] = f[3]
			}
		}
		return out
	}
	if got := check(); len(got) != 8 || got["sh_user_0000"] != "same" || got["sh_user_0007"] != "same" {
		t.Fatalf("ADMIN CHECK SHARDS on agreeing sub-tables: %v", got)
	}
	node2 := direct(t, basePort+1, "shard_e2e")
	mustExec(t, node2, "ALTER TABLE sh_user_0005 ADD COLUMN extra INT")
	if got := check(); got["sh_user_0005"] != "differs" || got["sh_user_0004"] != "same" {
		t.Fatalf("ADMIN CHECK SHARDS after one sub-table changed: %v", got)
	}
	var checks []map[string]any
	if code := rest(t, p, "GET", "/api/v1/shards/check", "", true, &checks); code != 200 {
		t.Fatalf("REST shards/check: %d", code)
	}
	differs := 0
	for _, c := range checks {
		if c["sub_table"] == "sh_user_0005" && c["same_definition"] == false && c["exists"] == true {
			differs++
		}
	}
	if differs != 1 {
		t.Errorf("REST shards/check: %v", checks)
	}
	_, err := db.Exec("ALTER TABLE sh_user ADD COLUMN note INT")
	wantErrContains(t, "ALTER with sub-tables apart", err, 1235, "defined unlike sh_user_0000: sh_user_0005 (node2)")
	if cols := allRows(t, direct(t, basePort, "shard_e2e"), "SHOW COLUMNS FROM sh_user_0000"); len(cols) != 2 {
		t.Fatalf("a refused ALTER changed sh_user_0000: %q", cols)
	}
	mustExec(t, node2, "ALTER TABLE sh_user_0005 DROP COLUMN extra")
	mustExec(t, db, "ALTER TABLE sh_user ADD COLUMN note INT")
	// Part-way: a unique key that one sub-table's rows break.
	mustExec(t, db, "INSERT INTO sh_user (id, name) VALUES (6, 'dup'), (14, 'dup')") // both in sh_user_0006
	_, err = db.Exec("ALTER TABLE sh_user ADD UNIQUE KEY by_name (name)")
	wantErrContains(t, "ALTER failing on one sub-table", err, 1062, "sh_user_0006")
	if !strings.Contains(err.Error(), "changed: ") || !strings.Contains(err.Error(), "not changed: sh_user_0006, sh_user_0007") {
		t.Errorf("the error does not say which sub-tables changed: %v", err)
	}
}

// Column definitions of answers from sharded tables name the logical
// table (table and org_table), as a plain table's would, whatever the
// route: one sub-table, a fan-out, a merge, a prepared statement.
func TestShardColumnTableNames(t *testing.T) {
	setupShardDB(t)
	p := startProxy(t, shardYAML("%ADDR%"))
	mustExec(t, p.open(t, "ks:ks", "shard_e2e", ""), "CREATE TABLE sh_user (id BIGINT PRIMARY KEY, name VARCHAR(32))")
	c, err := client.Connect(p.Addr, "ks", "ks", "shard_e2e")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, q := range []string{"SELECT id, name FROM sh_user WHERE id = 5", "SELECT * FROM sh_user",
		"SELECT id FROM sh_user ORDER BY id", "SELECT u.id FROM sh_user AS u WHERE u.id = 3"} {
		r, err := c.Execute(q)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range r.Fields {
			if string(f.OrgTable) != "sh_user" || string(f.Table) != "sh_user" && string(f.Table) != "u" {
				t.Errorf("%s: column %s: table %q, org_table %q; want sh_user", q, f.Name, f.Table, f.OrgTable)
			}
		}
	}
	st, err := c.Prepare("SELECT id, name FROM sh_user WHERE id = ?")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := st.Execute(7)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range r.Fields {
		if string(f.OrgTable) != "sh_user" {
			t.Errorf("prepared: column %s: org_table %q; want sh_user", f.Name, f.OrgTable)
		}
	}
}
