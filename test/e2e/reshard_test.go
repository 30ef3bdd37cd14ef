package e2e

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const reshardDB = "rs_e2e"

// reshardYAML shards rs_e2e.acct by hash of id over nodes with locations;
// node3 is the third backend. root is the admin.
func reshardYAML(addr, nodes, locations string) string {
	return fmt.Sprintf(`addr: %s
reshard_cutover_timeout: 400ms
admin_users: [root]
user_list:
  - user: ks
    password: ks
  - user: root
    password: rootpw
nodes:
  - name: node1
    user: ks
    password: ks
    master: 127.0.0.1:%d
    max_conns_limit: 32
  - name: node2
    user: ks
    password: ks
    master: 127.0.0.1:%d
    max_conns_limit: 32
  - name: node3
    user: ks
    password: ks
    master: 127.0.0.1:%d
    max_conns_limit: 32
schema_list:
  - user: ks
    nodes: [node1, node2, node3]
    default: node1
    transaction_mode: xa
    shard:
      - db: %s
        table: acct
        key: id
        nodes: [%s]
        type: hash
        locations: [%s]
`, addr, basePort, basePort+1, downPort, reshardDB, nodes, locations)
}

// reshardWorkload runs clients writing and reading acct through keyshard
// until stop: each logs what it did that was acknowledged, so that the
// final table can be checked against it.
type reshardWorkload struct {
	mu     sync.Mutex
	want   map[int64]int64 // id -> n, as the acknowledged writes leave it (-1: deleted)
	errs   []error
	ops    atomic.Int64
	maxLat atomic.Int64 // ns
}

// ackPair records a write of n to ids a and b (or its error).
func (w *reshardWorkload) ackPair(err error, a, b, n int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.errs = append(w.errs, err)
	} else {
		w.want[a], w.want[b] = n, n
	}
	w.ops.Add(1)
}

func (w *reshardWorkload) run(t *testing.T, db *sql.DB, clients int, stop <-chan struct{}, wg *sync.WaitGroup) {
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(c), 99))
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Each client owns 400 ids (spread over every sub-table):
				// its log is the truth for them.
				id := int64(c)*400 + int64(r.IntN(400)) + 1
				begin := time.Now()
				var err error
				var n int64 = -1
				// A second id of the client's, for writes over two rows
				// (mostly two nodes: XA, or a transaction over both).
				id2 := int64(c)*400 + int64(r.IntN(400)) + 1
				switch r.IntN(8) {
				case 6:
					if id2 == id {
						continue
					}
					n = int64(r.IntN(1000))
					_, err = db.Exec("REPLACE INTO acct (id, n, s) VALUES (?, ?, 'xa'), (?, ?, 'xa')", id, n, id2, n)
					w.ackPair(err, id, id2, n)
					continue
				case 7:
					if id2 == id {
						continue
					}
					n = int64(r.IntN(1000))
					err = func() error {
						tx, err := db.Begin()
						if err != nil {
							return err
						}
						for _, x := range []int64{id, id2} {
							if _, err := tx.Exec("REPLACE INTO acct (id, n, s) VALUES (?, ?, 'tx')", x, n); err != nil {
								_ = tx.Rollback()
								return err
							}
						}
						return tx.Commit()
					}()
					w.ackPair(err, id, id2, n)
					continue
				case 0, 1:
					n = int64(r.IntN(1000))
					_, err = db.Exec("REPLACE INTO acct (id, n, s) VALUES (?, ?, ?)", id, n, fmt.Sprint("s", n))
				case 2:
					n = int64(r.IntN(1000))
					var res sql.Result
					res, err = db.Exec("UPDATE acct SET n = ?, s = ? WHERE id = ?", n, fmt.Sprint("s", n), id)
					if err == nil {
						if k, _ := res.RowsAffected(); k == 0 {
							n = -2 // no row: unchanged
						}
					}
				case 3:
					_, err = db.Exec("DELETE FROM acct WHERE id = ?", id)
				default:
					// A read of the client's own row sees its last write.
					var got sql.NullInt64
					err = db.QueryRow("SELECT n FROM acct WHERE id = ?", id).Scan(&got)
					if err == sql.ErrNoRows {
						err, got.Int64 = nil, -1
					}
					if err == nil {
						w.mu.Lock()
						want, known := w.want[id]
						w.mu.Unlock()
						if known && want != got.Int64 {
							err = fmt.Errorf("read id %d: n %d, the last acknowledged write left %d", id, got.Int64, want)
						}
					}
					n = -2
				}
				if d := time.Since(begin).Nanoseconds(); d > w.maxLat.Load() {
					w.maxLat.Store(d)
				}
				w.mu.Lock()
				if err != nil {
					w.errs = append(w.errs, err)
				} else if n != -2 {
					w.want[id] = n
				}
				w.mu.Unlock()
				w.ops.Add(1)
			}
		}()
	}
}

// reshardCase is one online reshard of acct through keyshard.
type reshardCase struct {
	fromNodes, fromLoc, toNodes, toLoc string
	// place is the port and sub-table index the new rule gives id.
	place func(id int64) (port, sub int)
	subs  int // sub-tables of the new layout
	// during runs while the reshard runs (nil: nothing).
	during func(t *testing.T, app, root *sql.DB)
}

// runReshard loads acct, runs 8 clients writing and reading through
// keyshard, edits ks.yaml and runs ADMIN RESHARD START, waits for the
// switch and checks: no client error, every acknowledged write in the
// final table (read through keyshard), every row in the sub-table the new
// rule gives it. It returns the proxy, the admin connection and the final
// SHOW RESHARD STATUS columns.
func runReshard(t *testing.T, c reshardCase) (*testProxy, *sql.DB, map[string]string) {
	for _, port := range []int{basePort, basePort + 1, downPort} {
		d := direct(t, port, "")
		mustExec(t, d, "DROP DATABASE IF EXISTS "+reshardDB)
		mustExec(t, d, "CREATE DATABASE "+reshardDB)
	}
	p := startProxy(t, reshardYAML("%ADDR%", c.fromNodes, c.fromLoc))
	app := p.open(t, "ks:ks", reshardDB, "")
	app.SetMaxOpenConns(16)
	mustExec(t, app, "CREATE TABLE acct (id BIGINT PRIMARY KEY, n INT NOT NULL, s VARCHAR(20))")
	for i := 1; i <= 3200; i += 100 {
		var vals []string
		for id := i; id < i+100; id++ {
			vals = append(vals, fmt.Sprintf("(%d, %d, 's%d')", id, id, id))
		}
		mustExec(t, app, "INSERT INTO acct VALUES "+strings.Join(vals, ", "))
	}
	w := &reshardWorkload{want: map[int64]int64{}}
	for id := int64(1); id <= 3200; id++ {
		w.want[id] = id
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	w.run(t, app, 8, stop, &wg)
	stopped := false
	defer func() {
		if !stopped {
			close(stop)
			wg.Wait()
		}
	}()

	// The operator edits ks.yaml to the layout wanted; a reload refuses
	// it and names the way.
	root := p.open(t, "root:rootpw", "", "")
	if err := os.WriteFile(p.File, []byte(reshardYAML(p.Addr, c.toNodes, c.toLoc)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := root.Exec("admin reload")
	if err == nil || !strings.Contains(err.Error(), "ADMIN RESHARD START") {
		t.Fatalf("admin reload of a layout that moves rows: %v, want a refusal naming ADMIN RESHARD START", err)
	}
	if c.during != nil {
		c.during(t, app, root)
	}
	time.Sleep(200 * time.Millisecond)
	for _, line := range queryCol(t, root, "admin reshard start") {
		t.Log(line)
	}

	// Wait for the switch, with the workload running.
	var st map[string]string
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if st, err = reshardStatusOf(root); err != nil {
			t.Fatal(err)
		}
		if ph := st["phase"]; ph == "switched" || ph == "failed" || ph == "cancelled" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Some more traffic on the new layout.
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	stopped = true
	t.Logf("phase %s, copied %s, applied %s, cut-over tries %s, hold %s, %d statements, longest %s",
		st["phase"], st["rows_copied"], st["changes_applied"], st["cutover_tries"], st["last_hold"], w.ops.Load(), time.Duration(w.maxLat.Load()))
	if st["phase"] != "switched" {
		t.Fatalf("reshard ended %s: %s", st["phase"], st["error"])
	}
	if len(w.errs) > 0 {
		t.Fatalf("%d client errors during the reshard, first: %v", len(w.errs), w.errs[0])
	}

	// Through keyshard: the table is what the acknowledged writes say.
	got := map[int64]int64{}
	rs, err := app.Query("SELECT id, n FROM acct")
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		var id, n int64
		if err := rs.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		if _, dup := got[id]; dup {
			t.Fatalf("id %d twice through keyshard", id)
		}
		got[id] = n
	}
	rs.Close()
	bad := 0
	for id, n := range w.want {
		g, ok := got[id]
		if n == -1 && ok || n != -1 && (!ok || g != n) {
			if bad < 5 {
				t.Errorf("id %d: acknowledged n %d, table has %d (present %v)", id, n, g, ok)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d rows differ from the acknowledged writes", bad)
	}

	// On the backends: each row in the sub-table the new rule gives.
	total := 0
	for i := range c.subs {
		port := 0
		for id := int64(1); port == 0; id++ {
			if pt, sub := c.place(id); sub == i {
				port = pt
			}
		}
		ids := queryCol(t, direct(t, port, reshardDB), fmt.Sprintf("SELECT CAST(id AS CHAR) FROM acct_%04d", i))
		for _, s := range ids {
			var id int64
			fmt.Sscan(s, &id)
			if pt, sub := c.place(id); sub != i || pt != port {
				t.Fatalf("id %d in acct_%04d on port %d, the new rule puts it in acct_%04d on %d", id, i, port, sub, pt)
			}
		}
		total += len(ids)
	}
	if total != len(got) {
		t.Fatalf("%d rows in the new sub-tables, %d through keyshard", total, len(got))
	}
	return p, root, st
}

// reshardStatusOf is SHOW RESHARD STATUS's one row by column name.
func reshardStatusOf(root *sql.DB) (map[string]string, error) {
	cols := []string{"table", "phase", "rows_copied", "changes_applied", "started", "elapsed", "cutover_tries", "last_hold", "error", "plan"}
	vals := make([]string, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := root.QueryRow("SHOW RESHARD STATUS").Scan(ptrs...); err != nil {
		return nil, err
	}
	st := map[string]string{}
	for i, c := range cols {
		st[c] = vals[i]
	}
	return st, nil
}

// tablesLike lists the tables of rs_e2e on port whose names match like.
func tablesLike(t *testing.T, port int, like string) []string {
	return queryCol(t, direct(t, port, reshardDB), "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = '"+
		reshardDB+"' AND TABLE_NAME LIKE '"+like+"' ORDER BY 1")
}

// TestReshardOnlineSplit grows acct from 2 sub-tables per node on 2 nodes
// to 2 per node on 3 (hash [2,2] -> [2,2,2]: rows change sub-table).
func TestReshardOnlineSplit(t *testing.T) {
	ports := []int{basePort, basePort + 1, downPort}
	runReshard(t, reshardCase{
		fromNodes: "node1, node2", fromLoc: "2, 2", toNodes: "node1, node2, node3", toLoc: "2, 2, 2", subs: 6,
		place: func(id int64) (int, int) { return ports[id%6/2], int(id % 6) },
	})
	// The old sub-tables whose names stayed on their node are kept aside.
	if got := tablesLike(t, basePort, "acct%ksold"); len(got) != 2 {
		t.Fatalf("old sub-tables kept on node1: %v; want acct_0000__ksold, acct_0001__ksold", got)
	}
}

// TestReshardOnlineMove moves whole sub-tables onto a new node (hash
// [2,2] on 2 nodes -> [1,2,1] on 3: every key keeps its sub-table, two
// sub-tables change node), with a transaction held open on the table at
// the cut-over (which waits for it, past reshard_cutover_timeout, so it
// is tried again), then ADMIN RESHARD COMPLETE drops the old copies.
func TestReshardOnlineMove(t *testing.T) {
	ports := map[int]int{0: basePort, 1: basePort + 1, 2: basePort + 1, 3: downPort}
	var tx *sql.Tx
	_, root, st := runReshard(t, reshardCase{
		fromNodes: "node1, node2", fromLoc: "2, 2", toNodes: "node1, node2, node3", toLoc: "1, 2, 1", subs: 4,
		place: func(id int64) (int, int) { return ports[int(id%4)], int(id % 4) },
		during: func(t *testing.T, app, root *sql.DB) {
			var err error
			if tx, err = app.Begin(); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec("UPDATE acct SET n = n WHERE id = 100000"); err != nil {
				t.Fatal(err)
			}
			// Open across the first cut-overs (400 ms each), then
			// committed: the cut-over waits, gives up, tries again.
			go func() {
				defer tx.Commit()
				for range 600 {
					if st, err := reshardStatusOf(root); err == nil && st["cutover_tries"] >= "2" {
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}()
		},
	})
	if tries, _ := strconv.Atoi(st["cutover_tries"]); tries < 2 {
		t.Fatalf("cut-over tries %s with a transaction open past reshard_cutover_timeout; want several", st["cutover_tries"])
	}
	// No shadows in a move; the moved sub-tables' old copies remain
	// until COMPLETE.
	if got := tablesLike(t, basePort, "acct%"); !slices.Equal(got, []string{"acct_0000", "acct_0001"}) {
		t.Fatalf("node1 before COMPLETE: %v", got)
	}
	dropped := queryCol(t, root, "admin reshard complete")
	if !slices.Equal(dropped, []string{"node1:rs_e2e.acct_0001", "node2:rs_e2e.acct_0003"}) {
		t.Fatalf("COMPLETE dropped %v", dropped)
	}
	for port, want := range map[int][]string{basePort: {"acct_0000"}, basePort + 1: {"acct_0001", "acct_0002"}, downPort: {"acct_0003"}} {
		if got := tablesLike(t, port, "acct%"); !slices.Equal(got, want) {
			t.Fatalf("port %d after COMPLETE: %v, want %v", port, got, want)
		}
	}
}
