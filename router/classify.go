package router

// Kind is the statement kind found by Classify.
type Kind uint8

// Statement kinds.
const (
	KindOther Kind = iota
	KindSelect
	KindInsert
	KindUpdate
	KindDelete
	KindReplace
	KindSet
	KindUse
	KindBegin // BEGIN, START TRANSACTION
	KindCommit
	KindRollback
	KindLockTables
	KindUnlockTables
	KindKill
	KindShow
	KindDDL // CREATE, ALTER, DROP, TRUNCATE, RENAME
	KindPrepare
	KindExecute
	KindDeallocate
	KindCall
	KindLoad
	KindEmpty // only comments/whitespace
)

var kindNames = [...]string{"other", "select", "insert", "update", "delete", "replace", "set", "use",
	"begin", "commit", "rollback", "lock", "unlock", "kill", "show", "ddl", "prepare", "execute",
	"deallocate", "call", "load", "empty"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Flags are facts about a statement that change how a session treats its
// backend connection.
type Flags uint16

// Statement flags.
const (
	FlagUserVar       Flags = 1 << iota // uses @user variables: pins the backend connection
	FlagSessionFunc                     // LAST_INSERT_ID(), ROW_COUNT(), FOUND_ROWS(), CONNECTION_ID(), @@identity, @@last_insert_id, @@wait_timeout, @@interactive_timeout
	FlagGetLock                         // GET_LOCK(): the lock lives on the backend connection
	FlagCalcFoundRows                   // SQL_CALC_FOUND_ROWS
	FlagTemporary                       // CREATE/DROP TEMPORARY TABLE
	FlagMulti                           // more than one statement
	FlagSysVar                          // reads @@system variables
	// FlagMasterOnly: a read that must still run on the master: locking
	// reads (FOR UPDATE, LOCK IN SHARE MODE), sequence functions, lock
	// functions, SELECT ... INTO, and kingshard's /*master*/ hint. The
	// words are matched anywhere in the statement, so an unquoted column
	// named, say, share only costs a read on the master.
	FlagMasterOnly
	// FlagKill: the word KILL appears (a batch may hold a KILL statement,
	// which keyshard must run itself: see Parser.BatchKills).
	FlagKill
)

// Info is the result of Classify.
type Info struct {
	Kind  Kind
	Flags Flags
	// Offset of the first keyword (after leading comments and blanks).
	Start int
}

// Classify scans a statement once without allocating: it skips comments,
// string literals and quoted identifiers, and looks at keywords and
// identifiers that matter to a session.
func Classify(sql string) Info {
	var info Info
	words := 0
	var first, second string
	var masterWords Flags
	n := len(sql)
	for i := 0; i < n; {
		c := sql[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
		case c == '#':
			i = skipLine(sql, i)
		case c == '-' && i+2 < n && sql[i+1] == '-' && (sql[i+2] == ' ' || sql[i+2] == '\t' || sql[i+2] == '\n'):
			i = skipLine(sql, i)
		case c == '-' && i+2 == n && sql[i+1] == '-':
			i = n
		case c == '/' && i+1 < n && sql[i+1] == '*':
			if i+2 < n && (sql[i+2] == '!' || sql[i+2] == 'M' && i+3 < n && sql[i+3] == '!') {
				// Executable comment: its body is SQL. Skip the marker and
				// the version number; the closing */ is skipped below.
				i += 3
				if sql[i-1] == 'M' {
					i++
				}
				for i < n && sql[i] >= '0' && sql[i] <= '9' {
					i++
				}
				continue
			}
			j := indexFrom(sql, i+2, "*/")
			if j < 0 {
				i = n
			} else {
				if eqFold(trimBlanks(sql[i+2:j]), "master") {
					info.Flags |= FlagMasterOnly
				}
				i = j + 2
			}
		case c == '*' && i+1 < n && sql[i+1] == '/':
			i += 2 // end of an executable comment
		case c == '\'' || c == '"':
			i = skipQuoted(sql, i, c)
		case c == '`':
			i = skipQuoted(sql, i, c)
		case c == '@':
			if i+1 < n && sql[i+1] == '@' {
				info.Flags |= FlagSysVar
				j := i + 2
				// @@session.name / @@global.name / @@name
				k := j
				for k < n && isIdent(sql[k]) {
					k++
				}
				if k < n && sql[k] == '.' {
					j = k + 1
					for k = j; k < n && isIdent(sql[k]); k++ {
					}
				}
				name := sql[j:k]
				if eqFold(name, "identity") || eqFold(name, "last_insert_id") || eqFold(name, "wait_timeout") || eqFold(name, "interactive_timeout") {
					info.Flags |= FlagSessionFunc
				}
				i = k
			} else {
				info.Flags |= FlagUserVar
				i++
				if i < n && (sql[i] == '\'' || sql[i] == '"' || sql[i] == '`') {
					i = skipQuoted(sql, i, sql[i])
				}
				for i < n && isIdent(sql[i]) {
					i++
				}
			}
		case c == ';':
			i++
			// Anything but blanks and comments after ';' is a second
			// statement (an executable comment is one).
		scan:
			for j := i; j < n; {
				ch := sql[j]
				switch {
				case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == ';':
					j++
				case lineComment(sql, j):
					j = skipLine(sql, j)
				case blockComment(sql, j):
					j = commentEnd(sql, j+2)
				default:
					info.Flags |= FlagMulti
					break scan
				}
			}
		case isIdentStart(c):
			j := i + 1
			for j < n && isIdent(sql[j]) {
				j++
			}
			w := sql[i:j]
			if words == 0 {
				info.Start = i
				first = w
			} else if words == 1 {
				second = w
			}
			words++
			f := wordFlags(w)
			// Master-only words matter in a read only (INSERT INTO...).
			masterWords |= f & FlagMasterOnly
			info.Flags |= f &^ FlagMasterOnly
			i = j
		default:
			i++
		}
	}
	if words == 0 {
		info.Kind = KindEmpty
		return info
	}
	info.Kind = kindOf(first, second)
	if info.Kind == KindSelect {
		info.Flags |= masterWords
	}
	if info.Kind == KindDDL && eqFold(first, "create") && eqFold(second, "temporary") {
		info.Flags |= FlagTemporary
	}
	return info
}

func wordFlags(w string) Flags {
	switch len(w) {
	case 4:
		if eqFold(w, "into") || eqFold(w, "next") {
			return FlagMasterOnly
		}
		if eqFold(w, "kill") {
			return FlagKill
		}
	case 5:
		if eqFold(w, "share") {
			return FlagMasterOnly
		}
	case 6:
		if eqFold(w, "update") || eqFold(w, "setval") {
			return FlagMasterOnly
		}
	case 7:
		if eqFold(w, "nextval") || eqFold(w, "lastval") {
			return FlagMasterOnly
		}
	case 12:
		if eqFold(w, "release_lock") || eqFold(w, "is_free_lock") || eqFold(w, "is_used_lock") {
			return FlagMasterOnly
		}
	case 17:
		if eqFold(w, "release_all_locks") {
			return FlagMasterOnly
		}
	case 8:
		if eqFold(w, "get_lock") {
			return FlagGetLock
		}
		if eqFold(w, "previous") {
			return FlagMasterOnly
		}
	case 9:
		if eqFold(w, "row_count") {
			return FlagSessionFunc
		}
	case 10:
		if eqFold(w, "found_rows") {
			return FlagSessionFunc
		}
	case 13:
		if eqFold(w, "connection_id") {
			return FlagSessionFunc
		}
	case 14:
		if eqFold(w, "last_insert_id") {
			return FlagSessionFunc
		}
	case 19:
		if eqFold(w, "sql_calc_found_rows") {
			return FlagCalcFoundRows
		}
	}
	return 0
}

func kindOf(first, second string) Kind {
	switch len(first) {
	case 3:
		switch {
		case eqFold(first, "set"):
			return KindSet
		case eqFold(first, "use"):
			return KindUse
		case eqFold(first, "xa"):
			return KindBegin
		}
	case 4:
		switch {
		case eqFold(first, "show"), eqFold(first, "desc"):
			return KindShow
		case eqFold(first, "kill"):
			return KindKill
		case eqFold(first, "lock"):
			return KindLockTables
		case eqFold(first, "drop"):
			return KindDDL
		case eqFold(first, "call"):
			return KindCall
		case eqFold(first, "load"):
			return KindLoad
		case eqFold(first, "with"):
			return KindSelect
		}
	case 5:
		switch {
		case eqFold(first, "begin"):
			return KindBegin
		case eqFold(first, "start"):
			if eqFold(second, "transaction") {
				return KindBegin
			}
		case eqFold(first, "alter"):
			return KindDDL
		case eqFold(first, "table"):
			return KindSelect
		}
	case 6:
		switch {
		case eqFold(first, "select"):
			return KindSelect
		case eqFold(first, "insert"):
			return KindInsert
		case eqFold(first, "update"):
			return KindUpdate
		case eqFold(first, "delete"):
			return KindDelete
		case eqFold(first, "commit"):
			return KindCommit
		case eqFold(first, "create"):
			return KindDDL
		case eqFold(first, "rename"):
			return KindDDL
		case eqFold(first, "unlock"):
			return KindUnlockTables
		case eqFold(first, "values"):
			return KindSelect
		}
	case 7:
		switch {
		case eqFold(first, "replace"):
			return KindReplace
		case eqFold(first, "prepare"):
			return KindPrepare
		case eqFold(first, "execute"):
			return KindExecute
		case eqFold(first, "explain"):
			return KindShow
		}
	case 8:
		switch {
		case eqFold(first, "rollback"):
			return KindRollback
		case eqFold(first, "truncate"):
			return KindDDL
		case eqFold(first, "describe"):
			return KindShow
		}
	case 10:
		if eqFold(first, "deallocate") {
			return KindDeallocate
		}
	}
	return KindOther
}

func skipLine(s string, i int) int {
	for i < len(s) && s[i] != '\n' {
		i++
	}
	return i
}

// skipQuoted returns the index after the literal or identifier that starts
// with quote q at s[i]. Backslash escapes apply to strings, doubled quotes to
// all.
func skipQuoted(s string, i int, q byte) int {
	i++
	for i < len(s) {
		c := s[i]
		if c == '\\' && q != '`' {
			i += 2
			continue
		}
		if c == q {
			if i+1 < len(s) && s[i+1] == q {
				i += 2
				continue
			}
			return i + 1
		}
		i++
	}
	return len(s)
}

// lineComment reports whether a '#' or '-- ' comment (two dashes and a
// blank or control character, as the server reads it) starts at s[i].
func lineComment(s string, i int) bool {
	return s[i] == '#' || s[i] == '-' && i+2 < len(s) && s[i+1] == '-' && s[i+2] <= ' '
}

// execComment reports whether an executable comment (/*! or /*M!) starts
// at s[i].
func execComment(s string, i int) bool {
	return i+2 < len(s) && s[i] == '/' && s[i+1] == '*' &&
		(s[i+2] == '!' || s[i+2] == 'M' && i+3 < len(s) && s[i+3] == '!')
}

// blockComment reports whether a /* comment that is not executable starts
// at s[i].
func blockComment(s string, i int) bool {
	return i+1 < len(s) && s[i] == '/' && s[i+1] == '*' && !execComment(s, i)
}

// commentEnd returns the index after the */ that closes a comment whose
// body starts at s[from] (len(s) if none does).
func commentEnd(s string, from int) int {
	if j := indexFrom(s, from, "*/"); j >= 0 {
		return j + 2
	}
	return len(s)
}

func indexFrom(s string, from int, sub string) int {
	for i := from; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}

func isIdent(c byte) bool {
	return isIdentStart(c) || c >= '0' && c <= '9' || c == '$'
}

// eqFold compares an identifier with a lower-case ASCII word.
func eqFold(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// trimBlanks trims spaces, tabs and line breaks.
func trimBlanks(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || s[0] == '\r') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t' || s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}
