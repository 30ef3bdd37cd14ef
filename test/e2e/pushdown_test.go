package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// pushYAML: database push_e2e sharded by warehouse like colocYAML
// (warehouse, district, orders, new_orders, history hash-sharded alike,
// 2+2 sub-tables over node1 and node2), cust8 sharded over 8 sub-tables
// (not alike), item global.
func pushYAML(addr string) string {
	rule := func(table, key string, locs string) string {
		return fmt.Sprintf(`      - db: push_e2e
        table: %s
        key: %s
        nodes: [node1, node2]
        type: hash
        locations: [%s]
`, table, key, locs)
	}
	return twoNodeYAML(addr, rule("warehouse", "w_id", "2, 2")+rule("district", "d_w_id", "2, 2")+rule("orders", "o_w_id", "2, 2")+
		rule("new_orders", "no_w_id", "2, 2")+rule("history", "h_w_id", "2, 2")+rule("cust8", "c_w_id", "4, 4")+`      - db: push_e2e
        table: item
        nodes: [node1, node2]
        type: global
`)
}

// pushSetup makes the tables and rows through keyshard, and the same as
// plain tables in push_ref on the reference backend (refPort). It returns
// keyshard's connection (one at a time) and the reference's.
func pushSetup(t *testing.T) (*sql.DB, *sql.DB) {
	t.Helper()
	mgFreshDB(t, "push_e2e", basePort, basePort+1)
	mgFreshDB(t, "push_ref", refPort)
	p := startProxy(t, pushYAML("%ADDR%"))
	db := p.open(t, "ks:ks", "push_e2e", "")
	db.SetMaxOpenConns(1)
	ref := direct(t, refPort, "push_ref")
	both := func(q string) {
		t.Helper()
		mustExec(t, db, q)
		mustExec(t, ref, q)
	}
	both("CREATE TABLE warehouse (w_id INT PRIMARY KEY, w_name VARCHAR(10))")
	both("CREATE TABLE district (d_id INT, d_w_id INT, d_name VARCHAR(10), PRIMARY KEY (d_w_id, d_id))")
	both("CREATE TABLE orders (o_id INT, o_d_id INT, o_w_id INT, o_amount INT, PRIMARY KEY (o_w_id, o_d_id, o_id))")
	both("CREATE TABLE new_orders (no_o_id INT, no_d_id INT, no_w_id INT, PRIMARY KEY (no_w_id, no_d_id, no_o_id))")
	both("CREATE TABLE history (h_id INT, h_d_id INT, h_w_id INT, h_amount INT, h_note VARCHAR(20))")
	both("CREATE TABLE cust8 (c_id INT, c_w_id INT)")
	both("CREATE TABLE item (i_id INT PRIMARY KEY, i_name VARCHAR(10))")
	both("INSERT INTO item VALUES (1, 'apple'), (2, 'pear')")
	for w := 1; w <= 8; w++ {
		both(fmt.Sprintf("INSERT INTO warehouse VALUES (%d, 'w%d')", w, w))
		both(fmt.Sprintf("INSERT INTO cust8 VALUES (%d, %d)", w, w))
		for d := 1; d <= 2; d++ {
			both(fmt.Sprintf("INSERT INTO district VALUES (%d, %d, 'd%d')", d, w, d))
			for o := 1; o <= 3; o++ {
				both(fmt.Sprintf("INSERT INTO orders VALUES (%d, %d, %d, %d)", o, d, w, (w*7+d*3+o)%10))
			}
		}
	}
	// Every warehouse's rows are on both nodes: sub-tables 0, 1 on node1,
	// 2, 3 on node2.
	for _, port := range []int{basePort, basePort + 1} {
		if n := queryRows(t, direct(t, port, "push_e2e"), "SELECT COUNT(*) FROM orders_"+fmt.Sprintf("%04d", 2*(port-basePort))); n[0][0] == "0" {
			t.Fatalf("no orders on the backend at %d", port)
		}
	}
	return db, ref
}

// sortedRows runs q and sorts its rows (a UNION ALL over sub-tables
// comes in no particular order).
func sortedRows(t *testing.T, db mgQuerier, q string) [][]string {
	t.Helper()
	rows := queryRows(t, db, q)
	slices.SortFunc(rows, func(a, b []string) int { return strings.Compare(strings.Join(a, "\x01"), strings.Join(b, "\x01")) })
	return rows
}

// UNION ALL of co-located SELECTs runs per sub-table index and is relayed
// as one result set; pinned to one index, any UNION runs there as one
// statement. The answers are those of the same query on plain tables.
func TestUnionPushdown(t *testing.T) {
	db, ref := pushSetup(t)
	for _, q := range []string{
		// every sub-table: per-index UNION ALL
		"SELECT o_id, o_w_id FROM orders WHERE o_amount > 4 UNION ALL SELECT d_id, d_w_id FROM district",
		"SELECT w_name, d_name FROM warehouse JOIN district ON d_w_id = w_id WHERE d_id = 1 UNION ALL SELECT o_id, o_amount FROM orders WHERE o_id = 2",
		"SELECT d_w_id, COUNT(*) FROM district GROUP BY d_w_id UNION ALL SELECT o_w_id, SUM(o_amount) FROM orders GROUP BY o_w_id",
		"(SELECT o_id FROM orders) UNION ALL (SELECT d_id FROM district UNION ALL SELECT w_id FROM warehouse)",
		"SELECT DISTINCT o_w_id, o_amount FROM orders UNION ALL SELECT d_w_id, d_id FROM district",
		// UNION (distinct) with the key in the same place in every arm
		"SELECT o_w_id, o_d_id FROM orders UNION SELECT d_w_id, d_id FROM district",
		"SELECT o_w_id, o_amount FROM orders INTERSECT SELECT o_w_id, o_amount FROM orders WHERE o_d_id = 1",
		// the sub-tables of two warehouses on two nodes
		"SELECT o_id, o_amount FROM orders WHERE o_w_id = 1 UNION ALL SELECT d_id, d_name FROM district WHERE d_w_id = 2",
		"SELECT o_id FROM orders WHERE o_w_id IN (3, 6) UNION ALL SELECT w_id FROM warehouse WHERE w_id = 7",
		// pinned to one sub-table: distinct, ORDER BY, LIMIT, an arm of
		// no sharded table
		"SELECT o_amount FROM orders WHERE o_w_id = 3 UNION SELECT d_id FROM district WHERE d_w_id = 3 ORDER BY 1 DESC LIMIT 3",
		"SELECT o_amount FROM orders WHERE o_w_id = 5 UNION ALL SELECT 100 UNION ALL SELECT i_id FROM item",
		"(SELECT o_id FROM orders WHERE o_w_id = 2 ORDER BY o_id LIMIT 2) UNION ALL SELECT d_id FROM district WHERE d_w_id = 2",
		// only global or unsharded tables: as before
		"SELECT i_name FROM item UNION SELECT 'x'",
	} {
		got, want := sortedRows(t, db, q), sortedRows(t, ref, q)
		if len(want) == 0 {
			t.Fatalf("%s: no rows on the reference", q)
		}
		if !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("%s\n got  %v\n want %v", q, got, want)
		}
	}
	// Ordered answers agree in order too.
	q := "SELECT o_id, o_amount FROM orders WHERE o_w_id = 4 UNION SELECT d_id, 0 FROM district WHERE d_w_id = 4 ORDER BY 2, 1 LIMIT 4"
	if got, want := queryRows(t, db, q), queryRows(t, ref, q); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("%s\n got  %v\n want %v", q, got, want)
	}
	// Prepared, with the keys as parameters.
	for _, args := range [][]any{{1, 1}, {1, 2}, {4, 8}} {
		q := "SELECT o_id, o_w_id FROM orders WHERE o_w_id = ? UNION ALL SELECT d_id, d_w_id FROM district WHERE d_w_id = ?"
		got, want := pushPrepared(t, db, q, args), pushPrepared(t, ref, q, args)
		if !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("%s %v\n got  %v\n want %v", q, args, got, want)
		}
	}

	for _, c := range []struct{ sql, msg string }{
		{"SELECT o_id FROM orders UNION ALL SELECT d_id FROM district ORDER BY 1",
			"ORDER BY or LIMIT over a UNION spread over several sub-tables is not supported"},
		{"SELECT o_id FROM orders WHERE o_w_id IN (1, 2) UNION ALL SELECT d_id FROM district WHERE d_w_id = 1 LIMIT 2",
			"ORDER BY or LIMIT over a UNION spread over several sub-tables is not supported"},
		{"SELECT o_amount FROM orders UNION SELECT d_id FROM district",
			"UNION (without ALL) over several sub-tables is not supported unless every SELECT selects its shard key in the same position; use UNION ALL"},
		{"SELECT o_id FROM orders UNION ALL SELECT 1",
			"a UNION mixing sharded table orders with a SELECT on no sharded table (it would run on every sub-table) is not supported"},
		{"SELECT DISTINCT o_amount FROM orders UNION ALL SELECT d_id FROM district",
			"UNION where a SELECT DISTINCT on sharded table orders does not select its shard key"},
		{"SELECT COUNT(*) FROM orders UNION ALL SELECT COUNT(*) FROM district",
			"UNION where a SELECT on sharded table orders aggregates rows of several sub-tables: group it by the shard key"},
		{"SELECT o_id FROM orders UNION ALL SELECT c_id FROM cust8",
			"UNION of sharded tables orders (hash over node1,node2, 4 sub-tables) and cust8 (hash over node1,node2, 8 sub-tables) is not supported"},
		{"SELECT o_id FROM orders, district WHERE o_d_id = d_id UNION ALL SELECT 1 FROM warehouse",
			"orders and district are not joined on their shard keys"},
	} {
		_, err := db.Exec(c.sql)
		wantErrContains(t, c.sql, err, 1235, c.msg)
	}
}

func pushPrepared(t *testing.T, db *sql.DB, q string, args []any) [][]string {
	t.Helper()
	st, err := db.Prepare(q)
	if err != nil {
		t.Fatalf("prepare %s: %v", q, err)
	}
	defer st.Close()
	rows, err := st.Query(args...)
	if err != nil {
		t.Fatalf("%s %v: %v", q, args, err)
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		var a, b sql.NullString
		if err := rows.Scan(&a, &b); err != nil {
			t.Fatal(err)
		}
		out = append(out, []string{a.String, b.String})
	}
	slices.SortFunc(out, func(a, b []string) int { return strings.Compare(strings.Join(a, "\x01"), strings.Join(b, "\x01")) })
	return out
}

// INSERT ... SELECT between co-located tables runs on each sub-table index
// the SELECT may touch, as one atomic write; the rows are those the same
// statement makes on plain tables, and each is on its own sub-table.
func TestInsertSelectPushdown(t *testing.T) {
	db, ref := pushSetup(t)
	both := func(q string) {
		t.Helper()
		mustExec(t, db, q)
		mustExec(t, ref, q)
	}
	same := func(what, q string) {
		t.Helper()
		got, want := sortedRows(t, db, q), sortedRows(t, ref, q)
		if len(want) == 0 {
			t.Fatalf("%s: nothing on the reference", what)
		}
		if !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("%s: %s\n got  %v\n want %v", what, q, got, want)
		}
	}
	// Every sub-table: 4 statements on 2 nodes, one XA transaction; the
	// rows it reports are the rows it inserted.
	const every = "INSERT INTO new_orders (no_o_id, no_d_id, no_w_id) SELECT o_id, o_d_id, o_w_id FROM orders WHERE o_amount >= 5"
	var affected [2]int64
	for i, c := range []*sql.DB{db, ref} {
		res, err := c.Exec(every)
		if err != nil {
			t.Fatalf("%s: %v", every, err)
		}
		affected[i], _ = res.RowsAffected()
	}
	if affected[0] != affected[1] || affected[0] == 0 {
		t.Errorf("%s: %d rows affected, want %d", every, affected[0], affected[1])
	}
	same("every sub-table", "SELECT * FROM new_orders")
	// One warehouse: one sub-table.
	both("INSERT INTO history (h_id, h_d_id, h_w_id, h_amount, h_note) SELECT o_id, o_d_id, o_w_id, o_amount, 'one' FROM orders WHERE o_w_id = 3")
	// A join, the key from the other table, an aggregate grouped by the key.
	both("INSERT INTO history (h_id, h_d_id, h_w_id, h_amount, h_note) SELECT d_id, d_id, w_id, 0, w_name FROM warehouse JOIN district ON d_w_id = w_id WHERE d_id = 2")
	both("INSERT INTO history (h_id, h_d_id, h_w_id, h_amount, h_note) SELECT 0, 0, o_w_id, SUM(o_amount), 'sum' FROM orders GROUP BY o_w_id")
	// The same table, pinned by the key and a LIMIT (exact on one sub-table).
	both("INSERT INTO new_orders (no_o_id, no_d_id, no_w_id) SELECT no_o_id + 100, no_d_id, no_w_id FROM new_orders WHERE no_w_id = 6 ORDER BY no_o_id LIMIT 2")
	same("history", "SELECT * FROM history")
	same("new_orders", "SELECT * FROM new_orders")
	// Prepared.
	for _, w := range []int{2, 7} {
		q := "INSERT INTO history (h_id, h_d_id, h_w_id, h_amount, h_note) SELECT o_id, o_d_id, o_w_id, o_amount, ? FROM orders WHERE o_w_id = ? AND o_id > ?"
		for _, c := range []*sql.DB{db, ref} {
			st, err := c.Prepare(q)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Exec("prep", w, 1); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			st.Close()
		}
	}
	same("history, prepared", "SELECT * FROM history")
	// Each row is on the sub-table of its key.
	for i := range 4 {
		rows := queryRows(t, direct(t, basePort+i/2, "push_e2e"), fmt.Sprintf("SELECT DISTINCT h_w_id %% 4 FROM history_%04d", i))
		if len(rows) != 1 || rows[0][0] != fmt.Sprint(i) {
			t.Errorf("history_%04d holds keys of sub-tables %v", i, rows)
		}
	}

	for _, c := range []struct{ sql, msg string }{
		{"INSERT INTO new_orders (no_o_id, no_d_id, no_w_id) SELECT o_id, o_d_id, o_d_id FROM orders",
			"INSERT ... SELECT into sharded table new_orders is not supported: the inserted shard key no_w_id does not come from a co-located key column of the SELECT"},
		{"INSERT INTO new_orders (no_o_id, no_d_id, no_w_id) SELECT o_id, o_d_id, 1 FROM orders WHERE o_w_id = 1",
			"the inserted shard key no_w_id does not come from a co-located key column of the SELECT"},
		{"INSERT INTO new_orders (no_o_id, no_d_id, no_w_id) SELECT c_id, 1, c_w_id FROM cust8",
			"INSERT ... SELECT into sharded table new_orders (hash over node1,node2, 4 sub-tables) from sharded table cust8 (hash over node1,node2, 8 sub-tables) is not supported"},
		{"INSERT INTO new_orders (no_o_id, no_d_id, no_w_id) SELECT i_id, 1, i_id FROM item",
			"INSERT ... SELECT into sharded table new_orders from no sharded table is not supported"},
		{"INSERT INTO new_orders SELECT * FROM new_orders",
			"the SELECT must list its columns (not *)"},
		{"INSERT INTO new_orders (no_o_id, no_d_id, no_w_id) SELECT o_id, o_d_id, o_w_id FROM orders ORDER BY o_id LIMIT 3",
			"INSERT ... SELECT where a SELECT on sharded table orders has LIMIT: each sub-table would apply it to its own rows"},
	} {
		_, err := db.Exec(c.sql)
		wantErrContains(t, c.sql, err, 1235, c.msg)
	}
}

// INSERT ... SELECT over both nodes inside a transaction with autocommit
// off: ROLLBACK leaves nothing, COMMIT everything, on every sub-table.
func TestInsertSelectTransaction(t *testing.T) {
	db, ref := pushSetup(t)
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const ins = "INSERT INTO new_orders (no_o_id, no_d_id, no_w_id) SELECT o_id, o_d_id, o_w_id FROM orders WHERE o_id <= 2"
	count := func() string {
		t.Helper()
		n := 0
		for i := range 4 {
			var k int
			if err := direct(t, basePort+i/2, "push_e2e").QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM new_orders_%04d", i)).Scan(&k); err != nil {
				t.Fatal(err)
			}
			n += k
		}
		return fmt.Sprint(n)
	}
	mustExecConn(t, c, "SET autocommit = 0")
	mustExecConn(t, c, ins)
	wantColConn(t, c, "SELECT COUNT(*) FROM new_orders", "32", "inside the transaction, its own rows")
	mustExecConn(t, c, "ROLLBACK")
	wantColConn(t, c, "SELECT COUNT(*) FROM new_orders", "0", "after ROLLBACK")
	if n := count(); n != "0" {
		t.Fatalf("after ROLLBACK the sub-tables hold %s rows", n)
	}
	mustExecConn(t, c, ins)
	mustExecConn(t, c, "UPDATE warehouse SET w_name = 'x' WHERE w_id = 1")
	mustExecConn(t, c, "COMMIT")
	mustExecConn(t, c, "SET autocommit = 1")
	if n := count(); n != "32" {
		t.Fatalf("after COMMIT the sub-tables hold %s rows, want 32", n)
	}
	mustExec(t, ref, ins)
	got, want := sortedRows(t, c, "SELECT * FROM new_orders"), sortedRows(t, ref, "SELECT * FROM new_orders")
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("after COMMIT\n got  %v\n want %v", got, want)
	}
}
