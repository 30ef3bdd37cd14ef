package proxy

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/engine"
	"github.com/keyshard/keyshard/router"
)

// SET: a session's variables are session state. SET runs on a backend
// connection; what it changed is kept in the session's backend.State
// (constants as written, computed values as the server's session tracking
// reports them, else read back), which every other pooled connection the
// session uses is synced to (backend.Conn.Sync). What cannot be known pins
// the connection. The idle timeouts are the exception: they belong to the
// client's own connection (see isIdleVar); and profiling, whose history
// belongs to the connection the session keeps.

// set handles a SET statement: it runs on a synced connection, then the
// session records what changed so other pooled connections can replay it.
func (s *Session) set(p []byte, sql string) error {
	items, perr := s.getParser().ParseSet(sql)
	if handled, err := s.setMaxExecution(items); handled {
		return err
	}
	var names *router.SetItem
	var sysvars []router.SetItem
	global := false
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
			sysvars = append(sysvars, *it)
			if it.Name == "profiling" {
				// The history lives on the connection: SHOW PROFILES
				// must find the session's statements there, and no
				// other client may see them (a reset keeps it).
				s.lease.NoReuse("profiling")
			}
		case router.SetGlobal:
			global = true
		case router.SetAutocommit:
			if s.lease.Branches() > 0 {
				return s.fail(newErr(errNotSupported, "keyshard: SET autocommit would commit a transaction over several nodes implicitly, "+
					"which keyshard cannot do in two phases; COMMIT first (the transaction is still open)"))
			}
		}
	}
	oneShot := slices.ContainsFunc(items, func(it router.SetItem) bool { return it.Kind == router.SetOneShot })
	return s.eng.ForwardThen(nil, p, nil, nil, func(bc *backend.Conn, res engine.Result) {
		if res.Err != nil {
			return
		}
		if oneShot {
			s.lease.NextTx(strings.Clone(sql))
		}
		if global {
			// New sessions on that server start from the new globals:
			// so do its pooled connections, from their next client on.
			bc.Pool().GlobalsChanged()
		}
		if names != nil || len(sysvars) > 0 {
			s.learnSet(bc, names, sysvars, res.Tracked)
		}
	})
}

// learnSet records in the session's state what a SET that succeeded on bc
// changed: the character set, and the session variables' new values. A
// constant value is taken as written (replaying it gives the same value);
// a computed one as the server's session tracking reported it; only a
// computed value of a variable the session does not track is read back
// with a SELECT.
func (s *Session) learnSet(bc *backend.Conn, names *router.SetItem, sysvars []router.SetItem, tracked []backend.Var) {
	st := s.vars.State
	if names != nil {
		cs := names.Name
		if cs == "" {
			cs = s.srv.baseState.Charset
		}
		st = st.WithNames(cs, names.Collation)
	}
	vars := make([]backend.Var, 0, len(sysvars))
	var ask []string // read back
	idle := false
	for _, it := range sysvars {
		if it.Name == "profiling" {
			// Not replayed: the history belongs to the connection the
			// session keeps (see set); another would record there too.
			continue
		}
		v := backend.Var{Name: it.Name, Value: it.Value}
		if strings.HasPrefix(v.Name, "tx_") && !s.srv.identity(s.snap).mariaDB {
			// SET SESSION TRANSACTION comes as MariaDB's tx_isolation
			// and tx_read_only; MySQL 8 knows only transaction_*.
			v.Name = "transaction_" + v.Name[len("tx_"):]
		}
		if v.Value == "" || v.Value == "DEFAULT" && isIdleVar(v.Name) {
			// The idle timeouts' own value is needed, not DEFAULT.
			v.Value = ""
			for _, t := range tracked {
				// The tracker prints NULL as an empty string: an empty
				// value is read back.
				if t.Name == it.Name && t.Value != "" {
					v.Value = literal(&t.Value)
				}
			}
		}
		if v.Value == "" {
			ask = append(ask, it.Name)
			continue
		}
		vars = append(vars, v)
	}
	if len(ask) > 0 {
		r, err := bc.Exec("SELECT @@SESSION." + strings.Join(ask, ", @@SESSION."))
		if err != nil || len(r.Rows) != 1 || len(r.Rows[0]) != len(ask) {
			// Cannot know the values: keep this connection for good.
			s.lease.Stick("SET of unreadable variable")
			ask = nil
		}
		for i, name := range ask {
			vars = append(vars, backend.Var{Name: name, Value: literal(r.Rows[0][i])})
		}
	}
	kept := vars[:0]
	for _, v := range vars {
		if !isIdleVar(v.Name) {
			kept = append(kept, v)
			continue
		}
		idle = true
		secs, _ := strconv.ParseUint(strings.Trim(v.Value, "'"), 10, 64)
		if v.Name == "wait_timeout" {
			s.c.SetIdleTimeout(time.Duration(secs) * time.Second)
			s.timeouts[0] = secs
		} else {
			s.timeouts[1] = secs
		}
	}
	if len(kept) > 0 {
		st = st.WithVars(kept...)
	}
	if idle {
		// Pooled connections keep the server's own timeouts: one left
		// with a client's short wait_timeout would be closed by the server
		// while idle in the pool, under the next client.
		if _, err := bc.Exec("SET @@SESSION.wait_timeout = DEFAULT, @@SESSION.interactive_timeout = DEFAULT"); err != nil {
			bc.MarkBroken()
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
