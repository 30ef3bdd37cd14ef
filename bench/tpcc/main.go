// Command tpcc runs test/tpcc's TPC-C-like workload (the one TestTPCC
// checks) on each target given, for a fixed time: it creates and loads
// the tables through the target (a client with autocommit off), runs the
// clients, then checks the TPC-C consistency conditions through the
// target, and prints a markdown row per target: transactions per second
// (all types, new-order), p95 latency, cross-warehouse work (remote
// order lines, remote payments), deadlock retries. bench/tpcc.sh runs it.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/keyshard/keyshard/test/tpcc"
)

func main() {
	targets := flag.String("targets", "", "name=dsn,name=dsn: where to run (each in turn)")
	clients := flag.Int("clients", 8, "concurrent clients (terminals), client i on warehouse i % warehouses + 1")
	warehouses := flag.Int("warehouses", 4, "warehouses")
	dur := flag.Duration("time", 30*time.Second, "run time per target")
	flag.Parse()
	cfg := tpcc.Config{Warehouses: *warehouses, Districts: 10, Customers: 30, Items: 1000}
	fmt.Printf("%d warehouses x %d districts x %d customers, %d items; %d clients, %v per target\n\n",
		cfg.Warehouses, cfg.Districts, cfg.Customers, cfg.Items, *clients, *dur)
	fmt.Println("| target | transactions | TPS (all) | new-order TPS | p95 all | p95 new-order | remote order lines | remote payments | deadlock retries | consistent |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, t := range strings.Split(*targets, ",") {
		name, dsn, ok := strings.Cut(t, "=")
		if !ok {
			log.Fatalf("target %q: want name=dsn", t)
		}
		s, consistent := run(dsn, cfg, *clients, *dur)
		secs := dur.Seconds()
		fmt.Printf("| %s | %d | %.1f | %.1f | %s | %s | %d of %d | %d of %d | %d | %s |\n", name, s.Total(), float64(s.Total())/secs,
			float64(s.Done[tpcc.NewOrder])/secs, s.P95(-1).Round(100*time.Microsecond), s.P95(tpcc.NewOrder).Round(100*time.Microsecond),
			s.RemoteLines, s.Lines, s.RemotePayments, s.Done[tpcc.Payment], s.Deadlocks, consistent)
	}
}

func run(dsn string, cfg tpcc.Config, clients int, dur time.Duration) (tpcc.Stats, string) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(clients + 2)
	db.SetMaxIdleConns(clients + 2)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "SET autocommit=0"); err != nil {
		log.Fatal(err)
	}
	if err := tpcc.Create(ctx, conn); err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	if err := tpcc.Load(ctx, conn, cfg); err != nil {
		log.Fatal(err)
	}
	conn.Close()
	log.Printf("loaded in %v", time.Since(start).Round(time.Millisecond))
	rctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	s, err := tpcc.Run(rctx, []*sql.DB{db}, cfg, clients, 0, 1)
	if err != nil {
		log.Fatal(err)
	}
	f, err := tpcc.Gather(cfg, func(table, q string) ([][]string, error) {
		return tpcc.Rows(ctx, db, strings.ReplaceAll(q, "{t}", table))
	})
	if err != nil {
		log.Fatal(err)
	}
	// A transaction cut at the end of the run may have committed
	// uncounted: check the database alone, not against the counts.
	if bad := f.Check(cfg, nil); len(bad) > 0 {
		return s, "no: " + strings.Join(bad, "; ")
	}
	return s, "yes"
}
