package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
)

// The replication group of these tests: a master and two replicas of it
// (real MariaDB replication, GTID), started once by scripts/backends.sh.
var (
	rwMaster = basePort + 4
	rwRepA   = basePort + 5
	rwRepB   = basePort + 6
)

var rwOnce struct {
	sync.Once
	err error
}

// replicationGroup starts the group (once per test binary) and gives the
// table rw_t a known content, replicated.
func replicationGroup(t *testing.T) {
	t.Helper()
	rwOnce.Do(func() {
		if out, err := backends("up", "1", fmt.Sprint(rwMaster)); err != nil {
			rwOnce.err = fmt.Errorf("master: %v\n%s", err, out)
			return
		}
		for _, p := range []int{rwRepA, rwRepB} {
			if out, err := backends("replica", fmt.Sprint(rwMaster), fmt.Sprint(p)); err != nil {
				rwOnce.err = fmt.Errorf("replica %d: %v\n%s", p, err, out)
				return
			}
		}
	})
	if rwOnce.err != nil {
		t.Fatal(rwOnce.err)
	}
	m := direct(t, rwMaster, "ks_test")
	mustExec(t, m, "DROP TABLE IF EXISTS rw_t")
	mustExec(t, m, "CREATE TABLE rw_t (id INT PRIMARY KEY AUTO_INCREMENT, v INT NOT NULL)")
	mustExec(t, m, "INSERT INTO rw_t (v) VALUES (1), (2), (3)")
	for _, p := range []int{rwRepA, rwRepB} {
		startSlave(t, p)
	}
	syncReplicas(t)
}

// startSlave makes sure both replication threads of the replica at port
// run, with no delay.
func startSlave(t *testing.T, port int) {
	t.Helper()
	r := direct(t, port, "")
	mustExec(t, r, "STOP SLAVE")
	mustExec(t, r, "CHANGE MASTER TO MASTER_DELAY = 0")
	mustExec(t, r, "START SLAVE")
}

// syncReplicas waits until both replicas applied everything the master
// has binlogged.
func syncReplicas(t *testing.T) {
	t.Helper()
	var pos string
	if err := direct(t, rwMaster, "").QueryRow("SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{rwRepA, rwRepB} {
		var res sql.NullInt64
		if err := direct(t, p, "").QueryRow("SELECT MASTER_GTID_WAIT(?, 30)", pos).Scan(&res); err != nil || res.Int64 != 0 {
			t.Fatalf("replica %d did not reach %s: %v %v", p, pos, res, err)
		}
	}
}

func rwYAML(weights [2]int, extra string) string {
	return fmt.Sprintf(`
addr: %%ADDR%%
health_check_interval: 200ms
health_check_timeout: 500ms
%s
user_list:
  - user: ks
    password: ks
nodes:
  - name: node1
    user: ks
    password: ks
    master: 127.0.0.1:%d
    slave: 127.0.0.1:%d@%d,127.0.0.1:%d@%d
    max_conns_limit: 32
schema_list:
  - user: ks
    nodes: [node1]
    default: node1
    shard:
      -
`, extra, rwMaster, rwRepA, weights[0], rwRepB, weights[1])
}

// globalStatus reads one of the server's global counters.
func globalStatus(t *testing.T, port int, name string) int64 {
	t.Helper()
	var k, v string
	if err := direct(t, port, "").QueryRow("SHOW GLOBAL STATUS LIKE '"+name+"'").Scan(&k, &v); err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// counters reads name on the master and both replicas.
func counters(t *testing.T, name string) [3]int64 {
	return [3]int64{globalStatus(t, rwMaster, name), globalStatus(t, rwRepA, name), globalStatus(t, rwRepB, name)}
}

func delta(a, b [3]int64) [3]int64 { return [3]int64{b[0] - a[0], b[1] - a[1], b[2] - a[2]} }

func TestRWSplitRoutesReadsAndWrites(t *testing.T) {
	replicationGroup(t)
	p := startProxy(t, rwYAML([2]int{1, 1}, "read_your_writes: off"))
	db := p.open(t, "ks:ks", "ks_test", "")
	db.SetMaxOpenConns(1)
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM rw_t").Scan(&n); err != nil || n != 3 {
		t.Fatalf("count through keyshard: %d %v", n, err)
	}

	sel0 := counters(t, "Com_select")
	for range 200 {
		if err := db.QueryRow("SELECT v FROM rw_t WHERE id = 1").Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	d := delta(sel0, counters(t, "Com_select"))
	if d[0] != 0 || d[1]+d[2] != 200 || d[1] == 0 || d[2] == 0 {
		t.Errorf("200 reads: Com_select deltas master/replicaA/replicaB = %v, want 0 on the master, 200 over both replicas", d)
	}

	// Prepared reads (the driver prepares a statement with arguments)
	// split too.
	ex0 := counters(t, "Com_stmt_execute")
	for i := range 100 {
		if err := db.QueryRow("SELECT v FROM rw_t WHERE id = ?", 1+i%3).Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	if d := delta(ex0, counters(t, "Com_stmt_execute")); d[0] != 0 || d[1]+d[2] != 100 || d[1] == 0 || d[2] == 0 {
		t.Errorf("100 prepared reads: Com_stmt_execute deltas = %v, want 0 on the master, 100 over both replicas", d)
	}

	ins0 := counters(t, "Com_insert")
	for i := range 50 {
		mustExec(t, db, "INSERT INTO rw_t (v) VALUES (?)", 100+i)
	}
	// The replicas count the replicated inserts too: all 50 on the
	// master means none was sent to a replica.
	if d := delta(ins0, counters(t, "Com_insert")); d[0] != 50 {
		t.Errorf("50 inserts: Com_insert deltas = %v, want 50 on the master", d)
	}

	// Reads that must see the master: in a transaction, locking reads,
	// sequence and lock functions, the /*master*/ hint.
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sel0 = counters(t, "Com_select")
	mustExecConn(t, conn, "BEGIN")
	for _, q := range []string{"SELECT v FROM rw_t WHERE id = 1", "SELECT v FROM rw_t WHERE id = 1 FOR UPDATE"} {
		if err := conn.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	mustExecConn(t, conn, "COMMIT")
	for _, q := range []string{
		"SELECT v FROM rw_t WHERE id = 1 FOR UPDATE",
		"SELECT v FROM rw_t WHERE id = 1 LOCK IN SHARE MODE",
		"/*master*/ SELECT v FROM rw_t WHERE id = 1",
		"SELECT RELEASE_LOCK('rw_none') IS NULL",
	} {
		if err := conn.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if d := delta(sel0, counters(t, "Com_select")); d != [3]int64{6, 0, 0} {
		t.Errorf("6 master-only reads: Com_select deltas = %v, want [6 0 0]", d)
	}

	// rw_split: false on the schema keeps every read on the master.
	off := startProxy(t, strings.Replace(rwYAML([2]int{1, 1}, ""), "    default: node1\n", "    default: node1\n    rw_split: false\n", 1))
	odb := off.open(t, "ks:ks", "ks_test", "")
	sel0 = counters(t, "Com_select")
	for range 20 {
		if err := odb.QueryRow("SELECT v FROM rw_t WHERE id = 1").Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	if d := delta(sel0, counters(t, "Com_select")); d != [3]int64{20, 0, 0} {
		t.Errorf("rw_split false: Com_select deltas = %v, want [20 0 0]", d)
	}
}

// readLoad runs reads from workers goroutines until stop closes, counting
// successes and errors (the errors after errsFrom is set, separately).
type readLoad struct {
	ok, errs, lateErrs atomic.Int64
	late               atomic.Bool
	firstErr           atomic.Pointer[string]
	wg                 sync.WaitGroup
	stop               chan struct{}
}

func startReads(t *testing.T, db *sql.DB, workers int, query string) *readLoad {
	l := &readLoad{stop: make(chan struct{})}
	for range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				var v int
				if err := db.QueryRow(query).Scan(&v); err != nil {
					l.errs.Add(1)
					if l.late.Load() {
						l.lateErrs.Add(1)
					}
					s := err.Error()
					l.firstErr.CompareAndSwap(nil, &s)
					continue
				}
				l.ok.Add(1)
			}
		}()
	}
	return l
}

func (l *readLoad) finish() {
	close(l.stop)
	l.wg.Wait()
}

func (l *readLoad) firstError() string {
	if s := l.firstErr.Load(); s != nil {
		return *s
	}
	return ""
}

func TestRWSplitWeightedSpread(t *testing.T) {
	replicationGroup(t)
	p := startProxy(t, rwYAML([2]int{1, 3}, ""))
	db := p.open(t, "ks:ks", "ks_test", "")
	// One read at a time: with none in flight the balancer's first,
	// weighted draw decides, so the spread is the weights'. (Under
	// concurrency it also weighs the reads in flight, by design.)
	db.SetMaxOpenConns(1)
	sel0 := counters(t, "Com_select")
	for range 10000 {
		var v int
		if err := db.QueryRow("SELECT v FROM rw_t WHERE id = 2").Scan(&v); err != nil {
			t.Fatal(err)
		}
	}
	d := delta(sel0, counters(t, "Com_select"))
	if d[0] != 0 || d[1]+d[2] != 10000 {
		t.Fatalf("10000 reads: Com_select deltas %v", d)
	}
	share := float64(d[2]) / 10000
	t.Logf("weights 1:3: replica A %d, replica B %d reads (%.3f)", d[1], d[2], share)
	if share < 0.70 || share > 0.80 {
		t.Errorf("weight-3 replica served %.3f of 10000 reads, want 0.75 +- 0.05", share)
	}
}

// A replica that stops answering (a table lock held on it) draws fewer
// reads: its statements stay in flight, and the balancer prefers the
// replica with fewer in flight.
func TestRWSplitSlowReplicaGetsLess(t *testing.T) {
	replicationGroup(t)
	p := startProxy(t, rwYAML([2]int{1, 1}, ""))
	db := p.open(t, "ks:ks", "ks_test", "")
	db.SetMaxIdleConns(8)
	lock, err := direct(t, rwRepA, "ks_test").Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	sel0 := counters(t, "Com_select")
	load := startReads(t, db, 8, "SELECT v FROM rw_t WHERE id = 3")
	// Replica A freezes for 300 ms of every 400 ms over 3 seconds.
	for range 8 {
		mustExecConn(t, lock, "LOCK TABLES rw_t WRITE")
		time.Sleep(300 * time.Millisecond)
		mustExecConn(t, lock, "UNLOCK TABLES")
		time.Sleep(100 * time.Millisecond)
	}
	load.finish()
	d := delta(sel0, counters(t, "Com_select"))
	t.Logf("slow replica A: %d reads, replica B: %d reads, %d errors", d[1], d[2], load.errs.Load())
	if load.errs.Load() != 0 {
		t.Errorf("%d read errors: %s", load.errs.Load(), load.firstError())
	}
	if d[2] < 4*d[1] {
		t.Errorf("slow replica A served %d reads, B %d: want A well under B (at most a quarter)", d[1], d[2])
	}
}

func TestReadYourWrites(t *testing.T) {
	replicationGroup(t)
	// Both replicas stop applying: whatever a session writes now is only
	// on the master.
	for _, port := range []int{rwRepA, rwRepB} {
		mustExec(t, direct(t, port, ""), "STOP SLAVE SQL_THREAD")
		t.Cleanup(func() { startSlave(t, port) })
	}
	p := startProxy(t, rwYAML([2]int{1, 1}, "read_your_writes: master\nread_your_writes_window: 500ms"))
	db := p.open(t, "ks:ks", "ks_test", "")
	db.SetMaxOpenConns(1)
	for i := range 1000 {
		r := mustExec(t, db, "INSERT INTO rw_t (v) VALUES (?)", 1000+i)
		id, _ := r.LastInsertId()
		var v int
		if err := db.QueryRow("SELECT v FROM rw_t WHERE id = ?", id).Scan(&v); err != nil || v != 1000+i {
			t.Fatalf("try %d: read after write: v=%d err=%v", i, v, err)
		}
	}
	// The test means something: past the window the session reads a
	// replica again, which has not seen the rows.
	time.Sleep(600 * time.Millisecond)
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM rw_t").Scan(&n); err != nil || n != 3 {
		t.Fatalf("past the window: count %d (%v), want the stale replica's 3", n, err)
	}
}

// pidOf returns the mariadbd pid of the instance at port.
func pidOf(t *testing.T, port int) int {
	t.Helper()
	out, err := backends("status")
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == strconv.Itoa(port) {
			pid, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("no pid for %d in %q", port, line)
			}
			return pid
		}
	}
	t.Fatalf("no instance %d in\n%s", port, out)
	return 0
}

func TestReplicaKilledUnderLoad(t *testing.T) {
	replicationGroup(t)
	p := startProxy(t, rwYAML([2]int{1, 1}, ""))
	db := p.open(t, "ks:ks", "ks_test", "")
	db.SetMaxIdleConns(8)
	load := startReads(t, db, 8, "SELECT v FROM rw_t WHERE id = 1")
	time.Sleep(300 * time.Millisecond)
	if err := killPid(pidOf(t, rwRepA)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // one health interval
	load.late.Store(true)
	waitGauge(t, p, "keyshard_backend_state", rwRepA, 1) // down
	time.Sleep(time.Second)
	load.finish()
	t.Logf("replica A killed: %d reads ok, %d errors (%d after one health interval)", load.ok.Load(), load.errs.Load(), load.lateErrs.Load())
	if load.errs.Load() != 0 {
		t.Errorf("%d client errors (%d after one health interval): %s", load.errs.Load(), load.lateErrs.Load(), load.firstError())
	}

	// It rejoins once it is back.
	if out, err := backends("start", strconv.Itoa(rwRepA)); err != nil {
		t.Fatalf("restart: %v\n%s", err, out)
	}
	startSlave(t, rwRepA)
	syncReplicas(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		sel0 := globalStatus(t, rwRepA, "Com_select")
		for range 50 {
			var v int
			if err := db.QueryRow("SELECT v FROM rw_t WHERE id = 1").Scan(&v); err != nil {
				t.Fatal(err)
			}
		}
		if globalStatus(t, rwRepA, "Com_select") > sel0 {
			if s := backendGauge(t, p, "keyshard_backend_state", rwRepA); s != 0 {
				t.Errorf("replica A serves reads in state %v", s)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("restarted replica A gets no reads after 10 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestMasterDownReadsGoOn(t *testing.T) {
	replicationGroup(t)
	p := startProxy(t, rwYAML([2]int{1, 1}, "read_your_writes: off"))
	db := p.open(t, "ks:ks", "ks_test", "")
	if out, err := backends("stop", strconv.Itoa(rwMaster)); err != nil {
		t.Fatalf("stop master: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := backends("start", strconv.Itoa(rwMaster)); err != nil {
			t.Errorf("restart master: %v\n%s", err, out)
		}
	})
	time.Sleep(600 * time.Millisecond) // the checker marks it down
	start := time.Now()
	_, err := db.Exec("INSERT INTO rw_t (v) VALUES (7)")
	took := time.Since(start)
	var me *gomysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1429 || !strings.Contains(me.Message, "node node1 (127.0.0.1:"+strconv.Itoa(rwMaster)+"): master is down") {
		t.Fatalf("write with the master down: %v", err)
	}
	if took > time.Second {
		t.Errorf("write failed after %v, want fast", took)
	}
	for i := range 100 {
		var v int
		if err := db.QueryRow("SELECT v FROM rw_t WHERE id = 1").Scan(&v); err != nil {
			t.Fatalf("read with the master down: %v", err)
		}
		// Prepared too: prepared and executed on a replica.
		if err := db.QueryRow("SELECT v FROM rw_t WHERE id = ?", 1+i%3).Scan(&v); err != nil {
			t.Fatalf("prepared read with the master down: %v", err)
		}
	}
	// Back up: writes work again.
	if out, err := backends("start", strconv.Itoa(rwMaster)); err != nil {
		t.Fatalf("restart master: %v\n%s", err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := db.Exec("INSERT INTO rw_t (v) VALUES (8)")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes still fail 10 s after the master came back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func killPid(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// backendGauge reads a keyshard_backend_* gauge of the backend at port.
func backendGauge(t *testing.T, p *testProxy, name string, port int) float64 {
	t.Helper()
	mfs, err := p.Srv.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "addr" && l.GetValue() == addr {
					if m.GetGauge() != nil {
						return m.GetGauge().GetValue()
					}
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s for %s", name, addr)
	return 0
}

// waitGauge waits until the gauge reads want.
func waitGauge(t *testing.T, p *testProxy, name string, port int, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for backendGauge(t, p, name, port) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s of %d = %v, want %v", name, port, backendGauge(t, p, name, port), want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestLaggingReplicaSkipped(t *testing.T) {
	replicationGroup(t)
	p := startProxy(t, rwYAML([2]int{1, 1}, "max_replication_lag: 5\nread_your_writes: off"))
	db := p.open(t, "ks:ks", "ks_test", "")
	waitGauge(t, p, "keyshard_backend_replication_lag_seconds", rwRepA, 0)
	waitGauge(t, p, "keyshard_backend_state", rwRepA, 0)
	// Replica A stops applying: its lag is unknown (NULL), so it is
	// treated as lagging and gets no reads.
	mustExec(t, direct(t, rwRepA, ""), "STOP SLAVE SQL_THREAD")
	t.Cleanup(func() { startSlave(t, rwRepA) })
	waitGauge(t, p, "keyshard_backend_state", rwRepA, 2)
	if lag := backendGauge(t, p, "keyshard_backend_replication_lag_seconds", rwRepA); lag != -1 {
		t.Errorf("lag of a stopped replica = %v, want -1", lag)
	}
	sel0 := counters(t, "Com_select")
	for range 100 {
		var v int
		if err := db.QueryRow("SELECT v FROM rw_t WHERE id = 1").Scan(&v); err != nil {
			t.Fatal(err)
		}
	}
	if d := delta(sel0, counters(t, "Com_select")); d != [3]int64{0, 0, 100} {
		t.Errorf("reads with replica A lagging: Com_select deltas = %v, want [0 0 100]", d)
	}
	if n := backendGauge(t, p, "keyshard_backend_statements_total", rwRepB); n < 100 {
		t.Errorf("keyshard_backend_statements_total of replica B = %v, want >= 100", n)
	}
	// Caught up: back in rotation.
	startSlave(t, rwRepA)
	waitGauge(t, p, "keyshard_backend_state", rwRepA, 0)
}

// admin node: a slave taken down gets no reads and comes back when put
// up; a deleted slave gets none, an added one gets its share; a master
// taken down refuses writes at once while reads go on. The client's
// session is the same connection throughout.
func TestAdminNodeControl(t *testing.T) {
	replicationGroup(t)
	p := startProxy(t, rwYAML([2]int{1, 1}, "read_your_writes: off\nadmin_users: [ks]\nweb_user: admin\nweb_password: webpw"))
	db := p.open(t, "ks:ks", "ks_test", "")
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	id := connID(t, conn)
	repA, repB := fmt.Sprintf("127.0.0.1:%d", rwRepA), fmt.Sprintf("127.0.0.1:%d", rwRepB)
	admin := func(q string) {
		t.Helper()
		if _, err := conn.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	reads := func() [3]int64 {
		t.Helper()
		before := counters(t, "Com_select")
		for range 200 {
			var v int
			if err := conn.QueryRowContext(context.Background(), "SELECT v FROM rw_t WHERE id = 1").Scan(&v); err != nil {
				t.Fatal(err)
			}
		}
		return delta(before, counters(t, "Com_select"))
	}
	backendRow := func(addr string) []string {
		t.Helper()
		for _, r := range queryRows(t, conn, "SHOW BACKENDS") {
			if r[1] == addr {
				return r
			}
		}
		return nil
	}
	if d := reads(); d[0] != 0 || d[1] == 0 || d[2] == 0 {
		t.Fatalf("reads before any change (master, A, B): %v", d)
	}

	admin(fmt.Sprintf("admin node(opt,node,k,v) values('down','node1','slave','%s')", repA))
	if r := backendRow(repA); r == nil || r[3] != "down (admin)" {
		t.Errorf("SHOW BACKENDS row of A after down: %v", r)
	}
	if d := reads(); d[0] != 0 || d[1] != 0 || d[2] != 200 {
		t.Errorf("reads with A down (master, A, B): %v, want [0 0 200]", d)
	}
	admin(fmt.Sprintf("admin node(opt,node,k,v) values('up','node1','slave','%s')", repA))
	if d := reads(); d[1] == 0 || d[2] == 0 {
		t.Errorf("reads after A up (master, A, B): %v", d)
	}

	admin(fmt.Sprintf("admin node(opt,node,k,v) values('del','node1','slave','%s')", repB))
	if r := backendRow(repB); r != nil {
		t.Errorf("B still listed after del: %v", r)
	}
	if d := reads(); d[0] != 0 || d[1] != 200 || d[2] != 0 {
		t.Errorf("reads with B deleted (master, A, B): %v, want [0 200 0]", d)
	}
	admin(fmt.Sprintf("admin node(opt,node,k,v) values('add','node1','slave','%s@3')", repB))
	if r := backendRow(repB); r == nil || r[8] != "3" {
		t.Errorf("B after add with weight 3: %v", r)
	}
	if d := reads(); d[2] < 100 {
		t.Errorf("reads after B added back with weight 3 (master, A, B): %v", d)
	}

	// The same through REST: delete A, add it back.
	if code := rest(t, p, "DELETE", "/api/v1/nodes/slaves", `{"node":"node1","addr":"`+repA+`"}`, true, nil); code != 200 {
		t.Fatalf("REST delete slave: %d", code)
	}
	if d := reads(); d[1] != 0 {
		t.Errorf("reads with A deleted via REST (master, A, B): %v", d)
	}
	if code := rest(t, p, "POST", "/api/v1/nodes/slaves", `{"node":"node1","addr":"`+repA+`"}`, true, nil); code != 200 {
		t.Fatalf("REST add slave: %d", code)
	}
	var nodes []map[string]any
	rest(t, p, "GET", "/api/v1/nodes/status", "", true, &nodes)
	if len(nodes) != 3 {
		t.Errorf("nodes/status after REST add: %v", nodes)
	}

	master := fmt.Sprintf("127.0.0.1:%d", rwMaster)
	admin(fmt.Sprintf("admin node(opt,node,k,v) values('down','node1','master','%s')", master))
	start := time.Now()
	_, err = conn.ExecContext(context.Background(), "INSERT INTO rw_t (v) VALUES (7)")
	wantCode(t, "write with the master down", err, 1429, "node node1 ("+master+"): master is down (taken down by an admin command)")
	if d := time.Since(start); d > time.Second {
		t.Errorf("the write took %v to fail", d)
	}
	if d := reads(); d[0] != 0 || d[1]+d[2] != 200 {
		t.Errorf("reads with the master down (master, A, B): %v", d)
	}
	admin(fmt.Sprintf("admin node(opt,node,k,v) values('up','node1','master','%s')", master))
	if _, err := conn.ExecContext(context.Background(), "INSERT INTO rw_t (v) VALUES (7)"); err != nil {
		t.Fatalf("write after the master is up: %v", err)
	}
	if got := connID(t, conn); got != id {
		t.Fatalf("connection id %d, was %d: the session was replaced", got, id)
	}
}
