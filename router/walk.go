package router

import (
	"errors"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// ErrUncheckable is returned for a statement whose text is not in it:
// PREPARE ... FROM or EXECUTE IMMEDIATE of anything but one string
// literal (a variable, an expression, adjacent literals), and compound
// statements (BEGIN NOT ATOMIC, IF, WHILE, LOOP, REPEAT, CASE, labels)
// whose inner statements the parser cannot read.
var ErrUncheckable = errors.New("the statement's text is not in it")

// walkStatements calls fn for each statement the server runs for sql, as
// the server reads it: each statement of a batch, the text of PREPARE ...
// FROM '...' and EXECUTE IMMEDIATE '...', the statement of SET STATEMENT
// ... FOR. sql's executable comments must be open (openExecComments). fn
// gets the parsed statement, or nil and the statement's text where the
// parser cannot read it; it returns true to stop, and walkStatements then
// returns true.
func (p *Parser) walkStatements(sql string, fn func(st ast.StmtNode, text string) bool) (bool, error) {
	stmts, err := p.Parse(sql)
	if err != nil {
		parts := splitStatements(sql)
		if len(parts) <= 1 {
			return p.walkText(sql, fn)
		}
		for _, part := range parts {
			if stop, err := p.walkStatements(part, fn); stop || err != nil {
				return stop, err
			}
		}
		return false, nil
	}
	// A PREPARE's text is parsed with the same parser, which reuses the
	// slice it returned.
	for _, st := range append([]ast.StmtNode(nil), stmts...) {
		if x, ok := st.(*ast.PrepareStmt); ok {
			text := x.SQLText
			if x.SQLVar != nil {
				var ok bool
				if text, ok = p.varText(x.SQLVar.Name); !ok {
					return false, ErrUncheckable
				}
			}
			if stop, err := p.walkStatements(text, fn); stop || err != nil {
				return stop, err
			}
			continue
		}
		if fn(st, "") {
			return true, nil
		}
	}
	return false, nil
}

// walkText is walkStatements for one statement the parser cannot read:
// MariaDB's EXECUTE IMMEDIATE, PREPARE of an expression, SET STATEMENT ...
// FOR and compound statements; else fn gets the text.
func (p *Parser) walkText(sql string, fn func(ast.StmtNode, string) bool) (bool, error) {
	sql = strings.TrimSpace(sql)
	f := strings.Fields(strings.ToLower(sql[min(Classify(sql).Start, len(sql)):]))
	if len(f) == 0 {
		return false, nil
	}
	switch {
	case f[0] == "execute" && len(f) > 1 && f[1] == "immediate":
		rest, _ := cutWordFold(sql, "execute")
		rest, _ = cutWordFold(rest, "immediate")
		return p.walkLiteral(rest, fn)
	case f[0] == "prepare":
		rest, _ := cutWordFold(sql, "prepare")
		if i := indexWordFold(rest, "from"); i >= 0 {
			return p.walkLiteral(rest[i+len("from"):], fn)
		}
		return false, ErrUncheckable
	case f[0] == "set" && len(f) > 1 && f[1] == "statement":
		if i := indexWordFold(sql, "for"); i >= 0 {
			return p.walkStatements(sql[i+len("for"):], fn)
		}
		return false, ErrUncheckable
	case f[0] == "begin" && len(f) > 1 && f[1] != "work", f[0] == "if", f[0] == "while", f[0] == "loop",
		f[0] == "repeat", f[0] == "case", f[0] == "declare", strings.HasSuffix(f[0], ":"), len(f) > 1 && f[1] == ":":
		return false, ErrUncheckable
	}
	return fn(nil, sql), nil
}

// walkLiteral walks the text of arg, the operand of PREPARE ... FROM or
// EXECUTE IMMEDIATE: one string literal, then the end or USING. Anything
// else (a variable, an expression, adjacent literals the server would
// join) is uncheckable.
func (p *Parser) walkLiteral(arg string, fn func(ast.StmtNode, string) bool) (bool, error) {
	arg = strings.TrimSpace(arg)
	if arg != "" && arg[0] == '@' {
		// One user variable, its value read from the session.
		end := 1
		for end < len(arg) && isIdent(arg[end]) {
			end++
		}
		rest := strings.TrimRight(strings.TrimSpace(arg[end:]), ";")
		if _, using := cutWordFold(rest, "using"); rest == "" || using {
			if text, ok := p.varText(arg[1:end]); ok {
				return p.walkStatements(openExecComments(text, true), fn)
			}
		}
		return false, ErrUncheckable
	}
	if arg == "" || arg[0] != '\'' && arg[0] != '"' {
		return false, ErrUncheckable
	}
	end := skipQuoted(arg, 0, arg[0])
	rest := strings.TrimRight(strings.TrimSpace(arg[end:]), ";")
	if rest != "" {
		if _, ok := cutWordFold(rest, "using"); !ok {
			return false, ErrUncheckable
		}
	}
	return p.walkStatements(openExecComments(unquote(arg[:end]), true), fn)
}

// varText is VarText, if set.
func (p *Parser) varText(name string) (string, bool) {
	if p.VarText == nil {
		return "", false
	}
	return p.VarText(name)
}

// indexWordFold returns the index of the first word w (any case) of s
// outside quotes and comments, or -1.
func indexWordFold(s, w string) int {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			i = skipQuoted(s, i, c)
		case isIdent(c):
			j := i
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			if strings.EqualFold(s[i:j], w) {
				return i
			}
			i = j
		default:
			i++
		}
	}
	return -1
}
