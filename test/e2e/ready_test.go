package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// readyz is GET /readyz's status and body.
func readyz(t *testing.T, p *testProxy) (int, string) {
	t.Helper()
	resp, err := http.Get(p.Web + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// /readyz is 503 while the instance is offline or the master of a
// schema's default node is down (killed, or taken down by an operator),
// 200 again once it is back; every state change is logged at warn, and
// each node once at start.
func TestReadiness(t *testing.T) {
	yaml := strings.Replace(baseYAML("%ADDR%"), "    max_conns_limit: 4\n", "    max_conns_limit: 4\n    down_after_noalive: 1\n", 1) +
		"health_check_interval: 200ms\nconnect_timeout: 1s\n"
	p := startProxy(t, yaml)
	if code, body := readyz(t, p); code != 200 || body != "ok\n" {
		t.Fatalf("ready: %d %q", code, body)
	}
	if n := p.Logs.FilterMessage("node").Len(); n != 3 {
		t.Errorf("%d node lines at start, want 3", n)
	}
	adm := adminDB(t, p)
	mustExec(t, adm, "admin server(opt,k,v) values('change','proxy','offline')")
	if code, body := readyz(t, p); code != 503 || !strings.Contains(body, "offline") {
		t.Fatalf("offline: %d %q", code, body)
	}
	mustExec(t, adm, "admin server(opt,k,v) values('change','proxy','online')")
	if code, _ := readyz(t, p); code != 200 {
		t.Fatalf("online again: %d", code)
	}
	// The default node of user other's schema is node3: kill its master.
	if out, err := backends("stop", fmt.Sprint(downPort)); err != nil {
		t.Fatalf("stop: %v %s", err, out)
	}
	defer backends("start", fmt.Sprint(downPort))
	waitFor(t, "/readyz 503 with node3's master down", func() bool {
		code, body := readyz(t, p)
		return code == 503 && strings.Contains(body, "default node node3 is down")
	})
	down := p.Logs.FilterMessage("backend state changed").FilterFieldKey("reason").All()
	if len(down) == 0 || down[len(down)-1].ContextMap()["node"] != "node3" || down[len(down)-1].ContextMap()["to"] != "down" ||
		down[len(down)-1].Level.String() != "warn" {
		t.Fatalf("state change log lines: %v", down)
	}
	if out, err := backends("start", fmt.Sprint(downPort)); err != nil {
		t.Fatalf("start: %v %s", err, out)
	}
	waitFor(t, "/readyz 200 with node3's master back", func() bool {
		code, _ := readyz(t, p)
		return code == 200
	})
	last := p.Logs.FilterMessage("backend state changed").All()
	if f := last[len(last)-1].ContextMap(); f["node"] != "node3" || f["from"] != "down" || f["to"] != "up" || f["after"] == nil {
		t.Fatalf("the last state change: %v", f)
	}
	// Taken down by an operator: not ready either.
	mustExec(t, adm, fmt.Sprintf("admin node(opt,node,k,v) values('down','node3','master','127.0.0.1:%d')", downPort))
	if code, body := readyz(t, p); code != 503 || !strings.Contains(body, "operator") {
		t.Fatalf("admin down: %d %q", code, body)
	}
	mustExec(t, adm, fmt.Sprintf("admin node(opt,node,k,v) values('up','node3','master','127.0.0.1:%d')", downPort))
	if code, _ := readyz(t, p); code != 200 {
		t.Fatalf("admin up: %d", code)
	}
}

// A backend that refuses keyshard's own login (a wrong password in the
// node's config) is down at once, not after down_after_noalive: SHOW
// BACKENDS, the metrics and /readyz say so with the reason, and a
// client's statement fails with 1429 naming the node and keyshard's
// account (not 1045, which would read as the client's own credentials).
func TestBackendRefusesLogin(t *testing.T) {
	yaml := baseYAML("%ADDR%")
	node3 := fmt.Sprintf("    password: ks\n    master: 127.0.0.1:%d\n", downPort)
	if !strings.Contains(yaml, node3) {
		t.Fatal("baseYAML changed: node3 not found")
	}
	yaml = strings.Replace(yaml, node3, fmt.Sprintf("    password: wrong\n    master: 127.0.0.1:%d\n    down_after_noalive: 60\n", downPort), 1) +
		"health_check_interval: 200ms\nconnect_timeout: 1s\n"
	p := startProxy(t, yaml)
	waitFor(t, "/readyz 503 with node3 refusing keyshard's login", func() bool {
		code, body := readyz(t, p)
		return code == 503 && strings.Contains(body, "default node node3 is down") && strings.Contains(body, "refused keyshard's login as 'ks'")
	})
	var row []string
	for _, r := range queryRows(t, adminDB(t, p), "SHOW BACKENDS") {
		if r[0] == "node3" {
			row = r
		}
	}
	if row == nil || row[3] != "down" || !strings.Contains(row[12], "refused keyshard's login as 'ks'") || !strings.Contains(row[12], "Access denied") {
		t.Fatalf("SHOW BACKENDS, node3: %q", row)
	}
	if s := backendGauge(t, p, "keyshard_backend_state", downPort); s != 1 {
		t.Fatalf("keyshard_backend_state of node3: %v, want 1 (down)", s)
	}
	_, err := p.open(t, "other:other", "", "").Exec("SELECT 1")
	wantErrContains(t, "a statement on node3", err, 1429, fmt.Sprintf("node node3 (127.0.0.1:%d)", downPort))
	wantErrContains(t, "a statement on node3", err, 1429, "refused keyshard's login as 'ks'")
	// The other nodes serve.
	if _, err := p.open(t, "ks:ks", "ks_test", "").Exec("SELECT 1"); err != nil {
		t.Fatal(err)
	}
}

// A default master that has never answered since keyshard started is not
// ready at its first failed check: there is no busy server to wait
// down_after_noalive for.
func TestNeverReachedNotReady(t *testing.T) {
	yaml := baseYAML("%ADDR%")
	node3 := fmt.Sprintf("    master: 127.0.0.1:%d\n", downPort)
	nowhere := e2ePort() + 150 // nothing listens there
	yaml = strings.Replace(yaml, node3, fmt.Sprintf("    master: 127.0.0.1:%d\n    down_after_noalive: 60\n", nowhere), 1) +
		"health_check_interval: 200ms\nconnect_timeout: 1s\n"
	p := startProxy(t, yaml)
	waitFor(t, "/readyz 503 with node3 never reached", func() bool {
		code, body := readyz(t, p)
		return code == 503 && strings.Contains(body, "default node node3 is down") && strings.Contains(body, "cannot connect")
	})
	var row []string
	for _, r := range queryRows(t, adminDB(t, p), "SHOW BACKENDS") {
		if r[0] == "node3" {
			row = r
		}
	}
	if row == nil || row[3] != "down" {
		t.Fatalf("SHOW BACKENDS, node3: %q", row)
	}
}
