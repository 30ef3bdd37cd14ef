package router

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// LOAD DATA LOCAL INFILE into a sharded table: keyshard reads the client's
// file itself, line by line, reads each line's shard key and sends the
// line as it is to the sub-table the rule picks, where a LOAD DATA of the
// same format, one per sub-table, reads it. Memory is one line and a
// buffer per sub-table, whatever the file's size.

// LoadFormat is a LOAD DATA statement's FIELDS and LINES clauses.
type LoadFormat struct {
	FieldTerm, Enclosed, Escaped string
	OptEnclosed                  bool
	LineStart, LineTerm          string
}

// Load is a planned LOAD DATA into a sharded table.
type Load struct {
	Table       *TableRule
	Local       bool
	Path        string // the client's file name
	Format      LoadFormat
	IgnoreLines uint64
	// Columns are the listed columns and user variables (user variables
	// with their '@'), lower case; nil: the table's columns in order,
	// which the proxy reads (SetColumns).
	Columns []string
	// Key is the shard key's index among Columns (-1 until known).
	Key int
	// IntKey: the key column is of an integer type (its text is read as
	// the server would, see KeyValue); set by the proxy.
	IntKey bool

	head, tail string // the statement around the table name, for Sub
}

// PlanLoad plans sql, a LOAD DATA statement with current database db:
// nil when its table is not sharded. A LOAD DATA that cannot be split by
// keyshard is an error saying why.
func (s *Schema) PlanLoad(p *Parser, sql, db string) (*Load, error) {
	if len(s.tables) == 0 {
		return nil, nil
	}
	stmts, err := p.Parse(sql)
	if err != nil || len(stmts) != 1 {
		return nil, nil
	}
	ld, ok := stmts[0].(*ast.LoadDataStmt)
	if !ok || ld.Table == nil {
		return nil, nil
	}
	tdb := ld.Table.Schema.O
	if tdb == "" {
		tdb = db
	}
	t := s.Table(tdb, ld.Table.Name.O)
	if t == nil {
		return nil, nil
	}
	if ld.FileLocRef != ast.FileLocClient {
		return nil, errorf("LOAD DATA INFILE into %s reads a file on the server, which keyshard cannot split "+
			"between sub-tables; use LOAD DATA LOCAL INFILE", t.Named())
	}
	l := &Load{Table: t, Local: true, Path: ld.Path, Key: -1,
		Format: LoadFormat{FieldTerm: "\t", Escaped: "\\", LineTerm: "\n"}}
	if f := ld.FieldsInfo; f != nil {
		if f.Terminated != nil {
			l.Format.FieldTerm = *f.Terminated
		}
		if f.Enclosed != nil {
			l.Format.Enclosed = *f.Enclosed
		}
		if f.Escaped != nil {
			l.Format.Escaped = *f.Escaped
		}
		l.Format.OptEnclosed = f.OptEnclosed
		if f.DefinedNullBy != nil {
			return nil, errorf("LOAD DATA into %s: NULL DEFINED BY is not supported", t.Named())
		}
	}
	if li := ld.LinesInfo; li != nil {
		if li.Starting != nil {
			l.Format.LineStart = *li.Starting
		}
		if li.Terminated != nil {
			l.Format.LineTerm = *li.Terminated
		}
	}
	if l.Format.LineTerm == "" || l.Format.FieldTerm == "" && l.Format.Enclosed == "" {
		return nil, errorf("LOAD DATA into %s: fixed-width rows (empty terminators) are not supported", t.Named())
	}
	if l.Format.Escaped != "" && l.Format.Escaped == l.Format.Enclosed {
		return nil, errorf("LOAD DATA into %s: ESCAPED BY the ENCLOSED BY character is not supported; "+
			"ESCAPED BY '' reads doubled quotes", t.Named())
	}
	if ld.IgnoreLines != nil {
		l.IgnoreLines = *ld.IgnoreLines
	}
	for _, c := range ld.ColumnsAndUserVars {
		if c.ColumnName != nil {
			l.Columns = append(l.Columns, strings.ToLower(c.ColumnName.Name.O))
		} else {
			l.Columns = append(l.Columns, "@"+strings.ToLower(c.UserVar.Name))
		}
	}
	for _, a := range ld.ColumnAssignments {
		if !t.Global && strings.EqualFold(a.Column.Name.O, t.Key) {
			return nil, errorf("LOAD DATA into sharded table %s sets its shard key %s with SET: keyshard must read the key "+
				"in the file; list %s among the columns", t.Table, t.Key, t.Key)
		}
	}
	if l.Columns != nil {
		if err := l.SetColumns(l.Columns); err != nil {
			return nil, err
		}
	}
	// The statement each sub-table runs: the client's, with the
	// sub-table's name and without IGNORE n LINES (keyshard skips them).
	ld.IgnoreLines = nil
	ld.Table.Name = ast.NewCIStr("\x00")
	text, err := restoreLoad(ld)
	if err != nil {
		return nil, errorf("cannot rewrite LOAD DATA: %v", err)
	}
	i := strings.Index(text, "`\x00`")
	if i < 0 {
		return nil, errorf("cannot rewrite LOAD DATA")
	}
	l.head, l.tail = text[:i], text[i+3:]
	return l, nil
}

// SetColumns sets the columns the file's fields go to (the table's, in
// order, when the statement lists none) and finds the shard key among
// them.
func (l *Load) SetColumns(cols []string) error {
	l.Columns = cols
	if sq := l.Table.Seq; sq != nil && !slices.Contains(cols, sq.Column) {
		return errorf("LOAD DATA into sharded table %s must read its auto_increment column %s from the file: keyshard gives ids "+
			"from sequence %s to INSERT only, and each sub-table's own AUTO_INCREMENT would repeat ids across sub-tables",
			l.Table.Table, sq.Column, sq.Name)
	}
	if l.Table.Global {
		return nil // every line goes to every copy
	}
	for i, c := range cols {
		if c == l.Table.Key {
			l.Key = i
			return nil
		}
	}
	return errorf("LOAD DATA into sharded table %s must read its shard key %s from the file", l.Table.Table, l.Table.Key)
}

// Sub is the LOAD DATA statement sub-table i runs.
func (l *Load) Sub(i int) string {
	return l.head + quoteIdent(l.Table.SubTableName(i)) + l.tail
}

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// hexString writes s as a hexadecimal literal, which means the same bytes
// whatever the sql_mode (NO_BACKSLASH_ESCAPES) and character set.
func hexString(s string) string { return "X'" + hex.EncodeToString([]byte(s)) + "'" }

// restoreLoad writes a LOAD DATA statement back as SQL, its FIELDS and
// LINES strings as hexadecimal literals (TiDB's own Restore writes them
// raw).
func restoreLoad(ld *ast.LoadDataStmt) (string, error) {
	var b strings.Builder
	// The file name is the backend's request to keyshard, which sends the
	// lines whatever it says.
	b.WriteString("LOAD DATA LOCAL INFILE 'keyshard'")
	switch ld.OnDuplicate {
	case ast.OnDuplicateKeyHandlingReplace:
		b.WriteString(" REPLACE")
	case ast.OnDuplicateKeyHandlingIgnore:
		b.WriteString(" IGNORE")
	}
	b.WriteString(" INTO TABLE ")
	if ld.Table.Schema.O != "" {
		b.WriteString(quoteIdent(ld.Table.Schema.O) + ".")
	}
	b.WriteString(quoteIdent(ld.Table.Name.O))
	if ld.Charset != nil {
		b.WriteString(" CHARACTER SET " + *ld.Charset)
	}
	if f := ld.FieldsInfo; f != nil {
		b.WriteString(" FIELDS")
		if f.Terminated != nil {
			b.WriteString(" TERMINATED BY " + hexString(*f.Terminated))
		}
		if f.Enclosed != nil {
			if f.OptEnclosed {
				b.WriteString(" OPTIONALLY")
			}
			b.WriteString(" ENCLOSED BY " + hexString(*f.Enclosed))
		}
		if f.Escaped != nil {
			b.WriteString(" ESCAPED BY " + hexString(*f.Escaped))
		}
	}
	if li := ld.LinesInfo; li != nil {
		b.WriteString(" LINES")
		if li.Starting != nil {
			b.WriteString(" STARTING BY " + hexString(*li.Starting))
		}
		if li.Terminated != nil {
			b.WriteString(" TERMINATED BY " + hexString(*li.Terminated))
		}
	}
	if len(ld.ColumnsAndUserVars) > 0 {
		b.WriteString(" (")
		for i, c := range ld.ColumnsAndUserVars {
			if i > 0 {
				b.WriteString(", ")
			}
			if c.ColumnName != nil {
				b.WriteString(quoteIdent(c.ColumnName.Name.O))
			} else {
				b.WriteString("@" + quoteIdent(c.UserVar.Name))
			}
		}
		b.WriteString(")")
	}
	if len(ld.ColumnAssignments) > 0 {
		b.WriteString(" SET ")
		for i, a := range ld.ColumnAssignments {
			if i > 0 {
				b.WriteString(", ")
			}
			expr, err := restoreEscaped(a.Expr)
			if err != nil {
				return "", err
			}
			b.WriteString(quoteIdent(a.Column.Name.O) + " = " + expr)
		}
	}
	return b.String(), nil
}

// LoadScanner splits a LOAD DATA file into lines, as the server reads
// them (fields enclosed and escaped by the statement's format), and reads
// one field of each: the shard key. It is fed the file in chunks of any
// size and keeps only the unfinished line (a line is scanned again from
// its start when more of it arrives).
type LoadScanner struct {
	f    LoadFormat
	key  int
	buf  []byte // the unfinished line
	line int    // lines emitted so far
}

// NewLoadScanner reads lines of format f and the field with index key.
func NewLoadScanner(f LoadFormat, key int) *LoadScanner { return &LoadScanner{f: f, key: key} }

// LoadLine is one line of a LOAD DATA file.
type LoadLine struct {
	Raw  []byte // the line with its terminator, as in the file (valid until the next Feed)
	N    int    // its number, from 1
	Key  []byte // the shard key field, unescaped (nil with Null or NoKey)
	Null bool   // the key field is NULL (\N, or NULL unenclosed)
	// NoKey: the line has no shard key field (too few fields).
	NoKey bool
	// Skip: the line lacks the LINES STARTING BY prefix: the server
	// skips it.
	Skip bool
}

// Feed scans chunk, calling emit for each line it completes.
func (s *LoadScanner) Feed(chunk []byte, emit func(l *LoadLine) error) error {
	b := chunk
	if len(s.buf) > 0 {
		s.buf = append(s.buf, chunk...)
		b = s.buf
	}
	start := 0
	for start < len(b) {
		l, n := s.scanLine(b[start:], false)
		if n == 0 {
			break
		}
		if err := emit(l); err != nil {
			return err
		}
		start += n
	}
	rest := b[start:]
	if len(s.buf) > 0 {
		n := copy(s.buf, rest)
		s.buf = s.buf[:n]
	} else {
		s.buf = append(s.buf, rest...)
	}
	return nil
}

// End emits the last line if the file does not end with a terminator.
func (s *LoadScanner) End(emit func(l *LoadLine) error) error {
	if len(s.buf) == 0 {
		return nil
	}
	l, _ := s.scanLine(s.buf, true)
	err := emit(l)
	s.buf = s.buf[:0]
	return err
}

// scanLine reads the line at the start of b: its length n (0: not all of
// it is in b yet, unless atEOF) and what it says.
func (s *LoadScanner) scanLine(b []byte, atEOF bool) (*LoadLine, int) {
	f := &s.f
	lt, ft := []byte(f.LineTerm), []byte(f.FieldTerm)
	done := func(n int, l *LoadLine) (*LoadLine, int) {
		s.line++
		l.N, l.Raw = s.line, b[:n]
		return l, n
	}
	i := 0
	if f.LineStart != "" {
		found := false
		for ; i < len(b); i++ {
			if bytes.HasPrefix(b[i:], []byte(f.LineStart)) {
				i += len(f.LineStart)
				found = true
				break
			}
			if bytes.HasPrefix(b[i:], lt) {
				return done(i+len(lt), &LoadLine{Skip: true}) // no prefix: the server skips the line
			}
		}
		if !found {
			if atEOF {
				return done(len(b), &LoadLine{Skip: true})
			}
			return nil, 0
		}
	}
	field, fieldStart := 0, i
	keyStart, keyEnd, keyEnc, inEnc := -1, -1, false, false
	closeField := func(end int) {
		if field == s.key && keyStart < 0 {
			keyStart, keyEnd = fieldStart, end
		}
	}
	line := func(end, n int) (*LoadLine, int) {
		closeField(end)
		l := &LoadLine{}
		if keyStart < 0 {
			l.NoKey = true
		} else {
			l.Key, l.Null = s.unescape(b[keyStart:keyEnd], keyEnc)
		}
		return done(n, l)
	}
	// cut reports whether b may end inside a terminator at i.
	cut := func(i int) bool {
		rest := b[i:]
		return !atEOF && (len(rest) < len(lt) && bytes.HasPrefix(lt, rest) || len(rest) < len(ft) && bytes.HasPrefix(ft, rest))
	}
	for i < len(b) {
		c := b[i]
		if f.Escaped != "" && c == f.Escaped[0] {
			if i+1 >= len(b) && !atEOF {
				return nil, 0 // the escaped byte is in the next chunk
			}
			i += 2
			continue
		}
		if inEnc {
			if c == f.Enclosed[0] {
				if i+1 >= len(b) && !atEOF || cut(i+1) {
					return nil, 0 // need what follows to tell
				}
				if i+1 < len(b) && b[i+1] == c {
					i += 2 // a doubled quote stands for one
					continue
				}
				// The field ends at a quote followed by a terminator; any
				// other quote is data.
				if i+1 == len(b) || bytes.HasPrefix(b[i+1:], lt) || len(ft) > 0 && bytes.HasPrefix(b[i+1:], ft) {
					inEnc = false
				}
			}
			i++
			continue
		}
		if i == fieldStart && f.Enclosed != "" && c == f.Enclosed[0] {
			inEnc = true
			if field == s.key {
				keyEnc = true
			}
			i++
			continue
		}
		if bytes.HasPrefix(b[i:], lt) {
			return line(i, i+len(lt))
		}
		if len(ft) > 0 && bytes.HasPrefix(b[i:], ft) {
			closeField(i)
			i += len(ft)
			field++
			fieldStart = i
			continue
		}
		if cut(i) {
			return nil, 0
		}
		i++
	}
	if atEOF {
		return line(len(b), len(b))
	}
	return nil, 0
}

// unescape is a field's value as the server reads it.
func (s *LoadScanner) unescape(v []byte, enclosed bool) ([]byte, bool) {
	f := &s.f
	if enclosed && len(v) >= 2 && v[len(v)-1] == f.Enclosed[0] {
		v = v[1 : len(v)-1]
	} else if enclosed && len(v) >= 1 {
		v = v[1:]
	}
	if f.Escaped != "" && len(v) == 2 && v[0] == f.Escaped[0] && v[1] == 'N' {
		return nil, true
	}
	if !enclosed && f.Enclosed != "" && string(v) == "NULL" {
		return nil, true
	}
	hasEsc := f.Escaped != "" && bytes.IndexByte(v, f.Escaped[0]) >= 0
	hasEnc := enclosed && f.Enclosed != "" && bytes.IndexByte(v, f.Enclosed[0]) >= 0
	if !hasEsc && !hasEnc {
		return v, false
	}
	out := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case f.Escaped != "" && c == f.Escaped[0] && i+1 < len(v):
			i++
			switch v[i] {
			case '0':
				out = append(out, 0)
			case 'b':
				out = append(out, '\b')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'Z':
				out = append(out, 0x1a)
			default:
				out = append(out, v[i])
			}
		case enclosed && f.Enclosed != "" && c == f.Enclosed[0] && i+1 < len(v) && v[i+1] == c:
			out = append(out, c)
			i++
		default:
			out = append(out, c)
		}
	}
	return out, false
}

// KeyValue is a shard key field's text as the rule takes it, for a key
// column of integer type (intKey) as the server stores the text: spaces
// around it and what follows the number dropped, a fraction rounded
// ('5\r', ' 5', '5.0' are 5); ok is false when the text holds no number.
// Other keys are the text itself.
func KeyValue(b []byte, intKey bool) (v any, ok bool) {
	if !intKey {
		return string(b), true
	}
	s := strings.TrimLeft(string(b), " \t\r\n")
	end := 0
	if end < len(s) && (s[end] == '-' || s[end] == '+') {
		end++
	}
	digits := end
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	if end == digits {
		return nil, false
	}
	if end < len(s) && s[end] == '.' {
		j := end + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if f, err := strconv.ParseFloat(s[:j], 64); err == nil {
			return int64(math.Round(f)), true // half away from zero, as the server rounds
		}
	}
	if n, err := strconv.ParseInt(s[:end], 10, 64); err == nil {
		return n, true
	}
	if n, err := strconv.ParseUint(strings.TrimPrefix(s[:end], "+"), 10, 64); err == nil {
		return n, true
	}
	return nil, false
}

// Find returns the sub-table of the line whose shard key is v, or an
// error naming the line.
func (l *Load) Find(v any, line int) (int, error) {
	i, err := l.Table.Rule.Find(v)
	if err != nil {
		e := errorf("LOAD DATA into sharded table %s, line %d: shard key %s = %v: %v", l.Table.Table, line, l.Table.Key, v, err)
		if strings.Contains(err.Error(), "out of range") {
			e.Code = erNoPartitionForValue
		}
		return 0, e
	}
	return i, nil
}

// String describes the load for logs.
func (l *Load) String() string {
	return fmt.Sprintf("LOAD DATA LOCAL into %s.%s (%d sub-tables)", l.Table.DB, l.Table.Table, len(l.Table.subNames))
}
