// Package e2e runs keyshard in-process against real MariaDB servers that the
// test run starts itself with scripts/backends.sh (installed with apt-get if
// missing). Backends listen on 127.0.0.1:24307-24310 under
// /tmp/keyshard-e2e; set KEEP_BACKENDS=1 to leave them running afterwards,
// KS_BACKENDS_SCRIPT to use another script with the same commands, and
// KS_E2E_PORT to move the four backends (and their directory,
// /tmp/keyshard-e2e-PORT) so two runs can share a machine.
package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/keyshard/keyshard/proxy"
	"github.com/keyshard/keyshard/proxy/admin"
	"github.com/keyshard/keyshard/proxy/config"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

const nBackend = 4

var (
	basePort = e2ePort()
	// Backend 3 (basePort+2) is reserved for tests that stop and start it.
	downPort = basePort + 2
	// Backend 4 (basePort+3) holds the plain reference tables of the merge
	// differential test; it is never a keyshard node.
	refPort = basePort + 3
)

// e2ePort is the first backend's port: KS_E2E_PORT or 24307.
func e2ePort() int {
	if s := os.Getenv("KS_E2E_PORT"); s != "" {
		var p int
		if _, err := fmt.Sscan(s, &p); err == nil && p > 0 {
			return p
		}
	}
	return 24307
}

var repoRoot string

func TestMain(m *testing.M) {
	_, file, _, _ := runtime.Caller(0)
	repoRoot = filepath.Join(filepath.Dir(file), "..", "..")
	dir := "/tmp/keyshard-e2e"
	if basePort != 24307 {
		dir = fmt.Sprintf("/tmp/keyshard-e2e-%d", basePort)
	}
	os.Setenv("KS_BACKENDS_DIR", dir)
	if out, err := backends("up", fmt.Sprint(nBackend), fmt.Sprint(basePort)); err != nil {
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
	script := filepath.Join(repoRoot, "scripts", "backends.sh")
	if s := os.Getenv("KS_BACKENDS_SCRIPT"); s != "" {
		script = s
	}
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// testProxy is a keyshard server running in the test process.
type testProxy struct {
	Addr string
	Srv  *proxy.Server
	Web  string                 // base URL of the admin HTTP server (REST API, metrics)
	File string                 // the config file
	Logs *observer.ObservedLogs // keyshard's log from Info up
}

// baseYAML is a config with two nodes on the first two backends; extra is
// appended at top level and may override keys set here only if they are not
// already present (tests pass whole sections they need).
func baseYAML(addr string) string {
	return fmt.Sprintf(`
addr: %s
user_list:
  - user: ks
    password: ks
  - user: root
    password: rootpw
  - user: other
    password: other
nodes:
  - name: node1
    user: ks
    password: ks
    master: 127.0.0.1:%d
    max_conns_limit: 16
  - name: node2
    user: ks
    password: ks
    master: 127.0.0.1:%d
    max_conns_limit: 16
  - name: node3
    user: ks
    password: ks
    master: 127.0.0.1:%d
    max_conns_limit: 4
schema_list:
  - user: ks
    nodes: [node1, node2]
    default: node1
    shard:
      -
  - user: other
    nodes: [node3]
    default: node3
    shard:
      -
`, addr, basePort, basePort+1, downPort)
}

// startProxy starts keyshard with yaml (use baseYAML or a variant); %ADDR%
// in yaml is replaced by the listen address.
func startProxy(t *testing.T, yaml string) *testProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	yaml = strings.ReplaceAll(yaml, "%ADDR%", addr)
	// A real file, so that admin reload and save have one to work on.
	path := filepath.Join(t.TempDir(), "ks.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Load(path)
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	log, logs := testLogger(t)
	srv, err := proxy.New(cfg, log, config.Local{})
	if err != nil {
		t.Fatal(err)
	}
	p := serveTestProxy(t, srv, ln, logs)
	p.File = path
	return p
}

// testLogger is keyshard's log in a test: warnings and errors in the
// test's output, everything from Info up kept for the test to read.
func testLogger(t *testing.T) (*zap.Logger, *observer.ObservedLogs) {
	obs, logs := observer.New(zap.InfoLevel)
	return zap.New(zapcore.NewTee(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Core(), obs)), logs
}

// serveTestProxy serves srv on ln with admin SQL and the web API, until
// the test ends.
func serveTestProxy(t *testing.T, srv *proxy.Server, ln net.Listener, logs *observer.ObservedLogs) *testProxy {
	t.Helper()
	srv.SetAdmin(admin.SQL(srv))
	mux := admin.Handler(srv, func() error { return nil })
	admin.REST(mux, srv)
	web := httptest.NewServer(admin.Guard(srv.WebAllowed, mux))
	t.Cleanup(web.Close)
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
	return &testProxy{Addr: ln.Addr().String(), Srv: srv, Web: web.URL, Logs: logs}
}

// open returns a database/sql handle through the proxy.
func (p *testProxy) open(t *testing.T, userPass, db, params string) *sql.DB {
	t.Helper()
	dsn := fmt.Sprintf("%s@tcp(%s)/%s?%s", userPass, p.Addr, db, params)
	d, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// direct returns a database/sql handle straight to a backend.
func direct(t *testing.T, port int, db string) *sql.DB {
	t.Helper()
	d, err := sql.Open("mysql", fmt.Sprintf("ks:ks@tcp(127.0.0.1:%d)/%s", port, db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
