package router

import (
	"cmp"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	driver "github.com/pingcap/tidb/pkg/parser/test_driver"
)

// Canonical calls fn with the canonical forms of each statement of sql (the
// SQL blacklist's matching key), until fn returns true. Each statement of a
// batch counts, and so does the text of PREPARE ... FROM '...' and EXECUTE
// IMMEDIATE '...'.
//
// A canonical form is the statement as the server reads it, written one
// way: executable comments (/*! */, /*M! */) opened, names unquoted and
// lower-cased, a single table's alias and column qualifiers dropped,
// comparisons of constants folded (WHERE 1=1 AND x is WHERE x, WHERE 1 is
// no WHERE), redundant parentheses dropped, and literals replaced by ?.
// Each statement has two forms: with its tables qualified by db (the
// current database; none if empty) and with no table qualified, so that an
// entry names a table either way. Text the parser cannot read falls back
// to its shape (Normalize), one form per statement.
func (p *Parser) Canonical(sql, db string, fn func(form string) bool) (bool, error) {
	open := openExecComments(sql, true)
	if hit, err := p.canonical(open, db, fn); hit || err != nil {
		return hit, err
	}
	// The server skips a versioned comment newer than itself: match the
	// statement without them too.
	if closed := openExecComments(sql, false); closed != open {
		return p.canonical(closed, db, fn)
	}
	return false, nil
}

func (p *Parser) canonical(sql, db string, fn func(string) bool) (bool, error) {
	return p.walkStatements(sql, func(st ast.StmtNode, text string) bool {
		if st == nil {
			shape, _ := Normalize(strings.TrimRight(text, "; \t\r\n"))
			return fn(strings.ToLower(strings.Join(strings.Fields(shape), " ")))
		}
		return p.canonicalStmt(st, db, fn)
	})
}

func (p *Parser) canonicalStmt(st ast.StmtNode, db string, fn func(string) bool) bool {
	c := &canonVisitor{}
	st.Accept(c)
	foldConditions(st, c.ons)
	if c.sources == 1 && c.single != nil {
		// One table: t.col, db.t.col and col are the same column, and
		// the alias is a name for it alone.
		c.single.AsName.O, c.single.AsName.L = "", ""
		for _, col := range c.cols {
			col.Schema.O, col.Schema.L, col.Table.O, col.Table.L = "", "", "", ""
		}
	}
	restore := func() string {
		var b strings.Builder
		if err := st.Restore(format.NewRestoreCtx(format.RestoreStringSingleQuotes|format.RestoreKeyWordLowercase|
			format.RestoreNameBackQuotes|format.RestoreNameLowercase|format.RestoreStringWithoutCharset, &b)); err != nil {
			return ""
		}
		shape, _ := Normalize(b.String())
		return shape
	}
	if db != "" {
		for _, t := range c.tables {
			if t.Schema.L == "" {
				t.Schema.O, t.Schema.L = db, strings.ToLower(db)
			}
		}
	}
	if f := restore(); f != "" && fn(f) {
		return true
	}
	for _, t := range c.tables {
		t.Schema.O, t.Schema.L = "", ""
	}
	f := restore()
	return f != "" && fn(f)
}

// canonVisitor gathers the tables of a statement and, for a statement on
// one table, drops column qualifiers; on the way out it folds constants
// and drops parentheses that change nothing.
type canonVisitor struct {
	tables  []*ast.TableName
	sources int
	single  *ast.TableSource // the only table source, if one
	cols    []*ast.ColumnName
	ons     []*ast.OnCondition
}

func (c *canonVisitor) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.TableName:
		c.tables = append(c.tables, x)
	case *ast.TableSource:
		c.sources++
		if _, ok := x.Source.(*ast.TableName); ok {
			c.single = x
		}
	case *ast.ColumnName:
		c.cols = append(c.cols, x)
	case *ast.OnCondition:
		c.ons = append(c.ons, x)
	}
	return n, false
}

func (c *canonVisitor) Leave(n ast.Node) (ast.Node, bool) {
	if x, ok := n.(*ast.ParenthesesExpr); ok && leaf(x.Expr) {
		return x.Expr, true
	}
	return n, true
}

// folder folds constants in a condition (WHERE, HAVING, ON), not in
// subqueries: elsewhere (a select list) AND and OR are values.
type folder struct{}

func (folder) Enter(n ast.Node) (ast.Node, bool) {
	_, sub := n.(*ast.SubqueryExpr)
	return n, sub
}

func (folder) Leave(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.ParenthesesExpr:
		if leaf(x.Expr) { // (1=1), folded
			return x.Expr, true
		}
	case *ast.UnaryOperationExpr:
		if x.Op == opcode.Not || x.Op == opcode.Not2 {
			if v, ok := truth(x.V); ok {
				return boolValue(!v), true
			}
		}
	case *ast.BinaryOperationExpr:
		return foldBinary(x), true
	}
	return n, true
}

// leaf reports whether e needs no parentheses anywhere.
func leaf(e ast.ExprNode) bool {
	switch e.(type) {
	case *ast.ColumnNameExpr, *driver.ValueExpr, *driver.ParamMarkerExpr, *ast.FuncCallExpr, *ast.ParenthesesExpr:
		return true
	}
	return false
}

// foldBinary folds a comparison of two constants and a logical operator
// with a constant side, and drops the parentheses around a logical
// operator's operands where precedence makes them redundant.
func foldBinary(x *ast.BinaryOperationExpr) ast.ExprNode {
	switch x.Op {
	case opcode.LogicAnd, opcode.LogicOr:
		x.L, x.R = unparen(x.L, x.Op), unparen(x.R, x.Op)
		l, lok := truth(x.L)
		r, rok := truth(x.R)
		and := x.Op == opcode.LogicAnd
		switch {
		case lok && rok:
			if and {
				return boolValue(l && r)
			}
			return boolValue(l || r)
		case lok && l == and: // TRUE AND x, FALSE OR x
			return x.R
		case rok && r == and:
			return x.L
		case lok || rok: // FALSE AND x, TRUE OR x
			return boolValue(!and)
		}
	case opcode.EQ, opcode.NE, opcode.LT, opcode.LE, opcode.GT, opcode.GE:
		if c, ok := compareConst(x.L, x.R, x.Op); ok {
			switch x.Op {
			case opcode.EQ:
				return boolValue(c == 0)
			case opcode.NE:
				return boolValue(c != 0)
			case opcode.LT:
				return boolValue(c < 0)
			case opcode.LE:
				return boolValue(c <= 0)
			case opcode.GT:
				return boolValue(c > 0)
			case opcode.GE:
				return boolValue(c >= 0)
			}
		}
	}
	return x
}

// unparen drops the parentheses around e, an operand of op (AND or OR),
// when they change nothing: around a comparison, or around the same
// operator (or AND under OR).
func unparen(e ast.ExprNode, op opcode.Op) ast.ExprNode {
	pe, ok := e.(*ast.ParenthesesExpr)
	if !ok {
		return e
	}
	switch in := pe.Expr.(type) {
	case *ast.BinaryOperationExpr:
		switch in.Op {
		case opcode.EQ, opcode.NE, opcode.LT, opcode.LE, opcode.GT, opcode.GE, opcode.NullEQ:
			return in
		case opcode.LogicAnd:
			return in
		case opcode.LogicOr:
			if op == opcode.LogicOr {
				return in
			}
		}
	case *ast.PatternInExpr, *ast.PatternLikeOrIlikeExpr, *ast.BetweenExpr, *ast.IsNullExpr:
		return in
	}
	return e
}

// foldConditions folds the constants of st's WHERE and HAVING and of the
// ON conditions ons, drops the parentheses around a whole condition, and a
// WHERE that is always true.
func foldConditions(st ast.StmtNode, ons []*ast.OnCondition) {
	fold := func(w *ast.ExprNode, drop bool) {
		if *w == nil {
			return
		}
		n, _ := (*w).Accept(folder{})
		*w = n.(ast.ExprNode)
		for {
			pe, ok := (*w).(*ast.ParenthesesExpr)
			if !ok {
				break
			}
			*w = pe.Expr
		}
		if v, ok := truth(*w); ok && v && drop {
			*w = nil
		}
	}
	switch x := st.(type) {
	case *ast.SelectStmt:
		fold(&x.Where, true)
		if x.Having != nil {
			fold(&x.Having.Expr, false)
		}
	case *ast.UpdateStmt:
		fold(&x.Where, true)
	case *ast.DeleteStmt:
		fold(&x.Where, true)
	}
	for _, on := range ons {
		fold(&on.Expr, false)
	}
}

// truth is the truth value of e if it is a numeric constant.
func truth(e ast.ExprNode) (bool, bool) {
	v, ok := e.(*driver.ValueExpr)
	if !ok {
		return false, false
	}
	switch n := v.GetValue().(type) {
	case int64:
		return n != 0, true
	case uint64:
		return n != 0, true
	case float64:
		return n != 0, true
	}
	return false, false
}

// compareConst compares two constants of the same kind exactly: integers
// (signed or not), floats, or for = and <> strings of equal bytes (equal
// under every collation; unequal bytes may be equal under one: case,
// trailing spaces). Mixed kinds are not folded.
func compareConst(l, r ast.ExprNode, op opcode.Op) (int, bool) {
	lv, ok1 := l.(*driver.ValueExpr)
	rv, ok2 := r.(*driver.ValueExpr)
	if !ok1 || !ok2 {
		return 0, false
	}
	switch a := lv.GetValue().(type) {
	case int64:
		switch b := rv.GetValue().(type) {
		case int64:
			return cmp.Compare(a, b), true
		case uint64:
			if a < 0 || b > 1<<63-1 {
				return -1, true
			}
			return cmp.Compare(a, int64(b)), true
		}
	case uint64:
		switch b := rv.GetValue().(type) {
		case uint64:
			return cmp.Compare(a, b), true
		case int64:
			if b < 0 || a > 1<<63-1 {
				return 1, true
			}
			return cmp.Compare(int64(a), b), true
		}
	case float64:
		if b, ok := rv.GetValue().(float64); ok {
			return cmp.Compare(a, b), true
		}
	case string:
		if b, ok := rv.GetValue().(string); ok && (op == opcode.EQ || op == opcode.NE) && a == b {
			return 0, true
		}
	}
	return 0, false
}

func boolValue(b bool) ast.ExprNode {
	if b {
		return ast.NewValueExpr(int64(1), "", "")
	}
	return ast.NewValueExpr(int64(0), "", "")
}

// openExecComments returns sql with the markers of its executable comments
// (/*! ... */, /*!50100 ... */, /*M! ... */, /*M!100500 ... */) replaced by
// spaces, so their bodies read as SQL, as the server reads them; other
// comments become a space. versioned false drops the comments that carry
// a version instead (a server older than the version skips them); true
// opens them too (the safe side for a check that looks for statements).
func openExecComments(sql string, versioned bool) string {
	if !strings.Contains(sql, "/*") {
		return sql
	}
	var b []byte
	depth := 0
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			j := skipQuoted(sql, i, c)
			b = append(b, sql[i:j]...)
			i = j
			continue
		case lineComment(sql, i):
			j := skipLine(sql, i)
			b = append(b, sql[i:j]...) // a quote in it starts nothing
			i = j
			continue
		case execComment(sql, i):
			j := i + 3
			if sql[i+2] == 'M' {
				j++
			}
			k := j
			for k < len(sql) && sql[k] >= '0' && sql[k] <= '9' {
				k++
			}
			if k > j && !versioned {
				b = append(b, ' ')
				i = commentEnd(sql, k)
				continue
			}
			b = append(b, ' ')
			depth++
			i = k
			continue
		case blockComment(sql, i):
			b = append(b, ' ')
			i = commentEnd(sql, i+2)
			continue
		case c == '*' && depth > 0 && i+1 < len(sql) && sql[i+1] == '/':
			b = append(b, ' ')
			depth--
			i += 2
			continue
		}
		b = append(b, c)
		i++
	}
	return string(b)
}

// cutWordFold cuts the word w (any case) and the white space after it from
// the start of s.
func cutWordFold(s, w string) (string, bool) {
	s = strings.TrimLeft(s, " \t\r\n")
	if len(s) < len(w) || !strings.EqualFold(s[:len(w)], w) || len(s) > len(w) && isIdent(s[len(w)]) {
		return s, false
	}
	return s[len(w):], true
}
