package e2e

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// Differential test (issue 3): the same sequence of text and prepared
// statements, run directly against MariaDB and through keyshard, must get
// byte-identical answers: every packet of every answer (OK, ERR, EOF,
// column counts, column definitions, text and binary rows, PREPARE
// answers with their parameter and column definitions) is compared byte
// for byte.
//
// Both runs use the same backend (node1, 127.0.0.1:24307), the same
// database and the same table names, because schema and table names are
// part of every column definition. So the script runs first directly, then
// its database is dropped and created again and it runs through keyshard;
// each run starts on a fresh client connection with the same capabilities
// and handshake collation, and the two recordings are compared. The
// database, diff_e2e_<pid>, is the test's own: the e2e package may run in
// several processes at once against the same backends.
//
// Normalised before comparing, and nothing else:
//   - the statement id in the COM_STMT_PREPARE answer (bytes 1-4):
//     keyshard hands out its own per-session ids by design (the backend's
//     ids are server-wide counters and change with every run anyway).
//   - nothing in the EOF packets of clients without CLIENT_DEPRECATE_EOF:
//     such a client is served by backend connections opened without it
//     (backend.Flavor), and keyshard relays the server's own EOFs.
//   - nothing in the negotiated capabilities: keyshard greets as its
//     backends do (proxy/identity.go).
//
// Statements are deterministic: no NOW(), RAND(), CONNECTION_ID(), no SHOW
// whose output depends on time, statistics or other tests' tables.
// Auto-increment values are deterministic because each run starts from
// freshly created tables. The random part of the script is generated once
// from a seed (printed on failure; KS_DIFF_SEED=n replays it) and run on
// both sides.

// diffProfile is a set of client capabilities the script runs under.
type diffProfile struct {
	name   string
	opts   []client.Option
	script []diffStep // if set, run instead of the whole script
}

func diffProfiles(db string) []diffProfile {
	return []diffProfile{
		{
			// go-mysql's defaults (CLIENT_DEPRECATE_EOF, handshake collation
			// 255 which MariaDB 10.x does not know) plus multi-statements.
			name: "deprecate_eof",
			opts: []client.Option{withCaps(mysql.CLIENT_MULTI_STATEMENTS|mysql.CLIENT_MULTI_RESULTS|mysql.CLIENT_PS_MULTI_RESULTS, 0)},
		},
		{
			// Classic EOF packets, an explicit utf8mb4_general_ci handshake
			// collation, no multi-statements.
			name: "classic_eof",
			opts: []client.Option{
				withCaps(mysql.CLIENT_MULTI_RESULTS, mysql.CLIENT_DEPRECATE_EOF|mysql.CLIENT_MULTI_STATEMENTS),
				func(c *client.Conn) error { return c.SetCollation("utf8mb4_general_ci") },
			},
		},
		{
			// Classic EOF packets with multi-statements: batches and
			// CALLs answer several result sets, each with the server's
			// own EOFs and status.
			name: "classic_eof_multi",
			opts: []client.Option{
				withCaps(mysql.CLIENT_MULTI_STATEMENTS|mysql.CLIENT_MULTI_RESULTS|mysql.CLIENT_PS_MULTI_RESULTS, mysql.CLIENT_DEPRECATE_EOF),
			},
		},
		{
			// No CLIENT_MULTI_RESULTS: what differs for such a client,
			// text and prepared CALLs.
			name:   "no_multi_results",
			opts:   []client.Option{withCaps(0, mysql.CLIENT_MULTI_RESULTS|mysql.CLIENT_PS_MULTI_RESULTS|mysql.CLIENT_MULTI_STATEMENTS)},
			script: diffScriptNoMulti(db),
		},
	}
}

// diffProcs are created before each run (not recorded), so that CALL is
// compared even where keyshard refuses such a CREATE (see diff_proc3 in the
// script).
var diffProcs = []string{
	`CREATE PROCEDURE diff_proc(IN n INT) BEGIN SELECT n AS a; SELECT seq, 'x' AS b FROM seq_1_to_3 WHERE seq <= n;
		UPDATE diff_tx SET v = v WHERE id > n; END`,
	"CREATE PROCEDURE diff_out(IN x INT, OUT y INT, INOUT z VARCHAR(10)) BEGIN SET y = x * 2; SET z = CONCAT(z, '!'); END",
	// A result set with no more columns than the CALL has placeholders,
	// of 0 to 3 rows, before the OUT parameter's.
	"CREATE PROCEDURE diff_rows(IN n INT, OUT c INT) BEGIN SELECT seq FROM seq_1_to_3 WHERE seq <= n; SET c = n + 10; END",
}

func TestDiff(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("KS_DIFF_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("KS_DIFF_SEED: %v", err)
		}
		seed = v
	}
	// The random statements run in two halves: before the script's user
	// variables tie the keyshard session to one backend connection, and
	// after.
	db := fmt.Sprintf("diff_e2e_%d", os.Getpid())
	fixedA, fixedB := diffScript(db)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	steps := append(fixedA, diffRandom(rng, 150, true)...)
	steps = append(steps, fixedB...)
	steps = append(steps, diffRandom(rng, 150, false)...)
	nFixed := len(fixedA) + len(fixedB)

	p := startProxy(t, baseYAML("%ADDR%"))
	backendAddr := fmt.Sprintf("127.0.0.1:%d", basePort)
	root := direct(t, basePort, "")
	t.Cleanup(func() { _, _ = root.Exec("DROP DATABASE IF EXISTS " + db) })
	// setup gives each run a new database (not recorded).
	setup := func() {
		mustExec(t, root, "DROP DATABASE IF EXISTS "+db)
		mustExec(t, root, "CREATE DATABASE "+db+" DEFAULT CHARSET utf8mb4 COLLATE utf8mb4_general_ci")
		in := direct(t, basePort, db)
		for _, q := range diffProcs {
			mustExec(t, in, q)
		}
	}

	for _, prof := range diffProfiles(db) {
		t.Run(prof.name, func(t *testing.T) {
			steps, nFixed := steps, nFixed
			if prof.script != nil {
				steps = prof.script
				nFixed = len(steps)
			}
			var recs [2][][]diffAnswer
			var caps [2]string
			for i, addr := range []string{backendAddr, p.Addr} {
				setup()
				c := goMySQL(t, addr, prof.opts...)
				if err := c.UseDB(db); err != nil {
					t.Fatalf("%s: COM_INIT_DB %s: %v", addr, db, err)
				}
				caps[i] = c.CapabilityString()
				recs[i] = diffRun(t, c, steps)
				c.Close()
			}
			cmds, pkts := 0, 0
			for _, as := range recs[0] {
				cmds += len(as)
				for _, a := range as {
					pkts += len(a.pkts)
				}
			}
			t.Logf("%d statements (%d fixed, %d random, seed %d): %d commands, %d packets from MariaDB",
				len(steps), nFixed, len(steps)-nFixed, seed, cmds, pkts)
			if caps[0] != caps[1] {
				t.Errorf("negotiated capabilities differ with the same client:\n  mariadb:  %s\n  keyshard: %s", caps[0], caps[1])
			}
			// The script does what it says on MariaDB: statements meant to
			// fail fail, the others succeed (else a broken setup, say a
			// failed CREATE TABLE, would compare equal ERR packets).
			for i, st := range steps {
				if got := diffHasErr(recs[0][i]); st.want != wantAny && got != (st.want == wantErr) {
					t.Errorf("statement %d %q: MariaDB answered with an error: %v, the script expects %v", i, st.sql, got, st.want == wantErr)
				}
				if st.fetch != nil && strings.HasPrefix(st.sql, "SELECT") && !slices.ContainsFunc(recs[0][i], func(a diffAnswer) bool {
					return strings.HasPrefix(a.cmd, "fetch")
				}) {
					t.Errorf("statement %d %q: MariaDB opened no cursor", i, st.sql)
				}
			}
			failed := 0
			for i, st := range steps {
				if diffEqual(recs[0][i], recs[1][i]) {
					continue
				}
				failed++
				if failed <= 25 {
					t.Errorf("%s", diffReport(i, st, recs[0][i], recs[1][i]))
				}
			}
			if failed > 0 {
				t.Errorf("%d of %d statements answered differently (fixed script: %d, random: %d; seed %d, rerun with KS_DIFF_SEED=%d)",
					failed, len(steps), nFixed, len(steps)-nFixed, seed, seed)
			}
		})
	}
}

// ---------------------------------------------------------------- script

// diffStep is one statement: a text query (execs nil) or a prepared
// statement run once per entry of execs with those parameters, then
// closed; or a raw command.
type diffStep struct {
	sql   string
	execs [][]any
	reset bool     // COM_STMT_RESET between executions
	fetch []uint32 // set: executions open a read-only cursor, then COM_STMT_FETCH these row counts
	raw   []byte   // a command packet sent as is (sql describes it)
	want  diffWant
}

// diffWant is what MariaDB must answer to a step of the fixed script.
type diffWant uint8

const (
	wantOK  diffWant = iota // no ERR packet
	wantErr                 // an ERR packet (at least one execution fails)
	wantAny                 // depends on the client's capabilities, or random
)

func diffHasErr(as []diffAnswer) bool {
	for _, a := range as {
		for _, k := range a.kinds {
			if k == dkErr {
				return true
			}
		}
	}
	return false
}

// diffDecimal is a parameter sent as MYSQL_TYPE_NEWDECIMAL.
type diffDecimal string

// diffText in place of a prepared statement's execution runs as a text
// query between two executions.
type diffText string

// diffScriptBuilder collects steps.
type diffScriptBuilder struct{ steps []diffStep }

// q adds text queries that succeed.
func (b *diffScriptBuilder) q(sqls ...string) {
	for _, s := range sqls {
		b.steps = append(b.steps, diffStep{sql: s})
	}
}

// qErr adds text queries that fail.
func (b *diffScriptBuilder) qErr(sqls ...string) {
	for _, s := range sqls {
		b.steps = append(b.steps, diffStep{sql: s, want: wantErr})
	}
}

// p adds a prepared statement executed once per argument list (once with
// no parameters if none is given); none fails.
func (b *diffScriptBuilder) p(sql string, execs ...[]any) {
	if len(execs) == 0 {
		execs = [][]any{nil}
	}
	b.steps = append(b.steps, diffStep{sql: sql, execs: execs, reset: len(execs) > 2})
}

// pErr is p for a statement whose PREPARE or some execution fails.
func (b *diffScriptBuilder) pErr(sql string, execs ...[]any) {
	b.p(sql, execs...)
	b.steps[len(b.steps)-1].want = wantErr
}

// cursor adds a prepared statement executed with a read-only cursor, each
// execution followed by COM_STMT_FETCH of each count in fetch (while the
// cursor is open).
func (b *diffScriptBuilder) cursor(sql string, fetch []uint32, execs ...[]any) {
	b.p(sql, execs...)
	b.steps[len(b.steps)-1].fetch = fetch
}

// raw adds a command packet sent as is.
func (b *diffScriptBuilder) raw(what string, want diffWant, pkt ...byte) {
	b.steps = append(b.steps, diffStep{sql: what, raw: pkt, want: want})
}

// both adds sql as a text query and as a prepared statement without
// parameters: the same result in the text and in the binary protocol.
func (b *diffScriptBuilder) both(sqls ...string) {
	for _, s := range sqls {
		b.q(s)
		b.p(s)
	}
}

func diffParams(a ...any) []any { return a }

// diffStats keeps InnoDB's index statistics fixed: recalculated in the
// background between the two runs, they could change a plan, and with it
// the SERVER_STATUS_NO_INDEX_USED bits MariaDB itself reports.
const diffStats = "STATS_PERSISTENT=1 STATS_AUTO_RECALC=0"

const diffTypesDDL = `CREATE TABLE diff_types (
	id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
	ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
	mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED,
	bi BIGINT, biu BIGINT UNSIGNED,
	de DECIMAL(20,6), f FLOAT, d DOUBLE, bt BIT(12),
	dt DATE, dtm DATETIME(6), ts TIMESTAMP NULL DEFAULT NULL, tm TIME, yr YEAR,
	ch CHAR(8), vc VARCHAR(40), bn BINARY(4), vb VARBINARY(16),
	tx TEXT, bl BLOB, en ENUM('red','green','blue'), st SET('a','b','c','d'), js JSON,
	UNIQUE KEY uk_vc (vc), KEY k_i (i)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 ` + diffStats

const diffTypesCols = "ti,tiu,si,siu,mi,miu,i,iu,bi,biu,de,f,d,bt,dt,dtm,ts,tm,yr,ch,vc,bn,vb,tx,bl,en,st,js"

// diffScript is the fixed part of the script, in two parts: b runs with
// the keyshard session pinned to its backend connection (user variables).
// db is the database the script runs in.
func diffScript(db string) (a, b []diffStep) {
	return diffScriptA(db), diffScriptB(db)
}

func diffScriptA(db string) []diffStep {
	var b diffScriptBuilder
	ins := "INSERT INTO diff_types (" + diffTypesCols + ") VALUES "
	insP := ins + "(" + strings.TrimSuffix(strings.Repeat("?,", 28), ",") + ")"

	// DDL and its warnings.
	b.q(diffTypesDDL,
		`CREATE TABLE diff_ref (id INT PRIMARY KEY, type_id INT UNSIGNED, label VARCHAR(20) NOT NULL, weight DECIMAL(6,2),
			KEY (type_id)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 `+diffStats,
		"DROP TABLE IF EXISTS diff_no_such_table",
		"CREATE TABLE IF NOT EXISTS diff_ref (id INT)",
		"SHOW WARNINGS",
	)
	b.qErr("CREATE TABLE diff_ref (id INT)")

	// Rows: extremes, NULLs, empty strings, unicode.
	b.q(ins+`(-128,0,-32768,0,-8388608,0,-2147483648,0,-9223372036854775808,0,
		-99999999999999.999999,-3.40282e38,-1.7976931348623157e308,b'0',
		'1000-01-01','1000-01-01 00:00:00.000000','1980-01-01 00:00:00','-838:59:59',1901,
		'','','','','','','red','','[]')`,
		ins+`(127,255,32767,65535,8388607,16777215,2147483647,4294967295,9223372036854775807,18446744073709551615,
		99999999999999.999999,3.40282e38,1.7976931348623157e308,b'111111111111',
		'9999-12-31','9999-12-31 23:59:59.999999','2037-12-31 23:59:59','838:59:59',2155,
		'zzzzzzzz','héllo wörld 🦀 ünïcödé','\0\0\0\0',X'00FF27005C',REPEAT('äöü',300),X'DEADBEEF00','blue','a,b,c,d',
		'{"k": [1, 2.5, "ü", null, true], "n": {"x": -0.0}}')`,
		"INSERT INTO diff_types (id) VALUES (NULL)",
		ins+`(0,1,-1,2,-3,4,-5,6,-7,8,0.000001,1.5,-2.25,b'1010',
		'2024-02-29','2024-02-29 12:34:56.5','2024-02-29 12:34:56','12:34:56',2024,
		'ñ','Ωmega','ab','','line1\nline2\ttab','\'quoted\'','green','b,d','{"a": "b"}')`,
		ins+`(1,2,3,4,5,6,7,8,9,10,1.5,0.1,0.1,b'1',
		'2000-01-01','2000-01-01 00:00:00','2000-01-01 00:00:00','00:00:00',2000,
		'x','same',NULL,NULL,NULL,NULL,NULL,NULL,NULL),
		(2,3,4,5,6,7,8,9,10,11,2.5,0.2,0.2,b'10',
		'2000-01-02','2000-01-02 00:00:00','2000-01-02 00:00:00','00:00:01',2001,
		'y','other',NULL,NULL,'',X'',NULL,NULL,'null')`,
	)
	b.p(insP,
		diffParams(int8(-1), uint8(200), int16(-300), uint16(60000), int32(-70000), uint32(70000), int32(-2000000000), uint32(4000000000),
			int64(math.MinInt64+1), uint64(math.MaxUint64-1), diffDecimal("-12345.678901"), float32(-0.5), float64(1e-300), []byte{0x0f, 0xff},
			time.Date(1999, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(2001, 2, 3, 4, 5, 6, 789000, time.UTC),
			time.Date(2010, 6, 7, 8, 9, 10, 0, time.UTC), -(100*time.Hour+2*time.Minute+3*time.Second), int16(1999),
			"bound", "prepared ✓ 🦀", []byte{1, 2, 3, 4}, []byte{0, 0xfe, 0xff}, strings.Repeat("long text ", 100), bytes.Repeat([]byte{0xa5}, 1000),
			"blue", "c", `{"prepared": true}`),
		diffParams(nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil,
			nil, nil, nil, nil, nil, nil, "all null but me", nil, nil, nil, nil, nil, nil, nil),
		diffParams("12", "13", "14", "15", "16", "17", "18", "19", "20", "21", "22.5", "1.25", "2.5e10", "1",
			"2020-02-02", "2020-02-02 20:20:20.202020", "2020-02-02 20:20:20", "20:20:20", "2020",
			"str", "strings for all", "abcd", "vb", "tx", "bl", "red", "a", `[1,2,3]`),
		diffParams(int64(5), int64(5), int64(5), int64(5), int64(5), int64(5), int64(5), int64(5), int64(5), int64(5), float64(5.5), float64(5.5), float64(5.5), int64(5),
			"2005-05-05", "2005-05-05", "2005-05-05", time.Duration(0), int64(2005),
			"", "five", "", "", "", "", "green", "", `{}`),
	)
	b.both("SELECT LAST_INSERT_ID()", "SELECT ROW_COUNT()")
	b.q(`INSERT INTO diff_ref VALUES (1, 1, 'one', 1.5), (2, 2, 'two', NULL), (3, 2, 'three', 3.25), (4, 99, 'orphan', -1),
		(5, NULL, 'nothing', 0), (6, 4, 'ünï', 99.99)`)

	// Whole rows, in both protocols.
	b.both("SELECT * FROM diff_types ORDER BY id",
		"SELECT * FROM diff_ref ORDER BY id",
		"SELECT id, ti, tiu, si, siu, mi, miu, i, iu, bi, biu FROM diff_types ORDER BY id DESC",
		"SELECT id, de, f, d, bt FROM diff_types ORDER BY id",
		"SELECT id, dt, dtm, ts, tm, yr FROM diff_types ORDER BY id",
		"SELECT id, ch, vc, bn, vb, tx, bl, en, st, js FROM diff_types ORDER BY id",
		"SELECT diff_types.*, 'lit' AS lit, NULL AS n FROM diff_types WHERE id = 2",
		"SELECT t.id AS `renamed id`, t.vc `Wörd` FROM diff_types AS t ORDER BY t.id LIMIT 3",
	)
	// Expressions.
	b.both(`SELECT id, ti + 1, tiu * 2, si - 1, bi DIV 2, biu MOD 7, -i, iu + 0, de * 2, de / 3, f + 0, d / 3, bt + 0, HEX(bt), BIN(bt)
			FROM diff_types ORDER BY id`,
		`SELECT id, dt + INTERVAL 1 DAY, DATE_FORMAT(dtm, '%Y-%m-%d %H:%i:%s.%f'), TIME_TO_SEC(tm), yr + 0, UNIX_TIMESTAMP(ts),
			DAYNAME(dt), DATEDIFF(dt, '2000-01-01'), EXTRACT(MICROSECOND FROM dtm), CAST(dtm AS DATE), CAST(tm AS TIME(3))
			FROM diff_types ORDER BY id`,
		`SELECT id, CONCAT(ch, '|', vc), LENGTH(vc), CHAR_LENGTH(vc), UPPER(vc), LOWER(vc), REVERSE(vc), HEX(bn), HEX(vb),
			LEFT(tx, 10), LENGTH(tx), LENGTH(bl), MD5(bl), en + 0, FIND_IN_SET('c', st), JSON_EXTRACT(js, '$.k[1]'), JSON_TYPE(js),
			JSON_VALID(js) FROM diff_types ORDER BY id`,
		`SELECT id, COALESCE(vc, 'none'), IFNULL(i, -1), NULLIF(ti, 0), IF(ti > 0, 'pos', 'neg'),
			CASE en WHEN 'red' THEN 1 WHEN 'green' THEN 2 ELSE 0 END, i IS NULL, vc LIKE '%o%', vc REGEXP '^[a-z]+$'
			FROM diff_types ORDER BY id`,
		`SELECT CAST(biu AS CHAR), CAST(d AS DECIMAL(30,10)), CAST(-1 AS UNSIGNED), CAST('12abc' AS SIGNED), CONVERT(vc USING latin1),
			CAST(vc AS BINARY), CAST(js AS CHAR) FROM diff_types WHERE id <= 3 ORDER BY id`,
		`SELECT 1, -1, 1.5, -1.5e10, 'str', _latin1 'lat', X'CAFE', b'101', NULL, TRUE, 18446744073709551615, -9223372036854775808,
			0.1 + 0.2, 1e308 / 10, DATE '2020-01-01', TIMESTAMP '2020-01-01 10:00:00.123', TIME '-01:02:03'`,
		"SELECT REPEAT('x', 70000) AS big, REPEAT('🦀', 1000) AS crabs",
		"SELECT 1/0, 0/0, MOD(1, 0), LOG(-1), SQRT(-1)",
		"SELECT CAST('abc' AS INT), CAST('2020-13-45' AS DATE), 'a' + 1",
		"SELECT 1 FROM DUAL WHERE 1 = 0",
		"SELECT seq, seq * seq, CONCAT('row ', seq) FROM seq_1_to_500",
		"SELECT GREATEST(1, 2.5, '3'), LEAST('b', 'a'), ROUND(2.5), ROUND(-2.5), TRUNCATE(1.999, 2), FORMAT(1234567.891, 2), CONV(255, 10, 16)",
		"SELECT JSON_OBJECT('a', 1, 'b', 'ü'), JSON_ARRAY(1, NULL, 'x'), JSON_QUOTE('q\"'), JSON_UNQUOTE('\"u\"')",
		"SELECT DATABASE(), USER() IS NOT NULL, VERSION() = VERSION(), CHARSET('x'), COLLATION('x'), COERCIBILITY('x')",
	)
	// Aggregates, grouping, ordering, limits.
	b.both(`SELECT COUNT(*), COUNT(i), COUNT(DISTINCT en), SUM(bi), SUM(biu), AVG(d), AVG(i), MIN(dtm), MAX(vc), MIN(de), MAX(de),
			BIT_OR(bt), BIT_AND(ti), STD(si), VARIANCE(si) FROM diff_types`,
		"SELECT en, COUNT(*), GROUP_CONCAT(id ORDER BY id), SUM(i) FROM diff_types GROUP BY en ORDER BY en",
		"SELECT en, COUNT(*) AS n FROM diff_types GROUP BY en HAVING n > 1 ORDER BY n DESC, en",
		"SELECT en, st, COUNT(*) FROM diff_types GROUP BY en, st WITH ROLLUP",
		"SELECT id, i FROM diff_types ORDER BY i IS NULL, i DESC, id LIMIT 4",
		"SELECT id FROM diff_types ORDER BY id LIMIT 3 OFFSET 2",
		"SELECT id, vc FROM diff_types ORDER BY vc, id",
		"SELECT DISTINCT en FROM diff_types ORDER BY en",
		"SELECT SQL_CALC_FOUND_ROWS id FROM diff_types ORDER BY id LIMIT 2",
	)
	b.q("SELECT FOUND_ROWS()")
	// Joins, subqueries, unions.
	b.both(`SELECT t.id, t.vc, r.label, r.weight FROM diff_types t JOIN diff_ref r ON r.type_id = t.id ORDER BY t.id, r.id`,
		`SELECT r.id, r.label, t.id, t.en FROM diff_ref r LEFT JOIN diff_types t ON t.id = r.type_id ORDER BY r.id`,
		`SELECT t.id, (SELECT COUNT(*) FROM diff_ref r WHERE r.type_id = t.id) AS refs FROM diff_types t ORDER BY t.id`,
		`SELECT id FROM diff_types WHERE id IN (SELECT type_id FROM diff_ref) ORDER BY id`,
		`SELECT id, 'types' AS src FROM diff_types WHERE id < 3 UNION ALL SELECT id, 'ref' FROM diff_ref WHERE id < 3 ORDER BY id, src`,
		`SELECT vc FROM diff_types UNION SELECT label FROM diff_ref ORDER BY 1`,
		`SELECT r.type_id, SUM(r.weight), MAX(t.dt) FROM diff_ref r JOIN diff_types t ON t.id = r.type_id GROUP BY r.type_id ORDER BY r.type_id`,
		`SELECT a.id, b.id FROM diff_ref a JOIN diff_ref b ON b.id = a.id + 1 ORDER BY a.id`,
	)
	// Prepared statements with bound parameters of every kind.
	b.p("SELECT * FROM diff_types WHERE id = ?", diffParams(int64(1)), diffParams(int64(2)), diffParams(int32(3)), diffParams("4"), diffParams(nil), diffParams(uint64(1000)))
	b.p("SELECT id, vc FROM diff_types WHERE vc = ? OR vc LIKE ? ORDER BY id", diffParams("héllo wörld 🦀 ünïcödé", "s%"), diffParams("", "%"), diffParams(nil, nil))
	b.p("SELECT id FROM diff_types WHERE bi < ? AND biu > ? ORDER BY id", diffParams(int64(0), uint64(0)), diffParams(int64(math.MaxInt64), uint64(math.MaxUint64-2)))
	b.p("SELECT id, dtm FROM diff_types WHERE dtm BETWEEN ? AND ? ORDER BY id",
		diffParams(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)),
		diffParams("1000-01-01", "2000-01-01 00:00:00"))
	b.p("SELECT id FROM diff_types WHERE tm = ? OR tm = ? ORDER BY id", diffParams(-(100*time.Hour+2*time.Minute+3*time.Second), time.Duration(0)),
		diffParams(838*time.Hour+59*time.Minute+59*time.Second, "20:20:20"))
	b.p("SELECT id, de FROM diff_types WHERE de > ? ORDER BY id", diffParams(diffDecimal("0")), diffParams(float64(-1e20)), diffParams(diffDecimal("1.5")))
	b.p("SELECT id FROM diff_types WHERE bl = ? OR vb = ? ORDER BY id", diffParams([]byte{0xde, 0xad, 0xbe, 0xef, 0}, []byte{0, 0xfe, 0xff}), diffParams([]byte{}, []byte{}))
	b.p("SELECT ? AS a, ? AS b, ? AS c, ? AS d, ? AS e, ? AS f, ? AS g, ? AS h",
		diffParams(int8(-1), uint8(255), int16(-2), uint16(65535), int32(-3), uint32(math.MaxUint32), int64(-4), uint64(math.MaxUint64)),
		diffParams(float32(1.5), float64(-2.25), "s", []byte{0, 1}, nil, diffDecimal("-0.001"), time.Date(2020, 1, 2, 3, 4, 5, 6000, time.UTC), -time.Minute),
		diffParams("", "ü", nil, nil, nil, nil, nil, nil))
	b.p("SELECT ? + 1, CONCAT(?, 'x'), ? IS NULL", diffParams(int64(41), "a", nil), diffParams(float64(0.5), int64(7), int64(0)))
	b.p("SELECT en, COUNT(*) FROM diff_types WHERE id > ? GROUP BY en ORDER BY en LIMIT ?", diffParams(int64(0), int64(2)), diffParams(int64(3), int64(10)))
	b.p("SELECT t.id, r.label FROM diff_types t JOIN diff_ref r ON r.type_id = t.id WHERE r.weight > ? ORDER BY t.id, r.id",
		diffParams(float64(1)), diffParams(diffDecimal("-5")), diffParams(nil))

	// Read-only cursors and COM_STMT_FETCH.
	b.cursor("SELECT id, vc, dtm FROM diff_types WHERE id > ? ORDER BY id", []uint32{2, 3, 100},
		diffParams(int64(0)), diffParams(int64(5)), diffParams(int64(1000)))
	b.cursor("SELECT seq, REPEAT('r', seq) FROM seq_1_to_300", []uint32{1, 99, 200, 5})
	b.cursor("SELECT * FROM diff_ref ORDER BY id", []uint32{4, 4, 4})
	b.cursor("UPDATE diff_ref SET weight = weight WHERE id = ?", []uint32{1}, diffParams(int64(1)))

	// SHOW with deterministic output.
	b.both("SHOW COLUMNS FROM diff_types", "SHOW FULL COLUMNS FROM diff_ref", "SHOW CREATE TABLE diff_types",
		"SHOW TABLES LIKE 'diff\\_ref'", "SHOW VARIABLES LIKE 'sql_mode'", "SHOW VARIABLES LIKE 'character\\_set\\_%'",
		"SHOW VARIABLES LIKE 'collation%'", "SHOW SESSION VARIABLES LIKE 'autocommit'")
	b.q("SHOW COLUMNS FROM diff_types LIKE 'd%'", "SHOW DATABASES LIKE '"+strings.ReplaceAll(db, "_", "\\_")+"'", "DESCRIBE diff_ref",
		"SELECT @@autocommit, @@sql_mode, @@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection",
		"SELECT @@time_zone, @@tx_isolation, @@max_allowed_packet, @@sql_select_limit, @@group_concat_max_len, @@div_precision_increment",
		"SELECT @@session.auto_increment_increment, @@session.big_tables, @@session.sql_safe_updates, @@session.wait_timeout")

	// Updates and deletes: affected rows, info strings, warnings.
	b.q("UPDATE diff_types SET i = i + 1 WHERE id IN (1, 3, 4)",
		"UPDATE diff_types SET ch = ch WHERE id <= 3", // matched, not changed
		"SELECT ROW_COUNT()",
		"UPDATE diff_types SET vc = CONCAT(vc, '!') WHERE vc = 'same'",
		"UPDATE diff_types SET ti = 127 WHERE id = 100",
		"UPDATE diff_ref r JOIN diff_types t ON t.id = r.type_id SET r.weight = r.weight + 1",
		"INSERT INTO diff_ref VALUES (7, 1, 'seven', 7), (8, 1, 'eight', 8), (9, 1, 'nine', 9)",
		"INSERT INTO diff_ref VALUES (7, 2, 'again', 0) ON DUPLICATE KEY UPDATE label = 'dup'",
		"INSERT INTO diff_ref VALUES (8, 1, 'eight', 8) ON DUPLICATE KEY UPDATE label = label",
		"REPLACE INTO diff_ref VALUES (9, 3, 'replaced', 9.5)",
		"INSERT IGNORE INTO diff_ref VALUES (1, 1, 'ignored', 0), (10, 1, 'ten', 10)",
		"SHOW WARNINGS",
		"DELETE FROM diff_ref WHERE id = 10",
		"DELETE FROM diff_ref WHERE id > 100",
		"DELETE FROM diff_ref WHERE type_id = 1 ORDER BY id DESC LIMIT 1",
		"SELECT * FROM diff_ref ORDER BY id",
	)
	b.qErr("UPDATE diff_types SET i = i + 1 WHERE id = 2")
	b.p("UPDATE diff_types SET vc = ?, ti = ? WHERE id = ?", diffParams("upd1", int64(1), int64(4)), diffParams("upd2", int64(2), int64(4)),
		diffParams("upd2", int64(2), int64(4)), diffParams(nil, nil, int64(99)))
	b.pErr("INSERT INTO diff_ref (id, type_id, label, weight) VALUES (?, ?, ?, ?)", diffParams(int64(20), int64(1), "p20", diffDecimal("20.20")),
		diffParams(int64(21), nil, "p21", nil), diffParams(int64(20), int64(1), "dup", nil))
	b.p("DELETE FROM diff_ref WHERE id = ?", diffParams(int64(21)), diffParams(int64(21)))
	b.p("INSERT INTO diff_types (vc) VALUES (?)", diffParams("auto 1"), diffParams("auto 2"))
	b.both("SELECT LAST_INSERT_ID()", "SELECT @@identity, @@last_insert_id")
	b.p("SELECT 1 / ?, ? DIV 0", diffParams(int64(0), int64(1)))
	b.q("SHOW WARNINGS", "SELECT @@warning_count")

	// Errors: errno, SQLSTATE and message.
	b.qErr("SELEC 1",
		"SELECT * FROM diff_no_such_table",
		"SELECT no_such_column FROM diff_types",
		"SELECT id FROM diff_types JOIN diff_ref USING (id) WHERE id = (SELECT id FROM diff_ref)",
		"SELECT id FROM diff_types, diff_ref",
		"SELECT 1 UNION SELECT 1, 2",
		"INSERT INTO diff_ref VALUES (1, 1, 'dup', 0)",
		"INSERT INTO diff_types (vc) VALUES ('same!')",
		"INSERT INTO diff_ref (id, label) VALUES (30, REPEAT('x', 21))",
		"INSERT INTO diff_ref (id, label) VALUES (31, NULL)",
		"INSERT INTO diff_types (ti) VALUES (128)",
		"INSERT INTO diff_types (i) VALUES ('abc')",
		"INSERT INTO diff_types (dt) VALUES ('2021-02-30')",
		"INSERT INTO diff_types (i) VALUES (1/0)",
		"INSERT INTO diff_types (js) VALUES ('{not json')",
		"INSERT INTO diff_types (en) VALUES ('purple')",
		"SELECT 18446744073709551615 + 1",
		"SELECT CAST(-9223372036854775808 AS SIGNED) - 1",
		"SELECT * FROM "+db+".diff_types WHERE id = 'ü' AND no_col_ü = 1",
		"DROP TABLE diff_no_such_table",
		"USE diff_no_such_db",
		"SHOW COLUMNS FROM diff_no_such_table",
		"SELECT 'syntax error at the end",
		"UPDATE diff_types SET i = i + 1 WHERE id = 2",
	)
	b.pErr("SELEC ?")
	b.pErr("SELECT * FROM diff_no_such_table WHERE id = ?")
	b.pErr("SELECT ? FROM diff_types WHERE no_col = ?")
	b.pErr("INSERT INTO diff_ref (id, label) VALUES (?, ?)", diffParams(int64(40), strings.Repeat("y", 21)), diffParams(int64(41), nil), diffParams(int64(1), "dup"),
		diffParams(int64(42), "fine"))
	b.q("SHOW WARNINGS")
	// Commands on statement ids that do not exist, and other commands.
	const noStmt = 0x12345678
	b.raw("COM_STMT_EXECUTE of an unknown statement", wantErr, stmtIDCmd(mysql.COM_STMT_EXECUTE, noStmt, 0, 1, 0, 0, 0)...)
	b.raw("COM_STMT_RESET of an unknown statement", wantErr, stmtIDCmd(mysql.COM_STMT_RESET, noStmt)...)
	b.raw("COM_STMT_FETCH of an unknown statement", wantErr, stmtIDCmd(mysql.COM_STMT_FETCH, noStmt, 1, 0, 0, 0)...)
	b.raw("COM_INIT_DB diff_no_such_db", wantErr, append([]byte{mysql.COM_INIT_DB}, "diff_no_such_db"...)...)
	b.raw("COM_INIT_DB "+db, wantOK, append([]byte{mysql.COM_INIT_DB}, db...)...)
	b.raw("COM_PING", wantOK, mysql.COM_PING)

	return b.steps
}

func diffScriptB(db string) []diffStep {
	var b diffScriptBuilder
	// Session state: sql_mode, charset, time zone, user variables.
	b.q("SET SESSION sql_mode = ''",
		"INSERT INTO diff_ref (id, label) VALUES (50, REPEAT('z', 25))",
		"SHOW WARNINGS",
		"INSERT INTO diff_types (ti, i, dt) VALUES (1000, 'abc', '2021-02-30')",
		"SHOW WARNINGS",
		"SELECT @@warning_count, @@error_count",
		"SELECT 1/0",
		"SHOW WARNINGS",
		"SET SESSION sql_mode = DEFAULT",
		"SELECT @@sql_mode",
		"SET SESSION sql_mode = 'ANSI_QUOTES,STRICT_ALL_TABLES'",
		`SELECT "id" FROM "diff_ref" WHERE "id" = 1`,
		"SET SESSION sql_mode = DEFAULT",
		"SET NAMES latin1",
		"SELECT id, vc, ch, CONCAT(vc, 'ß') FROM diff_types WHERE id IN (2, 4, 7) ORDER BY id",
		"SELECT 'ü', _utf8mb4 'ü', CHARSET('x')",
		"SHOW VARIABLES LIKE 'character\\_set\\_%'",
		"SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci",
		"SELECT 'ü' = 'u', COLLATION('x'), vc FROM diff_types WHERE id = 2",
		"SET character_set_results = NULL",
		"SELECT vc, 'ü' FROM diff_types WHERE id = 2",
		"SET NAMES utf8mb4",
		"SET time_zone = '+05:00'",
		"SELECT id, ts, UNIX_TIMESTAMP(ts) FROM diff_types WHERE ts IS NOT NULL ORDER BY id",
		"SET time_zone = DEFAULT",
		"SET @v = 5, @s = 'str', @n = NULL",
		"SELECT @v, @s, @n, @v + 1, @undefined",
		"SET SESSION group_concat_max_len = 8",
		"SELECT GROUP_CONCAT(id ORDER BY id) FROM diff_types",
		"SHOW WARNINGS",
		"SET SESSION group_concat_max_len = DEFAULT",
		"SET SESSION div_precision_increment = 10",
		"SELECT 1 / 3, de / 7 FROM diff_types WHERE id = 2",
		"SET SESSION div_precision_increment = DEFAULT",
	)
	b.both("SELECT @v, @s, @v * 2")
	b.p("SELECT ? + @v, @s", diffParams(int64(1)), diffParams(float64(0.5)))
	b.q("SET @a = 2",
		"PREPARE diff_s1 FROM 'SELECT id, vc, ? AS p FROM diff_types WHERE id = ?'",
		"EXECUTE diff_s1 USING @s, @a",
	)
	b.qErr("EXECUTE diff_s1 USING @a")
	b.q("DEALLOCATE PREPARE diff_s1")
	b.qErr("EXECUTE diff_s1 USING @a, @a", "PREPARE diff_s2 FROM 'SELEC'")

	// Transactions: status flags in every OK and EOF.
	b.q("CREATE TABLE diff_tx (id INT PRIMARY KEY, v VARCHAR(10)) ENGINE=InnoDB "+diffStats,
		"BEGIN",
		"INSERT INTO diff_tx VALUES (1, 'a')",
		"SELECT * FROM diff_tx",
		"SELECT @@in_transaction",
		"ROLLBACK",
		"SELECT * FROM diff_tx",
		"START TRANSACTION",
		"INSERT INTO diff_tx VALUES (2, 'b')",
		"UPDATE diff_tx SET v = 'bb' WHERE id = 2",
		"COMMIT",
		"SET autocommit = 0",
		"INSERT INTO diff_tx VALUES (3, 'c')",
		"SELECT * FROM diff_tx ORDER BY id",
		"ROLLBACK",
		"INSERT INTO diff_tx VALUES (4, 'd')",
		"COMMIT",
		"SET autocommit = 1",
		"SELECT * FROM diff_tx ORDER BY id",
		"START TRANSACTION READ ONLY",
	)
	b.qErr("INSERT INTO diff_tx VALUES (5, 'e')")
	b.q("SELECT COUNT(*) FROM diff_tx", "COMMIT", "BEGIN")
	b.qErr("INSERT INTO diff_tx VALUES (4, 'dup')")
	b.q("SELECT * FROM diff_tx ORDER BY id", "COMMIT")
	b.pErr("INSERT INTO diff_tx VALUES (?, ?)", diffParams(int64(10), "p"), diffParams(int64(10), "dup"))
	b.q("BEGIN")
	b.p("UPDATE diff_tx SET v = ? WHERE id = ?", diffParams("in tx", int64(10)))
	b.both("SELECT * FROM diff_tx ORDER BY id")
	// Answers keyshard writes itself, after a statement that used no index.
	b.q("SELECT * FROM diff_tx WHERE v <> 'zz'")
	b.raw("COM_PING", wantOK, mysql.COM_PING)
	b.q("SELECT * FROM diff_tx WHERE v <> 'zz'")
	b.raw("COM_INIT_DB "+db, wantOK, append([]byte{mysql.COM_INIT_DB}, db...)...)
	b.q("SELECT * FROM diff_tx WHERE v <> 'zz'")
	b.p("SELECT * FROM diff_tx WHERE v <> ?", diffParams("zz"), diffParams("a"), diffParams(int64(1)))
	b.cursor("SELECT * FROM diff_tx WHERE v <> ?", []uint32{1, 1, 10}, diffParams("zz"))
	b.q("ROLLBACK", "SELECT * FROM diff_tx WHERE v <> 'zz'")
	b.raw("COM_PING", wantOK, mysql.COM_PING)
	b.q("SELECT * FROM diff_tx WHERE v <> 'zz'")
	b.p("SELECT * FROM diff_tx WHERE v <> ?", diffParams("zz"), diffParams("a"), diffParams(int64(1)))
	b.q("SELECT * FROM diff_tx ORDER BY id")

	// Multi-statements (refused where the client did not ask for them).
	for _, m := range []string{"SELECT 1 AS one; SELECT 'two' AS two",
		"UPDATE diff_tx SET v = 'm' WHERE id = 2; SELECT * FROM diff_tx WHERE id = 2; DO 1"} {
		b.steps = append(b.steps, diffStep{sql: m, want: wantAny})
	}
	b.qErr("SELECT 1; SELECT * FROM diff_no_such_table; SELECT 3")
	// State keyshard tracks: SET that warns, table locks, temporary
	// tables, named locks.
	b.q("SET SESSION sort_buffer_size = 1", "SHOW WARNINGS", "SELECT @@warning_count",
		"SET SESSION sort_buffer_size = DEFAULT")
	b.qErr("SET SESSION sql_mode = 'NO_SUCH_MODE'")
	b.q("SHOW ERRORS")
	b.qErr("SET NAMES diff_no_such_charset")
	b.q("SELECT @@character_set_client, @@sql_mode",
		"LOCK TABLES diff_tx READ",
		"SELECT COUNT(*) FROM diff_tx")
	b.qErr("INSERT INTO diff_tx VALUES (99, 'x')", "SELECT * FROM diff_ref")
	b.q("UNLOCK TABLES", "SELECT COUNT(*) FROM diff_ref",
		"CREATE TEMPORARY TABLE diff_tmp (id INT PRIMARY KEY, v VARCHAR(8))",
		"INSERT INTO diff_tmp VALUES (1, 'tmp'), (2, NULL)")
	b.both("SELECT * FROM diff_tmp ORDER BY id")
	b.q("DROP TEMPORARY TABLE diff_tmp", fmt.Sprintf("SELECT GET_LOCK('%[1]s', 0), IS_FREE_LOCK('%[1]s'), RELEASE_LOCK('%[1]s')", db))
	b.qErr("SELECT * FROM diff_tmp")
	b.q("BEGIN", "SELECT * FROM diff_tx WHERE id = 2 FOR UPDATE", "SELECT * FROM diff_tx WHERE id = 4 LOCK IN SHARE MODE", "COMMIT",
		"USE "+db)

	// DDL with info strings, and a prepared statement whose table changes
	// between executions.
	b.q("CREATE TABLE diff_copy AS SELECT id, vc FROM diff_types",
		"INSERT INTO diff_copy SELECT id + 100, vc FROM diff_types WHERE id < 3",
		"ALTER TABLE diff_copy ADD COLUMN z INT DEFAULT 7, ADD KEY (vc)",
		"INSERT INTO diff_copy (id) VALUES (1000), (1001)")
	b.p("SELECT * FROM diff_copy WHERE id > ? ORDER BY id", diffParams(int64(100)),
		diffParams(diffText("ALTER TABLE diff_copy ADD COLUMN w VARCHAR(3) DEFAULT 'w', DROP COLUMN z")), diffParams(int64(100)),
		diffParams(diffText("ALTER TABLE diff_copy DROP COLUMN vc")), diffParams(int64(0)))
	b.q("SHOW CREATE TABLE diff_copy", "TRUNCATE TABLE diff_copy", "SELECT COUNT(*) FROM diff_copy", "DROP TABLE diff_copy")

	// Stored procedures: several result sets, OUT parameters.
	// (diff_proc and diff_out are created before the run.)
	b.q("CREATE PROCEDURE diff_proc3() BEGIN SELECT 1 AS x; SELECT 'two' AS y; END", "CALL diff_proc3()",
		"CALL diff_proc(2)", "SET @z = 'in'", "CALL diff_out(21, @y, @z)", "SELECT @y, @z")
	b.qErr("CALL diff_no_such_proc()")
	b.steps = append(b.steps, diffStep{sql: "CALL diff_proc(?)", execs: [][]any{{int64(1)}, {int64(3)}}, want: wantAny},
		diffStep{sql: "CALL diff_out(?, ?, ?)", execs: [][]any{{int64(5), nil, "io"}}, want: wantAny},
		diffStep{sql: "CALL diff_rows(?, ?)", execs: [][]any{{int64(3), nil}, {int64(1), nil}, {int64(0), nil}}})

	b.q("DO 1", "DO SLEEP(0)", "SELECT 'last'")
	return b.steps
}

// diffScriptNoMulti runs where the client lacks CLIENT_MULTI_RESULTS (and
// CLIENT_PS_MULTI_RESULTS): MariaDB refuses a procedure that returns a
// result set (ER_SP_BADSELECT), before running it (diff_proc's UPDATE
// would fail, diff_tx not existing here), and leaves out the OUT
// parameters. keyshard's backend connection lacks CLIENT_MULTI_RESULTS
// too, so the server answers the same, text or prepared.
func diffScriptNoMulti(db string) []diffStep {
	var b diffScriptBuilder
	b.qErr("CALL diff_proc(2)", "CALL diff_rows(1, @c)")
	b.q("CALL diff_out(5, @y, @z)", "SELECT @y, @z")
	b.p("CALL diff_out(?, ?, ?)", diffParams(int64(5), nil, "io"))
	b.pErr("CALL diff_rows(?, ?)", diffParams(int64(3), nil), diffParams(int64(1), nil), diffParams(int64(0), nil))
	b.pErr("CALL diff_proc(?)", diffParams(int64(2)))
	b.q("CREATE PROCEDURE diff_proc3() BEGIN SELECT 1 AS x; SELECT 'two' AS y; END")
	b.pErr("CALL diff_proc3()")
	b.pErr("/* c */ CALL `" + db + "` . `diff_proc3` ( )")
	b.q("SELECT 'after'")
	return b.steps
}

// diffRandom generates n simple statements on diff_rand from rng, after
// the table's CREATE if create is set.
func diffRandom(rng *rand.Rand, n int, create bool) []diffStep {
	var steps []diffStep
	if create {
		steps = append(steps, diffStep{sql: `CREATE TABLE diff_rand (id INT PRIMARY KEY AUTO_INCREMENT, a INT NOT NULL, b VARCHAR(12),
		c DECIMAL(8,2), d DATE) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 ` + diffStats})
	}
	words := []string{"", "a", "b", "zz", "ünï", "🦀", "O'Brien", `back\slash`, "twelve chars", "thirteen char", "NULL"}
	strVal := func() any {
		if rng.IntN(8) == 0 {
			return nil
		}
		return words[rng.IntN(len(words))]
	}
	decVal := func() any {
		switch rng.IntN(10) {
		case 0:
			return nil
		case 1:
			return diffDecimal("999999.99")
		}
		return diffDecimal(fmt.Sprintf("%d.%02d", rng.IntN(2000)-1000, rng.IntN(100)))
	}
	dateVal := func() any {
		switch rng.IntN(12) {
		case 0:
			return nil
		case 1:
			return "2023-02-30"
		case 2:
			return time.Date(2000+rng.IntN(30), time.Month(1+rng.IntN(12)), 1+rng.IntN(28), 0, 0, 0, 0, time.UTC)
		}
		return fmt.Sprintf("%04d-%02d-%02d", 1990+rng.IntN(40), 1+rng.IntN(12), 1+rng.IntN(28))
	}
	lit := func(v any) string {
		switch x := v.(type) {
		case nil:
			return "NULL"
		case string:
			return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(x) + "'"
		case diffDecimal:
			return string(x)
		case time.Time:
			return "'" + x.Format("2006-01-02") + "'"
		}
		return fmt.Sprint(v)
	}
	for range n {
		prep := rng.IntN(2) == 0
		var sql string
		var a []any
		switch op := rng.IntN(10); {
		case op < 3: // INSERT, sometimes with an id that may exist
			a = []any{int64(rng.IntN(100) - 50), strVal(), decVal(), dateVal()}
			cols := "a, b, c, d"
			if rng.IntN(4) == 0 {
				a = append([]any{int64(1 + rng.IntN(40))}, a...)
				cols = "id, " + cols
			}
			sql = "INSERT INTO diff_rand (" + cols + ") VALUES (" + strings.TrimSuffix(strings.Repeat("?, ", len(a)), ", ") + ")"
		case op < 5: // UPDATE
			switch rng.IntN(3) {
			case 0:
				sql, a = "UPDATE diff_rand SET c = c + ? WHERE a BETWEEN ? AND ?", []any{decVal(), int64(rng.IntN(60) - 30), int64(rng.IntN(60))}
			case 1:
				sql, a = "UPDATE diff_rand SET b = ? WHERE id = ?", []any{strVal(), int64(1 + rng.IntN(40))}
			default:
				sql, a = "UPDATE diff_rand SET d = ?, a = a + 1 WHERE b = ? ORDER BY id LIMIT 2", []any{dateVal(), strVal()}
			}
		case op < 6: // DELETE
			if rng.IntN(2) == 0 {
				sql, a = "DELETE FROM diff_rand WHERE id = ?", []any{int64(1 + rng.IntN(40))}
			} else {
				sql, a = "DELETE FROM diff_rand WHERE a < ? ORDER BY id LIMIT 1", []any{int64(rng.IntN(100) - 50)}
			}
		default: // SELECT
			switch rng.IntN(4) {
			case 0:
				sql, a = "SELECT * FROM diff_rand WHERE a > ? ORDER BY id LIMIT ?", []any{int64(rng.IntN(100) - 50), int64(rng.IntN(10))}
			case 1:
				sql, a = "SELECT COUNT(*), SUM(c), MIN(b), MAX(d), AVG(a) FROM diff_rand WHERE c > ? OR b = ?", []any{decVal(), strVal()}
			case 2:
				sql, a = "SELECT a, COUNT(*), GROUP_CONCAT(id ORDER BY id) FROM diff_rand WHERE d >= ? GROUP BY a ORDER BY a", []any{dateVal()}
			default:
				sql, a = "SELECT id, b, CONCAT(b, '/', c), d + INTERVAL 1 MONTH FROM diff_rand WHERE id BETWEEN ? AND ? ORDER BY id",
					[]any{int64(rng.IntN(30)), int64(rng.IntN(50))}
			}
		}
		if prep {
			steps = append(steps, diffStep{sql: sql, execs: [][]any{a}, want: wantAny})
			continue
		}
		for _, v := range a {
			sql = strings.Replace(sql, "?", lit(v), 1)
		}
		steps = append(steps, diffStep{sql: sql, want: wantAny})
	}
	steps = append(steps, diffStep{sql: "SELECT * FROM diff_rand ORDER BY id"},
		diffStep{sql: "SELECT * FROM diff_rand ORDER BY id", execs: [][]any{nil}})
	return steps
}

// ---------------------------------------------------------------- recording

// diffKind says how a recorded packet is to be read.
type diffKind uint8

const (
	dkOK       diffKind = iota // OK packet
	dkErr                      // ERR packet
	dkEOF                      // classic EOF, or the 0xfe OK ending a result with CLIENT_DEPRECATE_EOF
	dkColCount                 // column count
	dkColDef                   // column definition
	dkParamDef                 // parameter definition (PREPARE)
	dkTextRow                  // text-protocol row
	dkBinRow                   // binary-protocol row
	dkPrepOK                   // COM_STMT_PREPARE OK
)

// diffAnswer is every packet of the answer to one command.
type diffAnswer struct {
	cmd   string // "query", "prepare", "execute 2", "reset"
	pkts  [][]byte
	kinds []diffKind
}

func (a *diffAnswer) add(k diffKind, p []byte) {
	a.pkts = append(a.pkts, bytes.Clone(p))
	a.kinds = append(a.kinds, k)
}

// diffConn sends commands on a go-mysql connection and reads whole answers
// packet by packet.
type diffConn struct {
	t   *testing.T
	c   *client.Conn
	eof bool // classic EOF packets: CLIENT_DEPRECATE_EOF not negotiated
}

func (d *diffConn) read() []byte {
	d.t.Helper()
	p, err := d.c.ReadPacket()
	if err != nil {
		d.t.Fatalf("reading a packet: %v", err)
	}
	if len(p) == 0 {
		d.t.Fatal("empty packet")
	}
	return p
}

// isEnd reports whether p ends a result set (EOF, or the 0xfe OK): a text
// row starting with 0xfe is at least 2^24 bytes long.
func isEnd(p []byte) bool { return p[0] == mysql.EOF_HEADER && len(p) < 0xffffff }

// results reads the results of COM_QUERY or COM_STMT_EXECUTE whose first
// packet is p.
func (d *diffConn) results(a *diffAnswer, p []byte, rowKind diffKind) {
	d.t.Helper()
	for {
		switch p[0] {
		case mysql.OK_HEADER:
			a.add(dkOK, p)
			st, ok := parseOKStatus(p)
			if !ok {
				d.t.Fatalf("malformed OK packet % x", p)
			}
			if st&mysql.SERVER_MORE_RESULTS_EXISTS == 0 {
				return
			}
		case mysql.ERR_HEADER:
			a.add(dkErr, p)
			return
		case mysql.LocalInFile_HEADER:
			d.t.Fatalf("unexpected LOCAL INFILE request % x", p)
		default:
			a.add(dkColCount, p)
			n, _, _ := mysql.LengthEncodedInt(p)
			for range n {
				a.add(dkColDef, d.read())
			}
			if d.eof {
				e := d.read()
				if !isEnd(e) || len(e) != 5 {
					d.t.Fatalf("EOF expected after the column definitions, got % x", e)
				}
				// Compared as it is: keyshard relays the server's own.
				st := binary.LittleEndian.Uint16(e[3:])
				a.add(dkEOF, e)
				if st&mysql.SERVER_STATUS_CURSOR_EXISTS != 0 {
					return // a cursor: rows come with COM_STMT_FETCH
				}
			}
			more := false
		rows:
			for {
				r := d.read()
				switch {
				case r[0] == mysql.ERR_HEADER:
					a.add(dkErr, r)
					return
				case isEnd(r):
					a.add(dkEOF, r)
					more = termStatus(r)&mysql.SERVER_MORE_RESULTS_EXISTS != 0
					break rows
				}
				a.add(rowKind, r)
			}
			if !more {
				return
			}
		}
		p = d.read()
	}
}

// query runs sql as COM_QUERY.
func (d *diffConn) query(sql string) diffAnswer {
	d.t.Helper()
	a := diffAnswer{cmd: "query"}
	d.results(&a, command(d.t, d.c, append([]byte{mysql.COM_QUERY}, sql...)...), dkTextRow)
	return a
}

// prepare runs COM_STMT_PREPARE; the statement id is normalised to 0 in
// the recording.
func (d *diffConn) prepare(sql string) (a diffAnswer, id uint32, nparams int) {
	d.t.Helper()
	a.cmd = "prepare"
	p := command(d.t, d.c, append([]byte{mysql.COM_STMT_PREPARE}, sql...)...)
	if p[0] == mysql.ERR_HEADER {
		a.add(dkErr, p)
		return a, 0, 0
	}
	if p[0] != mysql.OK_HEADER || len(p) < 12 {
		d.t.Fatalf("PREPARE %q: first packet % x", sql, p)
	}
	id = binary.LittleEndian.Uint32(p[1:])
	ncols := int(binary.LittleEndian.Uint16(p[5:]))
	nparams = int(binary.LittleEndian.Uint16(p[7:]))
	norm := bytes.Clone(p)
	binary.LittleEndian.PutUint32(norm[1:], 0)
	a.add(dkPrepOK, norm)
	for _, def := range []struct {
		n int
		k diffKind
	}{{nparams, dkParamDef}, {ncols, dkColDef}} {
		for range def.n {
			a.add(def.k, d.read())
		}
		if def.n > 0 && d.eof {
			e := d.read()
			if !isEnd(e) {
				d.t.Fatalf("PREPARE %q: EOF expected after definitions, got % x", sql, e)
			}
			a.add(dkEOF, e)
		}
	}
	return a, id, nparams
}

// execute runs COM_STMT_EXECUTE of id with params; bound says whether the
// parameter types are sent (else the previous execution's apply), cursor
// asks for a read-only cursor.
func (d *diffConn) execute(id uint32, params []any, bound, cursor bool, n int) diffAnswer {
	d.t.Helper()
	a := diffAnswer{cmd: fmt.Sprintf("execute %d", n)}
	var flags byte
	if cursor {
		flags = 1 // CURSOR_TYPE_READ_ONLY
	}
	pkt, _ := diffExecPacket(id, flags, params, bound)
	d.results(&a, command(d.t, d.c, pkt...), dkBinRow)
	return a
}

// cursorOpen reports whether an answer left a cursor open.
func cursorOpen(a diffAnswer) bool {
	last := a.pkts[len(a.pkts)-1]
	return isEnd(last) && termStatus(last)&mysql.SERVER_STATUS_CURSOR_EXISTS != 0 &&
		termStatus(last)&mysql.SERVER_STATUS_LAST_ROW_SEND == 0
}

// fetch runs COM_STMT_FETCH of n rows of id's cursor.
func (d *diffConn) fetch(id, n uint32) diffAnswer {
	d.t.Helper()
	a := diffAnswer{cmd: fmt.Sprintf("fetch %d", n)}
	r := command(d.t, d.c, stmtIDCmd(mysql.COM_STMT_FETCH, id, binary.LittleEndian.AppendUint32(nil, n)...)...)
	for {
		switch {
		case r[0] == mysql.ERR_HEADER:
			a.add(dkErr, r)
			return a
		case isEnd(r):
			a.add(dkEOF, r)
			return a
		}
		a.add(dkBinRow, r)
		r = d.read()
	}
}

// diffRun runs steps on c and records every answer.
func diffRun(t *testing.T, c *client.Conn, steps []diffStep) [][]diffAnswer {
	t.Helper()
	d := &diffConn{t: t, c: c, eof: !negotiated(c, "CLIENT_DEPRECATE_EOF")}
	out := make([][]diffAnswer, len(steps))
	for i, st := range steps {
		if st.raw != nil {
			a := diffAnswer{cmd: "command"}
			d.results(&a, command(t, c, st.raw...), dkTextRow)
			out[i] = []diffAnswer{a}
			continue
		}
		if st.execs == nil {
			out[i] = []diffAnswer{d.query(st.sql)}
			continue
		}
		pa, id, nparams := d.prepare(st.sql)
		out[i] = []diffAnswer{pa}
		if pa.kinds[0] == dkErr {
			continue
		}
		var lastTypes []byte
		for n, params := range st.execs {
			if len(params) == 1 {
				if q, ok := params[0].(diffText); ok {
					out[i] = append(out[i], d.query(string(q)))
					continue
				}
			}
			if len(params) != nparams {
				t.Fatalf("step %d %q: %d parameters given, the statement has %d", i, st.sql, len(params), nparams)
			}
			_, types := diffExecPacket(id, 0, params, true)
			out[i] = append(out[i], d.execute(id, params, n == 0 || !bytes.Equal(types, lastTypes), st.fetch != nil, n+1))
			lastTypes = types
			// Fetched only while MariaDB keeps the cursor open: a FETCH
			// without one fails with a message naming the statement id,
			// which differs by design.
			for _, k := range st.fetch {
				if !cursorOpen(out[i][len(out[i])-1]) {
					break
				}
				out[i] = append(out[i], d.fetch(id, k))
			}
			if st.reset && n < len(st.execs)-1 {
				a := diffAnswer{cmd: "reset"}
				a.add(dkOK, command(t, c, stmtIDCmd(mysql.COM_STMT_RESET, id)...))
				out[i] = append(out[i], a)
			}
		}
		c.ResetSequence()
		if err := c.WritePacket(append(make([]byte, 4), stmtIDCmd(mysql.COM_STMT_CLOSE, id)...)); err != nil {
			t.Fatalf("COM_STMT_CLOSE: %v", err)
		}
	}
	return out
}

// diffExecPacket builds COM_STMT_EXECUTE (flags, one iteration) for
// params, and returns the parameter types it binds.
func diffExecPacket(id uint32, flags byte, params []any, bound bool) (pkt, types []byte) {
	b := stmtIDCmd(mysql.COM_STMT_EXECUTE, id, flags, 1, 0, 0, 0)
	if len(params) == 0 {
		return b, nil
	}
	nulls := make([]byte, (len(params)+7)/8)
	var vals []byte
	for i, v := range params {
		typ, unsigned := mysql.MYSQL_TYPE_NULL, false
		switch x := v.(type) {
		case nil:
			nulls[i/8] |= 1 << (i % 8)
		case int8:
			typ, vals = mysql.MYSQL_TYPE_TINY, append(vals, byte(x))
		case uint8:
			typ, unsigned, vals = mysql.MYSQL_TYPE_TINY, true, append(vals, x)
		case int16:
			typ, vals = mysql.MYSQL_TYPE_SHORT, binary.LittleEndian.AppendUint16(vals, uint16(x))
		case uint16:
			typ, unsigned, vals = mysql.MYSQL_TYPE_SHORT, true, binary.LittleEndian.AppendUint16(vals, x)
		case int32:
			typ, vals = mysql.MYSQL_TYPE_LONG, binary.LittleEndian.AppendUint32(vals, uint32(x))
		case uint32:
			typ, unsigned, vals = mysql.MYSQL_TYPE_LONG, true, binary.LittleEndian.AppendUint32(vals, x)
		case int64:
			typ, vals = mysql.MYSQL_TYPE_LONGLONG, binary.LittleEndian.AppendUint64(vals, uint64(x))
		case uint64:
			typ, unsigned, vals = mysql.MYSQL_TYPE_LONGLONG, true, binary.LittleEndian.AppendUint64(vals, x)
		case float32:
			typ, vals = mysql.MYSQL_TYPE_FLOAT, binary.LittleEndian.AppendUint32(vals, math.Float32bits(x))
		case float64:
			typ, vals = mysql.MYSQL_TYPE_DOUBLE, binary.LittleEndian.AppendUint64(vals, math.Float64bits(x))
		case string:
			typ, vals = mysql.MYSQL_TYPE_VAR_STRING, append(mysql.AppendLengthEncodedInteger(vals, uint64(len(x))), x...)
		case []byte:
			typ, vals = mysql.MYSQL_TYPE_BLOB, append(mysql.AppendLengthEncodedInteger(vals, uint64(len(x))), x...)
		case diffDecimal:
			typ, vals = mysql.MYSQL_TYPE_NEWDECIMAL, append(mysql.AppendLengthEncodedInteger(vals, uint64(len(x))), x...)
		case time.Time:
			typ = mysql.MYSQL_TYPE_DATETIME
			var tb []byte
			tb = binary.LittleEndian.AppendUint16(tb, uint16(x.Year()))
			tb = append(tb, byte(x.Month()), byte(x.Day()))
			if x.Hour() != 0 || x.Minute() != 0 || x.Second() != 0 || x.Nanosecond() != 0 {
				tb = append(tb, byte(x.Hour()), byte(x.Minute()), byte(x.Second()))
			}
			if x.Nanosecond() != 0 {
				tb = binary.LittleEndian.AppendUint32(tb, uint32(x.Nanosecond()/1000))
			}
			vals = append(append(vals, byte(len(tb))), tb...)
		case time.Duration:
			typ = mysql.MYSQL_TYPE_TIME
			var tb []byte
			if x != 0 {
				neg := byte(0)
				if x < 0 {
					neg, x = 1, -x
				}
				days := x / (24 * time.Hour)
				x -= days * 24 * time.Hour
				tb = append(tb, neg)
				tb = binary.LittleEndian.AppendUint32(tb, uint32(days))
				tb = append(tb, byte(x/time.Hour), byte(x/time.Minute%60), byte(x/time.Second%60))
				if us := x % time.Second / time.Microsecond; us != 0 {
					tb = binary.LittleEndian.AppendUint32(tb, uint32(us))
				}
			}
			vals = append(append(vals, byte(len(tb))), tb...)
		default:
			panic(fmt.Sprintf("diffExecPacket: parameter type %T", v))
		}
		flag := byte(0)
		if unsigned {
			flag = 0x80
		}
		types = append(types, typ, flag)
	}
	b = append(b, nulls...)
	if bound {
		b = append(b, 1)
		b = append(b, types...)
	} else {
		b = append(b, 0)
	}
	return append(b, vals...), types
}

// ---------------------------------------------------------------- comparing

func diffEqual(a, b []diffAnswer) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i].pkts) != len(b[i].pkts) {
			return false
		}
		for j := range a[i].pkts {
			if !bytes.Equal(a[i].pkts[j], b[i].pkts[j]) {
				return false
			}
		}
	}
	return true
}

// diffReport shows a step and both answers, marking the packets that
// differ.
func diffReport(i int, st diffStep, mdb, ks []diffAnswer) string {
	var sb strings.Builder
	kind := "text"
	if st.execs != nil {
		kind = "prepared"
	}
	if st.raw != nil {
		kind = fmt.Sprintf("command % x", diffTrunc(st.raw))
	}
	fmt.Fprintf(&sb, "statement %d (%s): %s\n", i, kind, strings.Join(strings.Fields(st.sql), " "))
	for n, e := range st.execs {
		fmt.Fprintf(&sb, "  execute %d parameters: %s\n", n+1, diffArgs(e))
	}
	shown := 0
	for k := 0; k < max(len(mdb), len(ks)); k++ {
		var a, b diffAnswer
		if k < len(mdb) {
			a = mdb[k]
		}
		if k < len(ks) {
			b = ks[k]
		}
		for j := 0; j < max(len(a.pkts), len(b.pkts)); j++ {
			var x, y string
			var px, py []byte
			if j < len(a.pkts) {
				px, x = a.pkts[j], diffRender(a.kinds[j], a.pkts[j])
			}
			if j < len(b.pkts) {
				py, y = b.pkts[j], diffRender(b.kinds[j], b.pkts[j])
			}
			if px != nil && py != nil && bytes.Equal(px, py) {
				if len(a.pkts) < 12 {
					fmt.Fprintf(&sb, "    %s #%d  same      %s\n", a.cmd, j, x)
				}
				continue
			}
			if shown++; shown > 30 {
				continue
			}
			cmd := a.cmd
			if cmd == "" {
				cmd = b.cmd
			}
			if px == nil {
				x = "(none)"
			}
			if py == nil {
				y = "(none)"
			}
			fmt.Fprintf(&sb, "  * %s #%d  mariadb:  %s\n", cmd, j, x)
			fmt.Fprintf(&sb, "  * %s #%d  keyshard: %s\n", cmd, j, y)
			if x == y {
				fmt.Fprintf(&sb, "      bytes mariadb:  % x\n      bytes keyshard: % x\n", diffTrunc(px), diffTrunc(py))
			}
		}
	}
	if shown > 30 {
		fmt.Fprintf(&sb, "  ... %d more differing packets\n", shown-30)
	}
	return sb.String()
}

func diffTrunc(p []byte) []byte {
	if len(p) > 64 {
		return p[:64]
	}
	return p
}

func diffArgs(a []any) string {
	var parts []string
	for _, v := range a {
		s := fmt.Sprintf("%T(%v)", v, v)
		if b, ok := v.([]byte); ok {
			s = fmt.Sprintf("[]byte(% x)", diffTrunc(b))
		}
		if len(s) > 60 {
			s = s[:60] + "…"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// diffRender decodes a packet for a report.
func diffRender(k diffKind, p []byte) string {
	switch k {
	case dkOK, dkEOF:
		if k == dkEOF && len(p) == 5 {
			return fmt.Sprintf("EOF warnings=%d status=%#04x", binary.LittleEndian.Uint16(p[1:]), binary.LittleEndian.Uint16(p[3:]))
		}
		pos := 1
		aff, _, n := mysql.LengthEncodedInt(p[pos:])
		pos += n
		ins, _, n := mysql.LengthEncodedInt(p[pos:])
		pos += n
		if pos+4 > len(p) {
			return fmt.Sprintf("OK? % x", p)
		}
		name := "OK"
		if p[0] == mysql.EOF_HEADER {
			name = "END-OK"
		}
		info := p[pos+4:]
		if v, _, _, err := mysql.LengthEncodedString(info); err == nil && len(info) > 0 && int(info[0]) == len(info)-1 {
			info = v // MariaDB sends it length-encoded
		}
		return fmt.Sprintf("%s affected=%d insert_id=%d status=%#04x warnings=%d info=%q", name, aff, ins,
			binary.LittleEndian.Uint16(p[pos:]), binary.LittleEndian.Uint16(p[pos+2:]), info)
	case dkErr:
		if len(p) >= 9 && p[3] == '#' {
			return fmt.Sprintf("ERR %d [%s] %q", binary.LittleEndian.Uint16(p[1:]), p[4:9], p[9:])
		}
		return fmt.Sprintf("ERR % x", p)
	case dkColCount:
		n, _, _ := mysql.LengthEncodedInt(p)
		return fmt.Sprintf("%d columns", n)
	case dkColDef, dkParamDef:
		f, err := mysql.FieldData(p).Parse()
		if err != nil {
			return fmt.Sprintf("definition? % x", p)
		}
		name := "COL"
		if k == dkParamDef {
			name = "PARAM"
		}
		return fmt.Sprintf("%s schema=%q table=%q org_table=%q name=%q org_name=%q charset=%d length=%d type=%d flags=%#04x decimals=%d default=%q",
			name, f.Schema, f.Table, f.OrgTable, f.Name, f.OrgName, f.Charset, f.ColumnLength, f.Type, f.Flag, f.Decimal, f.DefaultValue)
	case dkPrepOK:
		if len(p) >= 12 {
			return fmt.Sprintf("PREPARE-OK columns=%d params=%d warnings=%d", binary.LittleEndian.Uint16(p[5:]),
				binary.LittleEndian.Uint16(p[7:]), binary.LittleEndian.Uint16(p[10:]))
		}
	case dkTextRow:
		var vals []string
		for pos := 0; pos < len(p); {
			if p[pos] == 0xfb {
				vals = append(vals, "NULL")
				pos++
				continue
			}
			v, _, n, err := mysql.LengthEncodedString(p[pos:])
			if err != nil {
				return fmt.Sprintf("ROW? % x", diffTrunc(p))
			}
			s := fmt.Sprintf("%q", v)
			if len(s) > 50 {
				s = fmt.Sprintf("%q…(%d bytes)", v[:40], len(v))
			}
			vals = append(vals, s)
			pos += n
		}
		return "ROW " + strings.Join(vals, " ")
	case dkBinRow:
		return fmt.Sprintf("BINROW % x (%d bytes)", diffTrunc(p), len(p))
	}
	return fmt.Sprintf("% x", p)
}
