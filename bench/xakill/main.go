// Command xakill measures what SIGKILLs of keyshard cost a workload of
// crossing transfers: WORKERS clients move money between accounts on two
// nodes (one UPDATE over both nodes, or a transaction of two UPDATEs),
// each picking its two accounts at random and the direction at random, so
// that transfers cross and wait on each other's row locks (a lock wait
// gives up after 2 s and counts as refused). It runs keyshard itself
// (bench/xa-kill.sh builds it and the backends) for -dur and, -kills
// times at even intervals, SIGKILLs it while it serves: it kills the
// running keyshard and starts one with KS_FAILPOINT=kill:decide:1, which
// kills itself at its first commit decision (every branch of that
// transaction prepared, no decision: the case whose row locks outlive
// the process), then a clean one, each restart at once. It prints the
// transfers acknowledged, the longest time without one, and the total
// balance (unchanged, or the run fails), as the cells of a markdown
// table's row: kills, duration, acknowledged, per second, refused,
// longest gap, kill times, total.
package main

import (
	"database/sql"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/keyshard/keyshard/test/bank"
)

const accounts, balance = 16, 1000 // ids 0-3, 8-11 on node1; 4-7, 12-15 on node2

func main() {
	bin := flag.String("bin", "bin/keyshard", "keyshard binary")
	cfg := flag.String("config", "", "keyshard config (listening on -addr)")
	addr := flag.String("addr", "127.0.0.1:23498", "keyshard address")
	logPath := flag.String("log", "keyshard.log", "keyshard's output")
	dur := flag.Duration("dur", 24*time.Second, "how long the transfers run")
	kills := flag.Int("kills", 3, "SIGKILLs during the run")
	workers := flag.Int("workers", 8, "clients")
	flag.Parse()
	_ = mysql.SetLogger(log.New(io.Discard, "", 0)) // the driver's notes of each lost connection
	logf, err := os.OpenFile(*logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	var cur atomic.Pointer[exec.Cmd]
	start := func(failpoint string) *exec.Cmd {
		cmd := exec.Command(*bin, "-config", *cfg)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.Env = append(os.Environ(), "KS_FAILPOINT="+failpoint)
		if err := cmd.Start(); err != nil {
			log.Fatal(err)
		}
		for range 500 {
			if c, err := net.Dial("tcp", *addr); err == nil {
				c.Close()
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		return cmd
	}
	cur.Store(start(""))
	db, err := sql.Open("mysql", fmt.Sprintf("ks:ks@tcp(%s)/ks_xakill?innodb_lock_wait_timeout=2&timeout=5s&readTimeout=10s", *addr))
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(*workers)
	for _, q := range []string{"DROP TABLE IF EXISTS accounts",
		"CREATE TABLE accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, ops INT NOT NULL DEFAULT 0)"} {
		if _, err := db.Exec(q); err != nil {
			log.Fatalf("%s: %v", q, err)
		}
	}
	var rows []string
	for i := range accounts {
		rows = append(rows, fmt.Sprintf("(%d, %d)", i, balance))
	}
	if _, err := db.Exec("INSERT INTO accounts (id, balance) VALUES " + strings.Join(rows, ", ")); err != nil {
		log.Fatal(err)
	}

	var mu sync.Mutex
	var acks []time.Duration // when each transfer was acknowledged, since t0
	var refused, lost atomic.Int64
	t0 := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			node1, node2 := []int{0, 1, 2, 3, 8, 9, 10, 11}, []int{4, 5, 6, 7, 12, 13, 14, 15}
			for {
				select {
				case <-stop:
					return
				default:
				}
				a, b := node1[rng.IntN(len(node1))], node2[rng.IntN(len(node2))]
				if rng.IntN(2) == 0 {
					a, b = b, a
				}
				x := 1 + rng.IntN(50)
				var err error
				if rng.IntN(2) == 0 {
					_, err = db.Exec(fmt.Sprintf("UPDATE accounts SET balance = balance + CASE id WHEN %d THEN %d WHEN %d THEN %d END, "+
						"ops = ops + 1 WHERE id IN (%d, %d)", a, -x, b, x, a, b))
				} else {
					err = bank.Transfer(db, a, b, x)
				}
				switch {
				case err == nil:
					mu.Lock()
					acks = append(acks, time.Since(t0))
					mu.Unlock()
				case bank.IsConnErr(err):
					lost.Add(1)
					time.Sleep(10 * time.Millisecond) // keyshard restarting
				default:
					refused.Add(1)
				}
			}
		}()
	}
	var killedAt []string
	for i := range *kills {
		time.Sleep(time.Until(t0.Add(*dur * time.Duration(i+1) / time.Duration(*kills+1))))
		c := cur.Load()
		_ = c.Process.Signal(syscall.SIGKILL)
		_ = c.Wait()
		killedAt = append(killedAt, time.Since(t0).Round(100*time.Millisecond).String())
		c = start("kill:decide:1") // dies at its first commit decision
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			log.Printf("kill %d: the keyshard with kill:decide:1 made no decision in 10 s", i+1)
			_ = c.Process.Signal(syscall.SIGKILL)
			<-done
		}
		cur.Store(start(""))
	}
	time.Sleep(time.Until(t0.Add(*dur)))
	close(stop)
	wg.Wait()
	elapsed := time.Since(t0)
	var total, ops int64
	if err := db.QueryRow("SELECT SUM(balance), SUM(ops) FROM accounts").Scan(&total, &ops); err != nil {
		log.Fatal(err)
	}
	c := cur.Load()
	_ = c.Process.Signal(syscall.SIGTERM)
	_ = c.Wait()
	sort.Slice(acks, func(i, j int) bool { return acks[i] < acks[j] })
	gap, prev := time.Duration(0), time.Duration(0)
	for _, a := range append(acks, elapsed) {
		gap = max(gap, a-prev)
		prev = a
	}
	fmt.Printf("%d | %s | %d | %.1f | %d | %s | %s | %d\n", *kills, elapsed.Round(100*time.Millisecond), len(acks),
		float64(len(acks))/elapsed.Seconds(), refused.Load(), gap.Round(100*time.Millisecond), strings.Join(killedAt, " "), total)
	if total != accounts*balance || ops%2 != 0 {
		log.Fatalf("total balance %d (want %d), operations %d (want an even number)", total, accounts*balance, ops)
	}
}
