package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keyshard/keyshard/proxy/config"
)

// queryRows runs q and returns its rows as strings (see mgFetch).
func queryRows(t *testing.T, db mgQuerier, q string) [][]string {
	t.Helper()
	_, rows, err := mgFetch(context.Background(), db, false, q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return rows
}

// keyValue turns Key/Value rows into a map.
func keyValue(rows [][]string) map[string]string {
	m := map[string]string{}
	for _, r := range rows {
		m[r[0]] = r[1]
	}
	return m
}

// wantCode checks that err is a MySQL error with code (and, if set, a
// message containing msg).
func wantCode(t *testing.T, what string, err error, code uint16, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %d", what, code)
	}
	if got := myErrCode(err); got != code || !strings.Contains(err.Error(), msg) {
		t.Fatalf("%s: %v, want error %d containing %q", what, err, code, msg)
	}
}

func adminDB(t *testing.T, p *testProxy) *sql.DB {
	db := p.open(t, "root:rootpw", "", "")
	db.SetMaxOpenConns(1)
	return db
}

const showProxyConfig = "admin server(opt,k,v) values('show','proxy','config')"

func TestAdminShowAndPermissions(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	root := adminDB(t, p)
	ks := p.open(t, "ks:ks", "ks_test", "")

	// Non-admin users are refused every admin form, and their own SHOWs
	// still reach the backend.
	for _, q := range []string{showProxyConfig, "SHOW PROXY STATUS", "show backends", "admin help",
		"admin node(opt,node,k,v) values('down','node1','master','127.0.0.1:1')"} {
		_, err := ks.Exec(q)
		wantCode(t, q, err, 1227, "not a keyshard admin user")
	}
	if rows := queryRows(t, ks, "SHOW DATABASES LIKE 'ks_test'"); len(rows) != 1 {
		t.Fatalf("SHOW DATABASES through keyshard: %v", rows)
	}

	cfg := keyValue(queryRows(t, root, showProxyConfig))
	if cfg["addr"] != p.Addr || cfg["nodes_count"] != "3" || cfg["nodes_list"] != "node1,node2,node3" || cfg["config_file"] != p.File {
		t.Errorf("show proxy config: %v", cfg)
	}
	for k, v := range cfg {
		if strings.Contains(v, "rootpw") {
			t.Errorf("show proxy config leaks a password in %s", k)
		}
	}
	if got := keyValue(queryRows(t, root, "SHOW PROXY CONFIG")); fmt.Sprint(got) != fmt.Sprint(cfg) {
		t.Errorf("SHOW PROXY CONFIG %v != admin form %v", got, cfg)
	}
	st := keyValue(queryRows(t, root, "show proxy status;"))
	if st["status"] != "online" || st["nodes"] != "3" || st["sessions"] < "1" {
		t.Errorf("show proxy status: %v", st)
	}
	be := queryRows(t, root, "admin server(opt,k,v) values('show','node','config')")
	if len(be) != 3 || be[0][0] != "node1" || be[0][1] != fmt.Sprintf("127.0.0.1:%d", basePort) || be[0][2] != "master" || be[0][3] != "up" {
		t.Errorf("show node config: %v", be)
	}
	if got := queryRows(t, root, "SHOW BACKENDS"); len(got) != 3 {
		t.Errorf("SHOW BACKENDS: %v", got)
	}
	rules := queryRows(t, root, "SHOW SHARD RULES")
	if len(rules) != 2 || rules[0][0] != "ks" || rules[0][3] != "default" || rules[0][5] != "node1" {
		t.Errorf("SHOW SHARD RULES: %v", rules)
	}
	if help := queryRows(t, root, "ADMIN HELP"); len(help) < 15 {
		t.Errorf("admin help: %d rows", len(help))
	}

	// Bad statements: syntax (1064) and arguments (1210); the session
	// goes on.
	for _, c := range []struct {
		q    string
		code uint16
		msg  string
	}{
		{"admin server(opt,k) values('show','proxy')", 1064, "takes columns (opt,k,v)"},
		{"admin server(opt,k,v) values('show','proxy')", 1064, "takes 3 values"},
		{"admin server(opt,k,v) values('show','proxy','config'", 1064, "missing ')'"},
		{"admin bogus", 1064, "unknown region"},
		{"admin server(opt,k,v) values('explode','proxy','config')", 1210, "unknown opt"},
		{"admin server(opt,k,v) values('change','proxy','sideways')", 1210, "online or offline"},
		{"admin node(opt,node,k,v) values('down','nodeX','slave','127.0.0.1:1')", 1210, `no node "nodeX"`},
		{"admin node(opt,node,k,v) values('down','node1','master','127.0.0.1:1')", 1210, "master is 127.0.0.1:"},
		{"admin node(opt,node,k,v) values('add','node1','master','127.0.0.1:1')", 1210, "only a slave"},
		{"admin node(opt,node,k,v) values('add','node1','slave','nohost')", 1210, "want host:port"},
	} {
		_, err := root.Exec(c.q)
		wantCode(t, c.q, err, c.code, c.msg)
	}
	if got := keyValue(queryRows(t, root, "SHOW PROXY STATUS"))["status"]; got != "online" {
		t.Errorf("after errors: status %q", got)
	}
}

func TestAdminOfflineOnline(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	root := adminDB(t, p)
	ks := p.open(t, "ks:ks", "ks_test", "")
	ks.SetMaxOpenConns(1)
	ks.SetConnMaxIdleTime(0)
	if err := ks.Ping(); err != nil {
		t.Fatal(err)
	}
	mustExec(t, root, "admin server(opt,k,v) values('change','proxy','offline')")
	// New connections are refused with ER_SERVER_OFFLINE_MODE...
	fresh := p.open(t, "ks:ks", "ks_test", "")
	wantCode(t, "connect while offline", fresh.Ping(), 3032, "offline")
	// ...open sessions go on.
	var one int
	if err := ks.QueryRow("SELECT 1").Scan(&one); err != nil {
		t.Fatalf("open session while offline: %v", err)
	}
	if got := keyValue(queryRows(t, root, "SHOW PROXY STATUS"))["status"]; got != "offline" {
		t.Errorf("status %q, want offline", got)
	}
	// An admin user still logs in (as SUPER does in MySQL's offline_mode),
	// to put it back online.
	root2 := adminDB(t, p)
	root2.SetMaxIdleConns(0)
	mustExec(t, root2, "admin server(opt,k,v) values('change','proxy','online')")
	if err := p.open(t, "ks:ks", "ks_test", "").Ping(); err != nil {
		t.Fatalf("connect after online: %v", err)
	}
}

func TestAdminBlacklist(t *testing.T) {
	dir := t.TempDir()
	bl := filepath.Join(dir, "black.sql")
	if err := os.WriteFile(bl, []byte("# comments and blank lines are skipped\n\nDELETE FROM bl_t\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, baseYAML("%ADDR%")+"blacklist_sql_file: "+bl+"\n")
	root := adminDB(t, p)
	ks := p.open(t, "ks:ks", "ks_test", "")
	mustExec(t, ks, "DROP TABLE IF EXISTS bl_t")
	mustExec(t, ks, "CREATE TABLE bl_t (id INT PRIMARY KEY, v INT)")
	mustExec(t, ks, "INSERT INTO bl_t VALUES (1, 1), (2, 2)")

	// The file's entry is in force from the start.
	_, err := ks.Exec("delete   from BL_T")
	wantCode(t, "blacklisted DELETE", err, 1290, "SQL blacklist")

	mustExec(t, root, "admin server(opt,k,v) values('add','black_sql','select * from bl_t where id = 1')")
	// Any literal value, any case and spacing, text or prepared.
	_, err = ks.Query("SELECT *   FROM bl_t WHERE id = 42")
	wantCode(t, "blacklisted SELECT", err, 1290, "SELECT *   FROM bl_t WHERE id = 42")
	_, err = ks.Query("select * from bl_t where id = ?", 2)
	wantCode(t, "blacklisted prepared SELECT", err, 1290, "blacklist")
	// Other statements are untouched; the session goes on.
	var n int
	if err := ks.QueryRow("SELECT COUNT(*) FROM bl_t WHERE id = 1").Scan(&n); err != nil || n != 1 {
		t.Fatalf("other statement: %v %d", err, n)
	}
	got := queryRows(t, root, "SHOW PROXY BLACKLIST")
	if len(got) != 2 || got[0][0] != "DELETE FROM bl_t" || got[1][0] != "select * from bl_t where id = 1" {
		t.Errorf("blacklist: %v", got)
	}
	_, err = root.Exec("admin server(opt,k,v) values('add','black_sql','SELECT * FROM bl_t WHERE id = 7')")
	wantCode(t, "duplicate entry", err, 1210, "already in the blacklist")

	// save writes the file; del lifts the entry.
	mustExec(t, root, "admin server(opt,k,v) values('save','proxy','config')")
	data, _ := os.ReadFile(bl)
	if string(data) != "DELETE FROM bl_t\nselect * from bl_t where id = 1\n" {
		t.Errorf("saved blacklist file:\n%s", data)
	}
	mustExec(t, root, "admin server(opt,k,v) values('del','black_sql','select * from bl_t where id = 99')")
	if err := ks.QueryRow("SELECT v FROM bl_t WHERE id = 2").Scan(&n); err != nil || n != 2 {
		t.Fatalf("after del: %v %d", err, n)
	}
	_, err = root.Exec("admin server(opt,k,v) values('del','black_sql','select 1')")
	wantCode(t, "del of a missing entry", err, 1210, "not in the blacklist")
}

func TestAdminAllowIPs(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	root := adminDB(t, p)
	if err := root.Ping(); err != nil {
		t.Fatal(err)
	}
	mustExec(t, root, "admin server(opt,k,v) values('add','allow_ip','10.1.2.0/24')")
	// Only 10.1.2.0/24 may connect now: 127.0.0.1 is refused...
	wantCode(t, "connect from 127.0.0.1", p.open(t, "ks:ks", "", "").Ping(), 1130, "not allowed")
	// ...but the admin session is still open, and lets it in again.
	mustExec(t, root, "admin server(opt,k,v) values('add','allow_ip','127.0.0.1')")
	if err := p.open(t, "ks:ks", "", "").Ping(); err != nil {
		t.Fatalf("connect after allowing 127.0.0.1: %v", err)
	}
	got := queryRows(t, root, "admin server(opt,k,v) values('show','allow_ip','config')")
	if fmt.Sprint(got) != "[[10.1.2.0/24] [127.0.0.1]]" {
		t.Errorf("allow_ip config: %v", got)
	}
	_, err := root.Exec("admin server(opt,k,v) values('add','allow_ip','300.1.1.1')")
	wantCode(t, "bad address", err, 1210, "bad address")
	mustExec(t, root, "admin server(opt,k,v) values('del','allow_ip','127.0.0.1')")
	wantCode(t, "connect after del", p.open(t, "ks:ks", "", "").Ping(), 1130, "not allowed")
	mustExec(t, root, "admin server(opt,k,v) values('del','allow_ip','10.1.2.0/24')")
	// Empty again: everyone.
	if err := p.open(t, "ks:ks", "", "").Ping(); err != nil {
		t.Fatalf("connect with allow_ips empty: %v", err)
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	within(t, 5*time.Second, what, cond)
}

// within polls cond for up to d, and logs how long it took.
func within(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%s: after %s", what, time.Since(start).Round(time.Millisecond))
}

func fileContains(path, s string) bool {
	b, _ := os.ReadFile(path)
	return bytes.Contains(b, []byte(s))
}

func TestAdminLogSQLAndSlowLogTime(t *testing.T) {
	logs := t.TempDir()
	p := startProxy(t, baseYAML("%ADDR%")+"log_path: "+logs+"\n")
	root := adminDB(t, p)
	ks := p.open(t, "ks:ks", "ks_test", "")
	sqlLog, slowLog := filepath.Join(logs, "sql.log"), filepath.Join(logs, "slow.log")

	mustExec(t, ks, "SELECT 'before log_sql on'")
	mustExec(t, root, "admin server(opt,k,v) values('change','log_sql','on')")
	mustExec(t, ks, "SELECT 'after log_sql on'")
	waitFor(t, "the statement in sql.log", func() bool { return fileContains(sqlLog, "after log_sql on") })
	// Passwords never reach it.
	_, _ = ks.Exec("SET PASSWORD FOR 'nobody_ks'@'%' = PASSWORD('pw-never-logged')")
	mustExec(t, ks, "SELECT 'after the password'")
	waitFor(t, "the statement after the password in sql.log", func() bool { return fileContains(sqlLog, "after the password") })
	if fileContains(sqlLog, "pw-never-logged") || !fileContains(sqlLog, "PASSWORD('<redacted>')") {
		t.Errorf("sql.log: a password in clear, or its statement missing")
	}
	if fileContains(sqlLog, "before log_sql on") {
		t.Errorf("sql.log has a statement from before log_sql on")
	}
	mustExec(t, root, "admin server(opt,k,v) values('change','log_sql','off')")
	mustExec(t, ks, "SELECT 'after log_sql off'")

	mustExec(t, root, "admin server(opt,k,v) values('change','slow_log_time','100')")
	mustExec(t, ks, "SELECT SLEEP(0.2), 'slow one'")
	mustExec(t, ks, "SELECT 'fast one'")
	waitFor(t, "the slow statement in slow.log", func() bool { return fileContains(slowLog, "slow one") })
	time.Sleep(1200 * time.Millisecond) // the log writer flushes every second
	if fileContains(slowLog, "fast one") || fileContains(sqlLog, "after log_sql off") {
		t.Errorf("a fast statement in slow.log, or a statement logged after log_sql off")
	}
	if got := keyValue(queryRows(t, root, "SHOW PROXY CONFIG")); got["slow_log_time"] != "100" || got["log_sql"] != "off" {
		t.Errorf("config after changes: %v", got)
	}
	_, err := root.Exec("admin server(opt,k,v) values('change','slow_log_time','-5')")
	wantCode(t, "negative slow_log_time", err, 1210, "milliseconds")
}

func TestAdminSaveKeepsComments(t *testing.T) {
	p := startProxy(t, "# the test's config\n"+baseYAML("%ADDR%")+"log_sql: off # quiet\n")
	root := adminDB(t, p)
	mustExec(t, root, "admin server(opt,k,v) values('add','allow_ip','127.0.0.0/8')")
	mustExec(t, root, "admin server(opt,k,v) values('change','log_sql','on')")
	mustExec(t, root, "admin server(opt,k,v) values('change','slow_log_time','250')")
	mustExec(t, root, fmt.Sprintf("admin node(opt,node,k,v) values('add','node2','slave','127.0.0.1:%d@3')", basePort))
	mustExec(t, root, "admin server(opt,k,v) values('save','proxy','config')")
	data, err := os.ReadFile(p.File)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# the test's config", "# quiet", "log_sql: on", "slow_log_time: 250", "allow_ips: 127.0.0.0/8",
		fmt.Sprintf("slave: 127.0.0.1:%d@3", basePort)} {
		if !strings.Contains(string(data), want) {
			t.Errorf("saved file lacks %q:\n%s", want, data)
		}
	}
	cfg, _, err := config.Load(p.File)
	if err != nil {
		t.Fatalf("saved file does not load: %v", err)
	}
	n2, _ := cfg.Node("node2")
	if cfg.LogSQL != "on" || cfg.SlowLogTime != 250 || cfg.AllowIPs != "127.0.0.0/8" || n2.Slave != fmt.Sprintf("127.0.0.1:%d@3", basePort) {
		t.Errorf("saved config: log_sql %q slow %d allow %q slave %q", cfg.LogSQL, cfg.SlowLogTime, cfg.AllowIPs, n2.Slave)
	}
}

// A reload adds a user and its schema; an invalid file changes nothing;
// an open session is not dropped by either.
func TestAdminReload(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	root := adminDB(t, p)
	ks := p.open(t, "ks:ks", "ks_test", "")
	ks.SetMaxOpenConns(1)
	ks.SetConnMaxIdleTime(0)
	conn, err := ks.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	id := connID(t, conn)

	wantCode(t, "new user before reload", p.open(t, "newbie:nb", "ks_test", "").Ping(), 1045, "")
	yaml, _ := os.ReadFile(p.File)
	good := strings.Replace(string(yaml), "user_list:\n", "user_list:\n  - user: newbie\n    password: nb\n", 1) +
		"  - user: newbie\n    nodes: [node2]\n    default: node2\n    shard:\n      -\n"
	good = strings.Replace(good, "schema_list:\n", "schema_list:\n", 1)
	if err := os.WriteFile(p.File, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	mustExec(t, root, "admin reload")
	nb := p.open(t, "newbie:nb", "ks_test", "")
	var port int
	if err := nb.QueryRow("SELECT @@port").Scan(&port); err != nil || port != basePort+1 {
		t.Fatalf("new user after reload: port %d, %v", port, err)
	}
	if connID(t, conn) != id {
		t.Fatalf("the open session was replaced by the reload")
	}

	// An invalid file: an error naming the problem, and nothing changes.
	bad := strings.Replace(good, "default: node2", "default: node9", 1)
	if err := os.WriteFile(p.File, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = root.Exec("admin server(opt,k,v) values('reload','proxy','config')")
	wantCode(t, "reload of an invalid file", err, 1210, "node9")
	if err := nb.QueryRow("SELECT @@port").Scan(&port); err != nil || port != basePort+1 {
		t.Fatalf("after the failed reload: port %d, %v", port, err)
	}
	st := keyValue(queryRows(t, root, "SHOW PROXY STATUS"))
	if st["reload_errors"] != "1" || st["reloads"] != "1" {
		t.Errorf("status after one good and one bad reload: %v", st)
	}
	if connID(t, conn) != id {
		t.Fatalf("the open session was replaced")
	}
}

// rest calls the REST API and decodes the JSON answer into out (if set).
func rest(t *testing.T, p *testProxy, method, path, body string, auth bool, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, p.Web+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth {
		req.SetBasicAuth("admin", "webpw")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, data)
		}
	}
	return resp.StatusCode
}

func TestREST(t *testing.T) {
	// web_allow_ips keeps the web port open while allow_ips is edited (else
	// allow_ips would rule it too, and a removed address could not put
	// itself back).
	p := startProxy(t, baseYAML("%ADDR%")+"web_user: admin\nweb_password: webpw\nweb_allow_ips: 127.0.0.1\n")
	if code := rest(t, p, "GET", "/api/v1/proxy/status", "", false, nil); code != 401 {
		t.Fatalf("no auth: %d, want 401", code)
	}
	// kingshard answers the bare JSON string (LVS checks match it).
	var st any
	if code := rest(t, p, "GET", "/api/v1/proxy/status", "", true, &st); code != 200 || st != "online" {
		t.Fatalf("proxy status: %d %#v, want the JSON string \"online\"", code, st)
	}
	var nodes []map[string]any
	if code := rest(t, p, "GET", "/api/v1/nodes/status", "", true, &nodes); code != 200 || len(nodes) != 3 || nodes[0]["type"] != "master" {
		t.Fatalf("nodes status: %d %v", code, nodes)
	}
	// kingshard's shapes (its web/api.go DBStatus and ShardConfig): numbers
	// are JSON numbers, lists JSON lists, and every field of kingshard's is
	// there under kingshard's name (laste_ping, sic; Table, Nodes...).
	for _, n := range nodes {
		for _, k := range []string{"node", "address", "type", "status", "laste_ping"} {
			if _, ok := n[k].(string); !ok {
				t.Errorf("nodes/status %s: %#v, want a string", k, n[k])
			}
		}
		for _, k := range []string{"max_conn", "idle_conn", "cache_conn", "push_conn_count", "pop_conn_count"} {
			if _, ok := n[k].(float64); !ok {
				t.Errorf("nodes/status %s: %#v, want a number", k, n[k])
			}
		}
	}
	if nodes[0]["max_conn"] != float64(16) || nodes[0]["status"] != "up" {
		t.Errorf("nodes/status node1 master: %v", nodes[0])
	}
	var rules []map[string]any
	if code := rest(t, p, "GET", "/api/v1/proxy/schema", "", true, &rules); code != 200 || len(rules) == 0 {
		t.Fatalf("proxy/schema: %d %v", code, rules)
	}
	for _, r := range rules {
		for _, k := range []string{"user", "db", "Table", "Key", "Type"} {
			if _, ok := r[k].(string); !ok {
				t.Errorf("proxy/schema %s: %#v, want a string", k, r[k])
			}
		}
		if _, ok := r["TableRowLimit"].(float64); !ok {
			t.Errorf("proxy/schema TableRowLimit: %#v, want a number", r["TableRowLimit"])
		}
		for _, k := range []string{"Nodes", "Locations", "DateRange"} {
			if v, ok := r[k]; !ok {
				t.Errorf("proxy/schema: no %s in %v", k, r)
			} else if _, list := v.([]any); v != nil && !list {
				t.Errorf("proxy/schema %s: %#v, want a list or null", k, v)
			}
		}
	}
	if r := rules[0]; r["user"] != "ks" || r["Type"] != "default" || fmt.Sprint(r["Nodes"]) != "[node1 node2]" || r["Locations"] != nil {
		t.Errorf("proxy/schema default rule of ks: %v", r)
	}
	var slow any
	if rest(t, p, "GET", "/api/v1/proxy/slow_sql/time", "", true, &slow); slow == nil {
		t.Errorf("slow_sql/time: null")
	} else if _, ok := slow.(float64); !ok {
		t.Errorf("slow_sql/time: %#v, want a number", slow)
	}

	// offline refuses new connections; online again.
	var ok string
	if code := rest(t, p, "PUT", "/api/v1/proxy/status", `{"opt":"offline"}`, true, &ok); code != 200 || ok != "ok" {
		t.Fatalf("offline: %d %q", code, ok)
	}
	wantCode(t, "connect while offline", p.open(t, "ks:ks", "", "").Ping(), 3032, "offline")
	if rest(t, p, "GET", "/api/v1/proxy/status", "", true, &st); st != "offline" {
		t.Errorf("proxy status while offline: %#v", st)
	}
	rest(t, p, "PUT", "/api/v1/proxy/status", `{"opt":"online"}`, true, nil)
	if err := p.open(t, "ks:ks", "", "").Ping(); err != nil {
		t.Fatal(err)
	}

	// The master taken down: writes fail at once naming it; up again.
	master := fmt.Sprintf("127.0.0.1:%d", basePort)
	ks := p.open(t, "ks:ks", "ks_test", "")
	if code := rest(t, p, "PUT", "/api/v1/nodes/masters/status", `{"opt":"down","node":"node1","addr":"`+master+`"}`, true, nil); code != 200 {
		t.Fatalf("master down: %d", code)
	}
	_, err := ks.Exec("SELECT 1")
	wantCode(t, "statement on a master taken down", err, 1429, "node node1 ("+master+"): master is down (taken down by an admin command)")
	rest(t, p, "GET", "/api/v1/nodes/status", "", true, &nodes)
	if nodes[0]["status"] != "down" || nodes[0]["admin_down"] != true {
		t.Errorf("node1 master after down: %v", nodes[0])
	}
	rest(t, p, "PUT", "/api/v1/nodes/masters/status", `{"opt":"up","node":"node1","addr":"`+master+`"}`, true, nil)
	mustExec(t, ks, "SELECT 1")

	// allow_ips, black_sqls, slow_sql, config save and reload.
	rest(t, p, "POST", "/api/v1/proxy/allow_ips", `{"allow_ips":["127.0.0.1","10.0.0.0/8"]}`, true, nil)
	var ips []string
	rest(t, p, "GET", "/api/v1/proxy/allow_ips", "", true, &ips)
	if fmt.Sprint(ips) != "[127.0.0.1 10.0.0.0/8]" {
		t.Errorf("allow_ips: %v", ips)
	}
	// As kingshard, adding an entry already there (or deleting one that
	// is not, below) is no error.
	if code := rest(t, p, "POST", "/api/v1/proxy/allow_ips", `{"allow_ips":["10.0.0.0/8"]}`, true, &ok); code != 200 || ok != "ok" {
		t.Errorf("adding an allow_ips entry again: %d %q", code, ok)
	}
	rest(t, p, "DELETE", "/api/v1/proxy/allow_ips", `{"allow_ips":["127.0.0.1"]}`, true, nil)
	wantCode(t, "connect after deleting 127.0.0.1", p.open(t, "ks:ks", "", "").Ping(), 1130, "not allowed")
	rest(t, p, "DELETE", "/api/v1/proxy/allow_ips", `{"allow_ips":["10.0.0.0/8"]}`, true, nil)
	if code := rest(t, p, "DELETE", "/api/v1/proxy/allow_ips", `{"allow_ips":["10.0.0.0/8"]}`, true, &ok); code != 200 || ok != "ok" {
		t.Errorf("deleting an allow_ips entry not there: %d %q", code, ok)
	}

	rest(t, p, "POST", "/api/v1/proxy/black_sqls", `{"sql":"select 12345"}`, true, nil)
	_, err = ks.Exec("SELECT 999")
	wantCode(t, "blacklisted via REST", err, 1290, "blacklist")
	var sqls []string
	rest(t, p, "GET", "/api/v1/proxy/black_sqls", "", true, &sqls)
	if fmt.Sprint(sqls) != "[select 12345]" {
		t.Errorf("black_sqls: %v", sqls)
	}
	rest(t, p, "DELETE", "/api/v1/proxy/black_sqls", `{"sql":"select 1"}`, true, nil)
	mustExec(t, ks, "SELECT 999")
	var notThere map[string]string
	if code := rest(t, p, "DELETE", "/api/v1/proxy/black_sqls", `{"sql":"select 1"}`, true, &notThere); code != 404 || notThere["error"] == "" {
		t.Errorf("deleting a blacklist entry not there: %d %v, want 404 as kingshard", code, notThere)
	}

	rest(t, p, "PUT", "/api/v1/proxy/slow_sql/time", `{"slow_time":"75"}`, true, nil)
	var ms int
	rest(t, p, "GET", "/api/v1/proxy/slow_sql/time", "", true, &ms)
	if ms != 75 {
		t.Errorf("slow_sql/time = %d", ms)
	}
	rest(t, p, "PUT", "/api/v1/proxy/slow_sql/status", `{"opt":"on"}`, true, nil)
	if p.Srv.Config().LogSQL != "on" {
		t.Errorf("log_sql after slow_sql/status on: %q", p.Srv.Config().LogSQL)
	}
	if code := rest(t, p, "PUT", "/api/v1/proxy/config/save", "", true, nil); code != 200 {
		t.Fatalf("save: %d", code)
	}
	if !fileContains(p.File, "slow_log_time: 75") {
		t.Errorf("saved file lacks slow_log_time: 75")
	}
	var errBody map[string]string
	if code := rest(t, p, "PUT", "/api/v1/nodes/slaves/status", `{"opt":"down","node":"nope","addr":"1.2.3.4:5"}`, true, &errBody); code != 400 ||
		!strings.Contains(errBody["error"], `no node "nope"`) {
		t.Errorf("bad node: %d %v", code, errBody)
	}
	if code := rest(t, p, "PUT", "/api/v1/proxy/status", `{"opt":"x","extra":1}`, true, &errBody); code != 400 {
		t.Errorf("unknown field: %d %v", code, errBody)
	}
	var rl map[string]any
	if code := rest(t, p, "PUT", "/api/v1/proxy/config/reload", "", true, &rl); code != 200 || rl["result"] != "ok" {
		t.Errorf("reload: %d %v", code, rl)
	}
}

// max_connections on a user_list entry caps that user's sessions; others
// are not affected, and a closed session frees its slot.
func TestUserMaxConnections(t *testing.T) {
	y := strings.Replace(baseYAML("%ADDR%"), "  - user: ks\n    password: ks\n", "  - user: ks\n    password: ks\n    max_connections: 2\n", 1)
	p := startProxy(t, y)
	db := p.open(t, "ks:ks", "ks_test", "")
	ctx := context.Background()
	c1, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	for _, c := range []*sql.Conn{c1, c2} {
		if err := c.PingContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	third := p.open(t, "ks:ks", "ks_test", "")
	wantCode(t, "third session of ks", third.Ping(), 1226, "User 'ks' has exceeded the 'max_connections' resource")
	if err := p.open(t, "other:other", "", "").Ping(); err != nil {
		t.Fatalf("another user: %v", err)
	}
	// Drop c1's connection for good (not back to the idle pool).
	_ = c1.Raw(func(any) error { return driver.ErrBadConn })
	c1.Close()
	waitFor(t, "the slot to free", func() bool { return third.Ping() == nil })
}
