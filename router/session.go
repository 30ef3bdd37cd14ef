package router

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	driver "github.com/pingcap/tidb/pkg/parser/test_driver" // value expressions for the parser
)

// Parser wraps the TiDB parser. It is not safe for concurrent use: each
// session owns one, created on first need.
type Parser struct {
	p   *parser.Parser
	aux *parser.Parser // for expressions built while p's AST is in use

	// Scratch space of Shape: the cache key and the statement's literals.
	key  []byte
	lits []Literal

	// VarText, if set, returns the value of the session's user variable
	// name as text (ok false: NULL or not a string), so that the checks of
	// Canonical and Denied see into PREPARE ... FROM @name and EXECUTE
	// IMMEDIATE @name.
	VarText func(name string) (text string, ok bool)
}

// NewParser returns a parser. The TiDB parser in it is made on first use,
// so a session that only needs shapes (Shape) never pays for one.
func NewParser() *Parser { return &Parser{} }

// Parse parses sql into statements.
func (p *Parser) Parse(sql string) ([]ast.StmtNode, error) {
	if p.p == nil {
		p.p = parser.New()
	}
	stmts, _, err := p.p.Parse(sql, "", "")
	return stmts, err
}

// SetKind says what one assignment of a SET statement changes.
type SetKind uint8

// SET assignment kinds.
const (
	SetSysVar     SetKind = iota + 1 // session system variable
	SetGlobal                        // global system variable: passes through, not replayed
	SetNames                         // SET NAMES / SET CHARACTER SET
	SetUserVar                       // @var: state lives on the backend connection
	SetAutocommit                    // tracked through the server status flags
	SetOneShot                       // SET TRANSACTION ...: applies to the next transaction only
)

// SetItem is one assignment of a SET statement.
type SetItem struct {
	Kind      SetKind
	Name      string // lower-case variable name; charset for SetNames
	Collation string // SetNames only
	// Value is the value assigned, as an SQL literal, when it is a
	// constant that means the same on any connection ('text', 42,
	// DEFAULT); "" when it must be computed (SetSysVar only).
	Value string
}

// setTransactionRe matches SET TRANSACTION without SESSION or GLOBAL.
var setTransactionRe = regexp.MustCompile(`(?is)^\s*(/\*.*?\*/\s*)*set\s+transaction\b`)

// ParseSet parses a SET statement into its assignments. The returned
// strings never alias sql.
func (p *Parser) ParseSet(sql string) ([]SetItem, error) {
	stmts, err := p.Parse(sql)
	if err != nil {
		return nil, err
	}
	if len(stmts) != 1 {
		return nil, fmt.Errorf("expected one statement, got %d", len(stmts))
	}
	set, ok := stmts[0].(*ast.SetStmt)
	if !ok {
		return nil, fmt.Errorf("not a SET statement")
	}
	items := make([]SetItem, 0, len(set.Variables))
	for _, v := range set.Variables {
		// Clone: names may alias sql, which callers may reuse.
		name := strings.Clone(strings.ToLower(v.Name))
		switch {
		case v.Name == ast.SetNames || v.Name == ast.SetCharset:
			it := SetItem{Kind: SetNames}
			if ve, ok := v.Value.(ast.ValueExpr); ok {
				it.Name = strings.Clone(strings.ToLower(ve.GetString()))
			}
			if v.ExtendValue != nil {
				it.Collation = strings.Clone(strings.ToLower(v.ExtendValue.GetString()))
			}
			if it.Name == "" || it.Name == "default" {
				it.Name = ""
			}
			items = append(items, it)
		case !v.IsSystem:
			items = append(items, SetItem{Kind: SetUserVar, Name: name})
		case v.IsGlobal:
			items = append(items, SetItem{Kind: SetGlobal, Name: name})
		case name == "autocommit":
			items = append(items, SetItem{Kind: SetAutocommit, Name: name})
		case strings.HasSuffix(name, "_one_shot"), name == "tx_read_only" && setTransactionRe.MatchString(sql):
			// SET TRANSACTION without SESSION is for the next transaction
			// only (the parser names READ ONLY / READ WRITE as the
			// session variable either way).
			items = append(items, SetItem{Kind: SetOneShot, Name: name})
		default:
			it := SetItem{Kind: SetSysVar, Name: name}
			// A constant is taken as written, but not a string whose
			// backslashes mean what sql_mode says (NO_BACKSLASH_ESCAPES).
			if !strings.ContainsRune(sql, '\\') {
				it.Value = constValue(v.Value)
			}
			items = append(items, it)
		}
	}
	return items, nil
}

// Kill is a KILL statement of a multi-statement batch, at sql[Start:End].
type Kill struct {
	Start, End int
	ID         uint64
	Query      bool // KILL QUERY
}

// BatchKills parses a multi-statement batch and returns its KILL
// statements with their places, in order.
//
// A batch the parser cannot read is an error only if one of its
// statements starts with KILL: one whose KILL is inside a compound body
// (CREATE PROCEDURE ... BEGIN KILL ...; END) holds none to run.
func (p *Parser) BatchKills(sql string) ([]Kill, error) {
	stmts, err := p.Parse(sql)
	if err != nil {
		for _, st := range splitStatements(sql) {
			c := Classify(st)
			if c.Kind == KindKill {
				return nil, err
			}
			if c.Kind == KindDDL || wordAt(st, "begin") {
				return nil, nil // a compound statement: its ';' are inside it
			}
		}
		return nil, nil
	}
	var out []Kill
	pos := 0
	for _, st := range stmts {
		// Each statement's text is its piece of the batch, in order (with
		// its ';', maybe not all the blanks before it).
		text := st.Text()
		i := strings.Index(sql[pos:], text)
		if i < 0 {
			return nil, fmt.Errorf("cannot place a statement in the batch")
		}
		start := pos + i
		pos = start + len(text)
		k, ok := st.(*ast.KillStmt)
		if !ok {
			continue
		}
		if k.Expr != nil || k.TiDBExtension {
			return nil, fmt.Errorf("KILL takes a thread id")
		}
		text = strings.TrimRight(text, "; \t\r\n")
		text = strings.TrimLeft(text, " \t\r\n")
		start = strings.Index(sql[start:], text) + start
		out = append(out, Kill{Start: start, End: start + len(text), ID: k.ConnectionID, Query: k.Query})
	}
	return out, nil
}

// splitStatements splits a batch at the ';' outside quotes and comments
// (a lexical split: a compound statement's body splits too).
func splitStatements(sql string) []string {
	var out []string
	start := 0
	for i := 0; i < len(sql); {
		switch c := sql[i]; {
		case c == '\'' || c == '"' || c == '`':
			i = skipQuoted(sql, i, c)
		case lineComment(sql, i):
			i = skipLine(sql, i)
		case blockComment(sql, i):
			i = commentEnd(sql, i+2)
		case c == ';':
			out = append(out, sql[start:i])
			i++
			start = i
		default:
			i++
		}
	}
	return append(out, sql[start:])
}

// wordAt reports whether the lower-case word w appears in s as a word.
func wordAt(s, w string) bool {
	for i := 0; i+len(w) <= len(s); i++ {
		if eqFold(s[i:i+len(w)], w) && (i == 0 || !isIdent(s[i-1])) && (i+len(w) == len(s) || !isIdent(s[i+len(w)])) {
			return true
		}
	}
	return false
}

// constValue renders a SET value as an SQL literal when it is a constant:
// a string or number, DEFAULT, or a bare word (ON, ANSI...), which the
// server takes as a string. Anything else ("" returned) must be evaluated
// by the server.
func constValue(e ast.ExprNode) string {
	switch v := e.(type) {
	case *ast.DefaultExpr:
		if v.Name == nil {
			return "DEFAULT"
		}
	case *driver.ValueExpr:
		switch v.Kind() {
		case driver.KindNull:
			return "NULL"
		case driver.KindString, driver.KindInt64, driver.KindUint64, driver.KindMysqlDecimal, driver.KindFloat64:
			var sb strings.Builder
			if err := v.Restore(format.NewRestoreCtx(restoreFlags, &sb)); err == nil {
				return sb.String()
			}
		}
	case *ast.ColumnNameExpr:
		if c := v.Name; c.Table.L == "" && c.Schema.L == "" {
			return "'" + strings.ReplaceAll(c.Name.O, "'", "''") + "'"
		}
	}
	return ""
}

// SessionValues are the per-connection values keyshard answers for the
// client's own session.
type SessionValues struct {
	LastInsertID uint64
	RowCount     int64
	FoundRows    uint64
	ConnectionID uint32
	// WaitTimeout and InteractiveTimeout are the session's values as SET
	// (0: not set, the server's stand): keyshard applies them to the
	// client's connection, not to the pooled backend ones.
	WaitTimeout, InteractiveTimeout uint64
}

// RewriteSessionFuncs replaces LAST_INSERT_ID(), @@identity,
// @@last_insert_id, ROW_COUNT(), FOUND_ROWS(), CONNECTION_ID() and the
// session's @@wait_timeout and @@interactive_timeout (when SET) with the
// session's own values, so a query answers for the client whatever pooled
// connection runs it. Select fields keep their original column names.
// changed is false when nothing needed replacing.
func (p *Parser) RewriteSessionFuncs(sql string, v SessionValues) (out string, changed bool, err error) {
	stmts, err := p.Parse(sql)
	if err != nil {
		return "", false, err
	}
	if len(stmts) != 1 {
		return sql, false, nil
	}
	if p.aux == nil {
		p.aux = parser.New()
	}
	r := &sessionFuncRewriter{v: v, aux: p.aux}
	if sel, ok := stmts[0].(*ast.SelectStmt); ok && sel.Fields != nil {
		for _, f := range sel.Fields.Fields {
			if f.Expr == nil || f.AsName.L != "" {
				continue
			}
			before := r.n
			f.Expr.Accept(r)
			if r.n != before {
				f.AsName = ast.NewCIStr(f.Text())
			}
		}
	}
	stmts[0].Accept(r)
	if r.err != nil {
		return "", false, r.err
	}
	if r.n == 0 {
		return sql, false, nil
	}
	var sb strings.Builder
	if err := stmts[0].Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &sb)); err != nil {
		return "", false, err
	}
	return sb.String(), true, nil
}

type sessionFuncRewriter struct {
	v   SessionValues
	n   int
	aux *parser.Parser
	err error
}

// The session functions' values are put in as expressions of the type the
// function has (LAST_INSERT_ID() is BIGINT UNSIGNED NOT NULL, length 21;
// ROW_COUNT() and FOUND_ROWS() BIGINT NOT NULL), so the client sees the
// same column definition as from the server: a bare literal would be an INT
// of its own width, and a binary-protocol row would not match the types
// the PREPARE announced. Checked on MariaDB 10.11 by the e2e TestDiff.
const (
	lastInsertIDExpr = "IFNULL(CAST(CAST(%d AS CHAR(21)) AS UNSIGNED) + 0, CAST(0 AS UNSIGNED))"
	identityExpr     = "CAST(CAST(%d AS CHAR(21)) AS UNSIGNED) + 0"
	rowCountExpr     = "IFNULL(CAST(CAST(%d AS CHAR(20)) AS SIGNED), 0)"
)

// expr parses format with v into an expression (on the auxiliary parser:
// the statement being rewritten belongs to the main one).
func (r *sessionFuncRewriter) expr(format string, v any) ast.ExprNode {
	stmts, _, err := r.aux.Parse("SELECT "+fmt.Sprintf(format, v), "", "")
	if err != nil || len(stmts) != 1 {
		r.err = fmt.Errorf("session function value: %v", err)
		return ast.NewValueExpr(v, "", "")
	}
	return stmts[0].(*ast.SelectStmt).Fields.Fields[0].Expr
}

func (r *sessionFuncRewriter) Enter(n ast.Node) (ast.Node, bool) { return n, false }

func (r *sessionFuncRewriter) Leave(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.FuncCallExpr:
		switch x.FnName.L {
		case "last_insert_id":
			if len(x.Args) == 0 {
				r.n++
				return r.expr(lastInsertIDExpr, r.v.LastInsertID), true
			}
		case "row_count":
			r.n++
			return r.expr(rowCountExpr, r.v.RowCount), true
		case "found_rows":
			r.n++
			return r.expr(rowCountExpr, r.v.FoundRows), true
		case "connection_id":
			r.n++
			return ast.NewValueExpr(uint64(r.v.ConnectionID), "", ""), true
		}
	case *ast.VariableExpr:
		if x.IsSystem && !x.IsGlobal && (x.Name == "identity" || x.Name == "last_insert_id") {
			r.n++
			return r.expr(identityExpr, r.v.LastInsertID), true
		}
		if x.IsSystem && !x.IsGlobal && x.Name == "wait_timeout" && r.v.WaitTimeout > 0 {
			r.n++
			return r.expr(identityExpr, r.v.WaitTimeout), true
		}
		if x.IsSystem && !x.IsGlobal && x.Name == "interactive_timeout" && r.v.InteractiveTimeout > 0 {
			r.n++
			return r.expr(identityExpr, r.v.InteractiveTimeout), true
		}
	}
	return n, true
}

// FormatUint is strconv.FormatUint, for callers building literals.
func FormatUint(v uint64) string { return strconv.FormatUint(v, 10) }
