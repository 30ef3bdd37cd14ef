package e2e

import (
	"encoding/binary"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/proxy/users"
)

// accountsYAML is baseYAML with a server_admin user dba (schema on
// node1) whose schema and limits the backend's accounts get.
func accountsYAML() string {
	y := withUsers("backend_accounts:\n  template_user: dba\n", authUser{name: "dba", password: "dbapw"})
	return strings.Replace(y, "    password: dbapw\n", "    password: dbapw\n    server_admin: true\n", 1)
}

// currentUser logs in through p as userPass and returns CURRENT_USER()
// as the backend answers it, or the login's or the query's error.
func currentUser(t *testing.T, p *testProxy, userPass string) (string, error) {
	t.Helper()
	d := p.open(t, userPass, "ks_test", "")
	d.SetMaxIdleConns(0)
	var cu string
	err := d.QueryRow("SELECT CURRENT_USER()").Scan(&cu)
	return cu, err
}

// queryOne runs q on a hand-made connection and returns the first column
// of its one row (text protocol, CLIENT_DEPRECATE_EOF), or the error
// packet.
func (c *userConn) queryOne(t *testing.T, q string) (string, []byte) {
	t.Helper()
	ans := c.send(t, 0, append([]byte{mysql.COM_QUERY}, q...))
	if ans[0] == mysql.ERR_HEADER {
		return "", ans
	}
	if _, err := c.pkt.ReadPacket(); err != nil { // the column definition
		t.Fatal(err)
	}
	row, err := c.pkt.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	v, _, _, err := wire.ReadLenEncString(row, 0)
	if err != nil {
		t.Fatalf("row %q: %v", row, err)
	}
	if end, err := c.pkt.ReadPacket(); err != nil || end[0] != mysql.EOF_HEADER {
		t.Fatalf("end of rows: %q %v", end, err)
	}
	return string(v), nil
}

// Accounts of the backend (backend_accounts): one created through
// keyshard logs in (go-sql-driver, COM_CHANGE_USER, the mariadb CLI) and
// runs on the backend as itself, with its own grants; a wrong password is
// 1045; user_list and keyshard's admin names win over the backend's;
// locked accounts, other plugins and other hosts are refused; a dropped
// account is refused once the accounts are read again, which a failed
// login does at most once a second.
func TestBackendAccounts(t *testing.T) {
	root := direct(t, basePort, "")
	cleanup := func() {
		for _, u := range []string{"'ba_alice'@'%'", "'ba_bob'@'%'", "'ba_locked'@'%'", "'ba_sock'@'%'", "'ba_far'@'10.9.9.9'", "'other'@'%'", "'root'@'10.9.9.%'"} {
			if _, err := root.Exec("DROP USER IF EXISTS " + u); err != nil {
				t.Fatal(err)
			}
		}
	}
	cleanup()
	t.Cleanup(cleanup)
	p := startProxy(t, accountsYAML())
	dba := p.open(t, "dba:dbapw", "", "")
	for _, q := range []string{
		"CREATE USER 'ba_alice'@'%' IDENTIFIED BY 'alicepw'",
		"GRANT SELECT, INSERT ON ks_test.* TO 'ba_alice'@'%'",
	} {
		if _, err := dba.Exec(q); err != nil {
			t.Fatalf("through keyshard as dba: %s: %v", q, err)
		}
	}
	for _, q := range []string{
		"CREATE USER 'ba_locked'@'%' IDENTIFIED BY 'lockpw' ACCOUNT LOCK",
		"CREATE USER 'ba_sock'@'%' IDENTIFIED VIA unix_socket",
		"CREATE USER 'ba_far'@'10.9.9.9' IDENTIFIED BY 'farpw'",
		"CREATE USER 'other'@'%' IDENTIFIED BY 'backendpw'",
		"CREATE USER 'root'@'10.9.9.%' IDENTIFIED BY 'backendpw'",
	} {
		if _, err := root.Exec(q); err != nil {
			t.Fatalf("on the backend: %s: %v", q, err)
		}
	}

	// The new account logs in and runs as itself.
	cu, err := currentUser(t, p, "ba_alice:alicepw")
	if err != nil || cu != "ba_alice@%" {
		t.Fatalf("ba_alice: CURRENT_USER() = %q, %v; want ba_alice@%%", cu, err)
	}
	// Its grants are the server's: no CREATE USER.
	alice := p.open(t, "ba_alice:alicepw", "ks_test", "")
	_, err = alice.Exec("CREATE USER 'ba_x'@'%'")
	wantMySQLErr(t, "CREATE USER as ba_alice", err, mysql.ER_SPECIFIC_ACCESS_DENIED_ERROR, "")
	// ... nor keyshard's admin statements.
	_, err = alice.Exec("admin reload")
	if err == nil {
		t.Fatal("admin reload as a backend account succeeded")
	}

	_, err = currentUser(t, p, "ba_alice:wrong")
	wantMySQLErr(t, "ba_alice with a wrong password", err, mysql.ER_ACCESS_DENIED_ERROR, "28000")

	// user_list first; keyshard's admin names are never the backend's.
	if cu, err := currentUser(t, p, "other:other"); err != nil || cu != "ks@127.0.0.1" {
		t.Fatalf("other (user_list): %q %v", cu, err)
	}
	_, err = currentUser(t, p, "other:backendpw")
	wantMySQLErr(t, "other with the backend's password", err, mysql.ER_ACCESS_DENIED_ERROR, "28000")
	_, err = currentUser(t, p, "root:backendpw")
	wantMySQLErr(t, "root with the backend's password", err, mysql.ER_ACCESS_DENIED_ERROR, "28000")

	// Accounts keyshard cannot log in as, or not from here.
	for user, want := range map[string]string{
		"ba_locked:lockpw": "locked",
		"ba_sock:x":        "unix_socket",
		"ba_far:farpw":     "using password: YES",
	} {
		_, err := currentUser(t, p, user)
		me := wantMySQLErr(t, user, err, mysql.ER_ACCESS_DENIED_ERROR, "28000")
		if !strings.Contains(me.Message, want) {
			t.Errorf("%s: %q, want it to say %q", user, me.Message, want)
		}
	}

	// COM_CHANGE_USER to the account, and to it with a wrong password.
	c := userLogin(t, p.Addr)
	if ans, _ := c.changeUser(t, "ba_alice", "alicepw", "ks_test"); ans[0] != mysql.OK_HEADER {
		t.Fatalf("COM_CHANGE_USER to ba_alice: %q", ans)
	}
	if v, e := c.queryOne(t, "SELECT CURRENT_USER()"); e != nil || v != "ba_alice@%" {
		t.Fatalf("after COM_CHANGE_USER: CURRENT_USER() = %q %q", v, e)
	}
	if ans, _ := c.changeUser(t, "ks", "ks", "ks_test"); ans[0] != mysql.OK_HEADER {
		t.Fatalf("COM_CHANGE_USER back to ks: %q", ans)
	}
	if v, e := c.queryOne(t, "SELECT CURRENT_USER()"); e != nil || v != "ks@127.0.0.1" {
		t.Fatalf("back as ks: CURRENT_USER() = %q %q", v, e)
	}
	if ans, _ := c.changeUser(t, "ba_alice", "wrong", "ks_test"); ans[0] != mysql.ERR_HEADER ||
		binary.LittleEndian.Uint16(ans[1:]) != mysql.ER_ACCESS_DENIED_ERROR {
		t.Fatalf("COM_CHANGE_USER with a wrong password: %q, want 1045", ans)
	}

	// The mariadb command-line client.
	_, port, _ := net.SplitHostPort(p.Addr)
	out, err := exec.Command("mariadb", "-h127.0.0.1", "-P"+port, "-uba_alice", "-palicepw", "--batch", "--skip-column-names", "ks_test",
		"-e", "SELECT CURRENT_USER()").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ba_alice@%" {
		t.Fatalf("mariadb as ba_alice: %v\n%s", err, out)
	}

	// Failed logins read the accounts again at most once a second.
	reads := func() float64 { return metricValue(scrape(t, p), "keyshard_backend_accounts_reads_total") }
	before, start := reads(), time.Now()
	for range 6 {
		_, err := currentUser(t, p, "ba_nobody:x")
		wantMySQLErr(t, "an unknown user", err, mysql.ER_ACCESS_DENIED_ERROR, "28000")
	}
	elapsed := time.Since(start)
	if n := reads() - before; n < 1 || n > elapsed.Seconds()/users.MinInterval.Seconds()+1 {
		t.Fatalf("6 failed logins in %v read the accounts %v times: want at least 1, at most one a second", elapsed, n)
	}

	// An account created on the server is found by the first login after
	// the interval; a dropped one is refused once read again.
	for _, q := range []string{"CREATE USER 'ba_bob'@'%' IDENTIFIED BY 'bobpw'", "GRANT SELECT ON ks_test.* TO 'ba_bob'@'%'"} {
		if _, err := root.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(users.MinInterval)
	if cu, err := currentUser(t, p, "ba_bob:bobpw"); err != nil || cu != "ba_bob@%" {
		t.Fatalf("ba_bob, created on the backend: %q %v", cu, err)
	}
	if _, err := root.Exec("DROP USER 'ba_bob'@'%'"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(users.MinInterval)
	_, err = currentUser(t, p, "ba_nobody:x") // a failed login: the accounts are read again
	wantMySQLErr(t, "an unknown user", err, mysql.ER_ACCESS_DENIED_ERROR, "28000")
	_, err = currentUser(t, p, "ba_bob:bobpw")
	wantMySQLErr(t, "ba_bob, dropped", err, mysql.ER_ACCESS_DENIED_ERROR, "28000")

	// A successful login reads nothing; after a reload the next login
	// reads them again, however recent the last read.
	r0 := reads()
	if cu, err := currentUser(t, p, "ba_alice:alicepw"); err != nil || cu != "ba_alice@%" {
		t.Fatalf("ba_alice again: %q %v", cu, err)
	}
	if r := reads(); r != r0 {
		t.Fatalf("a successful login read the accounts (%v -> %v)", r0, r)
	}
	mustExec(t, p.open(t, "root:rootpw", "", ""), "admin reload")
	if cu, err := currentUser(t, p, "ba_alice:alicepw"); err != nil || cu != "ba_alice@%" {
		t.Fatalf("ba_alice after a reload: %q %v", cu, err)
	}
	if r := reads(); r != r0+1 {
		t.Fatalf("after a reload the login read the accounts %v times, want 1", r-r0)
	}

	// A new password on the server: the login that fails on the old hash
	// reads the accounts again and succeeds, as the account with its new
	// password (new pools); the old password is refused.
	if _, err := root.Exec("ALTER USER 'ba_alice'@'%' IDENTIFIED BY 'alicepw2'"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(users.MinInterval)
	if cu, err := currentUser(t, p, "ba_alice:alicepw2"); err != nil || cu != "ba_alice@%" {
		t.Fatalf("ba_alice with its new password: %q %v", cu, err)
	}
	_, err = currentUser(t, p, "ba_alice:alicepw")
	wantMySQLErr(t, "ba_alice with its old password", err, mysql.ER_ACCESS_DENIED_ERROR, "28000")
}

// Without SELECT on mysql.* keyshard's backend account cannot read the
// accounts: logins as them are refused (1045) and the log says which
// grant is missing.
func TestBackendAccountsNoGrant(t *testing.T) {
	root := direct(t, basePort, "")
	for _, q := range []string{
		"DROP USER IF EXISTS 'ba_ks'@'127.0.0.1'",
		"DROP USER IF EXISTS 'ba_carol'@'%'",
		"CREATE USER 'ba_ks'@'127.0.0.1' IDENTIFIED BY 'baks'",
		"GRANT ALL ON ks_test.* TO 'ba_ks'@'127.0.0.1'",
		"CREATE USER 'ba_carol'@'%' IDENTIFIED BY 'carolpw'",
	} {
		if _, err := root.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = root.Exec("DROP USER IF EXISTS 'ba_ks'@'127.0.0.1'")
		_, _ = root.Exec("DROP USER IF EXISTS 'ba_carol'@'%'")
	})
	y := accountsYAML()
	node1 := fmt.Sprintf("    user: ks\n    password: ks\n    master: 127.0.0.1:%d\n", basePort)
	if !strings.Contains(y, node1) {
		t.Fatalf("no node1 in\n%s", y)
	}
	y = strings.Replace(y, node1, fmt.Sprintf("    user: ba_ks\n    password: baks\n    master: 127.0.0.1:%d\n", basePort), 1)
	p := startProxy(t, y)
	_, err := currentUser(t, p, "ba_carol:carolpw")
	wantMySQLErr(t, "ba_carol", err, mysql.ER_ACCESS_DENIED_ERROR, "28000")
	found := false
	for _, e := range p.Logs.All() {
		if strings.Contains(e.Message, "cannot read the backend's accounts") {
			for _, f := range e.Context {
				if f.Key == "error" && strings.Contains(fmt.Sprint(f.Interface), "GRANT SELECT ON mysql.*") &&
					strings.Contains(fmt.Sprint(f.Interface), `"ba_ks"`) {
					found = true
				}
			}
		}
	}
	if !found {
		t.Fatalf("no log saying keyshard's account lacks SELECT on mysql.*: %v", p.Logs.All())
	}
}
