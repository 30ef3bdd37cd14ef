package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"
)

// globalYAML: sh_user hashed over both nodes, sh_country copied on both
// (type global), sh_cur copied on node2 only.
func globalYAML(addr string) string {
	return twoNodeYAML(addr, `      - db: shard_e2e
        table: sh_user
        key: id
        nodes: [node1, node2]
        type: hash
        locations: [4, 4]
      - db: shard_e2e
        table: sh_country
        nodes: [node1, node2]
        type: global
      - db: shard_e2e
        table: sh_cur
        nodes: [node2]
        type: global
`) + "admin_users: [ks]\n"
}

// A global table is written on every copy, atomically, counts one copy's
// rows, is read on one node, joins with a sharded table on every shard,
// takes DDL and LOAD DATA on every copy, and ADMIN CHECK SHARDS says
// when the copies' rows differ.
func TestGlobalTables(t *testing.T) {
	setupShardDB(t)
	p := startProxy(t, globalYAML("%ADDR%"))
	db := p.open(t, "ks:ks", "shard_e2e", "allowAllFiles=true")
	node1, node2 := direct(t, basePort, "shard_e2e"), direct(t, basePort+1, "shard_e2e")
	copies := func(q string) (string, string) {
		t.Helper()
		return strings.Join(queryCol(t, node1, q), ","), strings.Join(queryCol(t, node2, q), ",")
	}
	wantCopies := func(what, q, want string) {
		t.Helper()
		if a, b := copies(q); a != want || b != want {
			t.Fatalf("%s: node1 %q, node2 %q; want %q on both", what, a, b, want)
		}
	}

	// DDL runs on every copy.
	mustExec(t, db, "CREATE TABLE sh_country (code CHAR(2) PRIMARY KEY, name VARCHAR(32) NOT NULL)")
	mustExec(t, db, "CREATE TABLE sh_user (id BIGINT PRIMARY KEY, cc CHAR(2) NOT NULL)")
	mustExec(t, db, "CREATE TABLE sh_cur (code CHAR(3) PRIMARY KEY)")
	wantCopies("CREATE TABLE", "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'shard_e2e' AND table_name = 'sh_country'", "1")
	if got := queryCol(t, node1, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'shard_e2e' AND table_name = 'sh_cur'"); got[0] != "0" {
		t.Fatalf("sh_cur (a copy on node2 only) was created on node1")
	}

	// A write reaches every copy; the OK counts one.
	r, err := db.Exec("INSERT INTO sh_country (code, name) VALUES ('FR', 'France'), ('DE', 'Germany')")
	if err != nil || rowsAffected(r) != 2 {
		t.Fatalf("INSERT into a global table: %v (affected %d, want 2)", err, rowsAffected(r))
	}
	wantCopies("INSERT", "SELECT code FROM sh_country ORDER BY code", "DE,FR")
	r, err = db.Exec("UPDATE sh_country SET name = 'Deutschland' WHERE code = 'DE'")
	if err != nil || rowsAffected(r) != 1 {
		t.Fatalf("UPDATE of a global table: %v (affected %d, want 1)", err, rowsAffected(r))
	}
	wantCopies("UPDATE", "SELECT name FROM sh_country WHERE code = 'DE'", "Deutschland")

	// A prepared statement (binary protocol) too.
	st, err := db.Prepare("INSERT INTO sh_country (code, name) VALUES (?, ?)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Exec("NL", "Netherlands"); err != nil {
		t.Fatalf("prepared INSERT into a global table: %v", err)
	}
	st.Close()
	wantCopies("prepared INSERT", "SELECT code FROM sh_country ORDER BY code", "DE,FR,NL")

	// All or nothing: IT is already on node2's copy only, so the INSERT
	// fails there, and ES lands on neither.
	mustExec(t, node2, "INSERT INTO sh_country VALUES ('IT', 'Italia')")
	_, err = db.Exec("INSERT INTO sh_country (code, name) VALUES ('ES', 'Spain'), ('IT', 'Italy')")
	wantErrContains(t, "a duplicate on one copy", err, 1062, "nothing was changed")
	if a, b := copies("SELECT code FROM sh_country ORDER BY code"); a != "DE,FR,NL" || b != "DE,FR,IT,NL" {
		t.Fatalf("after a failed INSERT: node1 %q, node2 %q", a, b)
	}
	noPreparedBranches(t)

	// ADMIN CHECK SHARDS compares the copies' rows.
	checkData := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, r := range allRows(t, db, "ADMIN CHECK SHARDS") {
			f := strings.Split(r, "|")
			if f[0] == "shard_e2e.sh_country" {
				out[f[1]] = f[3] + "/" + f[5]
			}
		}
		return out
	}
	if got := checkData(); got["node1"] != "same/same" || got["node2"] != "same/differs" {
		t.Fatalf("ADMIN CHECK SHARDS with node2's copy holding an extra row: %v", got)
	}
	// A write that changes the copies differently is refused, and
	// changes none.
	_, err = db.Exec("UPDATE sh_country SET name = 'Italy' WHERE code = 'IT'")
	wantErrContains(t, "a write changing the copies differently", err, 1105, "changed different numbers of rows (node1: 0, node2: 1)")
	if got := queryCol(t, node2, "SELECT name FROM sh_country WHERE code = 'IT'"); strings.Join(got, ",") != "Italia" {
		t.Fatalf("node2's copy after the refused UPDATE: %v", got)
	}
	mustExec(t, node2, "DELETE FROM sh_country WHERE code = 'IT'")
	if got := checkData(); got["node1"] != "same/same" || got["node2"] != "same/same" {
		t.Fatalf("ADMIN CHECK SHARDS with equal copies: %v", got)
	}

	// Joined with a sharded table: every shard reads its own copy.
	mustExec(t, db, "INSERT INTO sh_user (id, cc) VALUES (1, 'FR'), (4, 'DE'), (5, 'NL'), (12, 'FR')")
	if got := strings.Join(queryCol(t, db, "SELECT CONCAT(u.id, ':', c.name) FROM sh_user u JOIN sh_country c ON u.cc = c.code ORDER BY u.id"), ","); got != "1:France,4:Deutschland,5:Netherlands,12:France" {
		t.Fatalf("join of a sharded and a global table: %s", got)
	}
	if got := strings.Join(queryCol(t, db, "SELECT c.name FROM sh_user u JOIN sh_country c ON u.cc = c.code WHERE u.id = 5"), ","); got != "Netherlands" {
		t.Fatalf("join on one shard: %s", got)
	}
	// Reads: on the default node when it has a copy, else on one that has.
	mustExec(t, db, "INSERT INTO sh_cur (code) VALUES ('EUR')")
	if got := queryCol(t, db, "SELECT code FROM sh_cur"); len(got) != 1 || got[0] != "EUR" {
		t.Fatalf("read of a global table copied on node2 only: %v", got)
	}

	// Inside a transaction over both nodes, a global write rolls back
	// with the rest.
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustExecConn(t, c, "BEGIN")
	mustExecConn(t, c, "UPDATE sh_user SET cc = 'NL' WHERE id = 1")
	mustExecConn(t, c, "INSERT INTO sh_country (code, name) VALUES ('BE', 'Belgium')")
	if got := strings.Join(queryColConn(t, c, "SELECT name FROM sh_country WHERE code = 'BE'", 0), ","); got != "Belgium" {
		t.Fatalf("the transaction's own global row: %q", got)
	}
	mustExecConn(t, c, "ROLLBACK")
	wantCopies("a rolled-back transaction", "SELECT COUNT(*) FROM sh_country WHERE code = 'BE'", "0")
	// With autocommit off (JDBC, DB-API), the first statement of a
	// transaction may write every copy.
	mustExecConn(t, c, "SET autocommit = 0")
	mustExecConn(t, c, "INSERT INTO sh_country (code, name) VALUES ('BE', 'Belgium')")
	mustExecConn(t, c, "ROLLBACK")
	wantCopies("autocommit off, rolled back", "SELECT COUNT(*) FROM sh_country WHERE code = 'BE'", "0")
	mustExecConn(t, c, "INSERT INTO sh_country (code, name) VALUES ('BE', 'Belgium')")
	mustExecConn(t, c, "UPDATE sh_user SET cc = 'BE' WHERE id = 5")
	mustExecConn(t, c, "COMMIT")
	mustExecConn(t, c, "SET autocommit = 1")
	c.Close()
	wantCopies("autocommit off, committed", "SELECT COUNT(*) FROM sh_country WHERE code = 'BE'", "1")
	mustExec(t, db, "DELETE FROM sh_country WHERE code = 'BE'")
	mustExec(t, db, "UPDATE sh_user SET cc = 'NL' WHERE id = 5")

	// A read of a global table inside a transaction runs on the
	// transaction's node when it has a copy: in transaction_mode single,
	// where reaching the default node would be refused, too.
	single := startProxy(t, singleMode(globalYAML("%ADDR%")))
	sc, err := single.open(t, "ks:ks", "shard_e2e", "").Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustExecConn(t, sc, "BEGIN")
	mustExecConn(t, sc, "UPDATE sh_user SET cc = 'DE' WHERE id = 5") // node2
	wantColConn(t, sc, "SELECT name FROM sh_country WHERE code = 'FR'", "France", "a global read in a transaction on node2")
	wantColConn(t, sc, "SELECT cc FROM sh_user WHERE id = 5", "DE", "the transaction's own write")
	mustExecConn(t, sc, "ROLLBACK")
	sc.Close()

	// What cannot run as one statement is refused, naming the tables.
	_, err = db.Exec("UPDATE sh_user u JOIN sh_country c ON u.cc = c.code SET c.name = 'x' WHERE u.id = 1")
	wantErrContains(t, "a write of a global table with a sharded one", err, 1235, "writes global table sh_country cannot use sharded table sh_user")
	_, err = db.Exec("SELECT * FROM sh_user u JOIN sh_cur m ON u.cc = m.code")
	wantErrContains(t, "a join with a global table missing on a shard's node", err, 1235, "global table sh_cur has no copy on node node1")

	// ALTER runs on every copy, after checking they agree.
	mustExec(t, db, "ALTER TABLE sh_country ADD COLUMN pop INT NOT NULL DEFAULT 0")
	wantCopies("ALTER", "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = 'shard_e2e' AND table_name = 'sh_country' AND column_name = 'pop'", "1")

	// LOAD DATA LOCAL: every line to every copy; the OK counts one.
	path := filepath.Join(t.TempDir(), "countries.csv")
	if err := os.WriteFile(path, []byte("PL,Poland,38\nPT,Portugal,10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gomysql.RegisterLocalFile(path)
	r, err = db.Exec(fmt.Sprintf("LOAD DATA LOCAL INFILE '%s' INTO TABLE sh_country FIELDS TERMINATED BY ','", path))
	if err != nil || rowsAffected(r) != 2 {
		t.Fatalf("LOAD DATA into a global table: %v (affected %d, want 2)", err, rowsAffected(r))
	}
	wantCopies("LOAD DATA", "SELECT GROUP_CONCAT(code ORDER BY code) FROM sh_country", "DE,FR,NL,PL,PT")

	// SHOW TABLES lists the table once.
	n := 0
	for _, name := range queryCol(t, db, "SHOW TABLES") {
		if name == "sh_country" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("SHOW TABLES lists sh_country %d times", n)
	}
}
