package torture

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// What a client knows of one write's fate.
type outcome uint8

const (
	acked   outcome = iota // the client got OK (for a transfer: to COMMIT)
	failed                 // an error that says nothing was changed
	unknown                // the answer was lost or says the outcome is unknown
)

func (o outcome) String() string { return [...]string{"acked", "failed", "unknown"}[o] }

// transfer is one attempted transfer: amount from src to dst, logged in
// transfers under id inside the same transaction.
type transfer struct {
	id, src, dst, amount int64
	out                  outcome
	at                   time.Time // when it began
	err                  string    // the error that decided out
}

// ledgerWrite is one attempted INSERT of ledger rows (ids), in one
// statement (over several nodes: one XA transaction).
type ledgerWrite struct {
	ids []int64
	out outcome
}

// client is one of the clients: one connection at a time to a keyshard
// instance picked among those serving.
type client struct {
	n     int
	rng   *rand.Rand
	pick  func(*rand.Rand) *sql.DB
	conn  *sql.Conn
	seq   int64
	stats *stats

	transfers []transfer
	ledger    []ledgerWrite
}

// stats counts what the clients saw.
type stats struct {
	mu     sync.Mutex
	errs   map[string]int    // by errno ("conn": the connection failed), COMMIT's apart
	first  map[string]string // each errno's first message
	counts map[string]int    // "transfer acked", "ledger unknown", ...
}

func (s *stats) add(m map[string]int, k string) {
	s.mu.Lock()
	m[k]++
	s.mu.Unlock()
}

// nextID is a new id of this client's: unique over the run.
func (c *client) nextID() int64 {
	c.seq++
	return int64(c.n+1)<<32 | c.seq
}

// run runs operations until stop is closed.
func (c *client) run(stop <-chan struct{}) {
	defer c.drop()
	for {
		select {
		case <-stop:
			return
		default:
		}
		if c.conn == nil {
			conn, err := c.pick(c.rng).Conn(context.Background())
			if err != nil {
				c.stats.add(c.stats.errs, "connect")
				time.Sleep(time.Duration(20+c.rng.IntN(80)) * time.Millisecond)
				continue
			}
			c.conn = conn
		}
		if c.rng.IntN(5) < 3 {
			c.transfer()
		} else {
			c.insertLedger()
		}
	}
}

// drop closes the connection (it is never reused: the pool keeps none).
func (c *client) drop() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// exec runs q; an error that is not the server's (keyshard's) drops the
// connection. It counts errors by errno.
func (c *client) exec(q string) error {
	_, err := c.conn.ExecContext(context.Background(), q)
	if err != nil {
		at := "" // COMMIT's errors apart: their outcome may be unknown
		if q == "COMMIT" {
			at = " at COMMIT"
		}
		var me *mysql.MySQLError
		if errors.As(err, &me) {
			k := fmt.Sprint(me.Number) + at
			c.stats.mu.Lock()
			c.stats.errs[k]++
			if _, ok := c.stats.first[k]; !ok {
				c.stats.first[k] = me.Message
			}
			c.stats.mu.Unlock()
			if me.Number == 1429 || me.Number == 1040 { // a node down: not a busy loop
				time.Sleep(time.Duration(10+c.rng.IntN(40)) * time.Millisecond)
			}
		} else {
			c.stats.add(c.stats.errs, "conn"+at)
			c.drop()
		}
	}
	return err
}

// transfer moves money between two accounts (often on two nodes, in
// either direction, so that transfers cross) and logs it, in one
// transaction: each account's change with a posting row next to it (on
// its node: postings are sharded on the account), the transfer's row
// in transfers (sharded on its id). A transfer half committed shows as
// its postings and its row not all there or all missing.
func (c *client) transfer() {
	tr := transfer{id: c.nextID(), src: int64(c.rng.IntN(nAccounts)), amount: int64(1 + c.rng.IntN(50)), at: time.Now()}
	tr.dst = (tr.src + 1 + int64(c.rng.IntN(nAccounts-1))) % nAccounts
	leg := func(account, delta int64) string {
		return fmt.Sprintf("UPDATE accounts SET balance = balance + %d WHERE id = %d", delta, account) + ";" +
			fmt.Sprintf("INSERT INTO postings (account, tid, delta) VALUES (%d, %d, %d)", account, tr.id, delta)
	}
	stmts := []string{
		leg(tr.src, -tr.amount), leg(tr.dst, tr.amount),
		fmt.Sprintf("INSERT INTO transfers (id, src, dst, amount) VALUES (%d, %d, %d, %d)", tr.id, tr.src, tr.dst, tr.amount),
	}
	if c.rng.IntN(3) == 0 { // the log row first
		stmts[0], stmts[2] = stmts[2], stmts[0]
	}
	tr.out = failed
	defer func() {
		c.transfers = append(c.transfers, tr)
		c.stats.add(c.stats.counts, "transfer "+tr.out.String())
	}()
	if err := c.exec("BEGIN"); err != nil {
		tr.err = err.Error()
		return
	}
	for _, q := range strings.Split(strings.Join(stmts, ";"), ";") {
		if err := c.exec(q); err != nil {
			tr.err = err.Error()
			if c.conn != nil {
				_ = c.exec("ROLLBACK")
			}
			return
		}
	}
	err := c.exec("COMMIT")
	tr.out = commitOutcome(err)
	if err != nil {
		tr.err = "COMMIT: " + err.Error()
	}
}

// insertLedger inserts 1-4 new ledger rows in one statement.
func (c *client) insertLedger() {
	w := ledgerWrite{}
	var vals []string
	for range 1 + c.rng.IntN(4) {
		id := c.nextID()
		w.ids = append(w.ids, id)
		vals = append(vals, fmt.Sprintf("(%d, %d, %d)", id, w.ids[0], c.n))
	}
	w.out = commitOutcome(c.exec("INSERT INTO ledger (id, batch, client) VALUES " + strings.Join(vals, ", ")))
	c.ledger = append(c.ledger, w)
	c.stats.add(c.stats.counts, "ledger "+w.out.String())
}

// commitOutcome is what the answer to a COMMIT (or an autocommit write)
// tells of its fate. Failed only where the answer says nothing changed:
// keyshard's "rolled back (on every node)" or "nothing was changed", a
// deadlock or lock wait (the server rolled back), no connection to a
// node (nothing sent). A lost connection (to keyshard, or keyshard's to
// a node: 1158), keyshard's "outcome is unknown", and anything else is
// unknown: the checker allows either.
func commitOutcome(err error) outcome {
	if err == nil {
		return acked
	}
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return unknown
	}
	switch {
	case strings.Contains(me.Message, "unknown"):
		return unknown
	case strings.Contains(me.Message, "rolled back"), strings.Contains(me.Message, "nothing was changed"):
		return failed
	case me.Number == 1213 || me.Number == 1205 || me.Number == 1429 || me.Number == 1040:
		return failed
	}
	return unknown
}
