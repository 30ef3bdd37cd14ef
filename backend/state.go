package backend

import (
	"slices"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend/wire"
)

// State is the session state a client expects of whichever backend
// connection serves it: character set and session system variables. It is
// immutable; a client that changes a setting gets a new State, so checking a
// pooled connection costs one pointer comparison when nothing changed.
type State struct {
	Charset   string // as in SET NAMES; never empty
	Collation string // empty: the charset's default
	Vars      []Var  // session system variables, sorted by Name

	key string // all of the above in one string (see Key)
}

// Key identifies the state's content: two states with the same key make a
// connection behave the same (a prepared statement parsed under one is
// valid under the other).
func (s *State) Key() string {
	if s == nil {
		return ""
	}
	return s.key
}

func (s *State) sealed() *State {
	var b strings.Builder
	b.WriteString(s.Charset)
	b.WriteByte('/')
	b.WriteString(s.Collation)
	for _, v := range s.Vars {
		b.WriteByte(';')
		b.WriteString(v.Name)
		b.WriteByte('=')
		b.WriteString(v.Value)
	}
	s.key = b.String()
	return s
}

// Var is one session system variable with its value as an SQL literal.
type Var struct {
	Name  string // lower case, no @@session. prefix
	Value string // SQL literal: 'text', 42, NULL
}

// NewState returns a state with the given charset and collation and no
// variables.
func NewState(charset, collation string) *State {
	return (&State{Charset: charset, Collation: collation}).sealed()
}

// WithNames returns a copy with a new character set; the variables SET NAMES
// overrides are dropped, as the server does.
func (s *State) WithNames(charset, collation string) *State {
	n := &State{Charset: charset, Collation: collation}
	for _, v := range s.Vars {
		switch v.Name {
		case "character_set_client", "character_set_results", "character_set_connection", "collation_connection":
			continue
		}
		n.Vars = append(n.Vars, v)
	}
	return n.sealed()
}

// WithVars returns a copy with the given variables set (replacing earlier
// values of the same names).
func (s *State) WithVars(vars ...Var) *State {
	n := &State{Charset: s.Charset, Collation: s.Collation, Vars: slices.Clone(s.Vars)}
	for _, v := range vars {
		v.Name = strings.ToLower(v.Name)
		i, found := slices.BinarySearchFunc(n.Vars, v.Name, func(a Var, name string) int { return strings.Compare(a.Name, name) })
		if found {
			n.Vars[i] = v
		} else {
			n.Vars = slices.Insert(n.Vars, i, v)
		}
	}
	return n.sealed()
}

// Get returns a variable's value.
func (s *State) Get(name string) (string, bool) {
	i, found := slices.BinarySearchFunc(s.Vars, name, func(a Var, name string) int { return strings.Compare(a.Name, name) })
	if !found {
		return "", false
	}
	return s.Vars[i].Value, true
}

// diff returns the assignments of one SET statement that turn a connection
// in state from into state to. from == nil means unknown: everything in to is
// applied.
func diff(from, to *State) []string {
	var parts []string
	if from == nil || from.Charset != to.Charset || from.Collation != to.Collation {
		n := "NAMES " + to.Charset
		if to.Collation != "" {
			n += " COLLATE " + to.Collation
		}
		parts = append(parts, n)
	}
	var old []Var
	if from != nil {
		old = from.Vars
	}
	i, j := 0, 0
	for i < len(old) || j < len(to.Vars) {
		switch {
		case j == len(to.Vars) || (i < len(old) && old[i].Name < to.Vars[j].Name):
			parts = append(parts, "@@SESSION."+old[i].Name+" = DEFAULT")
			i++
		case i == len(old) || old[i].Name > to.Vars[j].Name:
			parts = append(parts, "@@SESSION."+to.Vars[j].Name+" = "+to.Vars[j].Value)
			j++
		default:
			if old[i].Value != to.Vars[j].Value {
				parts = append(parts, "@@SESSION."+to.Vars[j].Name+" = "+to.Vars[j].Value)
			}
			i++
			j++
		}
	}
	return parts
}

// Sync makes the connection match a client's session: current database,
// multi-statement option, autocommit and State. It is a no-op (no round
// trip) when the connection already matches, which is the common case.
// Autocommit is compared with what the server last reported (every OK
// carries it); it is only changed on a pooled connection, which is never
// in a transaction (the lease pins one that may be: engine.inTrans), so
// setting it commits nothing.
func (c *Conn) Sync(db string, multi, autocommit bool, st *State) error {
	var parts []string
	if c.Autocommit() != autocommit {
		if autocommit {
			parts = append(parts, "autocommit = 1")
		} else {
			parts = append(parts, "autocommit = 0")
		}
	}
	if st != c.state && st != nil {
		parts = append(parts, diff(c.state, st)...)
	}
	if len(parts) > 0 {
		if _, err := c.Exec("SET " + strings.Join(parts, ", ")); err != nil {
			return err
		}
	}
	if st != nil {
		c.state = st
	}
	if db != c.db && db != "" {
		if _, err := c.Command(mysql.COM_INIT_DB, []byte(db)); err != nil {
			return err
		}
		c.db = db
	}
	if multi != c.multi {
		opt := []byte{0, 0} // MYSQL_OPTION_MULTI_STATEMENTS_ON
		if !multi {
			opt[0] = 1
		}
		if _, err := c.Command(mysql.COM_SET_OPTION, opt); err != nil {
			return err
		}
		c.multi = multi
	}
	return nil
}

// Multi reports whether multi-statements are on for the connection.
func (c *Conn) Multi() bool { return c.multi }

// Autocommit reports whether autocommit is on, as the server last said.
func (c *Conn) Autocommit() bool { return c.Status&wire.StatusAutocommit != 0 }

// SetDB records a database change made by a statement relayed on this
// connection (USE, COM_INIT_DB).
func (c *Conn) SetDB(db string) { c.db = db }

// SetState records that a relayed statement left the connection in st.
func (c *Conn) SetState(st *State) { c.state = st }
