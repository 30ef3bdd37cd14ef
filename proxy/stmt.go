package proxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/proxy/digest"
	"github.com/keyshard/keyshard/router"
)

// Binary-protocol prepared statements.
//
// The client sees keyshard's statement ids, one per PREPARE for the life of
// the session. keyshard keeps each statement's text, the database it was
// prepared in, its parameter count and last bound types, and (in a sharded
// schema) its routing plan. A statement is prepared on a backend
// connection lazily, the first time that connection runs it, and stays in
// the connection's bounded cache (backend.Conn.CachedStmt) for the next
// session that runs the same text there; so an EXECUTE can run on any
// pooled connection and the session is not pinned by PREPARE.
//
// Sharded statements route like text ones: the plan is made at PREPARE with
// the ? parameters as placeholders (same plan and cache as the text form),
// and each EXECUTE binds the parameter values to pick the sub-tables. The
// rewritten statement keeps its ? and is prepared on its sub-table's node;
// a multi-row INSERT whose rows go to several sub-tables gets, per
// sub-table, an EXECUTE carrying just that sub-table's parameters.

// prepared is a client's prepared statement.
type prepared struct {
	id     uint32
	sql    string // the client's text
	db     string // database at PREPARE: the statement resolves names there
	kind   router.Kind
	read   bool // router.ReadOnly: its executions may read from a replica
	params int
	cols   int    // column count the client last saw (PREPARE, then each EXECUTE)
	types  []byte // parameter types last bound by the client

	long     map[int][][]byte // COM_STMT_SEND_LONG_DATA chunks not yet executed, as sent
	longSize int
	longErr  bool // long data beyond max_allowed_packet

	// Routing: plan (with lits and the client's leading comments) for a
	// sharded statement; node for a /*node*/ hint. Both nil: default node.
	plan   *router.Plan
	lits   []router.Literal
	prefix string
	node   *backend.Node
	// planErr: after a config reload the statement no longer routes; its
	// executions fail with this error.
	planErr error

	// sticky: executing the statement leaves state on the connection
	// (SET, user variables, temporary tables, locks...): the session keeps
	// the connection, as for the text form. Empty: no such effect.
	sticky string
	// sessionFuncs: LAST_INSERT_ID() and friends are answered for the
	// client by rewriting the statement at each execution.
	sessionFuncs bool
	// calcFoundRows: SQL_CALC_FOUND_ROWS, so FOUND_ROWS() is read back from
	// the backend after each execution (as for the text form).
	calcFoundRows bool

	// dig finds the statement's digest (its shape key is computed once).
	dig digest.Ref

	// The backend cache key last computed (for keySQL in state keySt): an
	// EXECUTE of the same text in the same state reuses it.
	keySt       *backend.State
	keySQL, key string

	cursor   *backend.Conn // connection holding the statement's open cursor
	cursorSt *backend.Stmt // the backend statement there
}

// stmtKey is the backend cache key of sql prepared with current database
// db in session state st (sql_mode, charset: they change how a statement
// is parsed, so sessions in different states never share a handle).
func stmtKey(db string, st *backend.State, sql string) string {
	return db + "\x00" + st.Key() + "\x00" + sql
}

// keyFor is stmtKey of sql for st in the session's current state, computed
// once per text and state rather than on every EXECUTE.
func (s *Session) keyFor(st *prepared, sql string) string {
	if st.keySt != s.state || st.keySQL != sql {
		st.keySt, st.keySQL, st.key = s.state, sql, stmtKey(st.db, s.state, sql)
	}
	return st.key
}

func (st *prepared) isLong(i int) bool { _, ok := st.long[i]; return ok }

// stmtPrepare answers COM_STMT_PREPARE: the statement is prepared on a
// backend (the default node, or for a sharded statement the node of its
// first sub-table) to learn its parameter and column definitions, which
// are relayed with keyshard's statement id.
func (s *Session) stmtPrepare(p []byte) error {
	sql := string(p[1:])
	info := router.Classify(sql)
	if s.srv.black.Load().blocked(sql[info.Start:]) {
		return s.fail(blacklisted(sql))
	}
	st := &prepared{sql: sql, db: s.db, kind: info.Kind, read: router.ReadOnly(info), sticky: stickyReason(info),
		sessionFuncs:  info.Flags&router.FlagSessionFunc != 0,
		calcFoundRows: info.Flags&router.FlagCalcFoundRows != 0}
	st.dig.Key = string(router.DigestKey(nil, s.db, sql, digest.MaxText))
	node, text, err := s.planStmt(st, info, true)
	if err != nil {
		return s.fail(err)
	}
	// A read-only statement is prepared (for its metadata) where its
	// executions may run: on a replica when the session can read from one,
	// so that reads go on while the master is down.
	var bc *backend.Conn
	if rp, _ := s.readPool(node, st.read, nil); rp != nil {
		bc, err = s.readConn(rp)
	}
	if bc == nil {
		bc, err = s.looseConn(node)
	}
	if err != nil {
		return s.fail(err)
	}
	s.nextStmt++
	st.id = s.nextStmt
	n := 0
	var nparams, ncols int
	clientEOF := s.caps&mysql.CLIENT_DEPRECATE_EOF == 0
	s.cur.Store(bc)
	bs, err := bc.Prepare(s.keyFor(st, text), text, func(d []byte) error {
		if n == 0 {
			nparams = int(binary.LittleEndian.Uint16(d[7:]))
			ncols = int(binary.LittleEndian.Uint16(d[5:]))
			binary.LittleEndian.PutUint32(d[1:], st.id)
		}
		if err := s.pkt.WritePacket(d); err != nil {
			return &clientError{err}
		}
		n++
		if clientEOF && (nparams > 0 && n == 1+nparams || ncols > 0 && n == 1+nparams+ncols) {
			s.buf = wire.AppendEOF(s.buf[:0], 0, s.status()&^perStatementStatus)
			if err := s.pkt.WritePacket(s.buf); err != nil {
				return &clientError{err}
			}
		}
		return nil
	})
	s.cur.Store(nil)
	var me *mysql.MyError
	if errors.As(err, &me) {
		s.nextStmt--
		s.lastStmt = 0
		s.releaseLoose(bc)
		return s.fail(err)
	}
	if err != nil {
		if bc == s.pinned {
			return s.backendFailed(bc, err)
		}
		bc.Pool().Discard(bc)
		var ce *clientError
		if errors.As(err, &ce) {
			return errCloseAfterReply
		}
		return s.fail(err)
	}
	s.releaseLoose(bc)
	st.params, st.cols = bs.Params, bs.Cols
	if s.stmts == nil {
		s.stmts = make(map[uint32]*prepared)
	}
	s.stmts[st.id] = st
	s.lastStmt = st.id
	s.srv.metrics.stmtsOpen.Inc()
	return nil
}

// planStmt routes prepared statement st with the session's routing: a
// /*node*/ hint sets st.node; a statement on sharded tables gets st.plan.
// It returns the node to prepare on (nil: the default node) and the text
// to prepare there (a sharded statement's first sub-table). hints false
// ignores /*node*/ hints (a text PREPARE does).
func (s *Session) planStmt(st *prepared, info router.Info, hints bool) (*backend.Node, string, error) {
	st.node, st.plan, st.lits, st.planErr = nil, nil, nil, nil
	if s.route == nil || !s.route.Sharded() {
		return nil, st.sql, nil
	}
	sql := st.sql
	if n, ok := s.hintNode(sql[:info.Start]); ok && hints {
		st.node = n
		return n, sql, nil
	}
	if !routable(info.Kind) {
		return nil, sql, nil
	}
	pl, lits, err := s.route.Plan(s.getParser(), sql, st.db, info.Kind)
	if err != nil {
		return nil, "", err
	}
	if pl.Kind != router.PlanSharded {
		return nil, sql, nil
	}
	if info.Kind == router.KindDDL {
		return nil, "", newErr(errNotSupported, "keyshard: DDL on sharded table %s cannot be prepared; send it as text", pl.Tables()[0].Table)
	}
	st.plan, st.lits, st.prefix = pl, slices.Clone(lits), leadingComments(sql, info)
	name, text := pl.Probe(lits, st.prefix)
	return s.snap.nodes[name], text, nil
}

// replanStmts routes the session's prepared statements again after a
// config reload (shard rules or nodes may have changed). A statement that
// no longer routes keeps the error for its next execution.
func (s *Session) replanStmts() {
	for _, st := range s.stmts {
		if _, _, err := s.planStmt(st, router.Classify(st.sql), true); err != nil {
			st.planErr = err
		}
	}
	for _, st := range s.textStmts {
		if _, _, err := s.planStmt(st, router.Classify(st.sql), false); err != nil || st.plan == nil {
			st.planErr = newErr(errNotSupported, "keyshard: prepared statement %s no longer routes to sharded tables after a config reload; PREPARE it again", st.sql)
			if err != nil {
				st.planErr = err
			}
		}
	}
}

// stickyReason says why running a statement of this kind ties the session
// to its connection ("" if it does not).
func stickyReason(info router.Info) string {
	switch {
	case info.Flags&router.FlagUserVar != 0:
		return "user variables"
	case info.Flags&router.FlagGetLock != 0:
		return "GET_LOCK"
	case info.Flags&router.FlagTemporary != 0:
		return "temporary tables"
	}
	switch info.Kind {
	case router.KindSelect, router.KindInsert, router.KindUpdate, router.KindDelete, router.KindReplace, router.KindShow,
		router.KindBegin, router.KindCommit, router.KindRollback, router.KindDDL:
		return ""
	}
	return "prepared " + info.Kind.String()
}

// looseConn returns a connection on node n (nil: the default node) for a
// PREPARE: the pinned one if it is on n, else a pooled one synced to the
// session. Unlike connOn it never opens a deferred transaction and is not
// refused by a transaction on another node: preparing changes no data.
// Give it back with releaseLoose.
func (s *Session) looseConn(n *backend.Node) (*backend.Conn, error) { return s.nodeConn(n, false) }

// releaseLoose gives back a connection from looseConn.
func (s *Session) releaseLoose(bc *backend.Conn) {
	if bc == s.pinned {
		return
	}
	if bc.Broken() {
		bc.Pool().Discard(bc)
		return
	}
	bc.Pool().Put(bc)
}

// routable reports whether the router plans statements of kind k.
func routable(k router.Kind) bool {
	switch k {
	case router.KindSelect, router.KindInsert, router.KindUpdate, router.KindDelete, router.KindReplace, router.KindDDL:
		return true
	}
	return false
}

// stmtFor finds the statement a COM_STMT_* packet names. id 0xffffffff
// (MariaDB: the last statement prepared) is accepted.
func (s *Session) stmtFor(p []byte, what string) (*prepared, error) {
	if len(p) < 5 {
		return nil, newErr(errMalformedPacket, "%s: short packet", what)
	}
	id := binary.LittleEndian.Uint32(p[1:])
	if id == 0xffffffff {
		id = s.lastStmt
	}
	if st := s.stmts[id]; st != nil {
		return st, nil
	}
	return nil, &mysql.MyError{Code: mysql.ER_UNKNOWN_STMT_HANDLER, State: "HY000",
		Message: "Unknown prepared statement handler (" + strconv.FormatUint(uint64(id), 10) + ") given to " + what}
}

// stmtCommand handles COM_STMT_EXECUTE, FETCH, RESET, CLOSE and
// SEND_LONG_DATA.
func (s *Session) stmtCommand(p []byte) error {
	switch p[0] {
	case mysql.COM_STMT_EXECUTE:
		st, err := s.stmtFor(p, "mysqld_stmt_execute")
		if err != nil {
			return s.fail(err)
		}
		return s.stmtExecute(st, p)
	case mysql.COM_STMT_FETCH:
		st, err := s.stmtFor(p, "mysqld_stmt_fetch")
		if err != nil {
			return s.fail(err)
		}
		return s.stmtFetch(st, p)
	case mysql.COM_STMT_SEND_LONG_DATA:
		// No answer, ever: errors surface at EXECUTE.
		st, err := s.stmtFor(p, "mysqld_stmt_send_long_data")
		if err != nil || len(p) < 7 {
			return nil
		}
		i := int(binary16(p[5:]))
		if i >= st.params {
			return nil
		}
		if st.long == nil {
			st.long = make(map[int][][]byte)
		}
		st.longSize += len(p) - 7
		if st.longSize > s.snap.cfg.MaxAllowedPacket {
			st.longErr = true
			return nil
		}
		st.long[i] = append(st.long[i], bytes.Clone(p[7:]))
		return nil
	case mysql.COM_STMT_RESET:
		st, err := s.stmtFor(p, "mysqld_stmt_reset")
		if err != nil {
			return s.fail(err)
		}
		st.clearLong()
		if err := s.closeCursor(st); err != nil {
			return s.fail(err)
		}
		// Not writeOK: the pinned connection's last status may hold the
		// previous statement's flags, which MariaDB clears for this command.
		s.buf = wire.AppendOK(s.buf[:0], 0, 0, s.status()&^perStatementStatus, 0, "")
		return s.pkt.WritePacket(s.buf)
	case mysql.COM_STMT_CLOSE:
		st, err := s.stmtFor(p, "mysqld_stmt_close")
		if err != nil {
			return nil // no answer
		}
		_ = s.closeCursor(st)
		delete(s.stmts, st.id)
		s.srv.metrics.stmtsOpen.Dec()
		return nil
	}
	return nil
}

func (st *prepared) clearLong() {
	st.long, st.longSize, st.longErr = nil, 0, false
}

// forgetStmts drops the session's statements (COM_RESET_CONNECTION,
// COM_CHANGE_USER, end of session). Cursors die with the pinned
// connection's reset.
func (s *Session) forgetStmts() {
	s.srv.metrics.stmtsOpen.Sub(float64(len(s.stmts)))
	s.stmts = nil
	s.textStmts = nil
	s.cursors = 0
}

// stmtExecute runs COM_STMT_EXECUTE.
func (s *Session) stmtExecute(st *prepared, p []byte) error {
	s.traceStmt(st, false)
	if s.splitting() && router.Writes(router.Info{Kind: st.kind}) {
		defer s.markWrite()
	}
	if err := s.closeCursor(st); err != nil {
		return s.fail(err)
	}
	defer st.clearLong()
	if st.longErr {
		return s.fail(newErr(errPacketTooLarge, "Parameter of prepared statement which is set through mysql_send_long_data() is longer than 'max_allowed_packet' bytes"))
	}
	ex, err := wire.ParseExecute(p, st.params, st.types, st.isLong)
	if err != nil {
		return s.fail(&mysql.MyError{Code: mysql.ER_WRONG_ARGUMENTS, State: "HY000", Message: "Incorrect arguments to mysqld_stmt_execute: " + err.Error()})
	}
	if ex.Bound && !bytes.Equal(st.types, ex.Types) {
		st.types = append(st.types[:0], ex.Types...)
	}
	s.mark(digest.Parse)
	cursor := ex.Flags&wire.CursorReadOnly != 0
	if st.planErr != nil {
		return s.fail(st.planErr)
	}
	if st.sticky != "" {
		s.stick(st.sticky)
	}
	if st.plan == nil {
		sql := st.sql
		if st.sessionFuncs {
			out, changed, err := s.getParser().RewriteSessionFuncs(sql, router.SessionValues{
				LastInsertID: s.lastInsertID, RowCount: s.rowCount, FoundRows: s.foundRows, ConnectionID: s.id})
			if err == nil && changed {
				sql = out
			}
		}
		return s.execOn(st.node, st, sql, ex, p, nil, cursor)
	}
	lits := make([]router.Literal, len(st.lits))
	copy(lits, st.lits)
	for i := range lits {
		if l := &lits[i]; l.Kind == router.LitParam && l.Param < st.params {
			var ok bool
			if l.Bound, ok = ex.Value(p, l.Param); !ok {
				if chunks, long := st.long[l.Param]; long {
					l.Bound = string(bytes.Join(chunks, nil)) // sent as long data
				}
			}
		}
	}
	rt := &s.rt
	err = st.plan.BindTo(rt, lits, st.prefix)
	s.mark(digest.Route)
	if err != nil {
		return s.fail(err)
	}
	if rt.Merge != "" {
		return s.fail(mergeErr(rt, st.plan))
	}
	if rt.Targets() == 1 {
		r := &rt.Routes[0]
		var params []int
		if r.Params != nil {
			params = r.Params[0]
		}
		return s.execOn(s.snap.nodes[r.Node], st, r.SQL[0], ex, p, params, cursor)
	}
	if cursor {
		return s.fail(newErr(errNotSupported, "keyshard: a cursor over %d sub-tables of sharded table %s is not supported; "+
			"add the shard key %s to WHERE to reach one sub-table", rt.Targets(), st.plan.Tables()[0].Table, st.plan.Tables()[0].Key))
	}
	if rt.Spec != nil {
		return s.merged(rt, true, false, func(l *leg) error { return s.sendExecutes(l, st, ex, p) })
	}
	return s.fanOut(rt, st.kind == router.KindSelect, false, func(l *leg) error {
		return s.sendExecutes(l, st, ex, p)
	})
}

// mergeErr refuses a statement over several sub-tables whose result
// needs a merge keyshard does not do (rt.Merge says which).
func mergeErr(rt *router.Routing, pl *router.Plan) error {
	t := pl.Tables()[0]
	return newErr(errNotSupported, "keyshard: statement over %d sub-tables of sharded table %s: %s; "+
		"add the shard key %s to WHERE to reach one sub-table", rt.Targets(), t.Table, rt.Merge, t.Key)
}

// execOn runs one execution of st as sql on node n (nil: pinned or
// default) and relays its answer. params selects the parameters sql takes
// (nil: all, in order).
func (s *Session) execOn(n *backend.Node, st *prepared, sql string, ex *wire.Execute, p []byte, params []int, cursor bool) error {
	if cursor && s.pinned != nil && n != nil && s.pinned.Pool() != n.Master {
		return s.fail(newErr(errNotSupported, "keyshard: a cursor on node %s while the session is pinned to node %s is not supported", n.Name, s.pinned.Node()))
	}
	bc, _, err := s.connFor(n, st.read && !cursor, nil)
	if err != nil {
		return s.fail(err)
	}
	start := time.Now()
	if err := s.sendExecute(bc, st, sql, ex, p, params); err != nil {
		var me *mysql.MyError
		if errors.As(err, &me) && !bc.Broken() {
			s.release(bc)
			return s.fail(err)
		}
		return s.backendFailed(bc, err)
	}
	if err := bc.Packets().Flush(); err != nil {
		bc.MarkBroken()
		return s.backendFailed(bc, &backend.Error{Kind: backend.KindLost, Node: bc.Node(), Addr: bc.Addr(), Msg: "sending command", Err: err})
	}
	s.cur.Store(bc)
	var res relayResult
	if st.kind == router.KindCall && s.caps&callCaps != callCaps {
		res, err = s.relayCall(bc, st)
	} else {
		var cols *int
		if st.cols > 0 {
			cols = &st.cols // a statement without columns (CALL) has no metadata to change
		}
		res, err = s.relayCols(bc, false, cols)
	}
	s.cur.Store(nil)
	bc.Pool().Observe(time.Since(start), err != nil || res.err != nil)
	if err != nil {
		return s.backendFailed(bc, err)
	}
	if cursor && res.err == nil && bc.Status&mysql.SERVER_STATUS_CURSOR_EXISTS != 0 {
		if bs := bc.CachedStmt(s.keyFor(st, sql)); bs != nil {
			bs.Cursor = true
			st.cursor, st.cursorSt = bc, bs
			s.cursors++
		}
	} else if st.calcFoundRows && res.resultSets > 0 {
		// relay counted the rows sent; FOUND_ROWS() wants the rows before
		// LIMIT, which only the backend knows.
		if r, err := bc.Exec("SELECT FOUND_ROWS()"); err == nil && len(r.Rows) == 1 && r.Rows[0][0] != nil {
			s.foundRows, _ = strconv.ParseUint(*r.Rows[0][0], 10, 64)
		}
	}
	s.release(bc)
	return res.err
}

// callCaps are the capabilities the answer to a CALL assumes of its
// client; backend connections always have both.
const callCaps = mysql.CLIENT_MULTI_RESULTS | mysql.CLIENT_PS_MULTI_RESULTS

// relayCall relays the answer to an EXECUTE of a CALL for a client lacking
// one of callCaps, as MariaDB answers such a client:
//   - without CLIENT_PS_MULTI_RESULTS, the result set of the OUT and INOUT
//     placeholders (the last before the final OK; its terminator has
//     SERVER_PS_OUT_PARAMS) is left out, the rest sent as they are;
//   - without CLIENT_MULTI_RESULTS, a procedure that returns a result set
//     gets ER_SP_BADSELECT.
//
// Only its terminator tells the OUT-parameter set, which has one row and
// at most st.params columns: a result set that could be it has its column
// definitions and first row held back until its next packet; the others
// stream as relayCols streams them. So memory is bounded by one row.
//
// MariaDB refuses the procedure before running it, from its body;
// keyshard learns it from the backend, which has run it: the procedure's
// effects stay, a result set the run did not reach goes unnoticed, and the
// name in the message is the CALL's (MariaDB's spelling is the one its
// connection's routine cache first saw).
func (s *Session) relayCall(bc *backend.Conn, st *prepared) (relayResult, error) {
	var res relayResult
	bp := bc.Packets()
	for {
		p, done, err := s.readResult(bc, &res)
		if done || err != nil {
			return res, err
		}
		if p == nil {
			continue
		}
		n, _, perr := wire.ReadLenEncInt(p, 0)
		if perr != nil {
			return res, lostConn(bc, perr)
		}
		held := [][]byte{bytes.Clone(p)} // column count, definitions
		for range n {
			cp, err := bp.ReadPacket()
			if err != nil {
				return res, lostConn(bc, err)
			}
			held = append(held, bytes.Clone(cp))
		}
		var row [][]byte // first row, physical packets
		p = nil
		out := false
		if n <= uint64(st.params) {
			if p, err = bp.ReadRaw(); err != nil {
				return res, lostConn(bc, err)
			}
			if len(p) == 0 {
				return res, lostConn(bc, wire.ErrMalformed)
			}
			for cont := p[0] == 0x00; cont; { // a binary row
				row = append(row, bytes.Clone(p))
				cont = len(p) == wire.MaxPayload
				if p, err = bp.ReadRaw(); err != nil {
					return res, lostConn(bc, err)
				}
			}
			if len(row) > 0 && wire.IsEOF(p) {
				ok, perr := wire.ParseOK(p)
				if perr != nil {
					return res, lostConn(bc, perr)
				}
				out = ok.Status&mysql.SERVER_PS_OUT_PARAMS != 0
				if out && s.caps&mysql.CLIENT_PS_MULTI_RESULTS == 0 {
					if ok.Status&wire.StatusMoreResultsExists == 0 {
						return res, lostConn(bc, wire.ErrMalformed) // no final OK
					}
					continue
				}
			}
		}
		if !out && s.caps&mysql.CLIENT_MULTI_RESULTS == 0 {
			return res, s.badSelect(bc, st, p, &res)
		}
		res.resultSets++
		for _, hp := range held {
			if err := s.pkt.WritePacket(hp); err != nil {
				return res, &clientError{err}
			}
		}
		if s.caps&mysql.CLIENT_DEPRECATE_EOF == 0 {
			if err := s.writeColsEOF(bc, 0); err != nil {
				return res, err
			}
		}
		for _, rp := range row {
			if err := s.pkt.WriteRaw(rp); err != nil {
				return res, &clientError{err}
			}
		}
		var rows uint64
		if row != nil {
			rows = 1
		}
		if more, err := s.relayRows(bc, p, rows, false, &res); err != nil || !more {
			return res, err
		}
	}
}

// badSelect answers ER_SP_BADSELECT for st after reading and discarding
// the rest of the backend's answer, from within a result set's rows (p, if
// set, is the next packet, already read).
func (s *Session) badSelect(bc *backend.Conn, st *prepared, p []byte, res *relayResult) error {
	bp := bc.Packets()
	rows, cont := true, false
	for done := false; !done; p = nil {
		var err error
		if p == nil {
			if p, err = bp.ReadRaw(); err != nil {
				return lostConn(bc, err)
			}
		}
		switch {
		case cont:
			cont = len(p) == wire.MaxPayload
		case len(p) == 0:
			return lostConn(bc, wire.ErrMalformed)
		case p[0] == wire.ErrHeader && len(p) < wire.MaxPayload:
			done = true
		case rows && wire.IsEOF(p), !rows && p[0] == wire.OKHeader:
			ok, perr := wire.ParseOK(p)
			if perr != nil {
				return lostConn(bc, perr)
			}
			bc.Status = ok.Status
			rows, done = false, ok.Status&wire.StatusMoreResultsExists == 0
		case rows:
			cont = len(p) == wire.MaxPayload
		default: // the column count of the next result set
			n, _, perr := wire.ReadLenEncInt(p, 0)
			if perr != nil {
				return lostConn(bc, perr)
			}
			for range n {
				if _, err := bp.ReadPacket(); err != nil {
					return lostConn(bc, err)
				}
			}
			rows = true
		}
	}
	s.rowCount = -1
	res.err = &mysql.MyError{Code: mysql.ER_SP_BADSELECT, State: "0A000",
		Message: "PROCEDURE " + callName(st.sql, st.db) + " can't return a result set in the given context"}
	s.writeError(res.err)
	return nil
}

// callName is the procedure a CALL names, as MariaDB's messages print it:
// db.name, unquoted, db defaulting to the current database db.
func callName(sql, db string) string {
	i := router.Classify(sql).Start + len("call")
	name, i := sqlIdent(sql, i)
	if j := skipBlanks(sql, i); j < len(sql) && sql[j] == '.' {
		db = name
		name, _ = sqlIdent(sql, j+1)
	}
	return db + "." + name
}

// sqlIdent reads the identifier at sql[i:], after blanks, unquoting it,
// and returns it with the offset after it.
func sqlIdent(sql string, i int) (string, int) {
	i = skipBlanks(sql, i)
	if i < len(sql) && (sql[i] == '`' || sql[i] == '"') {
		q := sql[i]
		var b []byte
		for i++; i < len(sql); i++ {
			if sql[i] == q {
				if i+1 < len(sql) && sql[i+1] == q {
					i++
				} else {
					return string(b), i + 1
				}
			}
			b = append(b, sql[i])
		}
		return string(b), i
	}
	j := i
	for j < len(sql) && (sql[j] == '_' || sql[j] == '$' || sql[j] >= 0x80 ||
		sql[j] >= '0' && sql[j] <= '9' || sql[j]|0x20 >= 'a' && sql[j]|0x20 <= 'z') {
		j++
	}
	return sql[i:j], j
}

func skipBlanks(sql string, i int) int {
	for i < len(sql) && (sql[i] == ' ' || sql[i] == '\t' || sql[i] == '\n' || sql[i] == '\r') {
		i++
	}
	return i
}

// sendExecute buffers on bc what one execution of st as sql needs: a
// PREPARE first (a round trip) if bc does not have the statement yet, its
// long data, and the EXECUTE with bc's statement id. A *mysql.MyError
// means the backend refused the PREPARE and the connection is usable.
func (s *Session) sendExecute(bc *backend.Conn, st *prepared, sql string, ex *wire.Execute, p []byte, params []int) error {
	bs, err := s.stmtOn(bc, st, sql)
	if err != nil {
		return err
	}
	return s.writeExecute(bc, bs, st, ex, p, params)
}

// stmtOn returns bc's handle of st as sql, preparing it there if needed.
func (s *Session) stmtOn(bc *backend.Conn, st *prepared, sql string) (*backend.Stmt, error) {
	key := s.keyFor(st, sql)
	if bs := bc.CachedStmt(key); bs != nil {
		return bs, nil
	}
	return s.prepareOn(bc, st.db, key, sql)
}

// writeExecute buffers st's long data and EXECUTE for bc's handle bs.
func (s *Session) writeExecute(bc *backend.Conn, bs *backend.Stmt, st *prepared, ex *wire.Execute, p []byte, params []int) error {
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

// sendExecutes buffers the executions of st for every statement of a
// fan-out leg. All are prepared first: a PREPARE is a round trip, which
// must not follow an EXECUTE whose answer is still unread.
func (s *Session) sendExecutes(l *leg, st *prepared, ex *wire.Execute, p []byte) error {
	l.pipelined = true
	handles := make([]*backend.Stmt, len(l.route.SQL))
	for i, sql := range l.route.SQL {
		bs, err := s.stmtOn(l.bc, st, sql)
		if err != nil {
			return err
		}
		handles[i] = bs
	}
	for i, sql := range l.route.SQL {
		if l.bc.CachedStmt(s.keyFor(st, sql)) != handles[i] {
			return newErr(errNotSupported, "keyshard: stmt_cache_size %d is smaller than the %d sub-tables this statement runs on node %s",
				s.snap.cfg.StmtCacheSize, len(l.route.SQL), l.bc.Node())
		}
	}
	for i, bs := range handles {
		var params []int
		if l.route.Params != nil {
			params = l.route.Params[i]
		}
		if err := s.writeExecute(l.bc, bs, st, ex, p, params); err != nil {
			return err
		}
	}
	return l.bc.Packets().Flush()
}

// prepareOn prepares sql on bc in database db (the one current at the
// client's PREPARE), restoring bc's database after.
func (s *Session) prepareOn(bc *backend.Conn, db, key, sql string) (*backend.Stmt, error) {
	cur := bc.DB()
	if db != cur && db != "" {
		if _, err := bc.Command(mysql.COM_INIT_DB, []byte(db)); err != nil {
			return nil, err
		}
		bc.SetDB(db)
	}
	bs, err := bc.Prepare(key, sql, nil)
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

// closeCursor closes st's open cursor (COM_STMT_RESET on its connection)
// and lets the connection go.
func (s *Session) closeCursor(st *prepared) error {
	bc := st.cursor
	if bc == nil {
		return nil
	}
	st.endCursor(s)
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], st.cursorSt.ID)
	_, err := bc.Command(mysql.COM_STMT_RESET, b[:])
	var me *mysql.MyError
	if err != nil && !errors.As(err, &me) {
		bc.MarkBroken()
	}
	s.release(bc)
	if err != nil && me == nil {
		return err
	}
	return nil
}

// endCursor forgets st's cursor (the caller deals with its connection).
func (st *prepared) endCursor(s *Session) {
	st.cursor.UnpinStmt(st.cursorSt)
	st.cursor = nil
	s.cursors--
}

// dropCursors forgets the cursors held on bc, which is being discarded.
func (s *Session) dropCursors(bc *backend.Conn) {
	for _, st := range s.stmts {
		if st.cursor == bc {
			st.endCursor(s)
		}
	}
}

// stmtFetch relays COM_STMT_FETCH to the connection holding st's cursor.
func (s *Session) stmtFetch(st *prepared, p []byte) error {
	bc := st.cursor
	if bc == nil {
		return s.fail(&mysql.MyError{Code: mysql.ER_STMT_HAS_NO_OPEN_CURSOR, State: "HY000",
			Message: "The statement (" + strconv.FormatUint(uint64(st.id), 10) + ") has no open cursor."})
	}
	if len(p) < 9 {
		return s.fail(newErr(errMalformedPacket, "COM_STMT_FETCH: short packet"))
	}
	binary.LittleEndian.PutUint32(p[1:], st.cursorSt.ID)
	s.traceStmt(st, true)
	s.mark(digest.Route)
	s.usedNode(bc.Node())
	if err := s.send(bc, p); err != nil {
		st.endCursor(s)
		return s.backendFailed(bc, err)
	}
	s.cur.Store(bc)
	res, err := s.relay(bc, true)
	s.cur.Store(nil)
	if err != nil {
		st.endCursor(s)
		return s.backendFailed(bc, err)
	}
	if res.err != nil || bc.Status&mysql.SERVER_STATUS_LAST_ROW_SEND != 0 {
		// The server closed the cursor.
		st.endCursor(s)
		s.release(bc)
	}
	return res.err
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
