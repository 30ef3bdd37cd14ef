package e2e

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	gomysql "github.com/go-sql-driver/mysql"
)

// countingRelay forwards connections to target and counts the bytes that
// flow from target back to the clients: the compressed protocol must make
// that number small for compressible answers.
type countingRelay struct {
	Addr string
	down atomic.Int64
}

func newCountingRelay(t *testing.T, target string) *countingRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &countingRelay{Addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(s, c); s.Close() }()
			go func() {
				defer wg.Done()
				_, _ = io.Copy(countWriter{c, &r.down}, s)
				c.Close()
			}()
		}
	}()
	return r
}

// countWriter counts what it writes as it goes.
type countWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// bigAnswer is a compressible answer of about 2 MB.
const bigAnswer = "SELECT REPEAT('keyshard compressed protocol ', 40000) AS a FROM seq_1_to_2"

func TestCompressGoDriver(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	relay := newCountingRelay(t, p.Addr)
	read := func(params string) (string, int64) {
		t.Helper()
		db := openAt(t, relay.Addr, "ks:ks", "ks_test", params)
		db.SetMaxOpenConns(1)
		before := relay.down.Load()
		var a string
		var n int
		rows, err := db.Query(bigAnswer)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			if err := rows.Scan(&a); err != nil {
				t.Fatal(err)
			}
			n++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if n != 2 {
			t.Fatalf("%s: %d rows, want 2", params, n)
		}
		return a, relay.down.Load() - before
	}
	plain, plainBytes := read("")
	comp, compBytes := read("compress=true")
	if comp != plain {
		t.Fatalf("compressed answer differs from the plain one (%d vs %d bytes)", len(comp), len(plain))
	}
	if compBytes*10 > plainBytes {
		t.Fatalf("compress=true: %d bytes on the wire vs %d plain: not compressed", compBytes, plainBytes)
	}
	t.Logf("2 MB answer: %d bytes plain, %d compressed", plainBytes, compBytes)

	// Everything else works through frames too: prepared statements, a
	// 20 MiB value each way (several frames, several physical packets),
	// errors, transactions.
	db := openAt(t, relay.Addr, "ks:ks", "ks_test", "compress=true")
	mustExec(t, db, "DROP TABLE IF EXISTS comp_blob")
	mustExec(t, db, "CREATE TABLE comp_blob (id INT PRIMARY KEY, b LONGBLOB)")
	t.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS comp_blob") })
	big := bytes.Repeat([]byte("0123456789abcdef"), 20<<20/16)
	big[12345] = 0
	if _, err := db.Exec("INSERT INTO comp_blob VALUES (?, ?)", 1, big); err != nil {
		t.Fatal(err)
	}
	var got []byte
	if err := db.QueryRow("SELECT b FROM comp_blob WHERE id = ?", 1).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(got) != sha256.Sum256(big) {
		t.Fatalf("20 MiB blob read back differs (%d bytes)", len(got))
	}
	if _, err := db.Exec("SELECT * FROM comp_no_such_table"); myErrCode(err) != mysql.ER_NO_SUCH_TABLE {
		t.Fatalf("unknown table: %v, want 1146", err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT INTO comp_blob VALUES (2, 'x')"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	// LOAD DATA LOCAL: the file travels in the client's frames.
	gomysql.RegisterReaderHandler("comp_rows", func() io.Reader {
		return strings.NewReader(strings.Repeat("7\tseven\n", 1) + "8\t" + strings.Repeat("e", 100000) + "\n")
	})
	defer gomysql.DeregisterReaderHandler("comp_rows")
	if _, err := db.Exec("LOAD DATA LOCAL INFILE 'Reader::comp_rows' INTO TABLE comp_blob"); err != nil {
		t.Fatal(err)
	}
	var n, size int
	if err := db.QueryRow("SELECT COUNT(*), SUM(LENGTH(b)) FROM comp_blob WHERE id IN (7, 8)").Scan(&n, &size); err != nil || n != 2 || size != 100005 {
		t.Fatalf("after LOAD DATA: %d rows of %d bytes, %v", n, size, err)
	}
	if err := db.QueryRow("SELECT COUNT(*) FROM comp_blob").Scan(&n); err != nil || n != 3 {
		t.Fatalf("after rollback: %d rows, %v", n, err)
	}
}

func TestCompressMariadbCLI(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	relay := newCountingRelay(t, p.Addr)
	_, port, _ := net.SplitHostPort(relay.Addr)
	run := func(args ...string) (string, int64) {
		t.Helper()
		before := relay.down.Load()
		args = append([]string{"-h127.0.0.1", "-P" + port, "-uks", "-pks", "--batch", "--skip-column-names", "ks_test"}, args...)
		out, err := exec.Command("mariadb", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("mariadb %v: %v\n%.500s", args, err, out)
		}
		return string(out), relay.down.Load() - before
	}
	q := "SELECT LENGTH(REPEAT('abc', 10)); " + strings.Replace(bigAnswer, "FROM seq_1_to_2", "", 1) + "; SELECT 'done'"
	plain, plainBytes := run("-e", q)
	comp, compBytes := run("--compress", "-e", q)
	if comp != plain {
		t.Fatalf("mariadb --compress printed something else (%d vs %d bytes)", len(comp), len(plain))
	}
	if !strings.HasPrefix(comp, "30\n") || !strings.HasSuffix(comp, "done\n") {
		t.Fatalf("mariadb --compress printed %.100q...", comp)
	}
	if compBytes*10 > plainBytes {
		t.Fatalf("mariadb --compress: %d bytes on the wire vs %d plain: not compressed", compBytes, plainBytes)
	}
	// An error and the statement after it, on one compressed session.
	cmd := exec.Command("mariadb", "-h127.0.0.1", "-P"+port, "-uks", "-pks", "--compress", "--force", "--batch", "ks_test")
	cmd.Stdin = strings.NewReader("SELECT * FROM comp_cli_missing;\nSELECT 'still here';\n")
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "1146") || !strings.Contains(string(out), "still here") {
		t.Fatalf("mariadb --compress --force after an error printed:\n%s", out)
	}
}

func TestCompressZstd(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	relay := newCountingRelay(t, p.Addr)
	before := relay.down.Load()
	c := goMySQL(t, relay.Addr, withCaps(mysql.CLIENT_ZSTD_COMPRESSION_ALGORITHM, mysql.CLIENT_COMPRESS))
	if !negotiated(c, "CLIENT_ZSTD_COMPRESSION_ALGORITHM") {
		t.Fatalf("zstd not negotiated: %s", c.CapabilityString())
	}
	r, err := c.Execute(bigAnswer)
	if err != nil {
		t.Fatal(err)
	}
	if r.RowNumber() != 2 {
		t.Fatalf("%d rows, want 2", r.RowNumber())
	}
	a, _ := r.GetString(1, 0)
	if want := strings.Repeat("keyshard compressed protocol ", 40000); a != want {
		t.Fatalf("zstd answer: %d bytes, want %d", len(a), len(want))
	}
	r.Close()
	if n := relay.down.Load() - before; n > 200_000 {
		t.Fatalf("zstd: %d bytes on the wire for a 2 MB answer: not compressed", n)
	}
	st, err := c.Prepare("SELECT ? + 1, REPEAT(?, 1000)")
	if err != nil {
		t.Fatal(err)
	}
	r, err = st.Execute(41, "z")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := r.GetInt(0, 0); v != 42 {
		t.Fatalf("prepared over zstd: %d, want 42", v)
	}
	r.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if got := queryString(t, c, "SELECT 'after'"); got != "after" {
		t.Fatalf("after prepared: %q", got)
	}
}

// openAt is open for a proxy reached at addr (a relay in front of it).
func openAt(t *testing.T, addr, userPass, db, params string) *sql.DB {
	t.Helper()
	return (&testProxy{Addr: addr}).open(t, userPass, db, params)
}

// SHOW STATUS tells a compressed client Compression ON, as the server
// does (the backend connection answering it is not compressed), and a
// plain client OFF.
func TestCompressionStatus(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	for _, c := range []struct {
		params, want string
	}{{"compress=true", "ON"}, {"", "OFF"}} {
		for _, addr := range []string{fmt.Sprintf("127.0.0.1:%d", basePort), p.Addr} {
			db := openAt(t, addr, "ks:ks", "ks_test", c.params)
			for _, q := range []string{"SHOW SESSION STATUS LIKE 'Compression'", "show status where Variable_name = 'Compression'"} {
				var name, v string
				if err := db.QueryRow(q).Scan(&name, &v); err != nil {
					t.Fatal(err)
				}
				if v != c.want {
					t.Errorf("%s %q: %s = %s, want %s", addr, c.params, q, v, c.want)
				}
			}
		}
	}
}
