// Command xabench measures what writes over several nodes cost through
// keyshard, in one run, alternating A/B rounds: an autocommit INSERT of two
// rows on two nodes (one XA transaction, two phases) against two rows on
// one sub-table of one node (a plain statement), and a transaction of two
// UPDATEs on two nodes (a local transaction plus an XA branch, committed in
// two phases) against the same on one node; and a one-row INSERT whose id
// comes from a sequence (blocks of 1000 ids, and of 1: a round trip to the
// sequence's node per row) against one that gives its id. bench/xa.sh runs it against
// its own keyshard and backends; it prints a markdown table.
package main

import (
	"database/sql"
	"flag"
	"fmt"
	"log"
	"sort"
	"time"

	_ "github.com/go-sql-driver/mysql"
)

func main() {
	proxy := flag.String("proxy", "127.0.0.1:23497", "keyshard address")
	iters := flag.Int("iters", 500, "operations per side per round")
	rounds := flag.Int("rounds", 4, "alternating rounds")
	flag.Parse()
	db, err := sql.Open("mysql", "ks:ks@tcp("+*proxy+")/ks_xa")
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	must := func(q string, args ...any) {
		if _, err := db.Exec(q, args...); err != nil {
			log.Fatalf("%s: %v", q, err)
		}
	}
	must("DROP TABLE IF EXISTS t_xa")
	must("CREATE TABLE t_xa (id BIGINT PRIMARY KEY, v BIGINT NOT NULL)")
	// Sub-table = id % 8: 0-3 on node1, 4-7 on node2.
	for i := range 8 {
		must(fmt.Sprintf("INSERT INTO t_xa (id, v) VALUES (%d, 0)", i))
	}
	for _, t := range []string{"t_seq", "t_seq1"} {
		must("DROP TABLE IF EXISTS " + t)
		must("CREATE TABLE " + t + " (id BIGINT PRIMARY KEY, v BIGINT NOT NULL)")
	}
	// Fresh sequences (the table exists once keyshard has used one).
	_, _ = db.Exec("DELETE FROM keyshard.ks_sequence WHERE name LIKE 'ks_xa.%'")
	explicit := int64(0) // negative ids: below the sequences, which start after the greatest id
	next := int64(1000)
	ops := map[string]func() error{
		"insert, 1 node": func() error {
			next += 16
			_, err := db.Exec(fmt.Sprintf("INSERT INTO t_xa (id, v) VALUES (%d, 1), (%d, 1)", next, next+8))
			return err
		},
		"insert, 2 nodes (XA)": func() error {
			next += 16
			_, err := db.Exec(fmt.Sprintf("INSERT INTO t_xa (id, v) VALUES (%d, 1), (%d, 1)", next, next+4))
			return err
		},
		"insert, explicit id": func() error {
			explicit--
			_, err := db.Exec(fmt.Sprintf("INSERT INTO t_seq (id, v) VALUES (%d, 1)", explicit))
			return err
		},
		"insert, id from sequence (cache 1000)": func() error {
			_, err := db.Exec("INSERT INTO t_seq (v) VALUES (1)")
			return err
		},
		"insert, id from sequence (cache 1)": func() error {
			_, err := db.Exec("INSERT INTO t_seq1 (v) VALUES (1)")
			return err
		},
		"transaction, 1 node": func() error { return tx(db, 1, 2) },
		"transaction, 2 nodes (XA)": func() error {
			return tx(db, 1, 5)
		},
	}
	pairs := [][2]string{{"insert, 1 node", "insert, 2 nodes (XA)"}, {"transaction, 1 node", "transaction, 2 nodes (XA)"},
		{"insert, explicit id", "insert, id from sequence (cache 1000)"}, {"insert, explicit id", "insert, id from sequence (cache 1)"}}
	lat := map[string][]time.Duration{}
	for r := range *rounds {
		for _, p := range pairs {
			order := p
			if r%2 == 1 {
				order = [2]string{p[1], p[0]}
			}
			for _, name := range order {
				for range *iters {
					t0 := time.Now()
					if err := ops[name](); err != nil {
						log.Fatalf("%s: %v", name, err)
					}
					lat[name] = append(lat[name], time.Since(t0))
				}
			}
		}
	}
	fmt.Printf("| operation | mean ms | p50 ms | p99 ms | vs the first of its pair |\n|---|---:|---:|---:|---:|\n")
	for _, p := range pairs {
		base := mean(lat[p[0]])
		for _, name := range p {
			l := lat[name]
			sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
			m := mean(l)
			fmt.Printf("| %s | %.3f | %.3f | %.3f | %.2f |\n", name, ms(m), ms(l[len(l)/2]), ms(l[len(l)*99/100]), float64(m)/float64(base))
		}
	}
}

// tx moves 1 from account a to b in a transaction of two UPDATEs.
func tx(db *sql.DB, a, b int) error {
	t, err := db.Begin()
	if err != nil {
		return err
	}
	for _, q := range []string{fmt.Sprintf("UPDATE t_xa SET v = v - 1 WHERE id = %d", a), fmt.Sprintf("UPDATE t_xa SET v = v + 1 WHERE id = %d", b)} {
		if _, err := t.Exec(q); err != nil {
			_ = t.Rollback()
			return err
		}
	}
	return t.Commit()
}

func mean(l []time.Duration) time.Duration {
	var s time.Duration
	for _, d := range l {
		s += d
	}
	return s / time.Duration(len(l))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
