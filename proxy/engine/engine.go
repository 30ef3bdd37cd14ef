package engine

import (
	"errors"
	"strconv"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/router"
)

// Tracer is what the engine reports about a statement as it runs: the
// session's digest trace (stages, rows, nodes) and KILL bookkeeping. Calls
// are per statement or per result, never per row.
type Tracer interface {
	WaitStart()                // getting a backend connection starts
	WaitDone(bc *backend.Conn) // ... and is over (bc nil: it failed)
	FirstByte()                // the first packet of a backend's answer arrived
	Retry()                    // a failed attempt ends; the statement is tried again
	Sent(rows, affected uint64)
	Running(bc *backend.Conn) // bc runs the statement (nil: none), for KILL QUERY
	// Piped: the statement is in flight on a pipelined connection as t
	// (nil: no longer), which a KILL QUERY goes through.
	Piped(t *backend.Turn)
	Killed() bool // the session was killed
	// Released: bc goes back to its pool, no longer the statement's.
	Released(bc *backend.Conn)
	// Committing: the statement's own commit starts (keyshard's COMMIT
	// or XA COMMIT of its legs): its time limit no longer stops it.
	Committing()
	// Stopped is the error for the statement's end once keyshard stopped
	// it (past its time limit, or as the victim of a deadlock across
	// nodes); nil while it may go on.
	Stopped() error
}

// Conns is how the engine gets backend connections: the session's Lease
// (a fake in tests).
type Conns interface {
	Acquire(n *backend.Node, p Purpose) (*backend.Conn, error)
	Release(bc *backend.Conn)
	// Lost releases a connection that failed; it says what session state
	// went with it ("" for none).
	Lost(bc *backend.Conn) (held string)
	Pinned() *backend.Conn
	Holding() bool  // a transaction is open or deferred, or autocommit is off
	TxOpen() bool   // a transaction is open or deferred
	Spans() bool    // the open transaction may reach other nodes (transaction_mode xa)
	Deferred() bool // a BEGIN is deferred
	// OpenTx, with autocommit off and no transaction open yet, in
	// transaction_mode xa, defers the BEGIN the next statement would
	// imply, so that a statement over several nodes can open the
	// transaction on its first and join the others; false if it cannot.
	OpenTx() bool
	// UndoOpenTx drops the BEGIN OpenTx deferred, if no statement opened
	// it yet (the statement failed before reaching a node).
	UndoOpenTx()
	Status() uint16 // the status the client sees between statements
	// Pipe sends COM_QUERY sql, a statement Pipelinable says may share a
	// connection, on node n (nil: the default node) for purpose p (0 or
	// Read) on a pipelined connection, if the session may (autocommit,
	// nothing pinned or pending, no time limit) and the node's pool
	// pipelines; nil, nil: run it the usual way; an error: no connection
	// could be had.
	Pipe(n *backend.Node, p Purpose, sql []byte) (*backend.Turn, error)
}

// Last holds what the session's last statement reports through
// LAST_INSERT_ID(), ROW_COUNT() and FOUND_ROWS(), which keyshard answers
// itself (the backend connection that ran the statement may serve
// another client by the next one).
type Last struct {
	InsertID  uint64
	RowCount  int64
	FoundRows uint64
}

// Result summarises a relayed answer.
type Result struct {
	ResultSets int
	Rows       uint64
	Started    bool           // a packet of the answer arrived (nothing can be retried after)
	Err        *mysql.MyError // a MySQL error the backend returned (already relayed)
	// Tracked are the session variables the server reported changed
	// (session tracking), with their new values as it prints them.
	Tracked []backend.Var
}

// ErrClose tells the session to close the client connection after the
// answer (an open transaction was lost with its backend).
var ErrClose = errors.New("close after reply")

// Engine runs statements for one client session: it gets connections
// from Conns, sends, and relays answers to Client. Every result set read
// from a backend and written to a client goes through it.
//
// Entry points write the whole answer, errors included, and return nil on
// success, the error the client was sent (for metrics), a *ClientError
// when the client is gone, or ErrClose.
type Engine struct {
	Client *Client
	Conns  Conns
	Trace  Tracer
	Vars   *Vars
	Last   *Last
	// Nodes is the running configuration's nodes by name (replaced on
	// each config rebind).
	Nodes map[string]*backend.Node
	// MaxMergeRows bounds the rows a merge holds (max_merge_rows).
	MaxMergeRows int
	// RowHook, when set, sees each text row relayed by Relay (one
	// physical packet) and returns what the client gets instead: for the
	// rare answer keyshard must correct (see the session's SHOW STATUS);
	// nil drops the row. Rows then go one packet at a time.
	RowHook func(row []byte) []byte
	// XA makes a write over several nodes commit on all or none (nil:
	// each node commits its part on its own).
	XA Atomic
	// Sharded is the plan of the sharded statement running (nil: none):
	// column definitions name its logical tables, not their sub-tables.
	// Route sets it; set it around a Prepare of a sharded statement.
	Sharded *router.Plan
	// ColTypes are the column types of the result set being relayed, kept
	// while a RowHook is set (a binary row is read with them).
	ColTypes []byte
	// ColNames are their original names (org_name), kept with ColTypes.
	ColNames []string
	// Diag is the diagnostics area of a statement over several legs, or
	// of keyshard's own (see Diag); the session clears it.
	Diag Diag
	// CommitStmt: the running statement is the client's COMMIT, forwarded
	// to the transaction's node: a connection lost during it leaves the
	// outcome unknown (the server may have committed before the answer was
	// lost), not rolled back. The session sets it around each query.
	CommitStmt bool

	colBuf []byte // colDef's scratch
	// genID is the first id the running statement took from a sequence
	// (0: none): its OK reports it as the insert id. Route sets it.
	genID uint64
	idBuf []byte // relayOK's scratch for an OK with genID
}

// colDef is column definition p as the client sees it: under a sharded
// plan, its table names say the logical table.
func (e *Engine) colDef(p []byte) []byte {
	if e.Sharded == nil {
		return p
	}
	out, renamed := wire.RenameColumnTable(e.colBuf, p, e.Sharded.Logical)
	if !renamed {
		return p
	}
	e.colBuf = out
	return out
}

// Fail writes err to the client and returns it.
func (e *Engine) Fail(err error) error {
	err = e.stopped(err)
	if e.Diag.on {
		e.Diag.fail(e.Client.mapErr(err))
	}
	e.Client.Error(err)
	return err
}

// stopped is err, or the error of keyshard's stop when err is what the
// stop caused: a backend's "interrupted" answer to keyshard's KILL QUERY,
// a connection not had in time.
func (e *Engine) stopped(err error) error {
	te := e.Trace.Stopped()
	if te == nil {
		return err
	}
	var me *mysql.MyError
	if errors.As(err, &me) && me.Code == mysql.ER_QUERY_INTERRUPTED || backend.KindOf(err) == backend.KindPoolTimeout {
		return te
	}
	return err
}

// Lost handles an error that left bc unusable or the client gone: the
// connection is discarded and one error written. When session state lived
// on the connection (a transaction, locks, variables, temporary tables, a
// cursor), the client's connection ends too, as it would with the server
// gone: the client must not go on as if that state were still there.
func (e *Engine) Lost(bc *backend.Conn, err error) error {
	var ce *ClientError
	if errors.As(err, &ce) {
		bc.MarkBroken()
		e.Conns.Release(bc)
		return err
	}
	held := e.Conns.Lost(bc)
	if e.Trace.Killed() {
		err = Errorf(KindKilled, "Query execution was interrupted (connection killed)")
	} else {
		err = e.stopped(err)
	}
	if held != "" {
		kind := KindStateLost
		if held == heldTx {
			kind = KindTxLost
			if e.CommitStmt {
				// Not "rolled back": the server may have committed it
				// before its answer was lost.
				e.Client.Error(Errorf(kind, "%v; the connection was lost during the transaction's COMMIT on node %s, so whether it "+
					"committed is unknown; the session ends here", err, bc.Node()))
				return ErrClose
			}
		}
		e.Client.Error(Errorf(kind, "%v; the session held %s on that connection, so it ends here", err, held))
		return ErrClose
	}
	e.Client.Error(err)
	return err
}

// lostConn marks bc lost after a failed read or an answer that does not
// decode.
func lostConn(bc *backend.Conn, err error) error {
	bc.MarkLost()
	return &backend.Error{Kind: backend.KindLost, Node: bc.Node(), Addr: bc.Addr(), Msg: "connection lost during query", Err: err}
}

// sendErr is the error for a command that could not be sent to bc.
func sendErr(bc *backend.Conn, err error) error {
	bc.MarkLost()
	return &backend.Error{Kind: backend.KindLost, Node: bc.Node(), Addr: bc.Addr(), Msg: "sending command", Err: err}
}

// maxRetries bounds how many times a read runs again after its
// connection failed: the failed backend is avoided each time, and one
// that refuses a new connection too leaves the read rotation at once
// (backend.Pool), so a second retry is for a second server lost at the
// same moment.
const maxRetries = 2

// again reports whether an attempt on bc that failed with err runs again,
// having released bc (broken: discarded, its backend avoided) and counted
// the retry: retriable (a read that sent nothing to the client, on no
// pinned connection), within maxRetries, after an error a retry can cure.
func (e *Engine) again(bc *backend.Conn, err error, retriable bool, attempt int) bool {
	if !retriable || attempt >= maxRetries || !e.mayRetry(bc, err) {
		return false
	}
	e.Conns.Release(bc)
	e.Trace.Retry()
	return true
}

// mayRetry reports whether a read whose connection bc failed with err
// before any of its answer arrived may run again on another connection:
// the backend failed (not the client), the session was not killed, and a
// frozen server is not waited on again (a replica's read goes elsewhere;
// a master's would wait on the same server).
func (e *Engine) mayRetry(bc *backend.Conn, err error) bool {
	if backend.KindOf(err) != backend.KindLost || e.Trace.Killed() {
		return false
	}
	return !backend.IsFrozen(err) || bc.Pool().Role() == backend.RoleReplica
}

// send writes one command to bc and flushes it: the client's packet raw
// (command byte first), or a COM_QUERY of sql.
func send(bc *backend.Conn, raw []byte, sql *string) error {
	bp := bc.Packets()
	var err error
	if sql != nil {
		err = bp.WriteCommandString(mysql.COM_QUERY, *sql)
	} else {
		err = bp.WriteCommand(raw[0], raw[1:])
	}
	if err == nil {
		err = bp.Flush()
	}
	if err != nil {
		return sendErr(bc, err)
	}
	return nil
}

// Forward runs one command on node n (nil: the pinned connection, else the
// default node) and relays the answer: raw is the client's command packet,
// or sql a query to send instead. info classifies a statement (nil for
// other commands).
//
// A plain read (router.Retriable) or a command other than COM_QUERY that
// fails before any answer arrived, on a connection that was not pinned (a
// pooled one may have been closed by the server while idle, its server
// may have died), runs again on a fresh connection, avoiding the backend
// that failed (another replica or the master; see maxRetries): nothing
// was sent to the client, and running it again changes nothing. A write
// is never retried (it may have run), nor is a killed session's
// statement, nor one on a frozen master.
func (e *Engine) Forward(n *backend.Node, raw []byte, sql *string, info *router.Info) error {
	return e.ForwardThen(n, raw, sql, info, nil)
}

// ForwardThen is Forward with after called on the connection that ran the
// command, once its answer has been relayed and before it is released.
func (e *Engine) ForwardThen(n *backend.Node, raw []byte, sql *string, info *router.Info, after func(bc *backend.Conn, res Result)) error {
	cmd := byte(mysql.COM_QUERY)
	if raw != nil {
		cmd = raw[0]
	}
	// A statement (the client's or rewritten) is retried only if it is a
	// plain read: a write may have run before its connection died.
	retriable := e.Conns.Pinned() == nil && !e.Conns.Deferred() &&
		(cmd == mysql.COM_FIELD_LIST || cmd == mysql.COM_STATISTICS || cmd == mysql.COM_QUERY && info != nil && router.Retriable(*info))
	p := Write
	switch {
	case info == nil || cmd != mysql.COM_QUERY:
	case router.ReadOnly(*info):
		p = Read
	case info.Kind == router.KindDDL && info.Flags&router.FlagTemporary == 0 && !e.Conns.TxOpen():
		// DDL after the session's transaction was committed (see
		// Lease.CommitImplicit): outside any, wherever the session's
		// state is held.
		p = NoTx
	}
	return e.forward(n, raw, sql, info, after, p, retriable)
}

// Lookup runs sql, a statement that reads metadata (introspection of a
// sharded table), on node n on a connection of its own: never the pinned
// one, never inside the session's transaction, with autocommit on.
func (e *Engine) Lookup(n *backend.Node, sql string, info *router.Info) error {
	return e.forward(n, nil, &sql, info, nil, Extra|AutocommitOn, false)
}

func (e *Engine) forward(n *backend.Node, raw []byte, sql *string, info *router.Info, after func(bc *backend.Conn, res Result), p Purpose, retriable bool) error {
	cmd := byte(mysql.COM_QUERY)
	if raw != nil {
		cmd = raw[0]
	}
	if cmd == mysql.COM_QUERY && after == nil && p&^Read == 0 && e.RowHook == nil && info != nil && router.Pipelinable(*info) {
		if done, err := e.piped(n, raw, sql, p, retriable); done {
			return err
		}
	}
	for attempt := 0; ; attempt++ {
		bc, err := e.Conns.Acquire(n, p)
		if err != nil {
			return e.Fail(err)
		}
		start := time.Now()
		var res Result
		if err = send(bc, raw, sql); err == nil {
			e.Trace.Running(bc)
			if cmd == mysql.COM_STATISTICS || cmd == mysql.COM_DEBUG {
				err = e.relayOne(bc)
				res.Started = true
			} else {
				res, err = e.Relay(bc, cmd == mysql.COM_FIELD_LIST, nil)
			}
			e.Trace.Running(nil)
		}
		bc.Pool().Observe(time.Since(start), err != nil || res.Err != nil)
		if err != nil {
			if e.again(bc, err, retriable && !res.Started, attempt) {
				p |= Retry
				continue
			}
			return e.Lost(bc, err)
		}
		if info != nil && info.Flags&router.FlagCalcFoundRows != 0 && res.ResultSets > 0 {
			e.readFoundRows(bc)
		}
		if after != nil {
			after(bc, res)
		}
		e.Conns.Release(bc)
		if res.Err != nil {
			return res.Err
		}
		return nil
	}
}

// readFoundRows reads FOUND_ROWS() back from bc after a statement with
// SQL_CALC_FOUND_ROWS: the relay counted the rows sent, FOUND_ROWS() wants
// the rows before LIMIT, which only the backend knows.
func (e *Engine) readFoundRows(bc *backend.Conn) {
	if r, err := bc.Exec("SELECT FOUND_ROWS()"); err == nil && len(r.Rows) == 1 && r.Rows[0][0] != nil {
		e.Last.FoundRows, _ = strconv.ParseUint(*r.Rows[0][0], 10, 64)
	}
}

// relayOne relays a single-packet answer (COM_STATISTICS's text,
// COM_DEBUG's EOF).
func (e *Engine) relayOne(bc *backend.Conn) error {
	p, err := bc.Packets().ReadPacket()
	if err != nil {
		return &backend.Error{Kind: backend.KindLost, Node: bc.Node(), Addr: bc.Addr(), Msg: "reading answer", Err: err}
	}
	e.Trace.FirstByte()
	return e.Client.Packet(p)
}

// Run is how to run the statements of a bound routing.
type Run struct {
	Kind router.Kind
	Read bool // read-only: legs may read from replicas
	// Send buffers and flushes a leg's statements as prepared executions
	// (binary rows); nil: text statements.
	Send func(l *Leg) error
	// One runs a routing with a single target: sub-table r on node n.
	One func(n *backend.Node, r *router.Route) error
	// Cursor: the client asked for a cursor, which needs one target.
	Cursor bool
}

// Route runs a bound routing: one target through run.One, a SELECT
// whose sub-table results need merging through the streaming merge, any
// other fan-out (SELECT relayed as one result set, writes and DDL summed
// into one OK) on one connection per node.
func (e *Engine) Route(rt *router.Routing, pl *router.Plan, run Run) error {
	e.Sharded, e.genID = pl, rt.InsertID
	defer func() { e.Sharded, e.genID = nil, 0 }()
	if rt.Targets() > 1 {
		// No one connection holds the statement's warnings.
		e.Diag.Start(maxErrorCount(e.Vars.State))
	}
	if rt.Merge != "" {
		return e.Fail(MergeErr(rt, pl))
	}
	if rt.Targets() == 1 {
		r := &rt.Routes[0]
		return run.One(e.Nodes[r.Node], r)
	}
	if run.Cursor {
		t := pl.Tables()[0]
		return e.Fail(Errorf(KindNotSupported, "keyshard: a cursor over %d sub-tables of sharded table %s is not supported; "+
			"add the shard key %s to WHERE to reach one sub-table", rt.Targets(), t.Table, t.Key))
	}
	if rt.Spec != nil {
		send := run.Send
		if send == nil {
			send = sendQuery
		}
		return e.merged(rt, run.Send != nil, run.Read, send)
	}
	send := run.Send
	if send == nil {
		send = e.sendBatch
	}
	return e.fanOut(rt, run.Kind, run.Read, send)
}

// MergeErr refuses a statement over several sub-tables whose result needs
// a merge keyshard does not do (rt.Merge says which).
func MergeErr(rt *router.Routing, pl *router.Plan) error {
	t := pl.Tables()[0]
	return Errorf(KindNotSupported, "keyshard: statement over %d sub-tables of sharded table %s: %s; "+
		"add the shard key %s to WHERE to reach one sub-table", rt.Targets(), t.Table, rt.Merge, t.Key)
}
