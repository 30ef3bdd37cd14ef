package reshard

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/binlog"
)

// Execer runs a statement on a node and reads its whole answer
// (*backend.Conn).
type Execer = binlog.Execer

// TableDef is what the workflow needs of a source sub-table's
// definition: its columns in order, which are numbers (written as they
// are, not quoted), its primary key (copied in its order, rows found by
// it) and the shard key's column.
type TableDef struct {
	Columns []string
	Types   []string // information_schema DATA_TYPE, lower case
	PK      []int    // indexes into Columns
	Key     int      // index of the shard key column
	Create  string   // SHOW CREATE TABLE
}

// ReadDef reads the definition of db.name on c and finds key in it.
func ReadDef(c Execer, db, name, key string) (*TableDef, error) {
	res, err := c.Exec("SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = " +
		quote(db) + " AND TABLE_NAME = " + quote(name) + " ORDER BY ORDINAL_POSITION")
	if err != nil {
		return nil, err
	}
	if len(res.Rows) == 0 {
		return nil, fmt.Errorf("table %s.%s does not exist", db, name)
	}
	d := &TableDef{Key: -1}
	for _, r := range res.Rows {
		d.Columns = append(d.Columns, str(r[0]))
		d.Types = append(d.Types, strings.ToLower(str(r[1])))
		if strings.EqualFold(str(r[0]), key) {
			d.Key = len(d.Columns) - 1
		}
	}
	if d.Key < 0 {
		return nil, fmt.Errorf("table %s.%s has no column %s (its shard key)", db, name, key)
	}
	res, err = c.Exec("SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = " + quote(db) +
		" AND TABLE_NAME = " + quote(name) + " AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX")
	if err != nil {
		return nil, err
	}
	for _, r := range res.Rows {
		for i, col := range d.Columns {
			if strings.EqualFold(col, str(r[0])) {
				d.PK = append(d.PK, i)
			}
		}
	}
	if len(d.PK) == 0 {
		return nil, fmt.Errorf("table %s.%s has no primary key: its rows cannot be copied in order and found again; add one first", db, name)
	}
	res, err = c.Exec("SHOW CREATE TABLE " + backend.QuoteName(db) + "." + backend.QuoteName(name))
	if err != nil {
		return nil, err
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) < 2 {
		return nil, fmt.Errorf("SHOW CREATE TABLE %s.%s: unexpected answer", db, name)
	}
	d.Create = str(res.Rows[0][1])
	return d, nil
}

// CreateAs is d's CREATE TABLE statement for a table named db.name.
func (d *TableDef) CreateAs(db, name string) (string, error) {
	rest, ok := strings.CutPrefix(d.Create, "CREATE TABLE ")
	if !ok {
		return "", fmt.Errorf("unexpected SHOW CREATE TABLE: %.40q", d.Create)
	}
	// The old name is the first quoted identifier.
	if !strings.HasPrefix(rest, "`") {
		return "", fmt.Errorf("unexpected SHOW CREATE TABLE: %.40q", d.Create)
	}
	end := 1
	for end < len(rest) {
		if rest[end] == '`' {
			if end+1 < len(rest) && rest[end+1] == '`' {
				end += 2
				continue
			}
			break
		}
		end++
	}
	return "CREATE TABLE " + backend.QuoteName(db) + "." + backend.QuoteName(name) + rest[end+1:], nil
}

func (d *TableDef) numeric(i int) bool {
	switch d.Types[i] {
	case "tinyint", "smallint", "mediumint", "int", "bigint", "decimal", "float", "double", "year":
		return true
	}
	return false
}

// selectList reads every column for copying: FLOAT widened to DOUBLE so
// that its text keeps every bit.
func (d *TableDef) selectList() string {
	var b strings.Builder
	for i, c := range d.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		if d.Types[i] == "float" {
			b.WriteString("CAST(" + backend.QuoteName(c) + " AS DOUBLE)")
			continue
		}
		b.WriteString(backend.QuoteName(c))
	}
	return b.String()
}

func (d *TableDef) pkList() string {
	var parts []string
	for _, i := range d.PK {
		parts = append(parts, backend.QuoteName(d.Columns[i]))
	}
	return strings.Join(parts, ", ")
}

// after is the WHERE clause of the rows after primary key last ("" when
// last is nil: from the first).
func (d *TableDef) after(last []any) string {
	if last == nil {
		return ""
	}
	return " WHERE " + d.pkCompare(last, ">")
}

// pkCompare is "primary key op pk" (op > or <=) spelled out column by
// column (a > x OR a = x AND b > y), which MariaDB reads as a range on the
// primary key; the row-constructor form (a, b) > (x, y) scans the index
// from its start.
func (d *TableDef) pkCompare(pk []any, op string) string {
	var b strings.Builder
	for n := range d.PK {
		if n > 0 {
			b.WriteString(" OR ")
		}
		b.WriteByte('(')
		for m := 0; m < n; m++ {
			i := d.PK[m]
			b.WriteString(backend.QuoteName(d.Columns[i]) + " = ")
			d.literal(&b, i, pk[m])
			b.WriteString(" AND ")
		}
		i := d.PK[n]
		cmp := op
		if op == "<=" && n < len(d.PK)-1 {
			cmp = "<"
		}
		b.WriteString(backend.QuoteName(d.Columns[i]) + " " + cmp + " ")
		d.literal(&b, i, pk[n])
		b.WriteByte(')')
	}
	return b.String()
}

// values writes a primary key's values as a SQL list.
func (d *TableDef) values(pk []any) string {
	var b strings.Builder
	for n, i := range d.PK {
		if n > 0 {
			b.WriteString(", ")
		}
		d.literal(&b, i, pk[n])
	}
	return b.String()
}

// pkString is a primary key for messages.
func (d *TableDef) pkString(pk []any) string {
	if pk == nil {
		return ""
	}
	return d.values(pk)
}

// pkText is a text row's primary key for messages and as a map key.
func (d *TableDef) pkText(r []*string) string {
	var parts []string
	for _, i := range d.PK {
		parts = append(parts, d.Columns[i]+"="+show(r[i]))
	}
	return strings.Join(parts, ",")
}

// rowText is a text row for comparing and messages.
func (d *TableDef) rowText(r []*string) string {
	var parts []string
	for _, v := range r {
		parts = append(parts, show(v))
	}
	return strings.Join(parts, ", ")
}

func show(p *string) string {
	if p == nil {
		return "NULL"
	}
	return strconv.Quote(*p)
}

// keyValue is the shard-key value of a row as the router reads a
// literal: integers as int64 (uint64 past its range), the rest as text.
func (d *TableDef) keyValue(v any) any {
	switch x := v.(type) {
	case nil, int64, uint64:
		return x
	case int32:
		return int64(x)
	case int16:
		return int64(x)
	case int8:
		return int64(x)
	case int:
		return int64(x)
	case uint32:
		return int64(x)
	case uint16:
		return int64(x)
	case uint8:
		return int64(x)
	case []byte:
		return d.textKey(string(x))
	case string:
		return d.textKey(x)
	}
	return fmt.Sprint(v)
}

func (d *TableDef) textKey(s string) any {
	switch d.Types[d.Key] {
	case "tinyint", "smallint", "mediumint", "int", "bigint", "year":
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n
		}
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			return n
		}
	}
	return s
}

// literal writes v, a value of column i (from a copied row's text or a
// binlog change), as SQL on a connection with SET NAMES binary and no
// NO_BACKSLASH_ESCAPES.
func (d *TableDef) literal(b *strings.Builder, i int, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("NULL")
	case *string:
		if x == nil {
			b.WriteString("NULL")
			return
		}
		d.text(b, i, *x)
	case string:
		d.text(b, i, x)
	case []byte:
		d.text(b, i, string(x))
	case float32:
		b.WriteString(strconv.FormatFloat(float64(x), 'g', -1, 32))
	case float64:
		b.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
	default:
		fmt.Fprint(b, x)
	}
}

func (d *TableDef) text(b *strings.Builder, i int, s string) {
	if d.numeric(i) && s != "" {
		b.WriteString(s)
		return
	}
	b.WriteByte('\'')
	for j := 0; j < len(s); j++ {
		switch c := s[j]; c {
		case 0:
			b.WriteString(`\0`)
		case '\'':
			b.WriteString(`\'`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case 0x1a:
			b.WriteString(`\Z`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
}

func quote(s string) string {
	var b strings.Builder
	(&TableDef{Types: []string{""}}).text(&b, 0, s)
	return b.String()
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
