package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/router"
)

// Atomic writes: a write statement (INSERT, REPLACE, UPDATE, DELETE) that
// runs on several nodes commits on all of them or on none, as one
// statement does on one server. Its first leg runs in a local transaction
// that also inserts the commit decision (Atomic.DecisionSQL), each other
// leg in an XA branch: XA START, the statements, XA END, XA PREPARE; once
// every branch is prepared, the first leg's COMMIT makes the decision
// durable (on the backends, where any keyshard instance's recovery finds
// it), and only then the branches run XA COMMIT. Until the decision, any
// failure rolls every leg back; after it, a branch that fails to commit
// stays prepared, and recovery commits it by the decision. A write on
// several sub-tables of one node runs in a local transaction instead.

// Atomic is the coordinator of XA transactions: the proxy's, which keeps
// the decision log on a backend and recovers prepared branches.
type Atomic interface {
	// TxXID returns the id of a new XA transaction whose decision node
	// keeps: its first node, where DecisionSQL runs inside the local
	// transaction (the id names the keyshard instance, its start time, a
	// counter and that node).
	TxXID(node string) string
	// DecisionSQL is the statement that records, inside the first node's
	// local transaction, that xid commits.
	DecisionSQL(xid string) string
	// Prepare makes sure node keeps a decision table.
	Prepare(ctx context.Context, node string) error
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

// atomicWrite is one write fan-out run all or nothing. Over several
// nodes, the first leg's node runs its part in a local transaction that
// also records the commit decision, the others in XA branches; on one
// node, a local transaction around its sub-tables' statements.
//
// Round trips: the first write to each node carries BEGIN or XA START in
// front of the statement (their answers read first), and, once the
// statements are sent, each branch's XA END and XA PREPARE and the first
// leg's decision INSERT follow at once, before any answer is read: every
// node works in one round trip. The first leg's COMMIT then makes the
// decision durable (a second round trip, on one node), then the
// branches' XA COMMITs run, all at once (commitBranches), before the
// client is answered.
type atomicWrite struct {
	e       *Engine
	legs    []Leg
	xid     string // "" for a local transaction (one node)
	sent    bool   // the statements went out: an unfinished answer is a connection to close
	started []bool // the leg's transaction (or branch) began
	pending []int  // answers queued behind each leg's statements, not read yet
}

// branch is the XA branch id of leg i: the transaction's id and the node.
func (w *atomicWrite) branch(i int) string { return branchID(w.xid, w.legs[i].BC.Node()) }

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

// begin puts the transaction's start in front of each leg's statements
// (see backend.Conn.Ahead): BEGIN on the first leg, XA START on the
// others. The first leg's node keeps the decision.
func (w *atomicWrite) begin() error {
	if len(w.legs) > 1 {
		first := w.legs[0].BC.Node()
		if err := w.e.XA.Prepare(context.Background(), first); err != nil {
			return fmt.Errorf("keyshard: node %s cannot keep the commit decision of a write over several nodes: %w", first, err)
		}
		w.xid = w.e.XA.TxXID(first)
	}
	w.started = make([]bool, len(w.legs))
	w.pending = make([]int, len(w.legs))
	for i := range w.legs {
		q := "BEGIN"
		if i > 0 {
			q = "XA START " + w.branch(i)
		}
		if err := w.legs[i].BC.Ahead(q); err != nil {
			w.abort()
			return fmt.Errorf("keyshard: node %s: %w", w.legs[i].BC.Node(), err)
		}
		w.started[i] = true
	}
	return nil
}

// queueEnd sends, behind the statements and before any answer is read,
// each branch's XA END and XA PREPARE and the first leg's decision
// INSERT (inside its transaction: the decision once it commits).
func (w *atomicWrite) queueEnd() error {
	if w.xid == "" {
		return nil
	}
	for i := range w.legs {
		bc := w.legs[i].BC
		// The statements' warnings, read before the ends clear them
		// (Diag.leg); pipelined, they cost no round trip.
		if err := bc.Queue("SHOW WARNINGS"); err != nil {
			return err
		}
		w.legs[i].warnQueued = true
		qs := []string{w.e.XA.DecisionSQL(w.xid)}
		if i > 0 {
			failpoint("prepare", bc.Node())
			qs = []string{"XA END " + w.branch(i), "XA PREPARE " + w.branch(i)}
		}
		for _, q := range qs {
			if err := bc.Queue(q); err != nil {
				return err
			}
			w.pending[i]++
		}
		if err := bc.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// ended reads the answers queued behind leg i's statements (see
// queueEnd) and returns the first error.
func (w *atomicWrite) ended(i int) error {
	var first error
	bc := w.legs[i].BC
	if !bc.Broken() {
		if _, err := w.legs[i].queuedWarnings(); err != nil {
			first = err
		}
	}
	for ; w.pending[i] > 0 && !bc.Broken(); w.pending[i]-- {
		if _, err := bc.Answer(); err != nil && first == nil {
			first = err
		}
	}
	if bc.Broken() && first == nil {
		first = &backend.Error{Kind: backend.KindLost, Node: bc.Node(), Addr: bc.Addr(), Msg: "connection lost"}
	}
	return first
}

// drain reads the rest of leg l's answer to its write statements (OKs and
// errors only), so that the connection can end its transaction cleanly;
// a connection that cannot is marked broken.
func drain(l *Leg) {
	for !l.finished && !l.BC.Broken() {
		p, err := readAnswer(l.BC)
		switch {
		case err != nil || len(p) == 0:
			l.BC.MarkBroken()
		case p[0] == wire.ErrHeader:
			l.ended(0)
		case p[0] == wire.OKHeader:
			ok, err := wire.ParseOK(p)
			if err != nil {
				l.BC.MarkBroken()
				continue
			}
			l.BC.SetStatus(ok.Status)
			l.ended(ok.Status)
		default:
			l.BC.MarkBroken()
		}
	}
}

// abort rolls every leg back. A connection whose branch cannot be ended
// cleanly is closed, which rolls back an unprepared branch. It is a no-op
// on a nil write.
func (w *atomicWrite) abort() {
	if w == nil {
		return
	}
	for i := range w.legs {
		l := &w.legs[i]
		bc := l.BC
		if w.sent && !l.finished && !bc.Broken() {
			drain(l)
		}
		if !bc.Broken() {
			_ = w.ended(i) // a branch prepared all the same must be rolled back, not left
		}
		if bc.Broken() || w.sent && !l.finished {
			bc.MarkBroken()
			continue
		}
		if !w.started[i] {
			continue // nothing to roll back there
		}
		var err error
		if i == 0 {
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
	first := w.legs[0].BC
	if w.xid != "" {
		// The branches prepared and the decision inserted (queueEnd):
		// their answers, every node's at once.
		errs := make([]error, len(w.legs))
		var wg sync.WaitGroup
		for i := 1; i < len(w.legs); i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = w.ended(i)
			}()
		}
		errs[0] = w.ended(0)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				w.abort()
				what := "XA PREPARE"
				if i == 0 {
					what = "recording the commit decision"
				}
				return fmt.Errorf("keyshard: %s on node %s: %w; nothing was changed (rolled back on every node)", what, w.legs[i].BC.Node(), err)
			}
		}
		failpoint("decide", first.Node())
	}
	if _, err := first.Exec("COMMIT"); err != nil {
		if w.xid == "" {
			first.MarkBroken() // the server rolls back with the connection
			w.outcome(false)
			return err
		}
		// An error may come after the commit happened (a lost answer):
		// the decision row says. A rollback decision settles it, unless
		// the commit's stands.
		committed, aerr := w.e.XA.Abort(context.Background(), w.xid)
		switch {
		case aerr != nil:
			// Unknown: the branches stay prepared, recovery decides.
			for i := range w.legs {
				w.legs[i].BC.MarkBroken()
			}
			return fmt.Errorf("keyshard: the COMMIT of %s on node %s failed (%w) and its outcome cannot be read (%w): it is unknown "+
				"until recovery finishes it", w.xid, first.Node(), err, aerr)
		case !committed:
			first.MarkBroken() // rolled back with it
			w.abort()
			return fmt.Errorf("keyshard: the COMMIT on node %s failed (%w); nothing was changed (rolled back on every node)", first.Node(), err)
		}
		first.MarkBroken() // committed all the same; its state is unsure
	}
	w.outcome(true)
	if w.xid != "" {
		// Committed: the branches' XA COMMITs, before the answer (see
		// commitBranches); a branch that fails stays prepared and
		// recovery commits it by the decision. The legs' connections are
		// released with the statement's.
		conns := make([]*backend.Conn, 0, len(w.legs)-1)
		for i := 1; i < len(w.legs); i++ {
			conns = append(conns, w.legs[i].BC)
		}
		if commitBranches(conns, func(bc *backend.Conn) string { return "XA COMMIT " + branchID(w.xid, bc.Node()) }) {
			w.e.XA.Done(w.xid)
		}
	}
	return nil
}
