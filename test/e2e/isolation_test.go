package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
)

// Nothing one client does to a pooled backend connection may show to the
// next client that gets it. node1 gets one connection only, so every
// client below is served by the same pooled connection whenever its flavor
// allows; each answer is compared with a direct connection to MariaDB.
func TestNoStateThroughPool(t *testing.T) {
	p := startProxy(t, strings.Replace(baseYAML("%ADDR%"), "max_conns_limit: 16", "max_conns_limit: 1", 1))
	ctx := context.Background()
	one := func(d *sql.DB) *sql.DB { d.SetMaxOpenConns(1); return d }
	directNoDB := one(direct(t, basePort, ""))

	t.Run("no default database", func(t *testing.T) {
		withDB := one(p.open(t, "ks:ks", "ks_test", ""))
		if _, err := withDB.Exec("SELECT 1"); err != nil {
			t.Fatal(err)
		}
		withDB.Close() // its backend connection, now in ks_test, goes back
		noDB := one(p.open(t, "ks:ks", "", ""))
		for _, d := range []*sql.DB{directNoDB, noDB} {
			var db sql.NullString
			if err := d.QueryRow("SELECT DATABASE()").Scan(&db); err != nil {
				t.Fatal(err)
			}
			if db.Valid {
				t.Errorf("SELECT DATABASE() on a connection without a database = %q, want NULL", db.String)
			}
			_, err := d.Exec("CREATE TABLE iso_nodb (id INT)")
			if code := myErrCode(err); code != 1046 {
				t.Errorf("CREATE TABLE without a database: %v, want 1046 No database selected", err)
			}
		}
		// And a client with a database again is served as before.
		again := one(p.open(t, "ks:ks", "ks_test", ""))
		var db string
		if err := again.QueryRow("SELECT DATABASE()").Scan(&db); err != nil || db != "ks_test" {
			t.Fatalf("DATABASE() = %q, %v; want ks_test", db, err)
		}
	})

	t.Run("CLIENT_FOUND_ROWS", func(t *testing.T) {
		setup := one(p.open(t, "ks:ks", "ks_test", ""))
		for _, q := range []string{"CREATE TABLE IF NOT EXISTS iso_found (id INT PRIMARY KEY, v INT)",
			"REPLACE INTO iso_found VALUES (1, 7)"} {
			if _, err := setup.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		// Matched 1 row, changed none: CLIENT_FOUND_ROWS reports 1, else 0,
		// alternating on the one pooled connection.
		for _, found := range []bool{true, false, true, false} {
			params := fmt.Sprintf("clientFoundRows=%v", found)
			ref := one(direct(t, basePort, "ks_test?"+params))
			ks := one(p.open(t, "ks:ks", "ks_test", params))
			for _, d := range []*sql.DB{ref, ks} {
				r, err := d.Exec("UPDATE iso_found SET v = 7 WHERE id = 1")
				if err != nil {
					t.Fatal(err)
				}
				n, _ := r.RowsAffected()
				if want := map[bool]int64{true: 1, false: 0}[found]; n != want {
					t.Errorf("clientFoundRows=%v: affected rows %d, want %d", found, n, want)
				}
			}
			ks.Close()
		}
	})

	t.Run("multi-statements after a reset", func(t *testing.T) {
		// A client without multi-statements turns the option off on the
		// connection it pins (a transaction); its end resets the
		// connection, which keeps the option off: the next client, which
		// wants it on, must get it on.
		single := one(p.open(t, "ks:ks", "ks_test", ""))
		c, err := single.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ExecContext(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ExecContext(ctx, "DO 1; DO 2"); myErrCode(err) != 1064 {
			t.Fatalf("a batch from a client without multi-statements: %v, want 1064 as MariaDB answers", err)
		}
		c.Close()
		single.Close()
		multi := one(p.open(t, "ks:ks", "ks_test", "multiStatements=true"))
		if _, err := multi.Exec("DO 1; DO 2"); err != nil {
			t.Fatalf("a batch from a client with multi-statements, on the reset connection: %v", err)
		}
	})
}
