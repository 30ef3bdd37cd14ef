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
