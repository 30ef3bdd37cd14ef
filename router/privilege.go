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
	case KindBegin:
		return containsFold(sql, "atomic") // BEGIN NOT ATOMIC ... END
	case KindCommit, KindRollback, KindUse, KindEmpty:
		return false
	case KindInsert, KindUpdate, KindDelete, KindReplace, KindCall:
		return deny&DenyWrite != 0
	case KindSelect:
		// INTO OUTFILE / DUMPFILE, LOAD_FILE()
		return containsFold(sql, "outfile") || containsFold(sql, "dumpfile") || containsFold(sql, "load_file")
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
	var class string
	var bit Deny
	_, err := p.walkStatements(openExecComments(sql, true), func(st ast.StmtNode, text string) bool {
		if st == nil {
			class, bit = lexicalDenied(text, deny)
		} else {
			class, bit = deniedClass(st, deny)
		}
		return class != ""
	})
	if err != nil && class == "" {
		// Text keyshard cannot see could be anything.
		return "a statement whose text cannot be checked (PREPARE or EXECUTE IMMEDIATE of anything but one string literal, " +
			"a compound statement)", deny & -deny // the lowest class denied: server_admin if it is
	}
	return class, bit
}

func deniedClass(st ast.StmtNode, deny Deny) (string, Deny) {
	if deny&DenyAdmin != 0 {
		if c := adminClass(st); c != "" {
			return c, DenyAdmin
		}
	}
	if deny&DenyDDL != 0 && isDDL(st) {
		return "DDL (CREATE, ALTER, DROP, RENAME, TRUNCATE)", DenyDDL
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
	case *ast.FlushStmt:
		return replication
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
		return "server-side files (SELECT ... INTO OUTFILE/DUMPFILE, LOAD_FILE)"
	}
	return ""
}

// replication is the class of replication and server maintenance.
const replication = "replication and server maintenance (FLUSH, RESET, PURGE, CHANGE MASTER, START/STOP SLAVE)"

type intoFile struct{ found bool }

func (v *intoFile) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.SelectStmt:
		v.found = v.found || x.SelectIntoOpt != nil && x.SelectIntoOpt.Tp != ast.SelectIntoVars
	case *ast.FuncCallExpr:
		v.found = v.found || x.FnName.L == "load_file"
	}
	return n, v.found
}
func (v *intoFile) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// readWords are the first words of the statements a read_only user may
// run, for text the parser cannot read.
var readWords = map[string]bool{"select": true, "show": true, "set": true, "use": true, "begin": true, "start": true,
	"commit": true, "rollback": true, "savepoint": true, "release": true, "explain": true, "describe": true, "desc": true,
	"do": true, "help": true, "execute": true, "deallocate": true, "kill": true, "values": true, "table": true, "unlock": true}

// lexicalDenied is deniedClass for one statement the parser cannot read
// (MariaDB's own syntax): its first words.
func lexicalDenied(st string, deny Deny) (string, Deny) {
	f := strings.Fields(strings.ToLower(st))
	if len(f) == 0 {
		return "", 0
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
	return "", 0
}

// lexicalAdmin is the server-administration class of one statement's
// lower-cased words ("" for none).
func lexicalAdmin(f []string) string {
	for _, w := range f {
		if w == "outfile" || w == "dumpfile" || strings.Contains(w, "load_file") {
			return "server-side files (SELECT ... INTO OUTFILE/DUMPFILE, LOAD_FILE)"
		}
		if w == "soname" {
			return "plugin installation (INSTALL/UNINSTALL PLUGIN/SONAME, CREATE FUNCTION ... SONAME)"
		}
	}
	switch f[0] {
	case "flush", "reset", "purge", "change":
		return replication
	case "start", "stop":
		if len(f) > 1 && (f[1] == "slave" || f[1] == "replica" || f[1] == "all") {
			return replication
		}
	case "shutdown", "restart":
		return "SHUTDOWN"
	case "grant", "revoke":
		return "GRANT/REVOKE"
	case "install", "uninstall":
		return "plugin installation (INSTALL/UNINSTALL PLUGIN/SONAME, CREATE FUNCTION ... SONAME)"
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
