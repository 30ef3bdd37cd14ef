package reshard_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/binlog"
	"github.com/keyshard/keyshard/proxy/reshard"
	"github.com/keyshard/keyshard/router"
	"github.com/keyshard/keyshard/router/shard"
	"github.com/keyshard/keyshard/test/testenv"
)

// Four throwaway MariaDB servers (scripts/backends.sh) on KS_RESHARD_PORT
// (default 30507) and the next three: nodes n1..n4.
var (
	port = testenv.Port("KS_RESHARD_PORT", 30507)
	dir  = fmt.Sprintf("/tmp/keyshard-reshard-%d", port)
)

func TestMain(m *testing.M) {
	if err := testenv.Up(dir, 4, port); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	testenv.Down(dir)
	os.Exit(code)
}

func nodePort(node string) int {
	var n int
	fmt.Sscanf(node, "n%d", &n)
	return port + n - 1
}

// nodes reaches n1..n4 as keyshard's own account would.
type nodes struct{}

func (nodes) Dial(ctx context.Context, node string) (*backend.Conn, error) {
	p := backend.NewPool(node, fmt.Sprintf("127.0.0.1:%d", nodePort(node)), backend.Options{User: "ks", Password: "ks", MaxConns: 100})
	return p.Dial(ctx)
}

func (nodes) Close() {}

func (nodes) Binlog(node string) (binlog.Config, error) {
	return binlog.Config{Host: "127.0.0.1", Port: uint16(nodePort(node)), User: "ks", Password: "ks", ServerID: uint32(9000 + nodePort(node))}, nil
}

var dbs sync.Map // node -> *sql.DB

func direct(t *testing.T, node string) *sql.DB {
	if d, ok := dbs.Load(node); ok {
		return d.(*sql.DB)
	}
	d, err := sql.Open("mysql", fmt.Sprintf("ks:ks@tcp(127.0.0.1:%d)/", nodePort(node)))
	if err != nil {
		t.Fatal(err)
	}
	d.SetMaxOpenConns(20)
	dbs.Store(node, d)
	return d
}

func mustExec(t *testing.T, d *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := d.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func rule(t *testing.T, db, table string, nodeNames []string, cfg shard.Config) *router.TableRule {
	t.Helper()
	cfg.Nodes = len(nodeNames)
	s, err := router.NewSchema(router.SchemaConfig{Default: nodeNames[0], Nodes: nodeNames, Tables: []router.TableConfig{
		{DB: db, Table: table, Key: "id", Nodes: nodeNames, Shard: cfg},
	}}, 16)
	if err != nil {
		t.Fatal(err)
	}
	return s.Table(db, table)
}

const tableDef = "(id BIGINT PRIMARY KEY, v VARCHAR(40) CHARACTER SET latin1, b VARBINARY(8), d DECIMAL(12,3), f FLOAT, w DOUBLE, dt DATETIME(3), n INT)"

// layout is one rule's physical tables.
type layout struct {
	t    *testing.T
	db   string
	rule *router.TableRule
}

func (l layout) place(id int64) (node, name string) {
	i, err := l.rule.Rule.Find(id)
	if err != nil {
		l.t.Fatal(err)
	}
	return l.rule.NodeOf(i), l.rule.SubTableName(i)
}

// write applies one random operation to the old layout as keyshard would
// route it: inserts, updates of other columns, deletes, and key changes
// (a delete and an insert elsewhere).
func (l layout) write(r *rand.Rand, maxID int64) error {
	id := r.Int64N(maxID) + 1
	node, name := l.place(id)
	d := direct(l.t, node)
	tbl := l.db + "." + name
	switch r.IntN(5) {
	case 0, 1:
		_, err := d.Exec("INSERT INTO "+tbl+" VALUES (?, ?, ?, ?, ?, ?, NOW(3), ?) ON DUPLICATE KEY UPDATE n = n + 1",
			id, fmt.Sprintf("v'%d\\é", r.IntN(100)), []byte{0, byte(r.IntN(256)), '\''}, float64(r.IntN(100000))/1000, r.Float32(), r.Float64(), r.IntN(1000))
		return err
	case 2:
		_, err := d.Exec("UPDATE "+tbl+" SET n = n + 1, v = CONCAT(v, 'x'), f = ? WHERE id = ?", r.Float32(), id)
		return err
	case 3:
		_, err := d.Exec("DELETE FROM "+tbl+" WHERE id = ?", id)
		return err
	default:
		// The key changes: the row moves between sub-tables.
		to := id + maxID
		tnode, tname := l.place(to)
		if _, err := direct(l.t, tnode).Exec("INSERT IGNORE INTO "+l.db+"."+tname+" (id, v, n) VALUES (?, 'moved', 1)", to); err != nil {
			return err
		}
		_, err := d.Exec("DELETE FROM "+tbl+" WHERE id = ?", id)
		return err
	}
}

// rows reads every row of the given physical tables: id -> its values.
func rows(t *testing.T, places [][2]string, db string) map[string]string {
	t.Helper()
	out := map[string]string{}
	seen := map[string][2]string{}
	for _, pl := range places {
		rs, err := direct(t, pl[0]).Query("SELECT id, HEX(v), HEX(b), d, CAST(f AS DOUBLE), w, dt, n FROM " + db + "." + pl[1])
		if err != nil {
			t.Fatal(err)
		}
		for rs.Next() {
			var vals [8]sql.NullString
			ptrs := make([]any, 8)
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rs.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for _, v := range vals[1:] {
				if v.Valid {
					b.WriteString(v.String)
				} else {
					b.WriteString("NULL")
				}
				b.WriteByte('|')
			}
			if prev, dup := seen[vals[0].String]; dup {
				t.Fatalf("row %s twice: in %v and in %v", vals[0].String, prev, pl)
			}
			seen[vals[0].String] = pl
			out[vals[0].String+"@"+pl[0]+"."+pl[1]] = b.String()
		}
		rs.Close()
	}
	return out
}

func runMove(t *testing.T, db string, oldRule, newRule *router.TableRule, wantSplit bool) {
	ctx := context.Background()
	for n := 1; n <= 4; n++ {
		d := direct(t, fmt.Sprintf("n%d", n))
		mustExec(t, d, "DROP DATABASE IF EXISTS "+db)
		mustExec(t, d, "CREATE DATABASE "+db)
	}
	old := layout{t, db, oldRule}
	for i := range oldRule.Rule.Tables() {
		mustExec(t, direct(t, oldRule.NodeOf(i)), "CREATE TABLE "+db+"."+oldRule.SubTableName(i)+" "+tableDef)
	}
	const maxID = 2000
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		if err := old.write(r, maxID); err != nil {
			t.Fatal(err)
		}
	}

	plan, err := reshard.PlanTable(oldRule, newRule)
	if err != nil || plan == nil {
		t.Fatalf("PlanTable: %v, %v", plan, err)
	}
	if plan.Split != wantSplit {
		t.Fatalf("Split = %v, want %v: %s", plan.Split, wantSplit, plan.Describe())
	}
	t.Log(plan.Describe())
	cp, err := reshard.NewCopier(ctx, nodes{}, []*reshard.TablePlan{plan}, 97)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	if err := cp.Create(ctx); err != nil {
		t.Fatal(err)
	}

	// Writers run through the copy and a while after it.
	stop := writers(t, old, maxID, 1)
	err = cp.Copy(ctx)
	time.Sleep(300 * time.Millisecond)
	stop()
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	copied, applied := cp.Progress()
	t.Logf("copied %d rows, applied %d changes", copied, applied)
	if copied == 0 || applied == 0 {
		t.Fatalf("copied %d, applied %d: the test did not copy under writes", copied, applied)
	}

	// Every row of the old layout is where the new rule puts it, equal,
	// and nothing else is there.
	var oldPlaces, newPlaces [][2]string
	for i := range oldRule.Rule.Tables() {
		oldPlaces = append(oldPlaces, [2]string{oldRule.NodeOf(i), oldRule.SubTableName(i)})
	}
	for _, tg := range plan.Targets {
		newPlaces = append(newPlaces, [2]string{tg.Node, tg.Name})
	}
	want := map[string]string{}
	for k, v := range rows(t, oldPlaces, db) {
		id, _, _ := strings.Cut(k, "@")
		var n int64
		fmt.Sscan(id, &n)
		j, err := newRule.Rule.Find(n)
		if err != nil {
			t.Fatal(err)
		}
		tg := plan.Targets[j]
		want[id+"@"+tg.Node+"."+tg.Name] = v
	}
	got := rows(t, newPlaces, db)
	var diffs []string
	for k, v := range want {
		if got[k] != v {
			diffs = append(diffs, fmt.Sprintf("%s: want %s, got %q", k, v, got[k]))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: not in the old layout, got %s", k, v))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Fatalf("%d rows differ (of %d), first: %s", len(diffs), len(want), strings.Join(diffs[:min(len(diffs), 5)], "\n"))
	}
	if len(want) < 500 {
		t.Fatalf("only %d rows: the test is too small to mean anything", len(want))
	}

	// Verify finds nothing while writes go on...
	stop = writers(t, old, maxID, 2)
	diffs2, err := cp.Verify(ctx)
	stop()
	if err != nil || len(diffs2) > 0 {
		t.Fatalf("Verify under writes: %v, %v", diffs2, err)
	}
	// ...and names a row changed behind its back (after the writers'
	// last changes are applied: they could change it back).
	if err := cp.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	var tg *reshard.Target
	for i := range plan.Targets {
		if !plan.Targets[i].Kept {
			tg = &plan.Targets[i]
			break
		}
	}
	mustExec(t, direct(t, tg.Node), "UPDATE "+db+"."+tg.Name+" SET n = -1 ORDER BY id LIMIT 1")
	diffs2, err = cp.Verify(ctx)
	if err != nil || len(diffs2) != 1 || diffs2[0].Count != 1 || !strings.Contains(diffs2[0].String(), tg.Place.String()) ||
		!strings.Contains(diffs2[0].String(), `"-1"`) {
		t.Fatalf("Verify after changing a row of %v: %v, %v", tg.Place, diffs2, err)
	}
	t.Log(diffs2[0])
}

// writers starts 4 goroutines writing to the old layout until the
// returned stop is called (which fails the test on a writer's error).
func writers(t *testing.T, old layout, maxID int64, seed uint64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var werr sync.Map
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), seed))
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := old.write(r, maxID); err != nil {
					werr.Store(w, err)
					return
				}
			}
		}()
	}
	return func() {
		close(done)
		wg.Wait()
		werr.Range(func(k, v any) bool { t.Fatalf("writer %v: %v", k, v); return false })
	}
}

// Whole sub-tables move from 2 nodes to 4 (hash [2,2] -> [1,1,1,1]).
func TestCopyWholeSubTables(t *testing.T) {
	oldRule := rule(t, "rsw", "acct", []string{"n1", "n2"}, shard.Config{Type: shard.TypeHash, Locations: []int{2, 2}})
	newRule := rule(t, "rsw", "acct", []string{"n1", "n2", "n3", "n4"}, shard.Config{Type: shard.TypeHash, Locations: []int{1, 1, 1, 1}})
	runMove(t, "rsw", oldRule, newRule, false)
}

// Rows change sub-table (hash [2,2] -> [4,4] on the same 2 nodes): every
// sub-table is rebuilt, the old names as shadows.
func TestCopySplit(t *testing.T) {
	oldRule := rule(t, "rss", "acct", []string{"n1", "n2"}, shard.Config{Type: shard.TypeHash, Locations: []int{2, 2}})
	newRule := rule(t, "rss", "acct", []string{"n1", "n2"}, shard.Config{Type: shard.TypeHash, Locations: []int{4, 4}})
	runMove(t, "rss", oldRule, newRule, true)
}
