package engine

import (
	"errors"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/router"
)

// Leg is one connection's part of a fan-out: its connection and statements.
type Leg struct {
	BC    *backend.Conn
	Route *router.Route
	// Pipelined: each statement was sent as its own command (prepared
	// statements), so each has its own answer; else the statements form
	// one multi-statement batch that stops at the first error.
	Pipelined bool

	done     int  // statements whose answer has been read
	finished bool // the last packet of the leg's answer has been read
	// queued: a merge leg whose statement waits for the leg before it on
	// the same connection (see readAhead); ahead: its rows read ahead,
	// handed to the merge from memory (nil: read from the connection).
	queued bool
	ahead  [][]byte
	cols   bool // a merge leg's column definitions were read
	// gone: its connection failed and was given back, and no other could
	// be had for it (see retryLeg): nothing to read, cancel or release.
	gone  bool
	tries int // times retryLeg sent it again
	// start is when its statements were sent (zero: not sent), failed
	// that one ended in an error: for its pool's statement counts.
	start  time.Time
	failed bool
	// warn: the warnings its last statement reported, not read yet;
	// lostWarn: those of its earlier statements, which the batch lost
	// (see Diag.leg).
	warn, lostWarn uint16
	// warnQueued: a SHOW WARNINGS is queued behind the leg's statements
	// (an atomic write pipelines its ends behind them: see queueEnd); its
	// answer is read next, by Diag.leg or, on a failure, by ended.
	warnQueued bool
}

// queuedWarnings reads the answer of the SHOW WARNINGS queued behind the
// leg's statements, if any.
func (l *Leg) queuedWarnings() (*backend.Result, error) {
	if !l.warnQueued {
		return nil, nil
	}
	l.warnQueued = false
	return l.BC.Answer()
}

// warned records the warnings of the leg's statement that just ended.
func (l *Leg) warned(n uint16) {
	l.lostWarn += l.warn
	l.warn = n
}

// sent marks the leg's statements sent now.
func (l *Leg) sent() { l.start = time.Now() }

// observe counts the leg's statements as one on its pool once it was sent.
func (l *Leg) observe(failed bool) {
	if !l.start.IsZero() {
		l.BC.Pool().Observe(time.Since(l.start), failed || l.failed)
		l.start = time.Time{}
	}
}

// legRetry says whether a fan-out's legs run again after their connection
// failed before any of their answer was read (a read outside a
// transaction, as Forward retries one), and how: p is the purpose they
// were acquired for, send what sends a leg's statements.
type legRetry struct {
	ok   bool
	p    Purpose
	send func(l *Leg) error
}

// retryLeg sends leg l's statements again on a new connection to its node,
// avoiding the backend of the one that failed with err before the answer
// of its next statement began (at most maxRetries times, see mayRetry):
// the statements whose answers were read are not sent again. It returns
// nil once they are sent, else the error for the client.
func (e *Engine) retryLeg(l *Leg, r legRetry, err error) error {
	for e.again(l.BC, err, r.ok && l.BC != e.Conns.Pinned(), l.tries) {
		l.tries++
		l.observe(true)
		bc, aerr := e.Conns.Acquire(e.Nodes[l.Route.Node], r.p|Retry)
		if aerr != nil {
			l.gone, l.finished = true, true
			return aerr
		}
		route := l.Route
		if l.done > 0 {
			// The answers to its first statements were relayed: the
			// others run again.
			route = &router.Route{Node: route.Node, SubTables: route.SubTables[l.done:], SQL: route.SQL[l.done:]}
			if l.Route.Params != nil {
				route.Params = l.Route.Params[l.done:]
			}
		}
		*l = Leg{BC: bc, Route: route, tries: l.tries}
		l.sent()
		if err = r.send(l); err == nil {
			return nil
		}
		err = sendLost(l, err)
	}
	return err
}

// sendLost is the error of a leg whose statements could not be sent: a
// network error as its connection's loss; the server's or keyshard's own
// refusals as they are.
func sendLost(l *Leg, err error) error {
	var me *mysql.MyError
	var be *backend.Error
	var ee *Error
	if errors.As(err, &me) || errors.As(err, &be) || errors.As(err, &ee) {
		return err
	}
	l.BC.MarkLost()
	return &backend.Error{Kind: backend.KindLost, Node: l.BC.Node(), Addr: l.BC.Addr(), Msg: "sending statement", Err: err}
}

// next reports whether more answers follow on the leg after one that ended
// with status.
func (l *Leg) next(status uint16) bool {
	if status&wire.StatusMoreResultsExists != 0 {
		return true
	}
	if l.Pipelined && l.done < len(l.Route.SQL) {
		// The next command's answer starts its own packet sequence.
		l.BC.Packets().Seq = 1
		return true
	}
	return false
}

// ended records that one statement's answer on the leg ended with status;
// it reports whether more answers follow.
func (l *Leg) ended(status uint16) bool {
	l.done++
	more := l.next(status)
	l.finished = !more
	return more
}

// first reads the first packet of the leg's next answer (never empty).
func (l *Leg) first(t Tracer) ([]byte, error) {
	p, err := readAnswer(l.BC) // several nodes' progress reports cannot make one: dropped
	if err != nil {
		return nil, lostConn(l.BC, err)
	}
	if len(p) == 0 {
		return nil, lostConn(l.BC, wire.ErrMalformed)
	}
	t.FirstByte()
	return p, nil
}

// sub names the sub-table of the leg's current statement.
func (l *Leg) sub() string {
	if l.done < len(l.Route.SubTables) {
		return l.Route.SubTables[l.done]
	}
	return "node " + l.BC.Node()
}

// where names the leg's node and the sub-table of its current statement.
func (l *Leg) where() string {
	if l.done < len(l.Route.SubTables) {
		return "keyshard: node " + l.BC.Node() + " " + l.Route.SubTables[l.done]
	}
	return "keyshard: node " + l.BC.Node()
}

// legError names the node and sub-table of a backend error; the errno and
// SQLSTATE stay the backend's.
func legError(l *Leg, e *mysql.MyError) *mysql.MyError {
	l.failed = true
	return &mysql.MyError{Code: e.Code, State: e.State, Message: l.where() + ": " + e.Message}
}

// legFailed is an error of keyshard's own about a leg's answer.
func legFailed(l *Leg, msg string) *mysql.MyError {
	l.failed = true
	return &mysql.MyError{Code: mysql.ER_UNKNOWN_ERROR, State: mysql.DEFAULT_MYSQL_STATE, Message: l.where() + " " + msg}
}

// sendQuery sends a merge leg's statement as a COM_QUERY.
func sendQuery(l *Leg) error {
	bp := l.BC.Packets()
	if err := bp.WriteCommandString(mysql.COM_QUERY, l.Route.SQL[0]); err != nil {
		return err
	}
	return bp.Flush()
}

// sendBatch sends a fan-out leg's statements as one multi-statement batch
// (the connection is switched to multi-statements for it; its autocommit
// stays as Acquire set it: on for a leg run outside the session's
// transaction, see AutocommitOn and NoTx).
func (e *Engine) sendBatch(l *Leg) error {
	if len(l.Route.SQL) > 1 {
		if err := l.BC.Sync(e.Vars.DB, true, l.BC.Autocommit(), e.Vars.State); err != nil {
			return err
		}
	}
	bp := l.BC.Packets()
	if err := bp.WriteCommandString(mysql.COM_QUERY, strings.Join(l.Route.SQL, ";")); err != nil {
		return err
	}
	return bp.Flush()
}

// fanOut runs rt's statements on one connection per node: send writes a
// leg's statements (and flushes them) and is called for every leg before
// any answer is read, so the nodes work in parallel and the latency is the
// slowest node's. The answers are relayed as one result set (isSelect:
// rows in sub-table order, never buffered) or summed into one OK.
func (e *Engine) fanOut(rt *router.Routing, kind router.Kind, read bool, send func(l *Leg) error) error {
	isSelect := kind == router.KindSelect
	p := Write
	switch {
	case read:
		p = Read
	case kind == router.KindDDL:
		// It commits implicitly: the session's transaction was committed
		// first (Lease.CommitImplicit), and it runs outside any.
		p = NoTx
	}
	if p != NoTx && len(rt.Routes) > 1 && e.Conns.Holding() && !e.Conns.Spans() && (read || !e.Conns.OpenTx()) {
		// (A write with autocommit off and no transaction yet opens one
		// over its nodes, in transaction_mode xa: OpenTx.)
		if !read && e.Conns.Deferred() {
			return e.Fail(crossNode("keyshard: the first statement of a transaction must touch one node (the transaction opens "+
				"there); this one would touch nodes %s and %s (the transaction is still open)", rt.Routes[0].Node, rt.Routes[1].Node))
		}
		if !read || e.Conns.TxOpen() {
			where, after := holding(e.Conns.Status())
			return e.Fail(crossNode("keyshard: %s this statement would touch nodes %s and %s; "+
				"a transaction can touch one node only%s", where, rt.Routes[0].Node, rt.Routes[1].Node, after))
		}
		p |= AutocommitOn // autocommit off, no transaction open yet: a read as of now
	}
	// A read outside a transaction: a leg whose connection fails runs
	// again on another.
	again := legRetry{ok: isSelect && read && !e.Conns.TxOpen(), p: p, send: send}
	legs := make([]Leg, 0, len(rt.Routes))
	for i := range rt.Routes {
		r := &rt.Routes[i]
		bc, err := e.Conns.Acquire(e.Nodes[r.Node], p)
		if err != nil {
			if len(legs) == 0 {
				e.Conns.UndoOpenTx() // nothing opened it: the next statement's, as before
			}
			e.releaseLegs(legs)
			return e.Fail(err)
		}
		legs = append(legs, Leg{BC: bc, Route: r})
	}
	var w *atomicWrite
	if isWrite(kind) && !e.Conns.Holding() && (len(legs) > 1 && e.XA != nil || len(legs) == 1 && len(legs[0].Route.SQL) > 1) {
		// All or nothing: an XA transaction over the nodes, or a local
		// one around one node's sub-table statements.
		w = &atomicWrite{e: e, legs: legs}
		if err := w.begin(); err != nil {
			e.releaseLegs(legs)
			return e.Fail(err)
		}
	}
	// Inside a transaction, a write over several sub-tables is rolled back
	// as a whole when it fails (as the server rolls back a statement):
	// a savepoint on each leg first.
	savepoint := w == nil && isWrite(kind) && e.Conns.Holding() && (len(legs) > 1 || len(legs[0].Route.SQL) > 1)
	if savepoint {
		if err := execAll(legConns(legs), "", func(int) string { return "SAVEPOINT ks_stmt" }); err != nil {
			e.releaseLegs(legs)
			return e.Fail(err)
		}
	}
	if err := e.sendLegs(legs, send, false, again); err != nil {
		w.abort()
		e.releaseLegs(legs)
		return e.Fail(err)
	}
	if w != nil {
		w.sent = true
		if err := w.queueEnd(); err != nil {
			w.abort()
			e.releaseLegs(legs)
			return e.Fail(err)
		}
	}
	e.Trace.Running(legs[0].BC)
	var err error
	switch {
	case isSelect:
		err = e.relayScatter(legs, again)
	case w != nil:
		var sum okSum
		if sum, err = e.gatherOKs(legs, rt, true); err == nil {
			err = w.commit()
		} else {
			w.abort()
		}
		if err == nil {
			err = e.answerOK(sum)
		} else {
			err = e.failRelay(err)
		}
	case savepoint:
		var sum okSum
		if sum, err = e.gatherOKs(legs, rt, true); err == nil {
			err = e.answerOK(sum)
		} else {
			var back []*backend.Conn
			for i := range legs {
				if !legs[i].BC.Broken() && legs[i].finished {
					back = append(back, legs[i].BC)
				}
			}
			// After a deadlock the transaction is gone on that node: the
			// session rolls it back everywhere (see RollsBackTx).
			if RollsBackTx(err) {
				back = nil
			}
			if rerr := execAll(back, "", func(int) string { return "ROLLBACK TO SAVEPOINT ks_stmt" }); rerr != nil {
				for _, bc := range back {
					bc.MarkBroken() // the transaction is lost with it: the session ends
				}
			}
			err = e.failRelay(err)
		}
	default:
		err = e.collectOKs(legs, rt)
	}
	e.Trace.Running(nil)
	// A connection whose answer was not read to the end must not go back
	// to the pool: the next user would read the rest.
	for i := range legs {
		if !legs[i].finished {
			legs[i].BC.MarkBroken()
		}
	}
	e.releaseLegs(legs)
	return err
}

// legConns are the legs' connections.
func legConns(legs []Leg) []*backend.Conn {
	out := make([]*backend.Conn, len(legs))
	for i := range legs {
		out[i] = legs[i].BC
	}
	return out
}

// releaseLegs releases each leg's connection once: a merge's legs on one
// node inside a transaction share theirs, next to each other.
func (e *Engine) releaseLegs(legs []Leg) {
	for i := range legs {
		if legs[i].gone {
			continue // counted when it went (retryLeg)
		}
		e.Diag.leg(&legs[i])
		legs[i].observe(legs[i].BC.Broken())
		if i > 0 && legs[i].BC == legs[i-1].BC {
			continue
		}
		e.Conns.Release(legs[i].BC)
	}
}

// sendLegs sends every leg its statements. A leg whose connection fails
// is sent again on another (r, see retryLeg). On an error the legs already
// sent are marked broken (their answers would reach the pool's next user)
// and the error is returned for the client: a statement refused before
// anything was sent (state sync, PREPARE) as the server gave it (named
// by node and sub-table when name), a lost connection as such. The
// caller releases the legs.
func (e *Engine) sendLegs(legs []Leg, send func(l *Leg) error, name bool, r legRetry) error {
	for i := range legs {
		l := &legs[i]
		if l.queued {
			continue // sent once the leg before it on its connection is read (see merged)
		}
		l.sent()
		err := send(l)
		if err == nil {
			continue
		}
		if r.ok {
			if err = e.retryLeg(l, r, sendLost(l, err)); err == nil {
				continue
			}
		}
		var me *mysql.MyError
		if errors.As(err, &me) {
			if name {
				err = legError(l, me)
			}
			if !l.BC.Broken() && i == 0 {
				return err
			}
		}
		for j := 0; j <= i; j++ {
			legs[j].BC.MarkBroken()
		}
		var be *backend.Error
		var ee *Error
		if !errors.As(err, &be) && !errors.As(err, &ee) && me == nil {
			err = &backend.Error{Kind: backend.KindLost, Node: l.BC.Node(), Addr: l.BC.Addr(), Msg: "sending statement", Err: err}
		}
		return err
	}
	return nil
}

// relayScatter relays the result sets of every leg as one: the first
// result's column definitions, then the rows of each, then one end packet.
//
// A leg whose connection fails before the first packet of a statement's
// answer runs that statement and the leg's next ones again on another
// connection (r, see retryLeg): the client has none of their rows yet,
// and gets them once, as if nothing happened.
func (e *Engine) relayScatter(legs []Leg, r legRetry) error {
	var ncols uint64
	started := false
	var warnings uint16
	var rows uint64
	var failed *mysql.MyError
	for i := range legs {
		l := &legs[i]
		bp := l.BC.Packets()
		if failed != nil {
			// Not worth draining: the connection is closed instead.
			l.BC.MarkBroken()
			continue
		}
		for more := true; more; {
			p, err := l.first(e.Trace)
			if err == nil && p[0] == wire.ErrHeader && r.ok && wire.IsGone(p) {
				err = lostConn(l.BC, wire.ParseErr(p)) // the server closes it instead of answering
			}
			if err != nil {
				if r.ok {
					if err = e.retryLeg(l, r, err); err == nil {
						bp = l.BC.Packets()
						continue
					}
				}
				return e.Fail(err)
			}
			switch p[0] {
			case wire.ErrHeader:
				failed = legError(l, wire.ParseErr(p))
				more = false
				l.finished = true
				continue
			case wire.OKHeader:
				// A statement without a result set in a SELECT fan-out.
				ok, _ := wire.ParseOK(p)
				l.BC.SetStatus(ok.Status)
				more = l.ended(ok.Status)
				continue
			}
			if started {
				n, _, perr := wire.ReadLenEncInt(p, 0)
				if perr != nil {
					return e.Fail(lostConn(l.BC, perr))
				}
				if n != ncols {
					failed = legFailed(l, "returned a different number of columns than the other sub-tables")
					l.BC.MarkBroken()
					more = false
					continue
				}
				for range n {
					if _, err := bp.ReadPacket(); err != nil {
						return e.Fail(lostConn(l.BC, err))
					}
				}
				if !l.BC.DeprecateEOF() {
					if _, err := readColsEOF(l.BC); err != nil {
						return e.Fail(err)
					}
				}
			} else {
				if ncols, err = e.relayColumns(l.BC, p); err != nil {
					return e.failRelay(err)
				}
				if !l.BC.DeprecateEOF() {
					if _, err := readColsEOF(l.BC); err != nil {
						return e.Fail(err)
					}
				}
				if err := e.Client.ColsEnd(0, e.Conns.Status()); err != nil {
					return err
				}
				started = true
			}
			end, err := e.copyRows(l.BC, nil)
			rows += end.rows
			if err != nil {
				return e.failRelay(err)
			}
			if end.err != nil {
				failed = legError(l, end.err)
				more = false
				l.finished = true
				continue
			}
			ok, perr := wire.ParseEnd(end.term)
			if perr != nil {
				return e.Fail(lostConn(l.BC, perr))
			}
			l.BC.SetStatus(ok.Status)
			warnings += ok.Warnings
			l.warned(ok.Warnings)
			more = l.ended(ok.Status)
		}
		e.Diag.leg(l)
	}
	e.Last.RowCount = -1
	e.Last.FoundRows = rows
	e.Trace.Sent(rows, 0)
	if failed != nil {
		return e.Fail(failed)
	}
	if !started {
		return e.Fail(Errorf(KindNoResult, "keyshard: the fan-out returned no result set"))
	}
	return e.Client.ResultEnd(warnings, e.Conns.Status())
}

// failRelay reports an error from a relay helper: a client error as it is
// (nothing more can be written), a backend one to the client.
func (e *Engine) failRelay(err error) error {
	var ce *ClientError
	if errors.As(err, &ce) {
		return err
	}
	return e.Fail(err)
}

// collectOKs reads the OK packets of a write fan-out and answers with one
// OK: affected rows summed, the insert id of the statement holding the
// client's first row, warnings summed. The first error (naming its node and
// sub-table) is reported instead, with the sub-tables the statement
// changed and those it did not: the others may have been applied, as with
// any multi-statement batch (for DDL, see the DDL check in the proxy).
func (e *Engine) collectOKs(legs []Leg, rt *router.Routing) error {
	sum, err := e.gatherOKs(legs, rt, false)
	if err != nil {
		return e.failRelay(err)
	}
	return e.answerOK(sum)
}
