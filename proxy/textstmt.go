package proxy

import (
	"encoding/hex"
	"slices"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/proxy/engine"
	"github.com/keyshard/keyshard/router"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Text-protocol prepared statements (PREPARE name FROM ..., EXECUTE name
// USING @a, DEALLOCATE PREPARE name) in a schema with shard rules.
//
// A statement that touches no sharded table is left to the backend, as in
// an unsharded schema (the session keeps its connection). One that does is
// kept by keyshard: planned at PREPARE like the binary-protocol kind, and
// at EXECUTE the user variables are read from the session's connection
// (where SET put them), their values bound to the plan to pick the
// sub-tables, and the rewritten statement runs as text with the values in
// place of the ?, which is what EXECUTE does on the server.

// textPrepare handles PREPARE in a sharded schema. handled false: not a
// sharded statement, forward it.
func (t *stmtTable) textPrepare(sql string) (handled bool, err error) {
	s := t.s
	stmts, perr := s.getParser().Parse(sql)
	if perr != nil || len(stmts) != 1 {
		return false, nil
	}
	ps, ok := stmts[0].(*ast.PrepareStmt)
	if !ok {
		return false, nil
	}
	// The statement aliases the client's read buffer: keep copies.
	name := strings.Clone(strings.ToLower(ps.Name))
	text := strings.Clone(ps.SQLText)
	if ps.SQLVar != nil {
		vals, err := t.userVars([]string{ps.SQLVar.Name})
		if err != nil {
			return true, s.fail(err)
		}
		switch v := vals[0].Bound.(type) {
		case string:
			text = v
		case []byte:
			text = string(v)
		default:
			return false, nil // NULL or a number: the server's answer
		}
	}
	info := router.Classify(text)
	if !router.Routed(info.Kind) {
		delete(t.textStmts, name)
		return false, nil
	}
	pl, lits, err := s.route.Plan(s.getParser(), text, s.vars.DB, info.Kind)
	if err != nil {
		return true, s.fail(err)
	}
	if pl.Kind != router.PlanSharded {
		delete(t.textStmts, name)
		return false, nil
	}
	if info.Kind == router.KindDDL {
		return true, s.fail(ddlPrepareErr(pl))
	}
	n := 0
	for _, l := range lits {
		if l.Kind == router.LitParam {
			n++
		}
	}
	if t.textStmts == nil {
		t.textStmts = make(map[string]*prepared)
	}
	t.textStmts[name] = &prepared{sql: text, db: s.vars.DB, kind: info.Kind, params: n,
		plan: pl, lits: slices.Clone(lits), prefix: leadingComments(text, info)}
	return true, s.cl.OK(0, 0, s.lease.Status(), 0, "Statement prepared")
}

// textExecute handles EXECUTE of a statement textPrepare kept.
func (t *stmtTable) textExecute(sql string, info router.Info) (handled bool, err error) {
	s := t.s
	stmts, perr := s.getParser().Parse(sql)
	if perr != nil || len(stmts) != 1 {
		return false, nil
	}
	es, ok := stmts[0].(*ast.ExecuteStmt)
	if !ok {
		return false, nil
	}
	st := t.textStmts[strings.ToLower(es.Name)]
	if st == nil {
		return false, nil
	}
	if _, err := heldStatement(s, st.plan); err != nil {
		// (After a wait the session took the new layout: rebind planned
		// st again.)
		return true, s.fail(err)
	}
	if st.planErr != nil {
		return true, s.fail(st.planErr)
	}
	if len(es.UsingVars) != st.params {
		return true, s.fail(&mysql.MyError{Code: mysql.ER_WRONG_ARGUMENTS, State: "HY000", Message: "Incorrect arguments to EXECUTE"})
	}
	names := make([]string, len(es.UsingVars))
	for i, e := range es.UsingVars {
		v, ok := e.(*ast.VariableExpr)
		if !ok || v.IsSystem {
			return true, s.fail(&mysql.MyError{Code: mysql.ER_WRONG_ARGUMENTS, State: "HY000", Message: "Incorrect arguments to EXECUTE"})
		}
		names[i] = v.Name
	}
	vals, err := t.userVars(names)
	if err != nil {
		return true, s.fail(err)
	}
	lits := make([]router.Literal, len(st.lits))
	copy(lits, st.lits)
	for i := range lits {
		if l := &lits[i]; l.Kind == router.LitParam {
			*l = vals[l.Param]
		}
	}
	rt := &s.rt
	if err := s.bindPlan(st.plan, rt, lits, st.prefix); err != nil {
		return true, s.fail(err)
	}
	if rt.Join != nil {
		return true, s.eng.Join(joinPlanner(s), rt.Join, lits, false)
	}
	return true, s.runText(rt, st.plan, router.Info{Kind: st.kind})
}

// textDeallocate handles DEALLOCATE PREPARE of a statement textPrepare kept.
func (t *stmtTable) textDeallocate(sql string) (handled bool, err error) {
	s := t.s
	stmts, perr := s.getParser().Parse(sql)
	if perr != nil || len(stmts) != 1 {
		return false, nil
	}
	ds, ok := stmts[0].(*ast.DeallocateStmt)
	if !ok {
		return false, nil
	}
	name := strings.ToLower(ds.Name)
	if t.textStmts[name] == nil {
		return false, nil
	}
	delete(t.textStmts, name)
	return true, s.writeOK(0, 0)
}

// userVars reads user variables from the session's connection (the pinned
// one, where SET put them) and returns each as a literal: Text is its SQL
// form, Bound its value for routing.
func (t *stmtTable) userVars(names []string) ([]router.Literal, error) {
	s := t.s
	var q strings.Builder
	q.WriteString("SELECT ")
	for i, n := range names {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("@`")
		q.WriteString(strings.ReplaceAll(n, "`", "``"))
		q.WriteByte('`')
	}
	bc, err := s.lease.Acquire(nil, engine.Write)
	if err != nil {
		return nil, err
	}
	res, err := bc.Exec(q.String())
	s.lease.Release(bc)
	if err != nil {
		return nil, err
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != len(names) {
		return nil, newErr(errNotSupported, "keyshard: reading user variables: unexpected answer")
	}
	out := make([]router.Literal, len(names))
	for i, v := range res.Rows[0] {
		out[i] = userVarLiteral(v, res.Types[i], res.Binary[i])
	}
	return out, nil
}

func userVarLiteral(v *string, typ byte, binary bool) router.Literal {
	l := router.Literal{Kind: router.LitParam}
	switch {
	case v == nil:
		l.Text = "NULL"
	case typ == wire.TypeLongLong || typ == wire.TypeLong || typ == wire.TypeInt24 || typ == wire.TypeShort || typ == wire.TypeTiny:
		l.Text = *v
		if n, err := strconv.ParseInt(*v, 10, 64); err == nil {
			l.Bound = n
		} else if u, err := strconv.ParseUint(*v, 10, 64); err == nil {
			l.Bound = u
		} else {
			l.Text, l.Bound = backend.Quote(*v), *v
		}
	case typ == wire.TypeDouble || typ == wire.TypeFloat || typ == wire.TypeNewDecimal || typ == wire.TypeDecimal:
		l.Text = *v
		if f, err := strconv.ParseFloat(*v, 64); err == nil {
			l.Bound = f
		} else {
			l.Text, l.Bound = backend.Quote(*v), *v
		}
	case binary:
		l.Text = "X'" + hex.EncodeToString([]byte(*v)) + "'"
		l.Bound = []byte(*v)
	default:
		l.Text, l.Bound = backend.Quote(*v), *v
	}
	return l
}
