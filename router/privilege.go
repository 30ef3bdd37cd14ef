package router

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// MaybeServerAdmin reports whether sql, classified as info, may be server
// administration: false for the statements that cannot be (all but a
// SELECT naming a file, for the common kinds), without a parser.
func MaybeServerAdmin(sql string, info Info) bool {
	if info.Flags&FlagMulti != 0 {
		return true
	}
	switch info.Kind {
	case KindInsert, KindUpdate, KindDelete, KindReplace, KindBegin, KindCommit, KindRollback, KindUse, KindCall:
		return false
	case KindSelect:
		return containsFold(sql, "file") // only INTO OUTFILE / DUMPFILE would be
	}
	return true
}

// ServerAdmin says which server-administration class sql belongs to ("" for
// none): statements that act on the server rather than on data, which
// keyshard refuses to users not marked server_admin, since every proxy
// user shares the backend account. info is sql's classification. Each
// statement of a batch counts, executable comments are read as the server
// reads them, and the text of PREPARE ... FROM is looked at too. Statements
// that cannot be one skip the parse: this costs nothing on the hot path.
func (p *Parser) ServerAdmin(sql string, info Info) string {
	if !MaybeServerAdmin(sql, info) {
		return ""
	}
	sql = openExecComments(sql) // the parser skips /*M! ... */
	stmts, err := p.Parse(sql)
	if err != nil {
		return lexicalAdmin(sql)
	}
	// adminClass parses a PREPARE's text with the same parser, which
	// reuses the slice it returned.
	for _, st := range append([]ast.StmtNode(nil), stmts...) {
		if c := p.adminClass(st); c != "" {
			return c
		}
	}
	return ""
}

func (p *Parser) adminClass(st ast.StmtNode) string {
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
	case *ast.PrepareStmt:
		if x.SQLText != "" {
			return p.ServerAdmin(x.SQLText, Classify(x.SQLText))
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

// lexicalAdmin is ServerAdmin for text the parser cannot read (MariaDB's
// own syntax): each statement's first words.
func lexicalAdmin(sql string) string {
	for _, st := range splitStatements(sql) {
		f := strings.Fields(strings.ToLower(st[Classify(st).Start:])) // Classify reads into /*! ... */
		if len(f) == 0 {
			continue
		}
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
		case "execute":
			// EXECUTE IMMEDIATE 'text': the text is a string; look into it.
			if len(f) > 2 && f[1] == "immediate" {
				if c := lexicalAdmin(strings.Trim(strings.Join(strings.Fields(st)[2:], " "), "'\"")); c != "" {
					return c
				}
			}
		}
	}
	return ""
}
