package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	gomysql "github.com/go-sql-driver/mysql"
)

func mysqlErr(t *testing.T, err error) *gomysql.MySQLError {
	t.Helper()
	var me *gomysql.MySQLError
	if !errors.As(err, &me) {
		t.Fatalf("want a MySQL error, got %v", err)
	}
	return me
}

// Column types, NULLs, utf8mb4, empty results, OK packets and warnings.
func TestTypesAndResults(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	db := p.open(t, "ks:ks", "ks_test", "charset=utf8mb4&parseTime=true&loc=UTC")
	mustExec(t, db, "DROP TABLE IF EXISTS types_t")
	mustExec(t, db, `CREATE TABLE types_t (
		id BIGINT AUTO_INCREMENT PRIMARY KEY, ti TINYINT, si SMALLINT, mi MEDIUMINT, i INT UNSIGNED, bi BIGINT,
		f FLOAT, d DOUBLE, de DECIMAL(20,6), c CHAR(5), vc VARCHAR(100), tx TEXT, bl BLOB, vb VARBINARY(10),
		dt DATE, dtt DATETIME(6), ts TIMESTAMP NULL, tm TIME, yr YEAR, en ENUM('a','b'), st SET('x','y'), bt BIT(8), js JSON
	) DEFAULT CHARSET=utf8mb4`)
	res, err := db.Exec(`INSERT INTO types_t (ti,si,mi,i,bi,f,d,de,c,vc,tx,bl,vb,dt,dtt,ts,tm,yr,en,st,bt,js) VALUES
		(-128, -32768, 8388607, 4294967295, -9223372036854775808, 1.5, 2.25, 12345678901234.123456, 'ab', 'héllo 😀 мир', 'text',
		 x'00ff10', x'0102', '2024-02-29', '2024-02-29 23:59:59.123456', '2024-01-01 00:00:00', '-838:59:59', 2024, 'b', 'x,y', b'10101010', '{"k": [1, null]}')`)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("affected rows %d", n)
	}
	id, _ := res.LastInsertId()
	if id == 0 {
		t.Fatal("no last insert id in OK packet")
	}
	mustExec(t, db, "INSERT INTO types_t (id) VALUES (NULL)")

	var (
		ti, si, mi     int64
		i              uint64
		bi             int64
		f, d           float64
		de, c, vc, tx  string
		bl, vb         []byte
		dt, dtt, ts    time.Time
		tm, en, st, js string
		yr             int
		bt             []byte
	)
	err = db.QueryRow("SELECT ti,si,mi,i,bi,f,d,de,c,vc,tx,bl,vb,dt,dtt,ts,tm,yr,en,st,bt,js FROM types_t WHERE id=?", id).Scan(
		&ti, &si, &mi, &i, &bi, &f, &d, &de, &c, &vc, &tx, &bl, &vb, &dt, &dtt, &ts, &tm, &yr, &en, &st, &bt, &js)
	if err != nil {
		t.Fatal(err)
	}
	if ti != -128 || si != -32768 || mi != 8388607 || i != 4294967295 || bi != -9223372036854775808 || f != 1.5 || d != 2.25 ||
		de != "12345678901234.123456" || c != "ab" || vc != "héllo 😀 мир" || tx != "text" || string(bl) != "\x00\xff\x10" ||
		string(vb) != "\x01\x02" || dt.Format("2006-01-02") != "2024-02-29" || dtt.Format(time.RFC3339Nano) != "2024-02-29T23:59:59.123456Z" ||
		tm != "-838:59:59" || yr != 2024 || en != "b" || st != "x,y" || string(bt) != "\xaa" || !strings.Contains(js, `"k"`) {
		t.Fatalf("values differ: %v %v %v %v %v %v %v %q %q %q %q %x %x %v %v %v %q %v %q %q %x %q",
			ti, si, mi, i, bi, f, d, de, c, vc, tx, bl, vb, dt, dtt, ts, tm, yr, en, st, bt, js)
	}
	// NULLs in every column.
	var nulls [22]sql.RawBytes
	args := make([]any, len(nulls))
	for k := range nulls {
		args[k] = &nulls[k]
	}
	rows, err := db.Query("SELECT ti,si,mi,i,bi,f,d,de,c,vc,tx,bl,vb,dt,dtt,ts,tm,yr,en,st,bt,js FROM types_t WHERE id<>?", id)
	if err != nil {
		t.Fatal(err)
	}
	if !rows.Next() {
		t.Fatal("no row")
	}
	if err := rows.Scan(args...); err != nil {
		t.Fatal(err)
	}
	for k, v := range nulls {
		if v != nil {
			t.Errorf("column %d: want NULL, got %q", k, v)
		}
	}
	rows.Close()
	// Empty result.
	rows, err = db.Query("SELECT id FROM types_t WHERE id < 0")
	if err != nil {
		t.Fatal(err)
	}
	if cols, _ := rows.Columns(); len(cols) != 1 || cols[0] != "id" {
		t.Fatalf("columns %v", cols)
	}
	if rows.Next() {
		t.Fatal("want no rows")
	}
	rows.Close()

	// Warnings count in the OK packet, seen by a protocol-level client.
	c2, err := client.Connect(p.Addr, "ks", "ks", "ks_test")
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	r, err := c2.Execute("INSERT IGNORE INTO types_t (ti) VALUES (1000)") // out of range: clipped with a warning
	if err != nil {
		t.Fatal(err)
	}
	if r.Warnings != 1 || r.AffectedRows != 1 || r.InsertId == 0 {
		t.Fatalf("INSERT IGNORE: %+v", r)
	}
	r, err = c2.Execute("DROP TABLE IF EXISTS no_such_table_xyz")
	if err != nil {
		t.Fatal(err)
	}
	if r.Warnings != 1 {
		t.Fatalf("DROP TABLE IF EXISTS: warnings %d, want 1", r.Warnings)
	}
	// SET NAMES and a utf8mb4 round trip through a fresh session state.
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "SET NAMES utf8mb4"); err != nil {
		t.Fatal(err)
	}
	var emoji string
	if err := conn.QueryRowContext(context.Background(), "SELECT '🦀✓'").Scan(&emoji); err != nil || emoji != "🦀✓" {
		t.Fatalf("emoji round trip: %q %v", emoji, err)
	}
}

func mustExec(t *testing.T, db interface {
	Exec(string, ...any) (sql.Result, error)
}, q string, args ...any) sql.Result {
	t.Helper()
	r, err := db.Exec(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return r
}

// Two clients with different session settings share one backend connection
// (max_conns_limit 1) and each sees only its own settings.
func TestSessionIsolationOnOnePooledConnection(t *testing.T) {
	yaml := strings.Replace(baseYAML("%ADDR%"), "max_conns_limit: 16", "max_conns_limit: 1", 1)
	p := startProxy(t, yaml)
	a := p.open(t, "ks:ks", "ks_test", "")
	b := p.open(t, "ks:ks", "mysql", "")
	a.SetMaxOpenConns(1)
	b.SetMaxOpenConns(1)
	mustExec(t, a, "SET SESSION sql_mode = 'ANSI_QUOTES'")
	mustExec(t, a, "SET time_zone = '+05:00'")
	mustExec(t, b, "SET SESSION sql_mode = 'NO_ZERO_DATE'")
	mustExec(t, b, "SET NAMES latin1")
	for range 20 {
		var mode, tz, dbName, cs string
		if err := a.QueryRow("SELECT @@SESSION.sql_mode, @@SESSION.time_zone, DATABASE(), @@character_set_client").Scan(&mode, &tz, &dbName, &cs); err != nil {
			t.Fatal(err)
		}
		if mode != "ANSI_QUOTES" || tz != "+05:00" || dbName != "ks_test" || cs != "utf8mb4" {
			t.Fatalf("client a sees %q %q %q %q", mode, tz, dbName, cs)
		}
		if err := b.QueryRow("SELECT @@SESSION.sql_mode, @@SESSION.time_zone, DATABASE(), @@character_set_client").Scan(&mode, &tz, &dbName, &cs); err != nil {
			t.Fatal(err)
		}
		if mode != "NO_ZERO_DATE" || tz != "SYSTEM" || dbName != "mysql" || cs != "latin1" {
			t.Fatalf("client b sees %q %q %q %q", mode, tz, dbName, cs)
		}
	}
	// A third client with default settings sees the server defaults, not
	// whatever the last client left on the shared connection.
	c := p.open(t, "ks:ks", "ks_test", "")
	var mode, tz string
	if err := c.QueryRow("SELECT @@SESSION.sql_mode, @@SESSION.time_zone").Scan(&mode, &tz); err != nil {
		t.Fatal(err)
	}
	var globalMode string
	if err := direct(t, basePort, "").QueryRow("SELECT @@GLOBAL.sql_mode").Scan(&globalMode); err != nil {
		t.Fatal(err)
	}
	if mode != globalMode || tz != "SYSTEM" {
		t.Fatalf("default client sees sql_mode %q (global %q), time_zone %q", mode, globalMode, tz)
	}
	if st := p.Srv.Nodes()["node1"].Master.Stats(); st.Open > 1 {
		t.Fatalf("pool opened %d connections, limit is 1", st.Open)
	}
}

func TestTransactions(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	db := p.open(t, "ks:ks", "ks_test", "")
	mustExec(t, db, "CREATE TABLE IF NOT EXISTS tx_t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB")
	mustExec(t, db, "DELETE FROM tx_t")
	count := func() int {
		var n int
		if err := direct(t, basePort, "ks_test").QueryRow("SELECT COUNT(*) FROM tx_t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	ctx := context.Background()
	// ROLLBACK leaves nothing.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, tx, "INSERT INTO tx_t VALUES (1, 1)")
	mustExec(t, tx, "INSERT INTO tx_t VALUES (2, 2)")
	var inTx int
	if err := tx.QueryRow("SELECT COUNT(*) FROM tx_t").Scan(&inTx); err != nil || inTx != 2 {
		t.Fatalf("inside the transaction: %d %v", inTx, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Fatalf("after ROLLBACK: %d rows", n)
	}
	// COMMIT persists.
	tx, _ = db.BeginTx(ctx, nil)
	mustExec(t, tx, "INSERT INTO tx_t VALUES (3, 3)")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("after COMMIT: %d rows", n)
	}
	// autocommit=0 pins too.
	conn, _ := db.Conn(ctx)
	mustExecConn(t, conn, "SET autocommit = 0")
	mustExecConn(t, conn, "INSERT INTO tx_t VALUES (4, 4)")
	mustExecConn(t, conn, "ROLLBACK")
	mustExecConn(t, conn, "SET autocommit = 1")
	conn.Close()
	if n := count(); n != 1 {
		t.Fatalf("after autocommit=0 + ROLLBACK: %d rows", n)
	}
	// A client that disconnects inside a transaction has it rolled back.
	c, err := client.Connect(p.Addr, "ks", "ks", "ks_test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Execute("BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Execute("INSERT INTO tx_t VALUES (5, 5)"); err != nil {
		t.Fatal(err)
	}
	c.Close() // no COMMIT, no COM_QUIT
	deadline := time.Now().Add(5 * time.Second)
	for count() != 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := count(); n != 1 {
		t.Fatalf("after disconnect inside a transaction: %d rows", n)
	}
	// And the row lock is gone: another client can write the same key.
	mustExec(t, db, "INSERT INTO tx_t VALUES (5, 6)")
}

func mustExecConn(t *testing.T, c *sql.Conn, q string) {
	t.Helper()
	if _, err := c.ExecContext(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// LAST_INSERT_ID(), ROW_COUNT(), FOUND_ROWS() and CONNECTION_ID() answer for
// the client's own session even when other clients use the same pooled
// connection in between.
func TestPerConnectionFunctions(t *testing.T) {
	yaml := strings.Replace(baseYAML("%ADDR%"), "max_conns_limit: 16", "max_conns_limit: 1", 1)
	p := startProxy(t, yaml)
	a := p.open(t, "ks:ks", "ks_test", "")
	b := p.open(t, "ks:ks", "ks_test", "")
	a.SetMaxOpenConns(1)
	b.SetMaxOpenConns(1)
	mustExec(t, a, "DROP TABLE IF EXISTS ai_t")
	mustExec(t, a, "CREATE TABLE ai_t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
	ra := mustExec(t, a, "INSERT INTO ai_t (v) VALUES (1)")
	idA, _ := ra.LastInsertId()
	rb := mustExec(t, b, "INSERT INTO ai_t (v) VALUES (2), (3)")
	idB, _ := rb.LastInsertId()
	var got, identity uint64
	if err := a.QueryRow("SELECT LAST_INSERT_ID(), @@identity").Scan(&got, &identity); err != nil {
		t.Fatal(err)
	}
	if got != uint64(idA) || identity != uint64(idA) {
		t.Fatalf("client a: LAST_INSERT_ID() = %d, @@identity = %d, want %d (b inserted %d)", got, identity, idA, idB)
	}
	if err := b.QueryRow("SELECT LAST_INSERT_ID()").Scan(&got); err != nil || got != uint64(idB) {
		t.Fatalf("client b: LAST_INSERT_ID() = %d %v, want %d", got, err, idB)
	}
	// ROW_COUNT after an UPDATE.
	ca, _ := a.Conn(context.Background())
	defer ca.Close()
	cb, _ := b.Conn(context.Background())
	defer cb.Close()
	mustExecConn(t, ca, "UPDATE ai_t SET v = v + 10")
	mustExecConn(t, cb, "UPDATE ai_t SET v = v + 1 WHERE id = -1")
	var rc int64
	if err := ca.QueryRowContext(context.Background(), "SELECT ROW_COUNT()").Scan(&rc); err != nil || rc != 3 {
		t.Fatalf("ROW_COUNT() = %d %v, want 3", rc, err)
	}
	// FOUND_ROWS after SQL_CALC_FOUND_ROWS.
	rows, err := ca.QueryContext(context.Background(), "SELECT SQL_CALC_FOUND_ROWS id FROM ai_t LIMIT 1")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
	}
	rows.Close()
	mustExecConn(t, cb, "SELECT 1")
	var found uint64
	if err := ca.QueryRowContext(context.Background(), "SELECT FOUND_ROWS()").Scan(&found); err != nil || found != 3 {
		t.Fatalf("FOUND_ROWS() = %d %v, want 3", found, err)
	}
	// CONNECTION_ID() is the proxy's id, different per client.
	var ida, idb uint64
	if err := ca.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&ida); err != nil {
		t.Fatal(err)
	}
	if err := cb.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&idb); err != nil {
		t.Fatal(err)
	}
	if ida == idb || ida == 0 {
		t.Fatalf("CONNECTION_ID() a=%d b=%d", ida, idb)
	}
}

// A 1,000,000-row result streams through; a client that goes away in the
// middle of a result leaves the pool healthy.
func TestLargeResultAndClientGoneMidResult(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	db := p.open(t, "ks:ks", "ks_test", "")
	rows, err := db.Query("SELECT seq, REPEAT('x', 20) FROM seq_1_to_1000000")
	if err != nil {
		t.Fatal(err)
	}
	var n, last int64
	var pad string
	for rows.Next() {
		if err := rows.Scan(&last, &pad); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if n != 1_000_000 || last != 1_000_000 {
		t.Fatalf("got %d rows, last %d", n, last)
	}
	pool := p.Srv.Nodes()["node1"].Master
	before := pool.Stats()
	// Read a little of a big result, then drop the TCP connection.
	for range 3 {
		c, err := client.Connect(p.Addr, "ks", "ks", "ks_test")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ExecuteSelectStreaming("SELECT seq, REPEAT('y', 100) FROM seq_1_to_5000000", &mysql.Result{}, func(row []mysql.FieldValue) error {
			return errors.New("stop")
		}, nil); err == nil {
			t.Fatal("want the callback's error")
		}
		c.Close()
	}
	// The abandoned backend connections are closed, not returned dirty.
	deadline := time.Now().Add(10 * time.Second)
	for (pool.Stats().InUse != 0 || pool.Stats().Closed < before.Closed+3) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // a discard frees its slot a moment before it closes
	}
	after := pool.Stats()
	if after.InUse != 0 {
		t.Fatalf("%d backend connections still in use", after.InUse)
	}
	if after.Closed < before.Closed+3 {
		t.Fatalf("abandoned connections were not closed: before %+v after %+v", before, after)
	}
	var one int
	for range 20 {
		if err := db.QueryRow("SELECT 1").Scan(&one); err != nil || one != 1 {
			t.Fatalf("after abandoned results: %v", err)
		}
	}
}

// With max_conns_limit 2 and two clients holding transactions, a third
// client gets a clear error after pool_wait_timeout, not a hang.
func TestPoolExhaustion(t *testing.T) {
	yaml := strings.Replace(baseYAML("%ADDR%"), "max_conns_limit: 16", "max_conns_limit: 2", 1) + "pool_wait_timeout: 300ms\n"
	p := startProxy(t, yaml)
	var holders []*client.Conn
	for range 2 {
		c, err := client.Connect(p.Addr, "ks", "ks", "ks_test")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Execute("BEGIN"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Execute("SELECT 1"); err != nil {
			t.Fatal(err)
		}
		holders = append(holders, c)
	}
	db := p.open(t, "ks:ks", "", "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := db.ExecContext(ctx, "SELECT 1")
	if ctx.Err() != nil {
		t.Fatal("third client hung until the test's deadline")
	}
	me := mysqlErr(t, err)
	if me.Number != 1040 || !strings.Contains(me.Message, "node1") || !strings.Contains(me.Message, "pool_wait_timeout") {
		t.Fatalf("got %d %q", me.Number, me.Message)
	}
	// Once a transaction ends, the waiting client is served.
	if _, err := holders[0].Execute("COMMIT"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("SELECT 1"); err != nil {
		t.Fatalf("after a slot freed: %v", err)
	}
	if st := p.Srv.Nodes()["node1"].Master.Stats(); st.Timeouts < 1 || st.Open > 2 {
		t.Fatalf("pool stats %+v", st)
	}
}

// A dead backend gives a clear error naming the node; service resumes when
// it comes back.
func TestBackendDownAndBack(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%")+"connect_timeout: 1s\npool_wait_timeout: 1s\n")
	db := p.open(t, "other:other", "", "")
	db.SetMaxIdleConns(0)
	var one int
	if err := db.QueryRow("SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	if out, err := backends("stop", fmt.Sprint(downPort)); err != nil {
		t.Fatalf("stop: %v %s", err, out)
	}
	defer backends("start", fmt.Sprint(downPort))
	c, err := client.Connect(p.Addr, "other", "other", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Execute("SELECT 1")
	if err == nil || !strings.Contains(err.Error(), "node3") {
		t.Fatalf("want an error naming node3, got %v", err)
	}
	if !strings.Contains(err.Error(), "1429") && !strings.Contains(err.Error(), "1158") {
		t.Fatalf("want ER_CONNECT_TO_FOREIGN_DATA_SOURCE or ER_NET_READ_ERROR, got %v", err)
	}
	// The client connection survives the error.
	if _, err := c.Execute("SELECT 1"); err == nil {
		t.Fatal("backend is down; want an error")
	}
	if out, err := backends("start", fmt.Sprint(downPort)); err != nil {
		t.Fatalf("start: %v %s", err, out)
	}
	var lastErr error
	for range 50 {
		if _, lastErr = c.Execute("SELECT 1"); lastErr == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if lastErr != nil {
		t.Fatalf("service did not resume: %v", lastErr)
	}
}

// A node that is down from the start.
func TestBackendDownAtStart(t *testing.T) {
	yaml := strings.Replace(baseYAML("%ADDR%"), fmt.Sprintf("127.0.0.1:%d", downPort), "127.0.0.1:1", 1) + "connect_timeout: 1s\n"
	p := startProxy(t, yaml)
	c, err := client.Connect(p.Addr, "other", "other", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Execute("SELECT 1")
	if err == nil || !strings.Contains(err.Error(), "node node3 (127.0.0.1:1)") || !strings.Contains(err.Error(), "1429") {
		t.Fatalf("got %v", err)
	}
	// Other schemas are unaffected.
	if _, err := p.open(t, "ks:ks", "", "").Exec("SELECT 1"); err != nil {
		t.Fatal(err)
	}
}

// Many clients at once over a small pool: no errors, no leaked connections.
func TestConcurrentClients(t *testing.T) {
	yaml := strings.Replace(baseYAML("%ADDR%"), "max_conns_limit: 16", "max_conns_limit: 4", 1)
	p := startProxy(t, yaml)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := sql.Open("mysql", fmt.Sprintf("ks:ks@tcp(%s)/ks_test", p.Addr))
			if err != nil {
				errs <- err
				return
			}
			defer db.Close()
			for k := range 50 {
				var v int
				if err := db.QueryRow(fmt.Sprintf("SELECT %d", w*1000+k)).Scan(&v); err != nil || v != w*1000+k {
					errs <- fmt.Errorf("worker %d: %v (got %d)", w, err, v)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := p.Srv.Nodes()["node1"].Master.Stats(); st.InUse != 0 || st.Open > 4 {
		t.Fatalf("pool %+v", st)
	}
}
