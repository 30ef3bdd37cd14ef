package e2e

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// Clients that never log in cost keyshard what they sent, not what they
// announced: a packet header announcing 16 MiB after the greeting
// allocates nothing up front; one address may hold only
// max_unauthenticated_per_host connections that have not logged in; a
// packet over 64 KiB before login is refused with 1153; and a normal
// client logs in afterwards.
func TestHostilePreAuth(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%")+"max_unauthenticated_per_host: 12\n")
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	// Announcing 16 MiB before login: refused at once, nothing read.
	big := dialRaw(t, p.Addr)
	big.mustRead() // the greeting
	big.nc.Write([]byte{0xff, 0xff, 0xfe, 1})
	big.anySeq = true
	wantErrPacket(t, big.mustRead(), 1153, "before login")
	// Announcing 60 KiB and sending 10 bytes, 12 times: held, each
	// costing what arrived.
	var hostile []*rawConn
	for range 12 {
		r := dialRaw(t, p.Addr)
		r.mustRead()
		r.nc.Write([]byte{0x00, 0xf0, 0x00, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
		hostile = append(hostile, r)
	}
	// Let keyshard read the 12 headers and wait for the bodies.
	time.Sleep(300 * time.Millisecond)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 16<<20 {
		t.Fatalf("13 connections that never logged in made the heap grow by %d MiB", grew>>20)
	}
	// A 13th from the same address is refused at once.
	r := dialRaw(t, p.Addr)
	wantErrPacket(t, r.mustRead(), 1040, "still logging in (max_unauthenticated_per_host 12)")
	for _, h := range hostile {
		h.nc.Close()
	}
	waitFor(t, "the hostile connections to go", func() bool {
		r := dialRaw(t, p.Addr)
		pk := r.mustRead()
		r.nc.Close()
		return pk[0] != 0xff
	})
	// A client that logs in is served.
	db := p.open(t, "ks:ks", "", "")
	if got := queryCol(t, db, "SELECT 1"); len(got) != 1 || got[0] != "1" {
		t.Fatalf("a login after the hostile connections: %v", got)
	}
}

// serverAdmin is yaml with server_admin: true for user ks.
func serverAdmin(yaml string) string {
	return strings.Replace(yaml, "  - user: ks\n    password: ks\n", "  - user: ks\n    password: ks\n    server_admin: true\n", 1)
}

// wantErrPacket fails unless p is an ERR packet with errno code whose
// message contains substr.
func wantErrPacket(t *testing.T, p []byte, code uint16, substr string) {
	t.Helper()
	if len(p) < 9 || p[0] != 0xff {
		t.Fatalf("want ERR %d, got %q", code, p)
	}
	got := binary.LittleEndian.Uint16(p[1:])
	msg := string(p[3:])
	if len(msg) > 6 && msg[0] == '#' {
		msg = msg[6:]
	}
	if got != code || !strings.Contains(msg, substr) {
		t.Fatalf("want ERR %d containing %q, got %d %q", code, substr, got, msg)
	}
}

// A frozen backend (SIGSTOP) turns a statement waiting on it into an
// error naming the node within backend_silence + connect_timeout, not a
// hang; a long query on a live backend is not cut; after SIGCONT the node
// serves again.
func TestFrozenBackend(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%")+"backend_silence: 300ms\nconnect_timeout: 1s\n")
	db := p.open(t, "ks:ks", "", "")
	// A live backend that answers after 1.5 s of silence: not cut.
	if got := queryCol(t, db, "SELECT SLEEP(1.5)"); len(got) != 1 || got[0] != "0" {
		t.Fatalf("SELECT SLEEP(1.5): %v", got)
	}
	pidb, err := os.ReadFile(filepath.Join(os.Getenv("KS_BACKENDS_DIR"), fmt.Sprint(basePort), "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(pidb)))
	proc, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	cont := func() { _ = proc.Signal(syscall.SIGCONT) }
	defer cont()
	// A statement in flight when the server froze.
	proc.Signal(syscall.SIGCONT)
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := db.Exec("SELECT SLEEP(1)")
		errc <- err
	}()
	time.Sleep(200 * time.Millisecond)
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-errc:
	case <-time.After(15 * time.Second):
		t.Fatal("a statement in flight on the frozen backend still waits after 15 s")
	}
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "node node1") || !strings.Contains(err.Error(), "sent nothing for 300ms and a new connection to it failed") {
		t.Fatalf("a statement in flight on the frozen backend: %v", err)
	}
	// A new statement on the frozen node: an error naming it, not a hang.
	_, err = db.Exec("SELECT SLEEP(0)")
	if err == nil || !strings.Contains(err.Error(), "node1") {
		t.Fatalf("a statement on the frozen backend: %v", err)
	}
	took2 := time.Since(start) - took
	cont()
	if took > 5*time.Second || took2 > 5*time.Second {
		t.Fatalf("the errors took %s and %s", took, took2)
	}
	t.Logf("frozen backend: statement in flight failed after %s, a new one after %s", took, took2)
	waitFor(t, "the node to serve again", func() bool {
		var one int
		return db.QueryRow("SELECT 1").Scan(&one) == nil && one == 1
	})
}

// A session may hold 16382 prepared statements, as MariaDB's default
// max_prepared_stmt_count; the next PREPARE gets 1461 and the session goes
// on.
func TestPreparedStatementCap(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	r, _ := rawLogin(t, p.Addr)
	_ = r.nc.SetDeadline(time.Now().Add(120 * time.Second))
	const n = 16383
	// All sent at once, then every answer read: a COM_STMT_PREPARE of
	// SELECT 1 answers with an OK, one column definition and an EOF.
	var batch []byte
	for range n {
		pk := append([]byte{0x16}, "SELECT 1"...)
		batch = append(batch, byte(len(pk)), 0, 0, 0)
		batch = append(batch, pk...)
	}
	go func() { _, _ = r.nc.Write(batch) }()
	r.anySeq = true
	for i := range n {
		p := r.mustRead()
		if i == n-1 {
			wantErrPacket(t, p, 1461, "Can't create more than max_prepared_stmt_count statements (current value: 16382)")
			break
		}
		if p[0] != 0x00 {
			t.Fatalf("PREPARE %d: %q", i+1, p)
		}
		r.mustRead() // the column definition
		r.mustRead() // EOF
	}
	// The session goes on.
	r.seq = 0
	r.writePacket(append([]byte{0x03}, "SELECT 1"...))
	if p := r.mustRead(); p[0] == 0xff {
		t.Fatalf("a query after the cap: %q", p)
	}
}

// Wrong passwords from one address are answered later and later from the
// third on; a login that succeeds clears the count.
func TestFailedLoginsSlowed(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	tryLogin := func(pw string) (time.Duration, error) {
		start := time.Now()
		db := p.open(t, "ks:"+pw, "", "")
		err := db.Ping()
		return time.Since(start), err
	}
	var took time.Duration
	for i := range 4 {
		d, err := tryLogin("wrong")
		wantErrContains(t, "a wrong password", err, 1045, "Access denied")
		if i == 3 {
			took = d
		}
	}
	// The fourth failure waits 500 ms before its answer.
	if took < 450*time.Millisecond {
		t.Fatalf("the fourth wrong password was answered after %s, want at least 500ms", took)
	}
	if _, err := tryLogin("ks"); err != nil {
		t.Fatalf("the right password: %v", err)
	}
	if d, _ := tryLogin("wrong"); d > 2*time.Second {
		t.Fatalf("after a success the count starts again, yet a failure took %s", d)
	}
	if got := metricValue(scrape(t, p), `keyshard_client_connections_rejected_total{reason="auth"}`); got != 5 {
		t.Errorf("rejected logins counted: %v, want 5", got)
	}
}

// The web port admits the addresses of web_allow_ips (else allow_ips)
// only: a refused address gets 403 on /metrics and on the REST API, whose
// allow_ips changes it therefore cannot use to let itself in.
func TestWebAllowIPs(t *testing.T) {
	get := func(p *testProxy, path string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", p.Web+path, nil)
		req.SetBasicAuth("admin", "webpw")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	web := "web_user: admin\nweb_password: webpw\n"
	p := startProxy(t, baseYAML("%ADDR%")+web+"web_allow_ips: 10.0.0.0/8\n")
	for _, path := range []string{"/metrics", "/api/v1/proxy/allow_ips", "/debug/pprof/", "/healthz"} {
		if code := get(p, path); code != http.StatusForbidden {
			t.Errorf("GET %s from 127.0.0.1, not in web_allow_ips: %d, want 403", path, code)
		}
	}
	// The SQL port follows allow_ips (empty: everyone).
	if got := queryCol(t, p.open(t, "ks:ks", "", ""), "SELECT 1"); len(got) != 1 {
		t.Fatalf("SQL from 127.0.0.1: %v", got)
	}
	// Without web_allow_ips, allow_ips rules the web port too.
	p = startProxy(t, baseYAML("%ADDR%")+web+"allow_ips: 127.0.0.1\n")
	if code := get(p, "/metrics"); code != http.StatusOK {
		t.Errorf("GET /metrics from 127.0.0.1, in allow_ips: %d, want 200", code)
	}
	p = startProxy(t, baseYAML("%ADDR%")+web+"allow_ips: 10.1.2.3\n")
	if code := get(p, "/metrics"); code != http.StatusForbidden {
		t.Errorf("GET /metrics from 127.0.0.1, not in allow_ips: %d, want 403", code)
	}
}

// A proxy user runs no server administration on the shared backend
// account unless its user_list entry says server_admin: true.
func TestServerAdminPolicy(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	db := p.open(t, "ks:ks", "ks_test", "")
	for _, q := range []string{
		"SHUTDOWN",
		"/*!50000 SHUTDOWN */",
		"SET GLOBAL max_connections = 1000",
		"GRANT SELECT ON *.* TO 'ks'@'%'",
		"CREATE USER 'ks_evil'@'%' IDENTIFIED BY 'x'",
		"SET PASSWORD = PASSWORD('changed')",
		"INSTALL SONAME 'ha_blackhole'",
		"SELECT 1 INTO OUTFILE '/tmp/ks_outfile_test'",
		"LOAD DATA INFILE '/etc/hostname' INTO TABLE t",
		"SELECT 1; SET GLOBAL max_connections = 1000",
		"PREPARE s FROM 'SET GLOBAL max_connections = 1000'",
		"EXECUTE IMMEDIATE 'SHUTDOWN'",
		"SELECT 1; /* c */ SET GLOBAL max_connections = 1000",
		"SELECT 1 # '\n; /*M! SET GLOBAL max_connections = 1000 */ # '",
		"EXECUTE IMMEDIATE CONCAT('SET GLOBAL max_connections', ' = 1000')",
		"EXECUTE IMMEDIATE 'SET GLOBAL ' 'max_connections = 1000'",
		"SELECT LOAD_FILE('/etc/hostname')",
		"FLUSH PRIVILEGES",
	} {
		_, err := db.Exec(q)
		wantErrContains(t, q, err, 1227, "may not run")
	}
	// With NO_BACKSLASH_ESCAPES a backslash ends no string: the gate reads
	// the batch as the server does.
	nbe := p.open(t, "ks:ks", "ks_test", "multiStatements=true")
	nbe.SetMaxOpenConns(1)
	mustExec(t, nbe, "SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES'")
	_, err := nbe.Exec(`SELECT '\'; SET GLOBAL max_connections = 1000; -- '`)
	wantErrContains(t, "a batch hidden by NO_BACKSLASH_ESCAPES", err, 1227, "may not run SET GLOBAL")
	// COM_REFRESH (FLUSH, RESET MASTER) is server administration too.
	if pk := command(t, goMySQL(t, p.Addr), mysql.COM_REFRESH, 0x01); pk[0] != 0xff || errCode(pk) != 1227 {
		t.Errorf("COM_REFRESH: answer %q, want 1227", pk)
	}
	if _, err := db.Prepare("SET GLOBAL max_connections = 1000"); err == nil || !strings.Contains(err.Error(), "1227") {
		t.Errorf("prepared SET GLOBAL: %v, want 1227", err)
	}
	// The backend is up, the session goes on.
	if got := queryCol(t, db, "SELECT 1"); len(got) != 1 {
		t.Fatalf("after the refusals: %v", got)
	}
	// server_admin: true lets a user.
	admin := startProxy(t, serverAdmin(baseYAML("%ADDR%"))).open(t, "ks:ks", "ks_test", "")
	var cur string
	if err := admin.QueryRow("SELECT @@global.max_connections").Scan(&cur); err != nil {
		t.Fatal(err)
	}
	mustExec(t, admin, "SET GLOBAL max_connections = "+cur)
}

// With login_lockout_failures, an address that failed that many logins
// within a minute is refused (1129) for login_lockout_time, even with the
// right password, then served again.
func TestLoginLockout(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%")+"login_lockout_failures: 3\nlogin_lockout_time: 2s\n")
	for range 3 {
		wantErrContains(t, "a wrong password", p.open(t, "ks:wrong", "", "").Ping(), 1045, "Access denied")
	}
	wantErrContains(t, "the right password from a locked-out address", p.open(t, "ks:ks", "", "").Ping(), 1129,
		"is blocked after 3 failed logins (login_lockout_failures)")
	waitFor(t, "the lockout to end", func() bool { return p.open(t, "ks:ks", "", "").Ping() == nil })
}

// Refused COM_CHANGE_USERs count with the address's failed logins: a
// client that logged in once and guesses passwords by changing user is
// locked out as one that reconnects.
func TestLoginLockoutChangeUser(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%")+"login_lockout_failures: 3\nlogin_lockout_time: 2s\n")
	c := userLogin(t, p.Addr)
	for i := range 3 {
		if ans, _ := c.changeUser(t, "other", fmt.Sprintf("guess%d", i), ""); ans[0] != mysql.ERR_HEADER {
			t.Fatalf("guess %d: %q, want ERR 1045", i, ans)
		}
	}
	wantErrContains(t, "the right password from a locked-out address", p.open(t, "ks:ks", "", "").Ping(), 1129,
		"is blocked after 3 failed logins (login_lockout_failures)")
}

// The SQL blacklist matches the parsed statement: none of the forms the
// server reads as the blacklisted one runs, through a batch, a PREPARE,
// an EXECUTE IMMEDIATE or the binary protocol; other statements do.
func TestBlacklistEquivalents(t *testing.T) {
	bl := filepath.Join(t.TempDir(), "black.sql")
	if err := os.WriteFile(bl, []byte("DELETE FROM bl_eq WHERE id = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, baseYAML("%ADDR%")+"blacklist_sql_file: "+bl+"\n")
	db := p.open(t, "ks:ks", "ks_test", "multiStatements=true")
	db.SetMaxOpenConns(1)
	mustExec(t, db, "DROP TABLE IF EXISTS bl_eq")
	mustExec(t, db, "CREATE TABLE bl_eq (id INT PRIMARY KEY, v INT)")
	mustExec(t, db, "INSERT INTO bl_eq VALUES (1, 1), (2, 2), (3, 3)")
	forms := []string{
		"DELETE FROM bl_eq WHERE id = 1",
		"delete from bl_eq where id=3",
		"DELETE FROM `bl_eq` WHERE `id` = 1",
		"DELETE FROM ks_test.bl_eq WHERE id = 1",
		"DELETE FROM `ks_test`.`bl_eq` WHERE bl_eq.id = 1",
		"DELETE FROM bl_eq WHERE ks_test.bl_eq.id = 1",
		"DELETE FROM BL_EQ WHERE ID = 1",
		"DELETE FROM bl_eq WHERE (id = 1)",
		"DELETE FROM bl_eq WHERE 1=1 AND id = 1",
		"DELETE FROM bl_eq WHERE id = 1 AND 1",
		"DELETE FROM bl_eq WHERE (1 = 1) AND (id = 1) AND 'x' = 'x'",
		"DELETE FROM bl_eq WHERE 0 OR id = 1",
		"DELETE FROM bl_eq WHERE NOT 0 AND id = 1",
		"/*!40101 DELETE FROM bl_eq WHERE id = 1 */",
		"/*!DELETE FROM bl_eq WHERE id = 1*/",
		"/*M!100300 DELETE FROM bl_eq WHERE id = 1 */",
		"DELETE /*!FROM bl_eq*/ WHERE id = 1",
		"DELETE /* c */ FROM bl_eq -- c\n WHERE id = 1",
		"DELETE FROM bl_eq WHERE id = 0x01",
		"SELECT 1; DELETE FROM bl_eq WHERE id = 1",
		"DO 1; /*!DELETE FROM bl_eq WHERE id = 1 */",
		"PREPARE s FROM 'DELETE FROM bl_eq WHERE id = 1'",
		"PREPARE s FROM \"delete from bl_eq where id = ?\"",
		"EXECUTE IMMEDIATE 'DELETE FROM bl_eq WHERE id = 1'",
		"EXECUTE IMMEDIATE 'DELETE FROM bl_eq WHERE id = ?' USING 1",
		"SELECT 1; EXECUTE IMMEDIATE 'DELETE FROM bl_eq WHERE id = 1'",
	}
	for _, q := range forms {
		if _, err := db.Exec(q); err == nil || !strings.Contains(err.Error(), "Error 1290") || !strings.Contains(err.Error(), "SQL blacklist") {
			t.Errorf("%q: %v, want 1290 (SQL blacklist)", q, err)
		}
	}
	// The binary protocol is checked at PREPARE.
	if _, err := db.Prepare("DELETE FROM `bl_eq` WHERE 1 AND id = ?"); err == nil || !strings.Contains(err.Error(), "1290") {
		t.Errorf("prepared form: %v, want 1290", err)
	}
	// A user variable's text is read from the session and checked; a text
	// whose statement cannot be seen is refused while a blacklist is on.
	mustExec(t, db, "SET @q = 'DELETE FROM bl_eq WHERE id = 1'")
	for _, q := range []string{"PREPARE s FROM @q", "EXECUTE IMMEDIATE @q"} {
		_, err := db.Exec(q)
		wantErrContains(t, q, err, 1290, "SQL blacklist")
	}
	for _, q := range []string{"EXECUTE IMMEDIATE CONCAT('DELETE FROM bl_eq ', 'WHERE id = 1')", "PREPARE s FROM 'DELETE FROM bl_eq' ' WHERE id = 1'"} {
		_, err := db.Exec(q)
		wantErrContains(t, q, err, 1235, "cannot be checked")
	}
	mustExec(t, db, "SET @ok = 'SELECT * FROM bl_eq'")
	mustExec(t, db, "PREPARE s FROM @ok")
	if got := queryCol(t, db, "SELECT COUNT(*) FROM bl_eq"); len(got) != 1 || got[0] != "3" {
		t.Fatalf("rows after the refusals: %v, want 3", got)
	}
	// Statements of other shapes run, the session goes on.
	for _, q := range []string{
		"DELETE FROM bl_eq WHERE id = 1 AND v = 5",
		"DELETE FROM bl_eq WHERE id > 2",
		"PREPARE s FROM 'SELECT * FROM bl_eq WHERE id = 1'",
		"EXECUTE IMMEDIATE 'UPDATE bl_eq SET v = 7 WHERE id = 2'",
	} {
		mustExec(t, db, q)
	}
	if got := queryCol(t, db, "SELECT COUNT(*) FROM bl_eq"); len(got) != 1 || got[0] != "2" {
		t.Fatalf("rows after the allowed statements: %v, want 2", got)
	}
}

// A user_list entry with backend_user runs on that backend account (its own
// pools), so the server's grants apply too; read_only and no_ddl refuse
// their classes with 1227 in keyshard before any backend sees them.
func TestUserPolicies(t *testing.T) {
	for _, port := range []int{basePort, basePort + 1} {
		d := direct(t, port, "")
		mustExec(t, d, "CREATE DATABASE IF NOT EXISTS ks_test")
		mustExec(t, d, "CREATE USER IF NOT EXISTS 'ks_reader'@'127.0.0.1' IDENTIFIED BY 'rpw'")
		mustExec(t, d, "GRANT SELECT ON ks_test.* TO 'ks_reader'@'127.0.0.1'")
	}
	yaml := strings.Replace(baseYAML("%ADDR%"), `  - user: other
    password: other
`, `  - user: other
    password: other
  - user: viewer
    password: vpw
    backend_user: ks_reader
    backend_password: rpw
  - user: ro
    password: ropw
    read_only: true
  - user: noddl
    password: ndpw
    no_ddl: true
`, 1)
	yaml = strings.Replace(yaml, "schema_list:\n", `schema_list:
  - user: viewer
    nodes: [node1, node2]
    default: node1
    shard:
      -
  - user: ro
    nodes: [node1, node2]
    default: node1
    shard:
      -
  - user: noddl
    nodes: [node1, node2]
    default: node1
    shard:
      -
`, 1)
	p := startProxy(t, yaml)
	ks := p.open(t, "ks:ks", "ks_test", "")
	mustExec(t, ks, "DROP TABLE IF EXISTS pol_t")
	mustExec(t, ks, "CREATE TABLE pol_t (id INT PRIMARY KEY, v INT)")
	mustExec(t, ks, "INSERT INTO pol_t VALUES (1, 1)")

	// viewer: the backend's own grants (SELECT only) apply, as ks_reader.
	viewer := p.open(t, "viewer:vpw", "ks_test", "")
	if got := queryCol(t, viewer, "SELECT CURRENT_USER()"); len(got) != 1 || got[0] != "ks_reader@127.0.0.1" {
		t.Fatalf("viewer's backend account: %v, want ks_reader@127.0.0.1", got)
	}
	if got := queryCol(t, viewer, "SELECT v FROM pol_t WHERE id = 1"); len(got) != 1 || got[0] != "1" {
		t.Fatalf("viewer reads: %v", got)
	}
	_, err := viewer.Exec("INSERT INTO pol_t VALUES (2, 2)")
	wantErrContains(t, "viewer's INSERT", err, 1142, "INSERT command denied to user 'ks_reader'")
	// The other users' connections stay on the node's account.
	if got := queryCol(t, ks, "SELECT CURRENT_USER()"); len(got) != 1 || got[0] != "ks@127.0.0.1" {
		t.Fatalf("ks's backend account: %v", got)
	}

	// ro: reads and session statements run; anything that may write is
	// refused by keyshard, through every door.
	ro := p.open(t, "ro:ropw", "ks_test", "multiStatements=true")
	ro.SetMaxOpenConns(1)
	for _, q := range []string{"SELECT v FROM pol_t", "SHOW TABLES", "SET @x = 1", "BEGIN", "SELECT * FROM pol_t FOR UPDATE", "COMMIT",
		"EXPLAIN SELECT * FROM pol_t", "PREPARE s FROM 'SELECT 1'", "EXECUTE IMMEDIATE 'SELECT 1'"} {
		mustExec(t, ro, q)
	}
	for _, q := range []string{
		"INSERT INTO pol_t VALUES (3, 3)",
		"UPDATE pol_t SET v = 9",
		"/*!DELETE FROM pol_t*/",
		"SELECT 1; DELETE FROM pol_t",
		"PREPARE s FROM 'DELETE FROM pol_t'",
		"EXECUTE IMMEDIATE 'DELETE FROM pol_t'",
		"LOAD DATA LOCAL INFILE '/dev/null' INTO TABLE pol_t",
		"ANALYZE DELETE FROM pol_t",
	} {
		_, err := ro.Exec(q)
		wantErrContains(t, q, err, 1227, "may not run a statement that may change data (its user_list entry sets read_only)")
	}
	_, err = ro.Exec("DROP TABLE pol_t")
	wantErrContains(t, "ro's DROP", err, 1227, "may not run DDL")
	if _, err := ro.Prepare("UPDATE pol_t SET v = ?"); err == nil || !strings.Contains(err.Error(), "1227") {
		t.Errorf("ro's prepared UPDATE: %v, want 1227", err)
	}

	// noddl: data yes, schema no, through a variable's text either.
	noddl := p.open(t, "noddl:ndpw", "ks_test", "")
	noddl.SetMaxOpenConns(1)
	mustExec(t, noddl, "SET @q = 'DROP TABLE pol_t'")
	_, err = noddl.Exec("PREPARE s FROM @q")
	wantErrContains(t, "noddl's PREPARE FROM @q", err, 1227, "may not run DDL")
	mustExec(t, noddl, "SET @q = 'SELECT 1'")
	mustExec(t, noddl, "PREPARE s FROM @q")
	mustExec(t, noddl, "INSERT INTO pol_t VALUES (4, 4)")
	for _, q := range []string{"CREATE TABLE pol_u (id INT)", "ALTER TABLE pol_t ADD c INT", "DROP TABLE pol_t", "TRUNCATE TABLE pol_t", "RENAME TABLE pol_t TO pol_u"} {
		_, err := noddl.Exec(q)
		wantErrContains(t, q, err, 1227, "may not run DDL (CREATE, ALTER, DROP, RENAME, TRUNCATE) (its user_list entry sets no_ddl or read_only)")
	}
	if got := queryCol(t, ks, "SELECT COUNT(*) FROM pol_t"); len(got) != 1 || got[0] != "2" {
		t.Fatalf("rows after the refusals: %v, want 2", got)
	}
}

// Failed basic-auth logins on the web port are slowed, logged and locked
// out as the SQL port's are; a request without credentials (a browser's
// first try) is not a failure.
func TestWebLoginThrottle(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%")+"web_user: admin\nweb_password: webpw\nlogin_lockout_failures: 4\nlogin_lockout_time: 2s\n")
	get := func(user, pw string) (int, time.Duration) {
		t.Helper()
		req, _ := http.NewRequest("GET", p.Web+"/api/v1/proxy/allow_ips", nil)
		if user != "" {
			req.SetBasicAuth(user, pw)
		}
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}
	for range 5 {
		if code, _ := get("", ""); code != http.StatusUnauthorized {
			t.Fatalf("no credentials: %d, want 401", code)
		}
	}
	var took time.Duration
	for i := range 3 {
		code, d := get("admin", "guess")
		if code != http.StatusUnauthorized {
			t.Fatalf("wrong password: %d, want 401", code)
		}
		took = d
		if i == 0 && d > time.Second {
			t.Fatalf("the first failure took %s: requests without credentials were counted", d)
		}
	}
	if took < 200*time.Millisecond {
		t.Fatalf("the third wrong password was answered after %s, want at least 250ms", took)
	}
	if code, _ := get("admin", "webpw"); code != http.StatusOK {
		t.Fatalf("right password: %d", code)
	}
	// The success cleared the count: four more failures lock the address.
	for range 4 {
		if code, _ := get("admin", "guess"); code != http.StatusUnauthorized {
			t.Fatalf("wrong password: %d, want 401", code)
		}
	}
	if code, _ := get("admin", "webpw"); code != http.StatusTooManyRequests {
		t.Fatalf("right password from a locked-out address: %d, want 429", code)
	}
	// The SQL port keeps its own count.
	if got := queryCol(t, p.open(t, "ks:ks", "", ""), "SELECT 1"); len(got) != 1 {
		t.Fatalf("SQL login: %v", got)
	}
	waitFor(t, "the web lockout to end", func() bool { code, _ := get("admin", "webpw"); return code == http.StatusOK })
	if got := metricValue(scrape(t, p), `keyshard_client_connections_rejected_total{reason="web_auth"}`); got != 7 {
		t.Errorf("failed web logins counted: %v, want 7", got)
	}
}

// When a transaction's backend connection dies (here a branch of a
// transaction over two nodes, killed on node2), the next command gets one
// error packet naming the node, and nothing after it: the client's
// connection then ends (the transaction is gone) or, after a failed
// COMMIT that rolled back every node, goes on.
func TestLostBranchOneError(t *testing.T) {
	setupShardDB(t)
	p := startProxy(t, shardYAML("%ADDR%"))
	mustExec(t, p.open(t, "ks:ks", "shard_e2e", ""), "CREATE TABLE sh_user (id BIGINT PRIMARY KEY, name VARCHAR(32) NOT NULL DEFAULT '', n INT NOT NULL DEFAULT 0)")
	node2 := direct(t, basePort+1, "")
	for i, c := range []struct {
		stmt, want string
		ends       bool
	}{
		{"SELECT * FROM sh_user", "node node2 (127.0.0.1:", true},
		{"UPDATE sh_user SET n = n + 1", "keyshard: node node2 (127.0.0.1:", true},
		{"SELECT * FROM sh_user WHERE id = 5", "node node2 (127.0.0.1:", true},
		{"COMMIT", "the transaction was rolled back on every node", false},
	} {
		cl := goMySQL(t, p.Addr)
		if _, err := cl.Execute("USE shard_e2e"); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"BEGIN", fmt.Sprintf("INSERT INTO sh_user (id) VALUES (%d), (%d)", 100*i+1, 100*i+5)} {
			if _, err := cl.Execute(q); err != nil {
				t.Fatal(q, err)
			}
		}
		// The branch's thread on node2 (InnoDB refreshes this table at
		// most every 100 ms: wait for the new transaction to show).
		var tid string
		waitFor(t, "the branch on node2", func() bool {
			time.Sleep(150 * time.Millisecond)
			live := queryCol(t, node2, "SELECT id FROM information_schema.processlist")
			for _, id := range queryCol(t, node2, "SELECT trx_mysql_thread_id FROM information_schema.innodb_trx") {
				if id != tid && slices.Contains(live, id) {
					tid = id
					return true
				}
			}
			return false
		})
		mustExec(t, node2, "KILL "+tid)
		pk := command(t, cl, append([]byte{mysql.COM_QUERY}, c.stmt...)...)
		if pk[0] != 0xff || !strings.Contains(string(pk), c.want) {
			t.Fatalf("%s: answer %q, want one error containing %q", c.stmt, pk, c.want)
		}
		_ = cl.SetDeadline(time.Now().Add(300 * time.Millisecond))
		extra, err := cl.ReadPacket()
		switch {
		case err == nil:
			t.Fatalf("%s: a second packet after the error: %q", c.stmt, extra)
		case c.ends && !strings.Contains(err.Error(), "EOF"):
			t.Fatalf("%s: the connection should end after the lost transaction: %v", c.stmt, err)
		case !c.ends && !strings.Contains(err.Error(), "timeout"):
			t.Fatalf("%s: the connection should go on: %v", c.stmt, err)
		}
	}
	if got := queryCol(t, p.open(t, "ks:ks", "shard_e2e", ""), "SELECT COUNT(*) FROM sh_user"); len(got) != 1 || got[0] != "0" {
		t.Fatalf("rows of the lost transactions: %v, want none", got)
	}
}

// pprof asks for the web credentials unless web_pprof_auth is false;
// /metrics does with web_metrics_auth; /healthz never does.
func TestWebEndpointAuth(t *testing.T) {
	get := func(p *testProxy, path, user, pw string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", p.Web+path, nil)
		if user != "" {
			req.SetBasicAuth(user, pw)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	web := "web_user: admin\nweb_password: webpw\n"
	for _, c := range []struct {
		yaml, path, user string
		want             int
	}{
		{web, "/debug/pprof/", "", http.StatusUnauthorized},
		{web, "/debug/pprof/cmdline", "", http.StatusUnauthorized},
		{web, "/debug/pprof/", "admin", http.StatusOK},
		{web, "/metrics", "", http.StatusOK},
		{web, "/healthz", "", http.StatusOK},
		{web + "web_metrics_auth: true\n", "/metrics", "", http.StatusUnauthorized},
		{web + "web_metrics_auth: true\n", "/metrics", "admin", http.StatusOK},
		{web + "web_pprof_auth: false\n", "/debug/pprof/", "", http.StatusOK},
		{"", "/debug/pprof/", "", http.StatusForbidden}, // no credentials set: pprof is off
		{"web_pprof_auth: false\n", "/debug/pprof/", "", http.StatusOK},
	} {
		p := startProxy(t, baseYAML("%ADDR%")+c.yaml)
		if got := get(p, c.path, c.user, "webpw"); got != c.want {
			t.Errorf("%q with %q, user %q: %d, want %d", c.path, c.yaml, c.user, got, c.want)
		}
	}
}
