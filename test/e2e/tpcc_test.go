package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/keyshard/keyshard/router/shard"
	"github.com/keyshard/keyshard/test/tpcc"
)

// tpccYAML: test/tpcc's tables in database tpcc_e2e, each hash-sharded by
// its warehouse column over node1 and node2 with the same locations (so a
// warehouse's rows are in the same sub-table index of every table), item
// global.
func tpccYAML(addr string) string {
	var rules strings.Builder
	for _, s := range tpcc.Sharded {
		fmt.Fprintf(&rules, `      - db: tpcc_e2e
        table: %s
        key: %s
        nodes: [node1, node2]
        type: hash
        locations: [2, 2]
`, s.Table, s.Key)
	}
	rules.WriteString(`      - db: tpcc_e2e
        table: item
        nodes: [node1, node2]
        type: global
`)
	return twoNodeYAML(addr, rules.String())
}

// A TPC-C-like workload as applications write it, sharded by warehouse:
// the schema created and the data loaded through keyshard by a client
// with autocommit off, then 4 clients (two on the binary protocol, two on
// the text protocol) run a fixed number of TPC-C's five transactions each
// (1% of new-order lines and 15% of payments for another warehouse, on
// the other node for half of them), retrying after deadlocks. Then the
// TPC-C consistency conditions must hold, read through keyshard and on
// the backends' sub-tables directly (the same answers), every committed
// transaction must be there, and every row must be in the sub-table its
// warehouse's hash rule gives.
func TestTPCC(t *testing.T) {
	cfg := tpcc.Config{Warehouses: 4, Districts: 3, Customers: 20, Items: 100}
	const clients, perClient = 8, 100
	nodes := []*sql.DB{direct(t, basePort, ""), direct(t, basePort+1, "")}
	for _, d := range nodes {
		mustExec(t, d, "DROP DATABASE IF EXISTS tpcc_e2e")
		mustExec(t, d, "CREATE DATABASE tpcc_e2e")
	}
	nodes = []*sql.DB{direct(t, basePort, "tpcc_e2e"), direct(t, basePort+1, "tpcc_e2e")}
	p := startProxy(t, tpccYAML("%ADDR%"))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	start := time.Now()
	loader := p.open(t, "ks:ks", "tpcc_e2e", "")
	conn, err := loader.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mustExecConn(t, conn, "SET autocommit=0")
	if err := tpcc.Create(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if err := tpcc.Load(ctx, conn, cfg); err != nil {
		t.Fatal(err)
	}
	t.Logf("schema and load: %v", time.Since(start))

	start = time.Now()
	binary := p.open(t, "ks:ks", "tpcc_e2e", "")
	text := p.open(t, "ks:ks", "tpcc_e2e", "interpolateParams=true")
	st, err := tpcc.Run(ctx, []*sql.DB{binary, text}, cfg, clients, perClient, 1)
	t.Logf("%d transactions in %v: %d committed, by type (%v) %v, %d new-orders rolled back (unused item), %d deadlock retries, "+
		"%d of %d order lines remote (%d orders), %d of %d payments remote, %d orders delivered",
		clients*perClient, time.Since(start), st.Total(), tpcc.TypeNames, st.Done, st.Rollbacks, st.Deadlocks,
		st.RemoteLines, st.Lines, st.RemoteOrders, st.RemotePayments, st.Done[tpcc.Payment], st.Delivered)
	if err != nil {
		t.Fatal(err)
	}
	if st.RemoteLines == 0 || st.RemotePayments == 0 {
		t.Errorf("no remote order line or payment: the workload crossed no warehouse")
	}

	check := p.open(t, "ks:ks", "tpcc_e2e", "")
	// Stock-level's join names each table's warehouse; warehouses on
	// different sub-tables (1: _0001, 2: _0002) cannot be joined there.
	rows, err := check.Query("SELECT COUNT(*) FROM order_line, stock WHERE ol_w_id = 1 AND s_w_id = 2 AND s_i_id = ol_i_id")
	if err == nil {
		rows.Close()
	}
	wantErrContains(t, "stock-level over two sub-tables", err, 1235, "different sub-tables (_0001 and _0002)")
	rule, err := shard.New(shard.Config{Type: shard.TypeHash, Nodes: 2, Locations: []int{2, 2}})
	if err != nil {
		t.Fatal(err)
	}
	subs := rule.Tables()
	// Through keyshard: the logical tables, merged.
	viaProxy, err := tpcc.Gather(cfg, func(table, q string) ([][]string, error) {
		return tpcc.Rows(ctx, check, strings.ReplaceAll(q, "{t}", table))
	})
	if err != nil {
		t.Fatal(err)
	}
	// On the backends: every sub-table, concatenated.
	viaNodes, err := tpcc.Gather(cfg, func(table, q string) ([][]string, error) {
		var all [][]string
		for _, s := range subs {
			rows, err := tpcc.Rows(ctx, nodes[s.Node], strings.ReplaceAll(q, "{t}", table+s.Suffix))
			if err != nil {
				return nil, err
			}
			all = append(all, rows...)
		}
		return all, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]tpcc.Facts{"through keyshard": viaProxy, "on the backends": viaNodes} {
		for _, b := range f.Check(cfg, &st) {
			t.Errorf("%s: %s", name, b)
		}
	}
	if d := viaProxy.Equal(viaNodes); d != "" {
		t.Errorf("through keyshard and on the backends differ: %s", d)
	}

	// Placement: each row where its warehouse's hash rule puts it.
	for _, s := range tpcc.Sharded {
		for i, sub := range subs {
			for _, w := range queryCol(t, nodes[sub.Node], fmt.Sprintf("SELECT DISTINCT %s FROM %s%s", s.Key, s.Table, sub.Suffix)) {
				var k int64
				fmt.Sscan(w, &k)
				if want, _ := rule.Find(k); want != i {
					t.Errorf("%s: warehouse %s rows in %s%s on node%d, want %s%s", s.Table, w, s.Table, sub.Suffix, sub.Node+1, s.Table, subs[want].Suffix)
				}
			}
		}
	}
	for i, n := range nodes {
		if got := queryCol(t, n, "SELECT COUNT(*) FROM item"); got[0] != fmt.Sprint(cfg.Items) {
			t.Errorf("node%d: item copy has %s rows, want %d", i+1, got[0], cfg.Items)
		}
	}
	noPreparedBranches(t)
	m := scrape(t, p)
	t.Logf("keyshard: %v transactions over several nodes committed in two phases, %v deadlocks across nodes found by keyshard, %v victims stopped",
		metricValue(m, "keyshard_xa_commits_total"), metricValue(m, "keyshard_deadlocks_total"), metricValue(m, "keyshard_deadlock_victims_total"))
}
