package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// colocYAML: a TPC-C-like schema sharded by warehouse in database
// coloc_e2e: warehouse (w_id), district (d_w_id) and customer (c_w_id)
// hash-sharded alike over node1 and node2, 2 sub-tables each; item is
// global; plain lives on the default node.
func colocYAML(addr string) string {
	rule := func(table, key string) string {
		return fmt.Sprintf(`      - db: coloc_e2e
        table: %s
        key: %s
        nodes: [node1, node2]
        type: hash
        locations: [2, 2]
`, table, key)
	}
	return twoNodeYAML(addr, rule("warehouse", "w_id")+rule("district", "d_w_id")+rule("customer", "c_w_id")+`      - db: coloc_e2e
        table: item
        nodes: [node1, node2]
        type: global
`)
}

// Joins of tables sharded alike, written as applications write them
// (unqualified columns, comma joins, the warehouse given once), run on the
// one sub-table pair that holds the warehouse; an INSERT without a column
// list finds its key by the table's columns, which keyshard reads from
// the backends and again after each DDL it runs.
func TestColocatedUnqualifiedJoins(t *testing.T) {
	for _, port := range []int{basePort, basePort + 1} {
		d := direct(t, port, "")
		mustExec(t, d, "DROP DATABASE IF EXISTS coloc_e2e")
		mustExec(t, d, "CREATE DATABASE coloc_e2e")
	}
	p := startProxy(t, colocYAML("%ADDR%"))
	db := p.open(t, "ks:ks", "coloc_e2e", "")
	db.SetMaxOpenConns(1)

	mustExec(t, db, "CREATE TABLE warehouse (w_id INT PRIMARY KEY, w_name VARCHAR(10), w_tax DECIMAL(4,4), w_ytd DECIMAL(12,2))")
	mustExec(t, db, "CREATE TABLE district (d_id INT, d_w_id INT, d_ytd DECIMAL(12,2), PRIMARY KEY (d_w_id, d_id))")
	mustExec(t, db, "CREATE TABLE customer (c_id INT, c_d_id INT, c_w_id INT, c_last VARCHAR(16), c_credit CHAR(2), c_discount DECIMAL(4,4), "+
		"PRIMARY KEY (c_w_id, c_d_id, c_id))")
	mustExec(t, db, "CREATE TABLE item (i_id INT PRIMARY KEY, i_name VARCHAR(24))")
	mustExec(t, db, "CREATE TABLE plain (k INT PRIMARY KEY, v VARCHAR(8))")
	// INSERT without a column list: the key's place comes from the
	// columns keyshard read after the CREATE TABLE.
	for w := 1; w <= 4; w++ {
		mustExec(t, db, fmt.Sprintf("INSERT INTO warehouse VALUES (%d, 'w%d', 0.0%d00, %d000.00)", w, w, w, w))
		for d := 1; d <= 2; d++ {
			mustExec(t, db, fmt.Sprintf("INSERT INTO district VALUES (%d, %d, %d.50)", d, w, 10*w+d))
			mustExec(t, db, fmt.Sprintf("INSERT INTO customer VALUES (7, %d, %d, 'last%d%d', 'GC', 0.%d%d00)", d, w, w, d, w, d))
		}
	}
	mustExec(t, db, "INSERT INTO item VALUES (1, 'apple'), (2, 'pear')")

	// Each warehouse's rows are in one sub-table of each table, the same
	// index for all three (co-located), where keyshard reads them.
	for w := 1; w <= 4; w++ {
		var at []string
		for _, table := range []string{"warehouse", "district", "customer"} {
			key := map[string]string{"warehouse": "w_id", "district": "d_w_id", "customer": "c_w_id"}[table]
			var found []string
			for i := range 4 {
				port := basePort + i/2
				n := queryRows(t, direct(t, port, "coloc_e2e"), fmt.Sprintf("SELECT COUNT(*) FROM %s_%04d WHERE %s = %d", table, i, key, w))
				if n[0][0] != "0" {
					found = append(found, fmt.Sprintf("%04d", i))
				}
			}
			if len(found) != 1 {
				t.Fatalf("warehouse %d: %s rows in sub-tables %v, want one", w, table, found)
			}
			at = append(at, found[0])
		}
		if at[0] != at[1] || at[0] != at[2] {
			t.Fatalf("warehouse %d: warehouse, district, customer in sub-tables %v: not co-located", w, at)
		}
	}

	for _, c := range []struct {
		name, sql string
		want      [][]string
	}{
		{"new-order customer and warehouse, comma join, unqualified",
			"SELECT c_discount, c_last, c_credit, w_tax FROM customer, warehouse WHERE w_id = 3 AND c_w_id = w_id AND c_d_id = 2 AND c_id = 7",
			[][]string{{"0.3200", "last32", "GC", "0.0300"}}},
		{"the same with the constant on the other key",
			"SELECT c_last, w_name FROM customer, warehouse WHERE c_w_id = 4 AND c_w_id = w_id AND c_d_id = 1",
			[][]string{{"last41", "w4"}}},
		{"JOIN ... ON, unqualified",
			"SELECT c_last, w_name FROM customer JOIN warehouse ON c_w_id = w_id WHERE w_id = 2 ORDER BY c_last",
			[][]string{{"last21", "w2"}, {"last22", "w2"}}},
		{"aggregate over two tables",
			"SELECT d_w_id, sum(d_ytd) - max(w_ytd) FROM district, warehouse WHERE d_w_id = w_id AND w_id = 1 GROUP BY d_w_id",
			[][]string{{"1", "-976.00"}}},
		{"three tables",
			"SELECT w_name, d_id, c_last FROM warehouse, district, customer WHERE w_id = 2 AND d_w_id = w_id AND c_w_id = d_w_id AND c_d_id = d_id ORDER BY d_id",
			[][]string{{"w2", "1", "last21"}, {"w2", "2", "last22"}}},
		{"every warehouse: each sub-table pair joined, merged",
			"SELECT COUNT(*), SUM(c_discount) FROM customer, warehouse WHERE c_w_id = w_id",
			[][]string{{"8", "2.1200"}}},
		{"with a global table",
			"SELECT w_name, i_name FROM warehouse, item WHERE w_id = 1 AND i_id = 2",
			[][]string{{"w1", "pear"}}},
	} {
		got := queryRows(t, db, c.sql)
		if !slices.EqualFunc(got, c.want, slices.Equal) {
			t.Errorf("%s:\n%s\ngot  %v\nwant %v", c.name, c.sql, got, c.want)
		}
	}

	// A column added through keyshard is known at the next statement.
	mustExec(t, db, "ALTER TABLE warehouse ADD COLUMN w_zip CHAR(5)")
	mustExec(t, db, "INSERT INTO warehouse VALUES (5, 'w5', 0.0500, 5000.00, '12345')")
	if got := queryRows(t, db, "SELECT w_name, w_zip FROM warehouse WHERE w_id = 5"); len(got) != 1 || got[0][1] != "12345" {
		t.Fatalf("after ALTER: %v", got)
	}

	// Tables that are not joined on their keys are joined in the proxy
	// (proxy/join); what it cannot run is refused, saying why.
	if got := queryRows(t, db, "SELECT c_last, d_ytd FROM customer, district WHERE c_d_id = d_id"); len(got) == 0 {
		t.Fatalf("a join not on the keys: no rows")
	}
	_, err := db.Exec("SELECT COUNT(*) FROM customer, district WHERE c_d_id = d_id")
	if err == nil || !strings.Contains(err.Error(), "not joined on their shard keys") {
		t.Fatalf("a join not on the keys: %v", err)
	}
}
