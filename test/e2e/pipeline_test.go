package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
)

// pipeYAML is the base config with pipelined backend connections.
func pipeYAML() string { return baseYAML("%ADDR%") + "backend_pipeline_depth: 8\n" }

// pipeConns opens n connections of their own through p.
func pipeConns(t *testing.T, db *sql.DB, n int) []*sql.Conn {
	t.Helper()
	cs := make([]*sql.Conn, n)
	for i := range cs {
		c, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cs[i] = c
	}
	return cs
}

// TestPipelineIsolation runs clients of different backend session states,
// writers and clients whose statements fail, all at once on pipelined
// connections: each answer reaches the client that asked (its marker
// comes back), under that client's own state; each error reaches its own
// client and no other; every acknowledged insert is there.
func TestPipelineIsolation(t *testing.T) {
	p := startProxy(t, pipeYAML())
	db := p.open(t, "ks:ks", "ks_test", "")
	mustExec(t, db, "CREATE DATABASE IF NOT EXISTS ks_test2")
	mustExec(t, db, "DROP TABLE IF EXISTS ks_test.pipe_w")
	mustExec(t, db, "CREATE TABLE ks_test.pipe_w (id INT AUTO_INCREMENT PRIMARY KEY, writer INT NOT NULL, n INT NOT NULL)")

	// Session states: each group of readers sets one thing its own way.
	groups := []struct {
		name, set string
		check     func(sqlMode, tz, charset, db string) bool
	}{
		{"default", "", func(m, tz, cs, d string) bool {
			return m != "ANSI_QUOTES" && tz == "SYSTEM" && cs == "utf8mb4" && d == "ks_test"
		}},
		{"sql_mode", "SET SESSION sql_mode = 'ANSI_QUOTES'", func(m, tz, cs, d string) bool { return m == "ANSI_QUOTES" && tz == "SYSTEM" && d == "ks_test" }},
		{"time_zone", "SET time_zone = '+05:00'", func(m, tz, cs, d string) bool { return m != "ANSI_QUOTES" && tz == "+05:00" && d == "ks_test" }},
		{"names", "SET NAMES latin1", func(m, tz, cs, d string) bool { return cs == "latin1" && tz == "SYSTEM" && d == "ks_test" }},
		{"database", "USE ks_test2", func(m, tz, cs, d string) bool { return d == "ks_test2" && tz == "SYSTEM" && cs == "utf8mb4" }},
	}
	const perGroup, writers, failers = 3, 3, 3
	conns := pipeConns(t, db, len(groups)*perGroup+writers+failers)
	for i, g := range groups {
		for j := range perGroup {
			if g.set != "" {
				mustExecConn(t, conns[i*perGroup+j], g.set)
			}
		}
	}
	before := mustMetric(t, p, "keyshard_pool_pipelined_total", "node1")
	dials := mustMetric(t, p, "keyshard_pool_dials_total", "node1")

	ctx := context.Background()
	stop := time.Now().Add(2 * time.Second)
	var mu sync.Mutex
	var problems []string
	bad := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) < 10 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	acked := make([]int, writers)
	var wg sync.WaitGroup
	for i, g := range groups {
		for j := range perGroup {
			c := conns[i*perGroup+j]
			wg.Go(func() {
				for k := 0; time.Now().Before(stop); k++ {
					marker := fmt.Sprintf("%s-%d-%d", g.name, j, k)
					var m, tz, cs, d, got string
					err := c.QueryRowContext(ctx, "SELECT @@sql_mode, @@time_zone, @@character_set_client, DATABASE(), '"+marker+"'").Scan(&m, &tz, &cs, &d, &got)
					switch {
					case err != nil:
						bad("reader %s: %v", marker, err)
						return
					case got != marker:
						bad("reader %s got the answer for %s", marker, got)
					case !g.check(m, tz, cs, d):
						bad("reader %s (%s) saw sql_mode %q, time_zone %q, charset %q, database %q", marker, g.set, m, tz, cs, d)
					}
				}
			})
		}
	}
	for w := range writers {
		c := conns[len(groups)*perGroup+w]
		wg.Go(func() {
			for k := 0; time.Now().Before(stop); k++ {
				if _, err := c.ExecContext(ctx, fmt.Sprintf("INSERT INTO ks_test.pipe_w (writer, n) VALUES (%d, %d)", w, k)); err != nil {
					bad("writer %d insert %d: %v", w, k, err)
					return
				}
				acked[w]++
			}
		})
	}
	for f := range failers {
		c := conns[len(groups)*perGroup+writers+f]
		wg.Go(func() {
			for k := 0; time.Now().Before(stop); k++ {
				table := fmt.Sprintf("no_such_table_%d_%d", f, k)
				_, err := c.ExecContext(ctx, "SELECT * FROM ks_test."+table)
				var me *gomysql.MySQLError
				if !errors.As(err, &me) || me.Number != 1146 || !strings.Contains(me.Message, table) {
					bad("failer %d: %q got %v, want its own error 1146", f, table, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, pr := range problems {
		t.Error(pr)
	}
	if after := mustMetric(t, p, "keyshard_pool_pipelined_total", "node1"); after <= before {
		t.Fatalf("no statement was pipelined (keyshard_pool_pipelined_total %v -> %v)", before, after)
	} else {
		t.Logf("%v statements joined a pipelined connection", after-before)
	}
	for w := range writers {
		var n int
		if err := db.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM ks_test.pipe_w WHERE writer = %d", w)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != acked[w] {
			t.Errorf("writer %d: %d rows, %d inserts acknowledged", w, n, acked[w])
		}
	}
	// An error answer leaves the connection shared (autocommit: no
	// transaction); a few dials are the pool growing, not one per error.
	if d := mustMetric(t, p, "keyshard_pool_dials_total", "node1") - dials; d > 32 {
		t.Errorf("%v backend connections opened during the run: errors discard pipelined connections", d)
	}
	within(t, 5*time.Second, "no pipelined connection left", func() bool {
		return mustMetric(t, p, "keyshard_pool_pipelines", "node1") == 0
	})
}

// TestPipelineKillQuery kills one pipelined statement: it ends with the
// server's "interrupted" error at once, and the statements in flight with
// it on the same connection, before and behind it, end as they would have.
func TestPipelineKillQuery(t *testing.T) {
	p := startProxy(t, pipeYAML())
	db := p.open(t, "ks:ks", "ks_test", "")
	db.SetMaxOpenConns(20)
	conns := pipeConns(t, db, 8)
	ctx := context.Background()

	// Background clients keep pipes busy with short statements.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var problems []string
	for i, c := range conns[2:] {
		wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				marker := fmt.Sprintf("bg-%d-%d", i, k)
				var slept int
				var got string
				if err := c.QueryRowContext(ctx, "SELECT SLEEP(0.003), '"+marker+"'").Scan(&slept, &got); err != nil || got != marker {
					mu.Lock()
					problems = append(problems, fmt.Sprintf("%s: %v (got %q)", marker, err, got))
					mu.Unlock()
					return
				}
			}
		})
	}
	victim, killer := conns[0], conns[1]
	vid := connID(t, victim)
	killed := false
	for try := 0; try < 20 && !killed; try++ {
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			var v int
			done <- victim.QueryRowContext(ctx, fmt.Sprintf("SELECT SLEEP(3) AS victim_%d", try)).Scan(&v)
		}()
		// Killed only once seen waiting on a pipelined connection.
		piped := false
		for end := time.Now().Add(time.Second); time.Now().Before(end) && !piped; {
			piped = strings.Contains(processState(t, killer, vid), "(pipelined)")
			if !piped {
				time.Sleep(5 * time.Millisecond)
			}
		}
		if !piped {
			if _, err := killer.ExecContext(ctx, fmt.Sprintf("KILL QUERY %d", vid)); err != nil {
				t.Fatal(err)
			}
			<-done
			continue
		}
		if _, err := killer.ExecContext(ctx, fmt.Sprintf("KILL QUERY %d", vid)); err != nil {
			t.Fatalf("KILL QUERY %d: %v", vid, err)
		}
		err := <-done
		took := time.Since(start)
		me := mysqlErr(t, err)
		if me.Number != 1317 && me.Number != 1927 {
			t.Fatalf("killed pipelined statement: %d %q, want 1317 or 1927", me.Number, me.Message)
		}
		if took > 2500*time.Millisecond {
			t.Fatalf("the killed pipelined statement ended after %v (SLEEP(3) ran out, not killed)", took)
		}
		killed = true
	}
	close(stop)
	wg.Wait()
	for _, pr := range problems {
		t.Error("a statement in flight with the killed one:", pr)
	}
	if !killed {
		t.Fatal("the victim's statement never waited on a pipelined connection in 20 tries")
	}
	if id := connID(t, victim); id != vid {
		t.Fatalf("after KILL QUERY the victim's session changed: %d, was %d", id, vid)
	}
}

// processState is the State column of keyshard's process list for
// session id, as c sees it ("" if not listed).
func processState(t *testing.T, c *sql.Conn, id uint32) string {
	t.Helper()
	rows, err := c.QueryContext(context.Background(), "SHOW PROCESSLIST")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := map[string]string{}
		for i, c := range cols {
			row[strings.ToLower(c)] = vals[i].String
		}
		if row["id"] == fmt.Sprint(id) {
			return row["state"]
		}
	}
	return ""
}

// TestPipelineBackendDies kills the server under clients whose statements
// are in flight on pipelined connections (more clients than the node has
// connections): each gets a clear error naming the node, no client hangs,
// and each session goes on once the server is back. A read that got no
// byte of its answer runs again the usual way and finds the server
// refusing connections; one whose answer had started gets the lost
// connection.
func TestPipelineBackendDies(t *testing.T) {
	p := startProxy(t, pipeYAML())
	t.Cleanup(func() { _, _ = backends("start", fmt.Sprint(downPort)) })
	db := p.open(t, "other:other", "", "")
	db.SetMaxOpenConns(20)
	conns := pipeConns(t, db, 12) // node3 has 4 connections
	ctx := context.Background()
	before := mustMetric(t, p, "keyshard_pool_pipelined_total", "node3")

	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			for k := 0; ; k++ {
				qctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				var slept int
				var got string
				marker := fmt.Sprintf("c%d-%d", i, k)
				err := c.QueryRowContext(qctx, "SELECT SLEEP(0.004), '"+marker+"'").Scan(&slept, &got)
				if err == nil && got != marker {
					err = fmt.Errorf("got the answer for %s", got)
				}
				cancel()
				if err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	within(t, 5*time.Second, "statements pipelined on node3", func() bool {
		return mustMetric(t, p, "keyshard_pool_pipelined_total", "node3") > before+50
	})
	if err := killPid(instancePid(t, downPort)); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range errs {
		var me *gomysql.MySQLError
		switch {
		case !errors.As(err, &me):
			t.Errorf("client %d: %v, want a MySQL error", i, err)
		case !strings.Contains(me.Message, "node3"):
			t.Errorf("client %d: %d %q does not name the node", i, me.Number, me.Message)
		default:
			t.Logf("client %d: %d %s", i, me.Number, me.Message)
		}
	}
	if out, err := backends("start", fmt.Sprint(downPort)); err != nil {
		t.Fatalf("restart: %v\n%s", err, out)
	}
	for i, c := range conns {
		within(t, 15*time.Second, fmt.Sprintf("client %d answered again", i), func() bool {
			var one int
			return c.QueryRowContext(ctx, "SELECT 1").Scan(&one) == nil && one == 1
		})
	}
}

// TestPipelineSlowStatement: a slow statement on a pipelined connection
// holds up at most the depth behind it; the other clients' statements
// go to other connections meanwhile.
func TestPipelineSlowStatement(t *testing.T) {
	const depth = 4
	p := startProxy(t, baseYAML("%ADDR%")+fmt.Sprintf("backend_pipeline_depth: %d\n", depth))
	db := p.open(t, "ks:ks", "ks_test", "")
	db.SetMaxOpenConns(20)
	conns := pipeConns(t, db, 12)
	watcher := conns[11]
	conns = conns[:11]
	slowID := connID(t, conns[0])
	before := mustMetric(t, p, "keyshard_pool_pipelined_total", "node1")
	ctx := context.Background()
	stop := time.Now().Add(1500 * time.Millisecond)
	var mu sync.Mutex
	held, total := 0, 0
	var wg sync.WaitGroup
	for i, c := range conns[1:] {
		wg.Go(func() {
			for k := 0; time.Now().Before(stop); k++ {
				start := time.Now()
				var slept int
				if err := c.QueryRowContext(ctx, fmt.Sprintf("SELECT SLEEP(0.002) AS c%d_%d", i, k)).Scan(&slept); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				total++
				if time.Since(start) > 500*time.Millisecond {
					held++
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	slow := make(chan error, 1)
	go func() {
		var slept int
		slow <- conns[0].QueryRowContext(ctx, "SELECT SLEEP(1)").Scan(&slept)
	}()
	// The bound below means something only if SLEEP(1) shared a connection.
	piped := false
	for end := time.Now().Add(800 * time.Millisecond); time.Now().Before(end) && !piped; {
		if piped = strings.Contains(processState(t, watcher, slowID), "(pipelined)"); !piped {
			time.Sleep(2 * time.Millisecond)
		}
	}
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	t.Logf("%d of %d statements waited behind SLEEP(1)", held, total)
	if !piped {
		t.Fatal("SELECT SLEEP(1) never showed as pipelined in the process list")
	}
	if after := mustMetric(t, p, "keyshard_pool_pipelined_total", "node1"); after <= before {
		t.Fatalf("no statement was pipelined (keyshard_pool_pipelined_total %v -> %v)", before, after)
	}
	if held > depth-1 {
		t.Fatalf("%d statements waited behind the slow one, want at most %d (the depth behind it)", held, depth-1)
	}
}
