package engine

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
)

// Vars is the session state a backend connection is synced to before it
// serves the client (backend.Conn.Sync). The session owns it; the lease
// and the engine read it.
type Vars struct {
	DB         string         // current database ("" for none)
	Multi      bool           // multi-statements on (CLIENT_MULTI_STATEMENTS, COM_SET_OPTION)
	Autocommit bool           // autocommit on (learned from the server status of each answer)
	State      *backend.State // charset and session variables
}

// Purpose says what a connection is acquired for; the flags combine.
type Purpose uint8

const (
	// Write (no flag): a statement that may change data or session state.
	// It gets the pinned connection when that is on its node, opens a
	// deferred BEGIN, and is refused when a transaction is open on another
	// node.
	Write Purpose = 0
	// Read: a read-only statement. Outside a transaction and without
	// pinned state it may go to one of the node's replicas.
	Read Purpose = 1 << iota
	// Retry: a read (or PREPARE) run again after its connection failed
	// before any answer: the backend of the last connection released
	// broken is avoided (another replica, or the master), unless nothing
	// else can serve.
	Retry
	// Meta: metadata only (PREPARE). Never opens a deferred transaction,
	// never refused by one on another node, never pinned.
	Meta
	// Extra: one more connection on a node for a merge leg: never the
	// pinned one. (Released like any other, it may become the pinned one
	// when the session has state to keep and nothing pinned yet.)
	Extra
	// AutocommitOn: a read over several nodes or sub-tables while
	// autocommit is off and no transaction is open runs with autocommit on
	// (each of its connections would otherwise open a transaction the
	// session could not keep): it reads the data as of now. The session's
	// own setting is not learned from such a connection.
	AutocommitOn
	// NoTx: a statement that commits implicitly (DDL), run once the
	// session's transaction was committed (CommitImplicit): the pinned
	// connection when it is on the node (it holds no transaction now),
	// else one of its own synced to the session, with autocommit on when
	// the session has it off (its setting is not learned from it). Never
	// opens a transaction or joins one as an XA branch, never refused for
	// the session's state held on another node.
	NoTx
)

// Lease owns the backend connections a client session holds, and why. A
// statement acquires a connection for a node and a purpose and releases it
// when its answer has been relayed; Release decides whether the connection
// goes back to its pool or stays pinned to the session. The rules for
// pinning are all here:
//
//   - a transaction (the server reports one) or LOCK TABLES pins the
//     connection, and ties the session to its node; with autocommit off
//     every statement opens one, so the session is tied as if in one
//     (Holding), but between transactions its connection goes back to
//     the pool: autocommit is replicated state like the variables;
//   - state that lives only on that connection (user variables, GET_LOCK,
//     temporary tables, text PREPARE, multi-statement batches, unparsed
//     SET) pins it for good (sticky);
//   - an open cursor pins the connection holding it;
//   - with sharded tables, BEGIN is deferred and opened on the node of the
//     transaction's first statement;
//   - read/write splitting sends reads to replicas only when nothing is
//     pinned or pending, and not within the read-your-writes window after
//     the session's last write.
//
// It belongs to the session's goroutine.
type Lease struct {
	// Set by the session (at login and on each config rebind).
	Ctx     context.Context
	Vars    *Vars
	Default *backend.Node // the user's schema's default node (nil: no schema)
	User    string
	Caps    uint32        // the client's capabilities (see backend.Flavor)
	Ext     uint32        // the client's MariaDB extended capabilities
	Split   bool          // reads may go to replicas (user and schema allow it)
	RYW     time.Duration // read-your-writes window (0: off)
	Trace   Tracer
	// Deadline is the running statement's time limit (zero: none): a wait
	// for a pooled connection gives up there.
	Deadline time.Time
	// OnDiscard is called for a pinned connection that is discarded, so
	// the session can forget cursors it held.
	OnDiscard func(bc *backend.Conn)
	// XA lets a transaction span nodes (transaction_mode xa; nil: a
	// transaction stays on its first node). Its first node runs a local
	// transaction (the pinned connection); each other node it reaches, an
	// XA branch; COMMIT prepares the branches, records the decision inside
	// the first node's transaction and commits it, then the branches.
	XA Atomic
	// OnSpan, when set, is called on the session's goroutine each time
	// the backend connections of a transaction over several nodes change:
	// a branch joined, the transaction ended (see Spanning). The deadlock
	// detector follows them through it.
	OnSpan func()

	pinned     *backend.Conn
	sticky     string // why the connection is pinned for good ("" if not)
	noReuse    bool   // the pinned connection is closed at the end, not reset (see NoReuse)
	lockTables bool
	txBegin    string // a BEGIN not sent yet (see Defer)
	cursors    int    // statements with an open cursor (they pin the connection)
	lastWrite  int64  // unix nanos of the session's last write
	meta       *backend.Conn
	failed     *backend.Pool   // the pool of the last connection released broken (see Retry)
	lost       string          // session state lost with a pinned connection (see TakeLost)
	acOn       []*backend.Conn // connections acquired AutocommitOn, not released yet
	xid        string          // the XA transaction of a transaction over several nodes ("" none)
	branches   []*backend.Conn // its branches on the nodes besides the pinned connection's
	wrote      []bool          // branches[i] ran a statement that may write (else only reads: no second phase)
	status     uint16          // the server status of the session's last answer (see Status)
	// txNext are the session's one-shot SET TRANSACTION statements that
	// its next transaction takes (see NextTx); txNextFresh: just recorded.
	txNext      []string
	txNextFresh bool
	txImplied   bool // txBegin is OpenTx's, not the client's
}

// NextTx records a SET TRANSACTION statement (isolation level, READ
// ONLY/WRITE for the next transaction only) that ran on the session's
// connection: the XA branches of that transaction, on other nodes, take
// it too. A statement that then runs outside a transaction, or the end of
// the transaction, uses it up, as on the server.
func (l *Lease) NextTx(sql string) {
	l.txNext = append(l.txNext, sql)
	l.txNextFresh = true
}

// Pinned returns the pinned connection (nil: none).
func (l *Lease) Pinned() *backend.Conn { return l.pinned }

// Sticky says why the connection is pinned for good ("" if not).
func (l *Lease) Sticky() string { return l.sticky }

// Stick pins the session's connection for good, for why (the first reason
// is kept).
func (l *Lease) Stick(why string) {
	if l.sticky == "" {
		l.sticky = why
	}
}

// NoReuse pins the session's connection for good and has it closed, not
// reset, when the session ends: for state a reset leaves behind (the
// profiling history, which SHOW PROFILES would show the next client).
func (l *Lease) NoReuse(why string) {
	l.Stick(why)
	l.noReuse = true
}

// SetLockTables records LOCK TABLES (true) or UNLOCK TABLES.
func (l *Lease) SetLockTables(on bool) { l.lockTables = on }

// Defer holds BEGIN / START TRANSACTION (sql) until the first statement
// picks the transaction's node; "" drops a deferred one.
func (l *Lease) Defer(sql string) { l.txBegin, l.txImplied = sql, false }

// OpenTx: see Conns.
func (l *Lease) OpenTx() bool {
	if l.XA == nil || l.Vars.Autocommit || l.TxOpen() || l.pinned != nil {
		return false
	}
	l.txBegin, l.txImplied = "BEGIN", true
	return true
}

// UndoOpenTx: see Conns.
func (l *Lease) UndoOpenTx() {
	if l.txImplied && l.txBegin != "" {
		l.txBegin = ""
	}
	l.txImplied = false
}

// Deferred reports whether a BEGIN is held back.
func (l *Lease) Deferred() bool { return l.txBegin != "" }

// CursorOpened and CursorClosed count open cursors (each pins).
func (l *Lease) CursorOpened() { l.cursors++ }

// CursorClosed is CursorOpened's counterpart.
func (l *Lease) CursorClosed() { l.cursors-- }

// InTx reports whether the pinned connection holds a transaction or table
// locks, which tie the session to its node.
func (l *Lease) InTx() bool {
	return l.pinned != nil && (inTrans(l.pinned) || l.lockTables)
}

// txStatus are the status flags that describe an open transaction.
const txStatus = wire.StatusInTrans | mysql.SERVER_STATUS_IN_TRANS_READONLY

// inTrans reports whether bc may be inside a transaction: the server says
// so, or, with autocommit off, its last statement ended in an error (an
// ERR packet carries no status; the failed statement may have opened one,
// holding its locks and snapshot).
func inTrans(bc *backend.Conn) bool {
	return bc.Status&wire.StatusInTrans != 0 || !bc.Autocommit() && !bc.Answered()
}

// Holding reports whether a transaction is open or deferred, or autocommit
// is off (the next statement opens one where it runs).
func (l *Lease) Holding() bool { return l.txBegin != "" || !l.Vars.Autocommit || l.InTx() }

// TxOpen reports whether a transaction is open or deferred (autocommit off
// alone is not one yet).
func (l *Lease) TxOpen() bool { return l.txBegin != "" || l.InTx() }

// Status is the server status the client should see between statements:
// the backend's, as the session's last answer left it (autocommit, no
// backslash escapes...), without the flags that describe one statement.
func (l *Lease) Status() uint16 {
	if l.pinned != nil {
		return l.pinned.Status &^ PerStatementStatus
	}
	if l.txBegin != "" {
		return l.status | wire.StatusInTrans
	}
	return l.status
}

// SetStatus sets the status a new session starts with: the server's for a
// new connection (backend.Pool.SessionStatus). Autocommit follows it.
func (l *Lease) SetStatus(st uint16) {
	l.status = st &^ (PerStatementStatus | txStatus)
	l.Vars.Autocommit = st&wire.StatusAutocommit != 0
}

// MarkWrite starts the read-your-writes window.
func (l *Lease) MarkWrite() { l.lastWrite = time.Now().UnixNano() }

// Tracking reports whether the session tracks its writes for
// read-your-writes (it splits reads and the window is on).
func (l *Lease) Tracking() bool { return l.Split && l.RYW > 0 }

// ResetSession forgets the session's routing state (a new login, a
// COM_RESET_CONNECTION): no deferred BEGIN, no write window.
func (l *Lease) ResetSession() {
	l.txBegin, l.txImplied = "", false
	l.lastWrite = 0
}

// Acquire returns a connection on node n (nil: the pinned connection, else
// the default node) for purpose p, synced to the session's Vars.
func (l *Lease) Acquire(n *backend.Node, p Purpose) (*backend.Conn, error) {
	if !l.Deadline.IsZero() && !time.Now().Before(l.Deadline) {
		// Past the statement's time limit: no more connections for it
		// (a later leg, a retry), which the limit's KILL would miss.
		return nil, &backend.Error{Kind: backend.KindPoolTimeout, Msg: "the statement's time limit passed"}
	}
	l.Trace.WaitStart()
	bc, err := l.acquire(n, p)
	l.Trace.WaitDone(bc)
	if bc != nil && p&Meta == 0 {
		bc.ClearAnswered()
	}
	return bc, err
}

func (l *Lease) acquire(n *backend.Node, p Purpose) (*backend.Conn, error) {
	var skip *backend.Pool
	if p&Retry != 0 {
		skip = l.failed
	}
	if p&Meta != 0 {
		// Prepared (for its metadata) where the executions may run: on a
		// replica when the session can read from one (another when the
		// first fails), so that reads go on while the master is down;
		// else the master, whatever fails.
		var bc *backend.Conn
		for try := 0; p&Read != 0 && bc == nil && try < 2; try++ {
			rp, _ := l.readPool(n, skip)
			if rp == nil {
				break
			}
			if bc, _ = l.synced(rp, false); bc == nil {
				l.failed, skip = rp, rp
			}
		}
		var err error
		if bc == nil {
			bc, err = l.onNode(n, false)
		}
		if err == nil {
			l.meta = bc // released as it came: pinned or pooled, never (un)pinned
		}
		return bc, err
	}
	if p&NoTx != 0 {
		if n == nil && l.pinned != nil {
			return l.pinned, nil
		}
		if n == nil {
			n = l.Default
		}
		if n == nil {
			return nil, ErrNoSchema(l.User)
		}
		if l.pinned != nil && l.pinned.Pool() == n.Master {
			return l.pinned, nil
		}
		return l.synced(n.Master, true)
	}
	if p&AutocommitOn != 0 && !l.Vars.Autocommit {
		if n == nil {
			n = l.Default
		}
		if n == nil {
			return nil, ErrNoSchema(l.User)
		}
		return l.synced(n.Master, true)
	}
	if p&Read != 0 {
		rp, err := l.readPool(n, skip)
		if err != nil {
			return nil, err
		}
		if rp != nil {
			bc, err := l.synced(rp, false)
			if err != nil && p&Retry == 0 && retryRead(err) {
				// Once more elsewhere: another replica or the master.
				l.failed = rp
				return l.acquire(n, p|Retry)
			}
			return bc, err
		}
	}
	if p&Extra != 0 {
		return l.synced(n.Master, false)
	}
	bc, err := l.onNode(n, true)
	if err == nil && p&Read == 0 && len(l.branches) > 0 {
		if i := slices.Index(l.branches, bc); i >= 0 {
			l.wrote[i] = true // it takes part in the second phase
		}
	}
	return bc, err
}

// Pipe: see Conns. The session must hold nothing on a connection of its
// own: no transaction, open or deferred, autocommit on, nothing pinned,
// no statement time limit (its KILL would need the connection alone).
func (l *Lease) Pipe(n *backend.Node, p Purpose, sql []byte) (*backend.Turn, error) {
	if l.pinned != nil || l.txBegin != "" || l.sticky != "" || l.lockTables || l.cursors > 0 || !l.Vars.Autocommit ||
		!l.Deadline.IsZero() || l.meta != nil || len(l.acOn) > 0 || len(l.branches) > 0 {
		return nil, nil
	}
	if n == nil {
		n = l.Default
	}
	if n == nil || !n.Master.Pipelines() {
		return nil, nil // off (the default): nothing more done for it
	}
	pool := n.Master
	if p&Read != 0 {
		rp, err := l.readPool(n, nil)
		if err != nil {
			return nil, nil // the usual way says why
		}
		if rp != nil {
			pool = rp
		}
	}
	l.Trace.WaitStart()
	return pool.Pipeline(l.Ctx, l.Deadline, backend.FlavorOf(l.Caps, l.Ext, l.Vars.DB), l.Vars.DB, l.Vars.Multi, l.Vars.State, sql)
}

// readPool returns the replica pool a read on node n (nil: the default
// node) should use, or nil for the session's usual master connection.
// skip is a pool a retry should avoid: it is used all the same when no
// other can serve. With no replica able to serve and master_reads off, it
// fails with an error naming the node.
func (l *Lease) readPool(n *backend.Node, skip *backend.Pool) (*backend.Pool, error) {
	if !l.Split || l.pinned != nil || l.txBegin != "" || l.sticky != "" || !l.Vars.Autocommit {
		return nil, nil
	}
	if n == nil {
		n = l.Default
	}
	if n == nil || !n.Splits() {
		return nil, nil
	}
	if l.RYW > 0 && l.lastWrite != 0 && time.Duration(time.Now().UnixNano()-l.lastWrite) < l.RYW {
		return nil, nil
	}
	p := n.ReadPool(skip)
	if p == nil && skip != nil {
		p = n.ReadPool(nil) // a new connection where the last one failed
	}
	if p == nil {
		return nil, &backend.Error{Kind: backend.KindDown, Node: n.Name, Addr: n.Master.Addr(), Role: backend.RoleReplica,
			Msg: "no replica can serve reads (all down, lagging or failed) and master_reads is off"}
	}
	return p, nil
}

// onNode returns the connection for the next statement on node n: the
// pinned one when it is on that node, else one from the node's master pool
// synced to the session. With tx, a connection pinned by a transaction on
// another node is an error (a transaction stays on one node), and a
// deferred BEGIN is opened on the connection returned.
func (l *Lease) onNode(n *backend.Node, tx bool) (*backend.Conn, error) {
	if n == nil {
		if l.pinned != nil {
			return l.pinned, nil
		}
		n = l.Default
	}
	if n == nil {
		return nil, ErrNoSchema(l.User)
	}
	if l.pinned != nil {
		if l.pinned.Pool() == n.Master {
			return l.pinned, nil
		}
		for _, b := range l.branches {
			if b.Pool() == n.Master {
				return b, nil
			}
		}
		if tx && l.XA != nil && inTrans(l.pinned) {
			if !l.pinned.Answered() {
				// After an error the status is a guess: ask.
				if _, err := l.pinned.Exec("DO 0"); err != nil {
					return nil, err
				}
			}
			if l.pinned.Status&wire.StatusInTrans != 0 {
				return l.joinBranch(n)
			}
		}
		if tx && l.Holding() {
			if !l.InTx() {
				// Autocommit off: the statement would open a transaction
				// here while the session's state is held on the other node.
				return nil, crossNode("keyshard: this statement needs node %s, but autocommit is off and the session's "+
					"connection is held on node %s (%s); a transaction can touch one node only", n.Name, l.pinned.Node(), l.sticky)
			}
			return nil, crossNode("keyshard: this statement needs node %s, but the open transaction is on node %s; "+
				"a transaction can touch one node only (the transaction is still open)", n.Name, l.pinned.Node())
		}
	}
	bc, err := l.synced(n.Master, false)
	if err != nil {
		return nil, err
	}
	if tx && l.txBegin != "" {
		if _, err := bc.Exec(l.txBegin); err != nil {
			l.Release(bc)
			if backend.KindOf(err) != backend.KindLost || backend.IsFrozen(err) {
				return nil, err
			}
			// A pooled connection found dead by the BEGIN (nothing of
			// the statement was sent): once more on another.
			if bc, err = l.synced(n.Master, false); err != nil {
				return nil, err
			}
			if _, err := bc.Exec(l.txBegin); err != nil {
				l.Release(bc)
				return nil, err
			}
		}
		l.txBegin, l.txImplied = "", false
		if l.XA != nil {
			// Pinned at once: the statement's other legs (a first
			// statement over several nodes) join it as branches.
			l.pinned = bc
		}
	}
	return bc, nil
}

// joinBranch opens the transaction's XA branch on node n.
func (l *Lease) joinBranch(n *backend.Node) (*backend.Conn, error) {
	if l.xid == "" || len(l.branches) == 0 {
		// A new XID for the transaction's first branch, never one left by
		// an earlier transaction whose branch failed to open: an XID
		// names the node keeping its decision, the first node of its own
		// transaction (recovery looks for the decision there).
		if err := l.XA.Prepare(l.Ctx, l.pinned.Node()); err != nil {
			return nil, Errorf(KindNotSupported, "keyshard: the transaction cannot reach node %s: node %s cannot keep its commit decision: %v "+
				"(the transaction is still open)", n.Name, l.pinned.Node(), err)
		}
		l.xid = l.XA.TxXID(l.pinned.Node())
	}
	bc, err := l.synced(n.Master, false)
	if err != nil {
		return nil, err
	}
	// The transaction's characteristics, for the branch's next
	// transaction only: those SET TRANSACTION gave it, and READ ONLY from
	// START TRANSACTION READ ONLY. (The session's own isolation level is
	// synced like any variable.)
	chars := l.txNext
	switch {
	case l.pinned.Status&mysql.SERVER_STATUS_IN_TRANS_READONLY != 0:
		chars = append(slices.Clip(chars), "SET TRANSACTION READ ONLY")
	case len(chars) > 0 || l.sessionReadOnly():
		// START TRANSACTION READ WRITE overrode a (SESSION) TRANSACTION
		// READ ONLY: the access mode the first node has.
		chars = append(slices.Clip(chars), "SET TRANSACTION READ WRITE")
	}
	for _, q := range chars {
		if _, err := bc.Exec(q); err != nil {
			bc.MarkBroken()
			l.putBack(bc)
			return nil, err
		}
	}
	// XA START goes out with the branch's first statement, in one write:
	// its answer is read first, by whoever reads that statement's (a
	// failure fails that read, and the transaction with it).
	if err := bc.Ahead("XA START " + branchID(l.xid, n.Name)); err != nil {
		l.putBack(bc)
		return nil, err
	}
	l.branches = append(l.branches, bc)
	l.wrote = append(l.wrote, false)
	l.spanChanged()
	return bc, nil
}

// sessionReadOnly reports whether the session's transactions are read-only
// by default (SET SESSION TRANSACTION READ ONLY, synced to every
// connection).
func (l *Lease) sessionReadOnly() bool {
	if l.Vars.State == nil {
		return false
	}
	for _, name := range []string{"tx_read_only", "transaction_read_only"} {
		if v, ok := l.Vars.State.Get(name); ok {
			v = strings.Trim(v, "'\"")
			return v == "1" || strings.EqualFold(v, "on")
		}
	}
	return false
}
