package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// seqYAML: sh_seq hashed on id over both nodes, its id from a sequence
// taken 5 at a time; sh_missing has a sequence but no table.
func seqYAML(addr string) string {
	return twoNodeYAML(addr, `      - db: shard_e2e
        table: sh_seq
        key: id
        nodes: [node1, node2]
        type: hash
        locations: [2, 2]
        auto_increment: id
        sequence_cache: 5
      - db: shard_e2e
        table: sh_missing
        key: id
        nodes: [node1, node2]
        type: hash
        locations: [1, 1]
        auto_increment: id
`)
}

// An INSERT that omits a sharded table's auto_increment column (or gives
// NULL) takes ids from a sequence on the backends: starting after the ids
// already there, consecutive within a statement, reported by the OK and
// LAST_INSERT_ID(), and unique across two keyshard instances.
func TestSequences(t *testing.T) {
	setupShardDB(t)
	node1 := direct(t, basePort, "")
	mustExec(t, node1, "CREATE DATABASE IF NOT EXISTS keyshard")
	mustExec(t, node1, "DROP TABLE IF EXISTS keyshard.ks_sequence")
	p := startProxy(t, seqYAML("%ADDR%"))
	db := p.open(t, "ks:ks", "shard_e2e", "")
	mustExec(t, db, "CREATE TABLE sh_seq (id BIGINT PRIMARY KEY, name VARCHAR(32))")
	mustExec(t, db, "INSERT INTO sh_seq (id, name) VALUES (41, 'old')")

	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	insert := func(q string, args ...any) int64 {
		t.Helper()
		r, err := c.ExecContext(ctx, q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		id, err := r.LastInsertId()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	lastInsertID := func() string {
		t.Helper()
		return strings.Join(queryColConn(t, c, "SELECT LAST_INSERT_ID()", 0), "")
	}
	// The sequence starts after the greatest id in any sub-table: 42.
	if id := insert("INSERT INTO sh_seq (name) VALUES ('a')"); id != 42 || lastInsertID() != "42" {
		t.Fatalf("first id: OK says %d, LAST_INSERT_ID() %s; want 42", id, lastInsertID())
	}
	// Several rows: consecutive ids, the first reported.
	if id := insert("INSERT INTO sh_seq (name) VALUES ('b'), ('c'), ('d')"); id != 43 || lastInsertID() != "43" {
		t.Fatalf("three rows: OK says %d, LAST_INSERT_ID() %s; want 43", id, lastInsertID())
	}
	// The block (42..46) has one id left: three rows take a new block
	// whole, 47..49.
	if id := insert("INSERT INTO sh_seq (name) VALUES ('e'), ('f'), ('g')"); id != 47 {
		t.Fatalf("three rows past the block: first id %d, want 47", id)
	}
	// NULL takes an id; a given id stays.
	if id := insert("INSERT INTO sh_seq (id, name) VALUES (NULL, 'n'), (100000, 'given')"); id != 50 {
		t.Fatalf("NULL id: %d, want 50", id)
	}
	// Prepared (binary protocol).
	st, err := c.PrepareContext(ctx, "INSERT INTO sh_seq (name) VALUES (?)")
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.ExecContext(ctx, "prepared")
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := r.LastInsertId(); id != 51 {
		t.Fatalf("prepared INSERT: id %d, want 51", id)
	}
	st.Close()
	// A rolled-back id is not given again.
	mustExecConn(t, c, "BEGIN")
	insert("INSERT INTO sh_seq (name) VALUES ('rolled back')")
	mustExecConn(t, c, "ROLLBACK")
	if id := insert("INSERT INTO sh_seq (name) VALUES ('h')"); id != 53 {
		t.Fatalf("after a rollback: id %d, want 53", id)
	}
	// A prepared ? bound to NULL takes an id; DEFAULT and 0 too.
	st, err = c.PrepareContext(ctx, "INSERT INTO sh_seq (id, name) VALUES (?, ?)")
	if err != nil {
		t.Fatal(err)
	}
	if r, err = st.ExecContext(ctx, nil, "null param"); err != nil {
		t.Fatal(err)
	}
	if id, _ := r.LastInsertId(); id != 54 {
		t.Fatalf("prepared INSERT with a NULL id: %d, want 54", id)
	}
	st.Close()
	if id := insert("INSERT INTO sh_seq (id, name) VALUES (DEFAULT, 'default'), (0, 'zero')"); id != 55 {
		t.Fatalf("DEFAULT and 0: first id %d, want 55", id)
	}
	// Inside a transaction (the session pinned), LAST_INSERT_ID() is the
	// sequence's id too, not the backend connection's.
	mustExecConn(t, c, "BEGIN")
	if id := insert("INSERT INTO sh_seq (name) VALUES ('in tx')"); id != 57 || lastInsertID() != "57" {
		t.Fatalf("in a transaction: OK says %d, LAST_INSERT_ID() %s; want 57", id, lastInsertID())
	}
	mustExecConn(t, c, "COMMIT")
	want := "41:old,42:a,43:b,44:c,45:d,47:e,48:f,49:g,50:n,51:prepared,53:h,54:null param,55:default,56:zero,57:in tx,100000:given"
	if got := strings.Join(queryCol(t, db, "SELECT CONCAT(id, ':', name) FROM sh_seq ORDER BY id"), ","); got != want {
		t.Fatalf("rows:\n got %s\nwant %s", got, want)
	}
	// The rows are spread by their ids.
	node2 := direct(t, basePort+1, "shard_e2e")
	if n := queryCol(t, node2, "SELECT (SELECT COUNT(*) FROM sh_seq_0002) + (SELECT COUNT(*) FROM sh_seq_0003)"); n[0] == "0" {
		t.Fatalf("no row reached node2")
	}

	// Two instances on the same backends never give one id twice.
	p2 := startProxy(t, seqYAML("%ADDR%"))
	db2 := p2.open(t, "ks:ks", "shard_e2e", "")
	var wg sync.WaitGroup
	ids := make([][]int64, 4)
	for w := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := db
			if w%2 == 1 {
				d = db2
			}
			for i := range 20 {
				r, err := d.Exec(fmt.Sprintf("INSERT INTO sh_seq (name) VALUES ('w%d-%d')", w, i))
				if err != nil {
					t.Errorf("worker %d: %v", w, err)
					return
				}
				id, _ := r.LastInsertId()
				ids[w] = append(ids[w], id)
			}
		}()
	}
	wg.Wait()
	var all []int64
	for _, w := range ids {
		all = append(all, w...)
	}
	slices.Sort(all)
	if len(all) != 80 || len(slices.Compact(slices.Clone(all))) != 80 {
		t.Fatalf("two instances: %d ids, %d distinct", len(all), len(slices.Compact(all)))
	}
	if got := queryCol(t, db, "SELECT COUNT(*) FROM sh_seq WHERE name LIKE 'w%'"); got[0] != "80" {
		t.Fatalf("rows from the workers: %s, want 80", got[0])
	}
	next := queryCol(t, node1, "SELECT next_id FROM keyshard.ks_sequence WHERE name = 'shard_e2e.sh_seq'")
	if n, _ := strconv.ParseInt(strings.Join(next, ""), 10, 64); n <= all[len(all)-1] {
		t.Fatalf("the sequence's next_id %v is not past the last id given %d", next, all[len(all)-1])
	}

	// LOAD DATA must give the ids itself.
	_, err = db.Exec("LOAD DATA LOCAL INFILE '/dev/null' INTO TABLE sh_seq (name)")
	wantErrContains(t, "LOAD DATA without the sequence's column", err, 1235, "must read its auto_increment column id from the file")
	// A sequence whose table does not exist: the server's error, naming
	// the sequence.
	_, err = db.Exec("INSERT INTO sh_missing (name) VALUES ('x')")
	wantErrContains(t, "a sequence on a missing table", err, 1146, "sequence shard_e2e.sh_missing")
}
