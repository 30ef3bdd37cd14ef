// Command tpcc runs test/tpcc's TPC-C-like workload (the one TestTPCC
// checks) on each target given: it creates and loads the tables through
// each target (a client with autocommit off), then runs the clients on
// the targets in turn, -rounds times for -time each (A B A B ...: a
// machine whose load drifts weighs on both alike), then checks the TPC-C
// consistency conditions through each target, and prints a markdown row
// per target: transactions per second (all types, new-order), p95
// latency, cross-warehouse work (remote order lines, remote payments),
// deadlock retries, and how busy the machine's CPUs were while it ran.
// Arguments name=dsn name the backend servers whose statement counters
// (prepares, executes, XA prepares per transaction) each row shows.
// bench/tpcc.sh runs it.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/keyshard/keyshard/test/tpcc"
)

type target struct {
	name string
	db   *sql.DB
	s    tpcc.Stats
	busy []float64 // per round: the machine's CPU busy share
	cpu  []float64 // per -pids process (and this one, last): CPU seconds
	com  []float64 // per -servers server: Com_stmt_prepare, Com_stmt_execute, Com_xa_prepare (3 each)
}

var counters = []string{"Com_stmt_prepare", "Com_stmt_execute", "Com_xa_prepare"}

// status reads counters on each server.
func status(ctx context.Context, servers []*sql.DB) []float64 {
	out := make([]float64, 0, 3*len(servers))
	for _, db := range servers {
		m := map[string]float64{}
		rows, err := tpcc.Rows(ctx, db, "SHOW GLOBAL STATUS WHERE Variable_name IN ('"+strings.Join(counters, "', '")+"')")
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range rows {
			var v float64
			fmt.Sscan(r[1], &v)
			m[r[0]] = v
		}
		for _, c := range counters {
			out = append(out, m[c])
		}
	}
	return out
}

func main() {
	targets := flag.String("targets", "", "name=dsn,name=dsn: where to run (in turn)")
	clients := flag.Int("clients", 8, "concurrent clients (terminals), client i on warehouse i % warehouses + 1")
	warehouses := flag.Int("warehouses", 4, "warehouses")
	dur := flag.Duration("time", 10*time.Second, "run time per target and round")
	rounds := flag.Int("rounds", 3, "rounds")
	pidList := flag.String("pids", "", "name=pid,...: processes whose CPU time per transaction each target's rows show (this one's too)")
	flag.Parse()
	var names []string
	var pids []int
	for _, np := range strings.Split(*pidList, ",") {
		if name, pid, ok := strings.Cut(np, "="); ok {
			var n int
			fmt.Sscan(pid, &n)
			names, pids = append(names, name), append(pids, n)
		}
	}
	names, pids = append(names, "client"), append(pids, os.Getpid())
	serverList := flag.Args() // name=dsn of each backend server, for its statement counters
	var snames []string
	var servers []*sql.DB
	for _, nd := range serverList {
		name, dsn, _ := strings.Cut(nd, "=")
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			log.Fatal(err)
		}
		defer db.Close()
		snames, servers = append(snames, name), append(servers, db)
	}
	cfg := tpcc.Config{Warehouses: *warehouses, Districts: 10, Customers: 30, Items: 1000}
	ctx := context.Background()
	var ts []*target
	for _, t := range strings.Split(*targets, ",") {
		name, dsn, ok := strings.Cut(t, "=")
		if !ok {
			log.Fatalf("target %q: want name=dsn", t)
		}
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			log.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(*clients + 2)
		db.SetMaxIdleConns(*clients + 2)
		load(ctx, db, cfg)
		ts = append(ts, &target{name: name, db: db, cpu: make([]float64, len(pids)), com: make([]float64, 3*len(servers))})
	}
	for r := range *rounds {
		for _, t := range ts {
			c0 := cpu()
			p0 := procCPU(pids)
			s0 := status(ctx, servers)
			rctx, cancel := context.WithTimeout(ctx, *dur)
			s, err := tpcc.Run(rctx, []*sql.DB{t.db}, cfg, *clients, 0, uint64(1+r*1000))
			cancel()
			if err != nil {
				log.Fatalf("%s: %v", t.name, err)
			}
			t.busy = append(t.busy, busy(c0, cpu()))
			for i, v := range procCPU(pids) {
				t.cpu[i] += v - p0[i]
			}
			for i, v := range status(ctx, servers) {
				t.com[i] += v - s0[i]
			}
			log.Printf("round %d, %s: %.1f TPS", r+1, t.name, float64(s.Total())/dur.Seconds())
			t.s.Add(&s)
		}
	}
	fmt.Printf("%d warehouses x %d districts x %d customers, %d items; %d clients; %d rounds of %v per target\n\n",
		cfg.Warehouses, cfg.Districts, cfg.Customers, cfg.Items, *clients, *rounds, *dur)
	fmt.Println("| target | transactions | TPS (all) | new-order TPS | p95 all | p95 new-order | remote order lines | remote payments | deadlock retries | CPUs busy per round | consistent |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
	defer func() {
		fmt.Printf("\nCPU ms per transaction (all types):\n\n| target | %s |\n|---|%s\n", strings.Join(names, " | "), strings.Repeat("---:|", len(names)))
		for _, t := range ts {
			var c []string
			for _, v := range t.cpu {
				c = append(c, fmt.Sprintf("%.2f", 1000*v/float64(max(t.s.Total(), 1))))
			}
			fmt.Printf("| %s | %s |\n", t.name, strings.Join(c, " | "))
		}
		if len(servers) == 0 {
			return
		}
		fmt.Printf("\nServer statements per transaction (prepares / executes / XA prepares):\n\n| target | %s |\n|---|%s\n", strings.Join(snames, " | "), strings.Repeat("---:|", len(snames)))
		for _, t := range ts {
			var c []string
			n := float64(max(t.s.Total(), 1))
			for i := range servers {
				c = append(c, fmt.Sprintf("%.1f / %.1f / %.2f", t.com[3*i]/n, t.com[3*i+1]/n, t.com[3*i+2]/n))
			}
			fmt.Printf("| %s | %s |\n", t.name, strings.Join(c, " | "))
		}
	}()
	for _, t := range ts {
		f, err := tpcc.Gather(cfg, func(table, q string) ([][]string, error) {
			return tpcc.Rows(ctx, t.db, strings.ReplaceAll(q, "{t}", table))
		})
		if err != nil {
			log.Fatal(err)
		}
		// A transaction cut at a round's end may have committed
		// uncounted: check the database alone, not against the counts.
		consistent := "yes"
		if bad := f.Check(cfg, nil); len(bad) > 0 {
			consistent = "no: " + strings.Join(bad, "; ")
		}
		s := &t.s
		secs := dur.Seconds() * float64(*rounds)
		var b []string
		for _, x := range t.busy {
			b = append(b, fmt.Sprintf("%.0f%%", 100*x))
		}
		fmt.Printf("| %s | %d | %.1f | %.1f | %s | %s | %d of %d | %d of %d | %d | %s | %s |\n", t.name, s.Total(), float64(s.Total())/secs,
			float64(s.Done[tpcc.NewOrder])/secs, s.P95(-1).Round(100*time.Microsecond), s.P95(tpcc.NewOrder).Round(100*time.Microsecond),
			s.RemoteLines, s.Lines, s.RemotePayments, s.Done[tpcc.Payment], s.Deadlocks, strings.Join(b, " "), consistent)
	}
}

func load(ctx context.Context, db *sql.DB, cfg tpcc.Config) {
	conn, err := db.Conn(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET autocommit=0"); err != nil {
		log.Fatal(err)
	}
	if err := tpcc.Create(ctx, conn); err != nil {
		log.Fatal(err)
	}
	if err := tpcc.Load(ctx, conn, cfg); err != nil {
		log.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "SET autocommit=1"); err != nil {
		log.Fatal(err)
	}
}

// procCPU returns the CPU seconds (user and system) of each process.
func procCPU(pids []int) []float64 {
	out := make([]float64, len(pids))
	for i, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		if j := strings.LastIndexByte(s, ')'); j >= 0 {
			s = s[j+2:]
		}
		f := strings.Fields(s)
		if len(f) < 13 {
			continue
		}
		var u, k float64
		fmt.Sscan(f[11], &u)
		fmt.Sscan(f[12], &k)
		out[i] = (u + k) / 100 // USER_HZ
	}
	return out
}

// cpu returns the machine's busy and total CPU ticks from /proc/stat.
func cpu() [2]uint64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return [2]uint64{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	var v [2]uint64
	for i, f := range strings.Fields(line)[1:] {
		var n uint64
		fmt.Sscan(f, &n)
		v[1] += n
		if i != 3 && i != 4 { // idle, iowait
			v[0] += n
		}
	}
	return v
}

func busy(a, b [2]uint64) float64 {
	if b[1] == a[1] {
		return 0
	}
	return float64(b[0]-a[0]) / float64(b[1]-a[1])
}
