package proxy

import (
	"errors"
	"fmt"
	"io"
	"math"
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
	"github.com/keyshard/keyshard/proxy/engine"
	"github.com/keyshard/keyshard/router"
	"github.com/pingcap/tidb/pkg/parser/charset"
	"go.uber.org/zap"
)

// Session is one client connection: who the client is, what it
// negotiated, and its session state (database, charset, variables,
// prepared statements, the last statement's LAST_INSERT_ID() and friends).
// Which backend connections it holds, and why, is its lease's business;
// how a statement runs is its engine's (package engine).
//
// Its goroutine is the only one that touches its fields, except the
// atomics used by KILL and shutdown.
type Session struct {
	srv        *Server
	snap       *snapshot                // the configuration this session runs on
	nodes      map[string]*backend.Node // snap's nodes as this user reaches them (nodesFor)
	deny       router.Deny              // statement classes the user may not run (mayRun)
	id         uint32
	nc         net.Conn
	pkt        *wire.Conn
	remoteHost string
	clientAddr string // host:port, for the process list
	tls        bool
	log        *zap.Logger

	caps     uint32
	scramble []byte // the greeting's (or last auth switch's): COM_CHANGE_USER answers it
	greetExt uint32 // MariaDB extended capabilities the greeting offered
	// greetMariaDB: the greeting said MariaDB (the client expects its
	// errors, e.g. 1969 for a statement past its time limit).
	greetMariaDB bool
	badChange    int // refused COM_CHANGE_USERs (the third ends the connection, as MariaDB)
	zstdLevel    int // the client's zstd_compression_level
	user         string
	userConns    *atomic.Int64 // the user's session count, which this session is in
	collation    uint8
	schema       *config.SchemaConfig
	node         *backend.Node
	route        *router.Schema // the user's routing; nil without a schema

	vars  engine.Vars  // database, multi-statements, charset and variables
	last  engine.Last  // LAST_INSERT_ID(), ROW_COUNT(), FOUND_ROWS()
	lease engine.Lease // the backend connections held, and why
	eng   engine.Engine
	cl    *engine.Client

	parser *router.Parser
	rt     router.Routing // the current statement's routing (reused)
	tr     trace          // the current statement's digest, stages, rows
	dkey   []byte         // scratch for digest keys (router.DigestKey)
	ckey   []byte         // scratch for result cache keys
	// The tables the open transaction wrote (txWroteAll: unknown ones),
	// whose cache entries go stale again when it ends.
	txWrote    []string
	txWroteAll bool
	stageNs    stageTotals // stage time of this session's statements
	xbuf       []byte      // EXECUTE packets rebuilt for a backend

	stmts map[uint32]*prepared // binary-protocol statements by client id
	// textStmts are PREPAREd statements on sharded tables, by lower-case name.
	textStmts map[string]*prepared
	loginUser string // the user name the client sent at login (logged when it fails)
	nextStmt  uint32
	lastStmt  uint32 // the last PREPARE's statement, 0 if it failed (id 0xffffffff)

	idleTimeout time.Duration // the client's wait_timeout, applied to its socket (0: none)
	// warnings are keyshard's own of the last statement (an admin
	// statement's), for SHOW WARNINGS; nil once another statement runs.
	warnings []string

	// Statement time limits (see timeout.go): the client's SET
	// max_execution_time (-1: none set), the user's or schema's, the
	// timer, and the running statement's deadline for it (unix nanos;
	// MaxInt64 once the statement is over).
	maxExec    time.Duration
	cfgMaxExec time.Duration
	timer      *time.Timer
	deadlineNs atomic.Int64

	killed atomic.Bool
	busy   atomic.Bool
}

// newSession makes the session of client connection nc.
func newSession(srv *Server, snap *snapshot, id uint32, nc net.Conn) *Session {
	cfg := snap.cfg
	s := &Session{srv: srv, snap: snap, id: id, nc: nc, log: srv.log.With(zap.Uint32("conn", id)), maxExec: -1,
		clientAddr: nc.RemoteAddr().String()}
	s.pkt = wire.NewConn(nc, cfg.ReadBuffer, cfg.ClientWriteBuffer)
	s.pkt.MaxRead = cfg.MaxAllowedPacket
	s.cl = engine.NewClient(s.pkt, toMySQL)
	s.tr.killed = &s.killed
	s.lease = engine.Lease{Ctx: srv.ctx, Vars: &s.vars, Trace: &s.tr, OnDiscard: s.dropCursors}
	s.eng = engine.Engine{Client: s.cl, Conns: &s.lease, Trace: &s.tr, Vars: &s.vars, Last: &s.last, XA: srv.xa}
	return s
}

// startSession binds the session to its user's schema and default node and
// selects db (empty for none).
func (s *Session) startSession(db string) error {
	s.lease.ResetSession()
	s.rebind(s.srv.snap.Load())
	s.vars = engine.Vars{State: s.srv.stateFor(s.collation), Multi: s.caps&mysql.CLIENT_MULTI_STATEMENTS != 0}
	s.lease.SetStatus(newSessionStatus(s.srv.ctx, s.node, true))
	s.last = engine.Last{}
	s.idleTimeout = 0
	s.maxExec = -1
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
	s.snap, s.nodes = snap, snap.nodesFor(s.user)
	s.deny = 0
	uc, _ := snap.cfg.UserPassword(s.user)
	if !uc.ServerAdmin && !snap.cfg.IsAdmin(s.user) {
		s.deny |= router.DenyAdmin
	}
	if uc.NoDDL {
		s.deny |= router.DenyDDL
	}
	if uc.ReadOnly {
		s.deny |= router.DenyDDL | router.DenyWrite
	}
	s.schema, s.node, s.route = nil, nil, nil
	s.cfgMaxExec = time.Duration(uc.MaxExecutionTime) * time.Millisecond
	split := false
	if sc, ok := snap.cfg.SchemaFor(s.user); ok {
		if s.cfgMaxExec == 0 {
			s.cfgMaxExec = time.Duration(sc.MaxExecutionTime) * time.Millisecond
		}
		s.schema = sc
		s.node = s.nodes[sc.Default]
		s.route = snap.routes[s.user]
		split = boolOr(sc.RWSplit, true) && boolOr(uc.RWSplit, true)
	}
	l := &s.lease
	l.Default, l.User, l.Split, l.RYW = s.node, s.user, split, snap.rywWindow
	l.XA = nil
	if s.schema != nil && s.schema.TransactionMode != "single" {
		l.XA = s.srv.xa
	}
	s.eng.Nodes, s.eng.MaxMergeRows = s.nodes, snap.cfg.MaxMergeRows
	s.replanStmts()
}

// endSession returns or cleans the pinned connection.
func (s *Session) endSession() {
	if s.timer != nil {
		s.timer.Stop()
	}
	s.forgetStmts()
	s.lease.End()
}

// run is the command loop.
func (s *Session) run() {
	defer s.endSession()
	s.tr.proc.publishEnd(s.user, s.vars.DB)
	for {
		s.pkt.Seq = 0
		if s.idleTimeout > 0 {
			// The client's wait_timeout: an idle client is disconnected,
			// as the server would (the client sees the connection lost).
			// It covers the wait for a command, not the command's bytes.
			_ = s.nc.SetReadDeadline(time.Now().Add(s.idleTimeout))
			_, err := s.pkt.PeekLength()
			_ = s.nc.SetReadDeadline(time.Time{})
			if err != nil {
				return
			}
		}
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
		if snap := s.srv.snap.Load(); snap != s.snap && !s.lease.InTx() && snap.keeps(s.user, s.lease.Pinned()) {
			s.rebind(snap)
		}
		cmd := p[0]
		text := ""
		if cmd == mysql.COM_QUERY {
			text = unsafe.String(unsafe.SliceData(p[1:]), len(p)-1)
		}
		s.tr.proc.publishStart(start, cmd, text)
		if s.warnings != nil && !isShowWarnings(text) {
			s.warnings = nil
		}
		err = s.dispatch(cmd, p)
		s.disarmTimeout()
		if s.txWrote != nil || s.txWroteAll {
			s.endTxWrites()
		}
		if err != nil && s.lease.Branches() > 0 && engine.RollsBackTx(err) {
			// One node rolled the whole transaction back (a deadlock
			// victim): so does every other, as one server's would; the
			// client got the server's error.
			if _, rerr := s.lease.EndTx(false); rerr != nil {
				s.log.Debug("rolling back a transaction over several nodes after a deadlock", zap.Error(rerr))
			}
		}
		var ce *engine.ClientError
		if errors.As(err, &ce) || err == engine.ErrClose {
			err = errCloseAfterReply
		}
		d := time.Since(start)
		s.srv.metrics.observe(cmd, err, d)
		s.endStmt(cmd, p, d, err)
		s.tr.proc.publishEnd(s.user, s.vars.DB)
		s.busy.Store(false)
		if err == errQuit {
			return
		}
		if held := s.lease.TakeLost(); held != "" {
			// A backend connection holding the session's state died on a
			// path that reported only its own error: end here too.
			s.log.Debug("session state lost with its backend connection", zap.String("held", held))
			_ = s.pkt.Flush()
			return
		}
		if ferr := s.pkt.Flush(); ferr != nil || err == errCloseAfterReply || s.killed.Load() {
			return
		}
		if s.srv.shuttingDown.Load() && s.lease.Pinned() == nil {
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
	errCloseAfterReply = engine.ErrClose
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
	case mysql.COM_FIELD_LIST, mysql.COM_STATISTICS, mysql.COM_REFRESH, mysql.COM_DEBUG:
		if (cmd == mysql.COM_REFRESH || cmd == mysql.COM_DEBUG) && s.deny&router.DenyAdmin != 0 {
			// FLUSH and RESET MASTER (COM_REFRESH), a server dump
			// (COM_DEBUG): server administration.
			return s.fail(s.denied("COM_REFRESH/COM_DEBUG", router.DenyAdmin))
		}
		// To the pinned connection or the default node, where the server
		// checks the privileges they need (RELOAD, SUPER).
		return s.eng.Forward(nil, p, nil, nil)
	case mysql.COM_SET_OPTION:
		if len(p) < 3 {
			return s.fail(newErr(errMalformedPacket, "COM_SET_OPTION: short packet"))
		}
		switch binary16(p[1:]) {
		case 0:
			s.vars.Multi = true
		case 1:
			s.vars.Multi = false
		default:
			return s.fail(newErr(errNotSupported, "COM_SET_OPTION: unknown option %d", binary16(p[1:])))
		}
		if bc := s.lease.Pinned(); bc != nil {
			// Pooled connections take the setting when next used; the
			// pinned one answers the next statement, so it takes it now.
			if err := bc.Sync(s.vars.DB, s.vars.Multi, s.vars.Autocommit, s.vars.State); err != nil {
				return s.eng.Lost(bc, err)
			}
		}
		// Answered like the end of a result set, as MySQL and MariaDB do.
		return s.cl.ResultEnd(0, s.lease.Status())
	case mysql.COM_RESET_CONNECTION:
		s.endSession()
		if err := s.startSession(s.vars.DB); err != nil {
			return s.fail(err)
		}
		return s.writeOK(0, 0)
	case mysql.COM_CHANGE_USER:
		if err := s.changeUser(p); err != nil {
			var pe *Error
			var end *endingError
			if !errors.As(err, &end) && (errors.As(err, &pe) || isMyError(err)) {
				return s.fail(err) // refused: the session goes on as it was
			}
			s.writeError(err)
			return errCloseAfterReply
		}
		return s.writeOK(0, 0)
	case mysql.COM_STMT_PREPARE:
		return s.stmtPrepare(p)
	case mysql.COM_STMT_EXECUTE, mysql.COM_STMT_FETCH, mysql.COM_STMT_RESET, mysql.COM_STMT_CLOSE, mysql.COM_STMT_SEND_LONG_DATA,
		comStmtBulkExecute:
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

func binary16(b []byte) uint16 { return uint16(b[0]) | uint16(b[1])<<8 }

// fail reports err to the client and returns it for metrics.
func (s *Session) fail(err error) error { return s.eng.Fail(err) }

func (s *Session) writeError(err error) { s.cl.Error(err) }

func (s *Session) writeOK(affected, insertID uint64) error {
	return s.cl.OK(affected, insertID, s.lease.Status(), 0, "")
}

// writeUseOK answers USE / COM_INIT_DB. A client tracking session state is
// told the new database, as MySQL does while session_track_schema is on
// (the default). Variable changes need nothing here: SET runs on a backend,
// which tracks them itself, and its OK is relayed.
func (s *Session) writeUseOK() error {
	v, set := s.vars.State.Get("session_track_schema")
	return s.cl.UseOK(s.lease.Status(), s.vars.DB, !set || !isOff(v))
}

// useDB changes the current database after checking it on the backend.
//
// The check is a read: outside a transaction it may run on a replica, so
// that clients can connect while the master is down.
//
// The connection is asked for as for a session already in db: any pooled
// connection fits (its sync selects db, which checks it), not only one
// that never had a database. A pinned connection is not synced: db is
// selected on it here. A refused database leaves the session where it was.
func (s *Session) useDB(db string) error {
	prev := s.vars.DB
	s.vars.DB = db
	bc, err := s.lease.Acquire(nil, engine.Read)
	if err == nil {
		if bc.DB() != db {
			if _, err = bc.Command(mysql.COM_INIT_DB, []byte(db)); err == nil {
				bc.SetDB(db)
			}
		}
		s.lease.Release(bc)
	}
	if err != nil {
		s.vars.DB = prev
	}
	return err
}

// query handles COM_QUERY.
func (s *Session) query(p []byte) (rerr error) {
	sql := unsafe.String(unsafe.SliceData(p[1:]), len(p)-1) // valid until the next client read
	info := router.Classify(sql)
	if s.warnings != nil { // SHOW WARNINGS after an admin statement's
		return s.showWarnings(sql)
	}
	if info.Flags&router.FlagMulti == 0 && isAdminCandidate(sql[info.Start:]) && !s.hinted(sql[:info.Start]) {
		if handled, err := s.adminStmt(sql[info.Start:]); handled {
			return err
		}
	}
	if info.Kind == router.KindLoad {
		// LOAD DATA LOCAL reads the file into the buffer sql is in.
		s.tr.proc.setText(strings.Clone(sql))
	}
	s.armTimeout(s.stmtTimeout(sql, info))
	s.tr.entry = s.digestOf(sql, s.route != nil && s.route.Sharded() && info.Flags&router.FlagMulti == 0)
	s.tr.mark(digest.Parse)
	if err := s.checkBlack(sql, info); err != nil {
		return s.fail(err)
	}
	if err := s.mayRun(sql, info); err != nil {
		return s.fail(err)
	}
	if s.srv.rcache.on.Load() {
		if cacheWrites(info) {
			defer s.wrote(s.writtenTables(sql, info))
		} else if handled, fill, err := s.fromCache(sql, info); handled || err != nil {
			return err
		} else if fill != nil {
			// Filled from the master: a lagging replica's answer would be
			// kept under the generation of a write it has not seen yet.
			info.Flags |= router.FlagMasterOnly
			defer func() { fill(rerr) }()
		}
	}
	if s.lease.Tracking() && router.Writes(info) {
		defer s.lease.MarkWrite()
	}
	if info.Flags&router.FlagMulti != 0 && !s.vars.Multi {
		// Without multi-statements the server reads one statement: a
		// compound one (CREATE PROCEDURE ... BEGIN ...; ...; END) or a
		// syntax error with the server's own message. The backend
		// connection is synced to the client's setting: let it answer.
		info.Flags &^= router.FlagMulti
	}
	if info.Flags&router.FlagMulti != 0 && s.lease.Branches() > 0 {
		return s.fail(newErr(errNotSupported, "keyshard: a multi-statement batch inside a transaction over several nodes is not "+
			"supported (it could end the transaction on one node only); send its statements one by one (the transaction is still open)"))
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
	if info.Flags&router.FlagMulti != 0 && info.Flags&router.FlagKill != 0 {
		out, ok, err := s.killBatch(sql)
		if err != nil {
			return s.fail(err)
		}
		if ok {
			s.lease.Stick(router.Sticky(info))
			if info.Kind == router.KindLockTables {
				s.lease.SetLockTables(true)
			}
			return s.eng.Forward(nil, nil, &out, &info)
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
		if info.Flags&router.FlagMulti == 0 {
			return s.lockTables(p, sql, info)
		}
		s.lease.SetLockTables(true)
	}
	if why := router.Sticky(info); why != "" {
		s.lease.Stick(why)
	}
	if info.Kind == router.KindLoad && s.route != nil && s.route.Sharded() && info.Flags&router.FlagMulti == 0 {
		ld, err := s.route.PlanLoad(s.getParser(), sql, s.vars.DB)
		if err != nil {
			return s.fail(err)
		}
		if ld != nil {
			return s.loadData(ld)
		}
	}
	if s.route != nil && s.route.Sharded() && info.Flags&router.FlagMulti == 0 && lookable(sql, info) {
		if l := s.route.Look(s.getParser(), sql, s.vars.DB); l != nil {
			return s.look(l, sql, info)
		}
		if info.Kind == router.KindShow {
			if handled, err := s.explain(sql, info); handled {
				return err
			}
		}
	}
	if s.route != nil && s.route.Sharded() && info.Flags&router.FlagMulti == 0 {
		if handled, err := s.routed(p, sql, info); handled {
			return err
		}
	}
	if info.Kind == router.KindShow && info.Flags&router.FlagMulti == 0 && s.compression() != wire.CompressNone && isShowSessionStatus(sql[info.Start:]) {
		// The backend connection is not compressed; the client's is.
		s.eng.RowHook = compressionOn
		defer func() { s.eng.RowHook = nil }()
	}
	if info.Flags&router.FlagSessionFunc != 0 && info.Flags&router.FlagMulti == 0 {
		out, changed, err := s.getParser().RewriteSessionFuncs(sql, s.sessionValues())
		if err == nil && changed {
			return s.eng.Forward(nil, nil, &out, &info)
		}
	}
	err := s.eng.Forward(nil, p, nil, &info)
	if info.Kind == router.KindUnlockTables && err == nil {
		s.lease.SetLockTables(false)
	}
	return err
}

// isOff reports whether a boolean variable's value as kept in the
// session state (an SQL literal, as written or read back) is off.
func isOff(v string) bool {
	switch strings.ToLower(strings.Trim(v, "'")) {
	case "0", "off", "false":
		return true
	}
	return false
}

// lookable reports whether sql may look at a table's definition (SHOW,
// DESCRIBE, EXPLAIN, a SELECT on information_schema): see router.Look.
func lookable(sql string, info router.Info) bool {
	switch info.Kind {
	case router.KindShow:
		return true
	case router.KindSelect:
		return containsFold(sql, "information_schema")
	}
	return false
}

// containsFold reports whether s contains the lower-case ASCII word sub,
// in any case.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i]|0x20 == sub[0] && strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// isShowSessionStatus reports whether stmt is SHOW [SESSION | LOCAL]
// STATUS ..., whose Compression row is the session's own.
func isShowSessionStatus(stmt string) bool {
	f := strings.Fields(stmt)
	if len(f) < 2 || !strings.EqualFold(f[0], "show") {
		return false
	}
	if strings.EqualFold(f[1], "session") || strings.EqualFold(f[1], "local") {
		f = f[1:]
	}
	return len(f) >= 2 && (strings.EqualFold(f[1], "status") || strings.HasPrefix(strings.ToLower(f[1]), "status;"))
}

// compressionOn is the row hook for SHOW STATUS on a compressed client
// connection: its Compression row says ON, whatever the backend's says.
func compressionOn(row []byte) []byte {
	name, _, n, err := wire.ReadLenEncString(row, 0)
	if err != nil || string(name) != "Compression" {
		return row
	}
	if _, _, end, err := wire.ReadLenEncString(row, n); err != nil || end != len(row) {
		return row
	}
	return wire.AppendLenEncString(wire.AppendLenEncString(nil, "Compression"), "ON")
}

// lockTables runs LOCK TABLES: its connection is pinned while the locks
// are held; a LOCK TABLES that fails holds none (the server released the
// earlier ones too), and one naming a sharded table is refused.
func (s *Session) lockTables(p []byte, sql string, info router.Info) error {
	if s.lease.Branches() > 0 {
		return s.fail(newErr(errNotSupported, "keyshard: LOCK TABLES would commit a transaction over several nodes implicitly, "+
			"which keyshard cannot do in two phases; COMMIT first (the transaction is still open)"))
	}
	if s.route != nil && s.route.Sharded() {
		if name := s.route.MentionsSharded(sql); name != "" {
			return s.fail(newErr(errNotSupported, "keyshard: LOCK TABLES of sharded table %s is not supported: its sub-tables are on "+
				"several nodes (nothing was locked)", name))
		}
	}
	s.lease.SetLockTables(true)
	return s.eng.ForwardThen(nil, p, nil, &info, func(_ *backend.Conn, res engine.Result) {
		if res.Err != nil {
			s.lease.SetLockTables(false)
		}
	})
}

func (s *Session) getParser() *router.Parser {
	if s.parser == nil {
		s.parser = router.NewParser()
		s.parser.VarText = s.userVarText
	}
	return s.parser
}

// userVarText reads the session's user variable name as text, for the
// checks of PREPARE ... FROM @name (router.Parser.VarText).
func (s *Session) userVarText(name string) (string, bool) {
	vals, err := s.userVars([]string{name})
	if err != nil {
		return "", false
	}
	switch v := vals[0].Bound.(type) {
	case string:
		return v, true
	case []byte:
		return string(v), true
	}
	return "", false
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

// kill ends another session (or only its running statement), and
// answers.
func (s *Session) kill(id uint32, queryOnly bool) error {
	if err := s.killID(uint64(id), queryOnly); err != nil {
		return s.fail(err)
	}
	return s.writeOK(0, 0)
}

// killID ends session id (or only its running statement); the error is
// what KILL answers (nil: OK). Killing the session itself ends it after
// the answer.
func (s *Session) killID(id uint64, queryOnly bool) error {
	v, ok := s.srv.sessions.Load(uint32(id))
	if ok && (id > math.MaxUint32 || v.(*Session).killed.Load()) {
		ok = false // killed and on its way out
	}
	if !ok {
		return newErr(errNoSuchThread, "Unknown thread id: %d", id)
	}
	t := v.(*Session)
	if t != s && t.tr.proc.userName() != s.user && !s.snap.cfg.IsAdmin(s.user) {
		return &mysql.MyError{Code: mysql.ER_KILL_DENIED_ERROR, State: "HY000", Message: fmt.Sprintf("You are not owner of thread %d", id)}
	}
	if t == s {
		if queryOnly {
			return nil
		}
		s.killed.Store(true)
		return &mysql.MyError{Code: erConnectionKilled, State: "70100", Message: "Connection was killed"}
	}
	t.interrupt(!queryOnly)
	return nil
}

// erConnectionKilled is MariaDB's ER_CONNECTION_KILLED.
const erConnectionKilled = 1927

// killBatch rewrites a multi-statement batch that holds KILL statements:
// keyshard runs each KILL itself, since the thread ids clients see are
// keyshard's (a backend would kill one of its own connections), and in
// the batch puts in its place a statement the backend answers as the KILL
// did: DO 0 for an OK, or SIGNAL with the KILL's error, where the batch
// ends as it would on the server. ok is false when the batch holds no
// KILL after all.
func (s *Session) killBatch(sql string) (out string, ok bool, err error) {
	kills, err := s.getParser().BatchKills(sql)
	if err != nil {
		return "", false, newErr(errNotSupported, "keyshard: this batch holds a KILL, which keyshard runs itself (the thread ids are keyshard's), "+
			"but keyshard cannot parse the batch (%v); send the KILL on its own", err)
	}
	if len(kills) == 0 {
		return "", false, nil
	}
	var b strings.Builder
	pos := 0
	for _, k := range kills {
		b.WriteString(sql[pos:k.Start])
		pos = k.End
		if kerr := s.killID(k.ID, k.Query); kerr != nil {
			me := toMySQL(kerr)
			fmt.Fprintf(&b, "SIGNAL SQLSTATE '%s' SET MYSQL_ERRNO = %d, MESSAGE_TEXT = %s", me.State, me.Code, backend.Quote(me.Message))
			return b.String(), true, nil // the batch ends there; the KILLs after it are not run
		}
		b.WriteString("DO 0")
	}
	b.WriteString(sql[pos:])
	return b.String(), true, nil
}

// interrupt stops the running statement (KILL QUERY on its backend) and,
// with closeConn, ends the session.
func (s *Session) interrupt(closeConn bool) {
	if closeConn {
		s.killed.Store(true)
	}
	p := &s.tr.proc
	p.mu.Lock()
	if p.cmd.Load() >= 0 { // a statement runs: stop it on each of its connections
		s.killQueriesLocked()
	}
	p.mu.Unlock()
	if closeConn {
		// Both directions: a session blocked writing to a client that stopped
		// reading must give up too.
		_ = s.nc.SetDeadline(time.Now())
		if !s.busy.Load() {
			_ = s.nc.Close()
		}
	}
}

// collationNames maps a handshake collation id to a charset and collation.
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

// sessionValues are what LAST_INSERT_ID(), ROW_COUNT(), FOUND_ROWS() and
// CONNECTION_ID() answer for the session.
func (s *Session) sessionValues() router.SessionValues {
	return router.SessionValues{LastInsertID: s.last.InsertID, RowCount: s.last.RowCount, FoundRows: s.last.FoundRows, ConnectionID: s.id}
}

// mayRun refuses, with 1227, a statement of a class the user may not run
// (router.Denied, with the classes rebind set from its user_list entry):
// server administration unless server_admin (or an admin user: root,
// admin_users), DDL with no_ddl, anything but reads with read_only.
func (s *Session) mayRun(sql string, info router.Info) error {
	if s.deny == 0 {
		return nil
	}
	sql, info = s.asServerReads(sql, info)
	if !router.MaybeDenied(sql, info, s.deny) {
		return nil // the common statements: no parser made for them
	}
	if class, d := s.getParser().Denied(sql, info, s.deny); class != "" {
		return s.denied(class, d)
	}
	return nil
}

// checkBlack applies the SQL blacklist to sql (classified as info).
func (s *Session) checkBlack(sql string, info router.Info) error {
	b := s.srv.black.Load()
	if b.Empty() {
		return nil
	}
	sql, info = s.asServerReads(sql, info)
	if !b.MayMatch(sql, info) {
		return nil
	}
	return b.Check(s.getParser(), sql, s.vars.DB)
}

// asServerReads returns sql as keyshard's lexers must read it to see the
// statements the server sees: with NO_BACKSLASH_ESCAPES on, a backslash
// is a plain character (they assume escapes), so it is doubled.
func (s *Session) asServerReads(sql string, info router.Info) (string, router.Info) {
	if strings.IndexByte(sql, '\\') >= 0 && s.noBackslashEscapes() {
		sql = strings.ReplaceAll(sql, `\`, `\\`)
		info = router.Classify(sql)
	}
	return sql, info
}

// noBackslashEscapes reports whether the session's sql_mode has
// NO_BACKSLASH_ESCAPES (as set through keyshard, or as its backend says).
func (s *Session) noBackslashEscapes() bool {
	if s.lease.Status()&mysql.SERVER_STATUS_NO_BACKSLASH_ESCAPED != 0 {
		return true
	}
	v, ok := s.vars.State.Get("sql_mode")
	return ok && containsFold(v, "no_backslash_escapes")
}

// denied is the 1227 error for class, of the user's denied classes d.
func (s *Session) denied(class string, d router.Deny) error {
	priv, why := "server_admin", "server_admin: true in its user_list entry allows it"
	switch d {
	case router.DenyDDL:
		priv, why = "DDL", "its user_list entry sets no_ddl or read_only"
	case router.DenyWrite:
		priv, why = "write", "its user_list entry sets read_only"
	}
	return &mysql.MyError{Code: mysql.ER_SPECIFIC_ACCESS_DENIED_ERROR, State: "42000",
		Message: "Access denied; you need (at least one of) the " + priv + " privilege(s) for this operation: keyshard user " +
			s.user + " may not run " + class + " (" + why + ")"}
}
