package e2e

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/keyshard/keyshard/test/bank"
)

// The bank test: transfers between accounts on two nodes, each one UPDATE
// over both nodes or a transaction of two UPDATEs (XA through keyshard), while the keyshard
// process kills itself (SIGKILL, KS_FAILPOINT) between PREPARE and COMMIT
// or before PREPARE, and a backend is restarted. After recovery the total
// balance is what it was (no transfer half applied), every acknowledged
// transfer is there, and no branch is left prepared.
func TestXABankWithKills(t *testing.T) {
	setupShardDB(t)
	bin := filepath.Join(t.TempDir(), "keyshard")
	build := exec.Command("go", "build", "-o", bin, "./cmd/keyshard")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := filepath.Join(t.TempDir(), "ks.yaml")
	yaml := twoNodeYAML(addr, `      - db: shard_e2e
        table: accounts
        key: id
        nodes: [node1, node2]
        type: hash
        locations: [4, 4]
`) + "log_level: warn\nxa_recover_interval: 200ms\nxa_prepared_timeout: 1s\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "keyshard.log")
	start := func(failpoint string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command(bin, "-config", cfg)
		logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.Env = append(os.Environ(), "KS_FAILPOINT="+failpoint)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "keyshard to listen", func() bool {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
		return cmd
	}
	stop := func(cmd *exec.Cmd) {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
	open := func() *sql.DB {
		// A short lock wait: two transfers locking the same rows on two
		// servers in opposite orders would otherwise wait out InnoDB's 50s.
		d, err := sql.Open("mysql", fmt.Sprintf("ks:ks@tcp(%s)/shard_e2e?innodb_lock_wait_timeout=2&timeout=5s&readTimeout=10s", addr))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	const accounts, balance = 16, 1000
	ks := start("")
	db := open()
	mustExec(t, db, "CREATE TABLE accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, ops INT NOT NULL DEFAULT 0)")
	var rows []string
	for i := range accounts {
		rows = append(rows, fmt.Sprintf("(%d, %d)", i, balance))
	}
	mustExec(t, db, "INSERT INTO accounts (id, balance) VALUES "+strings.Join(rows, ", "))
	db.Close()
	stop(ks)

	// acked counts, per account, the transfers the client saw succeed.
	acked := make([]int, accounts)
	var mu sync.Mutex
	for round, fp := range []string{"kill:commit:15", "kill:prepare:12", "kill:commit:25", "", "kill:commit:9"} {
		ks := start(fp)
		db := open()
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(round), uint64(g)))
				// Goroutine g's accounts: node1 ids g, g+8; node2 ids 4+g, 12+g.
				for range 40 {
					a := []int{g, g + 8}[rng.IntN(2)]
					b := []int{4 + g, 12 + g}[rng.IntN(2)]
					if rng.IntN(2) == 0 {
						a, b = b, a
					}
					x := 1 + rng.IntN(50)
					var err error
					if rng.IntN(2) == 0 {
						// One statement over both nodes.
						_, err = db.Exec(fmt.Sprintf("UPDATE accounts SET balance = balance + CASE id WHEN %d THEN %d WHEN %d THEN %d END, ops = ops + 1 "+
							"WHERE id IN (%d, %d)", a, -x, b, x, a, b))
					} else {
						// A transaction over both nodes.
						err = bank.Transfer(db, a, b, x)
					}
					if err != nil {
						if bank.IsConnErr(err) {
							return // keyshard is gone: this transfer is in doubt
						}
						continue // refused (a lock wait): not applied
					}
					mu.Lock()
					acked[a]++
					acked[b]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		db.Close()
		if fp == "" {
			// A backend restarts while nothing runs; recovery meets it again.
			stop(ks)
			if out, err := backends("stop", fmt.Sprint(basePort+1)); err != nil {
				t.Fatalf("stopping node2: %v\n%s", err, out)
			}
			if out, err := backends("start", fmt.Sprint(basePort+1)); err != nil {
				t.Fatalf("starting node2: %v\n%s", err, out)
			}
			continue
		}
		if err := ks.Wait(); err == nil {
			t.Logf("round %d: keyshard did not reach its failpoint %s", round, fp)
		}
	}

	// Recovery by a fresh keyshard finishes every prepared branch.
	ks = start("")
	defer stop(ks)
	deadline := time.Now().Add(20 * time.Second)
	for {
		left := 0
		for _, port := range []int{basePort, basePort + 1} {
			left += len(allRows(t, direct(t, port, ""), "XA RECOVER"))
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("%d branches still prepared after 20s; keyshard log:\n%s", left, b)
		}
		time.Sleep(200 * time.Millisecond)
	}
	db = open()
	defer db.Close()
	var total, ops int64
	if err := db.QueryRow("SELECT SUM(balance), SUM(ops) FROM accounts").Scan(&total, &ops); err != nil {
		t.Fatal(err)
	}
	if total != accounts*balance || ops%2 != 0 {
		t.Fatalf("after the kills: total balance %d (want %d), operations %d (want an even number: each transfer touches two accounts)",
			total, accounts*balance, ops)
	}
	sum := 0
	for id := range accounts {
		var n int
		if err := db.QueryRow("SELECT ops FROM accounts WHERE id = ?", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n < acked[id] {
			t.Errorf("account %d: %d transfers applied, fewer than the %d acknowledged", id, n, acked[id])
		}
		sum += acked[id]
	}
	t.Logf("%d acknowledged transfers, %d applied (the rest were in doubt when keyshard died, committed by recovery)", sum/2, ops/2)
}
