package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// joinYAML: database join_e2e with cust (hash on c_w_id, 2+2 sub-tables),
// ord (hash on o_w_id, the same rule), item (range on i_id, 10 keys a
// sub-table, 2+2) and nt (no rule: the default node's). extra is
// appended (max_merge_rows).
func joinYAML(addr, extra string) string {
	return twoNodeYAML(addr, `      - db: join_e2e
        table: cust
        key: c_w_id
        nodes: [node1, node2]
        type: hash
        locations: [2, 2]
      - db: join_e2e
        table: ord
        key: o_w_id
        nodes: [node1, node2]
        type: hash
        locations: [2, 2]
      - db: join_e2e
        table: item
        key: i_id
        nodes: [node1, node2]
        type: range
        locations: [2, 2]
        table_row_limit: 10
`+extra)
}

// joinSetup makes the tables and rows through keyshard, and the same as
// plain tables in join_ref on the reference backend.
func joinSetup(t *testing.T, extra string) (ks, ref mgQuerier) {
	t.Helper()
	mgFreshDB(t, "join_e2e", basePort, basePort+1)
	mgFreshDB(t, "join_ref", refPort)
	p := startProxy(t, joinYAML("%ADDR%", extra))
	db := p.open(t, "ks:ks", "join_e2e", "")
	db.SetMaxOpenConns(1)
	r := direct(t, refPort, "join_ref")
	both := func(q string) {
		t.Helper()
		mustExec(t, db, q)
		mustExec(t, r, q)
	}
	both("CREATE TABLE cust (c_id INT, c_w_id INT, c_name VARCHAR(12), c_bal DECIMAL(8,2), PRIMARY KEY (c_w_id, c_id))")
	both("CREATE TABLE ord (o_id INT, o_w_id INT, o_c_id INT, o_item INT, o_at DATETIME, PRIMARY KEY (o_w_id, o_id))")
	both("CREATE TABLE item (i_id INT PRIMARY KEY, i_name VARCHAR(12), i_price DECIMAL(6,2))")
	both("CREATE TABLE nt (n_c_id INT, n_text VARCHAR(20))")
	for i := 0; i < 40; i++ {
		both(fmt.Sprintf("INSERT INTO item VALUES (%d, '%s', %d.25)", i, []string{"apple", "Pear", "plum", "APPLE"}[i%4], i%7))
	}
	for w := 1; w <= 6; w++ {
		for c := 1; c <= 5; c++ {
			name := []string{"ann", "Bob", "apple", "pear", "zed"}[(w+c)%5]
			both(fmt.Sprintf("INSERT INTO cust VALUES (%d, %d, '%s', %d.50)", c, w, name, w*c%9))
			for o := 1; o <= 3; o++ {
				item := (w*11 + c*5 + o*3) % 45 // 40..44: no such item
				both(fmt.Sprintf("INSERT INTO ord VALUES (%d, %d, %d, %d, '2024-0%d-0%d 10:00:00')", c*10+o, w, (c+o)%7, item, o, c))
			}
		}
	}
	for c := 0; c < 8; c += 2 {
		both(fmt.Sprintf("INSERT INTO nt VALUES (%d, 'note %d')", c, c))
	}
	return db, r
}

// Joins of tables that do not live together run in the proxy: a
// nested loop with batched lookups. Every answer, text and prepared, is
// the same query's on plain tables of one server.
func TestJoinAcrossShards(t *testing.T) {
	ks, ref := joinSetup(t, "")
	ctx := context.Background()
	type q struct {
		sql   string
		args  []any
		order bool // the ORDER BY fixes the rows' order
	}
	for _, c := range []q{
		// differently sharded (hash and range), unqualified columns
		{sql: "SELECT c_id, c_w_id, i_name FROM cust JOIN item ON i_id = c_id"},
		{sql: "SELECT o_id, o_w_id, i_name, i_price FROM ord JOIN item ON i_id = o_item WHERE o_w_id IN (1, 2, 5) AND i_price > ?", args: []any{2}},
		{sql: "SELECT o.o_id, o.o_w_id, i.* FROM ord o, item i WHERE o.o_item = i.i_id AND i.i_id < 30"},
		{sql: "SELECT * FROM ord JOIN item ON i_id = o_item WHERE o_w_id = ?", args: []any{3}},
		// LEFT JOIN: rows of ord without an item (o_item 40..44), ON
		// conditions on item, expressions of item over the NULL row
		{sql: "SELECT o_id, o_w_id, o_item, i_name, COALESCE(i_price, -1), i_price * 2 FROM ord LEFT JOIN item ON i_id = o_item AND i_name <> 'plum'"},
		// WHERE on the right table of a LEFT JOIN: after the join, over
		// the NULL row too
		{sql: "SELECT o_id, o_w_id, o_item FROM ord LEFT JOIN item ON i_id = o_item WHERE i_name IS NULL"},
		{sql: "SELECT o_id, o_w_id, i_price FROM ord LEFT JOIN item ON i_id = o_item WHERE (i_price > ? OR i_id IS NULL) AND o_w_id <> 2", args: []any{3}},
		// tables of one rule not joined on their keys
		{sql: "SELECT c_name, c_w_id, o_id, o_w_id FROM cust JOIN ord ON o_c_id = c_id WHERE c_w_id = 2"},
		{sql: "SELECT c.c_name, o.o_id, o.o_w_id, UPPER(c.c_name) FROM cust c LEFT JOIN ord o ON o.o_c_id = c.c_id AND o.o_w_id = c.c_w_id + 1"},
		// strings joined by their collation (apple = APPLE)
		{sql: "SELECT c_id, c_w_id, c_name, i_id, i_name FROM cust JOIN item ON i_name = c_name WHERE c_w_id < ?", args: []any{4}},
		// a sharded table with the default node's
		{sql: "SELECT c_id, c_w_id, n_text FROM cust JOIN nt ON n_c_id = c_id"},
		{sql: "SELECT c_id, c_w_id, n_text FROM cust LEFT JOIN nt ON n_c_id = c_id WHERE c_w_id IN (2, 3)"},
		// ORDER BY the outer side (merged over its sub-tables), LIMIT
		{sql: "SELECT o_id, o_w_id, i_name FROM ord JOIN item ON i_id = o_item ORDER BY o_w_id DESC, o_id LIMIT 7", order: true},
		{sql: "SELECT o_id, o_w_id, i_name FROM ord JOIN item ON i_id = o_item ORDER BY o_w_id, o_id LIMIT ?, ?", args: []any{3, 5}, order: true},
		{sql: "SELECT o_at AS t, o_w_id, o_id, i_price FROM ord LEFT JOIN item ON i_id = o_item ORDER BY t, 2, 3", order: true},
		// ORDER BY the second table: it becomes the outer side
		{sql: "SELECT o_id, o_w_id, i_id FROM ord JOIN item ON i_id = o_item ORDER BY i_id, i_name"},
		// ORDER BY keys of both tables, or of a LEFT JOIN's right table:
		// sorted in the proxy
		{sql: "SELECT o_id, o_w_id, i_name, i_price FROM ord JOIN item ON i_id = o_item ORDER BY i_price DESC, o_w_id, o_id LIMIT 9", order: true},
		{sql: "SELECT o_id, o_w_id, i_name FROM ord LEFT JOIN item ON i_id = o_item ORDER BY i_name, o_id DESC, 2 LIMIT ?, ?", args: []any{4, 20}, order: true},
		{sql: "SELECT c_name AS n, c_w_id, c_id, i_id FROM cust JOIN item ON i_name = c_name ORDER BY UPPER(i_name), n DESC, c_w_id, c_id, i_id", order: true},
		// nothing matches
		{sql: "SELECT o_id, i_name FROM ord JOIN item ON i_id = o_item WHERE o_w_id = 99"},
	} {
		for _, prepared := range []bool{false, true} {
			if !prepared && len(c.args) > 0 {
				continue
			}
			gc, got, err := mgFetch(ctx, ks, prepared, c.sql, c.args...)
			if err != nil {
				t.Errorf("%s (prepared %v): %v", c.sql, prepared, err)
				continue
			}
			wc, want, err := mgFetch(ctx, ref, prepared, c.sql, c.args...)
			if err != nil {
				t.Fatalf("%s on the reference: %v", c.sql, err)
			}
			if !c.order {
				sortRows(got)
				sortRows(want)
			}
			if !slices.Equal(gc, wc) || !slices.EqualFunc(got, want, slices.Equal) {
				t.Errorf("%s (prepared %v)\n got  %v %v\n want %v %v", c.sql, prepared, gc, got, wc, want)
			}
		}
	}
	// What the proxy's join cannot do is refused with the construct and a
	// way around it.
	for q, want := range map[string]string{
		"SELECT COUNT(*) FROM ord JOIN item ON i_id = o_item":    "aggregate COUNT() is not supported",
		"SELECT o_id + i_id FROM ord JOIN item ON i_id = o_item": "a select-list expression over both tables",
		"SELECT o_id FROM ord RIGHT JOIN item ON i_id = o_item":  "write it as a LEFT JOIN",
	} {
		_, _, err := mgFetch(ctx, ks, false, q)
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1235 || !strings.Contains(me.Message, want) {
			t.Errorf("%s: %v, want 1235 %q", q, err, want)
		}
	}
}

// A batch whose lookups match more than max_merge_rows rows is refused
// with a clear error, not held in memory.
func TestJoinMaxMergeRows(t *testing.T) {
	ks, _ := joinSetup(t, "max_merge_rows: 5\n")
	_, _, err := mgFetch(context.Background(), ks, false, "SELECT c_id, i_id FROM cust JOIN item ON i_name = c_name")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1038 || !strings.Contains(me.Message, "max_merge_rows") {
		t.Fatalf("got %v, want 1038 naming max_merge_rows", err)
	}
	_, _, err = mgFetch(context.Background(), ks, false, "SELECT c_id, i_id FROM cust JOIN item ON i_id = c_id WHERE c_w_id IN (1, 2) ORDER BY i_name, c_w_id")
	if !errors.As(err, &me) || me.Number != 1038 || !strings.Contains(me.Message, "sorting its rows") {
		t.Fatalf("a sort in the proxy: got %v, want 1038", err)
	}
	// Under the limit it runs.
	if _, rows, err := mgFetch(context.Background(), ks, false, "SELECT c_id, i_id FROM cust JOIN item ON i_id = c_id WHERE c_w_id = 1"); err != nil || len(rows) != 5 {
		t.Fatalf("got %v %v, want 5 rows", rows, err)
	}
}

func sortRows(rows [][]string) {
	slices.SortFunc(rows, func(a, b []string) int { return strings.Compare(strings.Join(a, "\x01"), strings.Join(b, "\x01")) })
}

// Outer rows over several batches (DefaultBatch is 256): the joined rows
// keep the outer side's order across batches, a LIMIT and OFFSET span
// them, and a LEFT JOIN gives every unmatched row of each batch.
func TestJoinBatches(t *testing.T) {
	ks, ref := joinSetup(t, "")
	ctx := context.Background()
	var vals []string
	for i := 0; i < 700; i++ {
		vals = append(vals, fmt.Sprintf("(%d, %d, %d, %d, NULL)", 1000+i, 1+i%6, i%9, i%50))
	}
	q := "INSERT INTO ord VALUES " + strings.Join(vals, ", ")
	if _, err := ks.(interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
	}).ExecContext(ctx, q); err != nil {
		t.Fatal(err)
	}
	if _, err := ref.(interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
	}).ExecContext(ctx, q); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sql   string
		order bool
	}{
		{"SELECT o_id, o_w_id, o_item, i_name FROM ord LEFT JOIN item ON i_id = o_item", false},
		{"SELECT o_id, o_w_id, i_name, i_price FROM ord JOIN item ON i_id = o_item ORDER BY o_id DESC, o_w_id LIMIT 300, 40", true},
		{"SELECT o_id, o_w_id, c_name FROM ord JOIN cust ON c_id = o_c_id AND c_w_id = o_item ORDER BY o_w_id, o_id", true},
	} {
		for _, prepared := range []bool{false, true} {
			gc, got, err := mgFetch(ctx, ks, prepared, c.sql)
			if err != nil {
				t.Fatalf("%s: %v", c.sql, err)
			}
			wc, want, err := mgFetch(ctx, ref, prepared, c.sql)
			if err != nil {
				t.Fatal(err)
			}
			if !c.order {
				sortRows(got)
				sortRows(want)
			}
			if len(want) < 40 || !slices.Equal(gc, wc) || !slices.EqualFunc(got, want, slices.Equal) {
				t.Errorf("%s (prepared %v): %d rows, want %d\n got  %.300v\n want %.300v", c.sql, prepared, len(got), len(want), got, want)
			}
		}
	}
}

// A join across shards reads on connections of its own: with autocommit
// off and no transaction open it runs, inside a transaction it is
// refused. EXPLAIN SHARD shows its two statements.
func TestJoinSession(t *testing.T) {
	ks, _ := joinSetup(t, "")
	ctx := context.Background()
	c, err := ks.(*sql.DB).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const q = "SELECT o_id, i_name FROM ord JOIN item ON i_id = o_item WHERE o_w_id = 1"
	mustExecConn(t, c, "SET autocommit = 0")
	if rows := queryRowsConn(t, c, q); len(rows) == 0 {
		t.Fatal("autocommit off: no rows")
	}
	mustExecConn(t, c, "SET autocommit = 1")
	mustExecConn(t, c, "BEGIN")
	_, err = c.QueryContext(ctx, q)
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1235 || !strings.Contains(me.Message, "outside a transaction") {
		t.Fatalf("inside a transaction: %v, want 1235", err)
	}
	mustExecConn(t, c, "ROLLBACK")
	rows := queryRowsConn(t, c, "EXPLAIN SHARD "+q)
	if len(rows) != 2 || rows[0][0] != "(join: outer)" || !strings.Contains(rows[1][2], "IN (...)") {
		t.Fatalf("EXPLAIN SHARD: %v", rows)
	}
}
