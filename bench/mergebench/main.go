// Command mergebench measures keyshard's scatter-gather merge against the
// same work done directly on the backends, in one run, alternating: a
// scatter `ORDER BY ... LIMIT 10` over the 8 sub-tables of sbshard.big
// through keyshard vs the same query on one sub-table and on all 8 at once
// (straight to the backends, the slowest finishing), and a 1,000,000-row
// ordered scatter through keyshard (time and keyshard's peak RSS) vs the
// unsharded sbtest.big read directly. bench/run.sh runs it; it prints a
// markdown section.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	_ "github.com/go-sql-driver/mysql"
)

func main() {
	proxy := flag.String("proxy", "127.0.0.1:19696", "keyshard address")
	nodes := flag.String("nodes", "127.0.0.1:23400,127.0.0.1:23401", "backends holding sub-tables 0-3 and 4-7")
	pid := flag.Int("pid", 0, "keyshard's pid, for its peak RSS")
	iters := flag.Int("iters", 20, "queries per side per round")
	rounds := flag.Int("rounds", 2, "rounds")
	query := flag.String("query", "SELECT id, k, c FROM %s ORDER BY k DESC, id LIMIT 10", "the LIMIT query; %s is the table")
	flag.Parse()
	addrs := strings.Split(*nodes, ",")
	ks := open(*proxy, "sbshard")
	direct := make([]*sql.DB, 8)
	for i := range direct {
		direct[i] = open(addrs[i/4], "sbshard")
	}
	plain := open(addrs[0], "sbtest")

	var single, parallel, scatter []time.Duration
	for r := 0; r < *rounds; r++ {
		for i := 0; i < *iters; i++ {
			sub := i % 8
			single = append(single, timed(func() { run(direct[sub], fmt.Sprintf(*query, fmt.Sprintf("big_%04d", sub))) }))
			parallel = append(parallel, timed(func() {
				var wg sync.WaitGroup
				for j := range direct {
					wg.Add(1)
					go func() { defer wg.Done(); run(direct[j], fmt.Sprintf(*query, fmt.Sprintf("big_%04d", j))) }()
				}
				wg.Wait()
			}))
			scatter = append(scatter, timed(func() { run(ks, fmt.Sprintf(*query, "big")) }))
		}
	}
	// The 1M-row ordered scatter, alternating with the direct read.
	var bigK, bigD []time.Duration
	if *pid > 0 {
		_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", *pid), []byte("5"), 0)
	}
	var rows int
	for r := 0; r < *rounds; r++ {
		bigD = append(bigD, timed(func() { run(plain, "SELECT * FROM big ORDER BY id") }))
		bigK = append(bigK, timed(func() { rows = run(ks, "SELECT * FROM big ORDER BY id") }))
	}
	rss := "n/a"
	if *pid > 0 {
		rss = fmt.Sprintf("%.1f", float64(vmKiB(*pid, "VmHWM"))/1024)
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/1e6) }
	fmt.Printf("\nScatter-gather merge (bench/mergebench, %d rounds of %d queries, alternating): `%s` over sbshard.big (%d rows, 2 nodes x 4 sub-tables):\n\n",
		*rounds, *iters, fmt.Sprintf(*query, "big"), rows)
	fmt.Println("| one sub-table direct ms | 8 sub-tables at once direct ms | keyshard scatter ms | keyshard / 8 at once | keyshard / one |")
	fmt.Println("|---:|---:|---:|---:|---:|")
	s, p, k := median(single), median(parallel), median(scatter)
	fmt.Printf("| %s | %s | %s | %.2f | %.2f |\n", ms(s), ms(p), ms(k), float64(k)/float64(p), float64(k)/float64(s))
	fmt.Printf("\n`SELECT * FROM big ORDER BY id`, %d rows merged from 8 sub-tables through keyshard vs the unsharded table direct:\n\n", rows)
	fmt.Println("| direct s | keyshard s | keyshard/direct | keyshard peak RSS MiB |")
	fmt.Println("|---:|---:|---:|---:|")
	d, kk := median(bigD), median(bigK)
	fmt.Printf("| %.2f | %.2f | %.2f | %s |\n", d.Seconds(), kk.Seconds(), float64(kk)/float64(d), rss)
}

func open(addr, db string) *sql.DB {
	d, err := sql.Open("mysql", "ks:ks@tcp("+addr+")/"+db)
	if err != nil {
		log.Fatal(err)
	}
	d.SetMaxIdleConns(8)
	return d
}

// run runs a query and reads every row, returning the row count.
func run(db *sql.DB, q string) int {
	rows, err := db.QueryContext(context.Background(), q)
	if err != nil {
		log.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	vals := make([]any, len(cols))
	for i := range vals {
		vals[i] = new(sql.RawBytes)
	}
	n := 0
	for rows.Next() {
		if err := rows.Scan(vals...); err != nil {
			log.Fatal(err)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		log.Fatalf("%s: %v", q, err)
	}
	return n
}

func timed(f func()) time.Duration {
	t := time.Now()
	f()
	return time.Since(t)
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func vmKiB(pid int, key string) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, key+":") {
			var n int
			fmt.Sscanf(strings.TrimSpace(l[len(key)+1:]), "%d", &n)
			return n
		}
	}
	return 0
}
