package engine

import (
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
)

// Relay copies the answer to one command from bc to the client, decoding
// only framing packets (OK, ERR, EOF, column count). Rows are not decoded
// (but by a RowHook, for the few answers keyshard corrects) and memory
// stays bounded by the buffers, whatever the size of the result. A backend
// connection's EOF framing is its client's (backend.FlavorCaps); the
// Client converts where they differ.
//
// fieldList: the answer to COM_FIELD_LIST (column definitions and an
// end). cols, for the answer to COM_STMT_EXECUTE, is the column count the
// client last saw for the statement: a first result set with another count
// is flagged SERVER_STATUS_METADATA_CHANGED in the EOF keyshard writes after
// its column definitions, as MariaDB does when it re-prepares a statement
// whose columns changed (keyshard's backend handle may be younger than the
// client's PREPARE, so the backend's own flag cannot be relied on), and
// *cols is updated.
//
// An error returned is either a *backend.Error (backend lost: bc is broken)
// or a *ClientError (client gone: bc is abandoned mid-answer). In both cases
// the caller discards bc.
func (e *Engine) Relay(bc *backend.Conn, fieldList bool, cols *int) (Result, error) {
	var res Result
	if fieldList {
		res.ResultSets++
		_, err := e.relayRows(bc, nil, 0, true, &res)
		return res, err
	}
	for {
		p, done, err := e.readResult(bc, &res)
		if done || err != nil {
			return res, err
		}
		switch {
		case p == nil: // an OK, and more follows
			continue
		case p[0] == wire.LocalInfileHdr:
			if err := e.localInfile(bc, p); err != nil {
				if me, ok := err.(*mysql.MyError); ok {
					res.Err = me
					e.Client.Error(me)
					return res, nil
				}
				return res, err
			}
			continue
		}
		n, err := e.relayColumns(bc, p)
		if err != nil {
			return res, err
		}
		var changed uint16
		if cols != nil {
			if int(n) != *cols {
				changed = mysql.SERVER_STATUS_METADATA_CHANGED
				*cols = int(n)
			}
			cols = nil // later result sets (CALL) are not the statement's
		}
		if !bc.DeprecateEOF() {
			// The server's own EOF after the column definitions. An
			// EXECUTE that opened a cursor ends with it (status
			// CURSOR_EXISTS).
			eof, err := bc.Packets().ReadPacket()
			if err != nil {
				return res, lostConn(bc, err)
			}
			if len(eof) > 0 && eof[0] == wire.ErrHeader {
				// The statement failed after its column definitions (a
				// cursor's, while the server produced its rows): the
				// server's error ends the answer in the EOF's place.
				res.Err = wire.ParseErr(eof)
				return res, e.relayErr(eof, res.Err, e.Client.Packet)
			}
			if !wire.IsOldEOF(eof) {
				return res, lostConn(bc, wire.ErrMalformed)
			}
			w, st := wire.ParseEOF(eof)
			if st&mysql.SERVER_STATUS_CURSOR_EXISTS != 0 {
				bc.SetStatus(st)
				if err := e.Client.ResultEnd(w, st|changed); err != nil {
					return res, err
				}
				res.ResultSets++
				return res, nil
			}
			if err := e.Client.ColsEnd(w, st|changed); err != nil {
				return res, err
			}
			p = nil
		} else if !e.Client.DeprecateEOF() {
			// The EOF after the column definitions, which the server did
			// not send. An EXECUTE that opened a cursor has no rows: the
			// backend's terminator (status CURSOR_EXISTS) is that EOF, and
			// the answer ends.
			if p, err = bc.Packets().ReadRaw(); err != nil {
				return res, lostConn(bc, err)
			}
			if len(p) > 0 && p[0] == wire.ErrHeader && len(p) < wire.MaxPayload {
				// Failed after its column definitions: the error comes
				// in the EOF's place, as from the server.
				res.Err = wire.ParseErr(p)
				return res, e.relayErr(p, res.Err, e.Client.Raw)
			}
			if wire.IsEOF(p) {
				if ok, perr := wire.ParseOK(p); perr == nil && ok.Status&mysql.SERVER_STATUS_CURSOR_EXISTS != 0 {
					bc.SetStatus(ok.Status)
					if err := e.Client.EOF(ok.Warnings, ok.Status|changed); err != nil {
						return res, err
					}
					res.ResultSets++
					return res, nil
				}
			}
			if err := e.colsEOF(bc, changed); err != nil {
				return res, err
			}
		} else {
			p = nil
		}
		res.ResultSets++
		if more, err := e.relayRows(bc, p, 0, false, &res); err != nil || !more {
			return res, err
		}
	}
}

// relayColumns relays a result set's column count p and reads and relays
// its column definitions; it returns the column count.
func (e *Engine) relayColumns(bc *backend.Conn, p []byte) (uint64, error) {
	n, _, perr := wire.ReadLenEncInt(p, 0)
	if perr != nil {
		return 0, lostConn(bc, perr)
	}
	if err := e.Client.Packet(p); err != nil {
		return 0, err
	}
	bp := bc.Packets()
	if e.RowHook != nil {
		e.ColTypes, e.ColNames = e.ColTypes[:0], e.ColNames[:0]
	}
	for range n {
		cp, err := bp.ReadPacket()
		if err != nil {
			return 0, lostConn(bc, err)
		}
		if e.RowHook != nil {
			typ, _, _ := wire.ColumnType(cp, bc.ExtTypeInfo())
			name, _ := wire.ColumnOrgName(cp)
			e.ColTypes, e.ColNames = append(e.ColTypes, typ), append(e.ColNames, string(name))
		}
		if err := e.Client.Packet(e.colDef(cp)); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// readColsEOF reads the EOF a connection without CLIENT_DEPRECATE_EOF gets
// after column definitions (valid until bc's next read).
func readColsEOF(bc *backend.Conn) ([]byte, error) {
	eof, err := bc.Packets().ReadPacket()
	if err != nil {
		return nil, lostConn(bc, err)
	}
	if !wire.IsOldEOF(eof) {
		return nil, lostConn(bc, wire.ErrMalformed)
	}
	return eof, nil
}

// readResult reads the first packet of the next result of bc's answer and
// relays it if it is an OK or an ERR: then p is nil, and done tells that
// the answer is over. Otherwise p is the packet (a column count, or a LOCAL
// INFILE request), not relayed.
func (e *Engine) readResult(bc *backend.Conn, res *Result) (p []byte, done bool, err error) {
	p, err = bc.Packets().ReadPacket()
	for err == nil && wire.IsProgress(p) {
		// Only a client that asked for progress reports gets a
		// connection that sends them (backend.FlavorExt).
		res.Started = true
		if err := e.Client.Progress(p); err != nil {
			return nil, true, err
		}
		p, err = bc.Packets().ReadPacket()
	}
	if err != nil {
		return nil, true, lostConn(bc, err)
	}
	first := !res.Started
	res.Started = true
	e.Trace.FirstByte()
	if len(p) == 0 {
		return nil, true, lostConn(bc, wire.ErrMalformed)
	}
	switch p[0] {
	case wire.OKHeader:
		more, err := e.relayOK(bc, p, res)
		return nil, err != nil || !more, err
	case wire.ErrHeader:
		if first && wire.IsGone(p) {
			// The server closes the connection instead of answering
			// (shutting down, the connection killed): lost, with nothing
			// relayed, so a read may run again elsewhere.
			res.Started = false
			return nil, true, lostConn(bc, wire.ParseErr(p))
		}
		res.Err = wire.ParseErr(p)
		if err := e.relayErr(p, res.Err, e.Client.Packet); err != nil {
			return nil, true, err
		}
		return nil, true, nil
	}
	return p, false, nil
}

// relayOK relays the OK packet p that ends a result (more: another
// follows), recording what it says for the session.
func (e *Engine) relayOK(bc *backend.Conn, p []byte, res *Result) (more bool, err error) {
	ok, perr := wire.ParseOK(p)
	if perr != nil {
		return false, lostConn(bc, perr)
	}
	bc.SetStatus(ok.Status)
	if ok.Status&wire.StatusSessionStateChange != 0 {
		if db, changed := wire.TrackedSchema(ok.State); changed {
			// Whatever statement changed the database (USE behind a
			// comment, in a batch, in a procedure), the session and the
			// connection follow the server's word.
			bc.SetDB(db)
			e.Vars.DB = db
		}
		wire.TrackedVars(ok.State, func(name, value []byte) {
			res.Tracked = append(res.Tracked, backend.Var{Name: strings.ToLower(string(name)), Value: string(value)})
		})
	}
	e.Last.RowCount = int64(ok.AffectedRows)
	e.Trace.Sent(0, ok.AffectedRows)
	if e.genID != 0 {
		// The statement's ids came from a sequence: the first is its
		// insert id, whatever the sub-table's AUTO_INCREMENT says.
		ok.InsertID = e.genID
		e.idBuf = wire.SetOKInsertID(e.idBuf[:0], p, e.genID)
		p = e.idBuf
	}
	if ok.InsertID != 0 {
		e.Last.InsertID = ok.InsertID
	}
	if err := e.Client.RelayOK(p, ok.Status); err != nil {
		return false, err
	}
	return ok.Status&wire.StatusMoreResultsExists != 0, nil
}

// colsEOF writes, for a client without CLIENT_DEPRECATE_EOF, the EOF after
// a result set's column definitions (which backends, using
// CLIENT_DEPRECATE_EOF, do not send). Its status is the previous answer's,
// without its per-statement flags (a cursor's above all). The index-use
// flags MariaDB puts there are this statement's, which only its final
// packet tells: the previous statement's say nothing about this one, so
// none is claimed.
func (e *Engine) colsEOF(bc *backend.Conn, changed uint16) error {
	return e.Client.ColsEnd(0, bc.Status&^PerStatementStatus|changed)
}

// rowsEnd is how the rows of a result set ended: with terminator term
// (an EOF or 0xfe-headed OK, or with err set the ERR packet; one physical
// packet, valid until bc's next read), not relayed.
type rowsEnd struct {
	term []byte
	err  *mysql.MyError
	rows uint64 // rows copied
}

// copyRows copies the rows of a result set from bc to the client, one
// physical packet at a time, or all those already received in one write,
// until the packet that ends them, which it returns unrelayed. p, if set,
// is the first packet, already read.
func (e *Engine) copyRows(bc *backend.Conn, p []byte) (rowsEnd, error) {
	var end rowsEnd
	bp := bc.Packets()
	cont := false
	for {
		rp := p
		p = nil
		if rp == nil {
			if !cont && e.RowHook == nil {
				// The rows already received, copied in one go.
				n, err := bp.RelayRows(e.Client.pkt)
				if err != nil {
					if err = e.Client.wfail(err); err != nil {
						return end, err
					}
				}
				end.rows += n
			}
			var err error
			if rp, err = bp.ReadRaw(); err != nil {
				return end, lostConn(bc, err)
			}
		}
		if cont {
			cont = len(rp) == wire.MaxPayload
			if err := e.Client.Raw(rp); err != nil {
				return end, err
			}
			continue
		}
		if len(rp) > 0 && rp[0] == wire.ErrHeader && len(rp) < wire.MaxPayload {
			end.err, end.term = wire.ParseErr(rp), rp
			return end, nil
		}
		if wire.IsEOF(rp) {
			end.term = rp
			return end, nil
		}
		end.rows++
		cont = len(rp) == wire.MaxPayload
		if e.RowHook != nil && !cont {
			if rp = e.RowHook(rp); rp == nil {
				end.rows--
				continue
			}
		}
		if err := e.Client.Raw(rp); err != nil {
			return end, err
		}
	}
}

// relayRows relays the rows and the terminator of a result set whose
// column definitions were written. p, if set, is the first packet, already
// read; rows counts rows already relayed. more reports that another result
// follows.
func (e *Engine) relayRows(bc *backend.Conn, p []byte, rows uint64, fieldList bool, res *Result) (more bool, err error) {
	end, err := e.copyRows(bc, p)
	if err != nil {
		return false, err
	}
	rows += end.rows
	if end.err != nil {
		res.Err = end.err
		if err := e.relayErr(end.term, end.err, e.Client.Raw); err != nil {
			return false, err
		}
		e.Last.RowCount = -1
		e.Last.FoundRows = rows
		return false, nil
	}
	return e.endRows(bc, end.term, rows, fieldList, res)
}

// endRows relays terminator rp of a result set of rows rows.
func (e *Engine) endRows(bc *backend.Conn, rp []byte, rows uint64, fieldList bool, res *Result) (more bool, err error) {
	var warnings, status uint16
	if fieldList {
		// COM_FIELD_LIST ends with a classic EOF, whatever was negotiated.
		warnings, status = wire.ParseEOF(rp)
		if len(rp) >= 7 {
			if ok, perr := wire.ParseOK(rp); perr == nil {
				warnings, status = ok.Warnings, ok.Status
			}
		}
	} else {
		ok, perr := wire.ParseEnd(rp)
		if perr != nil {
			return false, lostConn(bc, perr)
		}
		warnings, status = ok.Warnings, ok.Status
	}
	bc.SetStatus(status)
	if fieldList && len(rp) == 5 {
		err = e.Client.EOF(warnings, status)
	} else {
		err = e.Client.RelayEnd(rp, warnings, status)
	}
	if err != nil {
		return false, err
	}
	if !fieldList {
		e.Last.RowCount = -1
		e.Last.FoundRows = rows
	}
	res.Rows += rows
	e.Trace.Sent(rows, 0)
	return status&wire.StatusMoreResultsExists != 0 && !fieldList, nil
}

// localInfile relays LOAD DATA LOCAL INFILE: the backend's file request goes
// to the client, and the client's file content streams to the backend packet
// by packet until the empty packet that ends it.
func (e *Engine) localInfile(bc *backend.Conn, req []byte) error {
	bp := bc.Packets()
	lost := func(err error) error {
		bc.MarkBroken()
		return &backend.Error{Kind: backend.KindLost, Node: bc.Node(), Addr: bc.Addr(), Msg: "LOAD DATA LOCAL", Err: err}
	}
	if !e.Client.LocalFiles() {
		// Tell the backend there is no file, then refuse.
		if err := bp.WritePacket(nil); err != nil || bp.Flush() != nil {
			return lost(err)
		}
		if p, err := bp.ReadPacket(); err != nil || len(p) == 0 {
			return lost(err)
		}
		return &mysql.MyError{Code: mysql.ER_NOT_ALLOWED_COMMAND, State: "42000", Message: "The used command is not allowed with this MySQL version: the client did not enable LOCAL INFILE"}
	}
	cp := e.Client.pkt
	if err := e.Client.Packet(req); err != nil {
		return err
	}
	if err := cp.Flush(); err != nil {
		return &ClientError{err}
	}
	for {
		p, err := cp.ReadRaw()
		if err != nil {
			bc.MarkBroken()
			return &ClientError{err}
		}
		if err := bp.WriteRaw(p); err != nil {
			return lost(err)
		}
		if len(p) == 0 {
			break
		}
	}
	if err := bp.Flush(); err != nil {
		return lost(err)
	}
	return nil
}

// relayErr relays a backend's ERR packet p (me, parsed) with write. Once
// keyshard stopped the statement (its time limit, a deadlock), the
// interruption it caused (KILL QUERY) is answered with its error instead.
func (e *Engine) relayErr(p []byte, me *mysql.MyError, write func([]byte) error) error {
	if me.Code == mysql.ER_QUERY_INTERRUPTED {
		if te := e.Trace.Stopped(); te != nil {
			e.Client.Error(te)
			return nil
		}
	}
	return write(p)
}
