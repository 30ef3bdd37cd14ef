package router

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	driver "github.com/pingcap/tidb/pkg/parser/test_driver"
)

// A template is a statement restored from its AST once, at plan time, with
// markers where a sharded table's name and each literal go. Rendering it for
// a sub-table is string concatenation: no parse, no AST walk per query.
//
// Markers are chosen so that they survive Restore unambiguously: a sharded
// table is renamed to `__ks_tN__` (always back-quoted in the output), and a
// literal becomes the integer markerBase+order. The restored text holds no
// other literals (they were all parameters), so a digit run in that range
// is always a marker. Restore may reorder parameters (INTERVAL ? DAY + ?
// becomes DATE_ADD(?, INTERVAL ? DAY)); the markers carry their order.
const (
	markerBase = 7381920000000
	rowsMarker = markerBase - 1 // stands for the VALUES rows of an INSERT
)

type segKind uint8

const (
	segText segKind = iota
	segParam
	segTable
	segRows
	segLimit
	segAlias
)

type segment struct {
	kind  segKind
	text  string
	n     int      // parameter order or table index
	alias template // segAlias: the name, text and parameters
}

type template []segment

// restoreFlags: back-quoted names, single-quoted strings without charset
// introducers the client did not write.
const restoreFlags = format.RestoreStringSingleQuotes | format.RestoreKeyWordUppercase |
	format.RestoreNameBackQuotes | format.RestoreStringWithoutDefaultCharset

func restore(n ast.Node) (string, error) { return restoreWith(n, restoreFlags) }

// restoreEscaped is restore for a statement whose string literals are
// written out again (not spliced from the client's text): backslashes in
// them are escaped, as the default sql_mode reads them.
func restoreEscaped(n ast.Node) (string, error) {
	return restoreWith(n, restoreFlags|format.RestoreStringEscapeBackslash)
}

func restoreWith(n ast.Node, flags format.RestoreFlags) (string, error) {
	var sb strings.Builder
	if err := n.Restore(format.NewRestoreCtx(flags, &sb)); err != nil {
		return "", err
	}
	out := sb.String()
	// TiDB writes CHAR(x USING cs) as CHAR_FUNC(x, 'cs') and the string
	// INSERT() as INSERT_FUNC(): the second maps back, the first does not.
	if strings.Contains(out, "CHAR_FUNC(") {
		return "", errors.New("CHAR(... USING ...) cannot be rewritten; use CONVERT(CHAR(...) USING ...)")
	}
	return strings.ReplaceAll(out, "INSERT_FUNC(", "INSERT("), nil
}

func tableMarker(i int) string { return "__ks_t" + strconv.Itoa(i) + "__" }

// parseTemplate splits restored text at its markers: table markers always,
// literal markers in a shape (params), the LIMIT marker in a merge's
// statement (merge).
func parseTemplate(s string, params, merge bool, aliases []template) template {
	var t template
	start := 0
	flush := func(end int) {
		if end > start {
			t = append(t, segment{kind: segText, text: s[start:end]})
		}
	}
	n := len(s)
	for i := 0; i < n; {
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			i = skipQuoted(s, i, c)
		case c == '`':
			j := skipQuoted(s, i, c)
			name := s[i+1 : max(i+1, j-1)]
			if strings.HasPrefix(name, "__ks_t") && strings.HasSuffix(name, "__") {
				if k, err := strconv.Atoi(name[6 : len(name)-2]); err == nil {
					flush(i)
					t = append(t, segment{kind: segTable, n: k})
					start = j
				}
			}
			if strings.HasPrefix(name, "__ks_a") && strings.HasSuffix(name, "__") {
				if k, err := strconv.Atoi(name[6 : len(name)-2]); err == nil && k < len(aliases) {
					flush(i)
					t = append(t, segment{kind: segAlias, alias: aliases[k]})
					start = j
				}
			}
			i = j
		case (params || merge) && c >= '0' && c <= '9' && (i == 0 || !isIdent(s[i-1])):
			j := i
			for j < n && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			if j-i == 13 && (j == n || !isIdent(s[j])) {
				v, _ := strconv.ParseInt(s[i:j], 10, 64)
				switch {
				case v == limitMarker && merge:
					flush(i)
					t = append(t, segment{kind: segLimit})
					start = j
				case !params:
				case v == rowsMarker:
					// Restored as (rowsMarker): the parentheses go with it.
					if i > 0 && s[i-1] == '(' && j < n && s[j] == ')' {
						flush(i - 1)
						t = append(t, segment{kind: segRows})
						start = j + 1
					}
				case v >= markerBase && v < markerBase+1_000_000:
					flush(i)
					t = append(t, segment{kind: segParam, n: int(v - markerBase)})
					start = j
				}
			}
			i = j
		case isIdent(c):
			for i < n && isIdent(s[i]) {
				i++
			}
		default:
			i++
		}
	}
	flush(n)
	return t
}

// render appends the template with the given sub-table names, literal
// texts and extra: for INSERT the rendered rows, for a merge the LIMIT.
func (t template) render(b *strings.Builder, tables []string, lits []Literal, extra string) {
	for _, s := range t {
		switch s.kind {
		case segText:
			b.WriteString(s.text)
		case segParam:
			b.WriteString(lits[s.n].Text)
		case segTable:
			b.WriteByte('`')
			b.WriteString(strings.ReplaceAll(tables[s.n], "`", "``"))
			b.WriteByte('`')
		case segRows, segLimit:
			b.WriteString(extra)
		case segAlias:
			var name strings.Builder
			s.alias.render(&name, tables, lits, "")
			b.WriteByte('`')
			b.WriteString(strings.ReplaceAll(name.String(), "`", "``"))
			b.WriteByte('`')
		}
	}
}

// params appends the numbers of the prepared-statement parameters (LitParam
// literals) in the order the rendered text holds them; rows are those of
// the rendered INSERT rows.
func (t template) params(out []int, lits []Literal, rows []int) []int {
	for _, s := range t {
		switch s.kind {
		case segParam:
			if l := &lits[s.n]; l.Kind == LitParam {
				out = append(out, l.Param)
			}
		case segAlias:
			// A name: its parameters are text, not parameters.
		case segRows:
			out = append(out, rows...)
		}
	}
	return out
}

func (t template) size() int {
	n := 0
	for _, s := range t {
		n += len(s.text) + 16
	}
	return n
}

// maxAutoName is the longest select-list text nameFields turns into an
// alias (MariaDB refuses aliases over 256 characters).
const maxAutoName = 200

// nameFields gives each select-list expression without an alias the name
// MariaDB gives it, its text as the client wrote it, as an alias: the
// restored statement spells expressions its own way (COUNT(1) for
// COUNT(*), back-quoted names). The alias is a template: a literal of the
// shape is rendered with each execution's text. Column names, *, literals
// and long expressions keep their own naming. Run before replaceParams.
func nameFields(st *ast.SelectStmt, params bool) []template {
	if st.Fields == nil {
		return nil
	}
	var out []template
	for _, f := range st.Fields.Fields {
		if f.WildCard != nil || f.AsName.L != "" || f.Expr == nil {
			continue
		}
		switch f.Expr.(type) {
		case *ast.ColumnNameExpr, *driver.ValueExpr, *driver.ParamMarkerExpr:
			continue
		}
		text := f.Text()
		if text == "" || len(text) > maxAutoName {
			continue
		}
		var orders []int
		if params {
			v := &paramCollector{}
			f.Expr.Accept(v)
			slices.SortFunc(v.params, func(a, b *driver.ParamMarkerExpr) int { return a.Offset - b.Offset })
			for _, pm := range v.params {
				orders = append(orders, pm.Order)
			}
		}
		name, ok := nameTemplate(text, orders, params)
		if !ok {
			continue
		}
		f.AsName = ast.NewCIStr("__ks_a" + strconv.Itoa(len(out)) + "__")
		out = append(out, name)
	}
	return out
}

// nameTemplate splits a field's text at its parameters (the ? of a shape,
// outside quotes), which must be as many as orders.
func nameTemplate(text string, orders []int, params bool) (template, bool) {
	var t template
	start, k := 0, 0
	for i := 0; i < len(text); {
		switch c := text[i]; {
		case c == '\'' || c == '"' || c == '`':
			i = skipQuoted(text, i, c)
		case c == '?' && params:
			if k >= len(orders) {
				return nil, false
			}
			if i > start {
				t = append(t, segment{kind: segText, text: text[start:i]})
			}
			t = append(t, segment{kind: segParam, n: orders[k]})
			k++
			i++
			start = i
		default:
			i++
		}
	}
	if k != len(orders) {
		return nil, false
	}
	if start < len(text) {
		t = append(t, segment{kind: segText, text: text[start:]})
	}
	return t, true
}
