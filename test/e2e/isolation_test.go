package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
)

// Nothing one client does to a pooled backend connection may show to the
// next client that gets it. node1 gets one connection only, so every
// client below is served by the same pooled connection whenever its flavor
// allows; each answer is compared with a direct connection to MariaDB.
func TestNoStateThroughPool(t *testing.T) {
	p := startProxy(t, strings.Replace(baseYAML("%ADDR%"), "max_conns_limit: 16", "max_conns_limit: 1", 1))
	ctx := context.Background()
	one := func(d *sql.DB) *sql.DB { d.SetMaxOpenConns(1); return d }
	directNoDB := one(direct(t, basePort, ""))

	t.Run("no default database", func(t *testing.T) {
		withDB := one(p.open(t, "ks:ks", "ks_test", ""))
		if _, err := withDB.Exec("SELECT 1"); err != nil {
			t.Fatal(err)
		}
		withDB.Close() // its backend connection, now in ks_test, goes back
		noDB := one(p.open(t, "ks:ks", "", ""))
		for _, d := range []*sql.DB{directNoDB, noDB} {
			var db sql.NullString
			if err := d.QueryRow("SELECT DATABASE()").Scan(&db); err != nil {
				t.Fatal(err)
			}
			if db.Valid {
				t.Errorf("SELECT DATABASE() on a connection without a database = %q, want NULL", db.String)
			}
			_, err := d.Exec("CREATE TABLE iso_nodb (id INT)")
			if code := myErrCode(err); code != 1046 {
				t.Errorf("CREATE TABLE without a database: %v, want 1046 No database selected", err)
			}
		}
		// And a client with a database again is served as before.
		again := one(p.open(t, "ks:ks", "ks_test", ""))
		var db string
		if err := again.QueryRow("SELECT DATABASE()").Scan(&db); err != nil || db != "ks_test" {
			t.Fatalf("DATABASE() = %q, %v; want ks_test", db, err)
		}
	})

	t.Run("CLIENT_FOUND_ROWS", func(t *testing.T) {
		setup := one(p.open(t, "ks:ks", "ks_test", ""))
		for _, q := range []string{"CREATE TABLE IF NOT EXISTS iso_found (id INT PRIMARY KEY, v INT)",
			"REPLACE INTO iso_found VALUES (1, 7)"} {
			if _, err := setup.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		// Matched 1 row, changed none: CLIENT_FOUND_ROWS reports 1, else 0,
		// alternating on the one pooled connection.
		for _, found := range []bool{true, false, true, false} {
			params := fmt.Sprintf("clientFoundRows=%v", found)
			ref := one(direct(t, basePort, "ks_test?"+params))
			ks := one(p.open(t, "ks:ks", "ks_test", params))
			for _, d := range []*sql.DB{ref, ks} {
				r, err := d.Exec("UPDATE iso_found SET v = 7 WHERE id = 1")
				if err != nil {
					t.Fatal(err)
				}
				n, _ := r.RowsAffected()
				if want := map[bool]int64{true: 1, false: 0}[found]; n != want {
					t.Errorf("clientFoundRows=%v: affected rows %d, want %d", found, n, want)
				}
			}
			ks.Close()
		}
	})

	t.Run("multi-statements after a reset", func(t *testing.T) {
		// A client without multi-statements turns the option off on the
		// connection it pins (a transaction); its end resets the
		// connection, which keeps the option off: the next client, which
		// wants it on, must get it on.
		single := one(p.open(t, "ks:ks", "ks_test", ""))
		c, err := single.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ExecContext(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ExecContext(ctx, "DO 1; DO 2"); myErrCode(err) != 1064 {
			t.Fatalf("a batch from a client without multi-statements: %v, want 1064 as MariaDB answers", err)
		}
		c.Close()
		single.Close()
		multi := one(p.open(t, "ks:ks", "ks_test", "multiStatements=true"))
		if _, err := multi.Exec("DO 1; DO 2"); err != nil {
			t.Fatalf("a batch from a client with multi-statements, on the reset connection: %v", err)
		}
	})
}

// The greeting carries the backends' identity: MariaDB's version with
// "-keyshard" for its distribution suffix, and MariaDB's capability bits
// (no CLIENT_MYSQL), so drivers choose MariaDB's dialect; server_version
// overrides it.
func TestServerIdentity(t *testing.T) {
	ref := goMySQL(t, fmt.Sprintf("127.0.0.1:%d", basePort))
	want := ref.GetServerVersion()
	i := strings.Index(want, "-MariaDB")
	if i < 0 {
		t.Fatalf("backend version %q is not MariaDB's", want)
	}
	want = want[:i+len("-MariaDB")] + "-keyshard"
	p := startProxy(t, baseYAML("%ADDR%"))
	c := goMySQL(t, p.Addr)
	if got := c.GetServerVersion(); got != want {
		t.Errorf("greeting version %q, want %q", got, want)
	}
	if c.HasCapability(mysql.CLIENT_LONG_PASSWORD) != ref.HasCapability(mysql.CLIENT_LONG_PASSWORD) {
		t.Errorf("CLIENT_MYSQL (CLIENT_LONG_PASSWORD) negotiated: keyshard %v, MariaDB %v",
			c.HasCapability(mysql.CLIENT_LONG_PASSWORD), ref.HasCapability(mysql.CLIENT_LONG_PASSWORD))
	}
	if got, direct := queryString(t, c, "SELECT VERSION()"), queryString(t, ref, "SELECT VERSION()"); got != direct {
		t.Errorf("SELECT VERSION() %q, want the backend's %q", got, direct)
	}
	p2 := startProxy(t, baseYAML("%ADDR%")+"server_version: 8.0.36-keyshard\n")
	if got := goMySQL(t, p2.Addr).GetServerVersion(); got != "8.0.36-keyshard" {
		t.Errorf("with server_version set: greeting %q", got)
	}
}

// userConn is a hand-made client connection: the greeting's scramble in
// hand, so that COM_CHANGE_USER can be answered as libmariadb does.
type userConn struct {
	pkt      *wire.Conn
	scramble []byte
}

// userLogin logs in as ks/ks to ks_test with mysql_native_password.
func userLogin(t *testing.T, addr string) *userConn { return userLoginDB(t, addr, "ks_test") }

// userLoginDB logs in as ks/ks to db, as a MariaDB client that takes bulk
// execution (MARIADB_CLIENT_STMT_BULK_OPERATIONS).
func userLoginDB(t *testing.T, addr, db string) *userConn {
	t.Helper()
	return userLoginExt(t, addr, db, backend.MariaDBBulkOperations)
}

// userLoginExt logs in as ks/ks to db, as a MariaDB client with extended
// capabilities ext.
func userLoginExt(t *testing.T, addr, db string, ext uint32) *userConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &userConn{pkt: wire.NewConn(nc, 4096, 4096)}
	g, err := c.pkt.ReadPacket()
	if err != nil || len(g) < 1 || g[0] != 10 {
		t.Fatalf("greeting: %q, %v", g, err)
	}
	_, pos, _ := wire.ReadNulString(g, 1)
	c.scramble = append([]byte(nil), g[pos+4:pos+12]...)
	pos += 4 + 8 + 1 + 2 + 1 + 2 + 2 + 1 + 10
	c.scramble = append(c.scramble, g[pos:pos+12]...)
	caps := uint32(mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_SECURE_CONNECTION | mysql.CLIENT_PLUGIN_AUTH |
		mysql.CLIENT_CONNECT_WITH_DB | mysql.CLIENT_DEPRECATE_EOF)
	b := binary.LittleEndian.AppendUint32(nil, caps)
	b = binary.LittleEndian.AppendUint32(b, 1<<24)
	b = append(b, 45)
	b = append(b, make([]byte, 19)...)
	b = binary.LittleEndian.AppendUint32(b, ext)
	b = append(b, "ks\x00"...)
	auth := mysql.CalcNativePassword(c.scramble, []byte("ks"))
	b = append(append(b, byte(len(auth))), auth...)
	b = append(append(b, db...), 0)
	b = append(b, mysql.AUTH_NATIVE_PASSWORD+"\x00"...)
	if ans := c.send(t, 1, b); ans[0] != mysql.OK_HEADER {
		t.Fatalf("login: %q", ans)
	}
	return c
}

// send writes one packet with sequence id seq and reads the answer's
// first packet.
func (c *userConn) send(t *testing.T, seq uint8, p []byte) []byte {
	t.Helper()
	c.pkt.Seq = seq
	if err := c.pkt.WritePacket(p); err != nil || c.pkt.Flush() != nil {
		t.Fatalf("write: %v", err)
	}
	ans, err := c.pkt.ReadPacket()
	if err != nil || len(ans) == 0 {
		t.Fatalf("read: %q, %v", ans, err)
	}
	return ans
}

// changeUser sends COM_CHANGE_USER with mysql_native_password's answer over
// the greeting's scramble, as libmariadb does, and answers an auth switch
// if one comes (switched says so).
func (c *userConn) changeUser(t *testing.T, user, password, db string) (ans []byte, switched bool) {
	t.Helper()
	b := append([]byte{mysql.COM_CHANGE_USER}, user...)
	auth := mysql.CalcNativePassword(c.scramble, []byte(password))
	b = append(append(append(b, 0, byte(len(auth))), auth...), db...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint16(b, 45)
	b = append(b, mysql.AUTH_NATIVE_PASSWORD+"\x00"...)
	ans = c.send(t, 0, b)
	if ans[0] != mysql.EOF_HEADER {
		return ans, false
	}
	_, rest, _ := bytes.Cut(ans[1:], []byte{0})
	c.scramble = append([]byte(nil), rest[:20]...)
	return c.send(t, c.pkt.Seq, mysql.CalcNativePassword(c.scramble, []byte(password))), true
}

// COM_CHANGE_USER answered over the greeting's scramble (libmariadb's
// mysql_change_user, mysqlclient) succeeds, and a failed change leaves the
// session usable, as with MariaDB (which may first switch to a fresh
// scramble; keyshard takes the answer it was given, with no switch).
func TestComChangeUserSameScramble(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	for _, addr := range []string{fmt.Sprintf("127.0.0.1:%d", basePort), p.Addr} {
		c := userLogin(t, addr)
		ans, switched := c.changeUser(t, "ks", "ks", "ks_test")
		if ans[0] != mysql.OK_HEADER {
			t.Fatalf("%s: COM_CHANGE_USER ks/ks: %q, want OK", addr, ans)
		}
		if addr == p.Addr && switched {
			t.Errorf("keyshard asked for an auth switch: the answer over the greeting's scramble was not taken")
		}
		if ans, _ := c.changeUser(t, "ks", "wrong", "ks_test"); ans[0] != mysql.ERR_HEADER ||
			binary.LittleEndian.Uint16(ans[1:]) != mysql.ER_ACCESS_DENIED_ERROR {
			t.Fatalf("%s: COM_CHANGE_USER with a wrong password: %q, want ERR 1045", addr, ans)
		}
		if ans := c.send(t, 0, []byte{mysql.COM_PING}); ans[0] != mysql.OK_HEADER {
			t.Fatalf("%s: COM_PING after a failed COM_CHANGE_USER: %q, want OK (the session goes on)", addr, ans)
		}
	}
}

// The server's max_prepared_stmt_count is server-wide, and keyshard keeps
// statements prepared on its pooled connections for the next client:
// when a PREPARE meets the limit (1461), the connection's cached
// statements are closed and the PREPARE tried again, so prepare/close
// churn through keyshard works as it does directly.
func TestPreparedStatementLimit(t *testing.T) {
	root := func(q string) {
		t.Helper()
		if out, err := backends("sql", fmt.Sprint(basePort), q); err != nil {
			t.Fatalf("%s: %v\n%s", q, err, out)
		}
	}
	root("SET GLOBAL max_prepared_stmt_count = 8")
	t.Cleanup(func() { root("SET GLOBAL max_prepared_stmt_count = DEFAULT") })
	p := startProxy(t, strings.Replace(baseYAML("%ADDR%"), "max_conns_limit: 16", "max_conns_limit: 1", 1))
	db := p.open(t, "ks:ks", "ks_test", "")
	db.SetMaxOpenConns(1)
	for i := range 40 {
		st, err := db.Prepare(fmt.Sprintf("SELECT %d + ?", i))
		if err != nil {
			t.Fatalf("PREPARE #%d: %v", i, err)
		}
		var got int
		if err := st.QueryRow(1).Scan(&got); err != nil || got != i+1 {
			t.Fatalf("EXECUTE #%d: %d, %v", i, got, err)
		}
		st.Close()
	}
}

// Clients that connect with a database, one after another, are served by
// the pool's connections: connecting selects the database on a pooled
// connection (whatever it had), not on a new one.
func TestConnectWithDatabaseReusesPool(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	pool := p.Srv.Nodes()["node1"].Master
	dials := func() int64 { return pool.Stats().Dials }
	for range 3 { // let the warm set settle, and every flavor be dialed once
		c := goMySQL(t, p.Addr)
		queryString(t, c, "SELECT 1")
		c.Close()
	}
	before := dials()
	for i := range 20 {
		c := goMySQL(t, p.Addr)
		if v := queryString(t, c, "SELECT DATABASE()"); v != "ks_test" {
			t.Fatalf("connection %d: DATABASE() = %q", i, v)
		}
		c.Close()
	}
	if d := dials() - before; d > 2 {
		t.Errorf("20 connections with a database dialed %d backend connections; want the pooled ones reused", d)
	}
}

// A USE the proxy does not see as one (behind a comment, in a batch) still
// moves the session and its backend connection: the server's session-state
// tracking says so. The next client with the old database must not land
// in the new one.
func TestDatabaseChangeSeenInSessionState(t *testing.T) {
	p := startProxy(t, strings.Replace(baseYAML("%ADDR%"), "max_conns_limit: 16", "max_conns_limit: 1", 1))
	a := p.open(t, "ks:ks", "ks_test", "")
	a.SetMaxOpenConns(1)
	// Not pinned (a batch would pin, and the connection be reset): the
	// connection goes back to the pool as the statement left it.
	if _, err := a.Exec("USE mysql -- moved"); err != nil {
		t.Fatal(err)
	}
	var db string
	if err := a.QueryRow("SELECT DATABASE()").Scan(&db); err != nil || db != "mysql" {
		t.Fatalf("after USE behind a comment: DATABASE() = %q, %v", db, err)
	}
	a.Close()
	b := p.open(t, "ks:ks", "ks_test", "")
	b.SetMaxOpenConns(1)
	if err := b.QueryRow("SELECT DATABASE()").Scan(&db); err != nil || db != "ks_test" {
		t.Fatalf("the next client, connected to ks_test: DATABASE() = %q, %v", db, err)
	}
}

// SET wait_timeout applies to the client's own connection, as on MariaDB:
// an idle client is disconnected. The pooled backend connection that ran
// the SET keeps the server's timeout, so the next client that gets it
// (here within the pool's no-ping window) finds it alive.
func TestWaitTimeoutOnClient(t *testing.T) {
	p := startProxy(t, strings.Replace(baseYAML("%ADDR%"), "max_conns_limit: 16", "max_conns_limit: 1", 1))
	for _, addr := range []string{fmt.Sprintf("127.0.0.1:%d", basePort), p.Addr} {
		c := goMySQL(t, addr)
		if _, err := c.Execute("SET SESSION wait_timeout = 1"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if addr == p.Addr {
			next := p.open(t, "ks:ks", "ks_test", "")
			next.SetMaxOpenConns(1)
			time.Sleep(1500 * time.Millisecond)
			if _, err := next.Exec("DO 1"); err != nil {
				t.Fatalf("the next client on the backend connection that ran SET wait_timeout = 1: %v", err)
			}
			next.Close()
		}
		time.Sleep(2500*time.Millisecond - time.Since(start))
		if _, err := c.Execute("SELECT 1"); err == nil {
			t.Errorf("%s: a client idle past its wait_timeout was not disconnected", addr)
		}
	}
}

// A backend connection that dies while it holds the session's state (a
// user variable here) takes the client's connection with it, after one
// error, as the server's own death would: going on would answer from a
// fresh connection without that state (SELECT @v returning NULL).
func TestLostStateEndsSession(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	c := goMySQL(t, p.Addr)
	if _, err := c.Execute("SET @v = 1"); err != nil {
		t.Fatal(err)
	}
	backendID := queryString(t, c, "SELECT @@pseudo_thread_id")
	if _, err := direct(t, basePort, "").Exec("KILL CONNECTION " + backendID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	r, err := c.Execute("SELECT @v")
	if err == nil {
		t.Fatalf("SELECT @v after its backend connection died: %v, want an error", r.Values)
	}
	if !strings.Contains(err.Error(), "held user variables") {
		t.Errorf("error %v does not say the session's state was lost", err)
	}
	if _, err := c.Execute("SELECT 1"); err == nil {
		t.Error("the session went on without its user variables")
	}
}

// The same when the session's own query finds the connection dead: text
// EXECUTE of a sharded statement reads its user variables from the
// pinned connection first.
func TestLostStateEndsSessionOnOwnQuery(t *testing.T) {
	c := shardUserConn(t)
	ctx := context.Background()
	mustExecConn(t, c, "PREPARE ins FROM 'INSERT INTO sh_user (id, name) VALUES (?, ?)'")
	mustExecConn(t, c, "SET @id = 7, @name = 'x'")
	var backendID string
	if err := c.QueryRowContext(ctx, "SELECT @@pseudo_thread_id").Scan(&backendID); err != nil {
		t.Fatal(err)
	}
	if _, err := direct(t, basePort, "").Exec("KILL CONNECTION " + backendID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := c.ExecContext(ctx, "EXECUTE ins USING @id, @name"); err == nil {
		t.Fatal("EXECUTE with the user variables' connection dead: no error")
	}
	if err := c.PingContext(ctx); err == nil {
		t.Error("the session went on without its user variables and prepared statement")
	}
}

// A refused COM_CHANGE_USER is answered after a pause, and after the
// third the connection takes no more (1047 Unknown command) but goes on,
// as on MariaDB: one connection cannot try password after password.
func TestComChangeUserRefusals(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	for _, addr := range []string{fmt.Sprintf("127.0.0.1:%d", basePort), p.Addr} {
		c := userLogin(t, addr)
		for i := 1; i <= 3; i++ {
			start := time.Now()
			ans, _ := c.changeUser(t, "ks", fmt.Sprintf("wrong%d", i), "ks_test")
			if ans[0] != mysql.ERR_HEADER || binary.LittleEndian.Uint16(ans[1:]) != mysql.ER_ACCESS_DENIED_ERROR {
				t.Fatalf("%s: refusal %d: %q, want ERR 1045", addr, i, ans)
			}
			if d := time.Since(start); d < 900*time.Millisecond {
				t.Errorf("%s: refusal %d answered after %v, want a pause of about a second", addr, i, d)
			}
			if ans := c.send(t, 0, []byte{mysql.COM_PING}); ans[0] != mysql.OK_HEADER {
				t.Fatalf("%s: after refusal %d: %q, want the session to go on", addr, i, ans)
			}
		}
		// The right password no longer helps: the command is refused.
		if ans, _ := c.changeUser(t, "ks", "ks", "ks_test"); ans[0] != mysql.ERR_HEADER || binary.LittleEndian.Uint16(ans[1:]) != mysql.ER_UNKNOWN_COM_ERROR {
			t.Fatalf("%s: COM_CHANGE_USER after three refusals: %q, want ERR 1047", addr, ans)
		}
		if ans := c.send(t, 0, []byte{mysql.COM_PING}); ans[0] != mysql.OK_HEADER {
			t.Fatalf("%s: COM_PING after the fourth COM_CHANGE_USER: %q, want OK", addr, ans)
		}
	}
}

// A new session starts from the server's globals, as on MariaDB: pooled
// connections opened before a SET GLOBAL (run through keyshard) do not
// keep the old values, and the greeting and login OK report the server's
// autocommit, not a made-up one.
func TestGlobalsReachPooledConnections(t *testing.T) {
	root := direct(t, basePort, "")
	t.Cleanup(func() {
		mustExec(t, root, "SET GLOBAL div_precision_increment = 4")
		mustExec(t, root, "SET GLOBAL autocommit = 1")
	})
	p := startProxy(t, serverAdmin(strings.Replace(baseYAML("%ADDR%"), "max_conns_limit: 16", "max_conns_limit: 2", 1)))
	first := p.open(t, "ks:ks", "ks_test", "")
	var before int
	if err := first.QueryRow("SELECT @@div_precision_increment").Scan(&before); err != nil || before != 4 {
		t.Fatalf("@@div_precision_increment = %d, %v", before, err)
	}
	mustExec(t, first, "SET GLOBAL div_precision_increment = 9")
	mustExec(t, first, "SET GLOBAL autocommit = 0")
	for _, addr := range []string{fmt.Sprintf("127.0.0.1:%d", basePort), p.Addr} {
		c := goMySQL(t, addr)
		if c.IsAutoCommit() {
			t.Errorf("%s: login reports autocommit on; the server's global is off", addr)
		}
		r, err := c.Execute("SELECT @@div_precision_increment, @@autocommit")
		if err != nil {
			t.Fatal(err)
		}
		dpi, _ := r.GetInt(0, 0)
		ac, _ := r.GetInt(0, 1)
		if dpi != 9 || ac != 0 || c.IsAutoCommit() {
			t.Errorf("%s: a new session sees div_precision_increment %d, autocommit %d (status %v); want 9, 0",
				addr, dpi, ac, c.IsAutoCommit())
		}
	}
	// And the next greeting says so too.
	c := goMySQL(t, p.Addr)
	if c.IsAutoCommit() {
		t.Error("greeting and login report autocommit on")
	}
}

// SET learns the new values without statements of keyshard's own on the
// client's connection: SHOW PROFILES shows what it shows directly. And a
// profiling history is the session's alone: the next client on the
// pooled connection does not see it (COM_RESET_CONNECTION keeps it).
func TestProfilingHistory(t *testing.T) {
	p := startProxy(t, strings.Replace(baseYAML("%ADDR%"), "max_conns_limit: 16", "max_conns_limit: 1", 1))
	ctx := context.Background()
	script := []string{"SET profiling = 1", "SET sql_mode = 'ANSI_QUOTES'", "SET time_zone = @@global.time_zone",
		"SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", "SET div_precision_increment = DEFAULT", "SELECT 'secret'"}
	profiles := func(d *sql.DB) []string {
		defer d.Close() // the session ends: its connection is given back
		c, err := d.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, q := range script {
			if _, err := c.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		var iso string
		if err := c.QueryRowContext(ctx, "SELECT @@tx_isolation").Scan(&iso); err != nil || iso != "READ-COMMITTED" {
			t.Fatalf("@@tx_isolation = %q, %v", iso, err)
		}
		return queryColConn(t, c, "SHOW PROFILES", 2)
	}
	want := profiles(direct(t, basePort, "ks_test"))
	got := profiles(p.open(t, "ks:ks", "ks_test", ""))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("SHOW PROFILES through keyshard:\n%s\nwant (direct):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	next := p.open(t, "ks:ks", "ks_test", "")
	c, err := next.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, "SET profiling = 1"); err != nil {
		t.Fatal(err)
	}
	for _, q := range queryColConn(t, c, "SHOW PROFILES", 2) {
		if strings.Contains(q, "secret") {
			t.Errorf("the next client's SHOW PROFILES shows the previous client's %q", q)
		}
	}
}

// queryColConn returns column col of every row of q on c, as text.
func queryColConn(t *testing.T, c *sql.Conn, q string, col int) []string {
	t.Helper()
	rows, err := c.QueryContext(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range scanRows(t, rows) {
		out = append(out, r[col])
	}
	return out
}

// MariaDB's progress reports reach a client that asked for them, as they
// come (told apart from an error), and no other: a long ALTER TABLE sends
// them once progress_report_time has passed.
func TestProgressReports(t *testing.T) {
	d := direct(t, basePort, "ks_test")
	mustExec(t, d, "DROP TABLE IF EXISTS prog_t")
	mustExec(t, d, "CREATE TABLE prog_t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB")
	mustExec(t, d, "INSERT INTO prog_t SELECT seq, seq FROM seq_1_to_2500000")
	t.Cleanup(func() { mustExec(t, d, "DROP TABLE IF EXISTS prog_t") })
	p := startProxy(t, baseYAML("%ADDR%"))
	query := func(c *userConn, q string) (progress int, last []byte) {
		ans := c.send(t, 0, append([]byte{mysql.COM_QUERY}, q...))
		for wire.IsProgress(ans) {
			progress++
			var err error
			if ans, err = c.pkt.ReadPacket(); err != nil {
				t.Fatal(err)
			}
		}
		return progress, ans
	}
	for _, want := range []bool{true, false} {
		var ext uint32
		if want {
			ext = backend.MariaDBProgress
		}
		c := userLoginExt(t, p.Addr, "ks_test", ext)
		if n, ans := query(c, "SET progress_report_time = 1"); n != 0 || ans[0] != mysql.OK_HEADER {
			t.Fatalf("SET: %d reports, %q", n, ans)
		}
		start := time.Now()
		n, ans := query(c, "ALTER TABLE prog_t FORCE, ALGORITHM=COPY")
		if ans[0] != mysql.OK_HEADER {
			t.Fatalf("ALTER TABLE: %q", ans)
		}
		took := time.Since(start)
		switch {
		case want && n == 0 && took < 1200*time.Millisecond:
			t.Fatalf("ALTER TABLE took %v, too short for a report (progress_report_time = 1): prog_t must grow", took)
		case want && n == 0:
			t.Errorf("a client with MARIADB_CLIENT_PROGRESS got no progress report from a %v ALTER TABLE", took)
		case !want && n != 0:
			t.Errorf("a client without MARIADB_CLIENT_PROGRESS got %d progress reports", n)
		}
		t.Logf("progress %v: %d reports in %v", want, n, took)
	}
}

// A statement the client closes is closed on the backend too (with the
// connection's next command), as on the server: statements no client
// holds do not count against the server-wide max_prepared_stmt_count.
// One still held by another client stays.
func TestClosedStatementsLeaveServer(t *testing.T) {
	ctx := context.Background()
	root := direct(t, basePort, "")
	count := func() int {
		var name string
		var n int
		if err := root.QueryRow("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	p := startProxy(t, strings.Replace(baseYAML("%ADDR%"), "max_conns_limit: 16", "max_conns_limit: 1", 1))
	db := p.open(t, "ks:ks", "ks_test", "")
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	other := p.open(t, "ks:ks", "ks_test", "")
	kept, err := other.Prepare("SELECT ? + 100")
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	base := count()
	var stmts []*sql.Stmt
	for i := range 5 {
		st, err := c.PrepareContext(ctx, fmt.Sprintf("SELECT ? + %d", i))
		if err != nil {
			t.Fatal(err)
		}
		var v int
		if err := st.QueryRowContext(ctx, 1).Scan(&v); err != nil || v != 1+i {
			t.Fatalf("execute: %d, %v", v, err)
		}
		stmts = append(stmts, st)
	}
	// The statement "other" holds, executed here too, must stay.
	var v int
	if err := c.QueryRowContext(ctx, "SELECT 1").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != base+5 {
		t.Fatalf("Prepared_stmt_count %d with 5 statements open, want %d", n, base+5)
	}
	for _, st := range stmts {
		st.Close()
	}
	if err := c.QueryRowContext(ctx, "SELECT 1").Scan(&v); err != nil { // the closes go out with it
		t.Fatal(err)
	}
	if n := count(); n != base {
		t.Errorf("Prepared_stmt_count %d after the client closed its 5 statements, want %d", n, base)
	}
	if err := kept.QueryRow(2).Scan(&v); err != nil || v != 102 {
		t.Errorf("the statement another client holds: %d, %v", v, err)
	}
	if n := count(); n != base {
		t.Errorf("Prepared_stmt_count %d after executing the held statement, want %d", n, base)
	}
}

// KILL inside a multi-statement batch kills keyshard's session (its ids
// are keyshard's) and the batch goes on, as on the server; a KILL that
// fails ends the batch with the server's error, after what ran before it.
func TestKillInBatch(t *testing.T) {
	ctx := context.Background()
	p := startProxy(t, baseYAML("%ADDR%"))
	target, err := p.open(t, "ks:ks", "ks_test", "").Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	var id int64
	if err := target.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	// results reads every result set of a batch: their first columns, and
	// the error that ended it.
	results := func(d *sql.DB, batch string) (got []string, err error) {
		rows, err := d.QueryContext(ctx, batch)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for {
			for rows.Next() {
				var v string
				if err := rows.Scan(&v); err != nil {
					return got, err
				}
				got = append(got, v)
			}
			if !rows.NextResultSet() {
				return got, rows.Err()
			}
		}
	}
	ks := p.open(t, "ks:ks", "ks_test", "multiStatements=true")
	got, err := results(ks, fmt.Sprintf("SELECT 1; KILL QUERY %d; SELECT 2", id))
	if err != nil || strings.Join(got, ",") != "1,2" {
		t.Fatalf("KILL QUERY in a batch: %q, %v", got, err)
	}
	got, err = results(ks, fmt.Sprintf("SELECT 3; KILL %d; SELECT 4", id))
	if err != nil || strings.Join(got, ",") != "3,4" {
		t.Fatalf("KILL in a batch: %q, %v", got, err)
	}
	var one int
	if err := target.QueryRowContext(ctx, "SELECT 1").Scan(&one); err == nil {
		t.Error("the killed session still answers")
	}
	// A failing KILL ends the batch as on the server.
	ref := direct(t, basePort, "ks_test?multiStatements=true")
	for _, d := range []*sql.DB{ref, ks} {
		got, err := results(d, "SELECT 5; KILL 4000000000; SELECT 6")
		if strings.Join(got, ",") != "5" || myErrCode(err) != mysql.ER_NO_SUCH_THREAD {
			t.Errorf("a failing KILL in a batch: %q, %v; want [5] and error 1094", got, err)
		}
	}
}
