package proxy

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
)

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
	if ok && (id > math.MaxUint32 || v.(*Session).c.Killed()) {
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
		s.c.Kill()
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
		s.c.Kill()
	}
	p := &s.tr.proc
	p.mu.Lock()
	if p.cmd.Load() >= 0 { // a statement runs: stop it on each of its connections
		s.tr.killQueriesLocked(s.c.Log())
	}
	p.mu.Unlock()
	if closeConn {
		s.c.Abort()
	}
}
