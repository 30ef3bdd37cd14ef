package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/digest"
	"github.com/keyshard/keyshard/router"
	"github.com/pingcap/tidb/pkg/parser/charset"
	"go.uber.org/zap"
)

// Session is one client connection. Its goroutine is the only one that
// touches its fields, except the atomics used by KILL and shutdown.
//
// Backend connections: outside a transaction a statement takes a pooled
// connection, syncs it to the session's state (database, charset, session
// variables) and gives it back when the answer has been relayed. The
// connection stays pinned to the session while the server reports a
// transaction or autocommit off, or the session holds state that lives only
// on that connection (user variables, GET_LOCK, LOCK TABLES, temporary
// tables, PREPARE).
type Session struct {
	srv        *Server
	snap       *snapshot // the configuration this session runs on
	id         uint32
	nc         net.Conn
	pkt        *wire.Conn
	remoteHost string
	tls        bool
	log        *zap.Logger

	caps      uint32
	zstdLevel int // the client's zstd_compression_level
	user      string
	userConns *atomic.Int64 // the user's session count, which this session is in
	collation uint8
	schema    *config.SchemaConfig
	node      *backend.Node

	db    string
	state *backend.State
	multi bool

	pinned     *backend.Conn
	sticky     string // why the connection is pinned for good ("" if not)
	lockTables bool
	// txBegin holds a BEGIN / START TRANSACTION not sent yet: with sharded
	// tables a transaction opens on the node of its first statement.
	txBegin string

	route *router.Schema // the user's routing; nil without a schema

	rwSplit   bool  // reads may go to replicas (user and schema allow it)
	lastWrite int64 // unix nanos of the session's last write (read-your-writes)

	lastInsertID uint64
	rowCount     int64
	foundRows    uint64

	parser  *router.Parser
	rt      router.Routing // the current statement's routing (reused)
	tr      trace          // the current statement's digest, stages, rows
	dkey    []byte         // scratch for digest keys (router.DigestKey)
	stageNs stageTotals    // stage time of this session's statements
	buf     []byte
	xbuf    []byte // EXECUTE packets rebuilt for a backend

	stmts map[uint32]*prepared // binary-protocol statements by client id
	// textStmts are PREPAREd statements on sharded tables, by lower-case name.
	textStmts map[string]*prepared
	nextStmt  uint32
	lastStmt  uint32 // the last PREPARE's statement, 0 if it failed (id 0xffffffff)
	cursors   int    // statements with an open cursor (they pin the connection)

	cur    atomic.Pointer[backend.Conn] // backend connection running a statement, for KILL QUERY
	killed atomic.Bool
	busy   atomic.Bool
}

// startSession binds the session to its user's schema and default node and
// selects db (empty for none).
func (s *Session) startSession(db string) error {
	s.schema = nil
	s.node = nil
	s.route = nil
	s.txBegin = ""
	s.rwSplit, s.lastWrite = false, 0
	s.snap = s.srv.snap.Load()
	if sc, ok := s.snap.cfg.SchemaFor(s.user); ok {
		s.bindSchema(sc)
	}
	s.state = s.srv.stateFor(s.collation)
	s.multi = s.caps&mysql.CLIENT_MULTI_STATEMENTS != 0
	s.db = ""
	s.lastInsertID, s.rowCount, s.foundRows = 0, 0, 0
	if db != "" {
		if err := s.useDB(db); err != nil {
			return err
		}
	}
	return nil
}

// rebind moves the session to a reloaded configuration (between
// statements, outside a transaction): its schema, default node, routing
// and the plans of its prepared statements follow the new snapshot.
func (s *Session) rebind(snap *snapshot) {
	s.snap = snap
	s.schema, s.node, s.route, s.rwSplit = nil, nil, nil, false
	if sc, ok := snap.cfg.SchemaFor(s.user); ok {
		s.bindSchema(sc)
	}
	s.replanStmts()
}

// bindSchema binds the session to sc, its user's schema.
func (s *Session) bindSchema(sc *config.SchemaConfig) {
	s.schema = sc
	s.node = s.snap.nodes[sc.Default]
	s.route = s.snap.routes[s.user]
	uc, _ := s.snap.cfg.UserPassword(s.user)
	s.rwSplit = boolOr(sc.RWSplit, true) && boolOr(uc.RWSplit, true)
}

// endSession returns or cleans the pinned connection.
func (s *Session) endSession() {
	s.forgetStmts()
	if s.pinned == nil {
		return
	}
	bc := s.pinned
	s.pinned = nil
	s.sticky = ""
	s.lockTables = false
	s.txBegin = ""
	pool := bc.Pool()
	if bc.Broken() {
		pool.Discard(bc)
		return
	}
	// Roll back, drop temporary tables, locks and variables in one command.
	_ = bc.SetDeadline(time.Now().Add(5 * time.Second))
	err := bc.Reset()
	_ = bc.SetDeadline(time.Time{})
	if err != nil {
		pool.Discard(bc)
		return
	}
	pool.Put(bc)
}

// run is the command loop.
func (s *Session) run() {
	defer s.endSession()
	for {
		s.pkt.Seq = 0
		p, err := s.pkt.ReadPacket()
		if err != nil {
			if errors.Is(err, wire.ErrPacketTooLarge) {
				s.writeError(newErr(errPacketTooLarge, "Got a packet bigger than 'max_allowed_packet' bytes"))
				if s.pkt.Flush() == nil {
					s.lingerClose()
				}
			} else if errors.Is(err, wire.ErrSequence) {
				s.writeError(newErr(errMalformedPacket, "Got packets out of order"))
				_ = s.pkt.Flush()
			}
			return
		}
		if len(p) == 0 {
			s.writeError(newErr(errMalformedPacket, "empty command packet"))
			if s.pkt.Flush() != nil {
				return
			}
			continue
		}
		s.busy.Store(true)
		start := time.Now()
		s.tr.begin(start, s.pkt.Written)
		if snap := s.srv.snap.Load(); snap != s.snap && !s.inTx() && snap.keeps(s.pinned) {
			s.rebind(snap)
		}
		cmd := p[0]
		err = s.dispatch(cmd, p)
		d := time.Since(start)
		s.srv.metrics.observe(cmd, err, d)
		s.endStmt(cmd, p, d, err)
		s.busy.Store(false)
		if err == errQuit {
			return
		}
		if ferr := s.pkt.Flush(); ferr != nil || err == errCloseAfterReply || s.killed.Load() {
			return
		}
		if s.srv.shuttingDown.Load() && s.pinned == nil {
			return
		}
	}
}

// lingerClose ends a connection whose client may still be sending (a packet
// we refused): closing with unread input makes the kernel send a reset,
// which can destroy the error we just wrote before the client reads it. So
// shut our side, and drain what the client sends for a moment first.
func (s *Session) lingerClose() {
	if cw, ok := s.nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = s.nc.SetReadDeadline(time.Now().Add(time.Second))
	_, _ = io.Copy(io.Discard, io.LimitReader(s.nc, int64(s.snap.cfg.MaxAllowedPacket)+1<<24))
}

var (
	errQuit            = errors.New("quit")
	errCloseAfterReply = errors.New("close after reply")
)

// dispatch handles one command. It returns a non-nil error when the command
// failed (already reported to the client) so metrics can count it, errQuit
// to end the session, or errCloseAfterReply when the connection cannot go on.
func (s *Session) dispatch(cmd byte, p []byte) error {
	switch cmd {
	case mysql.COM_QUERY:
		return s.query(p)
	case mysql.COM_PING:
		return s.writeOK(0, 0)
	case mysql.COM_QUIT:
		return errQuit
	case mysql.COM_INIT_DB:
		if err := s.useDB(string(p[1:])); err != nil {
			return s.fail(err)
		}
		return s.writeUseOK()
	case mysql.COM_FIELD_LIST, mysql.COM_STATISTICS:
		return s.forward(p, nil)
	case mysql.COM_SET_OPTION:
		if len(p) < 3 {
			return s.fail(newErr(errMalformedPacket, "COM_SET_OPTION: short packet"))
		}
		switch binary16(p[1:]) {
		case 0:
			s.multi = true
		case 1:
			s.multi = false
		default:
			return s.fail(newErr(errNotSupported, "COM_SET_OPTION: unknown option %d", binary16(p[1:])))
		}
		if bc := s.pinned; bc != nil {
			// Pooled connections take the setting when next used; the
			// pinned one answers the next statement, so it takes it now.
			if err := bc.Sync(s.db, s.multi, s.state); err != nil {
				return s.backendFailed(bc, err)
			}
		}
		// Answered like the end of a result set, as MySQL and MariaDB do.
		s.appendResultEnd(0)
		return s.pkt.WritePacket(s.buf)
	case mysql.COM_RESET_CONNECTION:
		s.endSession()
		if err := s.startSession(s.db); err != nil {
			return s.fail(err)
		}
		return s.writeOK(0, 0)
	case mysql.COM_CHANGE_USER:
		if err := s.changeUser(p); err != nil {
			s.writeError(err)
			return errCloseAfterReply
		}
		return s.writeOK(0, 0)
	case mysql.COM_STMT_PREPARE:
		return s.stmtPrepare(p)
	case mysql.COM_STMT_EXECUTE, mysql.COM_STMT_FETCH, mysql.COM_STMT_RESET, mysql.COM_STMT_CLOSE, mysql.COM_STMT_SEND_LONG_DATA:
		return s.stmtCommand(p)
	case mysql.COM_PROCESS_KILL:
		if len(p) < 5 {
			return s.fail(newErr(errMalformedPacket, "COM_PROCESS_KILL: short packet"))
		}
		id := uint32(p[1]) | uint32(p[2])<<8 | uint32(p[3])<<16 | uint32(p[4])<<24
		return s.kill(id, false)
	}
	return s.fail(newErr(errUnknownCommand, "Unknown command %d", cmd))
}

// appendResultEnd puts in s.buf the packet that ends a result set keyshard
// writes itself: an EOF, or with CLIENT_DEPRECATE_EOF the 0xfe-headed OK.
func (s *Session) appendResultEnd(warnings uint16) {
	if s.caps&mysql.CLIENT_DEPRECATE_EOF != 0 {
		s.buf = wire.AppendResultEndOK(s.buf[:0], warnings, s.status())
	} else {
		s.buf = wire.AppendEOF(s.buf[:0], warnings, s.status())
	}
}

func binary16(b []byte) uint16 { return uint16(b[0]) | uint16(b[1])<<8 }

// fail reports err to the client and returns it for metrics.
func (s *Session) fail(err error) error {
	s.writeError(err)
	return err
}

func (s *Session) writeError(err error) {
	e := toMySQL(err)
	s.buf = wire.AppendErr(s.buf[:0], e.Code, e.State, e.Message)
	_ = s.pkt.WritePacket(s.buf)
}

func (s *Session) writeOK(affected, insertID uint64) error {
	s.buf = wire.AppendOK(s.buf[:0], affected, insertID, s.status(), 0, "")
	return s.pkt.WritePacket(s.buf)
}

// tracks reports whether the client asked for session-state tracking.
func (s *Session) tracks() bool { return s.caps&mysql.CLIENT_SESSION_TRACK != 0 }

// writeUseOK answers USE / COM_INIT_DB. A client tracking session state is
// told the new database, as MySQL does while session_track_schema is on
// (the default). Variable changes need nothing here: SET runs on a backend,
// which tracks them itself, and its OK is relayed.
func (s *Session) writeUseOK() error {
	if !s.tracks() {
		return s.writeOK(0, 0)
	}
	if v, ok := s.state.Get("session_track_schema"); ok && (v == "0" || strings.EqualFold(v, "'OFF'")) {
		return s.writeOK(0, 0)
	}
	var st [80]byte
	s.buf = wire.AppendOKState(s.buf[:0], 0, 0, s.status(), 0, "", wire.AppendTrackSchema(st[:0], s.db))
	return s.pkt.WritePacket(s.buf)
}

// status is the server status the client should see.
func (s *Session) status() uint16 {
	if s.txBegin != "" {
		return wire.StatusAutocommit | wire.StatusInTrans
	}
	if s.pinned != nil {
		return s.pinned.Status &^ perStatementStatus
	}
	return wire.StatusAutocommit
}

// conn returns the backend connection for a statement that is not routed
// by table: the pinned one, else one on the default node.
func (s *Session) conn() (*backend.Conn, error) { return s.connOn(nil) }

// connOn returns the backend connection for the next statement on node:
// the pinned one when it is on that node, else one from the node's pool
// synced to the session. A connection pinned by a transaction (or LOCK
// TABLES) on another node is an error: a transaction stays on one node.
// A transaction the client began is opened here, on the first node it
// needs (see txBegin).
func (s *Session) connOn(n *backend.Node) (*backend.Conn, error) { return s.nodeConn(n, true) }

// nodeConn is connOn; with tx false it neither opens a deferred
// transaction nor is refused by one on another node (see looseConn).
func (s *Session) nodeConn(n *backend.Node, tx bool) (*backend.Conn, error) {
	s.waitStart()
	bc, err := s.nodeConn1(n, tx)
	s.waitDone(bc)
	return bc, err
}

func (s *Session) nodeConn1(n *backend.Node, tx bool) (*backend.Conn, error) {
	if n == nil {
		if s.pinned != nil {
			return s.pinned, nil
		}
		n = s.node
	}
	if n == nil {
		return nil, newErr(errNoSchema, "keyshard: user '%s' has no schema in schema_list", s.user)
	}
	if s.pinned != nil {
		if s.pinned.Pool() == n.Master {
			return s.pinned, nil
		}
		if tx && (s.inTx() || s.txBegin != "") {
			return nil, newErr(errCrossNodeTx, "keyshard: this statement needs node %s, but the open transaction is on node %s; "+
				"a transaction can touch one node only (the transaction is still open)", n.Name, s.pinned.Node())
		}
	}
	bc, err := n.Master.Get(s.srv.ctx)
	if err != nil {
		return nil, err
	}
	if err := bc.Sync(s.db, s.multi, s.state); err != nil {
		if tx {
			s.release(bc)
		} else {
			s.releaseLoose(bc)
		}
		return nil, err
	}
	if tx && s.txBegin != "" {
		if _, err := bc.Exec(s.txBegin); err != nil {
			s.release(bc)
			return nil, err
		}
		s.txBegin = ""
	}
	return bc, nil
}

// inTx reports whether the pinned connection holds a transaction or table
// locks, which tie the session to its node.
func (s *Session) inTx() bool {
	return s.pinned != nil && (s.pinned.Status&wire.StatusInTrans != 0 || s.pinned.Status&wire.StatusAutocommit == 0 || s.lockTables)
}

// release keeps bc pinned if the session needs it, else returns it.
func (s *Session) release(bc *backend.Conn) {
	pool := bc.Pool()
	if bc.Broken() {
		if s.cursors > 0 {
			s.dropCursors(bc)
		}
		if s.pinned == bc {
			s.pinned = nil
		}
		pool.Discard(bc)
		return
	}
	if s.pinned != nil && s.pinned != bc {
		// A statement on another node while the session keeps state on
		// its pinned connection: this one goes back, unless it was left
		// inside a transaction (it cannot be pinned too), then it is closed,
		// which rolls the transaction back.
		if bc.Status&wire.StatusInTrans != 0 || bc.Status&wire.StatusAutocommit == 0 {
			pool.Discard(bc)
			return
		}
		pool.Put(bc)
		return
	}
	if bc.Status&wire.StatusInTrans != 0 || bc.Status&wire.StatusAutocommit == 0 || s.sticky != "" || s.lockTables || s.cursors > 0 {
		s.pinned = bc
		return
	}
	s.pinned = nil
	pool.Put(bc)
}

// useDB changes the current database after checking it on the backend.
//
// The check is a read: outside a transaction it may run on a replica, so
// that clients can connect while the master is down.
func (s *Session) useDB(db string) error {
	bc, _, err := s.connFor(nil, true, nil)
	if err != nil {
		return err
	}
	_, err = bc.Command(mysql.COM_INIT_DB, []byte(db))
	if err == nil {
		s.db = db
		bc.SetDB(db)
	}
	s.release(bc)
	return err
}

// query handles COM_QUERY.
func (s *Session) query(p []byte) error {
	sql := unsafe.String(unsafe.SliceData(p[1:]), len(p)-1) // valid until the next client read
	info := router.Classify(sql)
	if info.Flags&router.FlagMulti == 0 && isAdminCandidate(sql[info.Start:]) {
		if handled, err := s.adminStmt(sql[info.Start:]); handled {
			return err
		}
	}
	s.tr.entry = s.digestOf(sql, s.route != nil && s.route.Sharded() && info.Flags&router.FlagMulti == 0)
	s.mark(digest.Parse)
	if s.srv.black.Load().blocked(sql[info.Start:]) {
		return s.fail(blacklisted(sql))
	}
	if s.splitting() && router.Writes(info) {
		defer s.markWrite()
	}
	if info.Flags&router.FlagMulti != 0 && !s.multi {
		// Without multi-statements the server reads one statement: a
		// compound one (CREATE PROCEDURE ... BEGIN ...; ...; END) or a
		// syntax error with the server's own message. The backend
		// connection is synced to the client's setting: let it answer.
		info.Flags &^= router.FlagMulti
	}
	if info.Flags&router.FlagMulti != 0 && s.route != nil && s.route.Sharded() {
		if name := s.route.MentionsSharded(sql); name != "" {
			// A batch goes to one node as it is: refuse it rather than run
			// it where the sharded table does not exist.
			return s.fail(newErr(errNotSupported, "keyshard: a multi-statement batch that names sharded table %s is not routed; "+
				"send its statements one by one", name))
		}
	}
	if info.Start < len(sql) && sql[info.Start]|0x20 == 'e' {
		if rest, ok := cutPrefixFold(sql[info.Start:], "explain shard "); ok {
			return s.explainShard(rest)
		}
	}
	switch info.Kind {
	case router.KindKill:
		return s.killStmt(sql[info.Start:])
	case router.KindUse:
		db := strings.Clone(parseUse(sql[info.Start:]))
		if info.Flags&router.FlagMulti == 0 && db != "" {
			if err := s.useDB(db); err != nil {
				return s.fail(err)
			}
			return s.writeUseOK()
		}
	case router.KindSet:
		if info.Flags&router.FlagMulti == 0 {
			return s.set(p, sql)
		}
	case router.KindLockTables:
		s.lockTables = true
	case router.KindPrepare, router.KindExecute:
		s.stick("PREPARE")
	}
	if info.Flags&router.FlagUserVar != 0 {
		s.stick("user variables")
	}
	if info.Flags&router.FlagGetLock != 0 {
		s.stick("GET_LOCK")
	}
	if info.Flags&router.FlagTemporary != 0 {
		s.stick("temporary tables")
	}
	if info.Flags&router.FlagMulti != 0 {
		// Effects of later statements are unknown to the classifier: keep
		// the connection, as for user variables.
		s.stick("multi-statements")
	}
	if s.route != nil && s.route.Sharded() && info.Flags&router.FlagMulti == 0 {
		if handled, err := s.routed(p, sql, info); handled {
			return err
		}
	}
	if info.Flags&router.FlagSessionFunc != 0 && info.Flags&router.FlagMulti == 0 {
		out, changed, err := s.getParser().RewriteSessionFuncs(sql, router.SessionValues{
			LastInsertID: s.lastInsertID, RowCount: s.rowCount, FoundRows: s.foundRows, ConnectionID: s.id})
		if err == nil && changed {
			return s.forward(nil, &out, info)
		}
	}
	err := s.forward(p, nil, info)
	if info.Kind == router.KindUnlockTables && err == nil {
		s.lockTables = false
	}
	return err
}

func (s *Session) stick(why string) {
	if s.sticky == "" {
		s.sticky = why
	}
}

func (s *Session) getParser() *router.Parser {
	if s.parser == nil {
		s.parser = router.NewParser()
	}
	return s.parser
}

// forward sends a command to the backend and relays the answer. raw is the
// client's command packet; or rewritten is a query to send instead.
//
// A read-only statement that fails before any answer arrived, on a pooled
// connection that was idle (the server may have closed it), is retried once
// on a fresh connection: nothing was executed or sent to the client.
func (s *Session) forward(raw []byte, rewritten *string, infos ...router.Info) error {
	return s.forwardTo(nil, raw, rewritten, infos...)
}

// forwardTo is forward on node n (nil: the pinned connection, else the
// default node).
func (s *Session) forwardTo(n *backend.Node, raw []byte, rewritten *string, infos ...router.Info) error {
	retriable := s.pinned == nil && s.txBegin == "" && (raw == nil || raw[0] != mysql.COM_QUERY ||
		len(infos) > 0 && (infos[0].Kind == router.KindSelect || infos[0].Kind == router.KindShow) &&
			infos[0].Flags&(router.FlagMulti|router.FlagGetLock|router.FlagUserVar) == 0)
	read := len(infos) > 0 && (raw == nil || raw[0] == mysql.COM_QUERY) && router.ReadOnly(infos[0])
	var skip *backend.Pool
	for attempt := 0; ; attempt++ {
		bc, rp, err := s.connFor(n, read, skip)
		if err != nil {
			return s.fail(err)
		}
		start := time.Now()
		bp := bc.Packets()
		if rewritten != nil {
			err = bp.WriteCommandString(mysql.COM_QUERY, *rewritten)
		} else {
			err = bp.WriteCommand(raw[0], raw[1:])
		}
		if err == nil {
			err = bp.Flush()
		}
		var res relayResult
		if err != nil {
			bc.MarkBroken()
			err = &backend.Error{Kind: backend.KindLost, Node: bc.Node(), Addr: bc.Addr(), Msg: "sending command", Err: err}
		} else {
			s.cur.Store(bc)
			if raw != nil && raw[0] == mysql.COM_STATISTICS {
				err = s.relayOne(bc)
				res.started = true
			} else {
				res, err = s.relay(bc, raw != nil && raw[0] == mysql.COM_FIELD_LIST)
			}
			s.cur.Store(nil)
		}
		bc.Pool().Observe(time.Since(start), err != nil || res.err != nil)
		if err != nil {
			if retriable && attempt == 0 && !res.started && backend.KindOf(err) == backend.KindLost {
				if rp != nil {
					skip = rp
				}
				s.release(bc) // broken: discarded
				s.mark(digest.Backend)
				continue
			}
			return s.backendFailed(bc, err)
		}
		if len(infos) > 0 && infos[0].Flags&router.FlagCalcFoundRows != 0 && res.resultSets > 0 {
			if r, err := bc.Exec("SELECT FOUND_ROWS()"); err == nil && len(r.Rows) == 1 && r.Rows[0][0] != nil {
				s.foundRows, _ = strconv.ParseUint(*r.Rows[0][0], 10, 64)
			}
		}
		s.release(bc)
		return res.err
	}
}

// backendFailed handles an error that left bc unusable or the client gone.
func (s *Session) backendFailed(bc *backend.Conn, err error) error {
	var ce *clientError
	if errors.As(err, &ce) {
		bc.MarkBroken()
		s.release(bc)
		return errCloseAfterReply
	}
	wasTx := s.pinned == bc && bc.Status&wire.StatusInTrans != 0
	bc.MarkBroken()
	s.release(bc)
	s.sticky, s.lockTables = "", false
	if s.killed.Load() {
		err = newErr(errKilled, "Query execution was interrupted (connection killed)")
	}
	s.writeError(err)
	if wasTx {
		// The transaction is gone with the backend connection: the client
		// must not go on as if it were still open.
		s.writeError(newErr(errTxLost, "keyshard: node %s: connection lost inside a transaction; it was rolled back", bc.Node()))
		return errCloseAfterReply
	}
	return err
}

// relayOne relays a single-packet answer (COM_STATISTICS).
func (s *Session) relayOne(bc *backend.Conn) error {
	p, err := bc.Packets().ReadPacket()
	if err != nil {
		return &backend.Error{Kind: backend.KindLost, Node: bc.Node(), Addr: bc.Addr(), Msg: "reading answer", Err: err}
	}
	s.firstByte()
	if err := s.pkt.WritePacket(p); err != nil {
		return &clientError{err}
	}
	return nil
}

// parseUse extracts the database name of "USE db".
func parseUse(stmt string) string {
	rest := strings.TrimSpace(stmt[3:])
	rest = strings.TrimRight(rest, "; \t\r\n")
	if len(rest) >= 2 && rest[0] == '`' && rest[len(rest)-1] == '`' {
		return strings.ReplaceAll(rest[1:len(rest)-1], "``", "`")
	}
	if strings.ContainsAny(rest, " \t\n/#`'\"") {
		return ""
	}
	return rest
}

// set handles a SET statement: it runs on a synced connection, then the
// session records what changed so other pooled connections can replay it.
func (s *Session) set(p []byte, sql string) error {
	items, perr := s.getParser().ParseSet(sql)
	var names *router.SetItem
	var sysvars []string
	if perr != nil {
		s.stick("unparsed SET")
	}
	for i := range items {
		switch it := &items[i]; it.Kind {
		case router.SetUserVar:
			s.stick("user variables")
		case router.SetOneShot:
			s.stick("SET TRANSACTION")
		case router.SetNames:
			names = it
		case router.SetSysVar:
			sysvars = append(sysvars, it.Name)
		}
	}
	bc, err := s.conn()
	if err != nil {
		return s.fail(err)
	}
	bp := bc.Packets()
	if err := bp.WriteCommand(p[0], p[1:]); err != nil || bp.Flush() != nil {
		bc.MarkBroken()
		return s.backendFailed(bc, &backend.Error{Kind: backend.KindLost, Node: bc.Node(), Addr: bc.Addr(), Msg: "sending SET"})
	}
	res, err := s.relay(bc, false)
	if err != nil {
		return s.backendFailed(bc, err)
	}
	if res.err == nil && (names != nil || len(sysvars) > 0) {
		st := s.state
		if names != nil {
			cs := names.Name
			if cs == "" {
				cs = s.srv.baseState.Charset
			}
			st = st.WithNames(cs, names.Collation)
		}
		if len(sysvars) > 0 {
			q := "SELECT @@SESSION." + strings.Join(sysvars, ", @@SESSION.")
			r, err := bc.Exec(q)
			if err != nil || len(r.Rows) != 1 || len(r.Rows[0]) != len(sysvars) {
				// Cannot know the values: keep this connection for good.
				s.stick("SET of unreadable variable")
			} else {
				vars := make([]backend.Var, len(sysvars))
				for i, name := range sysvars {
					vars[i] = backend.Var{Name: name, Value: literal(r.Rows[0][i])}
				}
				st = st.WithVars(vars...)
			}
		}
		s.state = st
		bc.SetState(st)
	}
	s.release(bc)
	return res.err
}

// literal renders a variable's value as read back from the server.
func literal(v *string) string {
	if v == nil {
		return "NULL"
	}
	if _, err := strconv.ParseInt(*v, 10, 64); err == nil {
		return *v
	}
	if _, err := strconv.ParseUint(*v, 10, 64); err == nil {
		return *v
	}
	if _, err := strconv.ParseFloat(*v, 64); err == nil && !strings.ContainsAny(*v, "eEinfINF") {
		return *v
	}
	return backend.Quote(*v)
}

// killStmt handles KILL [CONNECTION | QUERY] id.
func (s *Session) killStmt(stmt string) error {
	f := strings.Fields(strings.TrimRight(stmt, "; \t\r\n"))
	queryOnly := false
	if len(f) == 3 {
		switch strings.ToUpper(f[1]) {
		case "QUERY":
			queryOnly = true
		case "CONNECTION":
		default:
			return s.fail(&mysql.MyError{Code: mysql.ER_PARSE_ERROR, State: "42000", Message: "You have an error in your SQL syntax near '" + f[1] + "'"})
		}
		f = f[1:]
	}
	if len(f) != 2 {
		return s.fail(&mysql.MyError{Code: mysql.ER_PARSE_ERROR, State: "42000", Message: "You have an error in your SQL syntax: KILL [CONNECTION | QUERY] id"})
	}
	id, err := strconv.ParseUint(f[1], 10, 32)
	if err != nil {
		return s.fail(&mysql.MyError{Code: mysql.ER_PARSE_ERROR, State: "42000", Message: "You have an error in your SQL syntax near '" + f[1] + "'"})
	}
	return s.kill(uint32(id), queryOnly)
}

// kill ends another session (or only its running statement).
func (s *Session) kill(id uint32, queryOnly bool) error {
	v, ok := s.srv.sessions.Load(id)
	if ok && v.(*Session).killed.Load() {
		ok = false // killed and on its way out
	}
	if !ok {
		return s.fail(newErr(errNoSuchThread, "Unknown thread id: %d", id))
	}
	t := v.(*Session)
	if t.user != s.user && !s.snap.cfg.IsAdmin(s.user) {
		return s.fail(newErr(errNoSuchThread, "You are not owner of thread %d", id))
	}
	if t == s {
		if queryOnly {
			return s.writeOK(0, 0)
		}
		s.killed.Store(true)
		return s.fail(newErr(errKilled, "Connection was killed"))
	}
	t.interrupt(!queryOnly)
	return s.writeOK(0, 0)
}

// interrupt stops the running statement (KILL QUERY on its backend) and,
// with closeConn, ends the session.
func (s *Session) interrupt(closeConn bool) {
	if closeConn {
		s.killed.Store(true)
	}
	if bc := s.cur.Load(); bc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		if err := bc.Pool().KillQuery(ctx, bc.ThreadID()); err != nil {
			s.log.Warn("KILL QUERY on backend failed", zap.String("node", bc.Node()), zap.Error(err))
		}
		cancel()
	}
	if closeConn {
		// Both directions: a session blocked writing to a client that stopped
		// reading must give up too.
		_ = s.nc.SetDeadline(time.Now())
		if !s.busy.Load() {
			_ = s.nc.Close()
		}
	}
}

// clientError marks an error writing to the client.
type clientError struct{ err error }

func (e *clientError) Error() string { return "client write: " + e.err.Error() }
func (e *clientError) Unwrap() error { return e.err }

// collationState maps a handshake collation id to a session State.
func collationNames(id uint8) (cs, coll string) {
	c, err := charset.GetCollationByID(int(id))
	if err != nil || c == nil {
		return "utf8mb4", ""
	}
	if strings.Contains(c.Name, "_0900_") {
		// MySQL 8 collations MariaDB does not know: keep the charset.
		return c.CharsetName, ""
	}
	return c.CharsetName, c.Name
}
