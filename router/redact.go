package router

import "strings"

// RedactSecrets returns sql with the string literals that may hold a
// password replaced by '<redacted>': every literal after the first
// IDENTIFIED or PASSWORD keyword (CREATE/ALTER USER ... IDENTIFIED BY,
// GRANT ... IDENTIFIED BY, SET PASSWORD ... = PASSWORD('...'), IDENTIFIED
// VIA ... USING '...', CHANGE MASTER ... MASTER_PASSWORD = '...'). It
// redacts more than it must (a user name after SET PASSWORD FOR) rather
// than less. Statements without those words come back as they are.
func RedactSecrets(sql string) string {
	if !containsFold(sql, "password") && !containsFold(sql, "identified") {
		return sql
	}
	var b strings.Builder
	secret := false
	n := len(sql)
	last := 0
	for i := 0; i < n; {
		c := sql[i]
		switch {
		case c == '\'' || c == '"':
			j := skipQuoted(sql, i, c)
			if secret {
				b.WriteString(sql[last:i])
				b.WriteString("'<redacted>'")
				last = j
			}
			i = j
		case c == '`':
			i = skipQuoted(sql, i, c)
		case c == '/' && i+1 < n && sql[i+1] == '*' || c == '#' || c == '-' && i+2 < n && sql[i+1] == '-' && sql[i+2] == ' ':
			i++ // a comment's words are not keywords, its quotes are quotes all the same
		case isIdent(c):
			j := i
			for j < n && isIdent(sql[j]) {
				j++
			}
			if w := strings.ToLower(sql[i:j]); w == "identified" || strings.HasSuffix(w, "password") {
				secret = true
			}
			i = j
		default:
			i++
		}
	}
	if last == 0 {
		return sql
	}
	b.WriteString(sql[last:])
	return b.String()
}

// containsFold reports whether s contains word (lower-case ASCII) in any
// case: one pass, no allocation (a SELECT pays it, see MaybeDenied).
func containsFold(s, word string) bool {
	for i := 0; i+len(word) <= len(s); i++ {
		if s[i]|0x20 == word[0] && eqFold(s[i:i+len(word)], word) {
			return true
		}
	}
	return false
}
