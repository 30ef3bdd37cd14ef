package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// The result cache: a rule's statements are answered from memory (node1
// sees nothing) until their TTL, a write through keyshard makes them stale
// at once, a transaction, another session state, an error or a big result
// never use it; the hint and a digest rule (added by reload) cache too.
func TestResultCache(t *testing.T) {
	yaml := baseYAML("%ADDR%") + `result_cache_mb: 8
result_cache_entry_kb: 4
result_cache_rules:
  - table: ks_test.rc_hot
    ttl: 1s
`
	p := startProxy(t, yaml)
	ks := p.open(t, "ks:ks", "ks_test", "")
	mustExec(t, ks, "DROP TABLE IF EXISTS rc_hot, rc_other")
	mustExec(t, ks, "CREATE TABLE rc_hot (id INT PRIMARY KEY, v VARCHAR(10))")
	mustExec(t, ks, "CREATE TABLE rc_other (id INT PRIMARY KEY, v VARCHAR(10))")
	mustExec(t, ks, "INSERT INTO rc_hot VALUES (1, 'a')")
	mustExec(t, ks, "INSERT INTO rc_other VALUES (1, 'x'), (2, 'y')")
	c, err := ks.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// ran reports how many statements node1 ran during f.
	ran := func(f func()) int64 {
		before := backendStatements(p)["node1"]
		f()
		return backendStatements(p)["node1"] - before
	}
	read := func(q, want string) {
		t.Helper()
		if got := queryColConn(t, c, q, 0); len(got) != 1 || got[0] != want {
			t.Fatalf("%s: %v, want %s", q, got, want)
		}
	}
	const hot = "SELECT v FROM rc_hot WHERE id = 1"
	if n := ran(func() { read(hot, "a") }); n != 1 {
		t.Fatalf("the first read ran %d statements on node1, want 1", n)
	}
	if n := ran(func() {
		for range 5 {
			read(hot, "a")
		}
	}); n != 0 {
		t.Fatalf("5 cached reads ran %d statements on node1, want 0", n)
	}
	// A change made on the server directly shows after the TTL.
	mustExec(t, direct(t, basePort, "ks_test"), "UPDATE rc_hot SET v = 'b' WHERE id = 1")
	read(hot, "a")
	time.Sleep(1100 * time.Millisecond)
	read(hot, "b")
	// A write through keyshard shows at once.
	mustExecConn(t, c, "UPDATE rc_hot SET v = 'c' WHERE id = 1")
	read(hot, "c")
	// A transaction's write: stale again when it commits, though another
	// session cached the rows committed before in between.
	tc, err := p.open(t, "ks:ks", "ks_test", "").Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	mustExecConn(t, tc, "BEGIN")
	mustExecConn(t, tc, "UPDATE rc_hot SET v = 't' WHERE id = 1")
	read(hot, "c") // cached: what is committed
	read(hot, "c")
	mustExecConn(t, tc, "COMMIT")
	read(hot, "t")
	mustExecConn(t, c, "UPDATE rc_hot SET v = 'c' WHERE id = 1")
	// Never inside a transaction.
	mustExecConn(t, c, "BEGIN")
	if n := ran(func() { read(hot, "c") }); n != 1 {
		t.Fatalf("a read in a transaction ran %d statements, want 1", n)
	}
	mustExecConn(t, c, "COMMIT")
	// Another session state is another entry.
	mustExecConn(t, c, "SET NAMES latin1")
	if n := ran(func() { read(hot, "c") }); n != 1 {
		t.Fatalf("a read under SET NAMES latin1 ran %d statements, want 1 (not the utf8mb4 answer)", n)
	}
	mustExecConn(t, c, "SET NAMES utf8mb4")
	// Errors and results over result_cache_entry_kb are not kept.
	for _, q := range []string{"SELECT nosuch FROM rc_hot", "SELECT REPEAT('x', 8000) FROM rc_hot"} {
		if n := ran(func() {
			for range 2 {
				_, _ = c.ExecContext(context.Background(), q)
			}
		}); n != 2 {
			t.Fatalf("%s twice ran %d statements, want 2", q, n)
		}
	}
	// The hint, for a table without a rule.
	const hinted = "SELECT /*+ cache(1s) */ v FROM rc_other WHERE id = 1"
	if n := ran(func() { read(hinted, "x"); read(hinted, "x") }); n != 1 {
		t.Fatalf("a hinted read twice ran %d statements, want 1", n)
	}
	// A digest rule, added by a reload.
	const other = "SELECT v FROM rc_other WHERE id = 2"
	if n := ran(func() { read(other, "y"); read(other, "y") }); n != 2 {
		t.Fatalf("without a rule, a read twice ran %d statements, want 2", n)
	}
	adm := adminDB(t, p)
	var id string
	for _, r := range queryRows(t, adm, "SHOW DIGESTS ORDER BY count LIMIT 0") {
		if strings.HasPrefix(r[2], "SELECT v FROM rc_other WHERE id = ?") {
			id = r[0]
		}
	}
	if id == "" {
		t.Fatal("no digest for the rc_other read")
	}
	b, err := os.ReadFile(p.File)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.File, append(b, fmt.Sprintf("  - digest: %s\n    ttl: 5s\n", id)...), 0o644); err != nil {
		t.Fatal(err)
	}
	mustExec(t, adm, "admin reload")
	if n := ran(func() { read(other, "y"); read(other, "y"); read(other, "y") }); n != 1 {
		t.Fatalf("with a digest rule, a read 3 times ran %d statements, want 1", n)
	}
	for _, r := range queryRows(t, adm, "SHOW DIGESTS ORDER BY count LIMIT 0") {
		// 2, and the hinted read's hit (the digest leaves comments out).
		if r[0] == id && r[5] != "3" {
			t.Fatalf("digest %s: CacheHits %s, want 3", id, r[5])
		}
	}
	m := scrape(t, p)
	for _, want := range []string{"keyshard_result_cache_hits_total 10", "keyshard_result_cache_entries "} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
