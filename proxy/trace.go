package proxy

import (
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/digest"
	"github.com/keyshard/keyshard/proxy/engine"
	"github.com/keyshard/keyshard/proxy/frontend"
	"github.com/keyshard/keyshard/router"
	"go.uber.org/zap"
)

// trace follows the statement a session is running, for its digest, the
// slow log and the stage counters. Marks split the statement's time into
// stages (see digest.Stage): each mark gives the time since the previous
// one to a stage. A mark is one monotonic clock read.
type trace struct {
	start   time.Time
	last    time.Duration // procStart to the last mark
	stages  [digest.NumStages]time.Duration
	first   bool         // a backend's answer started (the Backend stage ended)
	shape   router.Shape // the statement's shape, when made for its digest (routed reuses it)
	rows    uint64
	changed uint64 // rows affected
	written uint64 // client bytes written before the statement
	nodes   []string
	entry   *digest.Entry
	key     string // the digest key (may alias Session.dkey)
	fetch   bool   // a cursor fetch: adds to its statement's digest, not as a call
	cached  bool   // answered from the result cache
	sql     string // a prepared statement's text ("" for COM_QUERY)

	cur  atomic.Pointer[backend.Conn] // backend connection running a statement, for KILL QUERY
	conn *frontend.Conn               // the session's client connection (killed or not)
	proc procState                    // what the process list shows
	// conns are the backend connections the statement holds (under
	// proc.mu): KILL QUERY and the time limit stop it on each.
	conns  []*backend.Conn
	turn   *backend.Turn // the statement's place on a pipelined connection (under proc.mu)
	noKill bool          // Committing was called (under proc.mu)
	// stopped: a KILL QUERY or the time limit came for this statement
	// (under proc.mu); a pipelined turn taken after it is killed too.
	stopped bool
	// deadline is the statement's time limit (zero: none); timedOut is
	// set once keyshard stopped it there; limit and mariaDB make the
	// error then (timeoutError).
	deadline time.Time
	timedOut atomic.Bool
	limit    time.Duration
	mariaDB  bool
	// victim: the deadlock detector stopped the statement (see
	// abortVictim); it answers 1213 and its transaction rolls back.
	victim atomic.Bool
}

var _ engine.Tracer = (*trace)(nil)

var procStart = time.Now()

func (t *trace) begin(start time.Time, written uint64) {
	t.start, t.last = start, start.Sub(procStart)
	t.stages = [digest.NumStages]time.Duration{}
	t.first, t.shape = false, router.Shape{}
	t.rows, t.changed, t.written = 0, 0, written
	if len(t.nodes) > 0 || len(t.conns) > 0 {
		t.proc.mu.Lock()
		t.nodes = t.nodes[:0]
		clear(t.conns)
		t.conns = t.conns[:0]
		t.proc.mu.Unlock()
	}
	t.deadline = time.Time{}
	t.timedOut.Store(false)
	t.victim.Store(false)
	if t.noKill || t.stopped {
		t.proc.mu.Lock()
		t.noKill, t.stopped = false, false
		t.proc.mu.Unlock()
	}
	t.entry, t.key, t.fetch, t.sql, t.cached = nil, "", false, "", false
}

// mark ends stage st now.
func (t *trace) mark(st digest.Stage) {
	now := time.Since(procStart)
	t.stages[st] += now - t.last
	t.last = now
}

// FirstByte marks the end of the Backend stage: the first packet of a
// backend's answer arrived.
func (t *trace) FirstByte() {
	if !t.first {
		t.first = true
		t.mark(digest.Backend)
		t.proc.stage.Store(procSending)
	}
}

// WaitStart and WaitDone bracket getting a backend connection ready: the
// time before is Route, the time getting it Wait, and its node is noted.
func (t *trace) WaitStart() {
	t.mark(digest.Route)
	t.proc.stage.Store(procPoolWait)
}

// WaitDone: see WaitStart.
func (t *trace) WaitDone(bc *backend.Conn) {
	t.mark(digest.Wait)
	t.proc.stage.Store(procBackend)
	if bc != nil {
		t.proc.mu.Lock()
		if !t.noKill && !slices.Contains(t.conns, bc) {
			t.conns = append(t.conns, bc)
		}
		t.proc.mu.Unlock()
		t.usedNode(bc.Node())
	}
}

// Piped: the statement is in flight on a pipelined connection as turn
// (nil: no more); a KILL QUERY goes through it.
func (t *trace) Piped(turn *backend.Turn) {
	t.proc.mu.Lock()
	t.turn = turn
	if turn != nil && t.stopped {
		turn.Kill() // the KILL came between joining the pipe and now
	}
	t.proc.mu.Unlock()
	if turn != nil {
		t.mark(digest.Wait)
		t.proc.stage.Store(procBackend)
		t.usedNode(turn.Node())
	}
}

// Committing: the statement commits its own work now; a KILL QUERY would
// leave that half done, so none reaches its connections any more.
func (t *trace) Committing() {
	t.proc.mu.Lock()
	t.noKill = true
	clear(t.conns)
	t.conns = t.conns[:0]
	t.proc.mu.Unlock()
}

// Released: bc went back to its pool; a KILL QUERY must not reach it now.
func (t *trace) Released(bc *backend.Conn) {
	// Only the session's goroutine changes conns: it may look without
	// the lock, and takes it only to change them.
	i := slices.Index(t.conns, bc)
	if i < 0 {
		return
	}
	t.proc.mu.Lock()
	t.conns = slices.Delete(t.conns, i, i+1)
	t.proc.mu.Unlock()
}

// Stopped is the error of keyshard's stop of the statement: 1213 as a
// deadlock's victim, the timeout error past its time limit; nil before.
func (t *trace) Stopped() error {
	if t.victim.Load() {
		return errDeadlock
	}
	if t.timedOut.Load() || !t.deadline.IsZero() && !time.Now().Before(t.deadline) {
		return timeoutError(t.mariaDB, t.limit)
	}
	return nil
}

// Retry ends a failed attempt: its time was spent on the backend.
func (t *trace) Retry() { t.mark(digest.Backend) }

// Sent counts rows sent and rows affected.
func (t *trace) Sent(rows, affected uint64) {
	t.rows += rows
	t.changed += affected
}

// Running records the connection running the statement (nil: none).
func (t *trace) Running(bc *backend.Conn) { t.cur.Store(bc) }

// Killed reports whether the session was killed.
func (t *trace) Killed() bool { return t.conn.Killed() }

// usedNode notes a node the statement ran on.
func (t *trace) usedNode(name string) {
	for _, n := range t.nodes {
		if n == name {
			return
		}
	}
	t.proc.mu.Lock()
	t.nodes = append(t.nodes, name)
	t.proc.mu.Unlock()
}

// digestOf returns the digest of a COM_QUERY (nil when digests are off).
// In a sharded schema (full set) the plan cache key is computed here and
// reused by routed; it is the digest key too unless the shape kept a
// literal. Otherwise the digest key is made on its own, and only as far as
// its text is kept (digest.MaxText), however long the statement.
func (s *Session) digestOf(sql string, full bool) *digest.Entry {
	d := s.srv.digests
	if !d.On() {
		return nil
	}
	var key []byte
	if full {
		s.tr.shape = s.getParser().Shape(sql, s.vars.DB)
		key = s.tr.shape.Key
		if router.IsDigestKey(key) {
			key = append(s.dkey[:0], digest.Key(key)...)
		} else {
			key = nil
		}
	}
	if key == nil {
		key = router.DigestKey(s.dkey[:0], s.vars.DB, sql, digest.MaxText)
	}
	s.dkey = key
	s.tr.key = unsafe.String(unsafe.SliceData(key), len(key))
	return d.Lookup(key)
}

// traceStmt points the trace at prepared statement st (an execution, or
// with fetch a cursor fetch).
func (s *Session) traceStmt(st *prepared, fetch bool) {
	s.tr.entry, s.tr.key, s.tr.fetch, s.tr.sql = s.srv.digests.Get(&st.dig), st.dig.Key, fetch, st.sql
	s.tr.proc.setText(st.sql)
}

// digestID is the digest of the statement the trace is for, for the logs:
// its entry's, or computed (the entry is "other", or digests are off).
func (s *Session) digestID(sql string) uint64 {
	if e := s.tr.entry; e != nil && !e.IsOther() {
		return e.ID
	}
	if s.tr.key != "" {
		return digest.ID(s.tr.key)
	}
	return digest.ID(string(router.DigestKey(nil, s.vars.DB, sql, digest.MaxText)))
}

// stageTotals are stage counters (keyshard_stage_seconds_total): each
// session adds to its own, and adds them to the server's when it ends.
type stageTotals [digest.NumStages]atomic.Int64

func (t *stageTotals) addTo(dst *[digest.NumStages]int64) {
	for i := range t {
		dst[i] += t[i].Load()
	}
}

// endStages moves a closing session's stage counters to the server's.
func (s *Server) endStages(sess *Session) {
	s.stagesMu.Lock()
	for i := range sess.stageNs {
		s.stageNs[i].Add(sess.stageNs[i].Load())
	}
	s.sessions.Delete(sess.c.ID()) // the key Login stored it under
	s.stagesMu.Unlock()
}

// stages returns the stage counters of all statements: the closed
// sessions' and the open ones'. Under stagesMu, so that a session closing
// meanwhile is counted once (the counters never go back).
func (s *Server) stages() (out [digest.NumStages]int64) {
	s.stagesMu.Lock()
	defer s.stagesMu.Unlock()
	s.stageNs.addTo(&out)
	s.sessions.Range(func(_, v any) bool {
		v.(*Session).stageNs.addTo(&out)
		return true
	})
	return out
}

// endStmt completes the statement's trace: the time not yet marked goes to
// the stage it was spent in, and the sample is recorded in its digest, the
// stage counters and the SQL and slow logs.
func (s *Session) endStmt(cmd byte, p []byte, d time.Duration, err error) {
	tr := &s.tr
	var sum time.Duration
	for _, v := range tr.stages {
		sum += v
	}
	if rest := d - sum; rest > 0 {
		switch {
		case tr.first:
			tr.stages[digest.Relay] += rest
		case len(tr.nodes) > 0:
			tr.stages[digest.Backend] += rest
		default:
			tr.stages[digest.Route] += rest
		}
	}
	for i, v := range tr.stages {
		if v > 0 {
			s.stageNs[i].Add(int64(v)) // the session's own: no contention
		}
	}
	tr.shape = router.Shape{} // a big statement's key and literals go now
	sql := tr.sql
	if sql == "" && cmd == mysql.COM_QUERY {
		sql = unsafe.String(unsafe.SliceData(p[1:]), len(p)-1)
	}
	if tr.entry == nil && (sql == "" || !s.srv.sql.wants(d)) {
		return
	}
	sm := digest.Sample{Start: tr.start, Total: d, Stages: tr.stages, Rows: tr.rows, Affected: tr.changed,
		Bytes: s.c.Packets().Written - tr.written, Err: err != nil && err != errQuit, Cached: tr.cached}
	switch {
	case tr.entry == nil:
	case tr.fetch:
		tr.entry.RecordFetch(&sm)
	default:
		tr.entry.Record(&sm)
	}
	if sql != "" {
		s.srv.sql.record(s, sql, &sm, err)
	}
}

// errDeadlock is what a deadlock victim's client gets, as from one server.
var errDeadlock = &mysql.MyError{Code: mysql.ER_LOCK_DEADLOCK, State: "40001", Message: "Deadlock found when trying to get lock; try restarting transaction"}

// abortVictim stops the running statement, which started at since (unix
// nanos), as the victim of a deadlock across nodes: KILL QUERY on each of
// its backend connections, and its error becomes 1213. False when that
// statement is over, or commits (it waits for no lock).
func (t *trace) abortVictim(since int64, log *zap.Logger) bool {
	p := &t.proc
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd.Load() < 0 || p.since.Load() != since || t.noKill {
		return false
	}
	t.victim.Store(true)
	t.killQueriesLocked(log)
	return true
}

// running is when the running command started (unix nanos), 0 when the
// session is asleep.
func (p *procState) running() int64 {
	if p.cmd.Load() < 0 {
		return 0
	}
	return p.since.Load()
}
