package proxy

import (
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/router"
)

// The checks every statement passes before it runs: the user's privileges
// (user_list's server_admin, no_ddl, read_only) and the SQL blacklist.

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
