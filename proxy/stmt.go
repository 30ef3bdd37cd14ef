package proxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/proxy/digest"
	"github.com/keyshard/keyshard/proxy/engine"
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

// stmtTable is a session's prepared statements: the binary protocol's by
// client id, the text protocol's on sharded tables by name.
type stmtTable struct {
	s     *Session
	stmts map[uint32]*prepared // binary-protocol statements by client id
	// textStmts are PREPAREd statements on sharded tables, by lower-case name.
	textStmts map[string]*prepared
	nextStmt  uint32
	lastStmt  uint32 // the last PREPARE's statement, 0 if it failed (id 0xffffffff)
}

// prepared is a client's prepared statement.
type prepared struct {
	id     uint32
	sql    string // the client's text
	db     string // database at PREPARE: the statement resolves names there
	kind   router.Kind
	read   bool // router.ReadOnly: its executions may read from a replica
	retry  bool // router.Retriable: an execution that failed before any answer runs again elsewhere
	params int
	cols   int    // column count the client last saw (PREPARE, then each EXECUTE)
	types  []byte // parameter types last bound by the client

	long     map[int][][]byte // COM_STMT_SEND_LONG_DATA chunks not yet executed, as sent
	longSize int
	longErr  bool // long data beyond max_allowed_packet

	// Routing: plan (with lits and the client's leading comments) for a
	// sharded statement; node for a /*node*/ hint; dflt for a statement
	// planned on the default node (readNode picks its node at each
	// execution, as for the text form: not the transaction's pinned
	// connection, which may be on another node). All nil: the session's
	// connection.
	plan   *router.Plan
	lits   []router.Literal
	prefix string
	node   *backend.Node
	dflt   *router.Plan
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

	// look: a query on information_schema in a sharded schema; an
	// execution whose parameter names a sharded table runs on its first
	// sub-table (see lookExecute).
	look bool

	// ref counts the statement among the client statements of its text:
	// the backend statements prepared for it are closed when the last one
	// is (backend.StmtRefs).
	ref *backend.StmtRef
}

// stmtKey is the backend cache key of sql prepared with current database
// db in session state st (sql_mode, charset: they change how a statement
// is parsed, so sessions in different states never share a handle).
func stmtKey(db string, st *backend.State, sql string) string {
	return db + "\x00" + st.Key() + "\x00" + sql
}

// keyFor is stmtKey of sql for st in the session's current state, computed
// once per text and state rather than on every EXECUTE.
func (t *stmtTable) keyFor(st *prepared, sql string) string {
	s := t.s
	if st.keySt != s.vars.State || st.keySQL != sql {
		st.keySt, st.keySQL, st.key = s.vars.State, sql, stmtKey(st.db, s.vars.State, sql)
	}
	return st.key
}

func (st *prepared) isLong(i int) bool { _, ok := st.long[i]; return ok }

// stmtPrepare answers COM_STMT_PREPARE: the statement is prepared on a
// backend (the default node, or for a sharded statement the node of its
// first sub-table) to learn its parameter and column definitions, which
// are relayed with keyshard's statement id.
// maxSessionStmts caps a session's open prepared statements (MariaDB's
// default max_prepared_stmt_count, which the server applies to all
// sessions together).
const maxSessionStmts = 16382

func (t *stmtTable) stmtPrepare(p []byte) error {
	s := t.s
	sql := string(p[1:])
	info := router.Classify(sql)
	if err := s.checkBlack(sql, info); err != nil {
		return s.fail(err)
	}
	if err := s.mayRun(sql, info); err != nil {
		return s.fail(err)
	}
	if len(t.stmts) >= maxSessionStmts {
		// As MariaDB's max_prepared_stmt_count, for one session: a client
		// that never closes its statements is stopped before it holds a
		// backend's worth.
		return s.fail(&mysql.MyError{Code: mysql.ER_MAX_PREPARED_STMT_COUNT_REACHED, State: "42000",
			Message: fmt.Sprintf("Can't create more than max_prepared_stmt_count statements (current value: %d): "+
				"keyshard's limit per session; close the statements no longer used", maxSessionStmts)})
	}
	st := &prepared{sql: sql, db: s.vars.DB, kind: info.Kind, read: router.ReadOnly(info), retry: router.Retriable(info),
		sticky:        router.StickyPrepared(info),
		sessionFuncs:  info.Flags&router.FlagSessionFunc != 0,
		calcFoundRows: info.Flags&router.FlagCalcFoundRows != 0}
	st.dig.Key = string(router.DigestKey(nil, s.vars.DB, sql, digest.MaxText))
	st.look = s.route != nil && s.route.Sharded() && info.Kind == router.KindSelect && lookable(sql, info)
	node, text, err := t.planStmt(st, info, true)
	if err != nil {
		return s.fail(err)
	}
	st.id = t.nextStmt + 1
	st.ref = s.srv.stmtRefs.Hold(st.db + "\x00" + sql)
	s.eng.Sharded = st.plan // column definitions name the logical table
	bs, err := s.eng.Prepare(node, st.read, t.keyFor(st, text), text, st.ref, st.id)
	s.eng.Sharded = nil
	if err != nil {
		s.srv.stmtRefs.Drop(st.ref)
		t.lastStmt = 0
		return err
	}
	t.nextStmt = st.id
	st.params, st.cols = bs.Params, bs.Cols
	if t.stmts == nil {
		t.stmts = make(map[uint32]*prepared)
	}
	t.stmts[st.id] = st
	t.lastStmt = st.id
	s.srv.metrics.stmtsOpen.Inc()
	return nil
}

// planStmt routes prepared statement st with the session's routing: a
// /*node*/ hint sets st.node; a statement on sharded tables gets st.plan.
// It returns the node to prepare on (nil: the default node) and the text
// to prepare there (a sharded statement's first sub-table). hints false
// ignores /*node*/ hints (a text PREPARE does).
func (t *stmtTable) planStmt(st *prepared, info router.Info, hints bool) (*backend.Node, string, error) {
	s := t.s
	st.node, st.plan, st.lits, st.planErr, st.dflt = nil, nil, nil, nil, nil
	if s.route == nil || !s.route.Sharded() {
		return nil, st.sql, nil
	}
	sql := st.sql
	if hints {
		n, ok, err := s.hintNode(sql[:info.Start])
		if err != nil {
			return nil, "", err
		}
		if ok {
			st.node = n
			return n, sql, nil
		}
	}
	if !router.Routed(info.Kind) {
		return nil, sql, nil
	}
	pl, lits, err := s.route.Plan(s.getParser(), sql, st.db, info.Kind)
	if err != nil {
		return nil, "", err
	}
	if pl.Kind != router.PlanSharded {
		if pl.Kind == router.PlanDefault && s.node != nil {
			st.dflt = pl
			return s.readNode(pl, s.node), sql, nil
		}
		return nil, sql, nil
	}
	if info.Kind == router.KindDDL {
		return nil, "", ddlPrepareErr(pl)
	}
	st.plan, st.lits, st.prefix = pl, slices.Clone(lits), leadingComments(sql, info)
	name, text := pl.Probe(lits, st.prefix)
	return s.nodes[name], text, nil
}

// replanStmts routes the session's prepared statements again after a
// config reload (shard rules or nodes may have changed). A statement that
// no longer routes keeps the error for its next execution.
func (t *stmtTable) replanStmts() {
	for _, st := range t.stmts {
		if _, _, err := t.planStmt(st, router.Classify(st.sql), true); err != nil {
			st.planErr = err
		}
	}
	for _, st := range t.textStmts {
		if _, _, err := t.planStmt(st, router.Classify(st.sql), false); err != nil || st.plan == nil {
			st.planErr = newErr(errNotSupported, "keyshard: prepared statement %s no longer routes to sharded tables after a config reload; PREPARE it again", st.sql)
			if err != nil {
				st.planErr = err
			}
		}
	}
}

// ddlPrepareErr refuses to prepare DDL on a sharded table.
func ddlPrepareErr(pl *router.Plan) error {
	return newErr(errNotSupported, "keyshard: DDL on %s cannot be prepared; send it as text", pl.Tables()[0].Named())
}

// stmtFor finds the statement a COM_STMT_* packet names. id 0xffffffff
// (MariaDB: the last statement prepared) is accepted.
func (t *stmtTable) stmtFor(p []byte, what string) (*prepared, error) {
	if len(p) < 5 {
		return nil, newErr(errMalformedPacket, "%s: short packet", what)
	}
	id := binary.LittleEndian.Uint32(p[1:])
	if id == 0xffffffff {
		id = t.lastStmt
	}
	if st := t.stmts[id]; st != nil {
		return st, nil
	}
	return nil, &mysql.MyError{Code: mysql.ER_UNKNOWN_STMT_HANDLER, State: "HY000",
		Message: "Unknown prepared statement handler (" + strconv.FormatUint(uint64(id), 10) + ") given to " + what}
}

// stmtCommand handles COM_STMT_EXECUTE, FETCH, RESET, CLOSE and
// SEND_LONG_DATA.
func (t *stmtTable) stmtCommand(p []byte) error {
	s := t.s
	switch p[0] {
	case mysql.COM_STMT_EXECUTE:
		st, err := t.stmtFor(p, "mysqld_stmt_execute")
		if err != nil {
			return s.fail(err)
		}
		return t.stmtExecute(st, p)
	case comStmtBulkExecute:
		st, err := t.stmtFor(p, "mysqld_stmt_bulk_execute")
		if err != nil {
			return s.fail(err)
		}
		return t.stmtBulk(st, p)
	case mysql.COM_STMT_FETCH:
		st, err := t.stmtFor(p, "mysqld_stmt_fetch")
		if err != nil {
			return s.fail(err)
		}
		return t.stmtFetch(st, p)
	case mysql.COM_STMT_SEND_LONG_DATA:
		// No answer, ever: errors surface at EXECUTE.
		st, err := t.stmtFor(p, "mysqld_stmt_send_long_data")
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
		st, err := t.stmtFor(p, "mysqld_stmt_reset")
		if err != nil {
			return s.fail(err)
		}
		st.clearLong()
		if err := t.closeCursor(st); err != nil {
			return s.fail(err)
		}
		// Not writeOK: the pinned connection's last status may hold the
		// previous statement's flags, which MariaDB clears for this command.
		return s.cl.OK(0, 0, s.lease.Status()&^engine.PerStatementStatus, 0, "")
	case mysql.COM_STMT_CLOSE:
		st, err := t.stmtFor(p, "mysqld_stmt_close")
		if err != nil {
			return nil // no answer
		}
		_ = t.closeCursor(st)
		delete(t.stmts, st.id)
		s.srv.stmtRefs.Drop(st.ref)
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
func (t *stmtTable) forgetStmts() {
	s := t.s
	s.srv.metrics.stmtsOpen.Sub(float64(len(t.stmts)))
	for _, st := range t.stmts {
		s.srv.stmtRefs.Drop(st.ref)
	}
	t.stmts = nil
	t.textStmts = nil
}

// stmtExecute runs COM_STMT_EXECUTE.
func (t *stmtTable) stmtExecute(st *prepared, p []byte) error {
	s := t.s
	s.traceStmt(st, false)
	s.limit.arm(s.limit.of(st.sql, router.Info{Kind: st.kind}))
	if router.Writes(router.Info{Kind: st.kind}) {
		if s.lease.Tracking() {
			defer s.lease.MarkWrite()
		}
		if s.srv.rcache.on.Load() {
			defer s.cache.wrote(s.cache.written(st.sql, router.Classify(st.sql)))
		}
	}
	if err := t.closeCursor(st); err != nil {
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
	s.tr.mark(digest.Parse)
	x := &execution{s: s, st: st, ex: ex, p: p, cursor: ex.Flags&wire.CursorReadOnly != 0}
	if _, err := heldStatement(s, st.plan); err != nil {
		// (After a wait the session took the new layout: rebind planned
		// st again.)
		return s.fail(err)
	}
	if st.planErr != nil {
		return s.fail(st.planErr)
	}
	if st.sticky != "" {
		s.lease.Stick(st.sticky)
	}
	if st.kind == router.KindDDL && s.route != nil && s.route.Sharded() {
		if err := ddlCommit(s, st.sql, router.Classify(st.sql)); err != nil {
			return s.fail(err)
		}
	}
	if s.lease.Branches() > 0 {
		switch st.kind {
		case router.KindCommit, router.KindRollback, router.KindBegin, router.KindDDL, router.KindCall, router.KindLockTables,
			router.KindOther, router.KindSet:
			return s.fail(newErr(errNotSupported, "keyshard: this prepared statement would end a transaction over several nodes on one "+
				"node only; send it as text (the transaction is still open)"))
		}
	}
	if st.plan == nil {
		if st.look {
			if handled, err := s.lookExecute(x); handled {
				return err
			}
		}
		sql := st.sql
		if st.sessionFuncs {
			out, changed, err := s.getParser().RewriteSessionFuncs(sql, s.sessionValues())
			if err == nil && changed {
				sql = out
			}
		}
		n := st.node
		if n == nil && st.dflt != nil {
			n = s.readNode(st.dflt, s.node)
		}
		return x.run(n, sql, nil)
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
	err = s.bindPlan(st.plan, rt, lits, st.prefix)
	s.tr.mark(digest.Route)
	if err != nil {
		return s.fail(err)
	}
	if rt.Join != nil {
		return s.eng.Join(joinPlanner(s), rt.Join, lits, true)
	}
	return s.eng.Route(rt, st.plan, engine.Run{Kind: st.kind, Read: st.read, Cursor: x.cursor, Send: x.sendLeg,
		One: func(n *backend.Node, r *router.Route) error {
			var params []int
			if r.Params != nil {
				params = r.Params[0]
			}
			return x.run(n, r.SQL[0], params)
		}})
}

// closeCursor closes st's open cursor (COM_STMT_RESET on its connection)
// and lets the connection go.
func (t *stmtTable) closeCursor(st *prepared) error {
	s := t.s
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
	s.lease.Release(bc)
	if err != nil && me == nil {
		return err
	}
	return nil
}

// endCursor forgets st's cursor (the caller deals with its connection).
func (st *prepared) endCursor(s *Session) {
	st.cursor.UnpinStmt(st.cursorSt)
	st.cursor = nil
	s.lease.CursorClosed()
}

// dropCursors forgets the cursors held on bc, which is being discarded.
func (t *stmtTable) dropCursors(bc *backend.Conn) {
	s := t.s
	for _, st := range t.stmts {
		if st.cursor == bc {
			st.endCursor(s)
		}
	}
}

// stmtFetch relays COM_STMT_FETCH to the connection holding st's cursor.
func (t *stmtTable) stmtFetch(st *prepared, p []byte) error {
	s := t.s
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
	s.tr.mark(digest.Route)
	s.tr.usedNode(bc.Node())
	return s.eng.Fetch(bc, p, func() { st.endCursor(s) })
}
