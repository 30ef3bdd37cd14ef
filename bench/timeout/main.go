// Command timeout measures keyshard's statement time limits
// (max_execution_time) for bench/timeout.sh: how long after the limit a
// client gets its error, whether anything is left running on the
// backends, and what a limit costs a short statement.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
)

func main() {
	limited := flag.String("limited", "", "DSN through the keyshard with max_execution_time")
	plain := flag.String("plain", "", "DSN through the keyshard without it")
	pids := flag.String("pids", "", "pids of the limited and plain keyshards, comma-separated (for CPU)")
	backends := flag.String("backends", "", "DSNs of the backends, comma-separated (for what is left running)")
	limit := flag.Duration("limit", 500*time.Millisecond, "the limited keyshard's max_execution_time")
	runs := flag.Int("runs", 10, "timed-out statements of each kind")
	dur := flag.Duration("time", 5*time.Second, "length of each cost run")
	flag.Parse()
	lim, pl := open(*limited), open(*plain)
	var bes []*sql.DB
	for _, d := range strings.Split(*backends, ",") {
		bes = append(bes, open(d))
	}
	fmt.Println("| statement | limit | client error after, median | max | errno | left running on the backends |")
	fmt.Println("|---|---:|---:|---:|---:|---:|")
	for _, q := range []struct{ name, sql string }{
		{"SELECT SLEEP(10), one node", "SELECT SLEEP(10)"},
		{"merge over 8 sub-tables on 2 nodes, each leg computing for seconds", "SELECT id, BENCHMARK(30000000, MD5(k)) FROM bt ORDER BY id"},
	} {
		var took []time.Duration
		codes := map[uint16]int{}
		left := 0
		for range *runs {
			start := time.Now()
			_, err := lim.Exec(q.sql)
			took = append(took, time.Since(start))
			var me *mysql.MySQLError
			if errors.As(err, &me) {
				codes[me.Number]++
			} else {
				codes[0]++
			}
			time.Sleep(100 * time.Millisecond)
			left += running(bes)
		}
		slices.Sort(took)
		var errnos []string
		for code, n := range codes {
			errnos = append(errnos, fmt.Sprintf("%d x%d", code, n))
		}
		slices.Sort(errnos)
		fmt.Printf("| %s | %v | %v | %v | %s | %d |\n", q.name, *limit, took[len(took)/2].Round(time.Millisecond),
			took[len(took)-1].Round(time.Millisecond), strings.Join(errnos, ", "), left)
	}
	// What a limit costs: the same point reads through both keyshards,
	// alternated, keyshard CPU per statement from /proc.
	ps := strings.Split(*pids, ",")
	fmt.Println()
	fmt.Println("| keyshard | round | statements/s | keyshard CPU µs/statement |")
	fmt.Println("|---|---:|---:|---:|")
	for round := 1; round <= 2; round++ {
		for i, db := range []*sql.DB{pl, lim} {
			name := []string{"no limit", "max_execution_time " + limit.String()}[i]
			pid := ps[1-i]
			c0 := cpu(pid)
			n := load(db, *dur)
			c1 := cpu(pid)
			fmt.Printf("| %s | %d | %.0f | %.1f |\n", name, round, float64(n)/dur.Seconds(), (c1-c0)*1e6/float64(n))
		}
	}
}

func open(dsn string) *sql.DB {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	return db
}

// running counts the statements still at work on the backends.
func running(bes []*sql.DB) int {
	n := 0
	for _, b := range bes {
		var c int
		if err := b.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT%' AND " +
			"(INFO LIKE '%SLEEP(%' OR INFO LIKE '%BENCHMARK(%') AND INFO NOT LIKE '%PROCESSLIST%'").Scan(&c); err != nil {
			log.Fatal(err)
		}
		n += c
	}
	return n
}

// load runs point reads from 8 goroutines for d; it returns how many.
func load(db *sql.DB, d time.Duration) int64 {
	var n atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			var v string
			for i := g; ctx.Err() == nil; i++ {
				if err := db.QueryRow("SELECT k FROM bt WHERE id = ?", i%64).Scan(&v); err == nil {
					n.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return n.Load()
}

// cpu is a process's user+system CPU in seconds.
func cpu(pid string) float64 {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		log.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100
}
