package engine

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/proxy/merge"
	"github.com/keyshard/keyshard/router"
)

// merged runs a SELECT whose sub-table results the proxy merges
// (rt.Spec): one connection per sub-table, every statement sent before any
// answer is read, so all run at once; then a streaming merge (see package
// merge). send writes (and flushes) a leg's statement: text or
// COM_STMT_EXECUTE; binary says the rows come in the binary protocol.
//
// read says the statement is read-only (router.ReadOnly): its legs may then
// read from the nodes' replicas.
func (e *Engine) merged(rt *router.Routing, binary, read bool, send func(l *Leg) error) error {
	acOn := e.Conns.Holding() && read && !e.Conns.TxOpen() // autocommit off, no transaction open yet: a read as of now
	// Inside a transaction over several nodes, the legs run on the
	// transaction's own connections, one per node: a node's sub-tables
	// one after the other on it (all but the last read ahead, see
	// readAhead), so the merge sees the transaction's writes.
	inTx := e.Conns.Holding() && e.Conns.Spans() && !acOn
	if e.Conns.Holding() && !acOn && !inTx {
		where, after := holding(e.Conns.Status())
		return e.Fail(Errorf(KindNotSupported, "keyshard: %s, this SELECT cannot read %d sub-tables of sharded table %s and merge them: "+
			"that runs on a connection per sub-table, each of which would be a transaction of its own; run it with autocommit on "+
			"and outside a transaction, or add the shard key to WHERE%s", where, rt.Targets(), rt.Spec.Table, after))
	}
	for i := range rt.Routes {
		r := &rt.Routes[i]
		if max := e.Nodes[r.Node].Master.Options().MaxConns; len(r.SQL) > max && !inTx {
			return e.Fail(Errorf(KindNotSupported, "keyshard: merging %d sub-tables of sharded table %s on node %s needs a connection per sub-table, "+
				"more than its max_conns_limit %d; raise max_conns_limit or add the shard key to WHERE", len(r.SQL), rt.Spec.Table, r.Node, max))
		}
	}
	legs := make([]Leg, 0, rt.Targets())
	routes := make([]router.Route, 0, rt.Targets())
	usedPinned := false
	p := Extra
	if read {
		p |= Read
	}
	if acOn {
		p |= AutocommitOn
	}
	if inTx {
		p = Write
	}
	for i := range rt.Routes {
		r := &rt.Routes[i]
		n := e.Nodes[r.Node]
		var txConn *backend.Conn // inTx: the node's connection in the transaction
		for j := range r.SQL {
			var bc *backend.Conn
			var err error
			if txConn != nil {
				bc = txConn
			} else if pinned := e.Conns.Pinned(); pinned != nil && pinned.Pool() == n.Master && !usedPinned && !acOn {
				bc, usedPinned = pinned, true
				e.Trace.WaitDone(bc)
			} else if bc, err = e.Conns.Acquire(n, p); err != nil {
				e.releaseLegs(legs)
				return e.Fail(err)
			}
			if inTx {
				txConn = bc
			}
			one := router.Route{Node: r.Node, SubTables: r.SubTables[j : j+1], SQL: r.SQL[j : j+1]}
			if r.Params != nil {
				one.Params = r.Params[j : j+1]
			}
			routes = append(routes, one)
			legs = append(legs, Leg{BC: bc, Route: &routes[len(routes)-1], queued: j > 0 && inTx})
		}
	}
	// A read outside a transaction: a leg whose connection fails before
	// its answer runs again on another (see retryLeg).
	again := legRetry{ok: read && !inTx, p: p, send: send}
	if err := e.sendLegs(legs, send, true, again); err != nil {
		for i := range legs {
			// Cancel the statements sent (their connections are broken);
			// the others go back to the pool.
			legs[i].finished = legs[i].gone || !legs[i].BC.Broken()
		}
		cancelLegs(legs)
		e.releaseLegs(legs)
		return e.Fail(err)
	}
	e.Trace.Running(legs[0].BC)
	err := e.relayMerged(rt, legs, binary, send, again)
	e.Trace.Running(nil)
	for i := range legs {
		if inTx && !legs[i].BC.Broken() {
			// The transaction's connections stay: what the merge left
			// unread is read and dropped, not cancelled.
			if serr := skipLeg(&legs[i]); serr != nil {
				legs[i].BC.MarkBroken()
			}
		}
		if legs[i].queued {
			legs[i].finished = true // never sent: nothing to read
		}
	}
	// A leg not read to the end is cancelled, and its connection closed.
	cancelLegs(legs)
	e.releaseLegs(legs)
	return err
}

// cancelLegs stops the statements of legs whose answer was not read to the
// end: KILL QUERY on the backend (in the background, on a connection of
// its own) and the connection closed rather than reused.
func cancelLegs(legs []Leg) {
	for i := range legs {
		l := &legs[i]
		if l.finished {
			continue
		}
		l.BC.MarkBroken()
		pool, id := l.BC.Pool(), l.BC.ThreadID()
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_ = pool.KillQuery(ctx, id)
		}()
		l.finished = true
	}
}

// legSource reads a leg's rows for the merge.
type legSource struct {
	l        *Leg
	warnings *uint16
}

func (src *legSource) Next() ([]byte, error) {
	l := src.l
	if l.ahead != nil {
		if len(l.ahead) == 0 {
			return nil, nil
		}
		p := l.ahead[0]
		l.ahead = l.ahead[1:]
		return p, nil
	}
	if l.finished {
		return nil, nil
	}
	p, err := l.BC.Packets().ReadPacket()
	if err != nil {
		return nil, lostConn(l.BC, err)
	}
	switch {
	case len(p) > 0 && p[0] == wire.ErrHeader:
		l.finished = true
		err := legError(l, wire.ParseErr(p))
		l.done++
		return nil, err
	case wire.IsEOF(p):
		ok, perr := wire.ParseEnd(p)
		if perr != nil {
			return nil, lostConn(l.BC, perr)
		}
		l.BC.SetStatus(ok.Status)
		*src.warnings += ok.Warnings
		l.warned(ok.Warnings)
		l.done++
		l.finished = true
		if ok.Status&wire.StatusMoreResultsExists != 0 {
			l.BC.MarkBroken() // not ours to read
		}
		return nil, nil
	}
	return p, nil
}

// readAhead reads the rest of leg l's rows into memory (l.ahead), so that
// the next statement on its connection can run: a transaction's node
// answers for its sub-tables one after the other. held counts the rows
// read ahead so far, up to limit; failed is an error for the client.
func readAhead(l *Leg, held *int, limit int, table string, warnings *uint16) (failed, err error) {
	src := &legSource{l: l, warnings: warnings}
	ahead := [][]byte{}
	for {
		p, err := src.Next()
		if err != nil {
			var me *mysql.MyError
			if errors.As(err, &me) {
				return me, nil
			}
			return nil, err
		}
		if p == nil {
			l.ahead = ahead
			return nil, nil
		}
		if *held++; *held > limit {
			if err := skipRows(src); err != nil {
				return nil, err
			}
			return &mysql.MyError{Code: mysql.ER_OUT_OF_SORTMEMORY, State: "HY001", Message: "keyshard: merging sharded table " + table +
				" inside a transaction reads the sub-tables of a node one after the other, holding all but the last in memory: " +
				"more than max_merge_rows (" + strconv.Itoa(limit) + ") rows; add the shard key to WHERE, or merge outside the transaction"}, nil
		}
		ahead = append(ahead, append([]byte(nil), p...))
	}
}

// skipRows reads the rest of a leg's rows and drops them.
func skipRows(src *legSource) error {
	for {
		p, err := src.Next()
		var me *mysql.MyError
		if p == nil && (err == nil || errors.As(err, &me)) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// skipLeg reads the rest of the answer of a leg that was sent (its
// columns, if mergeColumns did not, and its rows) and drops it: inside a
// transaction its connection must stay usable, where elsewhere it would be
// closed.
func skipLeg(l *Leg) error {
	if l.finished || l.queued {
		return nil
	}
	if !l.cols {
		p, err := readAnswer(l.BC)
		if err != nil {
			return lostConn(l.BC, err)
		}
		if len(p) == 0 || p[0] == wire.ErrHeader || p[0] == wire.OKHeader {
			l.finished = true
			return nil
		}
		n, _, perr := wire.ReadLenEncInt(p, 0)
		if perr != nil {
			return lostConn(l.BC, perr)
		}
		for range n {
			if _, err := l.BC.Packets().ReadPacket(); err != nil {
				return lostConn(l.BC, err)
			}
		}
		if !l.BC.DeprecateEOF() {
			if _, err := readColsEOF(l.BC); err != nil {
				return err
			}
		}
	}
	var warnings uint16
	return skipRows(&legSource{l: l, warnings: &warnings})
}

// mergeColumns reads every leg's column definitions: the first leg's
// (cols), and the definitions the client sees (defs: without the hidden
// columns the merge added). A leg that answers otherwise, or with other
// columns, is an error for the client (failed); err is a lost backend.
// A queued leg's statement is sent by next once the leg before it, on
// the same connection, is read ahead. A leg whose connection fails before
// its answer runs again on another (r, see retryLeg).
func (e *Engine) mergeColumns(legs []Leg, hidden int, r legRetry, next func(i int) (failed, err error)) (cols []merge.Column, defs [][]byte, failed, err error) {
	for i := range legs {
		l := &legs[i]
		if failed != nil {
			break
		}
		if l.queued {
			if failed, err = next(i); failed != nil || err != nil {
				return nil, nil, failed, err
			}
		}
		p, err := l.first(e.Trace)
		for err != nil || p[0] == wire.ErrHeader && r.ok && wire.IsGone(p) {
			if err == nil {
				err = lostConn(l.BC, wire.ParseErr(p)) // the server closes it instead of answering
			}
			if !r.ok {
				return nil, nil, nil, err
			}
			if err = e.retryLeg(l, r, err); err != nil {
				return nil, nil, nil, err
			}
			p, err = l.first(e.Trace)
		}
		switch p[0] {
		case wire.ErrHeader:
			l.finished = true
			failed = legError(l, wire.ParseErr(p))
			continue
		case wire.OKHeader:
			l.finished = true
			failed = legFailed(l, "returned no result set")
			continue
		}
		n, _, perr := wire.ReadLenEncInt(p, 0)
		if perr != nil {
			return nil, nil, nil, lostConn(l.BC, perr)
		}
		if i > 0 && int(n) != len(cols) {
			failed = legFailed(l, "returned a different number of columns than the other sub-tables")
			// Its definitions are read (and dropped) all the same: the
			// rows follow, which skipLeg may read.
			for range n {
				if _, err := l.BC.Packets().ReadPacket(); err != nil {
					return nil, nil, nil, lostConn(l.BC, err)
				}
			}
			if !l.BC.DeprecateEOF() {
				if _, err := readColsEOF(l.BC); err != nil {
					return nil, nil, nil, err
				}
			}
			l.cols = true
			continue
		}
		for c := range int(n) {
			cp, err := l.BC.Packets().ReadPacket()
			if err != nil {
				return nil, nil, nil, lostConn(l.BC, err)
			}
			col, perr := merge.ParseColumn(cp, l.BC.ExtTypeInfo())
			if perr != nil {
				return nil, nil, nil, lostConn(l.BC, perr)
			}
			if i == 0 {
				cols = append(cols, col)
				if c < int(n)-hidden {
					defs = append(defs, append([]byte(nil), cp...))
				}
			} else if col.Type != cols[c].Type && failed == nil {
				failed = legFailed(l, "returned a column of another type than the other sub-tables (is the table's definition the same everywhere?)")
			}
		}
		if !l.BC.DeprecateEOF() {
			if _, err := readColsEOF(l.BC); err != nil {
				return nil, nil, nil, err
			}
		}
		l.cols = true
	}
	return cols, defs, failed, nil
}

// relayMerged reads every leg's column definitions, sends the client the
// visible ones, merges the rows and ends the result.
func (e *Engine) relayMerged(rt *router.Routing, legs []Leg, binary bool, send func(l *Leg) error, r legRetry) error {
	spec := rt.Spec
	held := 0
	var warnings uint16
	next := func(i int) (failed, err error) {
		if failed, err = readAhead(&legs[i-1], &held, e.MaxMergeRows, spec.Table, &warnings); failed != nil || err != nil {
			return failed, err
		}
		e.Diag.leg(&legs[i-1]) // before its connection runs the next leg's statement
		l := &legs[i]
		l.queued = false
		if err := e.sendLegs(legs[i:i+1], send, true, legRetry{}); err != nil {
			var me *mysql.MyError
			if errors.As(err, &me) {
				l.finished = true
				return me, nil
			}
			return nil, err
		}
		return nil, nil
	}
	cols, defs, failed, err := e.mergeColumns(legs, spec.Hidden, r, next)
	if err != nil {
		return e.Fail(err)
	}
	if failed != nil {
		return e.Fail(failed)
	}
	m, err := merge.New(merge.Config{Spec: spec, Offset: rt.Offset, Count: rt.Count, Args: rt.Args, Cols: cols,
		Binary: binary, MaxRows: e.MaxMergeRows})
	if err != nil {
		return e.Fail(err)
	}
	var count [9]byte
	if err := e.Client.Packet(mysql.AppendLengthEncodedInteger(count[:0], uint64(len(defs)))); err != nil {
		return err
	}
	for _, d := range defs {
		if err := e.Client.Packet(e.colDef(d)); err != nil {
			return err
		}
	}
	if err := e.Client.ColsEnd(0, e.Conns.Status()); err != nil {
		return err
	}
	srcs := make([]merge.Source, len(legs))
	for i := range legs {
		srcs[i] = &legSource{l: &legs[i], warnings: &warnings}
	}
	var clientErr error
	done, err := m.Run(srcs, func(row []byte) error {
		if err := e.Client.Packet(row); err != nil {
			clientErr = err
			return err
		}
		return nil
	})
	e.Last.RowCount = -1
	e.Last.FoundRows = m.Sent()
	e.Trace.Sent(m.Sent(), 0)
	if clientErr != nil {
		return clientErr
	}
	if err != nil {
		return e.Fail(err)
	}
	if !done && !spec.Grouped && rt.Count >= 0 {
		// Each sub-table sends at most offset+count rows: reading the rest
		// is cheaper than a new connection.
		for i := range legs {
			src := srcs[i].(*legSource)
			for !legs[i].finished {
				if _, err := src.Next(); err != nil {
					break
				}
			}
		}
	}
	return e.Client.ResultEnd(warnings, e.Conns.Status())
}
