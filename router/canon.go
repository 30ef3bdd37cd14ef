package router

import (
	"errors"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	driver "github.com/pingcap/tidb/pkg/parser/test_driver"
)

// ErrUncheckable is returned by Canonical for a statement whose text is
// not in the statement itself: PREPARE ... FROM @var, EXECUTE IMMEDIATE
// with anything but a string literal.
var ErrUncheckable = errors.New("the statement's text is not in it")

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
	sql = openExecComments(sql)
	stmts, err := p.Parse(sql)
	if err != nil {
		parts := splitStatements(sql)
		if len(parts) <= 1 {
			return p.canonicalText(sql, db, fn)
		}
		for _, part := range parts {
			if hit, err := p.Canonical(part, db, fn); hit || err != nil {
				return hit, err
			}
		}
		return false, nil
	}
	// A PREPARE's text is parsed with the same parser, which reuses the
	// slice it returned.
	for _, st := range append([]ast.StmtNode(nil), stmts...) {
		if hit, err := p.canonicalStmt(st, db, fn); hit || err != nil {
			return hit, err
		}
	}
	return false, nil
}

// canonicalText handles one statement the parser cannot read: EXECUTE
// IMMEDIATE (MariaDB's), else the shape.
func (p *Parser) canonicalText(sql, db string, fn func(string) bool) (bool, error) {
	sql = strings.TrimSpace(sql)
	if rest, ok := cutWordFold(sql, "execute"); ok {
		if rest, ok := cutWordFold(rest, "immediate"); ok {
			rest = strings.TrimSpace(rest)
			if rest == "" || rest[0] != '\'' && rest[0] != '"' {
				return false, ErrUncheckable
			}
			end := skipQuoted(rest, 0, rest[0])
			return p.Canonical(unquote(rest[:end]), db, fn)
		}
	}
	shape, _ := Normalize(strings.TrimRight(sql, "; \t\r\n"))
	return fn(strings.ToLower(strings.Join(strings.Fields(shape), " "))), nil
}

func (p *Parser) canonicalStmt(st ast.StmtNode, db string, fn func(string) bool) (bool, error) {
	if x, ok := st.(*ast.PrepareStmt); ok {
		if x.SQLVar != nil {
			return false, ErrUncheckable
		}
		return p.Canonical(x.SQLText, db, fn)
	}
	c := &canonVisitor{}
	st.Accept(c)
	foldWhere(st)
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
	if fn(restore()) {
		return true, nil
	}
	for _, t := range c.tables {
		t.Schema.O, t.Schema.L = "", ""
	}
	return fn(restore()), nil
}

// canonVisitor gathers the tables of a statement and, for a statement on
// one table, drops column qualifiers; on the way out it folds constants
// and drops parentheses that change nothing.
type canonVisitor struct {
	tables  []*ast.TableName
	sources int
	single  *ast.TableSource // the only table source, if one
	cols    []*ast.ColumnName
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
	}
	return n, false
}

func (c *canonVisitor) Leave(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.ParenthesesExpr:
		if leaf(x.Expr) {
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

// foldWhere drops a WHERE that is always true and the parentheses around
// a whole WHERE.
func foldWhere(st ast.StmtNode) {
	fold := func(w *ast.ExprNode) {
		for {
			pe, ok := (*w).(*ast.ParenthesesExpr)
			if !ok {
				break
			}
			*w = pe.Expr
		}
		if v, ok := truth(*w); ok && v {
			*w = nil
		}
	}
	switch x := st.(type) {
	case *ast.SelectStmt:
		if x.Where != nil {
			fold(&x.Where)
		}
	case *ast.UpdateStmt:
		if x.Where != nil {
			fold(&x.Where)
		}
	case *ast.DeleteStmt:
		if x.Where != nil {
			fold(&x.Where)
		}
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

// compareConst compares two constants of the same kind: numbers, or for =
// and <> strings of equal bytes (equal under every collation; unequal bytes
// may be equal under one: case, trailing spaces).
func compareConst(l, r ast.ExprNode, op opcode.Op) (int, bool) {
	lv, ok1 := l.(*driver.ValueExpr)
	rv, ok2 := r.(*driver.ValueExpr)
	if !ok1 || !ok2 {
		return 0, false
	}
	num := func(v any) (float64, bool) {
		switch n := v.(type) {
		case int64:
			return float64(n), true
		case uint64:
			return float64(n), true
		case float64:
			return n, true
		}
		return 0, false
	}
	a, aok := num(lv.GetValue())
	b, bok := num(rv.GetValue())
	if aok && bok {
		switch {
		case a < b:
			return -1, true
		case a > b:
			return 1, true
		}
		return 0, true
	}
	as, aok := lv.GetValue().(string)
	bs, bok := rv.GetValue().(string)
	if aok && bok && (op == opcode.EQ || op == opcode.NE) && as == bs {
		return 0, true
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
// spaces, so their bodies read as SQL, as the server reads them (whatever
// the version, to be on the safe side).
func openExecComments(sql string) string {
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
		case c == '/' && i+2 < len(sql) && sql[i+1] == '*' && (sql[i+2] == '!' || sql[i+2] == 'M' && i+3 < len(sql) && sql[i+3] == '!'):
			j := i + 3
			if sql[i+2] == 'M' {
				j++
			}
			for j < len(sql) && sql[j] >= '0' && sql[j] <= '9' {
				j++
			}
			b = append(b, ' ')
			depth++
			i = j
			continue
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			j := indexFrom(sql, i+2, "*/")
			if j < 0 {
				j = len(sql)
			} else {
				j += 2
			}
			b = append(b, ' ')
			i = j
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
