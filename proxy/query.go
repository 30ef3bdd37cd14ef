package proxy

import (
	"context"
	"strings"
	"time"
	"unsafe"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/proxy/digest"
	"github.com/keyshard/keyshard/proxy/engine"
	"github.com/keyshard/keyshard/router"
	"go.uber.org/zap"
)

// COM_QUERY by statement class. Each class is one entry of queryClasses,
// tried in order: an entry whose test holds runs, and the first that
// answers the statement ends it. Some entries are steps every statement
// goes through (the checks, the write marks) and answer only a statement
// they refuse; the last entry forwards whatever is left. So a reader sees
// the order in one table, and a new class of statement is one entry.

// comQuery is the COM_QUERY being handled (Session.q, reused).
type comQuery struct {
	p    []byte
	sql  string // p's text: valid until the next client read
	info router.Info
	// What runs once the statement was answered, with the answer's error:
	// the result cache's fill of this answer, the tables whose cached
	// answers a write makes stale, the read-your-writes mark.
	fill      func(error)
	wrote     []string
	wroteSet  bool
	markWrite bool
	// batch: the statements of a batch run one by one (batch.go), once
	// this COM_QUERY is done with.
	batch []string
}

// single reports whether the statement is one statement (not a batch).
func (q *comQuery) single() bool { return q.info.Flags&router.FlagMulti == 0 }

// queryClass is one class of statements: test picks them, run handles
// them and reports whether it answered.
type queryClass struct {
	name string
	test func(*Session) bool
	run  func(*Session) (answered bool, err error)
}

var queryClasses = [...]queryClass{
	{"SHOW WARNINGS of keyshard's diagnostics", func(s *Session) bool {
		if s.schema == nil && !s.eng.Diag.On() && engine.IsDiagnostics(s.q.sql) {
			// A user without a schema (an admin only) has no backend to
			// ask: keyshard's own diagnostics, empty, answer.
			s.eng.Diag.Own(nil)
		}
		return s.eng.Diag.On()
	}, qWarnings},
	{"admin statement", isAdmin, qAdmin},
	{"checks: time limit, digest, blacklist, privileges", always, qChecks},
	{"result cache", func(s *Session) bool { return s.srv.rcache.on.Load() }, qCache},
	{"write marks, batch mode", always, qMarks},
	{"batch refusals", func(s *Session) bool { return !s.q.single() }, qBatch},
	{"EXPLAIN SHARD", isExplainShard, qExplainShard},
	{"batch with KILL", func(s *Session) bool { return !s.q.single() && s.q.info.Flags&router.FlagKill != 0 }, qKillBatch},
	{"KILL", kindIs(router.KindKill), qKill},
	{"USE", singleKind(router.KindUse), qUse},
	{"SET", singleKind(router.KindSet), qSet},
	{"LOCK TABLES", kindIs(router.KindLockTables), qLock},
	{"pinning", always, qSticky},
	{"LOAD DATA into a sharded table", shardedKind(router.KindLoad), qLoad},
	{"introspection of sharded tables", isIntrospection, qIntrospect},
	{"routed by the shard rules", isShardedSingle, qRouted},
	{"forwarded", always, qForward},
}

func always(*Session) bool { return true }

func kindIs(k router.Kind) func(*Session) bool {
	return func(s *Session) bool { return s.q.info.Kind == k }
}

func singleKind(k router.Kind) func(*Session) bool {
	return func(s *Session) bool { return s.q.info.Kind == k && s.q.single() }
}

func shardedKind(k router.Kind) func(*Session) bool {
	return func(s *Session) bool { return s.q.info.Kind == k && isShardedSingle(s) }
}

// query handles COM_QUERY.
func (s *Session) query(p []byte) error {
	q := &s.q
	*q = comQuery{p: p, sql: unsafe.String(unsafe.SliceData(p[1:]), len(p)-1)}
	q.info = router.Classify(q.sql)
	s.eng.CommitStmt = q.info.Kind == router.KindCommit
	defer func() { s.eng.CommitStmt = false }()
	var err error
	for i := range queryClasses {
		c := &queryClasses[i]
		if !c.test(s) {
			continue
		}
		var answered bool
		if answered, err = c.run(s); answered {
			break
		}
	}
	if q.markWrite {
		s.lease.MarkWrite()
	}
	if q.fill != nil {
		q.fill(err)
	}
	if q.wroteSet {
		s.cache.wrote(q.wrote)
	}
	if q.info.Kind == router.KindDDL && err == nil && s.route != nil && s.route.Sharded() {
		// Before the answer reaches the client: its next statement sees
		// the columns the DDL made.
		ctx, cancel := context.WithTimeout(s.srv.ctx, 2*time.Second)
		cerr := s.srv.catalog.Refresh(ctx, s.route)
		cancel()
		if cerr != nil {
			s.c.Log().Debug("catalog: reading the columns after DDL failed", zap.Error(cerr))
		}
	}
	batch := q.batch
	*q = comQuery{}
	if batch != nil {
		return runBatch(s, batch)
	}
	return err
}

func isShardedSingle(s *Session) bool {
	return s.route != nil && s.route.Sharded() && s.q.single()
}

// qWarnings answers SHOW WARNINGS, SHOW ERRORS and @@warning_count from
// the diagnostics keyshard keeps of the last statement (one over several
// legs, or an admin statement).
func qWarnings(s *Session) (bool, error) { return s.eng.Diagnostics(s.q.sql) }

func isAdmin(s *Session) bool {
	q := &s.q
	return q.single() && isAdminCandidate(q.sql[q.info.Start:]) && !s.hinted(q.sql[:q.info.Start])
}

func qAdmin(s *Session) (bool, error) { return s.adminStmt(s.q.sql[s.q.info.Start:]) }

// qChecks arms the statement's time limit, finds its digest, and refuses
// it if the blacklist or the user's privileges do.
func qChecks(s *Session) (bool, error) {
	q := &s.q
	if q.info.Kind == router.KindLoad {
		// LOAD DATA LOCAL reads the file into the buffer sql is in.
		s.tr.proc.setText(strings.Clone(q.sql))
	}
	s.limit.arm(s.limit.of(q.sql, q.info))
	s.tr.entry = s.digestOf(q.sql, isShardedSingle(s))
	s.tr.mark(digest.Parse)
	if err := s.checkBlack(q.sql, q.info); err != nil {
		return true, s.fail(err)
	}
	if err := s.mayRun(q.sql, q.info); err != nil {
		return true, s.fail(err)
	}
	return false, nil
}

// qCache answers a read from the result cache, or has its answer kept;
// a write makes the cached answers of its tables stale.
func qCache(s *Session) (bool, error) {
	q := &s.q
	if cacheWrites(q.info) {
		q.wrote, q.wroteSet = s.cache.written(q.sql, q.info), true
		return false, nil
	}
	handled, fill, err := s.cache.lookup(q.sql, q.info)
	if handled || err != nil {
		return true, err
	}
	if fill != nil {
		// Filled from the master: a lagging replica's answer would be
		// kept under the generation of a write it has not seen yet.
		q.info.Flags |= router.FlagMasterOnly
		q.fill = fill
	}
	return false, nil
}

func qMarks(s *Session) (bool, error) {
	q := &s.q
	if s.lease.Tracking() && router.Writes(q.info) {
		q.markWrite = true
	}
	if !q.single() && !s.vars.Multi {
		// Without multi-statements the server reads one statement: a
		// compound one (CREATE PROCEDURE ... BEGIN ...; ...; END) or a
		// syntax error with the server's own message. The backend
		// connection is synced to the client's setting: let it answer.
		q.info.Flags &^= router.FlagMulti
	}
	return false, nil
}

// qKillBatch runs the KILLs of a batch itself (the thread ids are
// keyshard's) and sends the rest.
func qKillBatch(s *Session) (bool, error) {
	q := &s.q
	out, ok, err := s.killBatch(q.sql)
	if err != nil {
		return true, s.fail(err)
	}
	if !ok {
		return false, nil
	}
	s.lease.Stick(router.Sticky(q.info))
	if q.info.Kind == router.KindLockTables {
		s.lease.SetLockTables(true)
	}
	return true, s.eng.Forward(nil, nil, &out, &q.info)
}

func isExplainShard(s *Session) bool {
	q := &s.q
	return q.info.Start < len(q.sql) && q.sql[q.info.Start]|0x20 == 'e'
}

func qExplainShard(s *Session) (bool, error) {
	rest, ok := cutPrefixFold(s.q.sql[s.q.info.Start:], "explain shard ")
	if !ok {
		return false, nil
	}
	return true, s.explainShard(rest)
}

func qKill(s *Session) (bool, error) { return true, s.killStmt(s.q.sql[s.q.info.Start:]) }

func qUse(s *Session) (bool, error) {
	db := strings.Clone(parseUse(s.q.sql[s.q.info.Start:]))
	if db == "" {
		return false, nil
	}
	if err := s.useDB(db); err != nil {
		return true, s.fail(err)
	}
	return true, s.writeUseOK()
}

func qSet(s *Session) (bool, error) { return true, s.set(s.q.p, s.q.sql) }

func qLock(s *Session) (bool, error) {
	if !s.q.single() {
		s.lease.SetLockTables(true)
		return false, nil
	}
	return true, s.lockTables(s.q.p, s.q.sql, s.q.info)
}

func qSticky(s *Session) (bool, error) {
	if why := router.Sticky(s.q.info); why != "" {
		s.lease.Stick(why)
	}
	return false, nil
}

func qLoad(s *Session) (bool, error) {
	ld, err := s.route.PlanLoad(s.getParser(), s.q.sql, s.vars.DB)
	if err != nil {
		return true, s.fail(err)
	}
	if ld == nil {
		return false, nil
	}
	if replan, err := heldTables(s, []*router.TableRule{ld.Table}, false); err != nil {
		return true, s.fail(err)
	} else if replan {
		return qLoad(s)
	}
	return true, s.loadData(ld)
}

func isIntrospection(s *Session) bool { return isShardedSingle(s) && lookable(s.q.sql, s.q.info) }

// qIntrospect answers SHOW, DESCRIBE and information_schema reads of
// sharded tables as one server would show their logical tables.
func qIntrospect(s *Session) (bool, error) {
	q := &s.q
	if l := s.route.Look(s.getParser(), q.sql, s.vars.DB); l != nil {
		return true, s.look(l, q.sql, q.info)
	}
	if q.info.Kind == router.KindShow {
		return s.explain(q.sql, q.info)
	}
	return false, nil
}

func qRouted(s *Session) (bool, error) { return s.routed(s.q.p, s.q.sql, s.q.info) }

// qForward sends the statement as it is to the pinned connection or the
// default node.
func qForward(s *Session) (bool, error) {
	q := &s.q
	if q.info.Kind == router.KindShow && q.single() && s.c.Compression() != wire.CompressNone && isShowSessionStatus(q.sql[q.info.Start:]) {
		// The backend connection is not compressed; the client's is.
		s.eng.RowHook = compressionOn
		defer func() { s.eng.RowHook = nil }()
	}
	if q.info.Flags&router.FlagSessionFunc != 0 && q.single() {
		out, changed, err := s.getParser().RewriteSessionFuncs(q.sql, s.sessionValues())
		if err == nil && changed {
			return true, s.eng.Forward(nil, nil, &out, &q.info)
		}
	}
	err := s.eng.Forward(nil, q.p, nil, &q.info)
	if q.info.Kind == router.KindUnlockTables && err == nil {
		s.lease.SetLockTables(false)
	}
	return true, err
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
