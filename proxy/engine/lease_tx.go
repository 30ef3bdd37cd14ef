package engine

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
)

// Transactions over several nodes (XA branches), and giving connections back.

// branchID is the XA branch of transaction xid on node.
func branchID(xid, node string) string { return backend.Quote(xid) + "," + backend.Quote(node) }

// Spans reports whether the open transaction may reach other nodes (see
// XA).
func (l *Lease) Spans() bool { return l.XA != nil && (l.InTx() || l.txBegin != "") }

// Branches is how many nodes besides its first the open transaction
// reached.
func (l *Lease) Branches() int { return len(l.branches) }

// Held is one backend connection of a transaction: its node and the
// server's thread id for it.
type Held struct {
	Node   string
	Thread uint32
}

// Spanning appends to dst the connections of the open transaction when it
// spans several nodes (the first node's, then each branch's); none
// otherwise.
func (l *Lease) Spanning(dst []Held) []Held {
	if len(l.branches) == 0 || l.pinned == nil {
		return dst
	}
	dst = append(dst, Held{l.pinned.Node(), l.pinned.ThreadID()})
	for _, bc := range l.branches {
		dst = append(dst, Held{bc.Node(), bc.ThreadID()})
	}
	return dst
}

func (l *Lease) spanChanged() {
	if l.OnSpan != nil {
		l.OnSpan()
	}
}

// EndTx ends a transaction that reached several nodes (commit true: in two
// phases; else a rollback on every node). handled is false when it has no
// branch (a local transaction, ended as usual by the caller). An error
// from a commit means nothing was committed.
func (l *Lease) EndTx(commit bool) (handled bool, err error) {
	if len(l.branches) == 0 {
		l.xid = "" // made for a branch that failed to open: not the next transaction's
		return false, nil
	}
	first := l.pinned
	if commit {
		err = l.commitBranches(first)
	} else {
		l.rollbackBranches(first)
	}
	l.branches, l.wrote, l.xid = nil, nil, ""
	l.spanChanged()
	if first != nil {
		l.Release(first)
	}
	return true, err
}

// CommitImplicit commits what the session has open before a statement
// that commits implicitly (DDL), as the server does before running one: a
// transaction over several nodes in two phases (as COMMIT does, EndTx), a
// transaction on the pinned connection with COMMIT; a deferred BEGIN,
// which opened nothing yet, is dropped. Autocommit stays as it is. An
// error means the transaction was not committed (EndTx's: it was rolled
// back; a lost connection: it went with it, and the session ends), and
// the statement must not run.
func (l *Lease) CommitImplicit() error {
	if len(l.branches) > 0 {
		_, err := l.EndTx(true)
		return err
	}
	l.txBegin, l.txImplied = "", false
	bc := l.pinned
	if bc == nil || bc.Broken() || !inTrans(bc) {
		return nil
	}
	if _, err := bc.Exec("COMMIT"); err != nil {
		if bc.Broken() {
			l.Release(bc) // what it held is lost (TakeLost)
		}
		return err
	}
	l.Release(bc) // unpinned unless something else holds it
	return nil
}

// commitBranches commits the branches and the first node's transaction
// (first). Branches that only read have no second phase: they end and
// roll back (nothing of theirs to keep) while the others prepare, each
// branch's XA END and XA PREPARE in one write, and while the first node
// records the commit decision inside its own transaction; no branch
// wrote, no decision: the first node commits alone (one phase). Then the
// first node's COMMIT makes the decision durable, the client is answered,
// and the prepared branches' XA COMMITs run behind the answer
// (commitBranches; recovery commits one that fails, by the decision).
func (l *Lease) commitBranches(first *backend.Conn) error {
	xid := l.xid
	if first == nil || first.Broken() {
		l.rollbackBranches(first)
		return Errorf(KindTxLost, "keyshard: COMMIT failed: the connection of the transaction's first node was lost; it was rolled back on every node")
	}
	// The first node's transaction may be gone already (a deadlock rolls
	// it back; an ERR carries no status): DO 0 answers with the status.
	// After an OK, its status says.
	if !first.Answered() {
		if _, err := first.Exec("DO 0"); err != nil {
			first.SetStatus(0)
		}
	}
	if first.Status&wire.StatusInTrans == 0 {
		l.rollbackBranches(first)
		return Errorf(KindTxLost, "keyshard: COMMIT failed: the transaction was already rolled back on node %s (a deadlock or an error there); "+
			"it was rolled back on every node", first.Node())
	}
	if first.Status&mysql.SERVER_STATUS_IN_TRANS_READONLY != 0 {
		// READ ONLY (its branches were opened read-only too): nothing was
		// written, so the branches end and the first node commits.
		l.endBranches()
		if _, err := first.Exec("COMMIT"); err != nil {
			return err
		}
		l.XA.Outcome(true, 1) // a commit, not a two-phase one
		return nil
	}
	var writers, readers []*backend.Conn
	for i, bc := range l.branches {
		if l.wrote[i] {
			writers = append(writers, bc)
		} else {
			readers = append(readers, bc)
		}
	}
	var werr, derr, rerr error
	var wg sync.WaitGroup
	if len(readers) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rerr = pipeAll(readers, "", func(bc *backend.Conn) []string {
				return []string{"XA END " + branchID(xid, bc.Node()), "XA ROLLBACK " + branchID(xid, bc.Node())}
			})
		}()
	}
	if len(writers) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			werr = pipeAll(writers, "prepare", func(bc *backend.Conn) []string {
				return []string{"XA END " + branchID(xid, bc.Node()), "XA PREPARE " + branchID(xid, bc.Node())}
			})
		}()
		// Inside the first node's transaction, at once with the prepares:
		// it becomes the decision when that transaction commits, after
		// every branch prepared. A rollback recorded first by recovery
		// (this instance taken for dead, see proxy/xa/liveness.go) makes
		// this INSERT fail with a duplicate; one recorded after must wait
		// for this transaction and then loses.
		_, derr = first.Exec(l.XA.DecisionSQL(xid))
	}
	wg.Wait()
	// The readers are done (a failed one is closed, which rolls it back).
	for _, bc := range readers {
		if rerr != nil {
			bc.MarkBroken() // which one failed is not told apart
		}
		l.putBack(bc)
	}
	l.branches, l.wrote = writers, nil
	if len(writers) == 0 {
		// Only the first node wrote: its COMMIT alone, one phase.
		l.spanChanged()
		if _, err := first.Exec("COMMIT"); err != nil {
			return err
		}
		l.XA.Outcome(true, 1)
		return nil
	}
	if werr != nil {
		l.rollbackBranches(first)
		return Errorf(KindTxLost, "keyshard: COMMIT failed (XA PREPARE on %v): the transaction was rolled back on every node", werr)
	}
	if derr != nil {
		l.rollbackBranches(first)
		return Errorf(KindTxLost, "keyshard: COMMIT failed on node %s (%v): the transaction was rolled back on every node", first.Node(), derr)
	}
	failpoint("decide", first.Node())
	if _, err := first.Exec("COMMIT"); err != nil {
		// An error may come after the commit happened (a lost answer, a
		// kill while waiting for replication): the decision row says. A
		// rollback decision settles it unless the commit's stands.
		committed, aerr := l.XA.Abort(l.Ctx, xid)
		switch {
		case aerr != nil:
			// Unknown: the branches stay prepared, recovery finishes them.
			for _, bc := range l.branches {
				bc.MarkBroken()
				l.putBack(bc)
			}
			l.branches = nil
			return Errorf(KindTxLost, "keyshard: COMMIT on node %s failed (%v) and its outcome cannot be read (%v): it is unknown "+
				"until recovery finishes it", first.Node(), err, aerr)
		case !committed:
			l.rollbackBranches(first)
			return Errorf(KindTxLost, "keyshard: COMMIT failed on node %s (%v): the transaction was rolled back on every node", first.Node(), err)
		}
		// Committed all the same: the connection goes (its state is
		// unsure), the transaction is not lost with it.
		first.SetStatus(first.Status &^ txStatus)
		first.MarkBroken()
	}
	xa := l.XA
	xa.Outcome(true, 1+len(writers))
	all := commitBranches(writers, func(bc *backend.Conn) string { return "XA COMMIT " + branchID(xid, bc.Node()) })
	for _, bc := range writers {
		l.putBack(bc)
	}
	if all {
		xa.Done(xid) // else recovery commits the prepared ones by the decision
	}
	l.branches = nil
	return nil
}

// pipeAll runs the statements qs(bc) on every connection of conns at
// once, each connection's in one write (one round trip, whatever their
// number), and returns the first error once every answer is read. A
// statement after one that failed still runs (they are separate
// commands): qs must be such that this is harmless (XA END then XA
// PREPARE: the PREPARE fails too). step names the phase for the
// failpoint ("": none).
func pipeAll(conns []*backend.Conn, step string, qs func(bc *backend.Conn) []string) error {
	run := func(bc *backend.Conn) error {
		if step != "" {
			failpoint(step, bc.Node())
		}
		q := qs(bc)
		for _, s := range q {
			if err := bc.Queue(s); err != nil {
				return err
			}
		}
		if err := bc.Flush(); err != nil {
			return err
		}
		var first error
		for range q {
			if _, err := bc.Answer(); err != nil && first == nil {
				first = err
			}
			if bc.Broken() {
				break // nothing more to read
			}
		}
		return first
	}
	errs := make([]error, len(conns))
	if len(conns) == 1 {
		errs[0] = run(conns[0])
	} else {
		var wg sync.WaitGroup
		for i := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = run(conns[i])
			}()
		}
		wg.Wait()
	}
	for i, err := range errs {
		var be *backend.Error
		switch {
		case err == nil:
		case errors.As(err, &be):
			return err
		default:
			return fmt.Errorf("node %s: %w", conns[i].Node(), err)
		}
	}
	return nil
}

// rollbackBranches rolls back every branch and the first node's
// transaction; a connection that cannot is closed (which rolls back what
// is not prepared).
func (l *Lease) rollbackBranches(first *backend.Conn) {
	nodes := 1 + len(l.branches)
	l.endBranches()
	if first != nil && !first.Broken() {
		if _, err := first.Exec("ROLLBACK"); err != nil {
			first.MarkBroken()
		}
	}
	if first != nil {
		// Rolled back, or closed (which rolls back): the transaction is
		// over, not lost with the connection.
		first.SetStatus(first.Status &^ txStatus)
	}
	if l.XA != nil {
		l.XA.Outcome(false, nodes)
	}
}

// endBranches rolls back every branch (a connection that cannot is
// closed, which rolls back what is not prepared) and forgets them.
func (l *Lease) endBranches() {
	for _, bc := range l.branches {
		if bc.Broken() {
			l.putBack(bc) // closed: the server rolls back what is not prepared
			continue
		}
		_, _ = bc.Exec("XA END " + branchID(l.xid, bc.Node())) // fails on a prepared branch: the rollback counts
		if _, err := bc.Exec("XA ROLLBACK " + branchID(l.xid, bc.Node())); err != nil {
			bc.MarkBroken()
		}
		l.putBack(bc)
	}
	l.branches, l.wrote = nil, nil
	l.spanChanged()
}

// synced gets a connection from pool p and syncs it to the session. A
// pooled connection found dead while syncing (its server restarted, or
// closed it while idle) is replaced once: nothing of the statement was
// sent, and the pool pings its other idle connections before use now.
func (l *Lease) synced(p *backend.Pool, acOn bool) (*backend.Conn, error) {
	f := backend.FlavorOf(l.Caps, l.Ext, l.Vars.DB)
	for try := 0; ; try++ {
		bc, err := p.GetBy(l.Ctx, l.Deadline, f) // the statement's time limit covers its wait
		if err != nil {
			return nil, err
		}
		if err := bc.Sync(l.Vars.DB, l.Vars.Multi, l.Vars.Autocommit || acOn, l.Vars.State); err != nil {
			l.putBack(bc)
			if try == 0 && backend.KindOf(err) == backend.KindLost && !backend.IsFrozen(err) {
				continue
			}
			return nil, err
		}
		if acOn && !l.Vars.Autocommit {
			l.acOn = append(l.acOn, bc)
		}
		return bc, nil
	}
}

// putBack returns bc to its pool (closed if broken); never pins.
func (l *Lease) putBack(bc *backend.Conn) {
	l.Trace.Released(bc)
	if bc.Broken() {
		l.failed = bc.Pool()
		bc.Pool().Discard(bc)
		return
	}
	bc.Pool().Put(bc)
}

// Release gives back a connection from Acquire: it stays pinned if the
// session needs it, else goes back to its pool (closed if broken).
func (l *Lease) Release(bc *backend.Conn) {
	l.Trace.Released(bc) // no KILL QUERY of the statement's reaches it now
	if slices.Contains(l.branches, bc) {
		// An XA branch stays with the transaction; lost, the transaction
		// is (the session ends, its other branches roll back).
		if l.meta == bc {
			l.meta = nil
		}
		if bc.Broken() {
			l.lost = heldTx
		}
		return
	}
	if bc == l.pinned && len(l.branches) > 0 && !bc.Broken() && bc.Answered() && bc.Status&wire.StatusInTrans == 0 {
		// The first node's transaction ended without keyshard's COMMIT (a
		// statement that commits implicitly): the branches cannot follow
		// it in two phases. They roll back and the session ends.
		l.lost = "a transaction over several nodes (node " + bc.Node() + " ended its part on its own; the others are rolled back)"
	}
	if i := slices.Index(l.acOn, bc); i >= 0 {
		// Autocommit forced on for one read: back to the pool as it is
		// (Sync sets it for the next user), the session's setting intact.
		l.acOn = slices.Delete(l.acOn, i, i+1)
		if inTrans(bc) {
			bc.MarkBroken() // never pooled inside a transaction
		}
		l.putBack(bc)
		return
	}
	if !bc.Broken() {
		// The session's settings as the server now reports them (SET
		// autocommit in a batch or a procedure included).
		l.status = bc.Status &^ (PerStatementStatus | txStatus)
		l.Vars.Autocommit = bc.Autocommit()
	}
	if bc == l.meta {
		l.meta = nil
		if bc != l.pinned {
			l.putBack(bc)
			return
		}
		if !bc.Broken() {
			return // the pinned connection stays as it was
		}
		// A broken pinned connection goes as below.
	}
	if len(l.txNext) > 0 && (l.pinned == nil || l.pinned == bc) {
		switch {
		case l.txNextFresh && !bc.Broken():
			l.txNextFresh = false // the SET TRANSACTION itself
		case bc.Broken() || !inTrans(bc):
			l.txNext, l.txNextFresh = nil, false
		}
	}
	pool := bc.Pool()
	if bc.Broken() {
		l.failed = pool
		if l.pinned == bc {
			// What tied the session to the connection goes with it (a
			// connection lost on another node leaves the pinned one's).
			l.lost = l.heldOn(bc)
			if l.cursors > 0 && l.OnDiscard != nil {
				l.OnDiscard(bc)
			}
			l.pinned = nil
			l.sticky, l.lockTables, l.noReuse = "", false, false
		}
		pool.Discard(bc)
		return
	}
	if l.pinned != nil && l.pinned != bc {
		// A statement on another node while the session keeps state on
		// its pinned connection: this one goes back, unless it was left
		// inside a transaction (it cannot be pinned too), then it is closed,
		// which rolls the transaction back.
		if inTrans(bc) {
			pool.Discard(bc)
			return
		}
		pool.Put(bc)
		return
	}
	if inTrans(bc) || l.sticky != "" || l.lockTables || l.cursors > 0 {
		l.pinned = bc
		return
	}
	l.pinned = nil
	pool.Put(bc)
}

// Lost releases bc after it failed (marked broken): the connection and
// every pin on it go. held says what session state went with it ("" for
// none): an open transaction (rolled back with it), table locks, or what
// made it sticky (user variables, temporary tables...). An open cursor is
// not counted: its loss shows as an error on the next fetch, where the
// loss of the others would go unnoticed.
func (l *Lease) Lost(bc *backend.Conn) (held string) {
	bc.MarkBroken()
	if i := slices.Index(l.branches, bc); i >= 0 {
		// A branch of a transaction over several nodes: the transaction
		// is lost (the session ends; End rolls the others back).
		l.branches = slices.Delete(l.branches, i, i+1)
		l.wrote = slices.Delete(l.wrote, i, i+1)
		l.spanChanged()
		l.putBack(bc)
		return heldTx
	}
	if l.pinned != bc && inTrans(bc) {
		// Not pinned yet, but in a transaction: the deferred BEGIN was
		// opened on it for the statement that failed.
		if l.meta == bc {
			l.meta = nil
		}
		l.putBack(bc)
		return heldTx
	}
	l.Release(bc)
	return l.TakeLost()
}

// heldTx is what Lost reports for an open transaction (rolled back with
// the connection).
const heldTx = "an open transaction (rolled back)"

// heldOn says what session state the pinned connection bc holds ("" for
// none that its loss would hide; an open cursor shows on its next fetch).
func (l *Lease) heldOn(bc *backend.Conn) string {
	switch {
	case inTrans(bc):
		return heldTx
	case l.lockTables:
		return "LOCK TABLES"
	}
	return l.sticky
}

// TakeLost returns, and forgets, what session state went with a pinned
// connection released broken since the last call ("" for none). The
// session ends its client connection when it is set: the client must not
// go on as if that state were still there.
func (l *Lease) TakeLost() string {
	held := l.lost
	l.lost = ""
	return held
}

// End gives the pinned connection back at the end of a session (or before
// COM_RESET_CONNECTION / COM_CHANGE_USER): cleaned with one reset (roll
// back, drop temporary tables, locks and variables), or closed.
func (l *Lease) End() {
	if len(l.branches) > 0 {
		l.rollbackBranches(nil) // the first node's transaction goes with the reset below
		l.xid = ""
	}
	noReuse := l.noReuse
	l.cursors = 0
	l.txNext, l.txNextFresh = nil, false
	l.sticky, l.lockTables, l.txBegin, l.noReuse, l.txImplied = "", false, "", false, false
	bc := l.pinned
	if bc == nil {
		return
	}
	l.pinned = nil
	if noReuse {
		bc.MarkBroken()
	}
	if !bc.Broken() {
		_ = bc.SetDeadline(time.Now().Add(5 * time.Second))
		_ = bc.Reset() // marks bc broken when it fails
		_ = bc.SetDeadline(time.Time{})
	}
	l.putBack(bc)
}

// retryRead reports whether a read that failed with err before anything
// reached the client may be retried on another backend.
func retryRead(err error) bool {
	switch backend.KindOf(err) {
	case backend.KindLost, backend.KindConnect, backend.KindDown, backend.KindPoolTimeout, backend.KindClosed:
		return true
	}
	return false
}
