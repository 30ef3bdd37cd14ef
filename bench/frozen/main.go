// Command frozen measures what clients see while a backend is frozen
// (SIGSTOP): threads run point statements through one address; the backend
// is stopped for -freeze, then continued. It prints one markdown row: time
// from the freeze to each thread's first error (median, max), statements
// that hung for the whole freeze, and the time from SIGCONT to the first
// success again. Run it against keyshard and against the backend directly.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
)

func main() {
	dsn := flag.String("dsn", "ks:ks@tcp(127.0.0.1:23495)/", "where the statements go")
	pidFile := flag.String("pidfile", "", "the backend's pid file")
	threads := flag.Int("threads", 16, "client threads")
	freeze := flag.Duration("freeze", 15*time.Second, "how long the backend stays stopped")
	label := flag.String("label", "", "row label")
	flag.Parse()
	b, err := os.ReadFile(*pidFile)
	if err != nil {
		fail(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		fail(err)
	}
	db, err := sql.Open("mysql", *dsn)
	if err != nil {
		fail(err)
	}
	db.SetMaxOpenConns(*threads)
	db.SetMaxIdleConns(*threads)
	if err := db.Ping(); err != nil {
		fail(err)
	}

	var (
		mu        sync.Mutex
		stopped   time.Time // zero until the freeze
		resumed   time.Time // zero until SIGCONT
		firstErr  = map[int]time.Duration{}
		recovered time.Duration
		errs      int
		done      = make(chan struct{})
		wg        sync.WaitGroup
	)
	for i := range *threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				var one int
				err := db.QueryRowContext(context.Background(), "SELECT 1").Scan(&one)
				now := time.Now()
				mu.Lock()
				switch {
				case err != nil && !stopped.IsZero():
					errs++
					if _, ok := firstErr[i]; !ok {
						firstErr[i] = now.Sub(stopped)
					}
				case err == nil && !resumed.IsZero() && recovered == 0:
					recovered = now.Sub(resumed)
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(2 * time.Second)
	mu.Lock()
	stopped = time.Now()
	mu.Unlock()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		fail(err)
	}
	time.Sleep(*freeze)
	mu.Lock()
	resumed = time.Now()
	mu.Unlock()
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		fail(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		r := recovered
		mu.Unlock()
		if r > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(done)
	wg.Wait()

	var firsts []time.Duration
	for _, d := range firstErr {
		firsts = append(firsts, d)
	}
	slices.Sort(firsts)
	hung := *threads - len(firsts)
	med, max := "-", "-"
	if len(firsts) > 0 {
		med = firsts[len(firsts)/2].Round(10 * time.Millisecond).String()
		max = firsts[len(firsts)-1].Round(10 * time.Millisecond).String()
	}
	fmt.Printf("| %s | %d | %s | %s | %d | %d | %s |\n", *label, *threads, med, max, hung, errs, recovered.Round(time.Millisecond))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "frozen:", err)
	os.Exit(1)
}
