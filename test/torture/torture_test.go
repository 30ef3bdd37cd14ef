package torture

import (
	"database/sql"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

const (
	nClients  = 16
	nAccounts = 40
	balance   = 1000
	db        = "ks_torture"
)

// configYAML is the shared config: accounts, transfers and ledger
// hash-sharded on id over the three nodes (two sub-tables each); node1
// keeps the XA decisions. Recovery runs every 2 s and rolls back an
// undecided branch of a live instance after 6 s.
func configYAML() string {
	var nodes strings.Builder
	for i := range nBackend {
		fmt.Fprintf(&nodes, `  - name: node%d
    user: ks
    password: ks
    master: 127.0.0.1:%d
    max_conns_limit: 64
`, i+1, backendPort(i))
	}
	var rules strings.Builder
	for _, table := range []string{"accounts", "transfers", "ledger", "postings"} {
		key := "id"
		if table == "postings" {
			key = "account" // next to the account
		}
		fmt.Fprintf(&rules, `      - db: %s
        table: %s
        key: %s
        nodes: [node1, node2, node3]
        type: hash
        locations: [2, 2, 2]
`, db, table, key)
	}
	return fmt.Sprintf(`addr: 127.0.0.1:%d
log_level: info
user_list:
  - user: ks
    password: ks
nodes:
%sschema_list:
  - user: ks
    nodes: [node1, node2, node3]
    default: node1
    shard:
%sxa_recover_interval: 2s
xa_prepared_timeout: 6s
`, ksPorts[0], nodes.String(), rules.String())
}

// openKS is a handle on keyshard at addr that keeps no idle connection
// (a client's connection is never handed to another).
func openKS(t *testing.T, addr string) *sql.DB {
	t.Helper()
	h, err := sql.Open("mysql", fmt.Sprintf("ks:ks@tcp(%s)/%s?timeout=2s&readTimeout=8s&writeTimeout=8s&innodb_lock_wait_timeout=2", addr, db))
	if err != nil {
		t.Fatal(err)
	}
	h.SetMaxIdleConns(0)
	t.Cleanup(func() { h.Close() })
	return h
}

// openNode is a direct handle on backend i.
func openNode(t *testing.T, i int, database string) *sql.DB {
	t.Helper()
	h, err := sql.Open("mysql", fmt.Sprintf("ks:ks@tcp(127.0.0.1:%d)/%s?timeout=2s&readTimeout=10s", backendPort(i), database))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func TestTorture(t *testing.T) {
	_ = mysql.SetLogger(log.New(io.Discard, "", 0)) // the driver's note of each lost connection
	s := *seed
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Logf("seed %d (-torture.seed), storm %s (-torture.time), race %v", s, *stormTime, raceBuild)
	work := t.TempDir()
	if keep := os.Getenv("TORTURE_DIR"); keep != "" { // keyshard's logs kept for a look afterwards
		work = keep
		_ = os.MkdirAll(work, 0o755)
	}
	bin := buildKeyshard(t, work)

	// Fresh databases; nothing prepared left by an earlier run.
	for i := range nBackend {
		n := openNode(t, i, "")
		for _, q := range []string{"DROP DATABASE IF EXISTS " + db, "CREATE DATABASE " + db} {
			if _, err := n.Exec(q); err != nil {
				t.Fatalf("node%d: %s: %v", i+1, q, err)
			}
		}
		if left := prepared(t, n); len(left) > 0 {
			t.Logf("node%d: rolling back %d branches prepared by an earlier run", i+1, len(left))
			for _, x := range left {
				_, _ = n.Exec("XA ROLLBACK " + x)
			}
		}
	}

	// The shared config in etcd; keyshard A on it.
	if out, err := script("etcd.sh", "up", fmt.Sprint(etcdPort)); err != nil {
		t.Fatalf("etcd.sh up: %v\n%s", err, out)
	}
	cfgFile := filepath.Join(work, "ks.yaml")
	if err := os.WriteFile(cfgFile, []byte(configYAML()), 0o644); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("etcd://127.0.0.1:%d/torture-%d", etcdPort, time.Now().UnixNano())
	if out, err := runBin(bin, "config", "push", cfgFile, url); err != nil {
		t.Fatalf("keyshard config push: %v\n%s", err, out)
	}
	rng := rand.New(rand.NewPCG(uint64(s), 1))
	var ks [2]*keyshard
	for i, name := range []string{"ks-a", "ks-b"} {
		ks[i] = &keyshard{name: name, addr: fmt.Sprintf("127.0.0.1:%d", ksPorts[i]), bin: bin, url: url,
			logPath: filepath.Join(work, name+".log"), rng: rand.New(rand.NewPCG(uint64(s), uint64(10+i)))}
	}
	ks[0].start(t)
	defer ks[0].stop()
	defer ks[1].stop()
	dbs := [2]*sql.DB{openKS(t, ks[0].addr), openKS(t, ks[1].addr)}
	setup(t, dbs[0])

	// The clients: on A, or on A or B while B serves too.
	var bServes atomic.Bool
	pick := func(r *rand.Rand) *sql.DB {
		if bServes.Load() && r.IntN(2) == 1 {
			return dbs[1]
		}
		return dbs[0]
	}
	st := &stats{errs: map[string]int{}, first: map[string]string{}, counts: map[string]int{}}
	clients := make([]*client, nClients)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range clients {
		clients[i] = &client{n: i, rng: rand.New(rand.NewPCG(uint64(s), uint64(100+i))), pick: pick, stats: st}
		wg.Add(1)
		go func() { defer wg.Done(); clients[i].run(stop) }()
	}

	// The storm: B joins for its middle half.
	faults, err := os.Create(filepath.Join(work, "faults.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer faults.Close()
	ctl := &controller{rng: rng, ks: ks[:1], kills: map[string]int{}, log: faults}
	for _, k := range ks {
		k.failpoints.Store(true)
	}
	t0 := time.Now()
	ctl.storm(t, t0.Add(*stormTime/4))
	ks[1].start(t)
	bServes.Store(true)
	ctl.setKS(ks[:])
	ctl.storm(t, t0.Add(*stormTime*3/4))
	ctl.setKS(ks[:1])
	bServes.Store(false)
	ctl.wait()
	ks[1].stop()
	ctl.storm(t, t0.Add(*stormTime))
	ctl.wait()
	close(stop)
	wg.Wait()
	stormEnd := time.Now()

	// Recovery: every backend running, A running clean; then no branch
	// prepared on any node and a transfer through keyshard answers.
	for i := range nBackend {
		_ = signalBackend(backendPort(i), syscall.SIGCONT)
		if out, err := script("backends.sh", "start", fmt.Sprint(backendPort(i))); err != nil {
			t.Fatalf("backends.sh start %d: %v\n%s", backendPort(i), err, out)
		}
	}
	if err := ks[0].restartClean(); err != nil {
		t.Fatal(err)
	}
	nodes := make([]*sql.DB, nBackend)
	for i := range nodes {
		nodes[i] = openNode(t, i, db)
	}
	recovery, left := awaitRecovery(t, nodes, dbs[0], 90*time.Second)

	// The report, then the invariants.
	var ts []transfer
	var ls []ledgerWrite
	for _, c := range clients {
		ts = append(ts, c.transfers...)
		ls = append(ls, c.ledger...)
	}
	report(t, st, ctl, ks, stormEnd.Sub(t0), recovery)
	if len(left) > 0 {
		t.Errorf("XA branches still prepared %s after the storm: %v", recovery.Round(time.Millisecond), left)
	}
	check(t, nodes, ts, ls)
	for _, k := range ks {
		checkLog(t, k.logPath)
	}
	if st.counts["transfer acked"] == 0 || st.counts["ledger acked"] == 0 {
		t.Errorf("nothing acknowledged: the storm left no room for work (%v)", st.counts)
	}
}

// setup creates the tables through keyshard and the accounts.
func setup(t *testing.T, ks *sql.DB) {
	t.Helper()
	var rows []string
	for i := range nAccounts {
		rows = append(rows, fmt.Sprintf("(%d, %d)", i, balance))
	}
	for _, q := range []string{
		"CREATE TABLE accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL)",
		"CREATE TABLE transfers (id BIGINT PRIMARY KEY, src BIGINT NOT NULL, dst BIGINT NOT NULL, amount BIGINT NOT NULL)",
		"CREATE TABLE postings (account BIGINT NOT NULL, tid BIGINT NOT NULL, delta BIGINT NOT NULL, PRIMARY KEY (account, tid))",
		// No unique key: a row written twice would show as two.
		"CREATE TABLE ledger (id BIGINT NOT NULL, batch BIGINT NOT NULL, client INT NOT NULL, KEY (id))",
		"INSERT INTO accounts (id, balance) VALUES " + strings.Join(rows, ", "),
	} {
		if _, err := ks.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// awaitRecovery waits (at most d) until no branch is prepared on any node and
// a transfer through keyshard commits; it returns how long that took
// from now and what is still prepared.
func awaitRecovery(t *testing.T, nodes []*sql.DB, ks *sql.DB, d time.Duration) (time.Duration, []string) {
	t.Helper()
	start := time.Now()
	var left []string
	for {
		left = left[:0]
		for i, n := range nodes {
			for _, x := range prepared(t, n) {
				left = append(left, fmt.Sprintf("node%d:%s", i+1, x))
			}
		}
		if len(left) == 0 && probe(ks) == nil {
			return time.Since(start), nil
		}
		if time.Since(start) > d {
			return time.Since(start), left
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// probe runs a transfer of 0 over two nodes' accounts through keyshard.
func probe(ks *sql.DB) error {
	tx, err := ks.Begin()
	if err != nil {
		return err
	}
	for _, id := range []int{0, 1, 2} {
		if _, err := tx.Exec(fmt.Sprintf("UPDATE accounts SET balance = balance + 0 WHERE id = %d", id)); err != nil {
			_ = tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}

// prepared lists the XA transactions prepared on n (as XA ROLLBACK
// takes them), retried while the node does not answer.
func prepared(t *testing.T, n *sql.DB) []string {
	t.Helper()
	var err error
	for range 50 {
		var rows *sql.Rows
		rows, err = n.Query("XA RECOVER")
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		var xids []string
		for rows.Next() {
			var format, gl, bl int
			var data string
			if err = rows.Scan(&format, &gl, &bl, &data); err != nil {
				break
			}
			xids = append(xids, fmt.Sprintf("'%s','%s',%d", data[:gl], data[gl:gl+bl], format))
		}
		rows.Close()
		if err == nil {
			return xids
		}
	}
	t.Fatalf("XA RECOVER: %v", err)
	return nil
}

// report logs what happened: counts of outcomes, errors by errno, faults
// by kind, starts of keyshard, recovery time.
func report(t *testing.T, st *stats, ctl *controller, ks [2]*keyshard, storm, recovery time.Duration) {
	t.Helper()
	line := func(m map[string]int) string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		var parts []string
		for _, k := range ks {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
		return strings.Join(parts, ", ")
	}
	t.Logf("storm %s; recovery %s", storm.Round(time.Second), recovery.Round(time.Millisecond))
	t.Logf("outcomes: %s", line(st.counts))
	t.Logf("errors by errno: %s", line(st.errs))
	for k, m := range st.first {
		t.Logf("first %s: %s", k, m)
	}
	t.Logf("faults: %s", line(ctl.kills))
	t.Logf("keyshard starts: ks-a %d (%d with a failpoint), ks-b %d (%d with a failpoint)",
		ks[0].starts.Load(), ks[0].failStarts.Load(), ks[1].starts.Load(), ks[1].failStarts.Load())
}

// checkLog fails the test on a panic or a data race in keyshard's output.
func checkLog(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return
		}
		t.Fatal(err)
	}
	for _, bad := range []string{"panic", "DATA RACE", "fatal error"} {
		if i := strings.Index(string(b), bad); i >= 0 {
			end := min(len(b), i+3000)
			t.Errorf("%s: %q in keyshard's output:\n%s", path, bad, b[max(0, i-500):end])
		}
	}
}
