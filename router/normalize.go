package router

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"
)

// LitKind is the lexical kind of a literal found by Normalize.
type LitKind uint8

// Literal kinds.
const (
	LitInt    LitKind = iota + 1 // decimal integer
	LitNumber                    // decimal with a point or exponent
	LitString                    // quoted string ('..' or "..")
	LitHex                       // 0x.. or x'..'
	LitBit                       // 0b.. or b'..'
	LitParam                     // ? of a prepared statement
)

// Literal is one literal of a statement, in order of appearance. Text is the
// exact source text (quotes included), so it can be put back verbatim.
//
// A ? (a parameter of a prepared statement) is a Literal of kind LitParam:
// Text stays "?" so the rewritten SQL keeps the parameter, Param numbers it
// among the statement's parameters (from 0), and Bound is the value bound
// by an execution, used for routing.
type Literal struct {
	Kind  LitKind
	Text  string
	Param int
	Bound any
}

// Value returns the literal as a shard-key value: int64 or uint64 for
// integers, float64 for other numbers, string for strings (escapes
// resolved), []byte for hex and bit literals.
func (l Literal) Value() any {
	switch l.Kind {
	case LitInt:
		if v, err := strconv.ParseInt(l.Text, 10, 64); err == nil {
			return v
		}
		if v, err := strconv.ParseUint(l.Text, 10, 64); err == nil {
			return v
		}
		f, _ := strconv.ParseFloat(l.Text, 64)
		return f
	case LitNumber:
		f, _ := strconv.ParseFloat(l.Text, 64)
		return f
	case LitString:
		return unquote(l.Text)
	case LitHex:
		return hexBytes(l.Text)
	case LitParam:
		return l.Bound
	}
	return l.Text
}

// Normalize replaces the literals of sql with ? and returns the result (the
// statement's shape, a plan cache key) and the literals in order. Comments
// are dropped and runs of white space folded, so statements that differ only
// in literal values, comments or spacing share one shape. Literals that the
// grammar does not allow to be parameters (after DATE, TIME, TIMESTAMP,
// INTERVAL units are fine; after a charset introducer such as _utf8mb4, or
// N'..') stay in the shape. One pass, no allocation beyond the two results.
func Normalize(sql string) (shape string, lits []Literal) {
	b, lits := appendShape(nil, nil, sql)
	return string(b), lits
}

// appendShape is Normalize appending the shape to b and the literals to
// lits: with scratch buffers kept by the caller, no allocation at all.
func appendShape(b []byte, lits []Literal, sql string) ([]byte, []Literal) {
	return shapeOf(b, lits, sql, false, 0)
}

// shapeOf is appendShape; with digest set it makes a digest text instead:
// the literals the shape must keep for the grammar (after a charset
// introducer, N, COLLATE, IDENTIFIED BY, COMMENT ...) become ? too and no
// literal is collected, and with max > 0 it stops once the text is longer
// than max bytes (its first max bytes are those of the whole text).
func shapeOf(b []byte, lits []Literal, sql string, digest bool, max int) ([]byte, []Literal) {
	base := len(b)
	want := len(sql)
	if max > 0 {
		want = min(want, max+64)
	}
	if cap(b)-base < want {
		b = append(make([]byte, 0, base+want), b...)
	}
	n := len(sql)
	space := false
	var prevWord string // last identifier/keyword, lower case, for introducers
	emit := func(s string) {
		if space && len(b) > base {
			b = append(b, ' ')
		}
		space = false
		b = append(b, s...)
	}
	lit := func(l Literal) {
		if !digest {
			lits = append(lits, l)
		}
	}
	params := 0
	for i := 0; i < n; {
		if max > 0 && len(b)-base > max {
			break
		}
		c := sql[i]
		switch {
		case c == '?':
			emit("?")
			lit(Literal{Kind: LitParam, Text: "?", Param: params})
			params++
			prevWord = ""
			i++
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			space = true
			i++
		case c == '#' || c == '-' && i+2 < n && sql[i+1] == '-' && (sql[i+2] == ' ' || sql[i+2] == '\t' || sql[i+2] == '\n'):
			i = skipLine(sql, i)
			space = true
		case c == '/' && i+1 < n && sql[i+1] == '*':
			j := indexFrom(sql, i+2, "*/")
			if j < 0 {
				j = n
			} else {
				j += 2
			}
			if i+2 < n && (sql[i+2] == '!' || sql[i+2] == 'M') {
				// Executable comment: kept verbatim, literals and all (the
				// TiDB parser skips /*M! ... */ bodies, so pulling literals
				// out of one would shift every parameter after it).
				emit(sql[i:j])
				prevWord = ""
			} else {
				space = true
			}
			i = j
		case c == '\'' || c == '"':
			j := skipQuoted(sql, i, c)
			switch {
			case !keepLiteral(prevWord):
				emit("?")
				lit(Literal{Kind: LitString, Text: sql[i:j]})
			case digest:
				if !space && len(b) > base && isIdent(b[len(b)-1]) {
					space = true // _binary'..' -> _binary ?
				}
				emit("?")
			default:
				emit(sql[i:j])
			}
			prevWord = ""
			i = j
		case c == '`':
			j := skipQuoted(sql, i, c)
			emit(sql[i:j])
			prevWord = ""
			i = j
		case c >= '0' && c <= '9' || c == '.' && i+1 < n && sql[i+1] >= '0' && sql[i+1] <= '9' && !identBefore(sql, i):
			j, kind := scanNumber(sql, i)
			if j < n && isIdent(sql[j]) && kind != LitHex && kind != LitBit {
				// An identifier that starts with digits (1abc).
				for j < n && isIdent(sql[j]) {
					j++
				}
				emit(sql[i:j])
				prevWord = ""
				i = j
				continue
			}
			emit("?")
			lit(Literal{Kind: kind, Text: sql[i:j]})
			prevWord = ""
			i = j
		case isIdent(c):
			j := i
			for j < n && isIdent(sql[j]) {
				j++
			}
			w := sql[i:j]
			// x'..', b'..', X'..', B'..'
			if j < n && sql[j] == '\'' && len(w) == 1 && (w[0]|0x20 == 'x' || w[0]|0x20 == 'b') {
				k := skipQuoted(sql, j, '\'')
				kind := LitHex
				if w[0]|0x20 == 'b' {
					kind = LitBit
				}
				emit("?")
				lit(Literal{Kind: kind, Text: sql[i:k]})
				prevWord = ""
				i = k
				continue
			}
			emit(w)
			prevWord = w // compared without regard to case in keepLiteral
			if len(w) == 1 && (w[0] == 'n' || w[0] == 'N') && j < n && sql[j] == '\'' {
				prevWord = "_n" // N'..' national string: keep
			}
			i = j
		default:
			// Operators and punctuation, one byte at a time; no space is
			// inserted between them unless the source had one.
			if space && len(b) > base {
				b = append(b, ' ')
			}
			space = false
			b = append(b, c)
			if c != '.' {
				prevWord = ""
			}
			i++
		}
	}
	return b, lits
}

var literalKeywords = []string{"date", "time", "timestamp", "collate", "escape", "comment", "password", "identified", "engine", "charset", "character", "set"}

// keepLiteral reports whether a string literal after word must stay in the
// shape: the grammar wants a literal there, not a parameter.
func keepLiteral(word string) bool {
	if word == "" {
		return false
	}
	if word[0] == '_' {
		return true // charset introducer (_utf8mb4'..') or N'..'
	}
	for _, kw := range literalKeywords {
		if strings.EqualFold(word, kw) {
			return true
		}
	}
	return false
}

// identBefore reports whether sql[i] ('.') follows an identifier (t.5col is
// not a number).
func identBefore(sql string, i int) bool {
	return i > 0 && (isIdent(sql[i-1]) || sql[i-1] == '`')
}

// scanNumber scans a numeric literal at sql[i:].
func scanNumber(sql string, i int) (int, LitKind) {
	n := len(sql)
	if sql[i] == '0' && i+1 < n && (sql[i+1] == 'x' || sql[i+1] == 'X') {
		j := i + 2
		for j < n && isHex(sql[j]) {
			j++
		}
		if j > i+2 {
			return j, LitHex
		}
	}
	if sql[i] == '0' && i+1 < n && (sql[i+1] == 'b' || sql[i+1] == 'B') {
		j := i + 2
		for j < n && (sql[j] == '0' || sql[j] == '1') {
			j++
		}
		if j > i+2 && (j == n || !isIdent(sql[j])) {
			return j, LitBit
		}
	}
	kind := LitInt
	j := i
	for j < n && sql[j] >= '0' && sql[j] <= '9' {
		j++
	}
	if j < n && sql[j] == '.' {
		kind = LitNumber
		j++
		for j < n && sql[j] >= '0' && sql[j] <= '9' {
			j++
		}
	}
	if j < n && (sql[j] == 'e' || sql[j] == 'E') {
		k := j + 1
		if k < n && (sql[k] == '+' || sql[k] == '-') {
			k++
		}
		if k < n && sql[k] >= '0' && sql[k] <= '9' {
			for k < n && sql[k] >= '0' && sql[k] <= '9' {
				k++
			}
			return k, LitNumber
		}
	}
	return j, kind
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// unquote resolves a quoted SQL string literal: doubled quotes and the
// backslash escapes of the default sql_mode.
func unquote(s string) string {
	if len(s) < 2 {
		return s
	}
	q := s[0]
	body := s[1 : len(s)-1]
	if strings.IndexByte(body, '\\') < 0 && strings.IndexByte(body, q) < 0 {
		return body
	}
	var b strings.Builder
	b.Grow(len(body))
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c == q && i+1 < len(body) && body[i+1] == q:
			b.WriteByte(q)
			i++
		case c == '\\' && i+1 < len(body):
			i++
			switch body[i] {
			case '0':
				b.WriteByte(0)
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'b':
				b.WriteByte('\b')
			case 'Z':
				b.WriteByte(26)
			case '%', '_':
				b.WriteByte('\\')
				b.WriteByte(body[i])
			default:
				b.WriteByte(body[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// hexBytes decodes 0xABCD or x'ABCD'.
func hexBytes(s string) []byte {
	if len(s) > 2 && (s[1] == '\'') {
		s = s[2 : len(s)-1]
	} else if len(s) > 2 {
		s = s[2:]
	}
	if len(s)%2 == 1 {
		s = "0" + s
	}
	out := make([]byte, len(s)/2)
	for i := range out {
		v, _ := strconv.ParseUint(s[2*i:2*i+2], 16, 8)
		out[i] = byte(v)
	}
	return out
}

// LeadingComments returns the /* */, -- and # comments of lead (the text in
// front of a statement's first keyword), separated by spaces, and nothing
// else of it.
func LeadingComments(lead string) string {
	var b strings.Builder
	n := len(lead)
	for i := 0; i < n; {
		c := lead[i]
		var j int
		switch {
		case c == '/' && i+1 < n && lead[i+1] == '*':
			j = indexFrom(lead, i+2, "*/")
			if j < 0 {
				j = n
			} else {
				j += 2
			}
		case c == '#' || c == '-' && i+2 < n && lead[i+1] == '-':
			j = skipLine(lead, i)
		default:
			i++
			continue
		}
		b.WriteString(lead[i:j])
		if lead[j-1] != '\n' {
			b.WriteByte(' ')
		}
		i = j
	}
	return b.String()
}

// DigestKey appends to dst a statement's digest key: db, a NUL and the
// statement's digest text, which is its shape (see Normalize) with the
// literals the shape keeps for the grammar's sake (after a charset
// introducer, N, COLLATE, IDENTIFIED BY, COMMENT ...) replaced by ? as
// well, so that statements differing only in those values share a digest
// and no value (a password, binary data) shows in digests. Only the first
// max bytes of the text are made (0: all) and kept.
func DigestKey(dst []byte, db, sql string, max int) []byte {
	dst = append(append(dst, db...), 0)
	start := len(dst)
	dst, _ = shapeOf(dst, nil, sql, true, max)
	if max > 0 && len(dst)-start > max {
		end := start + max
		for end > start && !utf8.RuneStart(dst[end]) {
			end--
		}
		dst = dst[:end]
	}
	return dst
}

// IsDigestKey reports whether a plan cache key (Parser.Shape) is also the
// statement's digest key, uncut: no literal was kept in the shape (the
// shape has no quote), so the digest text is the same.
func IsDigestKey(key []byte) bool {
	nul := bytes.IndexByte(key, 0)
	return nul >= 0 && !bytes.ContainsAny(key[nul:], `'"`)
}
