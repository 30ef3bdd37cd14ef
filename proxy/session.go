package proxy

import (
	"errors"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/deadlock"
	"github.com/keyshard/keyshard/proxy/engine"
	"github.com/keyshard/keyshard/proxy/frontend"
	"github.com/keyshard/keyshard/proxy/hold"
	"github.com/keyshard/keyshard/proxy/users"
	"github.com/keyshard/keyshard/router"
	"github.com/pingcap/tidb/pkg/parser/charset"
	"go.uber.org/zap"
)

// Session is one client's session (frontend.Handler): who the client is
// and its session state (database, charset, variables, prepared
// statements, the last statement's LAST_INSERT_ID() and friends). The
// connection itself, and what the client negotiated, are its frontend
// Conn's; which backend connections it holds, and why, its lease's; how a
// statement runs, its engine's (package engine).
//
// Its goroutine is the only one that touches its fields, except the
// atomics used by KILL and shutdown.
type Session struct {
	srv   *Server
	c     *frontend.Conn
	snap  *snapshot                // the configuration this session runs on
	nodes map[string]*backend.Node // snap's nodes as this user reaches them (nodesFor)
	deny  router.Deny              // statement classes the user may not run (mayRun)

	user      string
	userConns *atomic.Int64 // the user's session count, which this session is in
	schema    *config.SchemaConfig
	node      *backend.Node
	route     *router.Schema // the user's routing; nil without a schema

	vars  engine.Vars  // database, multi-statements, charset and variables
	last  engine.Last  // LAST_INSERT_ID(), ROW_COUNT(), FOUND_ROWS()
	lease engine.Lease // the backend connections held, and why
	eng   engine.Engine
	cl    *engine.Client

	parser  *router.Parser
	q       comQuery       // the current COM_QUERY (query.go)
	rt      router.Routing // the current statement's routing (reused)
	tr      trace          // the current statement's digest, stages, rows
	dkey    []byte         // scratch for digest keys (router.DigestKey)
	cache   cacheUse       // the result cache as the session uses it
	stageNs stageTotals    // stage time of this session's statements
	xbuf    []byte         // EXECUTE packets rebuilt for a backend

	ps stmtTable // prepared statements (stmt.go)

	limit stmtLimit // statement time limits (timeout.go)
	// timeouts are the session's wait_timeout and interactive_timeout as
	// SET (0: the server's), which SELECT @@wait_timeout answers (see
	// router.SessionValues); the client's connection applies the first.
	timeouts [2]uint64

	// seat, for a client logged in as an account of the backend
	// (backend_accounts), is that account's views of the nodes.
	seat *users.Seat

	// dl is the session's transaction over several nodes as the deadlock
	// detector follows it; dlHeld, scratch for its connections.
	dl     deadlock.Tx
	dlHeld []engine.Held
	// mark says whether a statement runs or a transaction is open, for a
	// layout switch's hold (held.go).
	mark hold.Mark
}

// NewHandler makes the session of client connection c
// (frontend.Server).
func (srv *Server) NewHandler(c *frontend.Conn) frontend.Handler {
	s := &Session{srv: srv, c: c, snap: srv.snap.Load()}
	s.cache.s, s.ps.s = s, s
	s.limit = stmtLimit{tr: &s.tr, lease: &s.lease, c: c, maxExec: -1}
	s.cl = engine.NewClient(c.Packets(), toMySQL)
	s.tr.conn = c
	s.lease = engine.Lease{Ctx: srv.ctx, Vars: &s.vars, Trace: &s.tr, OnDiscard: s.ps.dropCursors}
	s.dl = deadlock.Tx{ID: c.ID(), Running: s.tr.proc.running, Abort: func(since int64) bool { return s.tr.abortVictim(since, c.Log()) }}
	s.lease.OnSpan = func() {
		s.dlHeld = s.lease.Spanning(s.dlHeld[:0])
		srv.deadlocks.Update(&s.dl, s.dlHeld)
	}
	s.eng = engine.Engine{Client: s.cl, Conns: &s.lease, Trace: &s.tr, Vars: &s.vars, Last: &s.last, XA: srv.xa}
	return s
}

// User looks up an account (frontend.Users): user_list's first, then,
// with backend_accounts, the backend's (never for the names of keyshard's
// admins: root and admin_users are user_list's only).
func (s *Session) User(name, host string, refresh bool) (frontend.User, bool) {
	cfg := s.snap.cfg
	if uc, ok := cfg.UserPassword(name); ok {
		return frontend.User{Password: uc.Password, Plugin: uc.AuthPlugin}, true
	}
	if cfg.BackendAccounts == nil || cfg.IsAdmin(name) {
		return frontend.User{}, false
	}
	a, ok := s.srv.accounts.Lookup(s.srv.ctx, name, host, refresh)
	return frontend.User{Hashed: true, NativeHash: a.Hash, Refuse: a.Refuse}, ok
}

// DefaultPlugin is default_auth_plugin (frontend.Users).
func (s *Session) DefaultPlugin() string { return s.snap.cfg.DefaultAuthPlugin }

// Greeting is what keyshard tells a new client it is (frontend.Handler).
func (s *Session) Greeting() frontend.Greeting {
	id := s.srv.identity(s.snap)
	return frontend.Greeting{Version: id.version, MariaDB: id.mariaDB, Ext: id.ext,
		Status: newSessionStatus(s.srv.ctx, s.snap.identityNode(), false)}
}

// Login starts the session of an authenticated client, or restarts it as
// another user for COM_CHANGE_USER, and writes its OK (frontend.Handler).
// A refused change leaves the session as it was; once the old session has
// ended, a failure ends the connection.
func (s *Session) Login(l frontend.Login) error {
	changing := s.userConns != nil
	if cs := wideCharset(l.Collation); cs != "" && changing {
		// The server refuses it as the client's character set (a
		// login's handshake falls back to the default instead).
		return &mysql.MyError{Code: mysql.ER_WRONG_VALUE_FOR_VAR, State: "42000",
			Message: "Variable 'character_set_client' can't be set to the value of '" + cs + "'"}
	}
	if err := s.setUser(l.User); err != nil {
		return err
	}
	if !changing && !s.srv.ctl.Online() && !s.srv.mayLoginOffline(s.snap.cfg, l.User) {
		s.srv.metrics.rejected("offline").Inc()
		return newErr(errOffline, "keyshard is offline (admin 'change proxy offline'); new connections are refused, but for admin users")
	}
	if changing {
		s.endSession()
	}
	s.seat.Release()
	s.seat = nil
	if l.Hashed {
		s.seat = s.srv.accounts.Take(l.User, l.NativeKey)
	}
	caps := s.c.Caps()
	s.cl.SetCaps(caps, s.c.Ext())
	s.lease.Caps, s.lease.Ext = caps, s.c.Ext()
	if err := s.startSession(l.DB); err != nil {
		if changing {
			// The old session is gone already: the connection ends with
			// the error rather than go on half changed.
			return &frontend.EndingError{Err: err}
		}
		var ee *engine.Error
		if errors.As(err, &ee) {
			// A database for a user without a schema: refused with its
			// errno like any other login error, not by closing the
			// connection.
			return toMySQL(err)
		}
		return err
	}
	if !changing {
		s.srv.sessions.Store(s.c.ID(), s)
		s.tr.proc.publishEnd(s.user, s.vars.DB)
	}
	return s.writeOK(0, 0)
}

// Closed ends the session (frontend.Handler).
func (s *Session) Closed() {
	s.mark.Set(false) // a layout switch's hold waits for it no more
	if s.userConns != nil {
		// Deferred each: a panic while the session ends (its lease half
		// updated) still gives back the user's count and the process
		// list's entry.
		defer s.userConns.Add(-1)
		defer s.srv.endStages(s)
	}
	s.endSession()
	s.seat.Release()
	s.seat = nil
}

// startSession binds the session to its user's schema and default node and
// selects db (empty for none).
func (s *Session) startSession(db string) error {
	s.lease.ResetSession()
	s.rebind(s.srv.snap.Load())
	s.vars = engine.Vars{State: s.srv.stateFor(s.c.Collation()), Multi: s.c.Caps()&mysql.CLIENT_MULTI_STATEMENTS != 0}
	s.lease.SetStatus(newSessionStatus(s.srv.ctx, s.node, true))
	s.last = engine.Last{}
	s.c.SetIdleTimeout(0)
	s.timeouts = [2]uint64{}
	s.limit.maxExec = -1
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
	// An account of the backend (backend_accounts) runs as itself on
	// views of its own, with the template user's schema and limits; the
	// server's grants decide what it may run.
	name := s.user
	if s.seat != nil {
		s.nodes, name = s.seat.Nodes(snap.nodes), ""
		if b := snap.cfg.BackendAccounts; b != nil {
			name = b.TemplateUser
		}
	}
	uc, _ := snap.cfg.UserPassword(name)
	if !uc.ServerAdmin && !snap.cfg.IsAdmin(s.user) && s.seat == nil {
		s.deny |= router.DenyAdmin
	}
	if uc.NoDDL {
		s.deny |= router.DenyDDL
	}
	if uc.ReadOnly {
		s.deny |= router.DenyDDL | router.DenyWrite
	}
	s.schema, s.node, s.route = nil, nil, nil
	s.limit.cfgMaxExec = time.Duration(uc.MaxExecutionTime) * time.Millisecond
	split := false
	if sc, ok := snap.cfg.SchemaFor(name); ok {
		if s.limit.cfgMaxExec == 0 {
			s.limit.cfgMaxExec = time.Duration(sc.MaxExecutionTime) * time.Millisecond
		}
		s.schema = sc
		s.node = s.nodes[sc.Default]
		s.route = snap.routes[name]
		split = boolOr(sc.RWSplit, true) && boolOr(uc.RWSplit, true)
	}
	l := &s.lease
	l.Default, l.User, l.Split, l.RYW = s.node, s.user, split, snap.rywWindow
	l.XA = nil
	if s.schema != nil && s.schema.TransactionMode != "single" {
		l.XA = s.srv.xa
	}
	s.eng.Nodes, s.eng.MaxMergeRows = s.nodes, snap.cfg.MaxMergeRows
	s.ps.replanStmts()
}

// endSession returns or cleans the pinned connection.
func (s *Session) endSession() {
	s.limit.stop()
	s.ps.forgetStmts()
	s.lease.End()
}

// setUser makes user the session's user, counting the session against the
// user's max_connections (user_list); past it, ER_USER_LIMIT_REACHED.
func (s *Session) setUser(user string) error {
	uc, _ := s.snap.cfg.UserPassword(user)
	v, ok := s.srv.userConns.Load(user)
	if !ok {
		v, _ = s.srv.userConns.LoadOrStore(user, new(atomic.Int64))
	}
	c := v.(*atomic.Int64)
	if n := c.Add(1); uc.MaxConnections > 0 && n > int64(uc.MaxConnections) {
		c.Add(-1)
		s.srv.metrics.rejected("user_max_connections").Inc()
		return newErr(errUserLimit, "User '%s' has exceeded the 'max_connections' resource of its user_list entry (current value: %d)", user, uc.MaxConnections)
	}
	if s.userConns != nil {
		s.userConns.Add(-1)
	}
	s.userConns = c
	s.user = user
	return nil
}

// Command runs one command (frontend.Handler): it moves the session to a
// reloaded configuration when it may, dispatches the command, and keeps
// the statement's trace, metrics and process-list entry.
func (s *Session) Command(p []byte) frontend.Next {
	start := time.Now()
	s.tr.begin(start, s.c.Packets().Written)
	if snap := s.srv.snap.Load(); snap != s.snap && !s.lease.InTx() && snap.keeps(s.user, s.lease.Pinned()) {
		s.rebind(snap)
	}
	cmd := p[0]
	text := ""
	if cmd == mysql.COM_QUERY {
		text = unsafe.String(unsafe.SliceData(p[1:]), len(p)-1)
	}
	s.tr.proc.publishStart(start, cmd, text)
	if s.eng.Diag.On() && (cmd != mysql.COM_QUERY || !engine.IsDiagnostics(text)) {
		s.eng.Diag.Clear()
	}
	s.mark.Set(true) // before the statement looks for a hold (held.go)
	err := s.dispatch(cmd, p)
	s.mark.Set(s.lease.TxOpen())
	s.limit.disarm()
	if s.cache.txWrote != nil || s.cache.txWroteAll {
		s.cache.endTx()
	}
	if s.lease.Branches() > 0 && (err != nil && engine.RollsBackTx(err) || s.tr.victim.Load()) {
		// One node rolled the whole transaction back (a deadlock
		// victim), or keyshard stopped it as the victim of a deadlock
		// across nodes: every node rolls it back, as one server's would;
		// the client got the error.
		if _, rerr := s.lease.EndTx(false); rerr != nil {
			s.c.Log().Debug("rolling back a transaction over several nodes after a deadlock", zap.Error(rerr))
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
	if err == errQuit {
		return frontend.Quit
	}
	if held := s.lease.TakeLost(); held != "" {
		// A backend connection holding the session's state died on a
		// path that reported only its own error: end here too.
		s.c.Log().Debug("session state lost with its backend connection", zap.String("held", held))
		return frontend.Close
	}
	if err == errCloseAfterReply || s.srv.shuttingDown.Load() && s.lease.Pinned() == nil {
		return frontend.Close
	}
	return frontend.Continue
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
		return s.setOption(p)
	case mysql.COM_RESET_CONNECTION:
		s.endSession()
		if err := s.startSession(s.vars.DB); err != nil {
			return s.fail(err)
		}
		return s.writeOK(0, 0)
	case mysql.COM_CHANGE_USER:
		if err := s.c.ChangeUser(s, p); err != nil {
			var end *frontend.EndingError
			if !errors.As(err, &end) && refusal(err) {
				return s.fail(err) // refused: the session goes on as it was
			}
			s.writeError(err)
			return errCloseAfterReply
		}
		return nil // Login answered
	case mysql.COM_STMT_PREPARE:
		return s.ps.stmtPrepare(p)
	case mysql.COM_STMT_EXECUTE, mysql.COM_STMT_FETCH, mysql.COM_STMT_RESET, mysql.COM_STMT_CLOSE, mysql.COM_STMT_SEND_LONG_DATA,
		comStmtBulkExecute:
		return s.ps.stmtCommand(p)
	case mysql.COM_PROCESS_KILL:
		if len(p) < 5 {
			return s.fail(newErr(errMalformedPacket, "COM_PROCESS_KILL: short packet"))
		}
		id := uint32(p[1]) | uint32(p[2])<<8 | uint32(p[3])<<16 | uint32(p[4])<<24
		return s.kill(id, false)
	}
	return s.fail(newErr(errUnknownCommand, "Unknown command %d", cmd))
}

// setOption handles COM_SET_OPTION: multi-statements on or off.
func (s *Session) setOption(p []byte) error {
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

// isOff reports whether a boolean variable's value as kept in the
// session state (an SQL literal, as written or read back) is off.
func isOff(v string) bool {
	switch strings.ToLower(strings.Trim(v, "'")) {
	case "0", "off", "false":
		return true
	}
	return false
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
	vals, err := s.ps.userVars([]string{name})
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

// wideCharset is the character set of collation id when it is one the
// server refuses for a client (characters of more than one byte at
// least: ucs2, utf16, utf16le, utf32), else "".
func wideCharset(id uint8) string {
	switch {
	case id == 35 || id == 90 || id >= 128 && id <= 151 || id == 159:
		return "ucs2"
	case id == 54 || id == 55 || id >= 101 && id <= 124:
		return "utf16"
	case id == 56 || id == 62:
		return "utf16le"
	case id == 60 || id == 61 || id >= 160 && id <= 183:
		return "utf32"
	}
	return ""
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
	return router.SessionValues{LastInsertID: s.last.InsertID, RowCount: s.last.RowCount, FoundRows: s.last.FoundRows, ConnectionID: s.c.ID(),
		WaitTimeout: s.timeouts[0], InteractiveTimeout: s.timeouts[1]}
}
