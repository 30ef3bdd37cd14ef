package proxy

import (
	"strconv"
	"strings"
	"time"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/engine"
	"github.com/keyshard/keyshard/router"
)

// SET: a session's variables are session state. SET runs on a backend
// connection; what it changed is read back and kept in the session's
// backend.State, which every other pooled connection the session uses is
// synced to (backend.Conn.Sync). What cannot be known pins the connection.
// The idle timeouts are the exception: they belong to the client's own
// connection (see isIdleVar).

// set handles a SET statement: it runs on a synced connection, then the
// session records what changed so other pooled connections can replay it.
func (s *Session) set(p []byte, sql string) error {
	items, perr := s.getParser().ParseSet(sql)
	var names *router.SetItem
	var sysvars []string
	if perr != nil {
		s.lease.Stick("unparsed SET")
	}
	for i := range items {
		switch it := &items[i]; it.Kind {
		case router.SetUserVar:
			s.lease.Stick("user variables")
		case router.SetOneShot:
			s.lease.Stick("SET TRANSACTION")
		case router.SetNames:
			names = it
		case router.SetSysVar:
			sysvars = append(sysvars, it.Name)
		}
	}
	return s.eng.ForwardThen(nil, p, nil, nil, func(bc *backend.Conn, res engine.Result) {
		if res.Err == nil && (names != nil || len(sysvars) > 0) {
			s.learnSet(bc, names, sysvars)
		}
	})
}

// learnSet records in the session's state what a SET that succeeded on bc
// changed: the character set, and the session variables' new values as
// the server reads them back.
func (s *Session) learnSet(bc *backend.Conn, names *router.SetItem, sysvars []string) {
	st := s.vars.State
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
			s.lease.Stick("SET of unreadable variable")
		} else {
			vars := make([]backend.Var, 0, len(sysvars))
			idle := false
			for i, name := range sysvars {
				if isIdleVar(name) {
					idle = true
					if name == "wait_timeout" && r.Rows[0][i] != nil {
						secs, _ := strconv.ParseInt(*r.Rows[0][i], 10, 64)
						s.idleTimeout = time.Duration(secs) * time.Second
					}
					continue
				}
				vars = append(vars, backend.Var{Name: name, Value: literal(r.Rows[0][i])})
			}
			st = st.WithVars(vars...)
			if idle {
				// Pooled connections keep the server's own timeouts: one
				// left with a client's short wait_timeout would be closed
				// by the server while idle in the pool, under the next
				// client.
				if _, err := bc.Exec("SET @@SESSION.wait_timeout = DEFAULT, @@SESSION.interactive_timeout = DEFAULT"); err != nil {
					bc.MarkBroken()
				}
			}
		}
	}
	s.vars.State = st
	bc.SetState(st)
}

// isIdleVar reports whether a session variable says how long an idle
// client connection lives: keyshard applies it to the client's connection
// (wait_timeout; interactive_timeout only seeds it at login), never to
// pooled backend connections.
func isIdleVar(name string) bool { return name == "wait_timeout" || name == "interactive_timeout" }

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
