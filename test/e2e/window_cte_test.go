package e2e

import (
	"context"
	"slices"
	"testing"
)

// Window functions partitioned by the shard key, and non-recursive CTEs,
// over sub-tables on two nodes: the answers (column names and types, rows)
// are those of the same query on plain tables, as text and as prepared
// statements. An ORDER BY that orders every row is compared in order;
// the other answers sorted.
func TestWindowAndCTE(t *testing.T) {
	ctx := context.Background()
	db, ref := pushSetup(t)
	type tc struct {
		q       string
		args    []any
		ordered bool
	}
	for _, c := range []tc{
		// Window functions partitioned by the key: every sub-table, rows
		// concatenated, or merged by ORDER BY / LIMIT.
		{q: "SELECT o_w_id, o_d_id, o_id, ROW_NUMBER() OVER (PARTITION BY o_w_id ORDER BY o_d_id, o_id) AS rn FROM orders"},
		{q: "SELECT o_w_id, o_id, RANK() OVER (PARTITION BY o_w_id, o_d_id ORDER BY o_amount) FROM orders"},
		{q: "SELECT o_w_id, o_d_id, o_id, SUM(o_amount) OVER w, COUNT(*) OVER w FROM orders WINDOW w AS (PARTITION BY o_w_id)"},
		{q: "SELECT o_w_id, o_d_id, o_id, SUM(o_amount) OVER (w ORDER BY o_d_id, o_id) FROM orders WINDOW w AS (PARTITION BY o_w_id)"},
		{q: "SELECT w_name, d_id, DENSE_RANK() OVER (PARTITION BY w_id ORDER BY d_name DESC) FROM warehouse JOIN district ON d_w_id = w_id"},
		{q: "SELECT o_w_id, o_d_id, o_id, RANK() OVER (PARTITION BY o_w_id ORDER BY o_amount, o_d_id, o_id) AS r FROM orders ORDER BY r, o_w_id LIMIT 7",
			ordered: true},
		{q: "SELECT o_w_id, o_d_id, SUM(o_amount), RANK() OVER (PARTITION BY o_w_id ORDER BY SUM(o_amount), o_d_id) FROM orders GROUP BY o_w_id, o_d_id"},
		{q: "SELECT o_w_id, o_id, LAG(o_amount) OVER (PARTITION BY o_w_id ORDER BY o_d_id, o_id) FROM orders WHERE o_w_id IN (?, ?)", args: []any{2, 7}},
		// Pinned to one sub-table: any window.
		{q: "SELECT o_d_id, o_id, ROW_NUMBER() OVER (ORDER BY o_amount DESC, o_d_id, o_id) FROM orders WHERE o_w_id = 3"},
		{q: "SELECT o_d_id, o_id, NTILE(2) OVER (ORDER BY o_d_id, o_id) FROM orders WHERE o_w_id = ?", args: []any{6}},
		// CTEs: pinned, over every sub-table, joined on the key, two
		// CTEs, one referred to twice, a column list.
		{q: "WITH x AS (SELECT o_id, o_amount FROM orders WHERE o_w_id = 3) SELECT * FROM x"},
		{q: "WITH x AS (SELECT o_id, o_w_id, o_amount FROM orders WHERE o_amount > 3) SELECT o_w_id, o_id FROM x WHERE o_id < 3"},
		{q: "WITH x AS (SELECT d_w_id, d_name FROM district) SELECT w_name, d_name FROM x JOIN warehouse ON w_id = x.d_w_id"},
		{q: "WITH x AS (SELECT o_w_id, o_amount FROM orders), y AS (SELECT o_w_id, SUM(o_amount) AS s FROM x GROUP BY o_w_id) SELECT * FROM y"},
		{q: "WITH x AS (SELECT o_w_id, o_id, o_d_id FROM orders WHERE o_id > ?) SELECT a.o_w_id, a.o_id, b.o_d_id FROM x a JOIN x b ON a.o_w_id = b.o_w_id " +
			"AND a.o_id = b.o_id WHERE a.o_w_id = ?", args: []any{1, 5}},
		{q: "WITH x (w, n) AS (SELECT d_w_id, d_name FROM district) SELECT w, n FROM x WHERE w IN (2, 3)"},
		{q: "WITH x AS (SELECT o_w_id, COUNT(*) AS n FROM orders GROUP BY o_w_id) SELECT * FROM x ORDER BY o_w_id", ordered: true},
		{q: "WITH x AS (SELECT o_w_id, o_id, ROW_NUMBER() OVER (PARTITION BY o_w_id ORDER BY o_d_id, o_id) AS rn FROM orders WHERE o_w_id = 4) " +
			"SELECT * FROM x WHERE rn <= 2"},
		{q: "WITH x AS (SELECT o_w_id, SUM(o_amount) AS s FROM orders GROUP BY o_w_id) SELECT * FROM x ORDER BY s DESC, o_w_id LIMIT 3",
			ordered: true},
		{q: "SELECT d.o_w_id, d.rn FROM (SELECT o_w_id, ROW_NUMBER() OVER (PARTITION BY o_w_id ORDER BY o_d_id, o_id) AS rn FROM orders) AS d " +
			"WHERE d.rn = 1"},
		{q: "WITH x AS (SELECT i_id FROM item) SELECT * FROM x"},
	} {
		for _, prepared := range []bool{false, true} {
			if c.args != nil && !prepared {
				continue
			}
			gc, got, gerr := mgFetch(ctx, db, prepared, c.q, c.args...)
			wc, want, werr := mgFetch(ctx, ref, prepared, c.q, c.args...)
			if gerr != nil || werr != nil {
				t.Errorf("%s (prepared %t): %v; reference: %v", c.q, prepared, gerr, werr)
				continue
			}
			if len(want) == 0 {
				t.Fatalf("%s: no rows on the reference", c.q)
			}
			if !c.ordered {
				sortRows(got)
				sortRows(want)
			}
			if !slices.Equal(gc, wc) || !slices.EqualFunc(got, want, slices.Equal) {
				t.Errorf("%s (prepared %t)\n got  %v %v\n want %v %v", c.q, prepared, gc, got, wc, want)
			}
		}
	}
	// Refused with 1235 naming the construct and a way around.
	for _, c := range []struct{ sql, msg string }{
		{"SELECT o_id, ROW_NUMBER() OVER (PARTITION BY o_d_id ORDER BY o_id) FROM orders",
			"window function ROW_NUMBER() over several sub-tables is not supported unless its PARTITION BY has shard key o_w_id of orders"},
		{"SELECT o_id, SUM(o_amount) OVER () FROM orders WHERE o_w_id IN (1, 2)",
			"window function SUM() over several sub-tables is not supported unless its PARTITION BY has shard key o_w_id"},
		{"SELECT o_d_id, RANK() OVER (PARTITION BY o_d_id ORDER BY COUNT(*)) FROM orders GROUP BY o_d_id",
			"window function RANK() over several sub-tables is not supported"},
		{"WITH x AS (SELECT o_d_id, COUNT(*) AS n FROM orders GROUP BY o_d_id) SELECT * FROM x",
			"a derived table on sharded table orders aggregates rows of several sub-tables: group it by the shard key"},
		{"WITH RECURSIVE x AS (SELECT o_id FROM orders UNION ALL SELECT o_id + 1 FROM x WHERE o_id < 3) SELECT * FROM x",
			"WITH RECURSIVE naming sharded table orders is not supported"},
		{"WITH x AS (SELECT c_id, c_w_id FROM cust8) SELECT * FROM x JOIN warehouse ON w_id = x.c_w_id",
			"do not place equal keys together"},
	} {
		_, err := db.Exec(c.sql)
		wantErrContains(t, c.sql, err, 1235, c.msg)
	}
}
