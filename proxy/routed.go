package proxy

import (
	"slices"
	"strings"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/digest"
	"github.com/keyshard/keyshard/proxy/engine"
	"github.com/keyshard/keyshard/proxy/join"
	"github.com/keyshard/keyshard/router"
)

// routed runs a COM_QUERY in a schema with shard rules. handled is false
// when the statement is not the router's business (SET, SHOW, ...); the
// caller then forwards it as usual.
func (s *Session) routed(p []byte, sql string, info router.Info) (handled bool, err error) {
	if s.lease.Branches() > 0 {
		// A transaction over several nodes: ended here, in two phases.
		switch info.Kind {
		case router.KindCommit, router.KindRollback:
			if isSavepointStmt(sql[info.Start:]) {
				return true, s.fail(newErr(errNotSupported, "keyshard: savepoints in a transaction over several nodes are not supported "+
					"(the transaction is still open)"))
			}
			if f := strings.Fields(strings.ToLower(sql[info.Start:])); len(f) > 1 && (f[len(f)-1] == "chain" || f[len(f)-1] == "release") {
				return true, s.fail(newErr(errNotSupported, "keyshard: %s AND CHAIN / RELEASE in a transaction over several nodes is "+
					"not supported; end it plainly (the transaction is still open)", strings.ToUpper(f[0])))
			}
			if _, err := s.lease.EndTx(info.Kind == router.KindCommit); err != nil {
				return true, s.fail(err)
			}
			return true, s.writeOK(0, 0)
		case router.KindBegin:
			// BEGIN commits the open transaction first, as on the server.
			if _, err := s.lease.EndTx(true); err != nil {
				return true, s.fail(err)
			}
		case router.KindDDL:
			// A DDL commits the transaction implicitly, in two phases
			// (ddlCommit, below); a temporary table's does not.
			if !commitsImplicitly(sql, info) {
				return true, s.fail(newErr(errNotSupported, "keyshard: CREATE or DROP TEMPORARY TABLE in a transaction over several "+
					"nodes is not supported; COMMIT first (the transaction is still open)"))
			}
		case router.KindLockTables, router.KindCall, router.KindOther:
			if isSavepointStmt(sql[info.Start:]) {
				return true, s.fail(newErr(errNotSupported, "keyshard: savepoints in a transaction over several nodes are not supported "+
					"(the transaction is still open)"))
			}
			return true, s.fail(newErr(errNotSupported, "keyshard: this statement may commit a transaction over several nodes "+
				"implicitly, which keyshard cannot do in two phases; COMMIT first (the transaction is still open)"))
		}
	}
	switch info.Kind {
	case router.KindBegin:
		if s.lease.Pinned() == nil {
			// Opened on the node of the transaction's first statement.
			s.lease.Defer(strings.Clone(sql))
			return true, s.writeOK(0, 0)
		}
		return false, nil
	case router.KindCommit, router.KindRollback:
		if s.lease.Deferred() && s.lease.Pinned() == nil {
			s.lease.Defer("")
			return true, s.writeOK(0, 0)
		}
		return false, nil
	case router.KindPrepare:
		return s.ps.textPrepare(sql)
	case router.KindExecute:
		return s.ps.textExecute(sql, info)
	case router.KindDeallocate:
		return s.ps.textDeallocate(sql)
	}
	if !router.Routed(info.Kind) {
		return false, nil
	}
	if n, ok, err := s.hintNode(sql[:info.Start]); err != nil {
		return true, s.fail(err)
	} else if ok {
		if replan, err := heldTables(s, nil, true); err != nil {
			return true, s.fail(err)
		} else if replan {
			return s.routed(p, sql, info)
		}
		if err := ddlCommit(s, sql, info); err != nil {
			return true, s.fail(err)
		}
		return true, s.eng.Forward(n, p, nil, &info)
	}
	var pl *router.Plan
	var lits []router.Literal
	if s.tr.shape.Key != nil {
		pl, lits, err = s.route.PlanShape(s.getParser(), s.tr.shape, sql, s.vars.DB, info.Kind)
	} else {
		pl, lits, err = s.route.Plan(s.getParser(), sql, s.vars.DB, info.Kind)
	}
	s.tr.mark(digest.Parse)
	if err != nil {
		return true, s.fail(err)
	}
	if replan, err := heldStatement(s, pl); err != nil {
		return true, s.fail(err)
	} else if replan {
		return s.routed(p, sql, info)
	}
	if err := ddlCommit(s, sql, info); err != nil {
		return true, s.fail(err)
	}
	if pl.Kind == router.PlanDefault {
		n := s.readNode(pl, s.node)
		if info.Flags&router.FlagSessionFunc != 0 {
			// LAST_INSERT_ID() and friends are the session's, not the
			// connection's (ids from a sequence, inserts on other
			// pooled connections): answered by the rewrite, on the
			// default node.
			if out, changed, err := s.getParser().RewriteSessionFuncs(sql, s.sessionValues()); err == nil && changed {
				return true, s.eng.Forward(n, nil, &out, &info)
			}
		}
		return true, s.eng.Forward(n, p, nil, &info)
	}
	if err := ddlCheck(s, pl, sql[info.Start:]); err != nil {
		return true, s.fail(err)
	}
	rt := &s.rt
	err = s.bindPlan(pl, rt, lits, leadingComments(sql, info))
	s.tr.mark(digest.Route)
	if err != nil {
		return true, s.fail(err)
	}
	if rt.Join != nil {
		return true, s.eng.Join(joinPlanner(s), rt.Join, lits, false)
	}
	if len(rt.Routes) == 1 && len(pl.ReadNodes()) > 0 {
		rt.Routes[0].Node = s.readNode(pl, s.nodes[rt.Routes[0].Node]).Name
	}
	return true, s.runText(rt, pl, info)
}

// joinPlanner plans the sides of a join across shards for session s.
func joinPlanner(s *Session) join.Planner {
	return join.SchemaPlanner{Schema: s.route, Parser: s.getParser(), DB: s.vars.DB}
}

// readNode is where a statement runs that only reads global tables: the
// node the session's connection is pinned to (its transaction) when that
// node has a copy of each, else planned, the node it was planned for.
func (s *Session) readNode(pl *router.Plan, planned *backend.Node) *backend.Node {
	if bc := s.lease.Pinned(); bc != nil && s.lease.InTx() && bc.Node() != planned.Name && slices.Contains(pl.ReadNodes(), bc.Node()) {
		if n := s.nodes[bc.Node()]; n != nil {
			return n
		}
	}
	return planned
}

// runText runs a bound routing of a text statement classified as info.
func (s *Session) runText(rt *router.Routing, pl *router.Plan, info router.Info) error {
	return s.eng.Route(rt, pl, engine.Run{Kind: info.Kind, Read: router.ReadOnly(info),
		One: func(n *backend.Node, r *router.Route) error { return s.eng.Forward(n, nil, &r.SQL[0], &info) }})
}

// leadingComments returns the comments in front of the statement (not
// other text such as an opening parenthesis), kept in front of every
// rewritten statement.
func leadingComments(sql string, info router.Info) string {
	return router.LeadingComments(sql[:info.Start])
}

// isSavepointStmt reports whether stmt is SAVEPOINT, ROLLBACK [WORK] TO
// [SAVEPOINT] or RELEASE SAVEPOINT.
func isSavepointStmt(stmt string) bool {
	f := strings.Fields(strings.ToLower(stmt))
	if len(f) > 0 && (f[0] == "savepoint" || f[0] == "release") {
		return true
	}
	return len(f) > 2 && f[0] == "rollback" && (f[1] == "to" || f[1] == "work" && f[2] == "to")
}

// hintNode reads a kingshard node hint, /*node2*/, in front of a
// statement: a comment that is one word naming a configured node, or of
// the form nodeN. A hint naming a node that is not in the user's schema
// is an error (the statement must not run elsewhere).
func (s *Session) hintNode(lead string) (*backend.Node, bool, error) {
	lead = strings.TrimSpace(lead)
	if !strings.HasPrefix(lead, "/*") {
		return nil, false, nil
	}
	end := strings.Index(lead, "*/")
	if end < 0 {
		return nil, false, nil
	}
	name := strings.TrimSpace(lead[2:end])
	if name == "" || strings.ContainsAny(name, " \t\n\r") {
		return nil, false, nil
	}
	if s.schema == nil {
		// A user without a schema (an admin only): a node hint must not
		// fall through to keyshard's own answer (its PROCESSLIST for the
		// node's).
		if _, configured := s.nodes[name]; configured || isNodeN(name) {
			return nil, false, newErr(errNoSchema, "keyshard: hint /*%s*/: user '%s' has no schema in schema_list, so no node to send the statement to; the statement was not run",
				name, s.user)
		}
		return nil, false, nil
	}
	for _, n := range s.schema.Nodes {
		if n == name {
			return s.nodes[n], true, nil
		}
	}
	_, configured := s.nodes[name]
	if configured || isNodeN(name) {
		return nil, false, newErr(errNotSupported, "keyshard: hint /*%s*/ names no node of this user's schema (nodes: %s); the statement was not run",
			name, strings.Join(s.schema.Nodes, ", "))
	}
	return nil, false, nil
}

// isNodeN reports whether a hint word has kingshard's node name form,
// "node" and digits.
func isNodeN(w string) bool {
	rest, ok := strings.CutPrefix(strings.ToLower(w), "node")
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// explainShard answers EXPLAIN SHARD <statement> with the node, sub-table
// and SQL each part would run, without running anything.
func (s *Session) explainShard(stmt string) error {
	stmt = strings.TrimRight(stmt, "; \t\r\n")
	if s.route == nil {
		return s.fail(engine.ErrNoSchema(s.user))
	}
	info := router.Classify(stmt)
	var rows [][]string
	if n, ok, err := s.hintNode(stmt[:info.Start]); err != nil {
		return s.fail(err)
	} else if ok {
		rows = append(rows, []string{n.Name, "", stmt})
	} else {
		pl, lits, err := s.route.Plan(s.getParser(), stmt, s.vars.DB, info.Kind)
		if err != nil {
			return s.fail(err)
		}
		if pl.Kind == router.PlanDefault {
			rows = append(rows, []string{s.route.Default, "", stmt})
		} else {
			rt := &router.Routing{}
			if err := s.bindPlan(pl, rt, lits, leadingComments(stmt, info)); err != nil {
				return s.fail(err)
			}
			if rt.Merge != "" {
				return s.fail(engine.MergeErr(rt, pl))
			}
			if j := rt.Join; j != nil {
				tl := router.TextLiterals(lits)
				rows = append(rows, []string{"(join: outer)", j.Sides[0].Table, j.SideSQL(0, tl)},
					[]string{"(join: lookup)", j.Sides[1].Table, j.LookupSQL(tl, []string{"..."})})
			}
			for _, e := range rt.Explain() {
				rows = append(rows, []string{e[0], e[1], e[2]})
			}
		}
	}
	return s.writeResultSet([]string{"node", "sub_table", "sql"}, rows)
}

// writeResultSet sends a small text result set made by keyshard itself.
func (s *Session) writeResultSet(cols []string, rows [][]string) error {
	return s.cl.ResultSet(cols, rows, s.lease.Status())
}

// cutPrefixFold returns s after prefix (ASCII, lower case) matched without
// regard to case, a space in prefix matching any run of blanks.
func cutPrefixFold(s, prefix string) (string, bool) {
	i := 0
	for j := 0; j < len(prefix); j++ {
		if i >= len(s) {
			return "", false
		}
		if prefix[j] == ' ' {
			if !isBlank(s[i]) {
				return "", false
			}
			for i < len(s) && isBlank(s[i]) {
				i++
			}
			continue
		}
		if s[i]|0x20 != prefix[j] {
			return "", false
		}
		i++
	}
	return s[i:], true
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// bindPlan binds a sharded plan into rt, taking first the ids its INSERT
// wants from a sequence.
func (s *Session) bindPlan(pl *router.Plan, rt *router.Routing, lits []router.Literal, prefix string) error {
	if seq, n := pl.Sequence(lits); n > 0 {
		first, err := s.srv.xa.Sequences().Take(s.srv.ctx, seq, pl.Tables()[0], n)
		if err != nil {
			return err
		}
		lits = pl.WithIDs(lits, first)
	}
	return pl.BindTo(rt, lits, prefix)
}
