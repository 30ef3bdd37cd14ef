package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/keyshard/keyshard/proxy/control"
)

// reloadYAML is a sharded schema on node1 and node2 whose table rl_t gets
// no traffic; extraNode adds an unused node4; locs are rl_t's locations;
// maxConns is node1's max_conns_limit.
func reloadYAML(db string, extraNode bool, locs, maxConns int) string {
	y := fmt.Sprintf(`
addr: %%ADDR%%
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
    max_conns_limit: %d
  - name: node2
    user: ks
    password: ks
    master: 127.0.0.1:%d
`, basePort, maxConns, basePort+1)
	if extraNode {
		y += fmt.Sprintf(`  - name: node4
    user: ks
    password: ks
    master: 127.0.0.1:%d
`, basePort+1)
	}
	return y + fmt.Sprintf(`schema_list:
  - user: ks
    nodes: [node1, node2]
    default: node1
    shard:
      - db: %s
        table: rl_t
        key: id
        type: hash
        nodes: [node1, node2]
        locations: [%d, %d]
`, db, locs, locs)
}

// 20 reloads under sysbench oltp_read_write (prepared statements,
// transactions): nodes added and removed, the sysbench node itself
// replaced (its pool drained), a shard rule changed for a table with no
// traffic, and one invalid file. sysbench sees no error and no reconnect.
func TestReloadUnderSysbench(t *testing.T) {
	dbName, _ := bulkDB(t, "reload")
	p := startProxy(t, reloadYAML(dbName, false, 1, 16))
	sysbench := newSysbench(t, p, dbName)
	sysbench("prepare")
	root := adminDB(t, p)
	ks := p.open(t, "ks:ks", dbName, "")
	write := func(y string) {
		t.Helper()
		if err := os.WriteFile(p.File, []byte(strings.ReplaceAll(y, "%ADDR%", p.Addr)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	subTables := func() int {
		t.Helper()
		seen := map[string]bool{}
		for _, r := range queryRows(t, ks, "EXPLAIN SHARD SELECT * FROM "+dbName+".rl_t") {
			seen[r[1]] = true
		}
		return len(seen)
	}
	if n := subTables(); n != 2 {
		t.Fatalf("rl_t sub-tables at start: %d", n)
	}

	var out string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		out = sysbench("run", "--threads=4", "--time=10", "--db-ps-mode=auto", "--report-interval=0")
	}()
	time.Sleep(time.Second)
	extra, locs, maxConns := false, 1, 16
	var reloadErrs []string
	for i := range 20 {
		switch i % 4 {
		case 0, 1:
			extra = !extra // node4 added, then removed
		case 2:
			locs = 3 - locs // rl_t: 2 sub-tables, then 4, ...
		case 3:
			maxConns = 31 - maxConns // node1 rebuilt: its old pool drains under load
		}
		write(reloadYAML(dbName, extra, locs, maxConns))
		// A change of rl_t's locations moves its rows: it must be forced.
		if _, err := p.Srv.Control().ReloadFile(i%4 == 2); err != nil {
			reloadErrs = append(reloadErrs, fmt.Sprintf("reload %d: %v", i, err))
		}
		if i == 10 {
			before := p.Srv.Config()
			write(strings.Replace(reloadYAML(dbName, extra, locs, maxConns), "default: node1", "default: nodeX", 1))
			_, err := p.Srv.Control().ReloadFile(false)
			if err == nil || !strings.Contains(err.Error(), "nodeX") {
				t.Errorf("invalid file: %v, want an error naming nodeX", err)
			}
			if p.Srv.Config() != before {
				t.Errorf("an invalid file changed the running config")
			}
		}
		if n := subTables(); n != 2*locs {
			t.Errorf("reload %d: rl_t has %d sub-tables, want %d", i, n, 2*locs)
		}
		if _, ok := p.Srv.Nodes()["node4"]; ok != extra {
			t.Errorf("reload %d: node4 present %v, want %v", i, ok, extra)
		}
		time.Sleep(300 * time.Millisecond)
	}
	wg.Wait()
	for _, e := range reloadErrs {
		t.Error(e)
	}
	got, tps := parseSysbench(t, out)
	t.Logf("sysbench across 20 reloads: %.0f transactions (%.1f tps), %.0f queries, %.0f ignored errors, %.0f reconnects",
		got["transactions"], tps, got["queries"], got["ignored errors"], got["reconnects"])
	if got["ignored errors"] != 0 || got["reconnects"] != 0 {
		t.Errorf("sysbench: %v ignored errors, %v reconnects, want 0\n%s", got["ignored errors"], got["reconnects"], out)
	}
	if got["transactions"] < 100 {
		t.Errorf("sysbench ran only %v transactions", got["transactions"])
	}
	st := keyValue(queryRows(t, root, "SHOW PROXY STATUS"))
	if st["reloads"] != "20" || st["reload_errors"] != "1" {
		t.Errorf("status: reloads %s, reload_errors %s; want 20 and 1", st["reloads"], st["reload_errors"])
	}
	// The drained pools of node1 are closed: the backend holds no more
	// connections in the database than the current pool's limit (plus the
	// test's own direct handle).
	d := direct(t, basePort, "")
	var conns int
	waitFor(t, "drained pools to close", func() bool {
		if err := d.QueryRow("SELECT COUNT(*) FROM information_schema.processlist WHERE db = ?", dbName).Scan(&conns); err != nil {
			t.Fatal(err)
		}
		return conns <= maxConns+1
	})
}

// config_watch_interval: an edit of the file is picked up by itself.
func TestReloadOnFileChange(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%")+"config_watch_interval: 100ms\n")
	y, _ := os.ReadFile(p.File)
	edited := strings.Replace(string(y), "user_list:\n", "user_list:\n  - user: watcher\n    password: w\n", 1)
	if err := os.WriteFile(p.File, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new user to log in", func() bool { return p.open(t, "watcher:w", "", "").Ping() == nil })
}

// The keyshard binary reloads on SIGHUP, and ignores an invalid file.
func TestReloadOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "keyshard")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(repoRoot, "cmd", "keyshard")).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	addr := freeAddr(t)
	file := filepath.Join(dir, "ks.yaml")
	base := strings.ReplaceAll(baseYAML(addr), "\nnodes:", "\nlog_level: error\nnodes:")
	if err := os.WriteFile(file, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-config", file)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	p := &testProxy{Addr: addr}
	waitFor(t, "keyshard to listen", func() bool { return p.open(t, "ks:ks", "", "").Ping() == nil })
	ks := p.open(t, "ks:ks", "", "")
	ks.SetMaxOpenConns(1)
	ks.SetConnMaxIdleTime(0)
	if err := ks.Ping(); err != nil {
		t.Fatal(err)
	}

	// An invalid file first: nothing changes, keyshard keeps serving.
	if err := os.WriteFile(file, []byte(strings.Replace(base, "default: node1", "default: nodeX", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := p.open(t, "ks:ks", "", "").Ping(); err != nil {
		t.Fatalf("after SIGHUP with an invalid file: %v", err)
	}
	edited := strings.Replace(base, "user_list:\n", "user_list:\n  - user: hup\n    password: h\n", 1)
	if err := os.WriteFile(file, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new user to log in after SIGHUP", func() bool { return p.open(t, "hup:h", "", "").Ping() == nil })
	if err := ks.Ping(); err != nil {
		t.Fatalf("the open session after the reloads: %v", err)
	}
}

// freeAddr returns a loopback address with a free port.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// A reload that rebuilds a node (a pool setting changed) keeps a backend
// an operator took down down; a changed master address is followed.
func TestReloadKeepsAdminDownFollowsMaster(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	root := adminDB(t, p)
	n2 := fmt.Sprintf("127.0.0.1:%d", basePort+1)
	mustExec(t, root, "admin node(opt,node,k,v) values('down','node2','master','"+n2+"')")
	y, _ := os.ReadFile(p.File)
	rebuilt := string(y) + "pool_idle_timeout: 61s\n"
	if err := os.WriteFile(p.File, []byte(rebuilt), 0o644); err != nil {
		t.Fatal(err)
	}
	before := p.Srv.Nodes()["node2"]
	mustExec(t, root, "admin reload")
	if p.Srv.Nodes()["node2"] == before {
		t.Fatal("node2 was not rebuilt by a pool setting change")
	}
	state := func(node string) []string {
		for _, r := range queryRows(t, root, "SHOW BACKENDS") {
			if r[0] == node {
				return r
			}
		}
		return nil
	}
	if r := state("node2"); r[3] != "down (admin)" {
		t.Errorf("node2 after the rebuild: %v, want down (admin)", r)
	}
	moved := strings.Replace(rebuilt, "master: "+n2, fmt.Sprintf("master: 127.0.0.1:%d", basePort), 1)
	if err := os.WriteFile(p.File, []byte(moved), 0o644); err != nil {
		t.Fatal(err)
	}
	mustExec(t, root, "admin reload")
	if r := state("node2"); r[1] != fmt.Sprintf("127.0.0.1:%d", basePort) || r[3] != "up" {
		t.Errorf("node2 after its master moved: %v", r)
	}
}

// A reload that changes where an existing sharded table's rows are looked
// for is refused, saying which table and how, and the rows stay reachable;
// ADMIN RELOAD FORCE (or REST ?force=1) applies it deliberately. Adding a
// table stays allowed.
func TestReloadRefusesMovedRows(t *testing.T) {
	setupShardDB(t)
	rules := func(locs string, more bool) string {
		r := "      - db: shard_e2e\n        table: sh_user\n        key: id\n        nodes: [node1, node2]\n        type: hash\n        locations: " + locs + "\n"
		if more {
			r += "      - db: shard_e2e\n        table: sh_more\n        key: id\n        nodes: [node1, node2]\n        type: hash\n        locations: [1, 1]\n"
		}
		return twoNodeYAML("%ADDR%", r) + "admin_users: [ks]\nweb_user: admin\nweb_password: webpw\n"
	}
	p := startProxy(t, rules("[4, 4]", false))
	write := func(yaml string) {
		t.Helper()
		if err := os.WriteFile(p.File, []byte(strings.ReplaceAll(yaml, "%ADDR%", p.Addr)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db := p.open(t, "ks:ks", "shard_e2e", "")
	mustExec(t, db, "CREATE TABLE sh_user (id BIGINT PRIMARY KEY)")
	mustExec(t, db, "INSERT INTO sh_user (id) VALUES (13)")
	find := func() int {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM sh_user WHERE id = 13").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	write(rules("[4, 5]", false))
	_, err := p.Srv.Control().ReloadFile(false)
	var pe *control.PlacementError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "table shard_e2e.sh_user: 8 -> 9 sub-tables") ||
		!strings.Contains(err.Error(), "ADMIN RELOAD FORCE") {
		t.Fatalf("reload moving rows: %v, want a refusal naming the table and the change", err)
	}
	if _, err := db.Exec("ADMIN RELOAD"); myErrCode(err) == 0 || !strings.Contains(err.Error(), "8 -> 9 sub-tables") {
		t.Fatalf("ADMIN RELOAD: %v, want the refusal", err)
	}
	if code := rest(t, p, "PUT", "/api/v1/proxy/config/reload", "", true, nil); code < 400 {
		t.Fatalf("REST reload without force: %d, want an error", code)
	}
	if find() != 1 {
		t.Fatal("the row is not found after a refused reload")
	}
	// A new table is not a move.
	write(rules("[4, 4]", true))
	if _, err := p.Srv.Control().ReloadFile(false); err != nil {
		t.Fatalf("reload adding a table: %v", err)
	}
	// Forced, the move is applied (and the row is looked for elsewhere).
	write(rules("[4, 5]", true))
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mustExecConn(t, c, "ADMIN RELOAD FORCE")
	// ... with a warning of what it strands, as SHOW WARNINGS shows it.
	if warn := queryRowsConn(t, c, "SHOW WARNINGS"); len(warn) != 1 || warn[0][0] != "Warning" ||
		!strings.Contains(warn[0][2], "forced: ") || !strings.Contains(warn[0][2], "8 -> 9 sub-tables") || !strings.Contains(warn[0][2], "seem lost") {
		t.Fatalf("SHOW WARNINGS after ADMIN RELOAD FORCE: %v", warn)
	}
	if n := len(p.Srv.Config().SchemaList[0].ShardRule[0].Locations); n != 2 || p.Srv.Config().SchemaList[0].ShardRule[0].Locations[1] != 5 {
		t.Fatalf("forced reload not applied: %v", p.Srv.Config().SchemaList[0].ShardRule[0].Locations)
	}
	write(rules("[4, 4]", true))
	if code := rest(t, p, "PUT", "/api/v1/proxy/config/reload?force=1", "", true, nil); code != 200 {
		t.Fatalf("REST reload with force=1: %d", code)
	}
	if find() != 1 {
		t.Fatal("the row is not found after going back to the first rule")
	}
}
