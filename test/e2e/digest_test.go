package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// digestYAML: ks on node1 and node2 with dg_user hash-sharded over 2 x 2
// sub-tables in digest_e2e; root is the admin; slow log at 100 ms.
func digestYAML(logs string) string {
	return twoNodeYAML("%ADDR%", `      - db: digest_e2e
        table: dg_user
        key: id
        nodes: [node1, node2]
        type: hash
        locations: [2, 2]
`) + fmt.Sprintf("log_path: %s\nslow_log_time: 100\nweb_user: admin\nweb_password: webpw\n", logs)
}

// digestRow is one SHOW DIGESTS row by column name.
type digestRow map[string]string

func (r digestRow) num(t *testing.T, col string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(r[col], 64)
	if err != nil {
		t.Fatalf("digest %q: column %s = %q", r["Text"], col, r[col])
	}
	return v
}

// showDigests returns SHOW DIGESTS ORDER BY count LIMIT 0 by digest text.
func showDigests(t *testing.T, db mgQuerier) map[string]digestRow {
	t.Helper()
	cols, rows, err := mgFetch(context.Background(), db, false, "SHOW DIGESTS ORDER BY count LIMIT 0")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]digestRow{}
	for _, r := range rows {
		m := digestRow{}
		for i, c := range cols {
			m[strings.Fields(c)[0]] = r[i] // mgFetch's columns are "name TYPE"
		}
		out[m["Text"]] = m
	}
	return out
}

var stageCols = []string{"ParseMs", "RouteMs", "PoolWaitMs", "BackendMs", "RelayMs"}

// TestDigests sends known statements (text and prepared, on a plain and a
// sharded table, some failing, some slow) and checks what SHOW DIGESTS,
// REST, /metrics and the slow log say about them.
func TestDigests(t *testing.T) {
	for _, port := range []int{basePort, basePort + 1} {
		d := direct(t, port, "")
		mustExec(t, d, "DROP DATABASE IF EXISTS digest_e2e")
		mustExec(t, d, "CREATE DATABASE digest_e2e")
	}
	logs := t.TempDir()
	yaml := strings.Replace(digestYAML(logs), "user_list:\n", "user_list:\n  - user: root\n    password: rootpw\n", 1)
	p := startProxy(t, yaml)
	root := adminDB(t, p)
	db := p.open(t, "ks:ks", "digest_e2e", "")
	db.SetMaxOpenConns(2)
	mustExec(t, db, "CREATE TABLE dg_plain (id INT PRIMARY KEY, v VARCHAR(8))")
	mustExec(t, db, "CREATE TABLE dg_user (id BIGINT PRIMARY KEY, name VARCHAR(8))")
	mustExec(t, root, "admin reset digests")

	for i := range 5 {
		mustExec(t, db, fmt.Sprintf("INSERT INTO dg_plain VALUES (%d, 'v%d')", i+1, i))
	}
	for i := range 7 {
		mustExec(t, db, fmt.Sprintf("SELECT id, v FROM dg_plain WHERE id = %d", i%5+1))
	}
	for range 3 {
		mustExec(t, db, "SELECT SLEEP(0.05)")
	}
	for i := range 4 {
		_, err := db.Exec(fmt.Sprintf("SELECT * FROM dg_missing WHERE id = %d", i))
		wantCode(t, "unknown table", err, 1146, "dg_missing")
	}
	for i := range 6 {
		mustExec(t, db, fmt.Sprintf("INSERT INTO dg_user (id, name) VALUES (%d, 'u')", i+1))
	}
	for i := range 6 {
		mustExec(t, db, fmt.Sprintf("SELECT name FROM dg_user WHERE id = %d", i+1))
	}
	mustExec(t, db, "SELECT id, name FROM dg_user") // 4 sub-tables on 2 nodes
	mustExec(t, db, "SELECT id, SLEEP(0.15) FROM dg_user WHERE id = 3")
	// Merged over two nodes (sub-tables 1 and 2), each sleeping 0.11 s
	// in parallel.
	mustExec(t, db, "SELECT id, SLEEP(0.11) FROM dg_user WHERE id IN (1, 2) ORDER BY id DESC")
	// Bytes that are not UTF-8 stay in a shape after _binary: the digest
	// text has ? there, and /metrics still serves.
	mustExec(t, db, "SELECT _binary'\xc6\xc1P\xa9' AS b")
	st, err := db.Prepare("SELECT id FROM dg_plain WHERE id > ?")
	if err != nil {
		t.Fatal(err)
	}
	for range 9 {
		var n int
		rows, err := st.Query(2) // ids 3, 4, 5
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			n++
		}
		rows.Close()
		if n != 3 {
			t.Fatalf("prepared select: %d rows", n)
		}
	}
	st.Close()

	got := showDigests(t, root)
	want := []struct {
		text                                string
		calls, errors, rowsSent, rowsChange int
	}{
		{"INSERT INTO dg_plain VALUES (?, ?)", 5, 0, 0, 5},
		{"SELECT id, v FROM dg_plain WHERE id = ?", 7, 0, 7, 0},
		{"SELECT SLEEP(?)", 3, 0, 3, 0},
		{"SELECT * FROM dg_missing WHERE id = ?", 4, 4, 0, 0},
		{"INSERT INTO dg_user (id, name) VALUES (?, ?)", 6, 0, 0, 6},
		{"SELECT name FROM dg_user WHERE id = ?", 6, 0, 6, 0},
		{"SELECT id, name FROM dg_user", 1, 0, 6, 0},
		{"SELECT id, SLEEP(?) FROM dg_user WHERE id = ?", 1, 0, 1, 0},
		{"SELECT id FROM dg_plain WHERE id > ?", 9, 0, 27, 0},
		{"SELECT id, SLEEP(?) FROM dg_user WHERE id IN (?, ?) ORDER BY id DESC", 1, 0, 2, 0},
		{"SELECT _binary ? AS b", 1, 0, 1, 0},
	}
	for _, w := range want {
		r, ok := got[w.text]
		if !ok {
			t.Fatalf("no digest %q in %v", w.text, keys(got))
		}
		if r["Schema"] != "digest_e2e" || len(r["Digest"]) != 16 {
			t.Errorf("%q: schema %q digest %q", w.text, r["Schema"], r["Digest"])
		}
		if int(r.num(t, "Calls")) != w.calls || int(r.num(t, "Errors")) != w.errors ||
			int(r.num(t, "RowsSent")) != w.rowsSent || int(r.num(t, "RowsAffected")) != w.rowsChange {
			t.Errorf("%q: calls %s errors %s rows %s affected %s, want %d %d %d %d", w.text, r["Calls"], r["Errors"],
				r["RowsSent"], r["RowsAffected"], w.calls, w.errors, w.rowsSent, w.rowsChange)
		}
		checkDigestTimes(t, r)
		t.Logf("%s: calls %s total %s ms, p50 %s p99 %s, stages %s/%s/%s/%s/%s", w.text, r["Calls"], r["TotalMs"], r["P50Ms"], r["P99Ms"],
			r["ParseMs"], r["RouteMs"], r["PoolWaitMs"], r["BackendMs"], r["RelayMs"])
	}
	if len(got) != len(want) {
		// Admin statements (SHOW DIGESTS, reset) are not digested.
		t.Errorf("digests: %v, want only the %d sent", keys(got), len(want))
	}
	sleep := got["SELECT SLEEP(?)"]
	if min, total, backend := sleep.num(t, "MinMs"), sleep.num(t, "TotalMs"), sleep.num(t, "BackendMs"); min < 50 || total < 150 || backend < 150 || total > 3000 {
		t.Errorf("SELECT SLEEP(0.05) x3: min %v total %v backend %v ms", min, total, backend)
	}
	if p50 := sleep.num(t, "P50Ms"); p50 < 50 || p50 > 1000 {
		t.Errorf("SELECT SLEEP(0.05): p50 %v ms", p50)
	}
	// Per execution: column count, definition, 3 rows and the end: about
	// 80 bytes.
	if w := got["SELECT id FROM dg_plain WHERE id > ?"]; w.num(t, "BytesSent") < 9*60 || w.num(t, "BytesSent") > 9*200 {
		t.Errorf("prepared select: %s bytes sent", w["BytesSent"])
	}

	// kingshard's form: ('show','digests','order,count').
	if rows := queryRows(t, root, "admin server(opt,k,v) values('show','digests','errors,1')"); len(rows) != 1 || rows[0][2] != "SELECT * FROM dg_missing WHERE id = ?" {
		t.Errorf("admin show digests errors,1: %v", rows)
	}
	_, err = root.Exec("admin server(opt,k,v) values('show','digests','bogus,1')")
	wantCode(t, "unknown order", err, 1210, "unknown digest order")

	// REST shows the same digests.
	var body struct {
		Digests []struct {
			Digest string             `json:"digest"`
			Text   string             `json:"text"`
			Count  int                `json:"count"`
			Errors int                `json:"errors"`
			Total  float64            `json:"total_ms"`
			Stages map[string]float64 `json:"stages_ms"`
		} `json:"digests"`
	}
	if code := rest(t, p, "GET", "/api/v1/digests?limit=3&order=errors", "", true, &body); code != 200 || len(body.Digests) != 3 {
		t.Fatalf("GET /api/v1/digests: %d %+v", code, body)
	}
	if d := body.Digests[0]; d.Text != "SELECT * FROM dg_missing WHERE id = ?" || d.Errors != 4 || d.Count != 4 ||
		d.Digest != got[d.Text]["Digest"] || len(d.Stages) != 5 {
		t.Errorf("REST first by errors: %+v", d)
	}
	if code := rest(t, p, "GET", "/api/v1/digests?order=nonsense", "", true, nil); code != 400 {
		t.Errorf("unknown order: %d", code)
	}

	// /metrics carries the top digests and the stage counters.
	bad := p.open(t, "ks:wrong", "", "")
	if err := bad.Ping(); err == nil {
		t.Fatal("a wrong password logged in") // and counts a rejected connection for the dashboard check
	}
	metrics := scrape(t, p)
	checkDashboard(t, metrics)
	sleepCalls := fmt.Sprintf(`keyshard_digest_calls_total{digest=%q,schema="digest_e2e",text="SELECT SLEEP(?)"} 3`, sleep["Digest"])
	if !strings.Contains(metrics, sleepCalls) {
		t.Errorf("/metrics lacks %s", sleepCalls)
	}
	if v := metricValue(metrics, `keyshard_stage_seconds_total{stage="backend"}`); v < 0.3 {
		t.Errorf("backend stage total %v s, want >= 0.3 (the sleeps)", v)
	}

	// The slow log: one JSON line for the sharded SLEEP(0.15), with its
	// digest, node and time split.
	slow := waitSlowLine(t, filepath.Join(logs, "slow.log"), "SLEEP(0.15)")
	slowDigest := got["SELECT id, SLEEP(?) FROM dg_user WHERE id = ?"]["Digest"]
	if slow["user"] != "ks" || slow["client"] != "127.0.0.1" || slow["schema"] != "digest_e2e" || slow["digest"] != slowDigest ||
		fmt.Sprint(slow["nodes"]) != "[node2]" || slow["rows"] != 1.0 || slow["bytes"].(float64) < 10 {
		t.Errorf("slow log line: %v (want digest %s, node2)", slow, slowDigest)
	}
	merged := waitSlowLine(t, filepath.Join(logs, "slow.log"), "SLEEP(0.11)")
	if fmt.Sprint(merged["nodes"]) != "[node1 node2]" || merged["rows"] != 2.0 || merged["backend_ms"].(float64) < 100 {
		t.Errorf("slow log line of the merged select: %v", merged)
	}
	var sum float64
	for _, k := range []string{"parse_ms", "route_ms", "pool_wait_ms", "backend_ms", "relay_ms"} {
		v, ok := slow[k].(float64)
		if !ok {
			t.Fatalf("slow log line lacks %s: %v", k, slow)
		}
		sum += v
	}
	if ms := slow["ms"].(float64); ms < 150 || sum < ms-0.01 || sum > ms+0.01 || slow["backend_ms"].(float64) < 150 {
		t.Errorf("slow log: ms %v, stages sum %v, backend %v", ms, sum, slow["backend_ms"])
	}

	// Reset, by SQL (both forms) and by REST.
	mustExec(t, root, "admin server(opt,k,v) values('reset','digests','all')")
	if got := showDigests(t, root); len(got) != 0 {
		t.Errorf("after reset: %v", keys(got))
	}
	mustExec(t, db, "SELECT 1")
	mustExec(t, root, "admin reset digests")
	if got := showDigests(t, root); len(got) != 0 {
		t.Errorf("after reset: %v", keys(got))
	}
	mustExec(t, db, "SELECT SLEEP(0)")
	if got := showDigests(t, root); len(got) != 1 || got["SELECT SLEEP(?)"]["Calls"] != "1" {
		t.Errorf("after reset and one statement: %v", got)
	}
	if code := rest(t, p, "DELETE", "/api/v1/digests", "", true, nil); code != 200 {
		t.Errorf("DELETE /api/v1/digests: %d", code)
	}
	if got := showDigests(t, root); len(got) != 0 {
		t.Errorf("after REST reset: %v", keys(got))
	}

	// Bounded: with digest_size 2 (a reload), a third shape counts in the
	// "other" row; the slow log still names its own digest.
	appendFile(t, p.File, "digest_size: 2\n")
	mustExec(t, root, "admin reload")
	mustExec(t, db, "SELECT 1")
	mustExec(t, db, "SELECT 1, 2")
	mustExec(t, db, "SELECT 1, 2, 3")
	mustExec(t, db, "SELECT 1, 2, 3, 4, SLEEP(0.11)")
	got = showDigests(t, root)
	if other := got[otherText]; len(got) != 3 || other["Calls"] != "2" || got["SELECT ?"]["Calls"] != "1" {
		t.Errorf("digest_size 2: %v", got)
	}
	if line := waitSlowLine(t, filepath.Join(logs, "slow.log"), "4, SLEEP(0.11)"); line["digest"] == "0000000000000000" || line["digest"] == "" {
		t.Errorf("slow line of a statement in other: digest %v", line["digest"])
	}
	// digest_size 0: off.
	writeFile(t, p.File, strings.Replace(readFile(t, p.File), "digest_size: 2", "digest_size: 0", 1))
	mustExec(t, root, "admin reload")
	mustExec(t, root, "admin reset digests")
	mustExec(t, db, "SELECT 1")
	if got := showDigests(t, root); len(got) != 0 {
		t.Errorf("digest_size 0: %v", keys(got))
	}
}

const otherText = "(other: the digest table is full; raise digest_size)"

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	writeFile(t, path, readFile(t, path)+s)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkDigestTimes checks that a digest's times hang together: min <= p50
// <= p99 <= max, avg within [min, max], total = avg x calls, and the
// stages add up to the total.
func checkDigestTimes(t *testing.T, r digestRow) {
	t.Helper()
	calls := r.num(t, "Calls")
	minMs, maxMs, avg, total := r.num(t, "MinMs"), r.num(t, "MaxMs"), r.num(t, "AvgMs"), r.num(t, "TotalMs")
	p50, p99 := r.num(t, "P50Ms"), r.num(t, "P99Ms")
	const eps = 0.0015 // the columns are rounded to the microsecond
	if minMs <= 0 || minMs > p50+eps || p50 > p99+eps || p99 > maxMs+eps || avg < minMs-eps || avg > maxMs+eps {
		t.Errorf("%q: min %v p50 %v p99 %v max %v avg %v", r["Text"], minMs, p50, p99, maxMs, avg)
	}
	if d := total - avg*calls; d < -calls*eps || d > calls*eps {
		t.Errorf("%q: total %v != avg %v x %v calls", r["Text"], total, avg, calls)
	}
	var sum float64
	for _, c := range stageCols {
		sum += r.num(t, c)
	}
	if d := sum - total; d < -6*eps || d > 6*eps {
		t.Errorf("%q: stages sum to %v ms, total %v ms", r["Text"], sum, total)
	}
	if maxMs > 5000 {
		t.Errorf("%q: max %v ms is implausible", r["Text"], maxMs)
	}
}

func keys(m map[string]digestRow) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// scrape returns the proxy's /metrics text.
func scrape(t *testing.T, p *testProxy) string {
	t.Helper()
	resp, err := http.Get(p.Web + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// metricValue is the value of the series named exactly so (-1 if absent).
func metricValue(metrics, series string) float64 {
	for _, line := range strings.Split(metrics, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// waitSlowLine waits for the slow log line whose sql contains s.
func waitSlowLine(t *testing.T, path, s string) map[string]any {
	t.Helper()
	var line map[string]any
	waitFor(t, "the slow log line", func() bool {
		f, err := os.Open(path)
		if err != nil {
			return false
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && strings.Contains(fmt.Sprint(m["sql"]), s) {
				line = m
				return true
			}
		}
		return false
	})
	return line
}

// checkDashboard checks that every metric the Grafana dashboard queries is
// one keyshard serves (after the traffic of TestDigests).
func checkDashboard(t *testing.T, metrics string) {
	t.Helper()
	data, err := os.ReadFile("../../docs/grafana/keyshard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct{ Definition string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	served := map[string]bool{}
	for _, line := range strings.Split(metrics, "\n") {
		if line != "" && line[0] != '#' {
			served[strings.FieldsFunc(line, func(r rune) bool { return r == '{' || r == ' ' })[0]] = true
		}
	}
	name := regexp.MustCompile(`\b(?:keyshard|process|go)_[a-z0-9_]+\b`)
	n := 0
	check := func(where, expr string) {
		for _, m := range name.FindAllString(expr, -1) {
			n++
			if !served[m] {
				t.Errorf("dashboard %s queries %s, which /metrics does not serve", where, m)
			}
		}
	}
	for _, v := range dash.Templating.List {
		check("variable", v.Definition)
	}
	for _, pn := range dash.Panels {
		for _, tg := range pn.Targets {
			check("panel "+strconv.Quote(pn.Title), tg.Expr)
		}
	}
	if n < 30 {
		t.Errorf("the dashboard queries only %d metrics", n)
	}
}
