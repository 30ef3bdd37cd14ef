package proxy

import (
	"encoding/binary"
	"errors"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/router"
)

// Binary-protocol prepared statements, for now: the first COM_STMT_PREPARE
// pins the session to its backend connection and COM_STMT_* commands are
// relayed to it with the backend's statement ids. This keeps every driver
// that prepares statements working; statements that survive connection
// changes and route through the sharding planner replace it later.

// stmtPrepare relays COM_STMT_PREPARE and its response.
func (s *Session) stmtPrepare(p []byte) error {
	if s.route != nil && s.route.Sharded() {
		// Binary-protocol statements are not routed yet: refuse those on
		// sharded tables instead of preparing them on the default node,
		// where the table does not exist.
		sql := string(p[1:])
		info := router.Classify(sql)
		if pl, _, err := s.route.Plan(s.getParser(), sql, s.db, info.Kind); err != nil || pl.Kind == router.PlanSharded {
			table := ""
			if err == nil {
				table = pl.Tables()[0].Table
			} else if re := (*router.Error)(nil); errors.As(err, &re) {
				return s.fail(err)
			}
			return s.fail(newErr(errNotSupported, "keyshard: prepared statements on sharded table %s are not routed yet; "+
				"send the statement as text (e.g. go-sql-driver's interpolateParams=true)", table))
		}
	}
	s.stick("prepared statements")
	bc, err := s.conn()
	if err != nil {
		return s.fail(err)
	}
	if err := s.send(bc, p); err != nil {
		return s.backendFailed(bc, err)
	}
	s.cur.Store(bc)
	err = s.relayPrepare(bc)
	s.cur.Store(nil)
	if err != nil {
		return s.backendFailed(bc, err)
	}
	s.release(bc)
	return nil
}

func (s *Session) relayPrepare(bc *backend.Conn) error {
	bp := bc.Packets()
	p, err := bp.ReadPacket()
	if err != nil || len(p) == 0 {
		bc.MarkBroken()
		return &backend.Error{Kind: backend.KindLost, Node: bc.Node(), Addr: bc.Addr(), Msg: "reading PREPARE answer", Err: err}
	}
	if err := s.pkt.WritePacket(p); err != nil {
		return &clientError{err}
	}
	if p[0] != wire.OKHeader || len(p) < 12 {
		return nil // ERR: relayed
	}
	cols := int(binary.LittleEndian.Uint16(p[5:]))
	params := int(binary.LittleEndian.Uint16(p[7:]))
	for _, n := range []int{params, cols} {
		if n == 0 {
			continue
		}
		for range n {
			d, err := bp.ReadPacket()
			if err != nil {
				bc.MarkBroken()
				return &backend.Error{Kind: backend.KindLost, Node: bc.Node(), Addr: bc.Addr(), Msg: "reading PREPARE answer", Err: err}
			}
			if err := s.pkt.WritePacket(d); err != nil {
				return &clientError{err}
			}
		}
		if s.caps&mysql.CLIENT_DEPRECATE_EOF == 0 {
			s.buf = wire.AppendEOF(s.buf[:0], 0, bc.Status)
			if err := s.pkt.WritePacket(s.buf); err != nil {
				return &clientError{err}
			}
		}
	}
	return nil
}

// stmtCommand relays COM_STMT_EXECUTE/FETCH/RESET/CLOSE/SEND_LONG_DATA to
// the pinned connection that prepared the statement.
func (s *Session) stmtCommand(p []byte) error {
	if s.pinned == nil {
		if p[0] == mysql.COM_STMT_CLOSE || p[0] == mysql.COM_STMT_SEND_LONG_DATA {
			return nil // no answer expected
		}
		return s.fail(&mysql.MyError{Code: mysql.ER_UNKNOWN_STMT_HANDLER, State: "HY000", Message: "Unknown prepared statement handler given to keyshard"})
	}
	bc := s.pinned
	if err := s.send(bc, p); err != nil {
		return s.backendFailed(bc, err)
	}
	switch p[0] {
	case mysql.COM_STMT_CLOSE, mysql.COM_STMT_SEND_LONG_DATA:
		return nil
	case mysql.COM_STMT_RESET:
		return s.relayOneAndRelease(bc)
	}
	s.cur.Store(bc)
	res, err := s.relay(bc, false)
	s.cur.Store(nil)
	if err != nil {
		return s.backendFailed(bc, err)
	}
	s.release(bc)
	return res.err
}

func (s *Session) relayOneAndRelease(bc *backend.Conn) error {
	if err := s.relayOne(bc); err != nil {
		return s.backendFailed(bc, err)
	}
	s.release(bc)
	return nil
}

// send writes one client command packet to bc.
func (s *Session) send(bc *backend.Conn, p []byte) error {
	bp := bc.Packets()
	err := bp.WriteCommand(p[0], p[1:])
	if err == nil {
		err = bp.Flush()
	}
	if err != nil {
		bc.MarkBroken()
		return &backend.Error{Kind: backend.KindLost, Node: bc.Node(), Addr: bc.Addr(), Msg: "sending command", Err: err}
	}
	return nil
}
