package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/keyshard/keyshard/proxy"
)

// backendStatements is the statement count of each node's master.
func backendStatements(p *testProxy) map[string]int64 {
	out := map[string]int64{}
	for _, b := range p.Srv.Backends() {
		if b.Role == "master" {
			out[b.Node] = b.Statements
		}
	}
	return out
}

// Backend statement counts take every leg of fan-outs and merges: a
// merge over 8 sub-tables is 4 statements on each node, a scatter one per
// node; SHOW BACKENDS and /metrics say the same. A backend_user's pools
// show in SHOW BACKENDS (summed, and per user in REST) and in /metrics.
func TestHonestBackendCounters(t *testing.T) {
	setupShardDB(t)
	for _, port := range []int{basePort, basePort + 1} {
		d := direct(t, port, "")
		mustExec(t, d, "CREATE USER IF NOT EXISTS 'ks_reader'@'127.0.0.1' IDENTIFIED BY 'rpw'")
		mustExec(t, d, "GRANT SELECT ON shard_e2e.* TO 'ks_reader'@'127.0.0.1'")
	}
	yaml := strings.Replace(shardYAML("%ADDR%"), "user_list:\n", `user_list:
  - user: root
    password: rootpw
  - user: viewer
    password: vpw
    backend_user: ks_reader
    backend_password: rpw
`, 1)
	yaml = strings.Replace(yaml, "schema_list:\n", `schema_list:
  - user: viewer
    nodes: [node1, node2]
    default: node1
    shard:
      - db: shard_e2e
        table: sh_user
        key: id
        nodes: [node1, node2]
        type: hash
        locations: [4, 4]
`, 1)
	p := startProxy(t, yaml)
	db := p.open(t, "ks:ks", "shard_e2e", "")
	mustExec(t, db, "CREATE TABLE sh_user (id INT PRIMARY KEY, name VARCHAR(20))")
	for i := range 8 {
		mustExec(t, db, "INSERT INTO sh_user (id, name) VALUES (?, 'u')", i)
	}

	before := backendStatements(p)
	if got := queryCol(t, db, "SELECT id FROM sh_user ORDER BY id"); len(got) != 8 {
		t.Fatalf("merge: %d rows", len(got))
	}
	after := backendStatements(p)
	for _, n := range []string{"node1", "node2"} {
		if d := after[n] - before[n]; d != 4 {
			t.Errorf("a merge over 4 sub-tables of %s counted %d statements there, want 4", n, d)
		}
	}
	before = after
	mustExec(t, db, "UPDATE sh_user SET name = 'v'")
	after = backendStatements(p)
	for _, n := range []string{"node1", "node2"} {
		if d := after[n] - before[n]; d < 1 {
			t.Errorf("an UPDATE over every sub-table counted %d statements on %s, want some", d, n)
		}
	}
	// SHOW BACKENDS and /metrics agree with it.
	adm := adminDB(t, p)
	cols, rows, err := mgFetch(context.Background(), adm, false, "SHOW BACKENDS")
	if err != nil {
		t.Fatal(err)
	}
	cols = names(cols)
	stmts, addrCol, openCol := slices.Index(cols, "Statements"), slices.Index(cols, "Address"), slices.Index(cols, "OpenConn")
	n1 := fmt.Sprintf("127.0.0.1:%d", basePort)
	for _, r := range rows {
		if r[addrCol] == n1 && r[stmts] != fmt.Sprint(after["node1"]) && r[stmts] != fmt.Sprint(after["node1"]+1) {
			t.Errorf("SHOW BACKENDS: node1 statements %s, want %d", r[stmts], after["node1"])
		}
	}
	if m := scrape(t, p); !strings.Contains(m, fmt.Sprintf(`keyshard_backend_statements_total{addr="%s",node="node1",role="master"}`, n1)) {
		t.Errorf("/metrics has no statement count of node1")
	}

	// The backend_user's pool: in REST per user, summed in SHOW BACKENDS.
	viewer := p.open(t, "viewer:vpw", "shard_e2e", "")
	viewer.SetMaxIdleConns(0)
	vc, err := viewer.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer vc.Close()
	tx, err := vc.BeginTx(context.Background(), nil) // holds its backend connection
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	var one int
	if err := tx.QueryRow("SELECT 1 FROM sh_user WHERE id = 2").Scan(&one); err != nil {
		t.Fatal(err)
	}
	var node1 proxy.Backend
	for _, b := range p.Srv.Backends() {
		if b.Node == "node1" && b.Role == "master" {
			node1 = b
		}
	}
	users := map[string]proxy.PoolUse{}
	var open int64
	for _, u := range node1.Pools {
		users[u.User] = u
		open += u.Open
	}
	if users["ks_reader"].InUse < 1 || users["ks"].Open < 1 || node1.Open != open {
		t.Fatalf("node1's pools: %+v (open %d), want ks and ks_reader, ks_reader in use, open summed", node1.Pools, node1.Open)
	}
	_, rows, err = mgFetch(context.Background(), adm, false, "SHOW BACKENDS")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r[addrCol] == n1 && r[openCol] != fmt.Sprint(open) && r[openCol] != fmt.Sprint(open+1) {
			t.Errorf("SHOW BACKENDS: node1 OpenConn %s, want the pools' sum %d", r[openCol], open)
		}
	}
	m := scrape(t, p)
	for _, u := range []string{"ks", "ks_reader"} {
		if !strings.Contains(m, fmt.Sprintf(`keyshard_pool_connections{addr="%s",node="node1",role="master",user="%s"}`, n1, u)) {
			t.Errorf("/metrics has no pool of backend user %s on node1", u)
		}
	}
}

// Admin SQL and REST changes are logged with what changed, who and how,
// and counted apart from reloads; admin reload's warnings reach the
// client through SHOW WARNINGS; SHOW PROXY CONFIG shows the running
// web_addr and marks the config's as pending a restart.
func TestAdminChangesLoggedAndWarned(t *testing.T) {
	yaml := baseYAML("%ADDR%") + "web_user: admin\nweb_password: webpw\nweb_addr: 127.0.0.1:19797\nadmin_users: [ks]\n"
	p := startProxy(t, yaml)
	adm := adminDB(t, p)
	ks := p.open(t, "ks:ks", "", "")
	mustExec(t, adm, "admin server(opt,k,v) values('add','allow_ip','127.0.0.0/8')")
	if code := rest(t, p, "PUT", "/api/v1/proxy/slow_sql/time", `{"slow_time":"25"}`, true, nil); code != 200 {
		t.Fatalf("REST slow_time: %d", code)
	}
	mustExec(t, adm, "admin node(opt,node,k,v) values('down','node3','master','')")
	mustExec(t, adm, "admin node(opt,node,k,v) values('up','node3','master','')")

	want := []struct{ change, user, via string }{
		{"allow_ips: add 127.0.0.0/8", "root", "admin SQL"},
		{"slow_log_time: 25 ms", "admin", "REST"},
		{fmt.Sprintf("node node3: master 127.0.0.1:%d down", downPort), "root", "admin SQL"},
		{fmt.Sprintf("node node3: master 127.0.0.1:%d up", downPort), "root", "admin SQL"},
	}
	got := p.Logs.FilterMessage("admin change").All()
	if len(got) != len(want) {
		t.Fatalf("admin change log lines: %d, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		f := got[i].ContextMap()
		if f["change"] != w.change || f["user"] != w.user || f["via"] != w.via || f["from"] == "" {
			t.Errorf("log line %d: %v, want change %q by %s via %s from an address", i, f, w.change, w.user, w.via)
		}
	}
	if n := p.Logs.FilterMessage("config reloaded").Len(); n != 0 {
		t.Errorf("admin changes logged as %d reloads", n)
	}
	st := p.Srv.Control().Status()
	if st.AdminChanges != 4 || st.Reloads != 0 {
		t.Fatalf("status: admin_changes %d, reloads %d; want 4 and 0", st.AdminChanges, st.Reloads)
	}
	if m := scrape(t, p); !strings.Contains(m, "keyshard_admin_changes_total 4") || !strings.Contains(m, "keyshard_config_reloads_total 0") {
		t.Errorf("/metrics: admin changes and reloads not 4 and 0")
	}

	// A reload that changes web_addr: applied, with a warning for the
	// client; the running address stays until a restart.
	b, err := os.ReadFile(p.File)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.File, []byte(strings.Replace(string(b), "web_addr: 127.0.0.1:19797", "web_addr: 127.0.0.1:19798", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := ks.Conn(context.Background()) // an admin with a schema: its SHOW WARNINGS can reach a backend
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mustExecConn(t, c, "admin reload")
	warn := queryRowsConn(t, c, "SHOW WARNINGS")
	if len(warn) != 1 || warn[0][0] != "Warning" || !strings.Contains(warn[0][2], "web_addr changed (127.0.0.1:19797 running, 127.0.0.1:19798 in the config): takes effect after a restart") {
		t.Fatalf("SHOW WARNINGS after admin reload: %v", warn)
	}
	if n := queryRowsConn(t, c, "SHOW COUNT(*) WARNINGS"); len(n) != 1 || n[0][0] != "1" {
		t.Fatalf("SHOW COUNT(*) WARNINGS: %v", n)
	}
	queryRowsConn(t, c, "SHOW PROXY STATUS")
	if warn := queryRowsConn(t, c, "SHOW WARNINGS"); len(warn) != 0 {
		t.Fatalf("SHOW WARNINGS after another statement: %v, want none", warn)
	}
	cfg := keyValue(queryRowsConn(t, c, "SHOW PROXY CONFIG"))
	if v := cfg["web_addr"]; v != "127.0.0.1:19797 (pending restart: the config has 127.0.0.1:19798)" {
		t.Fatalf("SHOW PROXY CONFIG web_addr: %q", v)
	}
	if st := p.Srv.Control().Status(); st.Reloads != 1 || st.AdminChanges != 4 {
		t.Fatalf("after a reload: reloads %d, admin_changes %d; want 1 and 4", st.Reloads, st.AdminChanges)
	}
	asked := p.Logs.FilterMessage("config reload asked for").All()
	if p.Logs.FilterMessage("config reloaded").Len() != 1 || len(asked) != 1 ||
		asked[0].ContextMap()["user"] != "ks" || asked[0].ContextMap()["via"] != "admin SQL" {
		t.Errorf("the reload is not logged once with who asked for it: %v", asked)
	}
	var rr struct {
		Result   string   `json:"result"`
		Warnings []string `json:"warnings"`
	}
	if code := rest(t, p, "PUT", "/api/v1/proxy/config/reload", "", true, &rr); code != 200 || len(rr.Warnings) != 1 {
		t.Fatalf("REST reload: %d %+v, want the web_addr warning", code, rr)
	}
}

// queryRowsConn runs q on c and returns its rows as strings (see scanRows).
func queryRowsConn(t *testing.T, c *sql.Conn, q string) [][]string {
	t.Helper()
	rows, err := c.QueryContext(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return scanRows(t, rows)
}

// SHOW PROCESSLIST lists keyshard's sessions: ids that CONNECTION_ID() and
// KILL use, the statement, where it runs; a user who is not an admin sees
// its own; FULL shows the whole text; a node hint lists the backend's.
func TestProcessList(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%")+"web_user: admin\nweb_password: webpw\n")
	ks := p.open(t, "ks:ks", "ks_test", "")
	c, err := ks.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var id string
	if err := c.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	long := "SELECT SLEEP(2), '" + strings.Repeat("x", 150) + "'"
	done := make(chan error, 1)
	go func() {
		_, err := c.ExecContext(context.Background(), long)
		done <- err
	}()
	adm := adminDB(t, p)
	var row []string
	var cols []string
	waitFor(t, "the statement in the process list", func() bool {
		cs, rows, err := mgFetch(context.Background(), adm, false, "SHOW PROCESSLIST")
		if err != nil {
			t.Fatal(err)
		}
		cols = cs
		for _, r := range rows {
			if r[0] == id && r[6] == "backend node1" { // the stage and its node are published one after the other
				row = r
				return true
			}
		}
		return false
	})
	if strings.Join(names(cols), ",") != "Id,User,Host,db,Command,Time,State,Info,Nodes" {
		t.Fatalf("columns: %v", cols)
	}
	if row[1] != "ks" || !strings.HasPrefix(row[2], "127.0.0.1:") || row[3] != "ks_test" || row[4] != "Query" || row[6] != "backend node1" ||
		row[7] != long[:100] || row[8] != "node1" {
		t.Fatalf("process row: %q", row)
	}
	// FULL: the whole statement; REST too.
	_, rows, err := mgFetch(context.Background(), adm, false, "SHOW FULL PROCESSLIST")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rows {
		found = found || r[0] == id && r[7] == long
	}
	if !found {
		t.Fatalf("SHOW FULL PROCESSLIST has not the whole statement: %q", rows)
	}
	var procs []proxy.Process
	if code := rest(t, p, "GET", "/api/v1/processlist?full=1", "", true, &procs); code != 200 ||
		!slices.ContainsFunc(procs, func(pr proxy.Process) bool { return fmt.Sprint(pr.ID) == id && pr.Info == long }) {
		t.Fatalf("REST processlist: %d %+v", code, procs)
	}
	// Another user sees its own sessions only.
	other := p.open(t, "other:other", "", "")
	_, rows, err = mgFetch(context.Background(), other, false, "SHOW PROCESSLIST")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 || slices.ContainsFunc(rows, func(r []string) bool { return r[1] != "other" }) {
		t.Fatalf("user other sees %q, want its own sessions only", rows)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Asleep between statements.
	_, rows, err = mgFetch(context.Background(), adm, false, "SHOW PROCESSLIST")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r[0] == id && (r[4] != "Sleep" || r[7] != mgNull || r[6] != "") {
			t.Fatalf("idle session: %q", r)
		}
	}
	// A node hint: the backend's own list (its columns, its threads).
	cs, rows, err := mgFetch(context.Background(), ks, false, "/*node1*/ SHOW PROCESSLIST")
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(names(cs), "Nodes") || !slices.ContainsFunc(rows, func(r []string) bool { return r[7] == "/*node1*/ SHOW PROCESSLIST" && r[0] != id }) {
		t.Fatalf("/*node1*/ SHOW PROCESSLIST: %v %q", cs, rows)
	}
	// KILL takes the listed id.
	mustExec(t, adm, "KILL "+id)
	waitFor(t, "the killed session gone from the list", func() bool {
		_, rows, err := mgFetch(context.Background(), adm, false, "SHOW PROCESSLIST")
		return err == nil && !slices.ContainsFunc(rows, func(r []string) bool { return r[0] == id })
	})
}

// names are the column names of mgFetch's columns ("name TYPE").
func names(cols []string) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i], _, _ = strings.Cut(c, " ")
	}
	return out
}
