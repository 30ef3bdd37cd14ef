package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	gomysql "github.com/go-sql-driver/mysql"
)

// Bulk traffic end to end: packets of 16 MiB and more both ways, LOAD DATA
// LOCAL INFILE streamed without buffering, stored procedures and
// multi-statement batches with several results, EXECUTE packets with the
// wrong parameter count, and a sysbench run with prepared statements.
// Every test uses its own bulk_* database on the default node's backend,
// named after the test process so that concurrent runs do not collide.

// bulkDB (re)creates database bulk_<short>_<pid> on the default node's
// backend and returns its name and a direct handle to it.
func bulkDB(t *testing.T, short string) (string, *sql.DB) {
	t.Helper()
	name := fmt.Sprintf("bulk_%s_%d", short, os.Getpid())
	d := direct(t, basePort, "")
	mustExec(t, d, "DROP DATABASE IF EXISTS "+name)
	mustExec(t, d, "CREATE DATABASE "+name)
	t.Cleanup(func() { _, _ = d.Exec("DROP DATABASE IF EXISTS " + name) })
	return name, direct(t, basePort, name)
}

// commandCount is keyshard_queries_total for one command (both results).
func commandCount(t *testing.T, p *testProxy, command string) float64 {
	t.Helper()
	mfs, err := p.Srv.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "keyshard_queries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "command" && l.GetValue() == command {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// commandDeltas runs f and returns by how much each command's count grew.
func commandDeltas(t *testing.T, p *testProxy, f func(), commands ...string) map[string]float64 {
	t.Helper()
	before := map[string]float64{}
	for _, c := range commands {
		before[c] = commandCount(t, p, c)
	}
	f()
	out := map[string]float64{}
	for _, c := range commands {
		out[c] = commandCount(t, p, c) - before[c]
	}
	return out
}

// randomBytes returns n deterministic pseudo-random bytes: every byte
// value (so also those a text query must escape), and no period that a
// chunk copied to the wrong offset could hide behind.
func randomBytes(n int, seed byte) []byte {
	b := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{seed}).Read(b)
	return b
}

// A 40 MiB LONGBLOB travels through keyshard in logical packets of 16 MiB
// and more both ways: into the backend as a prepared EXECUTE carrying the
// value inline, as one 40 MiB COM_STMT_SEND_LONG_DATA, and as a text query;
// back out as a text and as a binary row. A 70 MiB command is over the
// default max_allowed_packet (64 MiB): ERR 1153 to a real client.
// (TestPacketTooLarge checks the limit with raw framing at 1 MiB.)
func TestBulkLargePackets(t *testing.T) {
	dbName, d := bulkDB(t, "pkt")
	mustExec(t, d, "CREATE TABLE bulk_blob (id INT PRIMARY KEY, b LONGBLOB)")
	p := startProxy(t, baseYAML("%ADDR%")) // max_allowed_packet: the default, 64 MiB
	const size = 40 << 20
	// go-sql-driver sends a value inline in the EXECUTE when it is under
	// maxAllowedPacket/(params+1), else as long data.
	inline := p.open(t, "ks:ks", dbName, "maxAllowedPacket=134217728")
	long := p.open(t, "ks:ks", dbName, "")
	text := p.open(t, "ks:ks", dbName, "interpolateParams=true")
	blobs := map[int][]byte{}
	for _, c := range []struct {
		id   int
		db   *sql.DB
		how  string
		want map[string]float64 // command count deltas
	}{
		{1, inline, "prepared, value inline in a 40 MiB EXECUTE", map[string]float64{"stmt_execute": 1, "stmt_send_long_data": 0, "query": 0}},
		{2, long, "prepared, value as 40 MiB of long data", map[string]float64{"stmt_execute": 1, "stmt_send_long_data": 1, "query": 0}},
		{3, text, "text query (interpolateParams=true)", map[string]float64{"stmt_execute": 0, "stmt_send_long_data": 0, "query": 1}},
	} {
		blob := randomBytes(size, byte(c.id))
		blobs[c.id] = blob
		got := commandDeltas(t, p, func() {
			if _, err := c.db.Exec("INSERT INTO bulk_blob (id, b) VALUES (?, ?)", c.id, blob); err != nil {
				t.Fatalf("id %d, %s: %v", c.id, c.how, err)
			}
		}, "stmt_execute", "stmt_send_long_data", "query")
		if !reflect.DeepEqual(got, c.want) {
			t.Fatalf("id %d, %s: keyshard counted commands %v, want %v (not the protocol path under test)", c.id, c.how, got, c.want)
		}
	}
	// The backend holds exactly the bytes sent.
	for id, blob := range blobs {
		var n int
		var sum string
		if err := d.QueryRow("SELECT LENGTH(b), SHA2(b, 256) FROM bulk_blob WHERE id = ?", id).Scan(&n, &sum); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("%x", sha256.Sum256(blob)); n != size || sum != want {
			t.Fatalf("backend row %d: %d bytes sha256 %s, want %d bytes %s", id, n, sum, size, want)
		}
	}
	// Read back through keyshard: every row in at least one protocol, the
	// text query's row in both.
	for _, c := range []struct {
		id           int
		text, binary bool
	}{{1, true, false}, {2, false, true}, {3, true, true}} {
		id, blob := c.id, blobs[c.id]
		var got []byte
		if c.text {
			cmds := commandDeltas(t, p, func() {
				if err := inline.QueryRow(fmt.Sprintf("SELECT b FROM bulk_blob WHERE id = %d", id)).Scan(&got); err != nil {
					t.Fatalf("text SELECT of row %d: %v", id, err)
				}
			}, "query", "stmt_execute")
			if cmds["query"] != 1 || cmds["stmt_execute"] != 0 {
				t.Fatalf("text SELECT: commands %v", cmds)
			}
			if !bytes.Equal(got, blob) {
				t.Fatalf("text SELECT of row %d: %d bytes, sha256 %x; want %d bytes, %x", id, len(got), sha256.Sum256(got), size, sha256.Sum256(blob))
			}
		}
		if !c.binary {
			continue
		}
		got = nil
		cmds := commandDeltas(t, p, func() {
			if err := inline.QueryRow("SELECT b FROM bulk_blob WHERE id = ?", id).Scan(&got); err != nil {
				t.Fatalf("prepared SELECT of row %d: %v", id, err)
			}
		}, "query", "stmt_execute")
		if cmds["query"] != 0 || cmds["stmt_execute"] != 1 {
			t.Fatalf("prepared SELECT: commands %v", cmds)
		}
		if !bytes.Equal(got, blob) {
			t.Fatalf("prepared SELECT of row %d: %d bytes, sha256 %x; want %d bytes, %x", id, len(got), sha256.Sum256(got), size, sha256.Sum256(blob))
		}
	}
	clear(blobs)

	// 70 MiB in one text query, from a client that allows itself 128 MiB.
	big := p.open(t, "ks:ks", dbName, "interpolateParams=true&maxAllowedPacket=134217728")
	_, err := big.Exec("INSERT INTO bulk_blob (id, b) VALUES (?, ?)", 9, bytes.Repeat([]byte{'x'}, 70<<20))
	if me := mysqlErr(t, err); me.Number != mysql.ER_NET_PACKET_TOO_LARGE {
		t.Fatalf("70 MiB query over the default max_allowed_packet: %d %q, want 1153", me.Number, me.Message)
	}
	var n int
	if err := d.QueryRow("SELECT COUNT(*) FROM bulk_blob WHERE id = 9").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the refused 70 MiB INSERT reached the backend: %d rows %v", n, err)
	}
	if err := inline.QueryRow("SELECT COUNT(*) FROM bulk_blob").Scan(&n); err != nil || n != 3 {
		t.Fatalf("after ERR 1153: %d rows %v, want 3", n, err)
	}
}

// rowGen generates LOAD DATA rows "<id>\t<pad>\n" for ids 1..n without
// holding more than one row.
type rowGen struct {
	n, next int
	pad     string
	row     []byte
	pending []byte
	bytes   int64
}

func (g *rowGen) Read(p []byte) (int, error) {
	total := 0
	for len(p) > 0 {
		if len(g.pending) == 0 {
			if g.next == g.n {
				break
			}
			g.next++
			g.row = strconv.AppendInt(g.row[:0], int64(g.next), 10)
			g.row = append(g.row, '\t')
			g.row = append(g.row, g.pad...)
			g.row = append(g.row, '\n')
			g.pending = g.row
		}
		c := copy(p, g.pending)
		g.pending = g.pending[c:]
		p = p[c:]
		total += c
	}
	g.bytes += int64(total)
	if total == 0 {
		return 0, io.EOF
	}
	return total, nil
}

// heapPeak samples HeapInuse every 20 ms until stop is called, which
// returns the largest value seen and the number of samples.
func heapPeak() (stop func() (peak uint64, samples int)) {
	var peak uint64
	var samples int
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			samples++
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() (uint64, int) {
		close(done)
		wg.Wait()
		return peak, samples
	}
}

// LOAD DATA LOCAL INFILE of 100 MB streams through keyshard: every row
// lands, and keyshard (in this process) never holds the file. A client
// that did not enable LOCAL INFILE is refused as MariaDB refuses it, and
// its connection goes on.
func TestBulkLoadDataLocal(t *testing.T) {
	dbName, d := bulkDB(t, "load")
	mustExec(t, d, "CREATE TABLE bulk_load_t (id INT PRIMARY KEY, pad VARCHAR(1000) NOT NULL)")
	p := startProxy(t, baseYAML("%ADDR%"))
	const rows = 100_000
	pad := strings.Repeat("p", 1000) // lines of 1003 to 1008 bytes: over 100 MB
	gen := &rowGen{n: rows, pad: pad}
	name := fmt.Sprintf("bulk_rows_%p", gen)
	gomysql.RegisterReaderHandler(name, func() io.Reader { return gen })
	t.Cleanup(func() { gomysql.DeregisterReaderHandler(name) })
	db := p.open(t, "ks:ks", dbName, "")
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.PingContext(ctx); err != nil {
		t.Fatal(err)
	}

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	stop := heapPeak()
	start := time.Now()
	res, err := conn.ExecContext(ctx, "LOAD DATA LOCAL INFILE 'Reader::"+name+"' INTO TABLE bulk_load_t (id, pad)")
	took := time.Since(start)
	peak, samples := stop()
	if err != nil {
		t.Fatalf("LOAD DATA LOCAL INFILE: %v", err)
	}
	if gen.bytes < 100_000_000 {
		t.Fatalf("the reader produced only %d bytes", gen.bytes)
	}
	if n, _ := res.RowsAffected(); n != rows {
		t.Errorf("LOAD DATA: %d rows affected, want %d", n, rows)
	}
	var count, sumID, sumLen int64
	if err := d.QueryRow("SELECT COUNT(*), SUM(id), SUM(LENGTH(pad)) FROM bulk_load_t").Scan(&count, &sumID, &sumLen); err != nil {
		t.Fatal(err)
	}
	if count != rows || sumID != rows*(rows+1)/2 || sumLen != rows*int64(len(pad)) {
		t.Fatalf("backend holds %d rows (sum id %d, sum length %d), want %d (%d, %d)",
			count, sumID, sumLen, rows, rows*(rows+1)/2, rows*int64(len(pad)))
	}
	delta := int64(peak) - int64(base)
	t.Logf("LOAD DATA LOCAL of %d bytes in %v; HeapInuse baseline %.1f MiB, peak %.1f MiB (%d samples), delta %.1f MiB",
		gen.bytes, took.Round(time.Millisecond), float64(base)/(1<<20), float64(peak)/(1<<20), samples, float64(delta)/(1<<20))
	if samples < 10 {
		t.Errorf("only %d heap samples during the load: the measurement says nothing", samples)
	}
	if delta >= 32<<20 {
		t.Errorf("heap grew by %.1f MiB during a %d-byte LOAD DATA LOCAL: the file is being buffered", float64(delta)/(1<<20), gen.bytes)
	}
	// The same connection goes on.
	var v int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM bulk_load_t WHERE id > ?", rows-5).Scan(&v); err != nil || v != 5 {
		t.Fatalf("after LOAD DATA: %d %v", v, err)
	}

	// Without CLIENT_LOCAL_FILES: refused by keyshard with 1148 (as MySQL
	// 5.7; MariaDB 10.5+ says 4166 and MySQL 8.0 3948), nothing loaded, and
	// the connection still in step. MariaDB, asked directly, refuses too.
	mustExec(t, d, "CREATE TABLE bulk_load_refused (id INT PRIMARY KEY)")
	const q = "LOAD DATA LOCAL INFILE '/etc/hostname' INTO TABLE bulk_load_refused"
	var codes []uint16
	for _, addr := range []string{fmt.Sprintf("127.0.0.1:%d", basePort), p.Addr} {
		c, err := client.Connect(addr, "ks", "ks", dbName, withCaps(0, mysql.CLIENT_LOCAL_FILES))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if negotiated(c, "CLIENT_LOCAL_FILES") {
			t.Fatalf("%s: CLIENT_LOCAL_FILES negotiated (%s)", addr, c.CapabilityString())
		}
		_, err = c.Execute(q)
		codes = append(codes, myErrCode(err))
		if myErrCode(err) == 0 {
			t.Errorf("%s: LOAD DATA LOCAL without CLIENT_LOCAL_FILES: %v, want a MySQL error", addr, err)
		}
		if v := queryString(t, c, "SELECT COUNT(*) FROM bulk_load_refused"); v != "0" {
			t.Errorf("%s: the refused LOAD DATA loaded %s rows", addr, v)
		}
		if v := queryString(t, c, "SELECT 'in step'"); v != "in step" {
			t.Fatalf("%s: after the refused LOAD DATA: %q", addr, v)
		}
	}
	t.Logf("LOAD DATA LOCAL without CLIENT_LOCAL_FILES: MariaDB ERR %d, keyshard ERR %d", codes[0], codes[1])
	if codes[1] != mysql.ER_NOT_ALLOWED_COMMAND {
		t.Errorf("LOAD DATA LOCAL without CLIENT_LOCAL_FILES through keyshard: ERR %d, want %d (proxy/relay.go localInfile)", codes[1], mysql.ER_NOT_ALLOWED_COMMAND)
	}
}

// resultSets reads every result set of rows (closing it) as strings.
func resultSets(t *testing.T, rows *sql.Rows) ([][]string, error) {
	t.Helper()
	defer rows.Close()
	var sets [][]string
	for {
		cols, err := rows.Columns()
		if err != nil {
			return sets, err
		}
		var set []string
		for rows.Next() {
			vals := make([]sql.RawBytes, len(cols))
			args := make([]any, len(cols))
			for i := range vals {
				args[i] = &vals[i]
			}
			if err := rows.Scan(args...); err != nil {
				return sets, err
			}
			var row []string
			for _, v := range vals {
				row = append(row, string(v))
			}
			set = append(set, strings.Join(row, ","))
		}
		sets = append(sets, set)
		if !rows.NextResultSet() {
			break
		}
	}
	return sets, rows.Err()
}

// A CALL that returns two result sets, as text and as a prepared
// statement: both sets, in order, then the connection goes on. A
// multi-statement batch that fails in its middle statement stops there.
// (TestMultiStatementsDriver covers result sets of a plain batch and an
// error's code; not that the statements after it never run.)
func TestBulkCallAndBatches(t *testing.T) {
	dbName, d := bulkDB(t, "multi")
	mustExec(t, d, "CREATE TABLE bulk_ms (id INT PRIMARY KEY)")
	mustExec(t, d, `CREATE PROCEDURE bulk_two(IN n INT)
BEGIN
	SELECT n AS a, 'first' AS b UNION ALL SELECT n + 1, 'first2';
	SELECT CONCAT('second-', n) AS c;
END`)
	p := startProxy(t, baseYAML("%ADDR%"))
	db := p.open(t, "ks:ks", dbName, "")
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	inStep := func(what string) {
		t.Helper()
		var v int
		if err := conn.QueryRowContext(ctx, "SELECT 41 + 1").Scan(&v); err != nil || v != 42 {
			t.Fatalf("after %s: %d %v", what, v, err)
		}
	}
	for _, c := range []struct {
		what, q string
		args    []any
		cmd     string
		want    [][]string
	}{
		{"text CALL", "CALL bulk_two(5)", nil, "query", [][]string{{"5,first", "6,first2"}, {"second-5"}}},
		{"prepared CALL", "CALL bulk_two(?)", []any{7}, "stmt_execute", [][]string{{"7,first", "8,first2"}, {"second-7"}}},
	} {
		for round := range 2 { // twice: the second on a reused backend handle
			var sets [][]string
			cmds := commandDeltas(t, p, func() {
				rows, err := conn.QueryContext(ctx, c.q, c.args...)
				if err != nil {
					t.Fatalf("%s: %v", c.what, err)
				}
				sets, err = resultSets(t, rows)
				if err != nil {
					t.Fatalf("%s: %v (sets so far %q)", c.what, err, sets)
				}
			}, c.cmd)
			if cmds[c.cmd] != 1 {
				t.Fatalf("%s: %s counted %v times, want 1", c.what, c.cmd, cmds[c.cmd])
			}
			if !reflect.DeepEqual(sets, c.want) {
				t.Fatalf("%s round %d: result sets %q, want %q", c.what, round, sets, c.want)
			}
			inStep(c.what)
		}
	}

	// A batch failing in the middle: the first result arrives, the error is
	// the middle statement's, the last statement never runs.
	mustExec(t, d, "INSERT INTO bulk_ms VALUES (1)")
	ms := p.open(t, "ks:ks", dbName, "multiStatements=true")
	mconn, err := ms.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer mconn.Close()
	rows, err := mconn.QueryContext(ctx, "SELECT 'first' AS f; INSERT INTO bulk_ms VALUES (1); INSERT INTO bulk_ms VALUES (3)")
	if err != nil {
		t.Fatalf("batch: %v", err)
	}
	var first []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		first = append(first, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("batch, first result: %v", err)
	}
	if !reflect.DeepEqual(first, []string{"first"}) {
		t.Fatalf("batch, first result: %q", first)
	}
	more := rows.NextResultSet()
	err = rows.Err()
	rows.Close()
	if more {
		t.Fatalf("batch: a result after the failing statement (err %v)", err)
	}
	if me := mysqlErr(t, err); me.Number != 1062 {
		t.Fatalf("batch: error %d %q, want the middle INSERT's 1062", me.Number, me.Message)
	}
	// The same with a write first: it ran, the last one did not.
	_, err = mconn.ExecContext(ctx, "INSERT INTO bulk_ms VALUES (2); INSERT INTO bulk_ms VALUES (1); INSERT INTO bulk_ms VALUES (4)")
	if me := mysqlErr(t, err); me.Number != 1062 {
		t.Fatalf("write batch: error %d %q, want 1062", me.Number, me.Message)
	}
	if got := queryCol(t, d, "SELECT id FROM bulk_ms ORDER BY id"); !reflect.DeepEqual(got, []string{"1", "2"}) {
		t.Fatalf("backend holds ids %v after the failed batches, want [1 2]: statements after the error ran", got)
	}
	var v int
	if err := mconn.QueryRowContext(ctx, "SELECT COUNT(*) FROM bulk_ms").Scan(&v); err != nil || v != 2 {
		t.Fatalf("after the failed batches: %d %v", v, err)
	}
}

// describeExec renders the answer to an EXECUTE of a one-column
// statement: the error code, or the rows.
func describeExec(t *testing.T, res rawResult) string {
	t.Helper()
	switch {
	case res.err != nil:
		return fmt.Sprintf("ERR %d", errCode(res.err))
	case res.ok != nil:
		return "OK"
	}
	var out []string
	for _, row := range res.rows {
		if len(row) >= 2 && row[1]&0x04 != 0 { // NULL bitmap, offset 2
			out = append(out, "NULL")
			continue
		}
		out = append(out, rowString(t, row))
	}
	return "rows " + strings.Join(out, ",")
}

// EXECUTE packets whose parameters do not match a 2-parameter statement
// get the error MariaDB gives for the same bytes, and the connection goes
// on. (TestStmtBadExecute checks other malformations and that one value
// missing is 1210 on each side; these are compared errno for errno.)
func TestBulkStmtParamCount(t *testing.T) {
	dbName, _ := bulkDB(t, "stmt")
	p := startProxy(t, baseYAML("%ADDR%"))
	const ll = mysql.MYSQL_TYPE_LONGLONG
	run := func(addr string) []string {
		r := stmtLogin(t, addr, dbName, true)
		id, np, _ := r.mustPrepare("SELECT CONCAT(?, '-', ?)")
		if np != 2 {
			t.Fatalf("%s: %d parameters, want 2", addr, np)
		}
		hdr := stmtIDCmd(mysql.COM_STMT_EXECUTE, id, 0, 1, 0, 0, 0)
		cat := func(parts ...[]byte) []byte { return bytes.Join(append([][]byte{hdr}, parts...), nil) }
		cases := []struct {
			what string
			pkt  []byte
		}{
			{"no parameter block", cat()},
			{"NULL bitmap only", cat([]byte{0})},
			{"types for one parameter, one value", cat([]byte{0, 1, ll, 0}, longlong(7))},
			{"types for two, no values", cat([]byte{0, 1, ll, 0, ll, 0})},
			{"types for two, one value", cat([]byte{0, 1, ll, 0, ll, 0}, longlong(7))},
			{"types for two, one and a half values", cat([]byte{0, 1, ll, 0, ll, 0}, longlong(7), []byte{8, 0, 0})},
			{"string value shorter than its length", cat([]byte{0, 1, mysql.MYSQL_TYPE_VAR_STRING, 0, ll, 0}, []byte{200, 'a', 'b', 'c'})},
			{"both NULL, no values", cat([]byte{3, 1, ll, 0, ll, 0})},
			{"two values", cat([]byte{0, 1, ll, 0, ll, 0}, longlong(7), longlong(8))},
			{"types reused, one value", cat([]byte{0, 0}, longlong(9))},
		}
		var out []string
		for _, c := range cases {
			r.send(c.pkt)
			out = append(out, c.what+": "+describeExec(t, r.readExecute(false)))
			r.ping(c.what)
		}
		res := r.execute(id, 0, true, 1, 2)
		if got := describeExec(t, res); got != "rows 1-2" {
			t.Fatalf("%s: a good EXECUTE after the bad ones: %s", addr, got)
		}
		r.send(append([]byte{mysql.COM_QUERY}, "SELECT 'in step'"...))
		if pk := r.mustRead(); pk[0] != 1 {
			t.Fatalf("%s: query after the bad EXECUTEs: %s", addr, describe(pk))
		}
		return out
	}
	want := run(fmt.Sprintf("127.0.0.1:%d", basePort))
	got := run(p.Addr)
	t.Logf("MariaDB: %q", want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("keyshard vs MariaDB:\n%s", diffLines(want, got))
	}
	// MariaDB's own answers: too few values is an error, the
	// well-formed ones run.
	for _, w := range []string{
		"types for one parameter, one value: ERR 1210",
		"types for two, no values: ERR 1210",
		"types for two, one value: ERR 1210",
		"both NULL, no values: rows NULL",
		"two values: rows 7-8",
	} {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			t.Errorf("keyshard did not answer %q (got %q)", w, got)
		}
	}
}

var sysbenchCount = regexp.MustCompile(`(?m)^\s*(transactions|queries|ignored errors|reconnects):\s+(\d+)\s+\(([\d.]+) per sec`)

// newSysbench returns a runner of sysbench oltp_read_write (one table of
// 10,000 rows in database db) through p, and removes the table after the
// test. Call it with "prepare" first.
func newSysbench(t *testing.T, p *testProxy, db string) func(args ...string) string {
	t.Helper()
	sb, err := exec.LookPath("sysbench")
	if err != nil {
		t.Fatalf("sysbench is not installed (scripts/backends.sh install installs it): %v", err)
	}
	host, port, _ := net.SplitHostPort(p.Addr)
	common := []string{"oltp_read_write", "--db-driver=mysql", "--mysql-host=" + host, "--mysql-port=" + port,
		"--mysql-user=ks", "--mysql-password=ks", "--mysql-db=" + db, "--tables=1", "--table-size=10000",
		// Uniform keys: with sysbench's default hot spot, 4 threads
		// deadlock now and then on MariaDB itself (ignored errors 1213).
		"--rand-type=uniform"}
	t.Cleanup(func() {
		out, err := exec.Command(sb, append(append([]string(nil), common...), "cleanup")...).CombinedOutput()
		if err != nil {
			t.Errorf("sysbench cleanup: %v\n%s", err, out)
		}
	})
	return func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, sb, append(append([]string(nil), common...), args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("sysbench %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
}

// parseSysbench reads the totals of a sysbench run (transactions, queries,
// ignored errors, reconnects) and its transactions per second.
func parseSysbench(t *testing.T, out string) (map[string]float64, float64) {
	t.Helper()
	got := map[string]float64{}
	var tps float64
	for _, m := range sysbenchCount.FindAllStringSubmatch(out, -1) {
		got[m[1]], _ = strconv.ParseFloat(m[2], 64)
		if m[1] == "transactions" {
			tps, _ = strconv.ParseFloat(m[3], 64)
		}
	}
	for _, k := range []string{"transactions", "queries", "ignored errors", "reconnects"} {
		if _, ok := got[k]; !ok {
			t.Fatalf("sysbench output has no %q line:\n%s", k, out)
		}
	}
	return got, tps
}

// sysbench oltp_read_write with server-side prepared statements through
// keyshard: no errors, and the backend never holds more statements than
// max_conns_limit x stmt_cache_size, with a cache small enough that
// statements are evicted and prepared again all the time.
func TestBulkSysbench(t *testing.T) {
	dbName, _ := bulkDB(t, "sbtest")
	const maxConns, cacheSize = 4, 8 // oltp_read_write prepares 11 statements
	p := startProxy(t, stmtYAML(maxConns, fmt.Sprintf("stmt_cache_size: %d\n", cacheSize)))
	sysbench := newSysbench(t, p, dbName)
	sysbench("prepare")
	d := direct(t, basePort, "")
	before := preparedStmtCount(t, d)
	prepares := mustMetric(t, p, "keyshard_pool_prepares_total", "node1")
	var maxBackend int
	var maxMetric float64
	sample := func() {
		var name string
		var n int
		if err := d.QueryRow("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'").Scan(&name, &n); err == nil {
			maxBackend = max(maxBackend, n-before)
		}
		if v, err := metricFor(p, "keyshard_pool_prepared_statements", "node1"); err == nil {
			maxMetric = max(maxMetric, v)
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	var samples int
	go func() {
		defer wg.Done()
		for {
			sample()
			samples++
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	out := sysbench("run", "--threads=4", "--time=8", "--db-ps-mode=auto", "--report-interval=0")
	close(done)
	wg.Wait()
	sample() // after the run: the pooled connections keep their handles
	got, tps := parseSysbench(t, out)
	t.Logf("sysbench: %.0f transactions (%.1f tps), %.0f queries, %.0f ignored errors, %.0f reconnects; "+
		"Prepared_stmt_count max +%d over %d samples, keyshard_pool_prepared_statements max %v, backend prepares %v",
		got["transactions"], tps, got["queries"], got["ignored errors"], got["reconnects"],
		maxBackend, samples, maxMetric, mustMetric(t, p, "keyshard_pool_prepares_total", "node1")-prepares)
	if got["ignored errors"] != 0 || got["reconnects"] != 0 {
		t.Errorf("sysbench reported %v ignored errors and %v reconnects, want 0\n%s", got["ignored errors"], got["reconnects"], out)
	}
	if got["transactions"] < 100 {
		t.Errorf("sysbench ran only %v transactions in 8 s", got["transactions"])
	}
	if bound := maxConns * cacheSize; maxBackend > bound || maxMetric > float64(bound) {
		t.Errorf("prepared statements on the backend: Prepared_stmt_count up to +%d, keyshard counted up to %v; bound max_conns_limit x stmt_cache_size = %d",
			maxBackend, maxMetric, bound)
	}
	if maxBackend < 1 {
		t.Errorf("Prepared_stmt_count never grew: sysbench did not use server-side prepared statements")
	}
	// 11 statements over a cache of 8: evicted and prepared again.
	if n := mustMetric(t, p, "keyshard_pool_prepares_total", "node1") - prepares; n <= maxConns*11 {
		t.Errorf("%v backend prepares: no eviction with stmt_cache_size %d", n, cacheSize)
	}
}

// The bound that sysbench samples, made deterministic: one backend
// connection with room for 2 statements. A PREPARE that evicts must close
// the evicted statement on the server before (or with) preparing the new
// one, not leave it open until the connection's next command.
func TestBulkStmtCacheBound(t *testing.T) {
	dbName, _ := bulkDB(t, "bound")
	const cacheSize = 2
	p := startProxy(t, stmtYAML(1, fmt.Sprintf("stmt_cache_size: %d\n", cacheSize)))
	d := direct(t, basePort, "")
	before := preparedStmtCount(t, d)
	r := stmtLogin(t, p.Addr, dbName, true)
	check := func(what string) {
		t.Helper()
		// The counter is global: the least of a few reads leaves out
		// statements other clients of the backend prepare for a moment.
		n := preparedStmtCount(t, d) - before
		for range 4 {
			time.Sleep(25 * time.Millisecond)
			n = min(n, preparedStmtCount(t, d)-before)
		}
		m := mustMetric(t, p, "keyshard_pool_prepared_statements", "node1")
		if n > cacheSize || m > cacheSize {
			t.Errorf("%s: backend Prepared_stmt_count +%d, keyshard_pool_prepared_statements %v; bound max_conns_limit x stmt_cache_size = %d",
				what, n, m, cacheSize)
		}
	}
	var ids []uint32
	for k := range 4 {
		id, _, _ := r.mustPrepare(fmt.Sprintf("SELECT ? + %d", k))
		ids = append(ids, id)
		check(fmt.Sprintf("idle after PREPARE #%d", k+1))
	}
	// Executions of evicted statements prepare them again, evicting others.
	for k, id := range ids {
		res := r.execute(id, 0, true, 10)
		if res.err != nil || len(res.rows) != 1 || rowInt(t, res.rows[0], 1, 8) != int64(10+k) {
			t.Fatalf("EXECUTE of statement #%d: %v", k+1, res.trans)
		}
		check(fmt.Sprintf("after EXECUTE #%d", k+1))
	}
}
