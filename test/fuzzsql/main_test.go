// Package fuzzsql is keyshard's differential SQL fuzzer: random schemas and
// rows, loaded into one plain MariaDB database (the reference) and through
// keyshard into the same tables sharded by every rule type, then random
// statements run on both and their answers compared. See README.md.
//
// Backends: three MariaDB servers the run starts itself with
// scripts/backends.sh on 127.0.0.1:30307-30309 (node1, node2, and the
// reference), under /tmp/keyshard-fuzzsql-30307; KS_FUZZSQL_PORT moves
// them, KEEP_BACKENDS=1 leaves them running afterwards.
package fuzzsql

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/keyshard/keyshard/proxy"
	"github.com/keyshard/keyshard/proxy/config"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

var (
	basePort = fuzzPort()
	refPort  = basePort + 2 // the reference server: never a keyshard node
	repoRoot string
)

// fuzzPort is the first backend's port: KS_FUZZSQL_PORT or 30307.
func fuzzPort() int {
	if s := os.Getenv("KS_FUZZSQL_PORT"); s != "" {
		var p int
		if _, err := fmt.Sscan(s, &p); err == nil && p > 0 {
			return p
		}
	}
	return 30307
}

func TestMain(m *testing.M) {
	_, file, _, _ := runtime.Caller(0)
	repoRoot = filepath.Join(filepath.Dir(file), "..", "..")
	os.Setenv("KS_BACKENDS_DIR", fmt.Sprintf("/tmp/keyshard-fuzzsql-%d", basePort))
	if out, err := backends("up", "3", fmt.Sprint(basePort)); err != nil {
		fmt.Fprintf(os.Stderr, "starting backends failed: %v\n%s\n", err, out)
		os.Exit(1)
	}
	code := m.Run()
	if os.Getenv("KEEP_BACKENDS") == "" {
		_, _ = backends("down")
	}
	os.Exit(code)
}

// backends runs scripts/backends.sh with args.
func backends(args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{filepath.Join(repoRoot, "scripts", "backends.sh")}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// proxyYAML is keyshard's config: user ks on node1 and node2, default
// node1, and the given shard rules (YAML list items for schema_list[0].shard).
func proxyYAML(addr, rules string) string {
	return fmt.Sprintf(`addr: %s
user_list:
  - user: ks
    password: ks
nodes:
  - name: node1
    user: ks
    password: ks
    master: 127.0.0.1:%d
    max_conns_limit: 32
  - name: node2
    user: ks
    password: ks
    master: 127.0.0.1:%d
    max_conns_limit: 32
schema_list:
  - user: ks
    nodes: [node1, node2]
    default: node1
    shard:
%s`, addr, basePort, basePort+1, rules)
}

// startProxy runs keyshard in the test process with rules until the test
// ends and returns its address.
func startProxy(t testing.TB, rules string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	path := filepath.Join(t.TempDir(), "ks.yaml")
	yaml := proxyYAML(addr, rules)
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Load(path)
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	log := zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))
	srv, err := proxy.New(cfg, log, config.Local{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(done) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		<-done
	})
	return addr
}

// openDB opens a database/sql handle on addr, database db. Statements
// with arguments are prepared (interpolateParams=false, the default): the
// binary protocol.
func openDB(t testing.TB, addr, db string) *sql.DB {
	t.Helper()
	d, err := sql.Open("mysql", fmt.Sprintf("ks:ks@tcp(%s)/%s", addr, db))
	if err != nil {
		t.Fatal(err)
	}
	d.SetMaxOpenConns(4)
	d.SetMaxIdleConns(4)
	t.Cleanup(func() { d.Close() })
	return d
}

// freshDB drops and creates database db on the backends at ports.
func freshDB(t testing.TB, db string, ports ...int) {
	t.Helper()
	for _, port := range ports {
		d, err := sql.Open("mysql", fmt.Sprintf("ks:ks@tcp(127.0.0.1:%d)/", port))
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"DROP DATABASE IF EXISTS " + db, "CREATE DATABASE " + db} {
			if _, err := d.Exec(q); err != nil {
				d.Close()
				t.Fatalf("port %d: %s: %v", port, q, err)
			}
		}
		d.Close()
	}
}
