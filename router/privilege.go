package router

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Deny is a set of statement classes a user may not run (its user_list
// entry: server_admin, no_ddl, read_only).
type Deny uint8

// Statement classes.
const (
	// DenyAdmin: server administration (SHUTDOWN, SET GLOBAL, account
	// management, GRANT, plugins, server-side files), denied to all but
	// server_admin users: every proxy user shares the backend account.
	DenyAdmin Deny = 1 << iota
	// DenyDDL: CREATE, ALTER, DROP, RENAME, TRUNCATE (no_ddl, read_only).
	DenyDDL
	// DenyWrite: all but reads and session statements (read_only).
	DenyWrite
)

// MaybeDenied reports whether sql, classified as info, may belong to a
// class of deny: false for the statements that cannot, without a parser.
func MaybeDenied(sql string, info Info, deny Deny) bool {
	if deny == 0 {
		return false
	}
	if info.Flags&FlagMulti != 0 {
		return true
	}
	switch info.Kind {
	case KindBegin, KindCommit, KindRollback, KindUse, KindEmpty:
		return false
	case KindInsert, KindUpdate, KindDelete, KindReplace, KindCall:
		return deny&DenyWrite != 0
	case KindSelect:
		return containsFold(sql, "file") // only INTO OUTFILE / DUMPFILE would be
	}
	return true
}

// Denied says which class of deny sql (classified as info) belongs to, if
// any: a description for the error ("" for none) and the class. Each
// statement of a batch counts, executable comments are read as the server
// reads them, and the text of PREPARE ... FROM and EXECUTE IMMEDIATE is
// looked at too. Statements that cannot belong skip the parse
// (MaybeDenied): this costs nothing on the hot path.
func (p *Parser) Denied(sql string, info Info, deny Deny) (string, Deny) {
	if !MaybeDenied(sql, info, deny) {
		return "", 0
	}
	sql = openExecComments(sql) // the parser skips /*M! ... */
	stmts, err := p.Parse(sql)
	if err != nil {
		return lexicalDenied(sql, deny)
	}
	// deniedClass parses a PREPARE's text with the same parser, which
	// reuses the slice it returned.
	for _, st := range append([]ast.StmtNode(nil), stmts...) {
		if c, d := p.deniedClass(st, deny); c != "" {
			return c, d
		}
	}
	return "", 0
}

// ServerAdmin is Denied for DenyAdmin alone.
func (p *Parser) ServerAdmin(sql string, info Info) string {
	c, _ := p.Denied(sql, info, DenyAdmin)
	return c
}

func (p *Parser) deniedClass(st ast.StmtNode, deny Deny) (string, Deny) {
	if x, ok := st.(*ast.PrepareStmt); ok {
		if x.SQLText != "" {
			return p.Denied(x.SQLText, Classify(x.SQLText), deny)
		}
		if deny&DenyWrite != 0 {
			return "PREPARE from a variable (its text cannot be checked)", DenyWrite
		}
		return "", 0
	}
	if deny&DenyAdmin != 0 {
		if c := adminClass(st); c != "" {
			return c, DenyAdmin
		}
	}
	if deny&DenyDDL != 0 {
		if isDDL(st) {
			return "DDL (CREATE, ALTER, DROP, RENAME, TRUNCATE)", DenyDDL
		}
	}
	if deny&DenyWrite != 0 && !readStmt(st) {
		return "a statement that may change data", DenyWrite
	}
	return "", 0
}

// isDDL reports whether st changes the schema (TiDB counts LOCK TABLES
// among its DDL nodes; the server does not).
func isDDL(st ast.StmtNode) bool {
	switch st.(type) {
	case *ast.LockTablesStmt, *ast.UnlockTablesStmt:
		return false
	}
	_, ok := st.(ast.DDLNode)
	return ok
}

// readStmt reports whether st only reads data or changes the session.
func readStmt(st ast.StmtNode) bool {
	switch x := st.(type) {
	case *ast.SelectStmt, *ast.SetOprStmt, *ast.ShowStmt, *ast.SetStmt, *ast.UseStmt,
		*ast.BeginStmt, *ast.CommitStmt, *ast.RollbackStmt, *ast.SavepointStmt, *ast.ReleaseSavepointStmt,
		*ast.DoStmt, *ast.ExecuteStmt, *ast.DeallocateStmt, *ast.KillStmt, *ast.HelpStmt, *ast.UnlockTablesStmt:
		return true
	case *ast.ExplainStmt:
		return !x.Analyze || readStmt(x.Stmt) // EXPLAIN ANALYZE runs it
	}
	return false
}

func adminClass(st ast.StmtNode) string {
	switch x := st.(type) {
	case *ast.ShutdownStmt, *ast.RestartStmt:
		return "SHUTDOWN"
	case *ast.GrantStmt, *ast.GrantRoleStmt, *ast.GrantProxyStmt, *ast.RevokeStmt, *ast.RevokeRoleStmt:
		return "GRANT/REVOKE"
	case *ast.CreateUserStmt, *ast.AlterUserStmt, *ast.DropUserStmt, *ast.RenameUserStmt, *ast.SetPwdStmt:
		return "account management (CREATE/ALTER/DROP/RENAME USER, SET PASSWORD)"
	case *ast.AlterInstanceStmt:
		return "ALTER INSTANCE"
	case *ast.SetStmt:
		for _, v := range x.Variables {
			if v.IsGlobal {
				return "SET GLOBAL"
			}
		}
	case *ast.LoadDataStmt:
		if x.FileLocRef != ast.FileLocClient {
			return "server-side files (LOAD DATA INFILE without LOCAL)"
		}
	}
	v := &intoFile{}
	st.Accept(v)
	if v.found {
		return "server-side files (SELECT ... INTO OUTFILE/DUMPFILE)"
	}
	return ""
}

type intoFile struct{ found bool }

func (v *intoFile) Enter(n ast.Node) (ast.Node, bool) {
	if s, ok := n.(*ast.SelectStmt); ok && s.SelectIntoOpt != nil && s.SelectIntoOpt.Tp != ast.SelectIntoVars {
		v.found = true
	}
	return n, v.found
}
func (v *intoFile) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// readWords are the first words of the statements a read_only user may
// run, for text the parser cannot read.
var readWords = map[string]bool{"select": true, "show": true, "set": true, "use": true, "begin": true, "start": true,
	"commit": true, "rollback": true, "savepoint": true, "release": true, "explain": true, "describe": true, "desc": true,
	"do": true, "help": true, "execute": true, "deallocate": true, "kill": true, "values": true, "table": true, "unlock": true}

// lexicalDenied is Denied for text the parser cannot read (MariaDB's own
// syntax): each statement's first words.
func lexicalDenied(sql string, deny Deny) (string, Deny) {
	for _, st := range splitStatements(sql) {
		f := strings.Fields(strings.ToLower(st[Classify(st).Start:])) // Classify reads into /*! ... */
		if len(f) == 0 {
			continue
		}
		if len(f) > 1 && f[0] == "execute" && f[1] == "immediate" {
			// EXECUTE IMMEDIATE 'text': the text is a string; look into it.
			arg := strings.TrimSpace(strings.Join(strings.Fields(st)[2:], " "))
			if arg != "" && (arg[0] == '\'' || arg[0] == '"') {
				text := unquote(arg[:skipQuoted(arg, 0, arg[0])])
				if c, d := lexicalDenied(text, deny); c != "" {
					return c, d
				}
				continue
			}
			if deny&DenyWrite != 0 {
				return "EXECUTE IMMEDIATE of an expression (its text cannot be checked)", DenyWrite
			}
			continue
		}
		if deny&DenyAdmin != 0 {
			if c := lexicalAdmin(f); c != "" {
				return c, DenyAdmin
			}
		}
		ddl := (f[0] == "create" || f[0] == "alter" || f[0] == "drop" || f[0] == "rename" || f[0] == "truncate") && lexicalAdmin(f) == ""
		if deny&DenyDDL != 0 && ddl {
			return "DDL (CREATE, ALTER, DROP, RENAME, TRUNCATE)", DenyDDL
		}
		if deny&DenyWrite != 0 && !readWords[f[0]] {
			return "a statement that may change data", DenyWrite
		}
	}
	return "", 0
}

// lexicalAdmin is the server-administration class of one statement's
// lower-cased words ("" for none).
func lexicalAdmin(f []string) string {
	for _, w := range f {
		if w == "outfile" || w == "dumpfile" {
			return "server-side files (SELECT ... INTO OUTFILE/DUMPFILE)"
		}
	}
	switch f[0] {
	case "shutdown", "restart":
		return "SHUTDOWN"
	case "grant", "revoke":
		return "GRANT/REVOKE"
	case "install", "uninstall":
		return "plugin installation (INSTALL/UNINSTALL PLUGIN/SONAME)"
	case "create", "alter", "drop", "rename":
		if len(f) > 1 && (f[1] == "user" || f[1] == "role") || len(f) > 3 && f[1] == "or" && f[3] == "user" {
			return "account management (CREATE/ALTER/DROP/RENAME USER, SET PASSWORD)"
		}
	case "set":
		if len(f) > 1 && (f[1] == "global" || f[1] == "password" || strings.HasPrefix(f[1], "@@global.")) {
			return "SET GLOBAL / SET PASSWORD"
		}
	}
	return ""
}
