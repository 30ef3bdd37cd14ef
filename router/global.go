package router

import (
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Global tables (type global): the whole table is copied, under its own
// name, on every node of its rule. A statement that writes one runs on
// every copy (the engine makes it atomic across nodes), and its OK counts
// one copy's rows; a statement that only reads one runs on one node: the
// node the rest of the statement is on (a sharded table's sub-tables, an
// unsharded table's default node), else the default node when it holds a
// copy, else the first node holding a copy of every global table named.
// The names stay as written: every copy is named as the table.

// withGlobals plans a statement naming global tables. It returns nil, nil
// when the globals are only read alongside sharded tables: the statement
// is then planned as a sharded one, and each node reads its own copy.
func (b *builder) withGlobals(stmt ast.StmtNode, sharded, globals []*tableRef, params bool) (*Plan, error) {
	targets, unknown := b.writeTargets(stmt)
	var written *tableRef
	for _, t := range targets {
		if t.rule != nil && t.rule.Global {
			written = t
			break
		}
	}
	if written == nil && unknown {
		return nil, errorf("UPDATE naming global table %s together with other tables must qualify each column it sets "+
			"(table.column = ...): a global table is written on every node that has a copy, other tables only on theirs", globals[0].rule.Table)
	}
	if written != nil {
		g := written.rule
		if len(sharded) > 0 {
			return nil, errorf("a statement that writes global table %s cannot use sharded table %s: a global table is written "+
				"on every node, each sharded row on one; write them in separate statements (one transaction keeps them atomic)", g.Table, sharded[0].rule.Table)
		}
		if len(b.plan.unsharded) > 0 {
			return nil, errorf("a statement that writes global table %s cannot use table %s, which is only on default node %s: "+
				"the write runs on every node that has a copy of %s", g.Table, b.plan.unsharded[0], b.plan.def, g.Table)
		}
		for _, t := range targets {
			if t.rule != nil && t.rule.Global && !sameNodes(t.rule.Nodes, g.Nodes) {
				return nil, errorf("global tables %s and %s are copied on different nodes (%s; %s): one statement cannot write both",
					g.Table, t.rule.Table, strings.Join(g.Nodes, ", "), strings.Join(t.rule.Nodes, ", "))
			}
		}
		for _, r := range globals {
			if n := missingNode(r.rule.Nodes, g.Nodes); n != "" {
				return nil, errorf("global table %s has no copy on node %s, where global table %s is written", r.rule.Table, n, g.Table)
			}
		}
		return b.copiesPlan(stmt, g, g.Nodes, params)
	}
	if len(sharded) > 0 {
		t := sharded[0].rule
		for _, r := range globals {
			if n := missingNode(r.rule.Nodes, t.Nodes); n != "" {
				return nil, errorf("global table %s has no copy on node %s, where sharded table %s has sub-tables "+
					"(add the node to the global table's rule and copy the table there)", r.rule.Table, n, t.Table)
			}
		}
		return nil, nil
	}
	if len(b.plan.unsharded) > 0 {
		for _, r := range globals {
			if !slices.Contains(r.rule.Nodes, b.plan.def) {
				return nil, errorf("global table %s has no copy on default node %s, where table %s is", r.rule.Table, b.plan.def, b.plan.unsharded[0])
			}
		}
		return b.plan, nil
	}
	// Any node with a copy of each can answer (ReadNodes): the default
	// node first.
	var anyOf []string
	for _, n := range append([]string{b.plan.def}, globals[0].rule.Nodes...) {
		if !slices.Contains(anyOf, n) && !slices.ContainsFunc(globals, func(r *tableRef) bool { return !slices.Contains(r.rule.Nodes, n) }) {
			anyOf = append(anyOf, n)
		}
	}
	switch {
	case len(anyOf) == 0:
		return nil, errorf("global tables %s and %s have no node in common (%s; %s)", globals[0].rule.Table, globals[1].rule.Table,
			strings.Join(globals[0].rule.Nodes, ", "), strings.Join(globals[1].rule.Nodes, ", "))
	case anyOf[0] == b.plan.def:
		b.plan.readNodes = anyOf
		return b.plan, nil // the client's own statement, on the default node
	}
	pl, err := b.copiesPlan(stmt, globals[0].rule, anyOf[:1], params)
	if pl != nil {
		pl.readNodes = anyOf
	}
	return pl, err
}

// ReadNodes are the nodes that can answer a statement that only reads
// global tables, the one it is planned for first (nil for other
// statements): a session inside a transaction on one of them reads there.
func (p *Plan) ReadNodes() []string { return p.readNodes }

// copiesPlan plans stmt to run as written on the given nodes, each holding
// a copy of global table g.
func (b *builder) copiesPlan(stmt ast.StmtNode, g *TableRule, nodes []string, params bool) (*Plan, error) {
	pl := b.plan
	pl.Kind = PlanSharded
	pl.tables = []*TableRule{g}
	pl.copies = nodes
	if sel, ok := stmt.(*ast.SelectStmt); ok {
		b.aliases = nameFields(sel, params)
	}
	if params {
		replaceParams(stmt, &pl.nparams)
	}
	text, err := restoreStmt(stmt)
	if err != nil {
		return nil, err
	}
	pl.tmpl = parseTemplate(text, params, false, b.aliases)
	return pl, nil
}

// bindCopies binds a plan of a global table: the same statement on each
// of its nodes.
func (p *Plan) bindCopies(rt *Routing, lits []Literal, prefix string) error {
	var sb strings.Builder
	sb.Grow(len(prefix) + p.tmpl.size())
	sb.WriteString(prefix)
	p.tmpl.render(&sb, nil, lits, "")
	sql := sb.String()
	for _, n := range p.copies {
		rt.add(n, p.tables[0].Table, sql, nil)
	}
	rt.Copies = len(p.copies) > 1
	return nil
}

// Copies reports whether the plan runs on copies of a global table.
func (p *Plan) Copies() bool { return p.copies != nil }

// writeTargets returns the tables a write statement changes; unknown is
// set when some SET column names no table and the statement has several.
func (b *builder) writeTargets(stmt ast.StmtNode) (targets []*tableRef, unknown bool) {
	var refs []*tableRef // the tables a write may change: not repeats, not those of subqueries
	for _, r := range b.refs {
		if r.dupOf == nil && !r.subquery {
			refs = append(refs, r)
		}
	}
	byName := func(q string) *tableRef {
		for _, r := range refs {
			if r.alias == q || r.alias == "" && r.name == q {
				return r
			}
		}
		return nil
	}
	switch st := stmt.(type) {
	case *ast.InsertStmt:
		if st.Table != nil && st.Table.TableRefs != nil {
			if ts, ok := st.Table.TableRefs.Left.(*ast.TableSource); ok {
				for _, r := range b.refs {
					if ts.Source == ast.ResultSetNode(r.tn) {
						if r.dupOf != nil {
							// INSERT INTO t SELECT ... FROM t: the SELECT's
							// mention was collected first.
							r = r.dupOf
						}
						targets = append(targets, r)
					}
				}
			}
		}
	case *ast.UpdateStmt:
		if len(refs) == 1 {
			return refs, false
		}
		for _, a := range st.List {
			if a.Column.Table.L == "" {
				unknown = true
			} else if r := byName(a.Column.Table.L); r != nil && !slices.Contains(targets, r) {
				targets = append(targets, r)
			}
		}
	case *ast.DeleteStmt:
		if !st.IsMultiTable || st.Tables == nil {
			return refs[:min(1, len(refs))], false
		}
		for _, tn := range st.Tables.Tables {
			if r := byName(tn.Name.L); r != nil && !slices.Contains(targets, r) {
				targets = append(targets, r)
			}
		}
	}
	return targets, unknown
}

// missingNode returns the first of nodes that has is missing ("" if none).
func missingNode(has, nodes []string) string {
	for _, n := range nodes {
		if !slices.Contains(has, n) {
			return n
		}
	}
	return ""
}

func sameNodes(a, b []string) bool { return missingNode(a, b) == "" && missingNode(b, a) == "" }
