package e2e

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
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
				// Each client owns the ids = c mod clients: its log is the
				// truth for them.
				id := int64(r.IntN(400))*int64(clients) + int64(c) + 1
				begin := time.Now()
				var err error
				var n int64 = -1
				switch r.IntN(6) {
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

// TestReshardOnline grows acct from 2 sub-tables per node on 2 nodes to a
// split over 3 nodes (hash [2,2] -> [2,2,2]: rows change sub-table), with
// 8 clients writing and reading through keyshard the whole time: no client
// error, every acknowledged write is in the final table, every row is
// where the new rule puts it, and the old sub-tables are kept aside.
func TestReshardOnline(t *testing.T) {
	for _, port := range []int{basePort, basePort + 1, downPort} {
		d := direct(t, port, "")
		mustExec(t, d, "DROP DATABASE IF EXISTS "+reshardDB)
		mustExec(t, d, "CREATE DATABASE "+reshardDB)
	}
	p := startProxy(t, reshardYAML("%ADDR%", "node1, node2", "2, 2"))
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

	// The operator edits ks.yaml to the layout wanted; a reload refuses
	// it and names the way.
	root := p.open(t, "root:rootpw", "", "")
	if err := os.WriteFile(p.File, []byte(reshardYAML(p.Addr, "node1, node2, node3", "2, 2, 2")), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := root.Exec("admin reload")
	if err == nil || !strings.Contains(err.Error(), "ADMIN RESHARD START") {
		t.Fatalf("admin reload of a layout that moves rows: %v, want a refusal naming ADMIN RESHARD START", err)
	}
	time.Sleep(200 * time.Millisecond)
	rows, err := root.Query("admin reshard start")
	if err != nil {
		close(stop)
		wg.Wait()
		t.Fatal(err)
	}
	for rows.Next() {
		var line string
		_ = rows.Scan(&line)
		t.Log(line)
	}
	rows.Close()

	// Wait for the switch, with the workload running.
	deadline := time.Now().Add(2 * time.Minute)
	var phase, copied, applied, tries, held, msg string
	for time.Now().Before(deadline) {
		var table, started, elapsed, plan string
		if err := root.QueryRow("SHOW RESHARD STATUS").Scan(&table, &phase, &copied, &applied, &started, &elapsed, &tries, &held, &msg, &plan); err != nil {
			t.Fatal(err)
		}
		if phase == "switched" || phase == "failed" || phase == "cancelled" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Some more traffic on the new layout.
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("phase %s, copied %s, applied %s, cut-over tries %s, hold %s, %d statements, longest %s",
		phase, copied, applied, tries, held, w.ops.Load(), time.Duration(w.maxLat.Load()))
	if phase != "switched" {
		t.Fatalf("reshard ended %s: %s", phase, msg)
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

	// On the backends: each row in the sub-table the new rule gives
	// (hash of id over 6: sub-tables 0-1 node1, 2-3 node2, 4-5 node3),
	// the old sub-tables 0 and 1 (their names stayed on node1) kept as
	// __ksold.
	total := 0
	for i := range 6 {
		port := []int{basePort, basePort + 1, downPort}[i/2]
		ids := queryCol(t, direct(t, port, reshardDB), fmt.Sprintf("SELECT CAST(id AS CHAR) FROM acct_%04d", i))
		for _, s := range ids {
			var id int64
			fmt.Sscan(s, &id)
			if id%6 != int64(i) {
				t.Fatalf("id %d in acct_%04d, the new rule puts it in acct_%04d", id, i, id%6)
			}
		}
		total += len(ids)
	}
	if total != len(got) {
		t.Fatalf("%d rows in the new sub-tables, %d through keyshard", total, len(got))
	}
	var n int
	if err := direct(t, basePort, reshardDB).QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME LIKE 'acct%ksold'", reshardDB).Scan(&n); err != nil || n != 2 {
		t.Fatalf("old sub-tables kept on node1: %d, %v; want 2", n, err)
	}
}
