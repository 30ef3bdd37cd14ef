package e2e

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// What a client could tell apart from one server (issue 37, item 3): each
// test compares keyshard's answers with the server's own, on a direct
// connection to a backend (refPort holds the plain reference tables).

// differYAML: user ks on node1 and node2, database ks_differ; dw is
// hash-sharded over one sub-table on each node (even ids on node1, odd
// on node2).
func differYAML(addr string) string {
	return twoNodeYAML(addr, `      - db: ks_differ
        table: dw
        key: id
        nodes: [node1, node2]
        type: hash
        locations: [1, 1]
      - db: ks_differ
        table: dq
        key: id
        nodes: [node1, node2]
        type: hash
        locations: [2, 2]
`)
}

// setupDiffer makes database ks_differ on both nodes and on the reference
// backend, and returns keyshard and a go-mysql connection to it and one
// to the reference backend, each with table dw (plain on the reference).
func setupDiffer(t *testing.T, extra string) (*testProxy, *client.Conn, *client.Conn) {
	t.Helper()
	for _, port := range []int{basePort, basePort + 1, refPort} {
		d := direct(t, port, "")
		mustExec(t, d, "DROP DATABASE IF EXISTS ks_differ")
		mustExec(t, d, "CREATE DATABASE ks_differ")
	}
	p := startProxy(t, differYAML("%ADDR%")+extra)
	ks := dial(t, p.Addr, "ks_differ")
	ref := dial(t, fmt.Sprintf("127.0.0.1:%d", refPort), "ks_differ")
	for _, c := range []*client.Conn{ks, ref} {
		gmExec(t, c, "CREATE TABLE dw (id INT PRIMARY KEY, v TINYINT NOT NULL DEFAULT 0)")
	}
	return p, ks, ref
}

// dial connects with go-mysql as ks to db.
func dial(t *testing.T, addr, db string) *client.Conn {
	t.Helper()
	c, err := client.Connect(addr, "ks", "ks", db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func gmExec(t *testing.T, c *client.Conn, q string) *mysql.Result {
	t.Helper()
	r, err := c.Execute(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return r
}

// rowsOf is q's answer as strings ("NULL" for NULL), or its error.
func rowsOf(c *client.Conn, q string) ([][]string, error) {
	r, err := c.Execute(q)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	out := [][]string{}
	if r.Resultset == nil {
		return out, nil
	}
	for i := range r.RowNumber() {
		row := make([]string, r.ColumnNumber())
		for j := range row {
			if null, _ := r.IsNull(i, j); null {
				row[j] = "NULL"
				continue
			}
			row[j], _ = r.GetString(i, j)
		}
		out = append(out, row)
	}
	return out, nil
}

// same runs each statement on keyshard and on the reference server and
// wants the same answer: rows, or errno.
func same(t *testing.T, ks, ref *client.Conn, qs ...string) {
	t.Helper()
	for _, q := range qs {
		got, gerr := rowsOf(ks, q)
		want, werr := rowsOf(ref, q)
		if myErrCode(gerr) != myErrCode(werr) || (gerr == nil) != (werr == nil) {
			t.Fatalf("%s: keyshard %v, server %v", q, gerr, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n keyshard %q\n server   %q", q, got, want)
		}
	}
}

// sameOK runs a write on both and wants the same affected rows and
// warning count.
func sameOK(t *testing.T, ks, ref *client.Conn, q string) {
	t.Helper()
	g, w := gmExec(t, ks, q), gmExec(t, ref, q)
	if g.AffectedRows != w.AffectedRows || g.Warnings != w.Warnings {
		t.Fatalf("%s: keyshard affected %d warnings %d, server affected %d warnings %d", q, g.AffectedRows, g.Warnings, w.AffectedRows, w.Warnings)
	}
}

// SHOW WARNINGS, SHOW ERRORS, their COUNT(*) forms and @@warning_count
// after a statement over several sub-tables list the warnings of every
// leg, as the server lists those of one table, and respect
// max_error_count and LIMIT.
func TestDifferWarningsOverLegs(t *testing.T) {
	_, ks, ref := setupDiffer(t, "")
	diag := []string{"SHOW WARNINGS", "SHOW COUNT(*) WARNINGS", "SELECT @@warning_count", "SHOW ERRORS",
		"SHOW COUNT(*) ERRORS", "SELECT @@warning_count, @@session.error_count", "SHOW WARNINGS LIMIT 1, 1", "SHOW WARNINGS LIMIT 1",
		"SHOW WARNINGS"}
	sameOK(t, ks, ref, "INSERT INTO dw VALUES (2, 1), (1, 1)")
	// Two duplicates and a value out of range (IGNORE makes it a
	// warning): two on node1's sub-table, one on node2's.
	sameOK(t, ks, ref, "INSERT IGNORE INTO dw VALUES (2, 2), (4, 300), (1, 2)")
	same(t, ks, ref, diag...)
	sameOK(t, ks, ref, "UPDATE IGNORE dw SET v = v / 0")
	same(t, ks, ref, diag...)
	// Another statement that reads a table clears them.
	same(t, ks, ref, "SELECT v FROM dw WHERE id = 2", "SHOW WARNINGS", "SHOW COUNT(*) WARNINGS")

	// Reads whose legs warn: a fan-out and a merge (every warning says the
	// same, whatever the order of the rows).
	for _, q := range []string{"SELECT v / 0 FROM dw", "SELECT id, v / 0 FROM dw ORDER BY id", "SELECT v / 0 FROM dw WHERE id IN (1, 2) LIMIT 5"} {
		same(t, ks, ref, q)
		same(t, ks, ref, diag...)
	}

	// max_error_count keeps that many; the count is all of them.
	same(t, ks, ref, "SET SESSION max_error_count = 1")
	sameOK(t, ks, ref, "INSERT IGNORE INTO dw VALUES (2, 2), (4, 2), (1, 2)")
	same(t, ks, ref, diag...)
	same(t, ks, ref, "SET SESSION max_error_count = DEFAULT")

	// An error: SHOW ERRORS lists it (keyshard's message names the node
	// and sub-table; the errno is the server's).
	_, gerr := ks.Execute("INSERT INTO dw VALUES (6, 0), (1, 0)")
	_, werr := ref.Execute("INSERT INTO dw VALUES (6, 0), (1, 0)")
	if myErrCode(gerr) != 1062 || myErrCode(werr) != 1062 {
		t.Fatalf("duplicate key: keyshard %v, server %v", gerr, werr)
	}
	for _, q := range []string{"SHOW COUNT(*) ERRORS", "SELECT @@error_count", "SHOW COUNT(*) WARNINGS"} {
		same(t, ks, ref, q)
	}
	got, err := rowsOf(ks, "SHOW ERRORS")
	if err != nil || len(got) != 1 || got[0][0] != "Error" || got[0][1] != "1062" || !strings.Contains(got[0][2], "Duplicate entry '1' for key 'PRIMARY'") {
		t.Fatalf("SHOW ERRORS after a failed write over two sub-tables: %q, %v", got, err)
	}
	if w, _ := rowsOf(ks, "SHOW WARNINGS"); !reflect.DeepEqual(w, got) {
		t.Fatalf("SHOW WARNINGS after the error: %q, want %q", w, got)
	}

	// Two sub-tables on each node run as one batch there: the server
	// keeps the warnings of the batch's last statement only; those of
	// the first are counted, and said lost by a note of keyshard's.
	for _, c := range []*client.Conn{ks, ref} {
		gmExec(t, c, "CREATE TABLE dq (id INT PRIMARY KEY)")
		gmExec(t, c, "INSERT INTO dq VALUES (0), (1), (2), (3)")
	}
	sameOK(t, ks, ref, "INSERT IGNORE INTO dq VALUES (0), (1), (2), (3), (4)")
	same(t, ks, ref, "SHOW COUNT(*) WARNINGS", "SELECT @@warning_count")
	w, err := rowsOf(ks, "SHOW WARNINGS")
	notes := 0
	for _, r := range w {
		if r[1] == "1105" && strings.Contains(r[2], "warnings of earlier statements of its batch") {
			notes++
		}
	}
	if err != nil || len(w) != 4 || notes != 2 {
		t.Fatalf("SHOW WARNINGS after a batch on each node: %q, %v; want 2 of the server's and 2 notes", w, err)
	}
}

// COM_RESET_CONNECTION resets the session's variables as the server does:
// wait_timeout and interactive_timeout included (keyshard applies them to
// the client's connection; they read back as the global values).
func TestDifferResetConnection(t *testing.T) {
	_, ks, ref := setupDiffer(t, "")
	vars := "SELECT @@wait_timeout, @@session.wait_timeout, @@interactive_timeout, @@sql_mode, @@max_error_count"
	for _, c := range []*client.Conn{ks, ref} {
		gmExec(t, c, "SET SESSION wait_timeout = 100, interactive_timeout = 200, sql_mode = '', max_error_count = 5")
	}
	same(t, ks, ref, vars)
	for _, c := range []*client.Conn{ks, ref} {
		if p := command(t, c, mysql.COM_RESET_CONNECTION); p[0] != mysql.OK_HEADER {
			t.Fatalf("COM_RESET_CONNECTION: %x", p)
		}
	}
	same(t, ks, ref, vars)
}

// A cursor whose statement the server fails while producing its rows:
// the client gets the server's error, packet for packet as from MariaDB,
// and its connection goes on.
func TestDifferCursorError(t *testing.T) {
	d := direct(t, basePort, "")
	mustExec(t, d, "DROP DATABASE IF EXISTS ks_differ")
	mustExec(t, d, "CREATE DATABASE ks_differ")
	d = direct(t, basePort, "ks_differ")
	mustExec(t, d, "CREATE TABLE cur_e (id INT PRIMARY KEY)")
	mustExec(t, d, "INSERT INTO cur_e VALUES (1), (2), (3)")
	p := startProxy(t, baseYAML("%ADDR%"))
	run := func(t *testing.T, addr string, dep bool) []string {
		r := stmtLogin(t, addr, "ks_differ", dep)
		var trans []string
		// Fails at its second row: a subquery with more than one row.
		id, _, _ := r.mustPrepare("SELECT id, (SELECT id FROM cur_e WHERE id <= c.id) FROM cur_e c ORDER BY id")
		res := r.execute(id, 1, true)
		trans = append(trans, "execute:")
		trans = append(trans, res.trans...)
		if res.err == nil && res.metaEnd != nil && termStatus(res.metaEnd)&mysql.SERVER_STATUS_CURSOR_EXISTS != 0 {
			res = r.fetch(id, 10)
			trans = append(trans, "fetch:")
			trans = append(trans, res.trans...)
		}
		if errCode(res.err) != 1242 {
			t.Errorf("the statement's error: %v, want ERR 1242", res.trans)
		}
		res = r.fetch(id, 10)
		trans = append(trans, "fetch again:")
		trans = append(trans, res.trans...)
		r.ping("a cursor's error")
		// The connection still runs statements.
		id2, _, _ := r.mustPrepare("SELECT id FROM cur_e ORDER BY id")
		res = r.execute(id2, 1, true)
		trans = append(trans, "another cursor:")
		trans = append(trans, res.trans...)
		res = r.fetch(id2, 10)
		trans = append(trans, res.trans...)
		if len(res.rows) != 3 {
			t.Errorf("another cursor after the error: %v", res.trans)
		}
		return trans
	}
	for _, dep := range []bool{true, false} {
		t.Run(fmt.Sprintf("deprecate_eof=%v", dep), func(t *testing.T) {
			var trans [2][]string
			for i, addr := range []string{fmt.Sprintf("127.0.0.1:%d", basePort), p.Addr} {
				t.Run([]string{"mariadb", "keyshard"}[i], func(t *testing.T) { trans[i] = run(t, addr, dep) })
			}
			if !reflect.DeepEqual(trans[0], trans[1]) {
				t.Errorf("keyshard's answers differ from MariaDB's:\n%s", diffLines(trans[0], trans[1]))
			}
		})
	}
}

// processRows is SHOW FULL PROCESSLIST on c: each row by column name
// ("NULL" for NULL).
func processRows(t *testing.T, c *client.Conn) []map[string]string {
	t.Helper()
	r, err := c.Execute("SHOW FULL PROCESSLIST")
	if err != nil {
		t.Fatalf("SHOW FULL PROCESSLIST: %v", err)
	}
	var out []map[string]string
	for i := range r.RowNumber() {
		m := map[string]string{}
		for j, f := range r.Fields {
			v := "NULL"
			if null, _ := r.IsNull(i, j); !null {
				v, _ = r.GetString(i, j)
			}
			m[string(f.Name)] = v
		}
		out = append(out, m)
	}
	return out
}

// SHOW PROCESSLIST as the server shows it: the statement as sent in Info,
// NULL for an idle session's Info and for no database; a listed id ends
// its session by COM_PROCESS_KILL as by KILL.
func TestDifferProcessList(t *testing.T) {
	d := direct(t, basePort, "")
	mustExec(t, d, "DROP DATABASE IF EXISTS ks_differ")
	mustExec(t, d, "CREATE DATABASE ks_differ")
	p := startProxy(t, baseYAML("%ADDR%"))
	for i, addr := range []string{fmt.Sprintf("127.0.0.1:%d", basePort), p.Addr} {
		name := []string{"mariadb", "keyshard"}[i]
		t.Run(name, func(t *testing.T) {
			idle := dial(t, addr, "") // no database
			lister := dial(t, addr, "ks_differ")
			runner := dial(t, addr, "ks_differ")
			const stmt = "/* differ */ SELECT   SLEEP(60),\n 'a b'  AS x"
			done := make(chan error, 1)
			go func() {
				_, err := runner.Execute(stmt)
				done <- err
			}()
			var idleRow, self, running map[string]string
			for range 2000 {
				idleRow, self, running = nil, nil, nil
				for _, r := range processRows(t, lister) {
					switch r["Id"] {
					case fmt.Sprint(idle.GetConnectionID()):
						idleRow = r
					case fmt.Sprint(lister.GetConnectionID()):
						self = r
					case fmt.Sprint(runner.GetConnectionID()):
						running = r
					}
				}
				if running != nil && running["Command"] == "Query" {
					break
				}
			}
			if idleRow == nil || idleRow["Command"] != "Sleep" || idleRow["Info"] != "NULL" || idleRow["db"] != "NULL" {
				t.Errorf("an idle session without a database: %q, want Sleep, Info NULL, db NULL", idleRow)
			}
			if self == nil || self["Info"] != "SHOW FULL PROCESSLIST" || self["db"] != "ks_differ" {
				t.Errorf("the listing session: %q", self)
			}
			if running == nil || running["Info"] != stmt || running["Command"] != "Query" {
				t.Errorf("the running statement: %q, want Info %q", running, stmt)
			}
			// COM_PROCESS_KILL of the listed id (the old command).
			id := runner.GetConnectionID()
			if p := command(t, lister, mysql.COM_PROCESS_KILL, byte(id), byte(id>>8), byte(id>>16), byte(id>>24)); p[0] != mysql.OK_HEADER {
				t.Fatalf("COM_PROCESS_KILL %d: %x", id, p)
			}
			if err := <-done; err == nil {
				t.Errorf("the killed session's statement ended without an error")
			}
			if _, err := runner.Execute("SELECT 1"); err == nil {
				t.Errorf("the killed session goes on")
			}
			if _, err := lister.Execute("DO 0"); err != nil {
				t.Errorf("the killer: %v", err)
			}
		})
	}
}

// COM_CHANGE_USER to a character set the server refuses for a client
// (ucs2, utf16, utf16le, utf32) is refused as the server refuses it, and
// the session goes on as it was.
func TestDifferChangeUserCharset(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	change := func(c *userConn, coll uint16) []byte {
		b := append([]byte{mysql.COM_CHANGE_USER}, "ks\x00"...)
		auth := mysql.CalcNativePassword(c.scramble, []byte("ks"))
		b = append(append(append(b, byte(len(auth))), auth...), "ks_test\x00"...)
		b = append(b, byte(coll), byte(coll>>8))
		b = append(b, mysql.AUTH_NATIVE_PASSWORD+"\x00"...)
		ans := c.send(t, 0, b)
		if ans[0] == mysql.EOF_HEADER { // MariaDB's auth switch
			_, rest, _ := strings.Cut(string(ans[1:]), "\x00")
			c.scramble = []byte(rest[:20])
			ans = c.send(t, c.pkt.Seq, mysql.CalcNativePassword(c.scramble, []byte("ks")))
		}
		return ans
	}
	var got [2][]string
	for i, addr := range []string{fmt.Sprintf("127.0.0.1:%d", basePort), p.Addr} {
		for _, colls := range [][]uint16{{35, 54, 60}, {56, 128, 45}, {101, 160, 33}} {
			c := userLogin(t, addr)
			for _, coll := range colls {
				ans := change(c, coll)
				if ans[0] == mysql.ERR_HEADER {
					got[i] = append(got[i], fmt.Sprintf("%d: ERR %d %s", coll, binary.LittleEndian.Uint16(ans[1:]), ans[9:]))
				} else {
					got[i] = append(got[i], fmt.Sprintf("%d: %x", coll, ans[0]))
				}
				if ans := c.send(t, 0, []byte{mysql.COM_PING}); ans[0] != mysql.OK_HEADER {
					t.Fatalf("%s: COM_PING after COM_CHANGE_USER with collation %d: %q", addr, coll, ans)
				}
			}
		}
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		t.Fatalf("COM_CHANGE_USER with wide character sets:\n mariadb  %q\n keyshard %q", got[0], got[1])
	}
}
