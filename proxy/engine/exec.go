package engine

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
)

// Exec is one execution of a prepared statement on one node.
type Exec struct {
	Read   bool // read-only: may run on a replica (never with a cursor)
	Cursor bool // the client asked for a cursor
	// Retry: a plain read (router.Retriable), which runs again on another
	// connection when its first fails before any answer (see Forward).
	Retry bool
	// Send buffers the execution on bc (preparing the statement there
	// first if needed). A *mysql.MyError means the backend refused the
	// PREPARE and bc is usable.
	Send func(bc *backend.Conn) error
	// Cols is the column count the client last saw (nil for a statement
	// without columns), see Relay.
	Cols *int
	// Call is set for a CALL: its answer is adapted to clients without
	// multi-results (see relayCall).
	Call *Call
	// FoundRows: SQL_CALC_FOUND_ROWS, read back after the execution.
	FoundRows bool
	// Opened is called when the execution opened a cursor on bc (which
	// then stays pinned to the session until the cursor closes).
	Opened func(bc *backend.Conn)
}

// Execute runs x on node n (nil: the pinned connection, else the default
// node) and relays its answer. A read (x.Retry) whose connection fails
// before any answer, not pinned, runs again on another one as Forward's
// do; the statement is prepared there first.
func (e *Engine) Execute(n *backend.Node, x Exec) error {
	if pinned := e.Conns.Pinned(); x.Cursor && pinned != nil && n != nil && pinned.Pool() != n.Master {
		return e.Fail(Errorf(KindNotSupported, "keyshard: a cursor on node %s while the session is pinned to node %s is not supported", n.Name, pinned.Node()))
	}
	p := Write
	if x.Read && !x.Cursor {
		p = Read
	}
	retriable := x.Retry && !x.Cursor && e.Conns.Pinned() == nil && !e.Conns.Deferred()
	for attempt := 0; ; attempt++ {
		bc, err := e.Conns.Acquire(n, p)
		if err != nil {
			return e.Fail(err)
		}
		start := time.Now()
		if err = x.Send(bc); err != nil {
			var me *mysql.MyError
			if errors.As(err, &me) && !bc.Broken() {
				e.Conns.Release(bc)
				return e.Fail(err)
			}
			if backend.KindOf(err) == 0 {
				err = sendErr(bc, err)
			}
		} else if err = bc.Packets().Flush(); err != nil {
			err = sendErr(bc, err)
		}
		var res Result
		if err == nil {
			e.Trace.Running(bc)
			if x.Call != nil && !e.Client.MultiResults() {
				res, err = e.relayCall(bc, x.Call)
			} else {
				res, err = e.Relay(bc, false, x.Cols)
			}
			e.Trace.Running(nil)
			bc.Pool().Observe(time.Since(start), err != nil || res.Err != nil)
		}
		if err != nil {
			if e.again(bc, err, retriable && !res.Started, attempt) {
				p |= Retry
				continue
			}
			return e.Lost(bc, err)
		}
		if x.Cursor && res.Err == nil && bc.Status&mysql.SERVER_STATUS_CURSOR_EXISTS != 0 {
			x.Opened(bc)
		} else if x.FoundRows && res.ResultSets > 0 {
			e.readFoundRows(bc)
		}
		e.Conns.Release(bc)
		if res.Err != nil {
			return res.Err
		}
		return nil
	}
}

// Fetch relays COM_STMT_FETCH p to bc, which holds the statement's
// cursor. closed is called when the cursor is gone (the server closed it
// after its last row or an error, or the connection failed), before bc is
// released or discarded.
func (e *Engine) Fetch(bc *backend.Conn, p []byte, closed func()) error {
	if err := send(bc, p, nil); err != nil {
		closed()
		return e.Lost(bc, err)
	}
	e.Trace.Running(bc)
	res, err := e.Relay(bc, true, nil)
	e.Trace.Running(nil)
	if err != nil {
		closed()
		return e.Lost(bc, err)
	}
	if res.Err != nil || bc.Status&mysql.SERVER_STATUS_LAST_ROW_SEND != 0 {
		closed()
		e.Conns.Release(bc)
	}
	if res.Err != nil {
		return res.Err
	}
	return nil
}

// Prepare prepares text on node n (nil: the pinned connection, else the
// default node; read: a replica may serve) under the backend cache key
// key, and relays the answer to the client with statement id id (the
// client's, not the backend's). It returns the backend statement (its
// parameter and column counts), or the error the client was sent.
//
// A PREPARE changes nothing: one whose connection fails before the
// client got anything, not pinned, is sent again on another connection,
// avoiding that backend (as Forward's reads).
func (e *Engine) Prepare(n *backend.Node, read bool, key, text string, ref *backend.StmtRef, id uint32) (*backend.Stmt, error) {
	p := Meta
	if read {
		p |= Read
	}
	for attempt := 0; ; attempt++ {
		bc, err := e.Conns.Acquire(n, p)
		if err != nil {
			return nil, e.Fail(err)
		}
		i, nparams, ncols := 0, 0, 0
		status := e.Conns.Status() &^ PerStatementStatus
		e.Trace.Running(bc)
		bs, err := bc.Prepare(key, text, ref, func(d []byte) error {
			if i == 0 {
				nparams = int(binary.LittleEndian.Uint16(d[7:]))
				ncols = int(binary.LittleEndian.Uint16(d[5:]))
				binary.LittleEndian.PutUint32(d[1:], id)
			}
			if err := e.Client.Packet(e.colDef(d)); err != nil {
				return err
			}
			i++
			if nparams > 0 && i == 1+nparams || ncols > 0 && i == 1+nparams+ncols {
				return e.Client.ColsEnd(0, status)
			}
			return nil
		})
		e.Trace.Running(nil)
		var me *mysql.MyError
		if errors.As(err, &me) {
			e.Conns.Release(bc)
			return nil, e.Fail(err)
		}
		if err != nil {
			if e.again(bc, err, i == 0 && bc != e.Conns.Pinned(), attempt) {
				p |= Retry
				continue
			}
			return nil, e.Lost(bc, err)
		}
		e.Conns.Release(bc)
		return bs, nil
	}
}
