package torture

import (
	"database/sql"
	"fmt"
	"testing"
)

// subTables lists node n's sub-tables of table (table_NNNN).
func subTables(t *testing.T, n *sql.DB, table string) []string {
	t.Helper()
	rows, err := n.Query("SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND table_name LIKE ?", db, table+`\_%`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		names = append(names, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// scanAll reads every row of every sub-table of table on every node,
// straight from the backends, into f (the columns as int64).
func scanAll(t *testing.T, nodes []*sql.DB, table, cols string, f func(v []int64)) {
	t.Helper()
	for i, n := range nodes {
		for _, sub := range subTables(t, n, table) {
			rows, err := n.Query(fmt.Sprintf("SELECT %s FROM `%s`", cols, sub))
			if err != nil {
				t.Fatalf("node%d: %s: %v", i+1, sub, err)
			}
			for rows.Next() {
				cs, _ := rows.Columns()
				v := make([]int64, len(cs))
				ptrs := make([]any, len(cs))
				for j := range v {
					ptrs[j] = &v[j]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				f(v)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			rows.Close()
		}
	}
}

// check verifies the invariants on what the backends hold after
// recovery, against what the clients were told:
//   - the accounts are all there once, and their total is unchanged;
//   - every acknowledged transfer is logged, no transfer the client was
//     told was rolled back is, no transfer is logged that was never
//     attempted, and each logged one's effect (and nothing else) is in
//     the balances: every balance is its start plus the transfers logged;
//   - every transfer whole: its row and its two postings all there or
//     none, every balance its start plus its postings;
//   - every acknowledged ledger row is there exactly once, one the client
//     was told failed is not, one of unknown outcome at most once, none
//     that was never written; the rows of one INSERT all or none.
func check(t *testing.T, nodes []*sql.DB, ts []transfer, ls []ledgerWrite) {
	t.Helper()
	const show = 10 // violations listed per kind
	var violations int
	bad := func(format string, args ...any) {
		violations++
		if violations <= 5*show {
			t.Errorf(format, args...)
		}
	}

	bal := map[int64]int64{}
	scanAll(t, nodes, "accounts", "id, balance", func(v []int64) {
		if _, dup := bal[v[0]]; dup {
			bad("account %d twice", v[0])
		}
		bal[v[0]] = v[1]
	})
	var total int64
	for _, b := range bal {
		total += b
	}
	if len(bal) != nAccounts || total != nAccounts*balance {
		bad("%d accounts, total balance %d: want %d, %d", len(bal), total, nAccounts, nAccounts*balance)
	}

	logged := map[int64][3]int64{}
	scanAll(t, nodes, "transfers", "id, src, dst, amount", func(v []int64) {
		if _, dup := logged[v[0]]; dup {
			bad("transfer %d logged twice", v[0])
		}
		logged[v[0]] = [3]int64{v[1], v[2], v[3]}
	})
	want := map[int64]int64{}
	for id := range int64(nAccounts) {
		want[id] = balance
	}
	attempted := map[int64]transfer{}
	for _, tr := range ts {
		attempted[tr.id] = tr
		l, ok := logged[tr.id]
		switch {
		case tr.out == acked && !ok:
			bad("transfer %d (%d from %d to %d, begun %s) acknowledged to its client, not logged: rolled back",
				tr.id, tr.amount, tr.src, tr.dst, tr.at.Format("15:04:05.000"))
		case tr.out == failed && ok:
			bad("transfer %d (%d from %d to %d, begun %s): its client was told it was rolled back (%s), but it is logged",
				tr.id, tr.amount, tr.src, tr.dst, tr.at.Format("15:04:05.000"), tr.err)
		case ok && l != [3]int64{tr.src, tr.dst, tr.amount}:
			bad("transfer %d logged as %v, attempted as %d from %d to %d", tr.id, l, tr.amount, tr.src, tr.dst)
		}
	}
	for id, l := range logged {
		if _, ok := attempted[id]; !ok {
			bad("transfer %d logged (%v) but never attempted", id, l)
		}
		want[l[0]] -= l[2]
		want[l[1]] += l[2]
	}
	for id, w := range want {
		if bal[id] != w {
			bad("account %d has %d; its start and the transfers logged make %d", id, bal[id], w)
		}
	}

	// Postings: each next to its account, so on the account's node.
	posted := map[int64]map[int64]int64{} // tid -> account -> delta
	sums := map[int64]int64{}
	scanAll(t, nodes, "postings", "account, tid, delta", func(v []int64) {
		if posted[v[1]] == nil {
			posted[v[1]] = map[int64]int64{}
		}
		posted[v[1]][v[0]] = v[2]
		sums[v[0]] += v[2]
	})
	for id := range int64(nAccounts) {
		if bal[id] != balance+sums[id] {
			bad("account %d has %d; its start and its postings make %d", id, bal[id], balance+sums[id])
		}
	}
	for _, tr := range ts {
		_, log := logged[tr.id]
		p := posted[tr.id]
		_, src := p[tr.src]
		_, dst := p[tr.dst]
		if log != src || log != dst {
			bad("transfer %d (%d from %d to %d, begun %s) half committed: logged %v, posted on %d %v, on %d %v; its client was told %s (%s)",
				tr.id, tr.amount, tr.src, tr.dst, tr.at.Format("15:04:05.000"), log, tr.src, src, tr.dst, dst, tr.out, tr.err)
		}
	}
	for tid, p := range posted {
		if _, ok := attempted[tid]; !ok {
			bad("postings %v of transfer %d, never attempted", p, tid)
		}
	}

	rows := map[int64]int{}
	batchOf := map[int64]int64{}
	scanAll(t, nodes, "ledger", "id, batch", func(v []int64) {
		rows[v[0]]++
		batchOf[v[0]] = v[1]
	})
	written := map[int64]bool{}
	for _, w := range ls {
		present := 0
		for _, id := range w.ids {
			written[id] = true
			n := rows[id]
			switch {
			case w.out == acked && n != 1:
				bad("ledger row %d acknowledged, there %d times", id, n)
			case w.out == failed && n != 0:
				bad("ledger row %d: its client was told the INSERT failed with nothing changed, there %d times", id, n)
			case n > 1:
				bad("ledger row %d (outcome unknown to its client) there %d times", id, n)
			}
			if n > 0 {
				present++
				if batchOf[id] != w.ids[0] {
					bad("ledger row %d has batch %d, want %d", id, batchOf[id], w.ids[0])
				}
			}
		}
		if present != 0 && present != len(w.ids) {
			bad("ledger INSERT of %v (%s): %d of its %d rows there, not all or none", w.ids, w.out, present, len(w.ids))
		}
	}
	for id, n := range rows {
		if !written[id] {
			bad("ledger row %d there %d times but never written", id, n)
		}
	}
	t.Logf("checked: %d accounts (total %d), %d transfers attempted, %d logged; %d ledger INSERTs, %d rows there; %d violations",
		len(bal), total, len(ts), len(logged), len(ls), len(rows), violations)
}
