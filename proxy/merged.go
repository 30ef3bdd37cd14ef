package proxy

import (
	"context"
	"errors"
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
func (s *Session) merged(rt *router.Routing, binary, read bool, send func(l *leg) error) error {
	if s.txBegin != "" || s.inTx() {
		return s.fail(newErr(errNotSupported, "keyshard: this SELECT reads %d sub-tables of sharded table %s and merges them, "+
			"which runs on a connection per sub-table and so cannot see an open transaction; run it outside the transaction "+
			"or add the shard key to WHERE (the transaction is still open)", rt.Targets(), rt.Spec.Table))
	}
	for i := range rt.Routes {
		r := &rt.Routes[i]
		if max := s.snap.nodes[r.Node].Master.Options().MaxConns; len(r.SQL) > max {
			return s.fail(newErr(errNotSupported, "keyshard: merging %d sub-tables of sharded table %s on node %s needs a connection per sub-table, "+
				"more than its max_conns_limit %d; raise max_conns_limit or add the shard key to WHERE", len(r.SQL), rt.Spec.Table, r.Node, max))
		}
	}
	legs := make([]leg, 0, rt.Targets())
	routes := make([]router.Route, 0, rt.Targets())
	releaseAll := func() {
		for i := range legs {
			s.release(legs[i].bc)
		}
	}
	usedPinned := false
	for i := range rt.Routes {
		r := &rt.Routes[i]
		n := s.snap.nodes[r.Node]
		for j := range r.SQL {
			var bc *backend.Conn
			var err error
			if s.pinned != nil && s.pinned.Pool() == n.Master && !usedPinned {
				bc, usedPinned = s.pinned, true
				s.usedNode(bc.Node())
			} else {
				var p *backend.Pool
				if p, err = s.readPool(n, read, nil); p == nil && err == nil {
					p = n.Master
				}
				if err == nil {
					bc, err = s.readConn(p)
				}
			}
			if err != nil {
				releaseAll()
				return s.fail(err)
			}
			one := router.Route{Node: r.Node, SubTables: r.SubTables[j : j+1], SQL: r.SQL[j : j+1]}
			if r.Params != nil {
				one.Params = r.Params[j : j+1]
			}
			routes = append(routes, one)
			legs = append(legs, leg{bc: bc, route: &routes[len(routes)-1]})
		}
	}
	if err := s.sendLegs(legs, send, true); err != nil {
		for i := range legs {
			// Cancel the statements sent (their connections are broken);
			// the others go back to the pool.
			legs[i].finished = !legs[i].bc.Broken()
		}
		s.cancelLegs(legs)
		releaseAll()
		return s.fail(err)
	}
	s.cur.Store(legs[0].bc)
	err := s.relayMerged(rt, legs, binary)
	s.cur.Store(nil)
	// A leg not read to the end is cancelled, and its connection closed.
	s.cancelLegs(legs)
	releaseAll()
	var ce *clientError
	if errors.As(err, &ce) {
		return errCloseAfterReply
	}
	return err
}

// cancelLegs stops the statements of legs whose answer was not read to the
// end: KILL QUERY on the backend (in the background, on a connection of
// its own) and the connection closed rather than reused.
func (s *Session) cancelLegs(legs []leg) {
	for i := range legs {
		l := &legs[i]
		if l.finished {
			continue
		}
		l.bc.MarkBroken()
		pool, id := l.bc.Pool(), l.bc.ThreadID()
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
	l        *leg
	warnings *uint16
}

func (src *legSource) Next() ([]byte, error) {
	l := src.l
	if l.finished {
		return nil, nil
	}
	p, err := l.bc.Packets().ReadPacket()
	if err != nil {
		return nil, lostLeg(l, err)
	}
	switch {
	case len(p) > 0 && p[0] == wire.ErrHeader:
		l.finished = true
		err := legError(l, wire.ParseErr(p))
		l.done++
		return nil, err
	case wire.IsEOF(p):
		ok, perr := wire.ParseOK(p)
		if perr != nil {
			return nil, lostLeg(l, perr)
		}
		l.bc.Status = ok.Status
		*src.warnings += ok.Warnings
		l.done++
		l.finished = true
		if ok.Status&wire.StatusMoreResultsExists != 0 {
			l.bc.MarkBroken() // not ours to read
		}
		return nil, nil
	}
	return p, nil
}

// relayMerged reads every leg's column definitions, sends the client the
// visible ones, merges the rows and ends the result.
func (s *Session) relayMerged(rt *router.Routing, legs []leg, binary bool) error {
	spec := rt.Spec
	var cols []merge.Column
	var defs [][]byte
	var failed error
	for i := range legs {
		l := &legs[i]
		if failed != nil {
			break
		}
		p, err := l.first()
		if err != nil {
			return s.fail(err)
		}
		s.firstByte()
		switch p[0] {
		case wire.ErrHeader:
			l.finished = true
			failed = legError(l, wire.ParseErr(p))
			continue
		case wire.OKHeader:
			l.finished = true
			failed = &mysql.MyError{Code: mysql.ER_UNKNOWN_ERROR, State: mysql.DEFAULT_MYSQL_STATE,
				Message: "keyshard: node " + l.bc.Node() + " " + l.route.SubTables[0] + " returned no result set"}
			continue
		}
		n, _, perr := wire.ReadLenEncInt(p, 0)
		if perr != nil {
			return s.fail(lostLeg(l, perr))
		}
		if i > 0 && int(n) != len(cols) {
			failed = &mysql.MyError{Code: mysql.ER_UNKNOWN_ERROR, State: mysql.DEFAULT_MYSQL_STATE,
				Message: "keyshard: node " + l.bc.Node() + " " + l.route.SubTables[0] + " returned a different number of columns than the other sub-tables"}
			continue
		}
		for c := range int(n) {
			cp, err := l.bc.Packets().ReadPacket()
			if err != nil {
				return s.fail(lostLeg(l, err))
			}
			col, perr := merge.ParseColumn(cp)
			if perr != nil {
				return s.fail(lostLeg(l, perr))
			}
			if i == 0 {
				cols = append(cols, col)
				if c < int(n)-spec.Hidden {
					defs = append(defs, append([]byte(nil), cp...))
				}
			} else if col.Type != cols[c].Type && failed == nil {
				failed = &mysql.MyError{Code: mysql.ER_UNKNOWN_ERROR, State: mysql.DEFAULT_MYSQL_STATE,
					Message: "keyshard: node " + l.bc.Node() + " " + l.route.SubTables[0] + " returned a column of another type than the other sub-tables (is the table's definition the same everywhere?)"}
			}
		}
	}
	if failed != nil {
		s.writeError(failed)
		return failed
	}
	m, err := merge.New(merge.Config{Spec: spec, Offset: rt.Offset, Count: rt.Count, Args: rt.Args, Cols: cols,
		Binary: binary, MaxRows: s.snap.cfg.MaxMergeRows})
	if err != nil {
		return s.fail(err)
	}
	clientEOF := s.caps&mysql.CLIENT_DEPRECATE_EOF == 0
	s.buf = mysql.AppendLengthEncodedInteger(s.buf[:0], uint64(len(defs)))
	if err := s.pkt.WritePacket(s.buf); err != nil {
		return &clientError{err}
	}
	for _, d := range defs {
		if err := s.pkt.WritePacket(d); err != nil {
			return &clientError{err}
		}
	}
	if clientEOF {
		s.buf = wire.AppendEOF(s.buf[:0], 0, s.status())
		if err := s.pkt.WritePacket(s.buf); err != nil {
			return &clientError{err}
		}
	}
	var warnings uint16
	srcs := make([]merge.Source, len(legs))
	for i := range legs {
		srcs[i] = &legSource{l: &legs[i], warnings: &warnings}
	}
	var clientErr error
	done, err := m.Run(srcs, func(row []byte) error {
		if err := s.pkt.WritePacket(row); err != nil {
			clientErr = &clientError{err}
			return clientErr
		}
		return nil
	})
	s.rowCount = -1
	s.foundRows = m.Sent()
	s.tr.rows += m.Sent()
	if clientErr != nil {
		return clientErr
	}
	if err != nil {
		var be *backend.Error
		if errors.As(err, &be) {
			return s.fail(err)
		}
		s.writeError(err)
		return err
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
	s.appendResultEnd(warnings)
	if err := s.pkt.WritePacket(s.buf); err != nil {
		return &clientError{err}
	}
	return nil
}
