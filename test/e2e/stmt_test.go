package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
)

// Binary-protocol prepared statements (COM_STMT_*) end to end: keyshard
// prepares lazily on whichever pooled connection runs an EXECUTE, keeps a
// bounded LRU of backend handles per connection, buffers long data, and
// pins the connection of an open cursor.

const stmtDBName = "stmt_e2e"

// stmtSetupDB (re)creates database stmt_e2e on the default node's backend.
func stmtSetupDB(t *testing.T) *sql.DB {
	t.Helper()
	d := direct(t, basePort, "")
	mustExec(t, d, "DROP DATABASE IF EXISTS "+stmtDBName)
	mustExec(t, d, "CREATE DATABASE "+stmtDBName)
	t.Cleanup(func() { _, _ = d.Exec("DROP DATABASE IF EXISTS " + stmtDBName) })
	return direct(t, basePort, stmtDBName)
}

// stmtYAML is baseYAML with node1 (the default node) limited to maxConns
// connections, plus extra top-level keys.
func stmtYAML(maxConns int, extra string) string {
	y := strings.Replace(baseYAML("%ADDR%"), "max_conns_limit: 16", fmt.Sprintf("max_conns_limit: %d", maxConns), 1)
	return y + extra
}

// preparedStmtCount reads the backend's global Prepared_stmt_count.
func preparedStmtCount(t *testing.T, d *sql.DB) int {
	t.Helper()
	var name string
	var n int
	if err := d.QueryRow("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'").Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// metricFor reads a keyshard metric; node selects a pool metric's node
// ("" for an unlabeled one).
func metricFor(p *testProxy, name, node string) (float64, error) {
	mfs, err := p.Srv.Metrics().Registry.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := node == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "node" && l.GetValue() == node {
					match = true
				}
			}
			if !match {
				continue
			}
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), nil
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), nil
			}
		}
	}
	return 0, fmt.Errorf("no metric %s{node=%q}", name, node)
}

func mustMetric(t *testing.T, p *testProxy, name, node string) float64 {
	t.Helper()
	v, err := metricFor(p, name, node)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// ---------------------------------------------------------------- raw protocol

// stmtRaw is a hand-driven client for the binary protocol.
type stmtRaw struct {
	*rawConn
	eof bool // CLIENT_DEPRECATE_EOF not negotiated: EOF packets after definitions
}

// stmtLogin logs in as ks to db on addr (keyshard or a backend).
func stmtLogin(t *testing.T, addr, db string, deprecateEOF bool) *stmtRaw {
	t.Helper()
	r := dialRaw(t, addr)
	g := r.readGreeting()
	caps := uint32(rawCaps)
	if deprecateEOF {
		if g.caps&mysql.CLIENT_DEPRECATE_EOF == 0 {
			t.Fatalf("%s does not offer CLIENT_DEPRECATE_EOF", addr)
		}
		caps |= mysql.CLIENT_DEPRECATE_EOF
	}
	r.writePacket(handshakeResponse(caps, "ks", mysql.CalcNativePassword(g.scramble, []byte("ks")), db, mysql.AUTH_NATIVE_PASSWORD))
	if p := r.mustRead(); p[0] != mysql.OK_HEADER {
		t.Fatalf("login to %s: got %q, want OK", addr, p)
	}
	return &stmtRaw{rawConn: r, eof: !deprecateEOF}
}

// send writes one command.
func (r *stmtRaw) send(payload []byte) {
	r.t.Helper()
	r.seq = 0
	r.writePacket(payload)
}

func stmtIDCmd(cmd byte, id uint32, rest ...byte) []byte {
	return append(binary.LittleEndian.AppendUint32([]byte{cmd}, id), rest...)
}

// isTerm reports whether p ends a result (EOF, or the 0xfe OK of
// CLIENT_DEPRECATE_EOF).
func isTerm(p []byte) bool { return len(p) > 0 && p[0] == 0xfe && len(p) < 9 }

// termStatus decodes the status of a terminator in either form.
func termStatus(p []byte) uint16 {
	if len(p) == 5 { // classic EOF: warnings, status
		return binary.LittleEndian.Uint16(p[3:])
	}
	// 0xfe OK: affected rows, insert id (one byte each when small), status
	if len(p) >= 5 {
		return binary.LittleEndian.Uint16(p[3:])
	}
	return 0
}

// describe renders a packet for transcripts; statement ids and messages
// are left out (they legitimately differ between keyshard and a backend).
func describe(p []byte) string {
	switch {
	case len(p) == 0:
		return "empty"
	case p[0] == 0xff:
		return fmt.Sprintf("ERR %d", errCode(p))
	case isTerm(p):
		// The index-use hints are left out: keyshard cannot know them for
		// the EOF it puts back after column definitions.
		st := termStatus(p) &^ (mysql.SERVER_STATUS_NO_GOOD_INDEX_USED | mysql.SERVER_STATUS_NO_INDEX_USED)
		return fmt.Sprintf("TERM %dB status=%#04x", len(p), st)
	}
	return fmt.Sprintf("% x", p)
}

// prepare sends COM_STMT_PREPARE and reads the whole answer. On an error
// it returns the ERR packet.
func (r *stmtRaw) prepare(sql string) (id uint32, nparams, ncols int, errPkt []byte) {
	r.t.Helper()
	r.send(append([]byte{mysql.COM_STMT_PREPARE}, sql...))
	p := r.mustRead()
	if p[0] == 0xff {
		return 0, 0, 0, p
	}
	if p[0] != 0 || len(p) < 12 {
		r.t.Fatalf("PREPARE %q: first packet % x", sql, p)
	}
	id = binary.LittleEndian.Uint32(p[1:])
	ncols = int(binary.LittleEndian.Uint16(p[5:]))
	nparams = int(binary.LittleEndian.Uint16(p[7:]))
	for _, n := range []int{nparams, ncols} {
		for range n {
			if d := r.mustRead(); isTerm(d) || d[0] == 0xff {
				r.t.Fatalf("PREPARE %q: definition expected, got %s", sql, describe(d))
			}
		}
		if n > 0 && r.eof {
			if d := r.mustRead(); !isTerm(d) {
				r.t.Fatalf("PREPARE %q: EOF expected after definitions, got %s", sql, describe(d))
			}
		}
	}
	return id, nparams, ncols, nil
}

func (r *stmtRaw) mustPrepare(sql string) (id uint32, nparams, ncols int) {
	r.t.Helper()
	id, nparams, ncols, e := r.prepare(sql)
	if e != nil {
		r.t.Fatalf("PREPARE %q: %s %q", sql, describe(e), e)
	}
	return id, nparams, ncols
}

// rawResult is an answer to EXECUTE or FETCH.
type rawResult struct {
	err     []byte   // ERR packet
	ok      []byte   // OK packet (no result set)
	cols    int      // column count
	metaEnd []byte   // terminator after the column definitions, if any
	rows    [][]byte // binary rows
	end     []byte   // terminator after the rows
	trans   []string // every packet, described
}

func (res *rawResult) status() uint16 {
	switch {
	case res.end != nil:
		return termStatus(res.end)
	case res.metaEnd != nil:
		return termStatus(res.metaEnd)
	case res.ok != nil:
		ok, _ := parseOKStatus(res.ok)
		return ok
	}
	return 0
}

func parseOKStatus(p []byte) (uint16, bool) {
	pos := 1
	for range 2 {
		if pos >= len(p) {
			return 0, false
		}
		switch p[pos] {
		case 0xfc:
			pos += 3
		case 0xfd:
			pos += 4
		case 0xfe:
			pos += 9
		default:
			pos++
		}
	}
	if pos+2 > len(p) {
		return 0, false
	}
	return binary.LittleEndian.Uint16(p[pos:]), true
}

func (r *stmtRaw) next(res *rawResult) []byte {
	r.t.Helper()
	p := r.mustRead()
	res.trans = append(res.trans, describe(p))
	return p
}

// readExecute reads the answer to COM_STMT_EXECUTE. cursor says one was
// asked for: then the definitions' terminator may end the answer.
func (r *stmtRaw) readExecute(cursor bool) rawResult {
	r.t.Helper()
	var res rawResult
	p := r.next(&res)
	switch p[0] {
	case 0xff:
		res.err = p
		return res
	case 0x00:
		res.ok = p
		return res
	}
	res.cols = int(p[0])
	for range res.cols {
		r.next(&res)
	}
	if r.eof {
		p = r.next(&res)
		if p[0] == 0xff {
			// Failed after its column definitions (a cursor's
			// statement, while producing its rows).
			res.err = p
			return res
		}
		if !isTerm(p) {
			r.t.Fatalf("EOF expected after column definitions, got %s", describe(p))
		}
		res.metaEnd = p
		if cursor && termStatus(p)&mysql.SERVER_STATUS_CURSOR_EXISTS != 0 {
			return res
		}
	} else if cursor {
		// With CLIENT_DEPRECATE_EOF the server still ends the definitions
		// of a cursor with a terminator (and sends no rows).
		p = r.next(&res)
		if isTerm(p) && termStatus(p)&mysql.SERVER_STATUS_CURSOR_EXISTS != 0 {
			res.metaEnd = p
			return res
		}
		return r.readRows(res, p)
	}
	return r.readRows(res, nil)
}

// readRows reads binary rows up to the terminator; first is a packet
// already read, if any.
func (r *stmtRaw) readRows(res rawResult, first []byte) rawResult {
	r.t.Helper()
	p := first
	for {
		if p == nil {
			p = r.next(&res)
		}
		switch {
		case p[0] == 0xff:
			res.err = p
			return res
		case isTerm(p):
			res.end = p
			return res
		}
		res.rows = append(res.rows, p)
		p = nil
	}
}

// fetch sends COM_STMT_FETCH for n rows and reads the answer.
func (r *stmtRaw) fetch(id uint32, n uint32) rawResult {
	r.t.Helper()
	r.send(stmtIDCmd(mysql.COM_STMT_FETCH, id, binary.LittleEndian.AppendUint32(nil, n)...))
	return r.readRows(rawResult{}, nil)
}

// execute sends COM_STMT_EXECUTE with flags and the given LONGLONG
// parameters (types bound when bound is set) and reads the answer.
func (r *stmtRaw) execute(id uint32, flags byte, bound bool, params ...int64) rawResult {
	r.t.Helper()
	r.send(execPacket(id, flags, bound, params...))
	return r.readExecute(flags&1 != 0)
}

func execPacket(id uint32, flags byte, bound bool, params ...int64) []byte {
	b := stmtIDCmd(mysql.COM_STMT_EXECUTE, id, flags, 1, 0, 0, 0)
	if len(params) == 0 {
		return b
	}
	b = append(b, make([]byte, (len(params)+7)/8)...)
	if bound {
		b = append(b, 1)
		for range params {
			b = append(b, mysql.MYSQL_TYPE_LONGLONG, 0)
		}
	} else {
		b = append(b, 0)
	}
	for _, v := range params {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

// ping sends COM_PING and wants OK.
func (r *stmtRaw) ping(what string) {
	r.t.Helper()
	r.send([]byte{mysql.COM_PING})
	if p := r.mustRead(); p[0] != 0 {
		r.t.Fatalf("COM_PING after %s: %s %q", what, describe(p), p)
	}
}

// rowInt decodes the first column of a binary row whose first column is
// INT (4 bytes) or BIGINT (8 bytes) as told by size.
func rowInt(t *testing.T, row []byte, ncols, size int) int64 {
	t.Helper()
	at := 1 + (ncols+7+2)/8
	if row[0] != 0 || len(row) < at+size {
		t.Fatalf("binary row % x", row)
	}
	if size == 4 {
		return int64(int32(binary.LittleEndian.Uint32(row[at:])))
	}
	return int64(binary.LittleEndian.Uint64(row[at:]))
}

// rowString decodes the first column of a one-column binary row holding a
// string.
func rowString(t *testing.T, row []byte) string {
	t.Helper()
	if len(row) < 3 || row[0] != 0 || int(row[2])+3 > len(row) || row[2] >= 0xfb {
		t.Fatalf("binary row % x", row)
	}
	return string(row[3 : 3+int(row[2])])
}

// ---------------------------------------------------------------- tests

type allTypesRow struct {
	args []any    // INSERT arguments (id first)
	want []string // expected scanned text per column; "NULL" for NULL
}

const allTypesDDL = `CREATE TABLE all_types (
	id INT PRIMARY KEY,
	ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
	mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED,
	bi BIGINT, biu BIGINT UNSIGNED,
	f FLOAT, d DOUBLE, de DECIMAL(30,10),
	dt DATE, dtm DATETIME(6), ts TIMESTAMP(3) NULL DEFAULT NULL, tm TIME(6), yr YEAR,
	ch CHAR(10), vc VARCHAR(64) CHARACTER SET utf8mb4, bn BINARY(4), vb VARBINARY(16),
	bl BLOB, tx TEXT CHARACTER SET utf8mb4, js JSON,
	en ENUM('a','b','c'), st SET('x','y','z'), bt BIT(10)
) DEFAULT CHARSET=utf8mb4`

func allTypesRows() []allTypesRow {
	blob := make([]byte, 3000)
	for i := range blob {
		blob[i] = byte(i * 7)
	}
	text := strings.Repeat("äöü🦀", 6000) // 60000 bytes: a 2-byte length
	tmin := time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	tmax := time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	null := make([]any, 29)
	wantNull := make([]string, 29)
	null[0], wantNull[0] = 3, "3"
	for i := 1; i < 29; i++ {
		wantNull[i] = "NULL"
	}
	return []allTypesRow{
		{
			args: []any{1,
				int64(-128), uint64(0), int64(-32768), uint64(0),
				int64(-8388608), uint64(0), int64(math.MinInt32), uint64(0),
				int64(math.MinInt64), uint64(0),
				float64(-1.5), -math.MaxFloat64, "-99999999999999999999.9999999999",
				"1000-01-01", tmin, "1980-01-01 00:00:00.001", "-838:59:59.000000", 1901,
				"", "", []byte{0, 0, 0, 0}, []byte{}, []byte{}, "", "[]",
				"a", "", []byte{0, 0}},
			want: []string{"1",
				"-128", "0", "-32768", "0",
				"-8388608", "0", "-2147483648", "0",
				"-9223372036854775808", "0",
				"-1.5", "-1.7976931348623157e+308", "-99999999999999999999.9999999999",
				"1000-01-01", "1000-01-01 00:00:00.000000", "1980-01-01 00:00:00.001", "-838:59:59.000000", "1901",
				"", "", "\x00\x00\x00\x00", "", "", "", "[]",
				"a", "", "\x00\x00"},
		},
		{
			args: []any{2,
				int64(127), uint64(255), int64(32767), uint64(65535),
				int64(8388607), uint64(16777215), int64(math.MaxInt32), uint64(math.MaxUint32),
				int64(math.MaxInt64), uint64(math.MaxUint64),
				float64(3.25), math.SmallestNonzeroFloat64, "99999999999999999999.9999999999",
				"9999-12-31", tmax, "2037-12-31 23:59:59.999", "838:59:59.999999", 2155,
				"abc", "héllo 🦀 wörld", []byte{0xff, 0, 0xfe, 1}, []byte{0, 0xff, '\'', '\\', 0}, blob, text, `{"a": [1, 2, {"b": null}], "é": "🦀"}`,
				"c", "x,z", []byte{0x03, 0xff}},
			want: []string{"2",
				"127", "255", "32767", "65535",
				"8388607", "16777215", "2147483647", "4294967295",
				"9223372036854775807", "18446744073709551615",
				"3.25", "5e-324", "99999999999999999999.9999999999",
				"9999-12-31", "9999-12-31 23:59:59.999999", "2037-12-31 23:59:59.999", "838:59:59.999999", "2155",
				"abc", "héllo 🦀 wörld", "\xff\x00\xfe\x01", "\x00\xff'\\\x00", string(blob), text, `{"a": [1, 2, {"b": null}], "é": "🦀"}`,
				"c", "x,z", "\x03\xff"},
		},
		{args: null, want: wantNull},
	}
}

type colInfo struct {
	Name, Type       string
	Nullable, NullOK bool
	Prec, Scale      int64
	DecOK            bool
	Length           int64
	LenOK            bool
	ScanType         string
}

// readAllTypes reads one row of all_types with a prepared SELECT.
func readAllTypes(t *testing.T, db *sql.DB, id int) ([]sql.RawBytes, []colInfo) {
	t.Helper()
	rows, err := db.Query("SELECT * FROM all_types WHERE id = ?", id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		t.Fatal(err)
	}
	var infos []colInfo
	for _, ct := range cts {
		ci := colInfo{Name: ct.Name(), Type: ct.DatabaseTypeName(), ScanType: ct.ScanType().String()}
		ci.Nullable, ci.NullOK = ct.Nullable()
		ci.Prec, ci.Scale, ci.DecOK = ct.DecimalSize()
		ci.Length, ci.LenOK = ct.Length()
		infos = append(infos, ci)
	}
	if !rows.Next() {
		t.Fatalf("row %d missing: %v", id, rows.Err())
	}
	raw := make([]sql.RawBytes, len(cts))
	dest := make([]any, len(cts))
	for i := range raw {
		dest[i] = &raw[i]
	}
	if err := rows.Scan(dest...); err != nil {
		t.Fatal(err)
	}
	out := make([]sql.RawBytes, len(raw))
	for i, b := range raw {
		if b != nil {
			out[i] = append(sql.RawBytes{}, b...)
		}
	}
	if rows.Next() {
		t.Fatalf("more than one row for id %d", id)
	}
	return out, infos
}

// Every common column type through prepared INSERT and SELECT: values,
// NULLs, and column metadata as MariaDB itself gives them.
func TestStmtAllTypes(t *testing.T) {
	d := stmtSetupDB(t)
	mustExec(t, d, allTypesDDL)
	p := startProxy(t, baseYAML("%ADDR%"))
	db := p.open(t, "ks:ks", stmtDBName, "")
	ins, err := db.Prepare("INSERT INTO all_types VALUES (" + strings.TrimSuffix(strings.Repeat("?,", 29), ",") + ")")
	if err != nil {
		t.Fatal(err)
	}
	defer ins.Close()
	cases := allTypesRows()
	for _, c := range cases {
		if _, err := ins.Exec(c.args...); err != nil {
			t.Fatalf("insert id %v: %v", c.args[0], err)
		}
	}
	for _, c := range cases {
		id := c.args[0].(int)
		got, gotCols := readAllTypes(t, db, id)
		want, wantCols := readAllTypes(t, d, id)
		if !reflect.DeepEqual(gotCols, wantCols) {
			for i := range wantCols {
				if i < len(gotCols) && gotCols[i] != wantCols[i] {
					t.Errorf("column %d metadata via keyshard %+v, MariaDB %+v", i, gotCols[i], wantCols[i])
				}
			}
			t.Fatalf("column metadata differs (%d vs %d columns)", len(gotCols), len(wantCols))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) || (got[i] == nil) != (want[i] == nil) {
				t.Errorf("id %d column %s: keyshard %q, MariaDB %q", id, wantCols[i].Name, trunc(got[i]), trunc(want[i]))
			}
			w := c.want[i]
			g := "NULL"
			if got[i] != nil {
				g = string(got[i])
			}
			if g != w {
				t.Errorf("id %d column %s = %q, want %q", id, wantCols[i].Name, trunc([]byte(g)), trunc([]byte(w)))
			}
		}
	}
	// Parameters of every type in WHERE find the row they came from.
	var id int
	err = db.QueryRow(`SELECT id FROM all_types WHERE ti = ? AND tiu = ? AND biu = ? AND bi = ? AND d = ? AND de = ?
		AND dtm = ? AND tm = ? AND vc = ? AND vb = ? AND bl = ? AND st = ? AND yr = ?`,
		int8(127), uint8(255), uint64(math.MaxUint64), int64(math.MaxInt64), math.SmallestNonzeroFloat64, "99999999999999999999.9999999999",
		cases[1].args[15], "838:59:59.999999", "héllo 🦀 wörld", cases[1].args[22], cases[1].args[23], "x,z", 2155).Scan(&id)
	if err != nil || id != 2 {
		t.Fatalf("lookup by typed parameters: id %d, %v", id, err)
	}
	err = db.QueryRow("SELECT id FROM all_types WHERE ti <=> ? AND tx <=> ? AND id = ?", nil, nil, 3).Scan(&id)
	if err != nil || id != 3 {
		t.Fatalf("lookup by NULL parameters: id %d, %v", id, err)
	}
}

func trunc(b []byte) string {
	if len(b) > 40 {
		return fmt.Sprintf("%q…(%d bytes)", b[:40], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// Arguments over maxAllowedPacket/(params+1) go as COM_STMT_SEND_LONG_DATA,
// in chunks that keyshard buffers and replays before the EXECUTE.
func TestStmtLongData(t *testing.T) {
	d := stmtSetupDB(t)
	mustExec(t, d, "CREATE TABLE blobs (id INT PRIMARY KEY, b LONGBLOB, s LONGTEXT)")
	p := startProxy(t, baseYAML("%ADDR%"))
	db := p.open(t, "ks:ks", stmtDBName, "maxAllowedPacket=65536")
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []int{1 << 20, 5 << 20}
	sums := map[int][32]byte{}
	ins, err := db.Prepare("INSERT INTO blobs (id, b, s) VALUES (?, ?, ?)")
	if err != nil {
		t.Fatal(err)
	}
	defer ins.Close()
	for i, n := range sizes {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		sums[i+1] = sha256.Sum256(b)
		// The text column: a long-data string parameter next to the blob.
		s := strings.Repeat("ab🦀", 10000)
		if _, err := ins.Exec(i+1, b, s); err != nil {
			t.Fatalf("insert %d bytes: %v", n, err)
		}
	}
	// A later execution with short values must not replay the long data
	// of the previous one.
	if _, err := ins.Exec(3, []byte("short"), "s"); err != nil {
		t.Fatal(err)
	}
	for i, n := range sizes {
		var b []byte
		var s string
		if err := db.QueryRow("SELECT b, s FROM blobs WHERE id = ?", i+1).Scan(&b, &s); err != nil {
			t.Fatal(err)
		}
		if len(b) != n || sha256.Sum256(b) != sums[i+1] {
			t.Fatalf("id %d: got %d bytes (sha256 mismatch: %v), want %d", i+1, len(b), sha256.Sum256(b) != sums[i+1], n)
		}
		if s != strings.Repeat("ab🦀", 10000) {
			t.Fatalf("id %d: long-data text column differs (%d bytes)", i+1, len(s))
		}
		// Same sum computed by the server.
		var srv string
		if err := d.QueryRow(fmt.Sprintf("SELECT SHA2(b, 256) FROM blobs WHERE id = %d", i+1)).Scan(&srv); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("%x", sums[i+1]); srv != want {
			t.Fatalf("id %d: backend holds sha256 %s, want %s", i+1, srv, want)
		}
	}
	var b, s string
	if err := d.QueryRow("SELECT b, s FROM blobs WHERE id = 3").Scan(&b, &s); err != nil || b != "short" || s != "s" {
		t.Fatalf("short row after long data: %q %q %v", trunc([]byte(b)), trunc([]byte(s)), err)
	}
}

// One statement executed 10,000 times from 16 goroutines over 4 backend
// connections: every answer right, and the backend never holds more than
// max_conns_limit x stmt_cache_size statements.
func TestStmtConcurrentReuse(t *testing.T) {
	stmtSetupDB(t)
	const maxConns, cacheSize = 4, 64
	p := startProxy(t, stmtYAML(maxConns, ""))
	db := p.open(t, "ks:ks", stmtDBName, "")
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	d := direct(t, basePort, "")
	before := preparedStmtCount(t, d)

	stmt, err := db.Prepare("SELECT ? + 1, CONCAT('v', ?)")
	if err != nil {
		t.Fatal(err)
	}
	defer stmt.Close()
	var maxMetric float64
	var maxBackend int
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // watch the bound while the executions run
		defer wg.Done()
		for {
			if v, err := metricFor(p, "keyshard_pool_prepared_statements", "node1"); err == nil && v > maxMetric {
				maxMetric = v
			}
			var name string
			var n int
			if err := d.QueryRow("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'").Scan(&name, &n); err == nil && n-before > maxBackend {
				maxBackend = n - before
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	const workers, total = 16, 10000
	var bad atomic.Int64
	var firstErr atomic.Value
	var work sync.WaitGroup
	for w := range workers {
		work.Add(1)
		go func() {
			defer work.Done()
			for i := w; i < total; i += workers {
				var n int64
				var s string
				if err := stmt.QueryRow(i, i).Scan(&n, &s); err != nil || n != int64(i)+1 || s != fmt.Sprint("v", i) {
					if bad.Add(1) == 1 {
						firstErr.Store(fmt.Sprintf("execution %d: %d %q %v", i, n, s, err))
					}
				}
			}
		}()
	}
	work.Wait()
	close(done)
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d of %d executions wrong; first: %v", n, total, firstErr.Load())
	}
	if v := mustMetric(t, p, "keyshard_pool_prepared_statements", "node1"); v > maxMetric {
		maxMetric = v
	}
	if n := preparedStmtCount(t, d) - before; n > maxBackend {
		maxBackend = n
	}
	if maxMetric > maxConns*cacheSize || maxBackend > maxConns*cacheSize {
		t.Fatalf("prepared statements: keyshard counted up to %v, backend up to %d; bound %d", maxMetric, maxBackend, maxConns*cacheSize)
	}
	// One text: at most one handle per backend connection.
	if maxMetric > maxConns {
		t.Errorf("keyshard held up to %v backend handles of one statement over %d connections", maxMetric, maxConns)
	}
	if maxMetric < 1 {
		t.Errorf("keyshard_pool_prepared_statements never above 0")
	}
	// Handles are reused: not one PREPARE per execution.
	if n := mustMetric(t, p, "keyshard_pool_prepares_total", "node1"); n > 100 {
		t.Errorf("%v backend prepares for %d executions of one statement", n, total)
	}
	if open := mustMetric(t, p, "keyshard_pool_connections", "node1"); open > maxConns {
		t.Errorf("%v backend connections, limit %d", open, maxConns)
	}
	t.Logf("max handles: keyshard %v, backend %d; prepares %v", maxMetric, maxBackend, mustMetric(t, p, "keyshard_pool_prepares_total", "node1"))
}

// stmt_cache_size bounds the handles per backend connection; evicted
// statements are closed on the server and prepared again when next run.
func TestStmtCacheEviction(t *testing.T) {
	stmtSetupDB(t)
	const maxConns, cacheSize, n = 2, 4, 20
	p := startProxy(t, stmtYAML(maxConns, "stmt_cache_size: 4\n"))
	db := p.open(t, "ks:ks", stmtDBName, "")
	d := direct(t, basePort, "")
	before := preparedStmtCount(t, d)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	check := func(what string) {
		t.Helper()
		if got := preparedStmtCount(t, d) - before; got > maxConns*cacheSize {
			t.Fatalf("%s: backend Prepared_stmt_count grew by %d, bound %d", what, got, maxConns*cacheSize)
		}
		if v := mustMetric(t, p, "keyshard_pool_prepared_statements", "node1"); v > maxConns*cacheSize {
			t.Fatalf("%s: keyshard_pool_prepared_statements %v, bound %d", what, v, maxConns*cacheSize)
		}
	}
	stmts := make([]*sql.Stmt, n)
	for k := range n {
		s, err := conn.PrepareContext(ctx, fmt.Sprintf("SELECT ? * %d", k+1))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stmts[k] = s
		var v int64
		if err := s.QueryRow(3).Scan(&v); err != nil || v != int64(3*(k+1)) {
			t.Fatalf("statement %d: %d %v", k, v, err)
		}
		check(fmt.Sprintf("after statement %d", k))
	}
	prepares := mustMetric(t, p, "keyshard_pool_prepares_total", "node1")
	// The first ones were evicted: they run again (prepared lazily).
	for k := range 6 {
		var v int64
		if err := stmts[k].QueryRow(5).Scan(&v); err != nil || v != int64(5*(k+1)) {
			t.Fatalf("evicted statement %d: %d %v", k, v, err)
		}
		check(fmt.Sprintf("re-running statement %d", k))
	}
	if again := mustMetric(t, p, "keyshard_pool_prepares_total", "node1"); again <= prepares {
		t.Errorf("evicted statements ran without a new backend PREPARE (%v then %v)", prepares, again)
	}
	// Evicted and re-prepared many times over: the client's statements all
	// still answer right.
	for round := range 3 {
		for k := n - 1; k >= 0; k-- {
			var v int64
			if err := stmts[k].QueryRow(round).Scan(&v); err != nil || v != int64(round*(k+1)) {
				t.Fatalf("round %d statement %d: %d %v", round, k, v, err)
			}
		}
	}
	check("after the rounds")
}

// Closing a statement and preparing the same text again; an EXECUTE of a
// closed id is ER_UNKNOWN_STMT_HANDLER and the connection goes on.
func TestStmtCloseAndReprepare(t *testing.T) {
	d := stmtSetupDB(t)
	mustExec(t, d, "CREATE TABLE kv (k INT PRIMARY KEY, v VARCHAR(16))")
	mustExec(t, d, "INSERT INTO kv VALUES (1, 'one'), (2, 'two')")
	p := startProxy(t, baseYAML("%ADDR%"))
	db := p.open(t, "ks:ks", stmtDBName, "")
	db.SetMaxOpenConns(1)
	const q = "SELECT v FROM kv WHERE k = ?"
	for i := range 3 {
		s, err := db.Prepare(q)
		if err != nil {
			t.Fatalf("prepare #%d: %v", i, err)
		}
		var v string
		if err := s.QueryRow(1 + i%2).Scan(&v); err != nil || v != []string{"one", "two"}[i%2] {
			t.Fatalf("prepare #%d: %q %v", i, v, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	waitGauge := func(want float64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			v := mustMetric(t, p, "keyshard_client_prepared_statements", "")
			if v == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("keyshard_client_prepared_statements = %v, want %v", v, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitGauge(0)

	r := stmtLogin(t, p.Addr, stmtDBName, false)
	id, np, nc := r.mustPrepare(q)
	if np != 1 || nc != 1 {
		t.Fatalf("params %d columns %d", np, nc)
	}
	waitGauge(1)
	res := r.execute(id, 0, true, 2)
	if res.err != nil || len(res.rows) != 1 || rowString(t, res.rows[0]) != "two" {
		t.Fatalf("execute: %v", res.trans)
	}
	r.send(stmtIDCmd(mysql.COM_STMT_CLOSE, id)) // no answer
	res = r.execute(id, 0, true, 2)
	if errCode(res.err) != mysql.ER_UNKNOWN_STMT_HANDLER {
		t.Fatalf("execute of a closed statement: %v, want ERR 1243", res.trans)
	}
	r.ping("an EXECUTE of a closed statement")
	// Closing an unknown id: still no answer (the PING answers next).
	r.send(stmtIDCmd(mysql.COM_STMT_CLOSE, id))
	r.ping("COM_STMT_CLOSE of an unknown id")
	id2, _, _ := r.mustPrepare(q)
	if id2 == id {
		t.Fatalf("re-prepared statement reuses closed id %d", id)
	}
	res = r.execute(id2, 0, true, 1)
	if res.err != nil || len(res.rows) != 1 || rowString(t, res.rows[0]) != "one" {
		t.Fatalf("execute after re-prepare: %v", res.trans)
	}
	// A text query is answered in step.
	r.send(append([]byte{mysql.COM_QUERY}, "SELECT 'in step'"...))
	if p := r.mustRead(); p[0] != 1 {
		t.Fatalf("query after statements: %s", describe(p))
	}
	waitGauge(1)
}

// Malformed EXECUTE packets get an error and leave the connection usable;
// compared with what MariaDB answers to the same packets.
func TestStmtBadExecute(t *testing.T) {
	stmtSetupDB(t)
	p := startProxy(t, baseYAML("%ADDR%"))
	for _, target := range []struct{ name, addr string }{
		{"keyshard", p.Addr},
		{"mariadb", fmt.Sprintf("127.0.0.1:%d", basePort)},
	} {
		t.Run(target.name, func(t *testing.T) {
			r := stmtLogin(t, target.addr, stmtDBName, false)
			id, np, _ := r.mustPrepare("SELECT CONCAT(?, '-', ?)")
			if np != 2 {
				t.Fatalf("%d parameters", np)
			}
			// Types for two LONGLONG parameters but one value.
			full := execPacket(id, 0, true, 7, 8)
			r.send(full[:len(full)-8])
			res := r.readExecute(false)
			if errCode(res.err) != mysql.ER_WRONG_ARGUMENTS {
				t.Errorf("EXECUTE missing a parameter value: %v, want ERR 1210", res.trans)
			}
			r.ping("an EXECUTE missing a value")
			// Cut inside the types.
			r.send(full[:14])
			if res := r.readExecute(false); res.err == nil {
				t.Errorf("EXECUTE cut in the types: %v, want ERR", res.trans)
			}
			r.ping("an EXECUTE cut in the types")
			// 3 bytes, and a header without the iteration count.
			r.send([]byte{mysql.COM_STMT_EXECUTE, byte(id), 0})
			if res := r.readExecute(false); res.err == nil {
				t.Errorf("3-byte EXECUTE: %v, want ERR", res.trans)
			}
			r.ping("a 3-byte EXECUTE")
			r.send(full[:8])
			if res := r.readExecute(false); res.err == nil {
				t.Errorf("8-byte EXECUTE: %v, want ERR", res.trans)
			}
			r.ping("an 8-byte EXECUTE")
			// Types never bound (new-params-bound 0 on the first EXECUTE).
			r.send(execPacket(id, 0, false, 7, 8))
			res = r.readExecute(false)
			if target.name == "keyshard" && errCode(res.err) != mysql.ER_WRONG_ARGUMENTS {
				t.Errorf("EXECUTE without ever binding types: %v, want ERR 1210", res.trans)
			}
			t.Logf("%s: EXECUTE without ever binding types: %v", target.name, res.trans)
			r.ping("an EXECUTE without types")
			// The statement still works.
			res = r.execute(id, 0, true, 7, 8)
			if res.err != nil || len(res.rows) != 1 || rowString(t, res.rows[0]) != "7-8" {
				t.Fatalf("good EXECUTE after bad ones: %v", res.trans)
			}
			// Reusing the bound types.
			res = r.execute(id, 0, false, 9, 10)
			if res.err != nil || len(res.rows) != 1 || rowString(t, res.rows[0]) != "9-10" {
				t.Fatalf("EXECUTE reusing types: %v", res.trans)
			}
			// Unknown statement ids for every command that answers.
			r.send(execPacket(id+1000, 0, true, 1, 2))
			if res := r.readExecute(false); errCode(res.err) != mysql.ER_UNKNOWN_STMT_HANDLER {
				t.Errorf("EXECUTE of an unknown id: %v, want 1243", res.trans)
			}
			r.send(stmtIDCmd(mysql.COM_STMT_RESET, id+1000))
			if p := r.mustRead(); errCode(p) != mysql.ER_UNKNOWN_STMT_HANDLER {
				t.Errorf("RESET of an unknown id: %s, want 1243", describe(p))
			}
			r.send(stmtIDCmd(mysql.COM_STMT_RESET, id))
			if p := r.mustRead(); p[0] != 0 {
				t.Errorf("RESET: %s, want OK", describe(p))
			}
			// Long data for a parameter out of range, then for an unknown
			// statement: no answer to either.
			r.send(stmtIDCmd(mysql.COM_STMT_SEND_LONG_DATA, id, 9, 0, 'x'))
			r.send(stmtIDCmd(mysql.COM_STMT_SEND_LONG_DATA, id+1000, 0, 0, 'x'))
			r.ping("stray long data")
		})
	}
}

// cursorRun drives a read-only cursor over the 10-row table on addr and
// returns the transcript of every answer.
func cursorRun(t *testing.T, addr string, deprecateEOF bool) []string {
	t.Helper()
	r := stmtLogin(t, addr, stmtDBName, deprecateEOF)
	var trans []string
	id, _, nc := r.mustPrepare("SELECT id FROM cur_t ORDER BY id")
	if nc != 1 {
		t.Fatalf("%d columns", nc)
	}
	// FETCH before any cursor: 1421.
	res := r.fetch(id, 4)
	trans = append(trans, "fetch without cursor:")
	trans = append(trans, res.trans...)
	if errCode(res.err) != mysql.ER_STMT_HAS_NO_OPEN_CURSOR {
		t.Errorf("FETCH without a cursor: %v, want ERR 1421", res.trans)
	}
	for round := range 2 { // a second cursor on the same statement after the first ends
		res = r.execute(id, 1, true)
		trans = append(trans, fmt.Sprintf("execute cursor #%d:", round))
		trans = append(trans, res.trans...)
		if res.err != nil || res.cols != 1 {
			t.Fatalf("EXECUTE with a cursor: %v", res.trans)
		}
		if res.metaEnd == nil || termStatus(res.metaEnd)&mysql.SERVER_STATUS_CURSOR_EXISTS == 0 {
			t.Errorf("EXECUTE with a cursor: the column definitions must end with a terminator with SERVER_STATUS_CURSOR_EXISTS; got %v", res.trans)
		}
		if len(res.rows) != 0 || res.end != nil {
			t.Errorf("EXECUTE with a cursor sent rows or a second terminator: %v", res.trans)
		}
		var ids []int64
		for f := 0; ; f++ {
			if f > 5 {
				t.Fatalf("no SERVER_STATUS_LAST_ROW_SENT after %d fetches (ids %v)", f, ids)
			}
			res = r.fetch(id, 4)
			trans = append(trans, fmt.Sprintf("fetch #%d:", f))
			trans = append(trans, res.trans...)
			if res.err != nil || res.end == nil {
				t.Fatalf("FETCH: %v", res.trans)
			}
			if len(res.rows) > 4 {
				t.Fatalf("FETCH 4 gave %d rows", len(res.rows))
			}
			for _, row := range res.rows {
				ids = append(ids, rowInt(t, row, 1, 4))
			}
			st := termStatus(res.end)
			if st&mysql.SERVER_STATUS_LAST_ROW_SEND != 0 {
				break
			}
			if st&mysql.SERVER_STATUS_CURSOR_EXISTS == 0 {
				t.Errorf("FETCH terminator without CURSOR_EXISTS or LAST_ROW_SENT: %v", res.trans)
			}
		}
		if fmt.Sprint(ids) != "[1 2 3 4 5 6 7 8 9 10]" {
			t.Errorf("cursor rows %v", ids)
		}
		// The cursor is closed: FETCH is 1421 again.
		res = r.fetch(id, 4)
		trans = append(trans, "fetch after the last row:")
		trans = append(trans, res.trans...)
		if errCode(res.err) != mysql.ER_STMT_HAS_NO_OPEN_CURSOR {
			t.Errorf("FETCH after the last row: %v, want ERR 1421", res.trans)
		}
	}
	// A cursor closed early with COM_STMT_RESET, then a plain EXECUTE.
	res = r.execute(id, 1, true)
	if res.err != nil {
		t.Fatalf("EXECUTE with a cursor: %v", res.trans)
	}
	res = r.fetch(id, 2)
	if len(res.rows) != 2 {
		t.Fatalf("FETCH 2: %v", res.trans)
	}
	// Another statement while the cursor is open: a plain result set,
	// whose status must not claim a cursor.
	other, _, _ := r.mustPrepare("SELECT 'other'")
	res = r.execute(other, 0, true)
	trans = append(trans, "other statement while a cursor is open:")
	trans = append(trans, res.trans...)
	if res.err != nil || len(res.rows) != 1 {
		t.Fatalf("other statement while a cursor is open: %v", res.trans)
	}
	if st := res.status(); res.metaEnd != nil && termStatus(res.metaEnd)&(mysql.SERVER_STATUS_CURSOR_EXISTS|mysql.SERVER_STATUS_LAST_ROW_SEND) != 0 || st&mysql.SERVER_STATUS_CURSOR_EXISTS != 0 {
		t.Errorf("plain result while another statement's cursor is open says it has a cursor: %v", res.trans)
	}
	res = r.fetch(id, 2)
	trans = append(trans, "fetch after the other statement:")
	trans = append(trans, res.trans...)
	if len(res.rows) != 2 || rowInt(t, res.rows[0], 1, 4) != 3 {
		t.Fatalf("FETCH after another statement: %v", res.trans)
	}
	r.send(stmtIDCmd(mysql.COM_STMT_RESET, id))
	p := r.mustRead()
	trans = append(trans, "reset:", describe(p))
	if p[0] != 0 {
		t.Fatalf("COM_STMT_RESET: %s", describe(p))
	}
	res = r.fetch(id, 2)
	trans = append(trans, "fetch after reset:")
	trans = append(trans, res.trans...)
	if errCode(res.err) != mysql.ER_STMT_HAS_NO_OPEN_CURSOR {
		t.Errorf("FETCH after COM_STMT_RESET: %v, want ERR 1421", res.trans)
	}
	res = r.execute(id, 0, true)
	trans = append(trans, "plain execute:")
	trans = append(trans, res.trans...)
	if res.err != nil || len(res.rows) != 10 {
		t.Fatalf("plain EXECUTE after a cursor: %v", res.trans)
	}
	r.ping("cursors")
	return trans
}

// Cursors (COM_STMT_EXECUTE with CURSOR_TYPE_READ_ONLY, COM_STMT_FETCH):
// keyshard answers packet for packet what MariaDB answers, with and
// without CLIENT_DEPRECATE_EOF.
func TestStmtCursor(t *testing.T) {
	d := stmtSetupDB(t)
	mustExec(t, d, "CREATE TABLE cur_t (id INT PRIMARY KEY)")
	mustExec(t, d, "INSERT INTO cur_t VALUES (1),(2),(3),(4),(5),(6),(7),(8),(9),(10)")
	p := startProxy(t, baseYAML("%ADDR%"))
	for _, dep := range []bool{true, false} {
		t.Run(fmt.Sprintf("deprecate_eof=%v", dep), func(t *testing.T) {
			var trans [2][]string
			for i, addr := range []string{fmt.Sprintf("127.0.0.1:%d", basePort), p.Addr} {
				name := []string{"mariadb", "keyshard"}[i]
				t.Run(name, func(t *testing.T) { trans[i] = cursorRun(t, addr, dep) })
			}
			if !reflect.DeepEqual(trans[0], trans[1]) {
				t.Errorf("keyshard's answers differ from MariaDB's:\n%s", diffLines(trans[0], trans[1]))
			}
		})
	}
	// The statement's digest: per cursorRun 4 executions (3 with a cursor)
	// and 34 rows, most of them sent by fetches, which add to it.
	all, err := p.Srv.Digests(0, "")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range all {
		if d.Text == "SELECT id FROM cur_t ORDER BY id" {
			found = true
			if d.Count != 8 || d.Rows != 68 || d.Errors != 0 {
				t.Errorf("cursor statement digest: %d calls, %d rows, %d errors; want 8, 68, 0", d.Count, d.Rows, d.Errors)
			}
		}
	}
	if !found {
		t.Errorf("no digest for the cursor statement in %+v", all)
	}
}

// diffLines shows two transcripts side by side from their first difference.
func diffLines(a, b []string) string {
	var sb strings.Builder
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	fmt.Fprintf(&sb, "first difference at packet %d (mariadb | keyshard):\n", i)
	for k := max(0, i-3); k < max(len(a), len(b)) && k < i+8; k++ {
		var x, y string
		if k < len(a) {
			x = a[k]
		}
		if k < len(b) {
			y = b[k]
		}
		mark := " "
		if x != y {
			mark = "*"
		}
		fmt.Fprintf(&sb, "%s %-40s | %s\n", mark, x, y)
	}
	return sb.String()
}

// A statement whose cursor is open keeps its backend handle: running more
// statements than stmt_cache_size meanwhile must not close the cursor's.
func TestStmtCursorSurvivesCacheEviction(t *testing.T) {
	d := stmtSetupDB(t)
	mustExec(t, d, "CREATE TABLE cur_t (id INT PRIMARY KEY)")
	mustExec(t, d, "INSERT INTO cur_t VALUES (1),(2),(3),(4),(5),(6),(7),(8),(9),(10)")
	p := startProxy(t, stmtYAML(2, "stmt_cache_size: 2\n"))
	r := stmtLogin(t, p.Addr, stmtDBName, true)
	id, _, _ := r.mustPrepare("SELECT id FROM cur_t ORDER BY id")
	if res := r.execute(id, 1, true); res.err != nil || res.metaEnd == nil {
		t.Fatalf("EXECUTE with a cursor: %v", res.trans)
	}
	res := r.fetch(id, 4)
	if len(res.rows) != 4 {
		t.Fatalf("first FETCH: %v", res.trans)
	}
	for k := range 3 {
		other, _, _ := r.mustPrepare(fmt.Sprintf("SELECT %d", k))
		if res := r.execute(other, 0, true); res.err != nil || len(res.rows) != 1 {
			t.Fatalf("statement %d while the cursor is open: %v", k, res.trans)
		}
	}
	res = r.fetch(id, 4)
	if res.err != nil || len(res.rows) != 4 || rowInt(t, res.rows[0], 1, 4) != 5 {
		t.Fatalf("FETCH after other statements: %v, want rows 5..8", res.trans)
	}
	// The same text prepared again (another client statement, same
	// backend key) while the cursor is open.
	again, _, _ := r.mustPrepare("SELECT id FROM cur_t ORDER BY id")
	if res := r.execute(again, 0, true); res.err != nil || len(res.rows) != 10 {
		t.Fatalf("the same text as a second statement: %v", res.trans)
	}
	res = r.fetch(id, 4)
	if res.err != nil || len(res.rows) != 2 || rowInt(t, res.rows[0], 1, 4) != 9 {
		t.Fatalf("FETCH after preparing the same text again: %v, want rows 9, 10", res.trans)
	}
}

// Types bound by one EXECUTE are reused by the next one (new-params-bound
// 0) even when that one runs on a backend handle that never saw them: here
// the handle was evicted and is prepared again.
func TestStmtTypesReusedAfterEviction(t *testing.T) {
	stmtSetupDB(t)
	p := startProxy(t, stmtYAML(1, "stmt_cache_size: 1\n"))
	r := stmtLogin(t, p.Addr, stmtDBName, true)
	id, _, _ := r.mustPrepare("SELECT CONCAT(?, ':', ?)")
	res := r.execute(id, 0, true, 1, 2)
	if res.err != nil || len(res.rows) != 1 || rowString(t, res.rows[0]) != "1:2" {
		t.Fatalf("first EXECUTE: %v", res.trans)
	}
	res = r.execute(id, 0, false, 3, 4)
	if res.err != nil || len(res.rows) != 1 || rowString(t, res.rows[0]) != "3:4" {
		t.Fatalf("EXECUTE reusing types on the same handle: %v", res.trans)
	}
	other, _, _ := r.mustPrepare("SELECT 'other'") // evicts the first handle
	if res := r.execute(other, 0, true); res.err != nil {
		t.Fatalf("other: %v", res.trans)
	}
	prepares := mustMetric(t, p, "keyshard_pool_prepares_total", "node1")
	res = r.execute(id, 0, false, 5, -6)
	if res.err != nil || len(res.rows) != 1 || rowString(t, res.rows[0]) != "5:-6" {
		t.Fatalf("EXECUTE reusing types on a fresh handle: %v", res.trans)
	}
	if n := mustMetric(t, p, "keyshard_pool_prepares_total", "node1"); n != prepares+1 {
		t.Fatalf("backend prepares %v then %v: the evicted handle was not prepared again", prepares, n)
	}
}

// A statement prepared in one database resolves its names there, even
// when run after USE of another database on connections that never saw
// it.
func TestStmtPreparedDatabase(t *testing.T) {
	d := stmtSetupDB(t)
	mustExec(t, d, "CREATE TABLE which (v VARCHAR(8))")
	mustExec(t, d, "INSERT INTO which VALUES ('stmt')")
	mustExec(t, d, "CREATE TABLE IF NOT EXISTS ks_test.which (v VARCHAR(8))")
	mustExec(t, d, "DELETE FROM ks_test.which")
	mustExec(t, d, "INSERT INTO ks_test.which VALUES ('ks_test')")
	t.Cleanup(func() { _, _ = d.Exec("DROP TABLE IF EXISTS ks_test.which") })
	p := startProxy(t, stmtYAML(4, "stmt_cache_size: 1\n"))
	r := stmtLogin(t, p.Addr, stmtDBName, true)
	id, _, _ := r.mustPrepare("SELECT v FROM which")
	r.send(append([]byte{mysql.COM_INIT_DB}, "ks_test"...))
	if pk := r.mustRead(); pk[0] != 0 {
		t.Fatalf("COM_INIT_DB: %s", describe(pk))
	}
	for k := range 3 {
		res := r.execute(id, 0, true)
		if res.err != nil || len(res.rows) != 1 || rowString(t, res.rows[0]) != "stmt" {
			t.Fatalf("execution %d after USE ks_test: %v, want the row of %s.which", k, res.trans, stmtDBName)
		}
		// Evict it so the next run prepares it again.
		other, _, _ := r.mustPrepare(fmt.Sprintf("SELECT %d", k))
		r.execute(other, 0, true)
	}
	// New statements resolve in the current database.
	id2, _, _ := r.mustPrepare("SELECT v FROM which")
	res := r.execute(id2, 0, true)
	if res.err != nil || len(res.rows) != 1 || rowString(t, res.rows[0]) != "ks_test" {
		t.Fatalf("statement prepared after USE: %v", res.trans)
	}
	r.send(append([]byte{mysql.COM_QUERY}, "SELECT DATABASE()"...))
	var q rawResult
	for pk := r.next(&q); !isTerm(pk); pk = r.next(&q) {
	}
	if !strings.Contains(strings.Join(q.trans, " "), fmt.Sprintf("% x", "ks_test")) {
		t.Fatalf("current database changed by a prepare: %v", q.trans)
	}
}

// Prepared statements inside a text BEGIN ... ROLLBACK / COMMIT run in the
// transaction.
func TestStmtTransaction(t *testing.T) {
	d := stmtSetupDB(t)
	mustExec(t, d, "CREATE TABLE tx_t (id INT PRIMARY KEY, v VARCHAR(8)) ENGINE=InnoDB")
	p := startProxy(t, baseYAML("%ADDR%"))
	db := p.open(t, "ks:ks", stmtDBName, "")
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	count := func(id int) int {
		t.Helper()
		var n int
		if err := d.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM tx_t WHERE id = %d", id)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, end := range []string{"ROLLBACK", "COMMIT"} {
		id := map[string]int{"ROLLBACK": 1, "COMMIT": 2}[end]
		mustExecConn(t, conn, "BEGIN")
		if _, err := conn.ExecContext(ctx, "INSERT INTO tx_t (id, v) VALUES (?, ?)", id, end); err != nil {
			t.Fatal(err)
		}
		// Visible inside the transaction (same backend connection), not
		// outside.
		var n int
		if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM tx_t WHERE id = ?", id).Scan(&n); err != nil || n != 1 {
			t.Fatalf("%s: own insert not visible in the transaction: %d %v", end, n, err)
		}
		if c := count(id); c != 0 {
			t.Fatalf("%s: uncommitted row visible outside", end)
		}
		mustExecConn(t, conn, end)
		want := map[string]int{"ROLLBACK": 0, "COMMIT": 1}[end]
		if c := count(id); c != want {
			t.Fatalf("after %s: %d rows, want %d", end, c, want)
		}
	}
	// The same with database/sql's transaction API and one prepared
	// statement used across both.
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	s, err := tx.Prepare("INSERT INTO tx_t (id, v) VALUES (?, 'tx')")
	if err != nil {
		t.Fatal(err)
	}
	for id := 10; id < 15; id++ {
		if _, err := s.Exec(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := d.QueryRow("SELECT COUNT(*) FROM tx_t WHERE id >= 10").Scan(&n); err != nil || n != 0 {
		t.Fatalf("rolled back prepared inserts: %d rows %v", n, err)
	}
}

// COM_RESET_CONNECTION drops the session's statements.
func TestStmtResetConnection(t *testing.T) {
	stmtSetupDB(t)
	p := startProxy(t, baseYAML("%ADDR%"))
	r := stmtLogin(t, p.Addr, stmtDBName, true)
	id, _, _ := r.mustPrepare("SELECT CONCAT('x', ?)")
	if res := r.execute(id, 0, true, 1); res.err != nil || rowString(t, res.rows[0]) != "x1" {
		t.Fatalf("execute: %v", res.trans)
	}
	r.send([]byte{mysql.COM_RESET_CONNECTION})
	if pk := r.mustRead(); pk[0] != 0 {
		t.Fatalf("COM_RESET_CONNECTION: %s", describe(pk))
	}
	if res := r.execute(id, 0, true, 1); errCode(res.err) != mysql.ER_UNKNOWN_STMT_HANDLER {
		t.Fatalf("execute after COM_RESET_CONNECTION: %v, want ERR 1243", res.trans)
	}
	r.ping("an EXECUTE after reset")
	if v := mustMetric(t, p, "keyshard_client_prepared_statements", ""); v != 0 {
		t.Fatalf("keyshard_client_prepared_statements %v after reset", v)
	}
	id2, _, _ := r.mustPrepare("SELECT CONCAT('x', ?)")
	if res := r.execute(id2, 0, true, 2); res.err != nil || rowString(t, res.rows[0]) != "x2" {
		t.Fatalf("execute after re-prepare: %v", res.trans)
	}
	// The same with an open cursor: reset closes it.
	d := direct(t, basePort, stmtDBName)
	mustExec(t, d, "CREATE TABLE cur_t (id INT PRIMARY KEY)")
	mustExec(t, d, "INSERT INTO cur_t VALUES (1),(2),(3)")
	cid, _, _ := r.mustPrepare("SELECT id FROM cur_t ORDER BY id")
	if res := r.execute(cid, 1, true); res.err != nil || res.metaEnd == nil {
		t.Fatalf("cursor: %v", res.trans)
	}
	r.send([]byte{mysql.COM_RESET_CONNECTION})
	if pk := r.mustRead(); pk[0] != 0 {
		t.Fatalf("COM_RESET_CONNECTION with a cursor: %s", describe(pk))
	}
	if res := r.fetch(cid, 1); errCode(res.err) != mysql.ER_UNKNOWN_STMT_HANDLER {
		t.Fatalf("FETCH after reset: %v, want ERR 1243", res.trans)
	}
	r.ping("a FETCH after reset")
}

// A backend handle is shared by sessions that prepare the same text in the
// same database; it must not be shared across session settings that change
// how the text parses (sql_mode PIPES_AS_CONCAT here: || is OR or CONCAT).
func TestStmtCacheKeySessionState(t *testing.T) {
	stmtSetupDB(t)
	p := startProxy(t, stmtYAML(1, "")) // one backend connection for both clients
	dbA := p.open(t, "ks:ks", stmtDBName, "")
	dbB := p.open(t, "ks:ks", stmtDBName, "")
	dbA.SetMaxOpenConns(1)
	dbB.SetMaxOpenConns(1)
	const q = "SELECT CAST('1' || '0' AS CHAR)"
	get := func(s *sql.Stmt) string {
		t.Helper()
		var v string
		if err := s.QueryRow().Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	mustExec(t, dbB, "SET SESSION sql_mode = CONCAT(@@sql_mode, ',PIPES_AS_CONCAT')")
	sA, err := dbA.Prepare(q)
	if err != nil {
		t.Fatal(err)
	}
	defer sA.Close()
	if v := get(sA); v != "1" {
		t.Fatalf("default sql_mode: '1' || '0' = %q, want 1 (OR)", v)
	}
	sB, err := dbB.Prepare(q)
	if err != nil {
		t.Fatal(err)
	}
	defer sB.Close()
	if v := get(sB); v != "10" {
		t.Fatalf("PIPES_AS_CONCAT: '1' || '0' = %q, want 10", v)
	}
	for i := range 3 {
		if v := get(sA); v != "1" {
			t.Fatalf("round %d: client A (default sql_mode) got %q, want 1: it ran client B's handle, parsed with PIPES_AS_CONCAT", i, v)
		}
		if v := get(sB); v != "10" {
			t.Fatalf("round %d: client B (PIPES_AS_CONCAT) got %q, want 10", i, v)
		}
	}
}

// The connection holding a cursor breaks while the cursor is open: the
// cursor is gone with it, and the pool's accounting must stay right (the
// dead connection is given back once, not once more by the FETCH).
func TestStmtCursorBackendLost(t *testing.T) {
	d := stmtSetupDB(t)
	mustExec(t, d, "CREATE TABLE cur_t (id INT PRIMARY KEY)")
	mustExec(t, d, "INSERT INTO cur_t VALUES (1),(2),(3),(4),(5),(6),(7),(8),(9),(10)")
	const maxConns = 3
	p := startProxy(t, stmtYAML(maxConns, ""))
	r := stmtLogin(t, p.Addr, stmtDBName, true)
	id, _, _ := r.mustPrepare("SELECT id FROM cur_t ORDER BY id")
	if res := r.execute(id, 1, true); res.err != nil || res.metaEnd == nil {
		t.Fatalf("EXECUTE with a cursor: %v", res.trans)
	}
	// The session is pinned to the cursor's connection: find its id there.
	r.send(append([]byte{mysql.COM_QUERY}, "SELECT @@pseudo_thread_id"...))
	var q rawResult
	var rows []string
	for pk := r.next(&q); !isTerm(pk); pk = r.next(&q) {
		if pk[0] == 0xff {
			t.Fatalf("@@pseudo_thread_id: %v", q.trans)
		}
		if len(q.trans) > 2 { // count, definition, then the row
			rows = append(rows, string(pk[1:1+int(pk[0])]))
		}
	}
	if len(rows) != 1 {
		t.Fatalf("@@pseudo_thread_id rows %v (%v)", rows, q.trans)
	}
	mustExec(t, d, "KILL CONNECTION "+rows[0])
	time.Sleep(100 * time.Millisecond)
	// A text query on the dead pinned connection fails...
	r.send(append([]byte{mysql.COM_QUERY}, "SELECT 1"...))
	if pk := r.mustRead(); pk[0] != 0xff {
		// Drain a result if keyshard retried elsewhere.
		for !isTerm(pk) {
			pk = r.mustRead()
		}
	}
	// ...and so does the FETCH; the session goes on.
	r.send(stmtIDCmd(mysql.COM_STMT_FETCH, id, 4, 0, 0, 0))
	_ = r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	pk, err := r.read()
	if err != nil {
		// The session is stuck giving the dead connection back to its pool
		// a second time (a receive on the pool's slot semaphore that nothing
		// will match). Take a slot so it can go on and the proxy can shut
		// down; the pool's accounting is wrong from here on.
		t.Errorf("FETCH on a cursor whose connection died: no answer (%v): the session hangs releasing the dead connection again", err)
		if bc, err := p.Srv.Nodes()["node1"].Master.Get(context.Background(), backend.DefaultFlavor); err == nil {
			_ = bc
		}
		return
	}
	if pk[0] != 0xff {
		t.Fatalf("FETCH on a cursor whose connection died: %s, want an error", describe(pk))
	}
	r.ping("a FETCH on a dead cursor")
	_ = r.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	if res := r.execute(id, 0, true); res.err != nil || len(res.rows) != 10 {
		t.Fatalf("EXECUTE after the cursor died: %v", res.trans)
	}
	r.send([]byte{mysql.COM_QUIT})
	deadline := time.Now().Add(5 * time.Second)
	for {
		inUse := mustMetric(t, p, "keyshard_pool_in_use", "node1")
		open := mustMetric(t, p, "keyshard_pool_connections", "node1")
		if inUse == 0 && open >= 0 && open <= maxConns {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool accounting after the lost cursor connection: in_use %v, open %v (want 0 and 0..%d)", inUse, open, maxConns)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// execTyped builds COM_STMT_EXECUTE with bound types (2 bytes each) and
// already encoded values; a nil value is sent as nothing (long data).
func execTyped(id uint32, types []byte, values ...[]byte) []byte {
	b := stmtIDCmd(mysql.COM_STMT_EXECUTE, id, 0, 1, 0, 0, 0)
	b = append(b, make([]byte, (len(values)+7)/8)...)
	b = append(b, 1)
	b = append(b, types...)
	for _, v := range values {
		b = append(b, v...)
	}
	return b
}

func lenencStr(s string) []byte {
	if len(s) >= 251 {
		panic("short strings only")
	}
	return append([]byte{byte(len(s))}, s...)
}

func longlong(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }

// longDataRun sends long data in the ways clients may and returns what
// each EXECUTE answered.
func longDataRun(t *testing.T, addr string) []string {
	t.Helper()
	r := stmtLogin(t, addr, stmtDBName, true)
	id, _, _ := r.mustPrepare("SELECT CONCAT(?, '|', ?)")
	types := []byte{mysql.MYSQL_TYPE_VAR_STRING, 0, mysql.MYSQL_TYPE_LONGLONG, 0}
	long := func(param uint16, data string) {
		r.send(stmtIDCmd(mysql.COM_STMT_SEND_LONG_DATA, id, append(binary.LittleEndian.AppendUint16(nil, param), data...)...))
	}
	var out []string
	run := func(what string, pkt []byte) {
		t.Helper()
		r.send(pkt)
		res := r.readExecute(false)
		v := describe(res.err)
		if res.err == nil {
			if len(res.rows) != 1 {
				t.Fatalf("%s: %v", what, res.trans)
			}
			v = rowString(t, res.rows[0])
		}
		out = append(out, what+": "+v)
	}
	long(0, "ab")
	long(0, "cd")
	run("long string", execTyped(id, types, nil, longlong(5)))
	run("no long data", execTyped(id, types, lenencStr("x"), longlong(6)))
	long(0, "zz")
	r.send(stmtIDCmd(mysql.COM_STMT_RESET, id))
	if pk := r.mustRead(); pk[0] != 0 {
		t.Fatalf("COM_STMT_RESET: %s", describe(pk))
	}
	run("after reset", execTyped(id, types, lenencStr("y"), longlong(7)))
	long(0, "")
	run("empty long data", execTyped(id, types, nil, longlong(8)))
	long(0, "s")
	long(1, "42")
	run("long data for both", execTyped(id, types, nil, nil))
	// The second parameter long, the first not: values skip it.
	long(1, "43")
	run("second long", execTyped(id, types, lenencStr("v"), nil))
	// Then an EXECUTE that reuses the types (new-params-bound 0).
	long(0, "w")
	pkt := stmtIDCmd(mysql.COM_STMT_EXECUTE, id, 0, 1, 0, 0, 0)
	pkt = append(pkt, 0, 0)
	pkt = append(pkt, longlong(9)...)
	run("long with types reused", pkt)
	r.ping("long data")
	return out
}

// COM_STMT_SEND_LONG_DATA buffered by keyshard and replayed on whichever
// connection runs the EXECUTE, cleared by EXECUTE and COM_STMT_RESET: the
// same answers as MariaDB's.
func TestStmtLongDataRaw(t *testing.T) {
	stmtSetupDB(t)
	p := startProxy(t, stmtYAML(2, "max_allowed_packet: 1048576\n"))
	want := longDataRun(t, fmt.Sprintf("127.0.0.1:%d", basePort))
	got := longDataRun(t, p.Addr)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("keyshard vs MariaDB:\n%s", diffLines(want, got))
	}
	if want[0] != "long string: abcd|5" || want[1] != "no long data: x|6" || want[2] != "after reset: y|7" {
		t.Errorf("MariaDB answered %q", want)
	}

	// More long data than max_allowed_packet: the EXECUTE fails, the
	// session goes on and the next EXECUTE starts afresh.
	r := stmtLogin(t, p.Addr, stmtDBName, true)
	id, _, _ := r.mustPrepare("SELECT LENGTH(?)")
	chunk := strings.Repeat("x", 400<<10)
	for range 3 {
		r.send(stmtIDCmd(mysql.COM_STMT_SEND_LONG_DATA, id, append([]byte{0, 0}, chunk...)...))
	}
	r.send(execTyped(id, []byte{mysql.MYSQL_TYPE_BLOB, 0}, nil))
	if res := r.readExecute(false); res.err == nil {
		t.Fatalf("1.2 MiB of long data with max_allowed_packet 1 MiB: %v, want an error", res.trans)
	}
	r.ping("too much long data")
	r.send(stmtIDCmd(mysql.COM_STMT_SEND_LONG_DATA, id, append([]byte{0, 0}, chunk...)...))
	r.send(execTyped(id, []byte{mysql.MYSQL_TYPE_BLOB, 0}, nil))
	res := r.readExecute(false)
	if res.err != nil || len(res.rows) != 1 || rowInt(t, res.rows[0], 1, 4) != 400<<10 {
		t.Fatalf("long data under the limit after a refused EXECUTE: %v", res.trans)
	}
}

// A sharded statement whose shard key comes as long data routes by that
// value (MariaDB compares the string '5' with the BIGINT key 5), and long
// data for a numeric parameter is an error, not a dropped connection.
func TestStmtShardedLongDataKey(t *testing.T) {
	setupShardDB(t)
	p := startProxy(t, shardYAML("%ADDR%"))
	db := p.open(t, "ks:ks", "shard_e2e", "")
	mustExec(t, db, "CREATE TABLE sh_user (id BIGINT PRIMARY KEY, name VARCHAR(32))")
	mustExec(t, db, "INSERT INTO sh_user (id, name) VALUES (5, 'five'), (1, 'one')")
	r := stmtLogin(t, p.Addr, "shard_e2e", true)
	sel, _, _ := r.mustPrepare("SELECT name FROM sh_user WHERE id = ?")
	longKey := func(id uint32, v string) {
		r.send(stmtIDCmd(mysql.COM_STMT_SEND_LONG_DATA, id, append([]byte{0, 0}, v...)...))
	}
	longKey(sel, "5")
	r.send(execTyped(sel, []byte{mysql.MYSQL_TYPE_VAR_STRING, 0}, nil))
	res := r.readExecute(false)
	if res.err != nil || len(res.rows) != 1 || rowString(t, res.rows[0]) != "five" {
		t.Errorf("SELECT by a shard key sent as long data '5': %v, want the row 'five'", res.trans)
	}
	ins, _, _ := r.mustPrepare("INSERT INTO sh_user (id, name) VALUES (?, 'six')")
	longKey(ins, "6")
	r.send(execTyped(ins, []byte{mysql.MYSQL_TYPE_VAR_STRING, 0}, nil))
	if res := r.readExecute(false); res.err != nil {
		t.Errorf("INSERT with the shard key sent as long data: %v, want OK", res.trans)
	} else if got := subTableRows(t, basePort+1, "sh_user_0006"); strings.Join(got, ",") != "6" {
		t.Errorf("INSERT with the shard key as long data landed elsewhere: sh_user_0006 holds %v", got)
	}
	// Long data for a LONGLONG shard key: MariaDB refuses such an EXECUTE
	// (1210); keyshard must answer, not drop the connection.
	longKey(sel, "5")
	r.send(execTyped(sel, []byte{mysql.MYSQL_TYPE_LONGLONG, 0}, nil))
	pk, err := r.read()
	if err != nil {
		t.Fatalf("EXECUTE with long data for a LONGLONG shard key: connection lost (%v)", err)
	}
	if pk[0] != 0xff {
		for !isTerm(pk) && pk[0] != 0xff {
			pk = r.mustRead()
		}
	}
	r.ping("long data for a LONGLONG shard key")
}

// Prepared statements that leave state on their backend connection (user
// variables, temporary tables, session variables) must keep the session on
// that connection, as their text forms do, and never leak to another
// client of the pool.
func TestStmtSessionStateStatements(t *testing.T) {
	stmtSetupDB(t)
	// Two backend connections: B gets the one A's statements ran on (the
	// pool hands out the most recently returned one), unless A keeps it.
	p := startProxy(t, stmtYAML(2, "pool_wait_timeout: 2s\n"))
	dbA := p.open(t, "ks:ks", stmtDBName, "")
	dbB := p.open(t, "ks:ks", stmtDBName, "")
	ctx := context.Background()
	connA, err := dbA.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer connA.Close()
	prepExec := func(q string, args ...any) {
		t.Helper()
		s, err := connA.PrepareContext(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer s.Close()
		if _, err := s.Exec(args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	prepExec("SET @stmt_v = ?", 42)
	prepExec("CREATE TEMPORARY TABLE stmt_tmp (x INT)")
	prepExec("SET SESSION sql_mode = ?", "ANSI_QUOTES")
	// Another client sees none of it.
	connB, err := dbB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var v sql.NullString
	err = connB.QueryRowContext(ctx, "SELECT @stmt_v").Scan(&v)
	switch {
	case err != nil:
		t.Errorf("client B: %v", err)
	case v.Valid:
		t.Errorf("client B sees client A's user variable @stmt_v = %s (set by a prepared SET)", v.String)
	}
	var mode string
	if err := connB.QueryRowContext(ctx, "SELECT @@SESSION.sql_mode").Scan(&mode); err != nil {
		t.Errorf("client B: %v", err)
	} else if strings.Contains(mode, "ANSI_QUOTES") {
		t.Errorf("client B runs with client A's sql_mode %q (set by a prepared SET)", mode)
	}
	if _, err := connB.ExecContext(ctx, "INSERT INTO stmt_tmp VALUES (1)"); err == nil {
		t.Errorf("client B can use client A's temporary table")
	}
	connB.Close()
	dbB.Close()
	// Client A still has all of it.
	if err := connA.QueryRowContext(ctx, "SELECT @stmt_v").Scan(&v); err != nil || v.String != "42" {
		t.Errorf("client A: @stmt_v = %v %v, want 42", v, err)
	}
	if err := connA.QueryRowContext(ctx, "SELECT @@SESSION.sql_mode").Scan(&mode); err != nil || mode != "ANSI_QUOTES" {
		t.Errorf("client A: sql_mode %q %v, want ANSI_QUOTES", mode, err)
	}
	if _, err := connA.ExecContext(ctx, "INSERT INTO stmt_tmp VALUES (1)"); err != nil {
		t.Errorf("client A lost its temporary table: %v", err)
	}
}

// Statement id 0xffffffff is MariaDB's "statement prepared last" (what
// Connector/C's mariadb_stmt_execute_direct sends right behind its
// PREPARE); after a failed PREPARE it names no statement.
func TestStmtLastStatementID(t *testing.T) {
	stmtSetupDB(t)
	p := startProxy(t, baseYAML("%ADDR%"))
	run := func(addr string) []string {
		r := stmtLogin(t, addr, stmtDBName, true)
		var out []string
		exec := func(what string) {
			res := r.execute(0xffffffff, 0, true)
			v := describe(res.err)
			if res.err == nil {
				v = fmt.Sprint(len(res.rows), " rows: ", rowString(t, res.rows[0]))
			}
			out = append(out, what+": "+v)
		}
		r.mustPrepare("SELECT 'first'")
		exec("after a good PREPARE")
		if _, _, _, e := r.prepare("SELEC 'second'"); e == nil {
			t.Fatal("bad SQL prepared")
		}
		exec("after a failed PREPARE")
		r.ping("id 0xffffffff")
		return out
	}
	want := run(fmt.Sprintf("127.0.0.1:%d", basePort))
	got := run(p.Addr)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("keyshard vs MariaDB:\n%s", diffLines(want, got))
	}
}

// LAST_INSERT_ID() in a prepared statement is the session's, as in its
// text form, not that of whichever client last used the backend
// connection.
func TestStmtSessionFunctions(t *testing.T) {
	d := stmtSetupDB(t)
	mustExec(t, d, "CREATE TABLE ai (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
	p := startProxy(t, stmtYAML(2, ""))
	dbA := p.open(t, "ks:ks", stmtDBName, "")
	dbB := p.open(t, "ks:ks", stmtDBName, "")
	ctx := context.Background()
	connA, err := dbA.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer connA.Close()
	connB, err := dbB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer connB.Close()
	r, err := connA.ExecContext(ctx, "INSERT INTO ai (v) VALUES (?)", 1) // prepared
	if err != nil {
		t.Fatal(err)
	}
	idA, _ := r.LastInsertId()
	for range 3 {
		if _, err := connB.ExecContext(ctx, "INSERT INTO ai (v) VALUES (?)", 2); err != nil {
			t.Fatal(err)
		}
	}
	var text int64
	if err := connA.QueryRowContext(ctx, "SELECT LAST_INSERT_ID()").Scan(&text); err != nil || text != idA {
		t.Fatalf("text LAST_INSERT_ID(): %d %v, want %d", text, err, idA)
	}
	s, err := connA.PrepareContext(ctx, "SELECT LAST_INSERT_ID()")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got int64
	if err := s.QueryRow().Scan(&got); err != nil || got != idA {
		t.Fatalf("prepared LAST_INSERT_ID(): %d %v, want client A's %d (client B inserted up to %d meanwhile)", got, err, idA, idA+3)
	}
}
