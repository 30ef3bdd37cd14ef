package proxy

// AdminFunc runs keyshard's own statements: kingshard's `admin ...` forms
// and the SHOW forms that describe the proxy (package proxy/admin builds
// one and cmd/keyshard installs it with SetAdmin). It is called for every
// statement that starts with ADMIN or SHOW; handled false lets a SHOW that
// is not keyshard's go to the backend. It runs on the session's goroutine
// and must not keep req.SQL, which aliases the session's read buffer.
type AdminFunc func(req AdminRequest) (res *AdminResult, handled bool, err error)

// AdminRequest is one statement for an AdminFunc.
type AdminRequest struct {
	ConnID uint32
	User   string
	From   string // the client's address
	Admin  bool   // the user may run admin statements (root or admin_users)
	SQL    string // from its first keyword; leading comments removed
}

// AdminResult is the answer to an admin statement: a result set when
// Columns is set, else an OK packet with Affected and Info.
type AdminResult struct {
	Columns  []string
	Rows     [][]string
	Affected uint64
	Info     string
	// Warnings are counted in the OK packet and shown by the session's
	// next SHOW WARNINGS (or SHOW COUNT(*) WARNINGS), as a server's.
	Warnings []string
	// Nullable, when set, are the rows instead of Rows: a nil value is
	// NULL.
	Nullable [][]*string
}

// SetAdmin installs the admin statement handler (nil removes it).
func (s *Server) SetAdmin(f AdminFunc) {
	if f == nil {
		s.admin.Store(nil)
		return
	}
	s.admin.Store(&f)
}

// adminStmt offers sql (ADMIN ... or SHOW ...) to the admin handler.
func (s *Session) adminStmt(sql string) (bool, error) {
	f := s.srv.admin.Load()
	if f == nil {
		return false, nil
	}
	res, handled, err := (*f)(AdminRequest{ConnID: s.c.ID(), User: s.user, From: s.c.Host(), Admin: s.snap.cfg.IsAdmin(s.user), SQL: sql})
	if !handled {
		return false, nil
	}
	if err != nil {
		return true, s.fail(err)
	}
	if res == nil {
		res = &AdminResult{}
	}
	if res.Columns == nil {
		s.eng.Diag.Own(res.Warnings)
		return true, s.cl.OK(res.Affected, 0, s.lease.Status(), uint16(min(len(res.Warnings), 65535)), res.Info)
	}
	if res.Nullable != nil {
		return true, s.cl.NullableResultSet(res.Columns, res.Nullable, s.lease.Status())
	}
	return true, s.writeResultSet(res.Columns, res.Rows)
}

// isAdminCandidate reports whether the statement may be keyshard's own:
// it starts with ADMIN or SHOW.
func isAdminCandidate(sql string) bool {
	if len(sql) < 5 {
		return false
	}
	switch sql[0] | 0x20 {
	case 'a':
		_, ok := cutPrefixFold(sql, "admin ")
		return ok
	case 's':
		_, ok := cutPrefixFold(sql, "show ")
		return ok
	}
	return false
}

// hinted reports whether lead, the comments before a statement, holds a
// node hint: the statement is for that node's server (/*node1*/ SHOW
// PROCESSLIST lists the backend's threads), not keyshard's.
func (s *Session) hinted(lead string) bool {
	if lead == "" {
		return false
	}
	_, ok, err := s.hintNode(lead)
	return ok || err != nil
}
