package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
)

// LOAD DATA LOCAL INFILE into a sharded table: keyshard splits the file
// line by line by shard key, each line lands in the sub-table the rule
// picks (checked row by row on the backends), and the format's clauses
// (FIELDS, LINES, IGNORE n LINES, columns and user variables, SET) mean
// what they mean to MariaDB. A line whose key maps nowhere fails the whole
// load, naming the line, and nothing is loaded.
func TestShardLoadData(t *testing.T) {
	setupShardDB(t)
	p := startProxy(t, serverAdmin(shardYAML("%ADDR%"))) // a server-side LOAD DATA reaches the sharding check
	db := p.open(t, "ks:ks", "shard_e2e", "allowAllFiles=true")
	mustExec(t, db, "CREATE TABLE sh_user (id BIGINT PRIMARY KEY, name VARCHAR(64), note VARCHAR(64))")
	mustExec(t, db, "CREATE TABLE sh_log (id BIGINT PRIMARY KEY, msg VARCHAR(32))")
	dir := t.TempDir()
	write := func(name, data string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		gomysql.RegisterLocalFile(path)
		return path
	}
	// name i: commas, quotes, an escaped newline now and then.
	name := func(i int) string {
		switch i % 4 {
		case 0:
			return fmt.Sprintf("plain%d", i)
		case 1:
			return fmt.Sprintf("with, comma %d", i)
		case 2:
			return fmt.Sprintf(`say "hi" %d`, i)
		}
		return fmt.Sprintf("two\nlines %d", i)
	}
	var csv strings.Builder
	csv.WriteString("id,name\n") // IGNORE 1 LINES
	const n = 2000
	for i := range n {
		nm := strings.ReplaceAll(name(i), `"`, `""`)
		nm = strings.ReplaceAll(nm, "\n", `\n`)
		fmt.Fprintf(&csv, "%d,\"%s\"\n", i, nm)
	}
	path := write("users.csv", csv.String())
	r, err := db.Exec(fmt.Sprintf(`LOAD DATA LOCAL INFILE '%s' INTO TABLE sh_user FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '"'
		LINES TERMINATED BY '\n' IGNORE 1 LINES (id, @n) SET name = @n, note = UPPER(@n)`, path))
	if err != nil {
		t.Fatalf("LOAD DATA: %v", err)
	}
	if rowsAffected(r) != n {
		t.Fatalf("LOAD DATA affected %d rows, want %d", rowsAffected(r), n)
	}
	// Row by row, on the backends: each id in sub-table id % 8.
	got := map[string]bool{}
	for sub := range 8 {
		port := basePort
		if sub >= 4 {
			port = basePort + 1
		}
		rows := allRows(t, direct(t, port, "shard_e2e"), fmt.Sprintf("SELECT id, name, note FROM sh_user_%04d", sub))
		for _, row := range rows {
			f := strings.SplitN(row, "|", 3)
			var id int
			fmt.Sscan(f[0], &id)
			if id%8 != sub || f[1] != name(id) || f[2] != strings.ToUpper(name(id)) {
				t.Errorf("sh_user_%04d holds %q; want id %% 8 = %d, name %q", sub, row, sub, name(id))
			}
			got[f[0]] = true
		}
	}
	if len(got) != n {
		t.Fatalf("%d distinct rows on the backends, want %d", len(got), n)
	}
	// Without a column list: the table's columns in order (tab-separated).
	path = write("more.tsv", "5000\tfive\tx\n5001\tsix\\tsix\t\\N\n")
	mustExec(t, db, fmt.Sprintf("LOAD DATA LOCAL INFILE '%s' INTO TABLE sh_user", path))
	if rows := allRows(t, direct(t, basePort, "shard_e2e"), "SELECT id, name, note FROM sh_user_0001 WHERE id = 5001"); len(rows) != 1 || rows[0] != "5001|six\tsix|NULL" {
		t.Errorf("tab-separated load: %q", rows)
	}
	// A line whose key no sub-table holds fails the load, naming the
	// line; nothing of the file is loaded.
	path = write("log.txt", "1\tok\n150\tok\n400\ttoo far\n7\tok\n")
	_, err = db.Exec(fmt.Sprintf("LOAD DATA LOCAL INFILE '%s' INTO TABLE sh_log", path))
	wantErrContains(t, "a key past every range", err, 1526, "line 3")
	var count int
	if err := db.QueryRow("SELECT COUNT(*) FROM sh_log").Scan(&count); err != nil || count != 0 {
		t.Fatalf("after a failed load, sh_log has %d rows, %v; want 0", count, err)
	}
	path = write("nullkey.txt", "1\ta\n\\N\tb\n")
	_, err = db.Exec(fmt.Sprintf("LOAD DATA LOCAL INFILE '%s' INTO TABLE sh_log", path))
	wantErrContains(t, "a NULL key", err, 1235, "line 2: shard key id is NULL")
	// A CRLF file read with LINES TERMINATED BY '\n' (the default): the
	// key's trailing \r is dropped as the server drops it, so each row
	// lands where a WHERE on its key looks for it.
	path = write("crlf.txt", "13\tcr\r\n14\tcr\r\n")
	mustExec(t, db, fmt.Sprintf("LOAD DATA LOCAL INFILE '%s' INTO TABLE sh_log (id, msg)", path))
	if got := queryCol(t, db, "SELECT id FROM sh_log WHERE id IN (13, 14) ORDER BY id"); strings.Join(got, ",") != "13,14" {
		t.Fatalf("rows of a CRLF file found by key: %v", got)
	}
	mustExec(t, db, "DELETE FROM sh_log WHERE id IN (13, 14)")
	// A sub-table that fails its LOAD (here: missing) fails the whole load;
	// nothing lands elsewhere, and the session and its pool go on.
	mustExec(t, direct(t, basePort+1, "shard_e2e"), "RENAME TABLE sh_log_0003 TO sh_log_away")
	path = write("fourlegs.txt", "1\ta\n250\tb\n350\tc\n")
	_, err = db.Exec(fmt.Sprintf("LOAD DATA LOCAL INFILE '%s' INTO TABLE sh_log", path))
	wantErrContains(t, "a missing sub-table", err, 1146, "sh_log_0003")
	mustExec(t, direct(t, basePort+1, "shard_e2e"), "RENAME TABLE sh_log_away TO sh_log_0003")
	if err := db.QueryRow("SELECT COUNT(*) FROM sh_log").Scan(&count); err != nil || count != 0 {
		t.Fatalf("after a load failing on one sub-table, sh_log has %d rows, %v; want 0", count, err)
	}
	// The mariadb CLI (libmariadb, which asks for progress reports: the
	// sub-tables' loads send them) loads as well.
	path = write("cli.csv", "9001,cli,a\n9002,cli,b\n")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cli := exec.CommandContext(ctx, "mariadb", "--local-infile=1", "-h127.0.0.1", "-P"+strings.Split(p.Addr, ":")[1], "-uks", "-pks", "shard_e2e",
		"-e", fmt.Sprintf("LOAD DATA LOCAL INFILE '%s' INTO TABLE sh_user FIELDS TERMINATED BY ','", path))
	if out, err := cli.CombinedOutput(); err != nil {
		t.Fatalf("mariadb CLI LOAD DATA: %v\n%s", err, out)
	}
	if err := db.QueryRow("SELECT COUNT(*) FROM sh_user WHERE name = 'cli'").Scan(&count); err != nil || count != 2 {
		t.Fatalf("rows loaded by the CLI: %d, %v", count, err)
	}
	// A server-side file cannot be split.
	_, err = db.Exec("LOAD DATA INFILE '/tmp/x' INTO TABLE sh_log")
	wantErrContains(t, "LOAD DATA INFILE", err, 1235, "use LOAD DATA LOCAL INFILE")
}
