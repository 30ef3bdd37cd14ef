// Command xacontention moves money between accounts in crossing order,
// the workload whose deadlocks no single server sees when the accounts
// live on different nodes: clients transfer between the two accounts of
// a pair, half of them one way and half the other, each transfer a BEGIN,
// two UPDATEs and a COMMIT, retried after a deadlock (1213) or a lock wait
// timeout (1205). It runs the same workload on each target given (one
// server directly; keyshard over two nodes, where accounts 2k and 2k+1
// are on different nodes) for the same time, and prints a markdown row
// per target: transfers, retries by error, the longest transfer, and
// whether the total balance held. bench/xa-contention.sh runs it.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
)

func main() {
	targets := flag.String("targets", "", "name=dsn,name=dsn: where to run (each in turn)")
	clients := flag.Int("clients", 8, "concurrent clients")
	pairs := flag.Int("pairs", 2, "account pairs (accounts 2k and 2k+1)")
	dur := flag.Duration("time", 15*time.Second, "run time per target")
	flag.Parse()
	fmt.Println("| target | transfers | per second | deadlock retries (1213) | lock wait timeouts (1205) | longest transfer | total held |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---|")
	for _, t := range strings.Split(*targets, ",") {
		name, dsn, ok := strings.Cut(t, "=")
		if !ok {
			log.Fatalf("target %q: want name=dsn", t)
		}
		r := run(dsn, *clients, *pairs, *dur)
		fmt.Printf("| %s | %d | %.0f | %d | %d | %s | %v |\n", name, r.transfers, float64(r.transfers)/dur.Seconds(), r.deadlocks,
			r.timeouts, r.longest.Round(time.Millisecond), r.held)
	}
}

type result struct {
	transfers, deadlocks, timeouts int64
	longest                        time.Duration
	held                           bool
}

func run(dsn string, clients, pairs int, dur time.Duration) result {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(clients + 1)
	must := func(q string) {
		if _, err := db.Exec(q); err != nil {
			log.Fatalf("%s: %v", q, err)
		}
	}
	must("DROP TABLE IF EXISTS acc")
	must("CREATE TABLE acc (id BIGINT PRIMARY KEY, bal BIGINT NOT NULL)")
	var vals []string
	for i := range 2 * pairs {
		vals = append(vals, fmt.Sprintf("(%d, 1000)", i))
	}
	must("INSERT INTO acc (id, bal) VALUES " + strings.Join(vals, ", "))
	var res result
	var longest atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			conn, err := db.Conn(context.Background())
			if err != nil {
				log.Fatal(err)
			}
			defer conn.Close()
			from, to := 2*(c%pairs), 2*(c%pairs)+1
			if (c/pairs)%2 == 1 {
				from, to = to, from // the other way: crossing
			}
			for ctx.Err() == nil {
				start := time.Now()
				for {
					err := transfer(conn, from, to)
					if err == nil {
						break
					}
					var me *mysql.MySQLError
					if !errors.As(err, &me) || me.Number != 1213 && me.Number != 1205 {
						log.Fatalf("transfer %d -> %d: %v", from, to, err)
					}
					_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
					if me.Number == 1213 {
						atomic.AddInt64(&res.deadlocks, 1)
					} else {
						atomic.AddInt64(&res.timeouts, 1)
					}
				}
				atomic.AddInt64(&res.transfers, 1)
				d := int64(time.Since(start))
				for {
					cur := longest.Load()
					if d <= cur || longest.CompareAndSwap(cur, d) {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	res.longest = time.Duration(longest.Load())
	var total, n int64
	if err := db.QueryRow("SELECT SUM(bal), COUNT(*) FROM acc").Scan(&total, &n); err != nil {
		log.Fatal(err)
	}
	res.held = total == 1000*n
	return res
}

// transfer moves 1 from account from to account to in one transaction.
func transfer(conn *sql.Conn, from, to int) error {
	ctx := context.Background()
	for _, q := range []string{"BEGIN", fmt.Sprintf("UPDATE acc SET bal = bal - 1 WHERE id = %d", from),
		fmt.Sprintf("UPDATE acc SET bal = bal + 1 WHERE id = %d", to), "COMMIT"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}
