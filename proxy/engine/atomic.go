package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"

	"github.com/keyshard/keyshard/router"
)

// Atomic writes: a write statement (INSERT, REPLACE, UPDATE, DELETE) that
// runs on several nodes commits on all of them or on none, as one
// statement does on one server. Its legs run inside one XA transaction,
// one branch per node: XA START, the statements, XA END, XA PREPARE on
// every node; then the commit decision is written durably (Atomic.Decide,
// on the backends, where any keyshard instance's recovery finds it), and
// only then XA COMMIT on every node. Until the decision, any failure rolls
// every branch back; after it, a branch that fails to commit stays
// prepared, and recovery commits it by the decision. A write on several
// sub-tables of one node runs in a local transaction instead.

// Atomic is the coordinator of XA transactions: the proxy's, which keeps
// the decision log on a backend and recovers prepared branches.
type Atomic interface {
	// NewXID returns the id of a new XA transaction for a write statement
	// (it names the keyshard instance, its start time, a counter and the
	// node keeping its decision).
	NewXID() string
	// TxXID is NewXID for a transaction whose decision node keeps: its
	// first node, where DecisionSQL runs inside the local transaction.
	TxXID(node string) string
	// DecisionSQL is the statement that records, inside the first node's
	// local transaction, that xid commits.
	DecisionSQL(xid string) string
	// Prepare makes sure node keeps a decision table.
	Prepare(ctx context.Context, node string) error
	// Decide records durably that transaction xid commits; with an
	// error, none of its branches may commit.
	Decide(ctx context.Context, xid string) error
	// Abort records that xid rolls back, unless a commit decision was
	// recorded first; committed reports which decision stands.
	Abort(ctx context.Context, xid string) (committed bool, err error)
	// Done says every branch of xid committed: its decision may go.
	Done(xid string)
	// Outcome counts a finished transaction for metrics: committed or
	// rolled back, over how many nodes.
	Outcome(committed bool, nodes int)
}

// Failpoint, when set (tests only), is called at each step of a write
// over several nodes, before it runs on a node: "prepare" (XA PREPARE),
// "decide" (recording the commit decision, every branch prepared; node:
// the first leg's, or the transaction's first node), "commit" (XA
// COMMIT).
var Failpoint atomic.Pointer[func(step, node string)]

func failpoint(step, node string) {
	if f := Failpoint.Load(); f != nil {
		(*f)(step, node)
	}
}

// RollsBackTx reports whether err is a server error after which the
// server has rolled back the whole transaction on its node (a deadlock
// victim, an XA branch marked rollback-only), not just the statement: a
// transaction over several nodes must then roll back everywhere, as one
// server's would.
func RollsBackTx(err error) bool {
	var me *mysql.MyError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Code {
	case mysql.ER_LOCK_DEADLOCK, mysql.ER_XA_RBDEADLOCK, mysql.ER_XA_RBROLLBACK, mysql.ER_XA_RBTIMEOUT:
		return true
	}
	return false
}

// isWrite reports whether a statement kind changes rows (DDL aside: it
// commits implicitly and cannot run inside a transaction).
func isWrite(k router.Kind) bool {
	switch k {
	case router.KindInsert, router.KindReplace, router.KindUpdate, router.KindDelete:
		return true
	}
	return false
}

// atomicWrite is one write fan-out run all or nothing.
type atomicWrite struct {
	e       *Engine
	legs    []Leg
	xid     string // "" for a local transaction (one node)
	sent    bool   // the statements went out: an unfinished answer is a connection to close
	started []bool // the leg's transaction (or branch) began
}

// branch is the XA branch id of leg i: the transaction's id and the node.
func (w *atomicWrite) branch(i int) string { return branchID(w.xid, w.legs[i].BC.Node()) }

// each runs q(i) on every leg's connection at once (each phase costs one
// round trip, whatever the number of nodes) and returns the first error.
func (w *atomicWrite) each(step string, q func(i int) string) error {
	return execAll(legConns(w.legs), step, q)
}

// execAll runs q(i) on every connection of conns at once and returns the
// first error (a connection whose statement failed otherwise than by a
// MySQL error is marked broken by Exec). step names the phase for the
// failpoint, called on each connection right before its statement ("":
// none).
func execAll(conns []*backend.Conn, step string, q func(i int) string) error {
	run := func(i int) error {
		if step != "" {
			failpoint(step, conns[i].Node())
		}
		_, err := conns[i].Exec(q(i))
		return err
	}
	if len(conns) == 1 {
		return run(0)
	}
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = run(i)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		var be *backend.Error
		switch {
		case err == nil:
		case errors.As(err, &be): // names its node already
			return err
		default:
			return fmt.Errorf("node %s: %w", conns[i].Node(), err)
		}
	}
	return nil
}

// begin opens the transaction on every leg.
func (w *atomicWrite) begin() error {
	if len(w.legs) > 1 {
		w.xid = w.e.XA.NewXID()
	}
	w.started = make([]bool, len(w.legs))
	errs := make([]error, len(w.legs))
	var wg sync.WaitGroup
	for i := range w.legs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := "BEGIN"
			if w.xid != "" {
				q = "XA START " + w.branch(i)
			}
			_, errs[i] = w.legs[i].BC.Exec(q)
			w.started[i] = errs[i] == nil
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			w.abort()
			return fmt.Errorf("keyshard: node %s: %w", w.legs[i].BC.Node(), err)
		}
	}
	return nil
}

// abort rolls every leg back. A connection whose branch cannot be ended
// cleanly is closed, which rolls back an unprepared branch. It is a no-op
// on a nil write.
func (w *atomicWrite) abort() {
	if w == nil {
		return
	}
	for i := range w.legs {
		bc := w.legs[i].BC
		if bc.Broken() || w.sent && !w.legs[i].finished {
			bc.MarkBroken()
			continue
		}
		if !w.started[i] {
			continue // nothing to roll back there
		}
		var err error
		if w.xid == "" {
			_, err = bc.Exec("ROLLBACK")
		} else {
			// XA END fails on a branch already ended (or never started):
			// the ROLLBACK is what counts.
			_, _ = bc.Exec("XA END " + w.branch(i))
			_, err = bc.Exec("XA ROLLBACK " + w.branch(i))
		}
		if err != nil {
			bc.MarkBroken()
		}
	}
	w.outcome(false)
}

// outcome counts the write's end (see Atomic.Outcome).
func (w *atomicWrite) outcome(committed bool) {
	if w.e.XA != nil {
		w.e.XA.Outcome(committed, len(w.legs))
	}
}

// commit ends a write whose every statement succeeded: COMMIT, or the two
// phases. An error means nothing was committed (everything rolled back).
func (w *atomicWrite) commit() error {
	w.e.Trace.Committing()
	if w.xid == "" {
		if _, err := w.legs[0].BC.Exec("COMMIT"); err != nil {
			w.legs[0].BC.MarkBroken() // the server rolls back with the connection
			w.outcome(false)
			return err
		}
		w.outcome(true)
		return nil
	}
	if err := w.each("", func(i int) string { return "XA END " + w.branch(i) }); err != nil {
		w.abort()
		return fmt.Errorf("keyshard: XA END on %w; nothing was changed (rolled back on every node)", err)
	}
	if err := w.each("prepare", func(i int) string { return "XA PREPARE " + w.branch(i) }); err != nil {
		w.abort()
		return fmt.Errorf("keyshard: XA PREPARE on %w; nothing was changed (rolled back on every node)", err)
	}
	failpoint("decide", w.legs[0].BC.Node())
	// Recovery may have recorded a rollback first (this instance taken for
	// dead, see proxy/xa/liveness.go): Decide then fails and the rollback
	// stands.
	if err := w.e.XA.Decide(context.Background(), w.xid); err != nil {
		// The decision may have been recorded all the same (a lost
		// answer): a rollback decision settles it, unless the commit won.
		committed, aerr := w.e.XA.Abort(context.Background(), w.xid)
		switch {
		case aerr != nil:
			// Unknown: the branches stay prepared, recovery decides.
			for i := range w.legs {
				w.legs[i].BC.MarkBroken()
			}
			return fmt.Errorf("keyshard: the commit decision of %s could not be recorded nor read (%w, %w): its outcome is unknown "+
				"until recovery finishes it", w.xid, err, aerr)
		case !committed:
			w.abort()
			return fmt.Errorf("keyshard: the commit decision could not be recorded (%w); nothing was changed (rolled back on every node)", err)
		}
	}
	// Committed: a branch that fails here stays prepared and recovery
	// commits it by the decision; the client's write stands.
	all := true
	if err := w.each("commit", func(i int) string { return "XA COMMIT " + w.branch(i) }); err != nil {
		// The branches that failed stay prepared; recovery commits them.
		for i := range w.legs {
			w.legs[i].BC.MarkBroken()
		}
		all = false
	}
	if all {
		w.e.XA.Done(w.xid)
	}
	w.outcome(true)
	return nil
}
