package proxy

import (
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/proxy/digest"
	"github.com/keyshard/keyshard/router"
)

// trace follows the statement a session is running, for its digest, the
// slow log and the stage counters. Marks split the statement's time into
// stages (see digest.Stage): each mark gives the time since the previous
// one to a stage. A mark is one monotonic clock read.
type trace struct {
	start   time.Time
	last    time.Duration // procStart to the last mark
	stages  [digest.NumStages]time.Duration
	first   bool // a backend's answer started (the Backend stage ended)
	shaped  bool // the router parser holds this statement's shape (routed uses it)
	rows    uint64
	changed uint64 // rows affected
	written uint64 // client bytes written before the statement
	nodes   []string
	entry   *digest.Entry
	sql     string // a prepared statement's text ("" for COM_QUERY)
}

var procStart = time.Now()

func (t *trace) begin(start time.Time, written uint64) {
	t.start, t.last = start, start.Sub(procStart)
	t.stages = [digest.NumStages]time.Duration{}
	t.first, t.shaped = false, false
	t.rows, t.changed, t.written = 0, 0, written
	t.nodes = t.nodes[:0]
	t.entry, t.sql = nil, ""
}

// mark ends stage st now.
func (s *Session) mark(st digest.Stage) {
	now := time.Since(procStart)
	s.tr.stages[st] += now - s.tr.last
	s.tr.last = now
}

// firstByte marks the end of the Backend stage: the first packet of a
// backend's answer arrived.
func (s *Session) firstByte() {
	if !s.tr.first {
		s.tr.first = true
		s.mark(digest.Backend)
	}
}

// usedNode notes a node the statement ran on.
func (s *Session) usedNode(name string) {
	for _, n := range s.tr.nodes {
		if n == name {
			return
		}
	}
	s.tr.nodes = append(s.tr.nodes, name)
}

// digestOf returns the digest of a COM_QUERY (nil when digests are off).
// In a sharded schema the shape is the router's plan cache key, computed
// once here and reused by routed; elsewhere only the start of a long
// statement is normalized, as only the first digest.MaxText bytes of its
// shape are kept.
func (s *Session) digestOf(sql string, full bool) *digest.Entry {
	d := s.srv.digests
	if !d.On() {
		return nil
	}
	if !full && len(sql) > 4*digest.MaxText {
		sql = sql[:4*digest.MaxText]
	}
	key := s.getParser().Shape(sql, s.db)
	s.tr.shaped = full
	if dk := router.DigestKey(s.dkey[:0], key); len(dk) != len(key) || &dk[0] != &key[0] {
		if cap(dk) <= 64<<10 {
			s.dkey = dk
		}
		key = dk
	}
	return d.Lookup(key)
}

// stageTotals are the stage counters of every statement (the Prometheus
// keyshard_stage_seconds_total).
type stageTotals [digest.NumStages]atomic.Int64

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
			s.srv.stageNs[i].Add(int64(v))
		}
	}
	sql := tr.sql
	if sql == "" && cmd == mysql.COM_QUERY {
		sql = unsafe.String(unsafe.SliceData(p[1:]), len(p)-1)
	}
	if tr.entry == nil && (sql == "" || !s.srv.sql.wants(d)) {
		return
	}
	sm := digest.Sample{Start: tr.start, Total: d, Stages: tr.stages, Rows: tr.rows, Affected: tr.changed,
		Bytes: s.pkt.Written - tr.written, Err: err != nil && err != errQuit}
	if tr.entry != nil {
		tr.entry.Record(&sm)
	}
	if sql != "" {
		s.srv.sql.record(s, sql, &sm, err)
	}
}
