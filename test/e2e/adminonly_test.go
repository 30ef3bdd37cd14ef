package e2e

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/keyshard/keyshard/proxy"
	"github.com/keyshard/keyshard/proxy/config"
)

// A user with admin rights and no schema (root in baseYAML): SHOW
// WARNINGS answers (keyshard's warnings: none), where it got 1044; a node
// hint is refused rather than answered with keyshard's own PROCESSLIST.
func TestAdminOnlyUser(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	c, err := p.open(t, "root:rootpw", "", "").Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if rows := queryRowsConn(t, c, "SHOW WARNINGS"); len(rows) != 0 {
		t.Fatalf("SHOW WARNINGS: %v, want none", rows)
	}
	if rows := queryRowsConn(t, c, "SHOW COUNT(*) WARNINGS"); len(rows) != 1 || rows[0][0] != "0" {
		t.Fatalf("SHOW COUNT(*) WARNINGS: %v, want 0", rows)
	}
	_, err = c.ExecContext(context.Background(), "/*node1*/ SHOW PROCESSLIST")
	wantErrContains(t, "/*node1*/ SHOW PROCESSLIST without a schema", err, 1044, "no schema in schema_list")
	// keyshard's own list still answers without a hint.
	if rows := queryRowsConn(t, c, "SHOW PROCESSLIST"); len(rows) == 0 {
		t.Fatal("SHOW PROCESSLIST: no rows")
	}
}

// SHOW PROXIES names this binary's version with a config file too (it was
// empty unless the config was shared in etcd).
func TestShowProxiesVersionFileMode(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	cfg, _, err := config.Load(p.File)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = ln.Addr().String()
	log, logs := testLogger(t)
	srv, err := proxy.New(cfg, log, config.Local{Version: "9.9.9-e2e"})
	if err != nil {
		t.Fatal(err)
	}
	q := serveTestProxy(t, srv, ln, logs)
	rows := queryRows(t, adminDB(t, q), "SHOW PROXIES")
	if len(rows) != 1 || rows[0][3] != "9.9.9-e2e" || !strings.Contains(rows[0][1], ln.Addr().String()) {
		t.Fatalf("SHOW PROXIES: %v, want one row with Version 9.9.9-e2e", rows)
	}
}
