package xa

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/engine"
	"github.com/keyshard/keyshard/router"
	"go.uber.org/zap"
)

// The XA coordinator (engine.Atomic). A write over several nodes runs as
// a local transaction on its first node and an XA branch on each other;
// its commit decision is a row in a table on that first node (database
// xa_log_db), written inside its local transaction, which commits after
// every branch is prepared and before any branch commits, so
// that any keyshard instance sharing the backends can finish what another
// began: recovery (at start and every xa_recover_interval) runs XA RECOVER
// on every node and commits each of keyshard's prepared branches whose
// transaction has a commit decision, and rolls back those without one
// once the instance that made them is dead (its liveness lock is free,
// liveness.go) or they are older than xa_prepared_timeout (recording the
// rollback first, so that a late commit decision cannot win afterwards).

// erXANotA is ER_XAER_NOTA: no such XA transaction (any more).
const erXANotA = 1397

// xidPrefix starts every XA transaction id keyshard makes; recovery leaves
// others alone.
const xidPrefix = "ks-"

// Env is what the coordinator and the sequences read of the running
// configuration, each time afresh (a reload may change it); proxy.Server
// implements it.
type Env interface {
	// Nodes are the configured nodes, by name.
	Nodes() map[string]*backend.Node
	// Config is the running configuration.
	Config() *config.Config
	// Running is the running configuration and its nodes, of one
	// snapshot.
	Running() (*config.Config, map[string]*backend.Node)
	// Routes are the compiled shard rules, by user: a sequence starts
	// after the ids already in every table it fills.
	Routes() map[string]*router.Schema
}

// Coordinator is the XA coordinator (engine.Atomic), with its recovery
// loop (Run).
type Coordinator struct {
	env      Env
	ctx      context.Context // the server's lifetime
	log      *zap.Logger
	seqs     *Sequences
	instance string // random per process: XIDs of two instances never clash
	db       string // xa_log_db as at start (a restart-only setting)
	seq      atomic.Uint64
	ready    sync.Map // node name -> true: its decision table exists

	seenMu sync.Mutex
	seen   map[string]time.Time // branch -> when recovery first saw it prepared

	commits, rollbacks, recovered, inDoubt atomic.Int64
	atomicCommits, atomicRollbacks         atomic.Int64  // local transactions included
	done                                   chan string   // decisions to forget
	stopped                                chan struct{} // closed when Run returns
}

var _ engine.Atomic = (*Coordinator)(nil)

// New makes the coordinator of a server whose lifetime is ctx: its own
// statements are cancelled, and Run returns, when ctx ends. Decisions
// and sequences live in xa_log_db as env's configuration has it now (a
// restart-only setting).
func New(ctx context.Context, env Env, log *zap.Logger) *Coordinator {
	var b [4]byte
	_, _ = rand.Read(b[:])
	x := &Coordinator{env: env, ctx: ctx, log: log, instance: hex.EncodeToString(b[:]), db: env.Config().XALogDB,
		done: make(chan string, 1024), stopped: make(chan struct{}), seen: map[string]time.Time{}}
	x.seqs = &Sequences{x: x, named: map[string]*seqBlock{}}
	return x
}

// Sequences hands out the ids of sequences (auto_increment columns of
// sharded tables), kept next to the XA decisions.
func (x *Coordinator) Sequences() *Sequences { return x.seqs }

// Stopped is closed when Run has returned.
func (x *Coordinator) Stopped() <-chan struct{} { return x.stopped }

// Stats are the coordinator's counters since start (metrics).
type Stats struct {
	// Commits and Rollbacks count writes and transactions over several
	// nodes (two phases).
	Commits, Rollbacks int64
	// AtomicCommits and AtomicRollbacks count every all-or-nothing write
	// and transaction, local transactions included.
	AtomicCommits, AtomicRollbacks int64
	// Recovered counts prepared branches finished by recovery or by hand.
	Recovered int64
	// InDoubt is the prepared branches left after the last recovery.
	InDoubt int64
}

// Stats reads the counters.
func (x *Coordinator) Stats() Stats {
	return Stats{Commits: x.commits.Load(), Rollbacks: x.rollbacks.Load(), AtomicCommits: x.atomicCommits.Load(),
		AtomicRollbacks: x.atomicRollbacks.Load(), Recovered: x.recovered.Load(), InDoubt: x.inDoubt.Load()}
}

// TxXID is "ks-<instance>-<unix ms>-<counter>-<node>": node keeps the
// transaction's decision; the start time lets recovery tell a prepared
// branch's age.
func (x *Coordinator) TxXID(node string) string {
	return xidPrefix + x.instance + "-" + strconv.FormatInt(time.Now().UnixMilli(), 10) + "-" + strconv.FormatUint(x.seq.Add(1), 10) + "-" + node
}

// parseXID returns when the transaction xid began and the node keeping its
// decision (ok false if it is not keyshard's).
func parseXID(xid string) (began time.Time, node string, ok bool) {
	f := strings.SplitN(xid, "-", 5)
	if len(f) != 5 || f[0]+"-" != xidPrefix {
		return time.Time{}, "", false
	}
	ms, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return time.Time{}, "", false
	}
	return time.UnixMilli(ms), f[4], true
}

// DecisionSQL is the statement recording that xid commits: run by the
// transaction's first node inside its own (local) transaction, it commits
// with it, the last resource of the two phases.
func (x *Coordinator) DecisionSQL(xid string) string {
	return "INSERT INTO " + x.table() + " (gtrid, outcome) VALUES (" + backend.Quote(xid) + ", 'C')"
}

// Prepare makes sure node keeps a decision table.
func (x *Coordinator) Prepare(ctx context.Context, node string) error {
	_, err := x.logExec(ctx, node, "")
	return err
}

func (x *Coordinator) table() string { return backend.QuoteName(x.db) + ".xa_log" }

// conn takes a connection of p for the coordinator's own statements, in
// the pool's base state with autocommit on (a pooled connection may carry
// a session's autocommit off: a decision must commit at once, a lookup
// must not read an old snapshot), with a deadline; put gives it back.
func conn(ctx context.Context, p *backend.Pool) (bc *backend.Conn, put func(), err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	bc, err = p.Get(ctx, backend.DefaultFlavor)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	dl, _ := ctx.Deadline()
	_ = bc.SetDeadline(dl)
	put = func() {
		if bc.SetDeadline(time.Time{}) != nil {
			bc.MarkBroken()
		}
		p.Put(bc)
		cancel()
	}
	if err := bc.Sync("", bc.Multi(), true, p.BaseState()); err != nil {
		put()
		return nil, nil, err
	}
	return bc, put, nil
}

// logPool is the master pool of node, which keeps decisions.
func (x *Coordinator) logPool(node string) (*backend.Pool, string, error) {
	n := x.env.Nodes()[node]
	if n == nil {
		return nil, "", fmt.Errorf("node %q keeping XA decisions is not configured", node)
	}
	return n.Master, x.table(), nil
}

// logExec runs q ("" for none) on node's decision table (creating it first
// if needed), with a deadline.
func (x *Coordinator) logExec(ctx context.Context, node, q string) (*backend.Result, error) {
	p, table, err := x.logPool(node)
	if err != nil {
		return nil, err
	}
	bc, put, err := conn(ctx, p)
	if err != nil {
		return nil, err
	}
	defer put()
	if _, ok := x.ready.Load(node); !ok {
		for _, ddl := range []string{"CREATE DATABASE IF NOT EXISTS " + backend.QuoteName(x.db),
			"CREATE TABLE IF NOT EXISTS " + table + " (gtrid VARCHAR(64) NOT NULL PRIMARY KEY, outcome CHAR(1) NOT NULL, " +
				"decided_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB"} {
			if _, err := bc.Exec(ddl); err != nil {
				return nil, fmt.Errorf("creating the XA decision table %s: %w", table, err)
			}
		}
		x.ready.Store(node, true)
	}
	if q == "" {
		return nil, nil
	}
	return bc.Exec(strings.ReplaceAll(q, "$T", table))
}

// decide records outcome ('C' commit, 'R' rollback) for xid; the first
// decision recorded wins and is returned.
func (x *Coordinator) decide(ctx context.Context, xid string, outcome byte) (byte, error) {
	_, node, ok := parseXID(xid)
	if !ok {
		return 0, fmt.Errorf("not an XA transaction of keyshard's: %s", xid)
	}
	_, err := x.logExec(ctx, node, "INSERT INTO $T (gtrid, outcome) VALUES ("+backend.Quote(xid)+", '"+string(outcome)+"')")
	if err == nil {
		return outcome, nil
	}
	if !strings.Contains(err.Error(), "Duplicate entry") {
		return 0, err
	}
	got, err := x.outcome(ctx, xid)
	if err != nil {
		return 0, err
	}
	if got == 0 {
		return 0, fmt.Errorf("the decision on %s conflicts but cannot be read", xid)
	}
	return got, nil
}

// Abort records that xid rolls back, unless a commit decision was recorded
// first: committed reports which decision stands.
func (x *Coordinator) Abort(ctx context.Context, xid string) (committed bool, err error) {
	got, err := x.decide(ctx, xid, 'R')
	return got == 'C', err
}

// outcome is the decision recorded for xid (0 if none).
func (x *Coordinator) outcome(ctx context.Context, xid string) (byte, error) {
	_, node, ok := parseXID(xid)
	if !ok {
		return 0, fmt.Errorf("not an XA transaction of keyshard's: %s", xid)
	}
	r, err := x.logExec(ctx, node, "SELECT outcome FROM $T WHERE gtrid = "+backend.Quote(xid))
	if err != nil {
		return 0, err
	}
	if len(r.Rows) == 0 || r.Rows[0][0] == nil || len(*r.Rows[0][0]) == 0 {
		return 0, nil
	}
	return (*r.Rows[0][0])[0], nil
}

// Done forgets xid's decision, in the background.
func (x *Coordinator) Done(xid string) {
	select {
	case x.done <- xid:
	default: // recovery deletes it later
	}
}

// Outcome counts a finished all-or-nothing write or transaction: over
// several nodes (two phases), or over several sub-tables of one node (a
// local transaction).
func (x *Coordinator) Outcome(committed bool, nodes int) {
	switch {
	case committed:
		x.atomicCommits.Add(1)
		if nodes > 1 {
			x.commits.Add(1)
		}
	default:
		x.atomicRollbacks.Add(1)
		if nodes > 1 {
			x.rollbacks.Add(1)
		}
	}
}

// KillAt makes the process kill itself (SIGKILL, nothing flushed or
// rolled back) at the n-th time a write over several nodes reaches step
// ("prepare": before a branch's XA PREPARE; "decide": every branch
// prepared, before the commit decision is recorded; "commit": before a
// branch's XA COMMIT, after the decision is recorded). For fault tests
// only: the binary sets it from KS_FAILPOINT=kill:<step>:<n>.
func KillAt(spec string) error {
	f := strings.Split(spec, ":")
	if len(f) != 3 || f[0] != "kill" || f[1] != "prepare" && f[1] != "decide" && f[1] != "commit" {
		return fmt.Errorf("KS_FAILPOINT %q: want kill:prepare:N, kill:decide:N or kill:commit:N", spec)
	}
	n, err := strconv.Atoi(f[2])
	if err != nil || n < 1 {
		return fmt.Errorf("KS_FAILPOINT %q: N must be a positive number", spec)
	}
	var seen atomic.Int64
	hook := func(step, _ string) {
		if step == f[1] && seen.Add(1) == int64(n) {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // until the signal lands
		}
	}
	engine.Failpoint.Store(&hook)
	return nil
}

// Branch is one of keyshard's prepared XA branches (ADMIN XA, REST).
type Branch struct {
	Node     string `json:"node"`
	XID      string `json:"xid"`
	Branch   string `json:"branch"`
	Decision string `json:"decision"` // commit, rollback, or none yet
	// PreparedFor is how long recovery has seen it prepared.
	PreparedFor string `json:"prepared_for"`
}

// Branches lists keyshard's prepared branches on every node, with the
// decision recorded for each (in doubt: none yet, or not finished).
func (x *Coordinator) Branches(ctx context.Context) ([]Branch, error) {
	var out []Branch
	for name, n := range x.env.Nodes() {
		branches, err := x.prepared(n.Master)
		if err != nil {
			return nil, fmt.Errorf("node %s: XA RECOVER: %w", name, err)
		}
		for _, b := range branches {
			d := "none"
			switch o, err := x.outcome(ctx, b.gtrid); {
			case err != nil:
				d = "unknown: " + err.Error()
			case o == 'C':
				d = "commit"
			case o == 'R':
				d = "rollback"
			}
			out = append(out, Branch{Node: name, XID: b.gtrid, Branch: b.bqual, Decision: d,
				PreparedFor: x.preparedFor(name + "\x00" + b.gtrid + "\x00" + b.bqual).Round(time.Second).String()})
		}
	}
	slices.SortFunc(out, func(a, b Branch) int { return strings.Compare(a.XID+a.Node, b.XID+b.Node) })
	return out, nil
}

// Resolve finishes transaction xid by hand: it records the decision
// (commit true, else rollback; a decision already recorded stands, and a
// different one is an error), then commits or rolls back its prepared
// branches on every node. It returns how many it finished.
func (x *Coordinator) Resolve(ctx context.Context, xid string, commit bool) (int, error) {
	if _, _, ok := parseXID(xid); !ok {
		return 0, fmt.Errorf("%q is not the id of an XA transaction of keyshard's", xid)
	}
	if commit {
		// No decision means the transaction's first node did not commit
		// (the decision commits with it), or its coordinator is still at
		// work: committing the branches could commit half of it.
		got, err := x.outcome(ctx, xid)
		if err != nil {
			return 0, err
		}
		if got != 'C' {
			return 0, fmt.Errorf("transaction %s has no commit decision: only a rollback can finish it safely", xid)
		}
	} else {
		got, err := x.decide(ctx, xid, 'R')
		if err != nil {
			return 0, err
		}
		if got != 'R' {
			return 0, fmt.Errorf("transaction %s was already decided the other way (commit); its branches follow that decision", xid)
		}
	}
	verb := "XA ROLLBACK "
	if commit {
		verb = "XA COMMIT "
	}
	done := 0
	for name, n := range x.env.Nodes() {
		branches, err := x.prepared(n.Master)
		if err != nil {
			return done, fmt.Errorf("node %s: XA RECOVER: %w", name, err)
		}
		for _, b := range branches {
			if b.gtrid != xid {
				continue
			}
			if err := x.finish(n.Master, verb+backend.Quote(b.gtrid)+","+backend.Quote(b.bqual)); err != nil {
				var me *mysql.MyError
				if errors.As(err, &me) && me.Code == erXANotA {
					continue // finished meanwhile (recovery)
				}
				return done, fmt.Errorf("node %s: %s: %w", name, strings.TrimSpace(verb), err)
			}
			done++
			x.recovered.Add(1)
		}
	}
	x.log.Info("XA transaction resolved by hand", zap.String("xid", xid), zap.Bool("commit", commit), zap.Int("branches", done))
	return done, nil
}
