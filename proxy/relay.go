package proxy

import (
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
)

// perStatementStatus are the status flags that describe one statement's
// execution (MariaDB's SERVER_STATUS_CLEAR_SET, cleared as each command
// starts): a status keyshard writes itself never carries them over from an
// earlier answer.
const perStatementStatus = mysql.SERVER_STATUS_NO_GOOD_INDEX_USED | mysql.SERVER_STATUS_NO_INDEX_USED |
	wire.StatusMoreResultsExists | mysql.SERVER_STATUS_METADATA_CHANGED | mysql.SERVER_QUERY_WAS_SLOW |
	mysql.SERVER_STATUS_DB_DROPPED | mysql.SERVER_STATUS_CURSOR_EXISTS | mysql.SERVER_STATUS_LAST_ROW_SEND |
	mysql.SERVER_SESSION_STATE_CHANGED

// relayResult summarises a relayed answer.
type relayResult struct {
	resultSets int
	rows       uint64
	started    bool  // a packet of the answer arrived (nothing can be retried after)
	err        error // a MySQL error the backend returned (already relayed)
}

// relay copies the answer to one command from bc to the client, packet by
// packet, decoding only framing packets (OK, ERR, EOF, column count). Rows
// are never decoded and memory stays bounded by the buffers, whatever the
// size of the result. Backend connections always use CLIENT_DEPRECATE_EOF;
// for clients without it the EOF packets are put back here.
//
// An error returned is either a *backend.Error (backend lost: bc is broken)
// or a *clientError (client gone: bc is abandoned mid-answer). In both cases
// the caller discards bc.
func (s *Session) relay(bc *backend.Conn, fieldList bool) (relayResult, error) {
	return s.relayCols(bc, fieldList, nil)
}

// relayCols is relay for the answer to COM_STMT_EXECUTE when cols is set:
// *cols is the column count the client last saw for the statement. A
// first result set with another count is flagged
// SERVER_STATUS_METADATA_CHANGED in the EOF keyshard writes after its
// column definitions, as MariaDB does when it re-prepares a statement whose
// columns changed (keyshard's backend handle may be younger than the
// client's PREPARE, so the backend's own flag cannot be relied on), and
// *cols is updated.
func (s *Session) relayCols(bc *backend.Conn, fieldList bool, cols *int) (relayResult, error) {
	var res relayResult
	bp := bc.Packets()
	clientEOF := s.caps&mysql.CLIENT_DEPRECATE_EOF == 0
	for {
		// First packet of a result: OK, ERR, LOCAL INFILE or column count.
		var p []byte
		var err error
		if !fieldList {
			var done bool
			if p, done, err = s.readResult(bc, &res); done || err != nil {
				return res, err
			}
			switch {
			case p == nil: // an OK, and more follows
				continue
			case p[0] == wire.LocalInfileHdr:
				if err := s.localInfile(bc, p); err != nil {
					if me, ok := err.(*mysql.MyError); ok {
						res.err = me
						s.writeError(me)
						return res, nil
					}
					return res, err
				}
				continue
			}
			if err := s.pkt.WritePacket(p); err != nil {
				return res, &clientError{err}
			}
			// Column definitions.
			n, _, perr := wire.ReadLenEncInt(p, 0)
			if perr != nil {
				return res, lostConn(bc, perr)
			}
			var changed uint16
			if cols != nil {
				if int(n) != *cols {
					changed = mysql.SERVER_STATUS_METADATA_CHANGED
					*cols = int(n)
				}
				cols = nil // later result sets (CALL) are not the statement's
			}
			for range n {
				cp, err := bp.ReadPacket()
				if err != nil {
					return res, lostConn(bc, err)
				}
				if err := s.pkt.WritePacket(cp); err != nil {
					return res, &clientError{err}
				}
			}
			if clientEOF {
				// The EOF after the column definitions. An EXECUTE that
				// opened a cursor has no rows: the backend's terminator
				// (status CURSOR_EXISTS) is that EOF, and the answer ends.
				p, err = bp.ReadRaw()
				if err != nil {
					return res, lostConn(bc, err)
				}
				if wire.IsEOF(p) {
					if ok, perr := wire.ParseOK(p); perr == nil && ok.Status&mysql.SERVER_STATUS_CURSOR_EXISTS != 0 {
						bc.Status = ok.Status
						s.buf = wire.AppendEOF(s.buf[:0], ok.Warnings, ok.Status|changed)
						if err := s.pkt.WritePacket(s.buf); err != nil {
							return res, &clientError{err}
						}
						res.resultSets++
						return res, nil
					}
				}
				if err := s.writeColsEOF(bc, changed); err != nil {
					return res, err
				}
			} else {
				p = nil
			}
		}
		res.resultSets++
		if more, err := s.relayRows(bc, p, 0, fieldList, &res); err != nil || !more {
			return res, err
		}
	}
}

// readResult reads the first packet of the next result of bc's answer and
// relays it if it is an OK or an ERR: then p is nil, and done tells that
// the answer is over. Otherwise p is the packet (a column count, or a LOCAL
// INFILE request), not relayed.
func (s *Session) readResult(bc *backend.Conn, res *relayResult) (p []byte, done bool, err error) {
	p, err = bc.Packets().ReadPacket()
	if err != nil {
		return nil, true, lostConn(bc, err)
	}
	res.started = true
	s.firstByte()
	if len(p) == 0 {
		return nil, true, lostConn(bc, wire.ErrMalformed)
	}
	switch p[0] {
	case wire.OKHeader:
		more, err := s.relayOK(bc, p)
		return nil, err != nil || !more, err
	case wire.ErrHeader:
		res.err = wire.ParseErr(p)
		if err := s.pkt.WritePacket(p); err != nil {
			return nil, true, &clientError{err}
		}
		return nil, true, nil
	}
	return p, false, nil
}

// lostConn marks bc broken after a failed read or an answer that does not
// decode.
func lostConn(bc *backend.Conn, err error) error {
	bc.MarkBroken()
	return &backend.Error{Kind: backend.KindLost, Node: bc.Node(), Addr: bc.Addr(), Msg: "connection lost during query", Err: err}
}

// relayOK relays the OK packet p that ends a result (more: another
// follows), recording what it says for the session.
func (s *Session) relayOK(bc *backend.Conn, p []byte) (more bool, err error) {
	ok, perr := wire.ParseOK(p)
	if perr != nil {
		return false, lostConn(bc, perr)
	}
	bc.Status = ok.Status
	s.rowCount = int64(ok.AffectedRows)
	s.tr.changed += ok.AffectedRows
	if ok.InsertID != 0 {
		s.lastInsertID = ok.InsertID
	}
	if ok.Status&wire.StatusSessionStateChange != 0 && !s.tracks() {
		s.buf = wire.StripState(s.buf[:0], p)
		p = s.buf
	}
	if err := s.pkt.WritePacket(p); err != nil {
		return false, &clientError{err}
	}
	return ok.Status&wire.StatusMoreResultsExists != 0, nil
}

// writeColsEOF writes, for a client without CLIENT_DEPRECATE_EOF, the EOF
// after a result set's column definitions (which backends, using
// CLIENT_DEPRECATE_EOF, do not send). Its status is the previous answer's,
// without its per-statement flags (a cursor's above all). The index-use
// flags MariaDB puts there are this statement's, which only its final
// packet tells: the previous statement's say nothing about this one, so
// none is claimed.
func (s *Session) writeColsEOF(bc *backend.Conn, changed uint16) error {
	s.buf = wire.AppendEOF(s.buf[:0], 0, bc.Status&^perStatementStatus|changed)
	if err := s.pkt.WritePacket(s.buf); err != nil {
		return &clientError{err}
	}
	return nil
}

// relayRows relays the rows and the terminator of a result set whose
// column definitions were written, one physical packet at a time. p, if
// set, is the first packet, already read; rows counts rows already relayed.
// more reports that another result follows.
func (s *Session) relayRows(bc *backend.Conn, p []byte, rows uint64, fieldList bool, res *relayResult) (more bool, err error) {
	bp := bc.Packets()
	clientEOF := s.caps&mysql.CLIENT_DEPRECATE_EOF == 0
	cont := false
	for {
		rp := p
		p = nil
		if rp == nil {
			if !cont {
				// The rows already received, copied in one go.
				n, err := bp.RelayRows(s.pkt)
				if err != nil {
					return false, &clientError{err}
				}
				rows += n
			}
			rp, err = bp.ReadRaw()
			if err != nil {
				return false, lostConn(bc, err)
			}
		}
		if cont {
			cont = len(rp) == wire.MaxPayload
			if err := s.pkt.WriteRaw(rp); err != nil {
				return false, &clientError{err}
			}
			continue
		}
		if len(rp) > 0 && rp[0] == wire.ErrHeader && len(rp) < wire.MaxPayload {
			res.err = wire.ParseErr(rp)
			if err := s.pkt.WriteRaw(rp); err != nil {
				return false, &clientError{err}
			}
			s.rowCount = -1
			s.foundRows = rows
			return false, nil
		}
		if wire.IsEOF(rp) {
			var warnings, status uint16
			if fieldList {
				warnings, status = wire.ParseEOF(rp)
				if len(rp) >= 7 {
					if ok, perr := wire.ParseOK(rp); perr == nil {
						warnings, status = ok.Warnings, ok.Status
					}
				}
			} else {
				ok, perr := wire.ParseOK(rp)
				if perr != nil {
					return false, lostConn(bc, perr)
				}
				warnings, status = ok.Warnings, ok.Status
			}
			bc.Status = status
			if clientEOF || fieldList && len(rp) == 5 {
				s.buf = wire.AppendEOF(s.buf[:0], warnings, status)
				err = s.pkt.WritePacket(s.buf)
			} else {
				if status&wire.StatusSessionStateChange != 0 && !s.tracks() {
					s.buf = wire.StripState(s.buf[:0], rp)
					rp = s.buf
				}
				err = s.pkt.WriteRaw(rp)
			}
			if err != nil {
				return false, &clientError{err}
			}
			if !fieldList {
				s.rowCount = -1
				s.foundRows = rows
			}
			res.rows += rows
			s.tr.rows += rows
			return status&wire.StatusMoreResultsExists != 0 && !fieldList, nil
		}
		rows++
		cont = len(rp) == wire.MaxPayload
		if err := s.pkt.WriteRaw(rp); err != nil {
			return false, &clientError{err}
		}
	}
}

// localInfile relays LOAD DATA LOCAL INFILE: the backend's file request goes
// to the client, and the client's file content streams to the backend packet
// by packet until the empty packet that ends it.
func (s *Session) localInfile(bc *backend.Conn, req []byte) error {
	bp := bc.Packets()
	if s.caps&mysql.CLIENT_LOCAL_FILES == 0 {
		// Tell the backend there is no file, then refuse.
		if err := bp.WritePacket(nil); err != nil || bp.Flush() != nil {
			bc.MarkBroken()
			return &backend.Error{Kind: backend.KindLost, Node: bc.Node(), Addr: bc.Addr(), Msg: "LOAD DATA LOCAL", Err: err}
		}
		if p, err := bp.ReadPacket(); err != nil || len(p) == 0 {
			bc.MarkBroken()
			return &backend.Error{Kind: backend.KindLost, Node: bc.Node(), Addr: bc.Addr(), Msg: "LOAD DATA LOCAL", Err: err}
		}
		return &mysql.MyError{Code: mysql.ER_NOT_ALLOWED_COMMAND, State: "42000", Message: "The used command is not allowed with this MySQL version: the client did not enable LOCAL INFILE"}
	}
	if err := s.pkt.WritePacket(req); err != nil {
		return &clientError{err}
	}
	if err := s.pkt.Flush(); err != nil {
		return &clientError{err}
	}
	for {
		p, err := s.pkt.ReadRaw()
		if err != nil {
			bc.MarkBroken()
			return &clientError{err}
		}
		if err := bp.WriteRaw(p); err != nil {
			bc.MarkBroken()
			return &backend.Error{Kind: backend.KindLost, Node: bc.Node(), Addr: bc.Addr(), Msg: "LOAD DATA LOCAL", Err: err}
		}
		if len(p) == 0 {
			break
		}
	}
	if err := bp.Flush(); err != nil {
		bc.MarkBroken()
		return &backend.Error{Kind: backend.KindLost, Node: bc.Node(), Addr: bc.Addr(), Msg: "LOAD DATA LOCAL", Err: err}
	}
	return nil
}
