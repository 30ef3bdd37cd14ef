package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	gomysql "github.com/go-sql-driver/mysql"
	"github.com/keyshard/keyshard/backend"
)

// The fault suite: a server of the replication group (rwMaster, rwRepA,
// rwRepB) is killed (SIGKILL) or frozen (SIGSTOP) under a mixed load of
// reads (text, prepared, a statement kept prepared, a fan-out, a merge, a
// prepared fan-out) and writes; clients vanish in the middle of big
// results. Each scenario logs one summary line (statements, failures, the
// slowest, hangs, recovery times) and checks:
//
//   - no read fails while a replica or the master goes: a read that has
//     sent the client nothing is retried elsewhere;
//   - a write that fails gets a MySQL error naming the node, and every
//     write that was acknowledged is there afterwards;
//   - no statement waits longer than faultHang;
//   - the backend serves again once it is back, and the time it takes.
//
// The backends are restored (SIGCONT, restarted, replicating) even when a
// check fails.

const (
	faultSilence = 500 * time.Millisecond // the proxy's backend_silence
	faultConnect = time.Second            // its connect_timeout
	// faultHang: a statement slower than this counts as a hang. Generous:
	// the worst expected wait is backend_silence + connect_timeout, twice
	// (a frozen replica, then a retry that meets the other one's
	// health check), on a loaded two-core machine.
	faultHang = 6 * time.Second
)

// faultYAML is node1 over the replication group with fault_s hash-sharded
// over four of its sub-tables, the given backend_silence and
// connect_timeout, and read-your-writes off (a read goes to a replica
// whatever the session wrote).
func faultYAML(silence, connect time.Duration) string {
	return fmt.Sprintf(`
addr: %%ADDR%%
health_check_interval: 200ms
health_check_timeout: 500ms
backend_silence: %s
connect_timeout: %s
pool_wait_timeout: 3s
read_your_writes: off
user_list:
  - user: ks
    password: ks
nodes:
  - name: node1
    user: ks
    password: ks
    master: 127.0.0.1:%d
    slave: 127.0.0.1:%d@1,127.0.0.1:%d@1
    max_conns_limit: 64
schema_list:
  - user: ks
    nodes: [node1]
    default: node1
    shard:
      - db: ks_test
        table: fault_s
        key: id
        nodes: [node1]
        type: hash
        locations: [4]
`, silence, connect, rwMaster, rwRepA, rwRepB)
}

// faultGroup starts the replication group and a proxy over it (see
// faultYAML), with the suite's tables replicated: fault_t (ids 1-8, v =
// id) and fault_s (ids 1-64 over its four sub-tables).
func faultGroup(t *testing.T, silence, connect time.Duration) (*testProxy, *sql.DB) {
	t.Helper()
	replicationGroup(t)
	p := startProxy(t, faultYAML(silence, connect))
	db := p.open(t, "ks:ks", "ks_test", "")
	db.SetMaxIdleConns(32)
	mustExec(t, db, "DROP TABLE IF EXISTS fault_t")
	mustExec(t, db, "CREATE TABLE fault_t (id INT PRIMARY KEY AUTO_INCREMENT, v INT NOT NULL)")
	mustExec(t, db, "INSERT INTO fault_t (v) VALUES (1), (2), (3), (4), (5), (6), (7), (8)")
	mustExec(t, db, "DROP TABLE IF EXISTS fault_s")
	mustExec(t, db, "CREATE TABLE fault_s (id INT PRIMARY KEY, v INT NOT NULL)")
	var vals []string
	for i := 1; i <= 64; i++ {
		vals = append(vals, fmt.Sprintf("(%d, %d)", i, i))
	}
	mustExec(t, db, "INSERT INTO fault_s (id, v) VALUES "+strings.Join(vals, ", "))
	syncReplicas(t)
	return p, db
}

// instancePid reads the mariadbd pid of the instance at port from its pid
// file (no client round trip: the instance may be frozen).
func instancePid(t *testing.T, port int) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(os.Getenv("KS_BACKENDS_DIR"), strconv.Itoa(port), "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// restoreInstance makes sure the instance at port runs (SIGCONT, started
// again if gone) and, for a replica, replicates: every fault test's
// cleanup, so that a failed check leaves the group whole.
func restoreInstance(t *testing.T, port int) {
	t.Helper()
	if pid, err := os.ReadFile(filepath.Join(os.Getenv("KS_BACKENDS_DIR"), strconv.Itoa(port), "pid")); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(pid))); err == nil {
			_ = syscall.Kill(n, syscall.SIGCONT)
		}
	}
	if out, err := backends("start", strconv.Itoa(port)); err != nil {
		t.Errorf("restart %d: %v\n%s", port, err, out)
		return
	}
	if port != rwMaster {
		startSlave(t, port)
	}
}

// faultLoad runs reads and writes through the proxy until stopped,
// counting what failed and what took longer than faultHang.
type faultLoad struct {
	db   *sql.DB
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup

	reads, readErrs, writes, writeErrs, hangs atomic.Int64
	slowest                                   atomic.Int64 // nanoseconds

	mu       sync.Mutex
	readErr  map[string]int // failed reads by kind and message
	readKind map[string]int // failed reads by kind
	writeErr map[string]int
	errnos   map[uint16]int // failed writes by MySQL errno (0: none)
	unclear  []string       // write errors that are no MySQL error naming the node
	acked    []int64        // ids of acknowledged inserts
}

// faultReads are the kinds of read the load runs, one per reader in turn.
var faultReads = []string{"text", "prepared", "kept prepared", "fan-out", "merge", "prepared fan-out"}

// startFaultLoad starts readers readers (of every kind in turn) and
// writers writers on db.
func startFaultLoad(t *testing.T, db *sql.DB, readers, writers int) *faultLoad {
	t.Helper()
	l := &faultLoad{db: db, stop: make(chan struct{}), readErr: map[string]int{}, readKind: map[string]int{}, writeErr: map[string]int{},
		errnos: map[uint16]int{}}
	kept, err := db.Prepare("SELECT v FROM fault_t WHERE id = ?")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.finish() // a check failed before the test stopped it
		kept.Close()
	})
	for i := range readers {
		kind := i % len(faultReads)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for n := 0; !l.stopped(); n++ {
				start := time.Now()
				err := faultRead(db, kept, kind, n)
				l.took(start)
				l.reads.Add(1)
				if err != nil {
					l.readErrs.Add(1)
					l.note(l.readErr, faultReads[kind]+": "+faultMsg(err))
					l.note(l.readKind, faultReads[kind])
				}
			}
		}()
	}
	for range writers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for n := 0; !l.stopped(); n++ {
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				r, err := db.ExecContext(ctx, "INSERT INTO fault_t (v) VALUES (?)", 1000+n)
				cancel()
				l.took(start)
				l.writes.Add(1)
				if err != nil {
					l.writeErrs.Add(1)
					l.note(l.writeErr, faultMsg(err))
					var me *gomysql.MySQLError
					errors.As(err, &me)
					l.mu.Lock()
					if me != nil {
						l.errnos[me.Number]++
					} else {
						l.errnos[0]++
					}
					l.mu.Unlock()
					if !clearNodeError(err) {
						l.mu.Lock()
						l.unclear = append(l.unclear, err.Error())
						l.mu.Unlock()
					}
					time.Sleep(10 * time.Millisecond) // the master is gone: no busy loop
					continue
				}
				id, _ := r.LastInsertId()
				l.mu.Lock()
				l.acked = append(l.acked, id)
				l.mu.Unlock()
			}
		}()
	}
	return l
}

func (l *faultLoad) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

func (l *faultLoad) took(start time.Time) {
	d := time.Since(start)
	if d > faultHang {
		l.hangs.Add(1)
	}
	for {
		cur := l.slowest.Load()
		if int64(d) <= cur || l.slowest.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

func (l *faultLoad) note(m map[string]int, msg string) {
	l.mu.Lock()
	m[msg]++
	l.mu.Unlock()
}

// finish stops the load and waits for it (once; again is a no-op).
func (l *faultLoad) finish() {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// faultMsg is err's message without what changes from one error to the
// next (local ports, durations), so that alike errors count together.
func faultMsg(err error) string {
	s := localPort.ReplaceAllString(err.Error(), "$1")
	return duration.ReplaceAllString(s, "<d>")
}

var (
	localPort = regexp.MustCompile(`127\.0\.0\.1:\d+(->)`)
	duration  = regexp.MustCompile(`\b\d+(\.\d+)?(ms|s|µs)\b`)
)

// faultErrors lists the messages of m with their counts (at most 8).
func faultErrors(m map[string]int) string {
	var b strings.Builder
	i := 0
	for msg, n := range m {
		if i == 8 {
			fmt.Fprintf(&b, "\n  ... and %d other messages", len(m)-8)
			break
		}
		fmt.Fprintf(&b, "\n  %d x %s", n, msg)
		i++
	}
	return b.String()
}

// summary is the load's part of a scenario's summary line: failed reads
// by kind, failed writes by errno.
func (l *faultLoad) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	by := func(m map[string]int) string {
		var parts []string
		for k, n := range m {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
		if len(parts) == 0 {
			return ""
		}
		sort.Strings(parts)
		return " (" + strings.Join(parts, ", ") + ")"
	}
	errnos := map[string]int{}
	for no, n := range l.errnos {
		errnos[strconv.Itoa(int(no))] = n
	}
	return fmt.Sprintf("%d reads, %d failed%s; %d writes, %d failed%s; slowest %v, %d over %v",
		l.reads.Load(), l.readErrs.Load(), by(l.readKind), l.writes.Load(), l.writeErrs.Load(), by(errnos),
		time.Duration(l.slowest.Load()).Round(time.Millisecond), l.hangs.Load(), faultHang)
}

// check asserts what holds in every scenario: no read failed, no
// statement hung, every write error is clear; and at least minReads reads
// ran. p's pools' counters are shown with a failure.
func (l *faultLoad) check(t *testing.T, p *testProxy, minReads int64) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.readErrs.Load(); n != 0 {
		var pools strings.Builder
		for _, pool := range p.Srv.Nodes()["node1"].Pools() {
			fmt.Fprintf(&pools, "\n  %s %v: %+v", pool.Addr(), pool.Health(), pool.Stats())
		}
		t.Errorf("%d of %d reads failed:%s\npools:%s", n, l.reads.Load(), faultErrors(l.readErr), pools.String())
	}
	if n := l.hangs.Load(); n != 0 {
		t.Errorf("%d statements took longer than %v (slowest %v)", n, faultHang, time.Duration(l.slowest.Load()))
	}
	if len(l.unclear) > 0 {
		t.Errorf("%d write errors do not name node1 in a MySQL error, e.g. %s", len(l.unclear), l.unclear[0])
	}
	if l.reads.Load() < minReads {
		t.Errorf("only %d reads ran, want at least %d", l.reads.Load(), minReads)
	}
}

// checkAcked checks that every acknowledged insert is on the master.
func (l *faultLoad) checkAcked(t *testing.T) (acked, lost int) {
	t.Helper()
	l.mu.Lock()
	ids := append([]int64(nil), l.acked...)
	l.mu.Unlock()
	have := map[int64]bool{}
	rows, err := direct(t, rwMaster, "ks_test").Query("SELECT id FROM fault_t")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		have[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if !have[id] {
			lost++
		}
	}
	if lost != 0 {
		t.Errorf("%d of %d acknowledged inserts are missing", lost, len(ids))
	}
	return len(ids), lost
}

// faultRead runs one read of the given kind (see faultReads) and checks
// its answer.
func faultRead(db *sql.DB, kept *sql.Stmt, kind, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	one := func(row *sql.Row, want int) error {
		var v int
		if err := row.Scan(&v); err != nil {
			return err
		}
		if v != want {
			return fmt.Errorf("got %d, want %d", v, want)
		}
		return nil
	}
	ids := func(want []int, q string, args ...any) error {
		rows, err := db.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		var got []int
		for rows.Next() {
			var id int
			if err := rows.Scan(&id); err != nil {
				return err
			}
			got = append(got, id)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("got ids %v, want %v", got, want)
		}
		return nil
	}
	id := 1 + n%8
	switch faultReads[kind] {
	case "text":
		return one(db.QueryRowContext(ctx, "SELECT v FROM fault_t WHERE id = "+strconv.Itoa(id)), id)
	case "prepared":
		return one(db.QueryRowContext(ctx, "SELECT v FROM fault_t WHERE id = ?", id), id)
	case "kept prepared":
		return one(kept.QueryRowContext(ctx, id), id)
	case "fan-out":
		// Rows in sub-table order: the ids by id % 4 (hash), then by key.
		return ids([]int{4, 8, 1, 5, 2, 6, 3, 7}, "SELECT id FROM fault_s WHERE id IN (1, 2, 3, 4, 5, 6, 7, 8)")
	case "merge":
		return ids([]int{64, 63, 62}, "SELECT id FROM fault_s ORDER BY id DESC LIMIT 3")
	default:
		return ids([]int{4, 1, 2, 3}, "SELECT id FROM fault_s WHERE id IN (?, ?, ?, ?)", 1, 2, 3, 4)
	}
}

// clearNodeError reports whether err is a MySQL error that names node1,
// as a write that fails with its master gone must get.
func clearNodeError(err error) bool {
	var me *gomysql.MySQLError
	return errors.As(err, &me) && me.Number != 0 && strings.Contains(me.Message, "node node1")
}

// faultPool is the pool of node1's backend at port.
func faultPool(t *testing.T, p *testProxy, port int) *backend.Pool {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for _, pool := range p.Srv.Nodes()["node1"].Pools() {
		if pool.Addr() == addr {
			return pool
		}
	}
	t.Fatalf("node1 has no backend %s", addr)
	return nil
}

// waitServes waits until the pool is up and runs statements again (its
// statement count grows while the load runs), and returns how long that
// took from since.
func waitServes(t *testing.T, pool *backend.Pool, since time.Time) time.Duration {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for pool.Health() != backend.Up {
		if time.Now().After(deadline) {
			t.Fatalf("%s still %v 20 s after it came back (%s)", pool.Addr(), pool.Health(), pool.LastCheckError())
		}
		time.Sleep(10 * time.Millisecond)
	}
	n := pool.Statements().Snapshot().Count
	for pool.Statements().Snapshot().Count == n {
		if time.Now().After(deadline) {
			t.Fatalf("%s is up but runs no statement 20 s after it came back", pool.Addr())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(since)
}

// waitDown waits until the pool is marked down and returns how long that
// took from since.
func waitDown(t *testing.T, pool *backend.Pool, since time.Time) time.Duration {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for pool.Health() != backend.Down {
		if time.Now().After(deadline) {
			t.Fatalf("%s not marked down 10 s after it went", pool.Addr())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(since)
}

// A replica killed under load: no read fails (each is retried on the other
// replica or the master), writes go on; restarted, it serves reads again.
func TestFaultReplicaKilled(t *testing.T) {
	p, db := faultGroup(t, faultSilence, faultConnect)
	t.Cleanup(func() { restoreInstance(t, rwRepA) })
	pool := faultPool(t, p, rwRepA)
	load := startFaultLoad(t, db, 12, 2)
	time.Sleep(time.Second)
	killed := time.Now()
	if err := killPid(instancePid(t, rwRepA)); err != nil {
		t.Fatal(err)
	}
	down := waitDown(t, pool, killed)
	time.Sleep(time.Second)
	if out, err := backends("start", strconv.Itoa(rwRepA)); err != nil {
		load.finish()
		t.Fatalf("restart: %v\n%s", err, out)
	}
	back := time.Now()
	startSlave(t, rwRepA)
	again := waitServes(t, pool, back)
	load.finish()
	t.Logf("kill -9 replica: %s; marked down after %v; reads from it again %v after it accepted connections (%v after the kill)",
		load.summary(), down.Round(time.Millisecond), again.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	load.check(t, p, 200)
	if n := load.writeErrs.Load(); n != 0 {
		t.Errorf("%d writes failed with only a replica gone:%s", n, faultErrors(load.writeErr))
	}
	load.checkAcked(t)
}

// A replica frozen (SIGSTOP) for longer than backend_silence: reads go on
// elsewhere, none hangs; thawed, it serves again.
func TestFaultReplicaFrozen(t *testing.T) {
	p, db := faultGroup(t, faultSilence, faultConnect)
	t.Cleanup(func() { restoreInstance(t, rwRepB) })
	pool := faultPool(t, p, rwRepB)
	pid := instancePid(t, rwRepB)
	load := startFaultLoad(t, db, 12, 2)
	time.Sleep(time.Second)
	frozen := time.Now()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	down := waitDown(t, pool, frozen)
	time.Sleep(4*faultSilence + time.Second)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	thawed := time.Now()
	again := waitServes(t, pool, thawed)
	load.finish()
	t.Logf("SIGSTOP replica for %v: %s; marked down after %v; reads from it again %v after SIGCONT",
		thawed.Sub(frozen).Round(time.Millisecond), load.summary(), down.Round(time.Millisecond), again.Round(time.Millisecond))
	load.check(t, p, 200)
	if n := load.writeErrs.Load(); n != 0 {
		t.Errorf("%d writes failed with only a replica frozen:%s", n, faultErrors(load.writeErr))
	}
	load.checkAcked(t)
}

// The master killed under load: reads go on (replicas), writes fail with a
// clear error naming the node and never hang; no acknowledged insert is
// lost; a client's connection outlives the master's restart.
func TestFaultMasterKilled(t *testing.T) {
	p, db := faultGroup(t, faultSilence, faultConnect)
	t.Cleanup(func() { restoreInstance(t, rwMaster) })
	pool := faultPool(t, p, rwMaster)
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mustExecConn(t, conn, "INSERT INTO fault_t (v) VALUES (-1)")
	load := startFaultLoad(t, db, 12, 2)
	time.Sleep(time.Second)
	killed := time.Now()
	if err := killPid(instancePid(t, rwMaster)); err != nil {
		t.Fatal(err)
	}
	down := waitDown(t, pool, killed)
	// The client's own connection, the master gone: a clear error, fast.
	start := time.Now()
	_, err = conn.ExecContext(context.Background(), "INSERT INTO fault_t (v) VALUES (-2)")
	if took := time.Since(start); !clearNodeError(err) || took > faultHang {
		t.Errorf("a write with the master down: %v after %v, want a MySQL error naming node1", err, took)
	}
	time.Sleep(500 * time.Millisecond)
	if out, err := backends("start", strconv.Itoa(rwMaster)); err != nil {
		load.finish()
		t.Fatalf("restart: %v\n%s", err, out)
	}
	back := time.Now()
	// The same client connection writes again once the master is back.
	var firstWrite time.Duration
	for {
		_, err := conn.ExecContext(context.Background(), "INSERT INTO fault_t (v) VALUES (-3)")
		if err == nil {
			firstWrite = time.Since(back)
			break
		}
		if !clearNodeError(err) {
			t.Fatalf("the client's connection after the master's restart: %v", err)
		}
		if time.Since(back) > 20*time.Second {
			t.Fatalf("writes still fail 20 s after the master came back: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	again := waitServes(t, pool, back)
	load.finish()
	acked, lost := load.checkAcked(t)
	t.Logf("kill -9 master: %s; %d acknowledged inserts, %d lost; marked down after %v; the client's connection writes again %v after the master accepted connections, the pool serves after %v",
		load.summary(), acked, lost, down.Round(time.Millisecond), firstWrite.Round(time.Millisecond), again.Round(time.Millisecond))
	load.check(t, p, 200)
	if load.writeErrs.Load() == 0 {
		t.Errorf("no write failed while the master was down: the test did not test")
	}
	for _, port := range []int{rwRepA, rwRepB} {
		startSlave(t, port)
	}
	syncReplicas(t)
}

// The master frozen (SIGSTOP): writes fail within about backend_silence +
// connect_timeout, reads go on; thawed, writes work again.
func TestFaultMasterFrozen(t *testing.T) {
	p, db := faultGroup(t, faultSilence, faultConnect)
	t.Cleanup(func() { restoreInstance(t, rwMaster) })
	pool := faultPool(t, p, rwMaster)
	pid := instancePid(t, rwMaster)
	load := startFaultLoad(t, db, 12, 2)
	time.Sleep(time.Second)
	frozen := time.Now()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// One write of the test's own, sent after the freeze.
	start := time.Now()
	_, err := db.Exec("INSERT INTO fault_t (v) VALUES (-4)")
	failed := time.Since(start)
	down := waitDown(t, pool, frozen)
	time.Sleep(time.Second)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	thawed := time.Now()
	again := waitServes(t, pool, thawed)
	load.finish()
	acked, lost := load.checkAcked(t)
	t.Logf("SIGSTOP master for %v: %s; %d acknowledged inserts, %d lost; a write failed after %v; marked down after %v; serves again %v after SIGCONT",
		thawed.Sub(frozen).Round(time.Millisecond), load.summary(), acked, lost, failed.Round(time.Millisecond),
		down.Round(time.Millisecond), again.Round(time.Millisecond))
	if !clearNodeError(err) {
		t.Errorf("a write to the frozen master: %v, want a MySQL error naming node1", err)
	}
	if bound := faultSilence + faultConnect + 2*time.Second; failed > bound {
		t.Errorf("a write to the frozen master failed after %v, want within about backend_silence + connect_timeout (%v)", failed, bound)
	}
	load.check(t, p, 200)
}

// Clients that read part of a big result and drop their TCP connection
// (a replica's, the master's in a transaction, a prepared one's): the
// pools' connections in use, the process's open files (other than the
// pools' connections) and goroutines come back to where they were.
// (TestLargeResultAndClientGoneMidResult does it one client at a time on
// a plain node.)
func TestFaultClientsGoneMidResult(t *testing.T) {
	p, db := faultGroup(t, 5*time.Second, 3*time.Second) // the defaults: no server fails here
	pools := p.Srv.Nodes()["node1"].Pools()
	// inUse: the pools' connections in use; files: the open files but the
	// pools' connections, which the pools keep for the next statements.
	state := func() (inUse int64, files, goroutines int) {
		var conns int64
		for _, pool := range pools {
			st := pool.Stats()
			inUse += st.InUse
			conns += st.Open
		}
		return inUse, openFiles(t) - int(conns), runtime.NumGoroutine()
	}
	// Warm: the pools' connections, the client side's goroutines.
	load := startFaultLoad(t, db, 6, 0)
	time.Sleep(300 * time.Millisecond)
	load.finish()
	load.check(t, p, 10)
	db.SetMaxIdleConns(0)
	time.Sleep(300 * time.Millisecond) // the sessions of the closed connections end
	_, files0, gor0 := state()
	const clients = 16
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := client.Connect(p.Addr, "ks", "ks", "ks_test")
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			const q = "SELECT seq, REPEAT('y', 100) FROM seq_1_to_200000"
			rows := 0
			stopAt := func([]mysql.FieldValue) error {
				if rows++; rows == 1000*(1+i) {
					return errors.New("gone")
				}
				return nil
			}
			switch i % 3 {
			case 0: // a replica's
				err = c.ExecuteSelectStreaming(q, &mysql.Result{}, stopAt, nil)
			case 1: // the master's, inside a transaction
				if _, err := c.Execute("BEGIN"); err != nil {
					errs <- err
					return
				}
				err = c.ExecuteSelectStreaming(q, &mysql.Result{}, stopAt, nil)
			case 2: // prepared (binary rows)
				st, perr := c.Prepare(q + " WHERE seq > ?")
				if perr != nil {
					errs <- perr
					return
				}
				err = st.ExecuteSelectStreaming(&mysql.Result{}, stopAt, nil, 0)
			}
			if err == nil || err.Error() != "gone" {
				errs <- fmt.Errorf("client %d: %v, want to stop after %d rows", i, err, 1000*(1+i))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	left := time.Now()
	var inUse int64
	var files, gor int
	for deadline := left.Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		inUse, files, gor = state()
		if inUse == 0 && files <= files0 && gor <= gor0 || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("%d clients gone mid-result: back after %v to %d pool connections in use, %d open files besides the pools' (before %d), %d goroutines (before %d)",
		clients, time.Since(left).Round(time.Millisecond), inUse, files, files0, gor, gor0)
	if inUse != 0 || files > files0 || gor > gor0 {
		t.Errorf("not back to the baseline 15 s after the clients left")
	}
	// And the proxy serves as before.
	load = startFaultLoad(t, db, 6, 1)
	time.Sleep(time.Second)
	load.finish()
	load.check(t, p, 10)
}

// openFiles counts the process's open file descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
