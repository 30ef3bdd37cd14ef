package e2e

import (
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/keyshard/keyshard/proxy/config"
)

// The failover tests' own servers, apart from every other test's:
// basePort+50 is a master and basePort+51 its replica (TestFailover);
// basePort+52 and basePort+53 are two writable servers (both taken for
// promoted replicas in TestFailoverSeveralWritable). Each test resets
// the state a previous run (KEEP_BACKENDS=1) left on them.
var (
	foMaster    = basePort + 50
	foReplica   = basePort + 51
	foWritableA = basePort + 52
	foWritableB = basePort + 53
)

func foAddr(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }

// foPlain makes the server at port a writable server that replicates
// nothing (as a master is), starting it if needed.
func foPlain(t *testing.T, port int) *sql.DB {
	t.Helper()
	if out, err := backends("up", "1", fmt.Sprint(port)); err != nil {
		t.Fatalf("backend %d: %v\n%s", port, err, out)
	}
	db := direct(t, port, "")
	for _, q := range []string{"STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = 0", "DROP DATABASE IF EXISTS failover_e2e", "RESET MASTER"} {
		mustExec(t, db, q)
	}
	return db
}

func failoverYAML(node, master, slaves, after string) string {
	return fmt.Sprintf(`
addr: %%ADDR%%
health_check_interval: 200ms
health_check_timeout: 500ms
connect_timeout: 1s
user_list:
  - user: ks
    password: ks
  - user: root
    password: rootpw
nodes:
  - name: %s
    user: ks
    password: ks
    master: %s
    slave: %s
    failover_after: %s
    max_conns_limit: 8
schema_list:
  - user: ks
    nodes: [%s]
    default: %s
    shard:
      -
`, node, master, slaves, after, node, node)
}

// A master dies, an operator promotes its replica: keyshard follows within
// failover_after and a few seconds, writes the change to its config file,
// and keeps the old master out when it comes back writable.
func TestFailover(t *testing.T) {
	m := foPlain(t, foMaster)
	foPlain(t, foReplica)
	if out, err := backends("replica", fmt.Sprint(foMaster), fmt.Sprint(foReplica)); err != nil {
		t.Fatalf("replica: %v\n%s", err, out)
	}
	r := direct(t, foReplica, "")
	var ro int
	if err := r.QueryRow("SELECT @@read_only").Scan(&ro); err != nil || ro != 1 {
		t.Fatalf("backends.sh replica: read_only = %d (%v), want 1", ro, err)
	}
	mustExec(t, m, "CREATE DATABASE failover_e2e")
	mustExec(t, m, "CREATE TABLE failover_e2e.t (id INT PRIMARY KEY, port INT NOT NULL)")

	p := startProxy(t, failoverYAML("fo1", foAddr(foMaster), foAddr(foReplica), "2s"))
	db := p.open(t, "ks:ks", "failover_e2e", "timeout=5s&readTimeout=10s&writeTimeout=10s")
	mustExec(t, db, "INSERT INTO t VALUES (1, @@port)")
	var port int
	if err := m.QueryRow("SELECT port FROM failover_e2e.t WHERE id = 1").Scan(&port); err != nil || port != foMaster {
		t.Fatalf("row 1 on the master: port %d, %v", port, err)
	}

	// An admin change not saved: the failover must not save it.
	mustExec(t, adminDB(t, p), "admin server(opt,k,v) values('change','slow_log_time','77')")

	// The master dies: writes fail, naming the node and its master.
	t.Cleanup(func() { _, _ = backends("start", fmt.Sprint(foMaster)) }) // left running for the next run
	if out, err := backends("stop", fmt.Sprint(foMaster)); err != nil {
		t.Fatalf("stop master: %v\n%s", err, out)
	}
	stopped := time.Now()
	var werr error
	within(t, 10*time.Second, "writes to fail with 'master is down'", func() bool {
		_, werr = db.Exec("INSERT INTO t VALUES (100, @@port)")
		return werr != nil && strings.Contains(werr.Error(), "master is down")
	})
	if !strings.Contains(werr.Error(), "node fo1 ("+foAddr(foMaster)+")") {
		t.Errorf("write error does not name the node and its master: %v", werr)
	}
	// No replica is writable yet: keyshard waits (and says so).
	within(t, 10*time.Second, "the waiting log line", func() bool {
		return p.Logs.FilterMessageSnippet("node fo1: master "+foAddr(foMaster)+" down for").
			FilterMessageSnippet("no replica is writable yet; waiting for a promotion").Len() > 0
	})
	if n, _ := p.Srv.Config().Node("fo1"); n.Master != foAddr(foMaster) {
		t.Fatalf("master changed to %s with no replica promoted", n.Master)
	}

	// The operator promotes the replica: writes work again, on it.
	if out, err := backends("promote", fmt.Sprint(foReplica)); err != nil {
		t.Fatalf("promote: %v\n%s", err, out)
	}
	promoted := time.Now()
	within(t, 2*time.Second+8*time.Second, "writes through keyshard after the promotion", func() bool {
		_, werr = db.Exec("INSERT INTO t VALUES (2, @@port)")
		return werr == nil
	})
	t.Logf("writes again %v after the promotion (%v after the master stopped)",
		time.Since(promoted).Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond))
	if err := r.QueryRow("SELECT port FROM failover_e2e.t WHERE id = 2").Scan(&port); err != nil || port != foReplica {
		t.Fatalf("row 2 on the new master: port %d, %v", port, err)
	}

	// The running config and the file: master R, R no longer a slave.
	if n, _ := p.Srv.Config().Node("fo1"); n.Master != foAddr(foReplica) || n.Slave != "" {
		t.Errorf("running config: master %q, slave %q", n.Master, n.Slave)
	}
	saved, _, err := config.Load(p.File)
	if err != nil {
		t.Fatalf("the config file after the failover: %v", err)
	}
	if n, _ := saved.Node("fo1"); n.Master != foAddr(foReplica) || n.Slave != "" {
		b, _ := os.ReadFile(p.File)
		t.Errorf("config file: master %q, slave %q\n%s", n.Master, n.Slave, b)
	}
	if saved.SlowLogTime != 0 {
		t.Errorf("the failover saved an unsaved admin change too: slow_log_time %d in the file", saved.SlowLogTime)
	}
	if p.Logs.FilterMessageSnippet(fmt.Sprintf("failover: node fo1 now writes to %s (master %s down for", foAddr(foReplica), foAddr(foMaster))).Len() != 1 {
		t.Errorf("no (or several) failover log lines")
	}
	if v := metricValue(scrape(t, p), `keyshard_failovers_total{node="fo1"}`); v != 1 {
		t.Errorf("keyshard_failovers_total{node=fo1} = %v, want 1", v)
	}

	// Reads work, on the new master (the node has no replica left).
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM t WHERE id IN (1, 2)").Scan(&n); err != nil || n != 2 {
		t.Fatalf("read after the failover: %d rows, %v", n, err)
	}
	if err := db.QueryRow("SELECT @@port").Scan(&port); err != nil || port != foReplica {
		t.Fatalf("reads go to port %d (%v), want %d", port, err, foReplica)
	}

	// The old master comes back, writable: keyshard says so, once, and
	// keeps writing to the new one.
	if out, err := backends("start", fmt.Sprint(foMaster)); err != nil {
		t.Fatalf("start old master: %v\n%s", err, out)
	}
	back := fmt.Sprintf("node fo1: former master %s is back and writable (read_only=0); keyshard keeps it out", foAddr(foMaster))
	gauge := fmt.Sprintf(`keyshard_failover_former_master_writable{addr="%s",node="fo1"}`, foAddr(foMaster))
	within(t, 15*time.Second, "the former-master log line", func() bool { return p.Logs.FilterMessageSnippet(back).Len() > 0 })
	if v := metricValue(scrape(t, p), gauge); v != 1 {
		t.Errorf("%s = %v, want 1", gauge, v)
	}
	mustExec(t, db, "INSERT INTO t VALUES (3, @@port)")
	if err := r.QueryRow("SELECT port FROM failover_e2e.t WHERE id = 3").Scan(&port); err != nil || port != foReplica {
		t.Fatalf("row 3 on the new master: port %d, %v", port, err)
	}
	m = direct(t, foMaster, "")
	if err := m.QueryRow("SELECT COUNT(*) FROM failover_e2e.t WHERE id IN (2, 3)").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the old master has %d of the rows written after the failover (%v), want 0", n, err)
	}
	time.Sleep(4 * time.Second) // a former master is asked every 3 s: logged once per change
	if c := p.Logs.FilterMessageSnippet(back).Len(); c != 1 {
		t.Errorf("former-master line logged %d times, want once", c)
	}
	// Made read-only, it is no longer reported.
	mustExec(t, m, "SET GLOBAL read_only = 1")
	within(t, 10*time.Second, gauge+" = 0", func() bool { return metricValue(scrape(t, p), gauge) == 0 })
	mustExec(t, m, "SET GLOBAL read_only = 0")
}

// Two replicas are writable: keyshard never chooses; once one is made
// read-only, it follows the other.
func TestFailoverSeveralWritable(t *testing.T) {
	foPlain(t, foWritableA)
	b := foPlain(t, foWritableB)
	// The master is an address where nothing listens: down from the start.
	p := startProxy(t, failoverYAML("fo2", "127.0.0.1:1", foAddr(foWritableA)+","+foAddr(foWritableB), "1s"))
	refused := `keyshard_failover_refused_total{node="fo2",reason="several_writable"}`
	within(t, 15*time.Second, refused+" = 1", func() bool { return metricValue(scrape(t, p), refused) == 1 })
	line := fmt.Sprintf("several replicas are writable (%s, %s): keyshard will not choose", foAddr(foWritableA), foAddr(foWritableB))
	if p.Logs.FilterMessageSnippet(line).Len() != 1 {
		t.Errorf("no error line %q", line)
	}
	time.Sleep(3 * time.Second) // asked again each second: counted once, logged at most every 30 s
	s := scrape(t, p)
	if v := metricValue(s, refused); v != 1 {
		t.Errorf("%s = %v after 3 s more, want 1 (once per refusal)", refused, v)
	}
	if v := metricValue(s, `keyshard_failovers_total{node="fo2"}`); v > 0 {
		t.Errorf("a failover was made with two writable replicas")
	}
	if c := p.Logs.FilterMessageSnippet(line).Len(); c != 1 {
		t.Errorf("refusal logged %d times in 3 s, want once", c)
	}
	if n, _ := p.Srv.Config().Node("fo2"); n.Master != "127.0.0.1:1" {
		t.Fatalf("master changed to %s with two writable replicas", n.Master)
	}
	// One of them made read-only: the other is the promoted one.
	mustExec(t, b, "SET GLOBAL read_only = 1")
	defer mustExec(t, b, "SET GLOBAL read_only = 0")
	within(t, 10*time.Second, "the failover to "+foAddr(foWritableA), func() bool {
		n, _ := p.Srv.Config().Node("fo2")
		return n.Master == foAddr(foWritableA)
	})
	if n, _ := p.Srv.Config().Node("fo2"); n.Slave != foAddr(foWritableB) {
		t.Errorf("slaves after the failover: %q, want %s", n.Slave, foAddr(foWritableB))
	}
}
