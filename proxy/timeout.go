package proxy

import (
	"context"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/proxy/engine"
	"github.com/keyshard/keyshard/proxy/frontend"
	"github.com/keyshard/keyshard/router"
	"go.uber.org/zap"
)

// Statement time limits (max_execution_time): the session arms a timer
// when a statement starts; past its limit, the timer stops the statement
// on every backend connection it holds (KILL QUERY), a wait for a pooled
// connection gives up (Lease.Deadline), and the statement ends with the
// server's timeout error (Engine.Fail and the relay of the backends'
// "interrupted" answer use trace.TimedOut).

// MariaDB's and MySQL's errors for a statement past its time limit.
const (
	erStatementTimeout = 1969 // MariaDB ER_STATEMENT_TIMEOUT
	erQueryTimeout     = 3024 // MySQL ER_QUERY_TIMEOUT
)

// timeoutError is the error a client of a MariaDB (mariaDB) or MySQL
// server expects for a statement stopped at its time limit.
func timeoutError(mariaDB bool, d time.Duration) error {
	if mariaDB {
		return &mysql.MyError{Code: erStatementTimeout, State: "70100",
			Message: "Query execution was interrupted (max_statement_time exceeded): keyshard stopped it after max_execution_time " + d.String()}
	}
	return &mysql.MyError{Code: erQueryTimeout, State: "HY000",
		Message: "Query execution was interrupted, maximum statement execution time exceeded: keyshard stopped it after max_execution_time " + d.String()}
}

// timed reports whether a statement may be stopped at a configured time
// limit: reads, writes, calls, loads, DO. Never transaction control (a
// COMMIT stopped half-way leaves its outcome unknown), DDL or table
// maintenance (a sharded table's sub-tables would end up unlike), or
// session statements. A client's own limit (SET max_execution_time, the
// hint) covers SELECT only, as MySQL's.
func timed(sql string, info router.Info) bool {
	switch info.Kind {
	case router.KindSelect, router.KindInsert, router.KindUpdate, router.KindDelete, router.KindReplace,
		router.KindCall, router.KindLoad, router.KindExecute, router.KindShow:
		return true
	case router.KindOther:
		_, do := cutPrefixFold(sql[info.Start:], "do ")
		return do
	}
	return false
}

// selectHint returns the argument of optimizer hint name in SELECT
// /*+ ... name(arg) ... */ (the hint comment right after SELECT, as MySQL
// reads hints).
func selectHint(sql string, info router.Info, name string) (string, bool) {
	if info.Kind != router.KindSelect {
		return "", false
	}
	rest, ok := cutPrefixFold(sql[info.Start:], "select")
	if !ok {
		return "", false
	}
	rest = strings.TrimLeft(rest, " \t\r\n")
	if !strings.HasPrefix(rest, "/*+") {
		return "", false
	}
	end := strings.Index(rest, "*/")
	if end < 0 {
		return "", false
	}
	hints := rest[3:end]
	i := strings.Index(strings.ToLower(hints), name)
	if i < 0 || i > 0 && isIdentByte(hints[i-1]) {
		return "", false
	}
	arg := strings.TrimLeft(hints[i+len(name):], " \t\r\n")
	if !strings.HasPrefix(arg, "(") {
		return "", false
	}
	arg, _, ok = strings.Cut(arg[1:], ")")
	return strings.TrimSpace(arg), ok
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// hintTimeout reads MySQL's optimizer hint SELECT /*+ MAX_EXECUTION_TIME(N) */
// (N milliseconds; 0: no limit).
func hintTimeout(sql string, info router.Info) (time.Duration, bool) {
	arg, ok := selectHint(sql, info, "max_execution_time")
	if !ok {
		return 0, false
	}
	ms, err := strconv.ParseUint(arg, 10, 32)
	if err != nil {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// stmtLimit is a session's statement time limits and the timer that
// stops a statement past its own.
type stmtLimit struct {
	tr    *trace
	lease *engine.Lease
	c     *frontend.Conn
	// The client's SET max_execution_time (-1: none set), the user's or
	// schema's, the timer, and the running statement's deadline for it
	// (unix nanos; MaxInt64 once the statement is over).
	maxExec    time.Duration
	cfgMaxExec time.Duration
	timer      *time.Timer
	deadlineNs atomic.Int64
}

// of is the time limit of statement sql: its hint's, the session's SET
// max_execution_time, the user's, the schema's (0: none).
func (l *stmtLimit) of(sql string, info router.Info) time.Duration {
	if !timed(sql, info) {
		return 0
	}
	if info.Kind == router.KindSelect {
		if d, ok := hintTimeout(sql, info); ok {
			return d
		}
		if l.maxExec >= 0 {
			return l.maxExec
		}
	}
	return l.cfgMaxExec
}

// arm gives the running statement a time limit of d from its start
// (nothing for d <= 0).
func (l *stmtLimit) arm(d time.Duration) {
	if d <= 0 {
		return
	}
	tr := l.tr
	tr.deadline = tr.start.Add(d)
	tr.limit, tr.mariaDB = d, l.c.MariaDB()
	l.lease.Deadline = tr.deadline
	l.deadlineNs.Store(tr.deadline.UnixNano())
	if l.timer == nil {
		l.timer = time.AfterFunc(time.Until(tr.deadline), l.fire)
	} else {
		l.timer.Reset(time.Until(tr.deadline))
	}
}

// disarm ends the running statement's time limit.
func (l *stmtLimit) disarm() {
	if !l.tr.deadline.IsZero() {
		l.timer.Stop()
		l.deadlineNs.Store(math.MaxInt64) // a late call of the timer finds no statement to stop
		l.lease.Deadline = time.Time{}
	}
}

// stop stops the timer for good (the session ends).
func (l *stmtLimit) stop() {
	if l.timer != nil {
		l.timer.Stop()
	}
}

// fire stops the statement the timer was armed for, if it still runs.
func (l *stmtLimit) fire() {
	p := &l.tr.proc
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Now().UnixNano() < l.deadlineNs.Load() {
		return // a late call: that statement is over (the next one may have a deadline of its own)
	}
	l.tr.timedOut.Store(true)
	l.tr.killQueriesLocked(l.c.Log())
}

// killQueriesLocked stops the running statement on every backend
// connection it holds, at once (KILL QUERY on a connection of its own to
// each server). proc.mu is held: none of them goes back to its pool, to
// run someone else's statement, before its KILL is done.
func (t *trace) killQueriesLocked(log *zap.Logger) {
	t.stopped = true
	if t.turn != nil {
		t.turn.Kill() // on its pipelined connection, when its turn comes
	}
	var wg sync.WaitGroup
	for _, bc := range t.conns {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if err := bc.Pool().KillQuery(ctx, bc.ThreadID()); err != nil {
				log.Warn("KILL QUERY on backend failed", zap.String("node", bc.Node()), zap.String("addr", bc.Addr()), zap.Error(err))
			}
		})
	}
	wg.Wait()
}

// setMaxExecution takes SET [SESSION] max_execution_time = N (alone in its
// SET) as the session's time limit: keyshard keeps it (MariaDB has no such
// variable; its max_statement_time is the server's own). handled is false
// for any other SET.
func (s *Session) setMaxExecution(items []router.SetItem) (handled bool, err error) {
	if len(items) != 1 || items[0].Kind != router.SetSysVar || items[0].Name != "max_execution_time" {
		return false, nil
	}
	v := items[0].Value
	if strings.EqualFold(v, "default") {
		s.limit.maxExec = -1
		return true, s.writeOK(0, 0)
	}
	ms, perr := strconv.ParseUint(v, 10, 32)
	if perr != nil {
		return true, s.fail(&mysql.MyError{Code: mysql.ER_WRONG_TYPE_FOR_VAR, State: "42000",
			Message: "Incorrect argument type to variable 'max_execution_time': want milliseconds, a whole number"})
	}
	s.limit.maxExec = time.Duration(ms) * time.Millisecond
	return true, s.writeOK(0, 0)
}
