package binlog_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/binlog"
	"github.com/keyshard/keyshard/test/testenv"
)

// One throwaway MariaDB (scripts/backends.sh) on KS_BINLOG_PORT (default
// 30447), in a directory of its own.
var (
	port = testenv.Port("KS_BINLOG_PORT", 30447)
	dir  = fmt.Sprintf("/tmp/keyshard-binlog-%d", port)
)

func TestMain(m *testing.M) {
	if err := testenv.Up(dir, 1, port); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	testenv.Down(dir)
	os.Exit(code)
}

func db(t *testing.T) *sql.DB {
	t.Helper()
	d, err := sql.Open("mysql", fmt.Sprintf("ks:ks@tcp(127.0.0.1:%d)/", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func exec(t *testing.T, d *sql.DB, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := d.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func conn(t *testing.T) *backend.Conn {
	t.Helper()
	p := backend.NewPool("node1", fmt.Sprintf("127.0.0.1:%d", port), backend.Options{User: "ks", Password: "ks", MaxConns: 2})
	c, err := p.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func follow(t *testing.T, from binlog.Position, tables ...string) *binlog.Follower {
	t.Helper()
	f, err := binlog.Follow(binlog.Config{
		Host: "127.0.0.1", Port: uint16(port), User: "ks", Password: "ks", ServerID: 4242,
		Tables: func(schema, table string) bool {
			for _, x := range tables {
				if x == schema+"."+table {
					return true
				}
			}
			return false
		},
	}, from)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// next reads events until a commit, returning the changes before it.
func next(t *testing.T, f *binlog.Follower) ([]binlog.Change, binlog.Position) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []binlog.Change
	for {
		ev, err := f.Next(ctx)
		if err == nil && len(ev.Changes) == 0 && !ev.Commit && ev.DDL == "" && ev.Pos.IsZero() {
			t.Fatalf("Next returned an empty event")
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		out = append(out, ev.Changes...)
		if ev.Commit {
			return out, ev.Pos
		}
	}
}

func TestFollowRows(t *testing.T) {
	d := db(t)
	exec(t, d, "DROP DATABASE IF EXISTS bl", "CREATE DATABASE bl",
		"CREATE TABLE bl.t (id BIGINT UNSIGNED PRIMARY KEY, s VARCHAR(20), b VARBINARY(4), n DECIMAL(10,2), ts DATETIME(3))",
		"CREATE TABLE bl.other (id INT PRIMARY KEY)")
	c := conn(t)
	if err := binlog.Requirements("node1", c); err != nil {
		t.Fatal(err)
	}
	start, err := binlog.Current(c)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, d,
		"INSERT INTO bl.t VALUES (18446744073709551615, 'a', X'00ff', 12.50, '2026-11-28 10:00:00.125'), (2, NULL, NULL, NULL, NULL)",
		"INSERT INTO bl.other VALUES (1)",
		"UPDATE bl.t SET s = 'b' WHERE id = 2",
		"DELETE FROM bl.t WHERE id = 2")
	f := follow(t, start, "bl.t")

	ch, p1 := next(t, f)
	if len(ch) != 2 || ch[0].Kind != binlog.Insert || ch[1].Kind != binlog.Insert {
		t.Fatalf("first transaction: %+v", ch)
	}
	if got := strings.Join(ch[0].Columns, ","); got != "id,s,b,n,ts" {
		t.Fatalf("columns %q", got)
	}
	want := []any{uint64(18446744073709551615), "a", "\x00\xff", "12.50", "2026-11-28 10:00:00.125"}
	if fmt.Sprintf("%#v", ch[0].After) != fmt.Sprintf("%#v", want) {
		t.Fatalf("row %#v, want %#v", ch[0].After, want)
	}
	if ch[1].After[1] != nil {
		t.Fatalf("NULL decoded as %#v", ch[1].After[1])
	}
	// bl.other's transaction carries nothing asked for: only its commit.
	ch, p2 := next(t, f)
	if len(ch) != 0 || p2.Compare(p1) <= 0 {
		t.Fatalf("other table's transaction: %+v at %v after %v", ch, p2, p1)
	}
	ch, _ = next(t, f)
	if len(ch) != 1 || ch[0].Kind != binlog.Update || ch[0].Before[1] != nil || ch[0].After[1] != "b" {
		t.Fatalf("update: %+v", ch)
	}
	ch, p4 := next(t, f)
	if len(ch) != 1 || ch[0].Kind != binlog.Delete || ch[0].Before[0] != int64(2) && ch[0].Before[0] != uint64(2) {
		t.Fatalf("delete: %+v", ch)
	}

	// Resuming at a commit's position neither repeats nor skips.
	f.Close()
	exec(t, d, "INSERT INTO bl.t (id) VALUES (3)")
	g := follow(t, p4, "bl.t")
	ch, _ = next(t, g)
	if len(ch) != 1 || ch[0].Kind != binlog.Insert || fmt.Sprint(ch[0].After[0]) != "3" {
		t.Fatalf("after resuming: %+v", ch)
	}
}

func TestSnapshotPosition(t *testing.T) {
	d := db(t)
	exec(t, d, "DROP DATABASE IF EXISTS bs", "CREATE DATABASE bs", "CREATE TABLE bs.t (id INT PRIMARY KEY)")
	c := conn(t)
	exec(t, d, "INSERT INTO bs.t VALUES (1)")
	p, err := binlog.Snapshot(c)
	if err != nil {
		t.Fatal(err)
	}
	// Written after the snapshot: not seen by it, and after its position.
	exec(t, d, "INSERT INTO bs.t VALUES (2)")
	res, err := c.Exec("SELECT COUNT(*) FROM bs.t")
	if err != nil {
		t.Fatal(err)
	}
	if *res.Rows[0][0] != "1" {
		t.Fatalf("the snapshot sees %s rows, want 1", *res.Rows[0][0])
	}
	if _, err := c.Exec("COMMIT"); err != nil {
		t.Fatal(err)
	}
	f := follow(t, p, "bs.t")
	ch, _ := next(t, f)
	if len(ch) != 1 || fmt.Sprint(ch[0].After[0]) != "2" {
		t.Fatalf("first change after the snapshot's position: %+v, want the insert of 2", ch)
	}
}

func TestPurged(t *testing.T) {
	c := conn(t)
	cur, err := binlog.Current(c)
	if err != nil {
		t.Fatal(err)
	}
	f, err := binlog.Follow(binlog.Config{Host: "127.0.0.1", Port: uint16(port), User: "ks", Password: "ks", ServerID: 4243},
		binlog.Position{File: "mysql-bin.000000", Pos: 4})
	if err == nil {
		defer f.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = f.Next(ctx)
	}
	if !errors.Is(err, binlog.ErrPurged) {
		t.Fatalf("following a binlog file the server does not have (it is at %v): %v, want ErrPurged", cur, err)
	}
}

func TestRequirementsNamesTheSetting(t *testing.T) {
	d := db(t)
	exec(t, d, "SET GLOBAL binlog_row_metadata = MINIMAL")
	defer exec(t, d, "SET GLOBAL binlog_row_metadata = FULL")
	// Global settings apply to sessions opened after the change.
	err := binlog.Requirements("node1", conn(t))
	if err == nil || !strings.Contains(err.Error(), "node node1") || !strings.Contains(err.Error(), "binlog_row_metadata is MINIMAL, not FULL") {
		t.Fatalf("Requirements with binlog_row_metadata=MINIMAL: %v", err)
	}
}

// An XA transaction's rows come with its XA COMMIT, not its XA PREPARE
// (MariaDB writes the rows at the prepare), and never after XA ROLLBACK;
// one committed in one phase comes at once.
func TestFollowXA(t *testing.T) {
	d := db(t)
	exec(t, d, "DROP DATABASE IF EXISTS bx", "CREATE DATABASE bx", "CREATE TABLE bx.t (id INT PRIMARY KEY)")
	c := conn(t)
	start, err := binlog.Current(c)
	if err != nil {
		t.Fatal(err)
	}
	c2, c3 := conn(t), conn(t)
	for _, s := range []struct {
		c *backend.Conn
		q string
	}{{c, "XA START 'a'"}, {c, "INSERT INTO bx.t VALUES (1)"}, {c, "XA END 'a'"}, {c, "XA PREPARE 'a'"},
		{c2, "XA START 'b'"}, {c2, "INSERT INTO bx.t VALUES (2)"}, {c2, "XA END 'b'"}, {c2, "XA PREPARE 'b'"},
		{c2, "XA ROLLBACK 'b'"}, {c3, "INSERT INTO bx.t VALUES (3)"}, {c, "XA COMMIT 'a'"},
		{c3, "XA START 'c'"}, {c3, "INSERT INTO bx.t VALUES (4)"}, {c3, "XA END 'c'"}, {c3, "XA COMMIT 'c' ONE PHASE"}} {
		if _, err := s.c.Exec(s.q); err != nil {
			t.Fatalf("%s: %v", s.q, err)
		}
	}
	f := follow(t, start, "bx.t")
	var got []string
	for len(got) < 3 {
		ch, _ := next(t, f)
		var ids []string
		for _, x := range ch {
			ids = append(ids, fmt.Sprint(x.After[0]))
		}
		if len(ids) > 0 {
			got = append(got, strings.Join(ids, ","))
		}
	}
	if want := "3 1 4"; strings.Join(got, " ") != want {
		t.Fatalf("transactions in commit order: %q, want %q (2 rolled back)", strings.Join(got, " "), want)
	}
	if f.Pending() != 0 {
		t.Fatalf("%d XA transactions still pending", f.Pending())
	}
}
