package engine

import (
	"errors"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/proxy/join"
	"github.com/keyshard/keyshard/proxy/merge"
	"github.com/keyshard/keyshard/router"
)

// Join runs a join across shards (package join) and sends its result
// set: its statements run as text on connections of their own, read-only.
// binary: the client reads binary-protocol rows (a prepared statement).
func (e *Engine) Join(pl join.Planner, jp *router.JoinPlan, lits []router.Literal, binary bool) error {
	acOn := e.Conns.Holding() && !e.Conns.TxOpen() // autocommit off, no transaction open yet: a read as of now
	if e.Conns.Holding() && !acOn {
		where, after := holding(e.Conns.Status())
		return e.Fail(Errorf(KindNotSupported, "keyshard: %s, the cross-shard join %s cannot run: the proxy joins its tables "+
			"on connections of their own, outside the transaction; run it with autocommit on and outside a transaction%s", where, jp.Name, after))
	}
	env := &joinEnv{e: e, p: Extra | Read}
	if acOn {
		env.p |= AutocommitOn
	}
	err := join.Run(env, pl, join.Config{Plan: jp, Lits: router.TextLiterals(lits), Binary: binary, MaxRows: e.MaxMergeRows})
	for _, r := range env.open {
		r.Close()
	}
	switch {
	case err == nil:
		return nil
	case env.clientErr != nil && errors.Is(err, env.clientErr):
		return err
	}
	return e.Fail(err)
}

// joinEnv is join.Env over the engine.
type joinEnv struct {
	e         *Engine
	p         Purpose
	open      []*joinRows
	warnings  uint16
	clientErr error
}

func (j *joinEnv) Query(node, sql string) (join.Rows, error) {
	e := j.e
	n := e.Nodes[node]
	if n == nil {
		return nil, Errorf(KindNotSupported, "keyshard: a join's statement names node %s, which is not configured", node)
	}
	bc, err := e.Conns.Acquire(n, j.p)
	if err != nil {
		return nil, err
	}
	r := &joinRows{env: j, bc: bc}
	j.open = append(j.open, r)
	if err := send(bc, nil, &sql); err != nil {
		r.finished = true
		return nil, err
	}
	e.Trace.Running(bc)
	p, err := readAnswer(bc)
	if err != nil {
		return nil, lostConn(bc, err)
	}
	switch {
	case len(p) == 0:
		return nil, lostConn(bc, wire.ErrMalformed)
	case p[0] == wire.ErrHeader:
		r.finished = true
		me := wire.ParseErr(p)
		return nil, &mysql.MyError{Code: me.Code, State: me.State, Message: "keyshard: node " + node + ": " + me.Message}
	case p[0] == wire.OKHeader:
		r.finished = true
		return nil, Errorf(KindNotSupported, "keyshard: node %s: a join's statement returned no result set", node)
	}
	cnt, _, perr := wire.ReadLenEncInt(p, 0)
	if perr != nil {
		return nil, lostConn(bc, perr)
	}
	for range cnt {
		cp, err := bc.Packets().ReadPacket()
		if err != nil {
			return nil, lostConn(bc, err)
		}
		col, perr := merge.ParseColumn(cp, bc.ExtTypeInfo())
		if perr != nil {
			return nil, lostConn(bc, perr)
		}
		r.defs = append(r.defs, append([]byte(nil), cp...))
		r.cols = append(r.cols, col)
	}
	if !bc.DeprecateEOF() {
		if _, err := readColsEOF(bc); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (j *joinEnv) Columns(defs [][]byte) error {
	c := j.e.Client
	var count [9]byte
	if err := c.Packet(mysql.AppendLengthEncodedInteger(count[:0], uint64(len(defs)))); err != nil {
		j.clientErr = err
		return err
	}
	for _, d := range defs {
		if err := c.Packet(d); err != nil {
			j.clientErr = err
			return err
		}
	}
	if err := c.ColsEnd(0, j.e.Conns.Status()); err != nil {
		j.clientErr = err
		return err
	}
	return nil
}

func (j *joinEnv) Row(p []byte) error {
	if err := j.e.Client.Packet(p); err != nil {
		j.clientErr = err
		return err
	}
	return nil
}

func (j *joinEnv) End(rows uint64) error {
	e := j.e
	e.Last.RowCount = -1
	e.Last.FoundRows = rows
	e.Trace.Sent(rows, 0)
	if err := e.Client.ResultEnd(j.warnings, e.Conns.Status()); err != nil {
		j.clientErr = err
		return err
	}
	return nil
}

// joinRows is one statement's answer on its own connection.
type joinRows struct {
	env      *joinEnv
	bc       *backend.Conn
	defs     [][]byte
	cols     []merge.Column
	finished bool // the answer was read to its end
	closed   bool
}

func (r *joinRows) Defs() [][]byte       { return r.defs }
func (r *joinRows) Cols() []merge.Column { return r.cols }

func (r *joinRows) Next() ([]byte, error) {
	if r.finished {
		return nil, nil
	}
	p, err := r.bc.Packets().ReadPacket()
	if err != nil {
		return nil, lostConn(r.bc, err)
	}
	switch {
	case len(p) > 0 && p[0] == wire.ErrHeader:
		r.finished = true
		me := wire.ParseErr(p)
		return nil, &mysql.MyError{Code: me.Code, State: me.State, Message: "keyshard: node " + r.bc.Node() + ": " + me.Message}
	case wire.IsEOF(p):
		ok, perr := wire.ParseEnd(p)
		if perr != nil {
			return nil, lostConn(r.bc, perr)
		}
		r.bc.SetStatus(ok.Status)
		r.env.warnings += ok.Warnings
		r.finished = true
		if ok.Status&wire.StatusMoreResultsExists != 0 {
			r.bc.MarkBroken()
		}
		return nil, nil
	}
	return p, nil
}

// Close gives the connection back; one whose answer was not read to the
// end is cancelled and closed (cancelLegs).
func (r *joinRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	e := r.env.e
	e.Trace.Running(nil)
	legs := []Leg{{BC: r.bc, finished: r.finished}}
	cancelLegs(legs)
	e.Conns.Release(r.bc)
}
