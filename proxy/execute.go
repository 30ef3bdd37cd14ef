package proxy

import (
	"bytes"
	"encoding/binary"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/proxy/digest"
	"github.com/keyshard/keyshard/proxy/engine"
	"github.com/keyshard/keyshard/router"
)

// execution is one COM_STMT_EXECUTE p of prepared statement st: what
// sends it to backends (the engine relays the answers).
type execution struct {
	s      *Session
	st     *prepared
	ex     *wire.Execute
	p      []byte
	cursor bool // the client asked for a cursor
}

// run runs the execution as sql on node n (nil: pinned or default).
// params selects the parameters sql takes (nil: all, in order).
func (x *execution) run(n *backend.Node, sql string, params []int) error {
	s, st := x.s, x.st
	ex := engine.Exec{Read: st.read, Retry: st.retry, Cursor: x.cursor, FoundRows: st.calcFoundRows,
		Send: func(bc *backend.Conn) error { return x.send(bc, sql, params) },
		Opened: func(bc *backend.Conn) {
			key := s.ps.keyFor(st, sql)
			if bs := bc.CachedStmt(key, nil); bs != nil {
				bs.Cursor = true
				st.cursor, st.cursorSt = bc, bs
				s.lease.CursorOpened()
			}
		}}
	if st.cols > 0 {
		ex.Cols = &st.cols // a statement without columns (CALL) has no metadata to change
	}
	if st.kind == router.KindCall {
		ex.Call = &engine.Call{Params: st.params, SQL: st.sql, DB: st.db}
	}
	return s.eng.Execute(n, ex)
}

// send buffers on bc what the execution as sql needs: a
// PREPARE first (a round trip) if bc does not have the statement yet, its
// long data, and the EXECUTE with bc's statement id. A *mysql.MyError
// means the backend refused the PREPARE and the connection is usable.
func (x *execution) send(bc *backend.Conn, sql string, params []int) error {
	bs, err := x.stmtOn(bc, sql)
	if err != nil {
		return err
	}
	return x.write(bc, bs, params)
}

// stmtOn returns bc's handle of the statement as sql, preparing it there
// if needed.
func (x *execution) stmtOn(bc *backend.Conn, sql string) (*backend.Stmt, error) {
	key := x.s.ps.keyFor(x.st, sql)
	if bs := bc.CachedStmt(key, x.st.ref); bs != nil {
		return bs, nil
	}
	return prepareOn(bc, x.st.db, key, sql, x.st.ref)
}

// write buffers the statement's long data and EXECUTE for bc's handle bs.
func (x *execution) write(bc *backend.Conn, bs *backend.Stmt, params []int) error {
	s, st, ex, p := x.s, x.st, x.ex, x.p
	bp := bc.Packets()
	for i, chunks := range st.long {
		j := i
		if params != nil {
			if j = indexOf(params, i); j < 0 {
				continue
			}
		}
		// Replayed in the client's chunks: each fit the client's packet
		// limit, so none outgrows the backend's.
		for _, data := range chunks {
			s.xbuf = binary.LittleEndian.AppendUint32(s.xbuf[:0], bs.ID)
			s.xbuf = binary.LittleEndian.AppendUint16(s.xbuf, uint16(j))
			s.xbuf = append(s.xbuf, data...)
			if err := bp.WriteCommand(mysql.COM_STMT_SEND_LONG_DATA, s.xbuf); err != nil {
				bc.MarkBroken()
				return err
			}
		}
	}
	if cap(s.xbuf) > 1<<20 {
		s.xbuf = nil // not kept for the life of the session
	}
	var pkt []byte
	switch {
	case params != nil:
		pkt = wire.AppendExecute(s.xbuf[:0], bs.ID, ex, p, params)
		s.xbuf = pkt
		bs.Types = bs.Types[:0] // rebound by the packet
		for _, i := range params {
			bs.Types = append(bs.Types, ex.Types[2*i], ex.Types[2*i+1])
		}
	case ex.Params > 0 && !ex.Bound && !bytes.Equal(bs.Types, ex.Types):
		// The client reuses types this backend statement never saw.
		pkt = wire.WithTypes(s.xbuf[:0], bs.ID, ex, p)
		s.xbuf = pkt
		bs.Types = append(bs.Types[:0], ex.Types...)
	default:
		binary.LittleEndian.PutUint32(p[1:], bs.ID)
		pkt = p
		if ex.Bound && !bytes.Equal(bs.Types, ex.Types) {
			bs.Types = append(bs.Types[:0], ex.Types...)
		}
	}
	if err := bp.WriteCommand(pkt[0], pkt[1:]); err != nil {
		bc.MarkBroken()
		return err
	}
	return nil
}

// sendLeg buffers and sends the execution for every statement of a
// fan-out leg. All are prepared first: a PREPARE is a round trip, which
// must not follow an EXECUTE whose answer is still unread.
func (x *execution) sendLeg(l *engine.Leg) error {
	l.Pipelined = true
	handles := make([]*backend.Stmt, len(l.Route.SQL))
	for i, sql := range l.Route.SQL {
		bs, err := x.stmtOn(l.BC, sql)
		if err != nil {
			return err
		}
		handles[i] = bs
	}
	for i, sql := range l.Route.SQL {
		if l.BC.CachedStmt(x.s.ps.keyFor(x.st, sql), nil) != handles[i] {
			return newErr(errNotSupported, "keyshard: stmt_cache_size %d is smaller than the %d sub-tables this statement runs on node %s",
				x.s.snap.cfg.StmtCacheSize, len(l.Route.SQL), l.BC.Node())
		}
	}
	for i, bs := range handles {
		var params []int
		if l.Route.Params != nil {
			params = l.Route.Params[i]
		}
		if err := x.write(l.BC, bs, params); err != nil {
			return err
		}
	}
	return l.BC.Packets().Flush()
}

// prepareOn prepares sql on bc in database db (the one current at the
// client's PREPARE), restoring bc's database after.
func prepareOn(bc *backend.Conn, db, key, sql string, ref *backend.StmtRef) (*backend.Stmt, error) {
	cur := bc.DB()
	if db != cur && db != "" {
		if _, err := bc.Command(mysql.COM_INIT_DB, []byte(db)); err != nil {
			return nil, err
		}
		bc.SetDB(db)
	}
	bs, err := bc.Prepare(key, sql, ref, nil)
	if db != cur && db != "" && !bc.Broken() && cur != "" {
		if _, err2 := bc.Command(mysql.COM_INIT_DB, []byte(cur)); err2 != nil {
			bc.MarkBroken()
		} else {
			bc.SetDB(cur)
		}
	}
	return bs, err
}

func indexOf(xs []int, x int) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

// MariaDB's COM_STMT_BULK_EXECUTE (Connector/C's STMT_ATTR_ARRAY_SIZE,
// MariaDB Connector/J's useBulkStmts): one command carrying many rows of
// parameters, each value behind an indicator byte.
const (
	comStmtBulkExecute = 0xfa
	bulkSendTypes      = 128 // the packet carries the parameter types
)

// stmtBulk runs COM_STMT_BULK_EXECUTE p of st on its node, as EXECUTE
// runs: prepared on the connection that runs it, the statement id
// rewritten. The types a packet without them relies on are the ones the
// client last sent, which the backend statement may not have seen: they
// are put in. A statement on sharded tables is refused (its rows would
// need splitting by shard).
func (t *stmtTable) stmtBulk(st *prepared, p []byte) error {
	s := t.s
	s.traceStmt(st, false)
	if len(p) < 7 {
		return s.fail(newErr(errMalformedPacket, "COM_STMT_BULK_EXECUTE: short packet"))
	}
	if err := t.closeCursor(st); err != nil {
		return s.fail(err)
	}
	defer st.clearLong() // long data belongs to an EXECUTE, not to a bulk
	if st.planErr != nil {
		return s.fail(st.planErr)
	}
	if st.plan != nil {
		t := st.plan.Tables()[0]
		return s.fail(newErr(errNotSupported, "keyshard: bulk execution of a statement on sharded table %s is not routed; "+
			"execute its rows one by one (COM_STMT_EXECUTE) or send a multi-row INSERT", t.Table))
	}
	flags := binary.LittleEndian.Uint16(p[5:])
	if flags&bulkSendTypes != 0 {
		if len(p) < 7+2*st.params {
			return s.fail(newErr(errMalformedPacket, "COM_STMT_BULK_EXECUTE: short packet"))
		}
		st.types = append(st.types[:0], p[7:7+2*st.params]...)
	}
	if st.sticky != "" {
		s.lease.Stick(st.sticky)
	}
	if s.lease.Tracking() {
		defer s.lease.MarkWrite()
	}
	s.tr.mark(digest.Route)
	x := &execution{s: s, st: st, p: p}
	return s.eng.Execute(st.node, engine.Exec{Send: x.sendBulk})
}

// sendBulk buffers the bulk execution on bc with bc's statement id.
func (x *execution) sendBulk(bc *backend.Conn) error {
	s, st, p := x.s, x.st, x.p
	bs, err := x.stmtOn(bc, st.sql)
	if err != nil {
		return err
	}
	flags := binary.LittleEndian.Uint16(p[5:])
	pkt := p
	if flags&bulkSendTypes == 0 && !bytes.Equal(bs.Types, st.types) {
		if len(st.types) != 2*st.params {
			return newErr(errNotSupported, "keyshard: COM_STMT_BULK_EXECUTE without parameter types before any were sent")
		}
		pkt = append(s.xbuf[:0], p[:5]...)
		pkt = binary.LittleEndian.AppendUint16(pkt, flags|bulkSendTypes)
		pkt = append(append(pkt, st.types...), p[7:]...)
		s.xbuf = pkt
	}
	binary.LittleEndian.PutUint32(pkt[1:], bs.ID)
	bs.Types = append(bs.Types[:0], st.types...)
	if err := bc.Packets().WriteCommand(pkt[0], pkt[1:]); err != nil {
		bc.MarkBroken()
		return err
	}
	return nil
}
