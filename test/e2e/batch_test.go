package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/test/tpcc"
)

// batchResults runs a multi-statement batch and reads every result set of
// it (each value as text, "NULL" for NULL), and the error that ended it.
func batchResults(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, batch string) (sets [][][]string, err error) {
	rows, err := q.QueryContext(ctx, batch)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for {
		set, err := tpcc.ScanRows(rows)
		if err != nil {
			return sets, err
		}
		sets = append(sets, set)
		if !rows.NextResultSet() {
			return sets, rows.Err()
		}
	}
}

// Multi-statement batches naming sharded tables run statement by
// statement through keyshard's routing: reads over several sub-tables,
// merges, writes routed per row, an error that ends the batch, and
// transactions begun, committed and rolled back inside the batch or
// around it. Every answer is the reference server's.
func TestBatchSharded(t *testing.T) {
	ctx := context.Background()
	pushSetup(t)
	p := startProxy(t, pushYAML("%ADDR%"))
	ks := p.open(t, "ks:ks", "push_e2e", "multiStatements=true")
	ks.SetMaxOpenConns(1)
	ref := direct(t, refPort, "push_ref?multiStatements=true")
	ref.SetMaxOpenConns(1)
	same := func(batch string) {
		t.Helper()
		got, gerr := batchResults(ctx, ks, batch)
		want, werr := batchResults(ctx, ref, batch)
		if myErrCode(gerr) != myErrCode(werr) || (gerr == nil) != (werr == nil) {
			t.Fatalf("%s: error %v, want %v", batch, gerr, werr)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d result sets, want %d\n got  %v\n want %v", batch, len(got), len(want), got, want)
		}
		for i := range got {
			if !slices.EqualFunc(got[i], want[i], slices.Equal) {
				t.Errorf("%s: result set %d\n got  %v\n want %v", batch, i, got[i], want[i])
			}
		}
	}
	// Reads: one sub-table, all of them with a merge, global and plain.
	same("SELECT COUNT(*), SUM(o_amount) FROM orders; SELECT o_id, o_amount FROM orders WHERE o_w_id = 3 ORDER BY o_d_id, o_id; " +
		"SELECT w_name FROM warehouse ORDER BY w_id DESC LIMIT 3; SELECT i_name FROM item ORDER BY i_id; SELECT 1")
	same("SELECT o_w_id, COUNT(*) FROM orders GROUP BY o_w_id ORDER BY o_w_id;SELECT 2;")
	// Writes routed per row, their answers in order (a SELECT between).
	same("INSERT INTO history VALUES (1, 1, 1, 5, 'a'), (2, 1, 6, 7, 'b'), (3, 2, 3, 1, 'c'); " +
		"UPDATE history SET h_amount = h_amount + 1 WHERE h_w_id = 6; SELECT h_id, h_amount FROM history ORDER BY h_id; " +
		"DELETE FROM history WHERE h_id = 1; SELECT ROW_COUNT()")
	// The first error ends the batch: the statements after it do not run.
	same("SELECT COUNT(*) FROM history; SELECT nosuch FROM orders; DELETE FROM history")
	same("INSERT INTO history VALUES (4, 1, 4, 1, 'd'); INSERT INTO warehouse VALUES (1, 'dup'); DELETE FROM history")
	same("SELECT h_id FROM history ORDER BY h_id")
	// A transaction over two nodes inside one batch, committed and rolled
	// back.
	same("BEGIN; INSERT INTO history VALUES (10, 1, 1, 1, 'tx'); INSERT INTO history VALUES (11, 1, 2, 1, 'tx'); COMMIT; " +
		"SELECT h_id, h_w_id FROM history WHERE h_note = 'tx' ORDER BY h_id")
	same("START TRANSACTION; DELETE FROM history WHERE h_note = 'tx'; INSERT INTO history VALUES (12, 1, 3, 1, 'tx'); ROLLBACK; " +
		"SELECT h_id, h_w_id FROM history WHERE h_note = 'tx' ORDER BY h_id")
	// A batch inside a transaction that already spans two nodes: its
	// COMMIT ends the transaction on both.
	for _, d := range []*sql.DB{ks, ref} {
		c, err := d.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mustExecConn(t, c, "BEGIN")
		mustExecConn(t, c, "INSERT INTO history VALUES (20, 1, 1, 1, 'tx2')")
		mustExecConn(t, c, "INSERT INTO history VALUES (21, 1, 2, 1, 'tx2')")
		sets, err := batchResults(ctx, c, "SELECT COUNT(*) FROM history WHERE h_note = 'tx2'; INSERT INTO history VALUES (22, 1, 7, 1, 'tx2'); COMMIT")
		if err != nil || fmt.Sprint(sets) != "[[[2]]]" {
			t.Fatalf("a batch inside a transaction over two nodes: %v %v", sets, err)
		}
		mustExecConn(t, c, "ROLLBACK") // nothing to roll back: committed
		c.Close()
	}
	same("SELECT h_id, h_w_id FROM history WHERE h_note = 'tx2' ORDER BY h_id")
	// Every row is in the sub-table its warehouse gives.
	for _, port := range []int{basePort, basePort + 1} {
		for i := 0; i < 2; i++ {
			sub := fmt.Sprintf("history_%04d", 2*(port-basePort)+i)
			for _, r := range queryRows(t, direct(t, port, "push_e2e"), "SELECT h_w_id FROM "+sub) {
				var w int
				fmt.Sscan(r[0], &w)
				if fmt.Sprintf("history_%04d", w%4) != sub {
					t.Errorf("warehouse %d in %s", w, sub)
				}
			}
		}
	}
	// A batch keyshard cannot split is refused as before, naming the
	// table; one without sharded tables goes to one node as it is.
	_, err := ks.ExecContext(ctx, "SELECT 1 FROM orders; SELECT 1 FROM orders WHERE ((")
	if err == nil || !strings.Contains(err.Error(), "orders") {
		t.Errorf("an unsplittable batch: %v", err)
	}
	same("SELECT 5; SELECT 6")

	// With the result cache: a cached answer is never replayed for a
	// statement of a batch but its last (it would not say that another
	// follows), nor is such a statement's answer kept (it says so: read
	// alone later, it would make the client wait for another).
	cp := startProxy(t, pushYAML("%ADDR%")+"result_cache_mb: 8\nresult_cache_entry_kb: 4\nresult_cache_rules:\n"+
		"  - table: push_e2e.orders\n    ttl: 600s\n")
	cks := cp.open(t, "ks:ks", "push_e2e", "multiStatements=true")
	cks.SetMaxOpenConns(1)
	const hot = "SELECT o_id, o_amount FROM orders WHERE o_w_id = 2 ORDER BY o_d_id, o_id"
	queryRows(t, cks, hot)
	before := backendStatements(cp)
	queryRows(t, cks, hot)
	if after := backendStatements(cp); after["node1"]+after["node2"] != before["node1"]+before["node2"] {
		t.Fatalf("the second read was not answered from the cache: %v then %v", before, after)
	}
	for _, batch := range []string{hot + "; SELECT 7", "SELECT 8; " + hot, hot + "; " + hot + "; SELECT 9"} {
		got, gerr := batchResults(ctx, cks, batch)
		want, werr := batchResults(ctx, ref, batch)
		if gerr != nil || werr != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s with the result cache:\n got  %v %v\n want %v %v", batch, got, gerr, want, werr)
		}
	}
	// (A kept answer saying SERVER_MORE_RESULTS_EXISTS leaves the driver
	// waiting: the guard turns that into an error.)
	guard, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, got, err := mgFetch(guard, cks, false, hot)
	if want := queryRows(t, ref, hot); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s after the batches: %v %v, want %v", hot, got, err, want)
	}
	if got := queryRows(t, cks, "SELECT 10"); fmt.Sprint(got) != "[[10]]" {
		t.Errorf("after the batches: %v", got)
	}

	// The same with CLIENT_DEPRECATE_EOF (go-mysql's client; the driver
	// above reads classic EOFs): each answer, its rows, affected rows and
	// whether another follows, as the server gives them.
	const batch = "SELECT o_id FROM orders WHERE o_w_id = 2 ORDER BY o_d_id, o_id; UPDATE history SET h_amount = 9 WHERE h_w_id IN (1, 2); " +
		"SELECT COUNT(*) FROM orders; DELETE FROM history WHERE h_amount = 9"
	var answers []string
	for _, addr := range []string{fmt.Sprintf("127.0.0.1:%d", refPort), p.Addr} {
		dbName := "push_e2e"
		if addr != p.Addr {
			dbName = "push_ref"
		}
		c, err := client.Connect(addr, "ks", "ks", dbName, withCaps(mysql.CLIENT_MULTI_STATEMENTS|mysql.CLIENT_MULTI_RESULTS, 0))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if !negotiated(c, "CLIENT_DEPRECATE_EOF") {
			t.Fatalf("%s: CLIENT_DEPRECATE_EOF not negotiated", addr)
		}
		var sb strings.Builder
		if _, err := c.ExecuteMultiple(batch, func(r *mysql.Result, err error) {
			if err != nil {
				fmt.Fprintf(&sb, "error %v;", err)
				return
			}
			fmt.Fprintf(&sb, "affected %d more %t", r.AffectedRows, r.Status&mysql.SERVER_MORE_RESULTS_EXISTS != 0)
			if r.Resultset != nil {
				for i := range r.Values {
					v, _ := r.GetString(i, 0)
					sb.WriteString(" " + v)
				}
			}
			sb.WriteString(";")
		}); err != nil {
			t.Fatal(err)
		}
		if v := queryString(t, c, "SELECT 'in step'"); v != "in step" {
			t.Fatalf("%s: after the batch: %q", addr, v)
		}
		answers = append(answers, sb.String())
	}
	t.Logf("batch answers: %s", answers[1])
	if answers[0] != answers[1] {
		t.Errorf("a batch with CLIENT_DEPRECATE_EOF:\n got  %s\n want %s", answers[1], answers[0])
	}
}
