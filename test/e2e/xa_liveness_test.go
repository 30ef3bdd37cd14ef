package e2e

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/keyshard/keyshard/test/bank"
)

// The liveness of keyshard instances (proxy/xa/liveness.go): each holds
// the lock keyshard-xa-<instance> on every node's master for its life;
// recovery rolls back a prepared branch with no decision at once when the
// lock of the instance that made it is free, and keeps the
// xa_prepared_timeout rule while it is held.

// holdLivenessLock makes instance look alive to keyshard's recovery until
// the test ends: a connection of the test's holds its liveness lock on
// node1 (the decision node of the test's XIDs).
func holdLivenessLock(t *testing.T, instance string) {
	t.Helper()
	c, err := direct(t, basePort, "").Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var got sql.NullInt64
	if err := c.QueryRowContext(context.Background(), "SELECT GET_LOCK(?, 0)", "keyshard-xa-"+instance).Scan(&got); err != nil || got.Int64 != 1 {
		t.Fatalf("GET_LOCK(keyshard-xa-%s): %v %v", instance, got, err)
	}
}

// handBranch leaves on node2 (database shard_e2e) a prepared branch of
// transaction xid that inserted id into table, as a keyshard that died
// after XA PREPARE leaves it.
func handBranch(t *testing.T, xid, table string, id int) {
	t.Helper()
	c, err := direct(t, basePort+1, "shard_e2e").Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{fmt.Sprintf("XA START '%s','node2'", xid), fmt.Sprintf("INSERT INTO %s VALUES (%d)", table, id),
		fmt.Sprintf("XA END '%s','node2'", xid), fmt.Sprintf("XA PREPARE '%s','node2'", xid)} {
		mustExecConn(t, c, q)
	}
	_ = c.Raw(func(any) error { return driver.ErrBadConn }) // closes it: the prepared branch stays
	c.Close()
}

// ksBranches lists the gtrids of keyshard's prepared branches on the
// backend at port.
func ksBranches(t *testing.T, port int) []string {
	t.Helper()
	var out []string
	for _, r := range allRows(t, direct(t, port, ""), "XA RECOVER") {
		f := strings.SplitN(r, "|", 4) // formatID, gtrid_length, bqual_length, data
		if len(f) != 4 {
			continue
		}
		gl, _ := strconv.Atoi(f[1])
		if strings.HasPrefix(f[3], "ks-") && gl <= len(f[3]) {
			out = append(out, f[3][:gl])
		}
	}
	return out
}

// rollbackKSBranches rolls back whatever keyshard left prepared on both
// nodes (a failed test's leftovers would block the next DROP DATABASE).
func rollbackKSBranches(t *testing.T) {
	for _, port := range []int{basePort, basePort + 1} {
		d := direct(t, port, "")
		for _, r := range allRows(t, d, "XA RECOVER") {
			f := strings.SplitN(r, "|", 4)
			if len(f) != 4 || !strings.HasPrefix(f[3], "ks-") {
				continue
			}
			gl, _ := strconv.Atoi(f[1])
			if gl <= len(f[3]) {
				_, _ = d.Exec(fmt.Sprintf("XA ROLLBACK '%s','%s'", f[3][:gl], f[3][gl:]))
			}
		}
	}
}

// A live instance's undecided branch stays until xa_prepared_timeout; a
// dead instance's goes at the next recovery pass, however young. The
// live instance is a keyshard running here (its id read from its log);
// another keyshard's recovery judges both branches.
func TestXALivenessOfInstances(t *testing.T) {
	setupShardDB(t)
	t.Cleanup(func() { rollbackKSBranches(t) })
	node1, node2 := direct(t, basePort, ""), direct(t, basePort+1, "shard_e2e")
	mustExec(t, node2, "CREATE TABLE xa_live (id INT PRIMARY KEY)")
	live := startProxy(t, shardYAML("%ADDR%")+"xa_recover_interval: 1h\n")
	var instance string
	waitFor(t, "the live keyshard to log its instance", func() bool {
		for _, e := range live.Logs.FilterMessage("XA coordinator started").All() {
			if s, ok := e.ContextMap()["instance"].(string); ok {
				instance = s
			}
		}
		return instance != ""
	})
	waitFor(t, "the live keyshard to hold its liveness lock on node1", func() bool {
		var id sql.NullInt64
		return node1.QueryRow("SELECT IS_USED_LOCK(?)", "keyshard-xa-"+instance).Scan(&id) == nil && id.Valid
	})
	now := time.Now().UnixMilli()
	liveXID := fmt.Sprintf("ks-%s-%d-1-node1", instance, now)
	deadXID := fmt.Sprintf("ks-0badc0de-%d-1-node1", now)
	handBranch(t, liveXID, "xa_live", 1)
	handBranch(t, deadXID, "xa_live", 2)

	const timeout = 4 * time.Second
	start := time.Now()
	startProxy(t, shardYAML("%ADDR%")+"xa_recover_interval: 200ms\nxa_prepared_timeout: 4s\n")
	within(t, 2*time.Second, "the dead instance's branch rolled back", func() bool {
		return !strings.Contains(strings.Join(ksBranches(t, basePort+1), ","), deadXID)
	})
	if got := ksBranches(t, basePort+1); len(got) != 1 || got[0] != liveXID {
		t.Fatalf("prepared on node2 after the dead instance's branch went: %q; want only the live one's %s", got, liveXID)
	}
	// The live one's stays until the timeout, counted from when recovery
	// first saw it.
	for time.Since(start) < timeout-time.Second {
		if got := ksBranches(t, basePort+1); len(got) != 1 {
			t.Fatalf("the live instance's branch was finished after %s, before xa_prepared_timeout (%s): %q",
				time.Since(start).Round(time.Millisecond), timeout, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	within(t, 5*time.Second, "the live instance's branch rolled back past xa_prepared_timeout", func() bool {
		return len(ksBranches(t, basePort+1)) == 0
	})
	if got := queryCol(t, node2, "SELECT id FROM xa_live"); len(got) != 0 {
		t.Errorf("xa_live holds %v after both branches were rolled back", got)
	}
	for _, xid := range []string{liveXID, deadXID} {
		var outcome string
		if err := node1.QueryRow("SELECT outcome FROM keyshard.xa_log WHERE gtrid = ?", xid).Scan(&outcome); err != nil || outcome != "R" {
			t.Errorf("the decision recorded for %s: %q, %v; want R (recorded before the rollback)", xid, outcome, err)
		}
	}
}

// ksBinary builds keyshard for the tests that run it as a process.
func ksBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "keyshard")
	build := exec.Command("go", "build", "-o", bin, "./cmd/keyshard")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// ksProc is keyshard running as a process of the test's.
type ksProc struct {
	cmd  *exec.Cmd
	addr string
}

// startKS runs bin with config cfg (listening on addr), its output
// appended to logPath, KS_FAILPOINT set to failpoint; it returns once
// keyshard accepts connections, and stops it (SIGTERM) when the test ends.
func startKS(t *testing.T, bin, cfg, addr, logPath, failpoint string) *ksProc {
	t.Helper()
	cmd := exec.Command(bin, "-config", cfg)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "KS_FAILPOINT="+failpoint)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &ksProc{cmd: cmd, addr: addr}
	t.Cleanup(p.stop)
	within(t, 20*time.Second, "keyshard to listen", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return p
}

func (p *ksProc) stop() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		_ = p.cmd.Wait()
	}
}

func (p *ksProc) open(t *testing.T) *sql.DB {
	t.Helper()
	d, err := sql.Open("mysql", fmt.Sprintf("ks:ks@tcp(%s)/shard_e2e?timeout=5s&readTimeout=20s", p.addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// livenessYAML is the bank's two-node table, listening on addr, with
// extra settings.
func livenessYAML(addr, extra string) string {
	return twoNodeYAML(addr, `      - db: shard_e2e
        table: accounts
        key: id
        nodes: [node1, node2]
        type: hash
        locations: [4, 4]
`) + "log_level: info\n" + extra
}

// The accounts of the liveness tests: ids 0-3 on node1, 4-7 on node2
// (sub-tables accounts_0000 to _0007), 1000 each.
const livenessAccounts, livenessBalance = 8, 1000

func setupAccounts(t *testing.T, db *sql.DB) {
	t.Helper()
	mustExec(t, db, "CREATE TABLE accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, ops INT NOT NULL DEFAULT 0)")
	var rows []string
	for i := range livenessAccounts {
		rows = append(rows, fmt.Sprintf("(%d, %d)", i, livenessBalance))
	}
	mustExec(t, db, "INSERT INTO accounts (id, balance) VALUES "+strings.Join(rows, ", "))
}

// killedTransfer moves 10 from account 1 (node1) to account 5 (node2)
// through p, which dies (KS_FAILPOINT=kill:decide:1) with every branch
// prepared and no decision recorded: as one transaction (node1's part a
// local transaction, node2's a prepared branch) or as one statement
// (likewise: the first node's part runs in a local transaction that
// records the decision). It returns when the process is gone,
// with the nodes holding the prepared branches and their row locks.
func killedTransfer(t *testing.T, p *ksProc, statement bool) {
	t.Helper()
	db := p.open(t)
	var err error
	if statement {
		_, err = db.Exec("UPDATE accounts SET balance = balance + CASE id WHEN 1 THEN -10 WHEN 5 THEN 10 END, ops = ops + 1 WHERE id IN (1, 5)")
	} else {
		err = bank.Transfer(db, 1, 5, 10)
	}
	if err == nil || !bank.IsConnErr(err) {
		t.Fatalf("a transfer through a keyshard killed before its decision: %v; want the connection lost", err)
	}
	_ = p.cmd.Wait()
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("keyshard ended with %v; want killed by its failpoint", p.cmd.ProcessState)
	}
	if got, want := len(ksBranches(t, basePort))+len(ksBranches(t, basePort+1)), 1; got != want {
		t.Fatalf("%d branches prepared after the kill, want %d", got, want)
	}
}

// locksFreed reports whether no branch of keyshard's is prepared on
// either node and accounts 1 and 5 can be updated straight on their
// nodes with a lock wait of 1 s.
func locksFreed(t *testing.T) bool {
	t.Helper()
	if len(ksBranches(t, basePort))+len(ksBranches(t, basePort+1)) > 0 {
		return false
	}
	for _, a := range []struct {
		port  int
		table string
		id    int
	}{{basePort, "accounts_0001", 1}, {basePort + 1, "accounts_0005", 5}} {
		c, err := direct(t, a.port, "shard_e2e").Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		mustExecConn(t, c, "SET innodb_lock_wait_timeout = 1")
		_, err = c.ExecContext(context.Background(), fmt.Sprintf("UPDATE %s SET ops = ops WHERE id = %d", a.table, a.id))
		c.Close()
		if err != nil {
			t.Logf("UPDATE %s on port %d: %v", a.table, a.port, err)
			return false
		}
	}
	return true
}

// checkBank checks through p that the total balance is what it was and
// that no transfer is half applied.
func checkBank(t *testing.T, p *ksProc) {
	t.Helper()
	var total, ops int64
	if err := p.open(t).QueryRow("SELECT SUM(balance), SUM(ops) FROM accounts").Scan(&total, &ops); err != nil {
		t.Fatal(err)
	}
	if total != livenessAccounts*livenessBalance || ops%2 != 0 {
		t.Fatalf("total balance %d (want %d), operations %d (want an even number)", total, livenessAccounts*livenessBalance, ops)
	}
}

// A keyshard killed with its branches prepared and no decision recorded:
// restarted on the same configuration, its predecessor's lock is free, so
// its first recovery pass (at start) rolls them back, well within 2 s of
// accepting connections, where xa_prepared_timeout (60 s) held the row
// locks before.
func TestXADeadInstanceLocksFreedAtRestart(t *testing.T) {
	setupShardDB(t)
	t.Cleanup(func() { rollbackKSBranches(t) })
	bin := ksBinary(t)
	addr := freeAddr(t)
	cfg := filepath.Join(t.TempDir(), "ks.yaml")
	if err := os.WriteFile(cfg, []byte(livenessYAML(addr, "xa_prepared_timeout: 60s\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "keyshard.log")
	ks := startKS(t, bin, cfg, addr, logPath, "")
	setupAccounts(t, ks.open(t))
	ks.stop()
	for _, statement := range []bool{false, true} {
		killedTransfer(t, startKS(t, bin, cfg, addr, logPath, "kill:decide:1"), statement)
		ks = startKS(t, bin, cfg, addr, logPath, "")
		up := time.Now()
		deadline := up.Add(15 * time.Second)
		for !locksFreed(t) {
			if time.Now().After(deadline) {
				b, _ := os.ReadFile(logPath)
				t.Fatalf("statement %v: locks still held 15 s after the restart; keyshard log:\n%s", statement, b)
			}
			time.Sleep(20 * time.Millisecond)
		}
		took := time.Since(up)
		t.Logf("statement %v: branches rolled back and row locks free %s after the restarted keyshard accepted connections",
			statement, took.Round(time.Millisecond))
		if took > 2*time.Second {
			t.Errorf("statement %v: row locks freed %s after the restart; want under 2 s", statement, took.Round(time.Millisecond))
		}
		checkBank(t, ks)
		ks.stop()
	}
}

// A keyshard killed with its branches prepared and no decision recorded,
// while another keyshard instance runs on the same backends: the other's
// next recovery pass (xa_recover_interval 1 s) finds the dead one's lock
// free and rolls them back, long before xa_prepared_timeout (60 s).
func TestXADeadInstanceResolvedByPeer(t *testing.T) {
	setupShardDB(t)
	t.Cleanup(func() { rollbackKSBranches(t) })
	bin := ksBinary(t)
	dir := t.TempDir()
	extra := "xa_recover_interval: 1s\nxa_prepared_timeout: 60s\n"
	addrA, addrB := freeAddr(t), freeAddr(t)
	cfgA, cfgB := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	for cfg, addr := range map[string]string{cfgA: addrA, cfgB: addrB} {
		if err := os.WriteFile(cfg, []byte(livenessYAML(addr, extra)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	logPath := filepath.Join(dir, "keyshard.log")
	a := startKS(t, bin, cfgA, addrA, logPath, "")
	setupAccounts(t, a.open(t))
	for _, statement := range []bool{false, true} {
		killedTransfer(t, startKS(t, bin, cfgB, addrB, logPath, "kill:decide:1"), statement)
		dead := time.Now()
		deadline := dead.Add(20 * time.Second)
		for !locksFreed(t) {
			if time.Now().After(deadline) {
				b, _ := os.ReadFile(logPath)
				t.Fatalf("statement %v: locks still held 20 s after the kill; keyshard log:\n%s", statement, b)
			}
			time.Sleep(20 * time.Millisecond)
		}
		took := time.Since(dead)
		t.Logf("statement %v: the running instance rolled back the dead one's branches %s after the kill", statement, took.Round(time.Millisecond))
		if took > 4*time.Second {
			t.Errorf("statement %v: row locks freed %s after the kill; want within a few seconds (xa_recover_interval 1 s)",
				statement, took.Round(time.Millisecond))
		}
		checkBank(t, a)
	}
}
