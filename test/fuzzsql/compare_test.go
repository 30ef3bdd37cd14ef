package fuzzsql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/keyshard/keyshard/test/sqldiff"
)

// nullText stands for SQL NULL in fetched rows.
const nullText = sqldiff.Null

// erNotSupportedYet is keyshard's refusal: allowed, counted by reason.
const erNotSupportedYet = 1235

// answer is what one side said to a statement.
type answer struct {
	cols     []string // name and type of each column
	rows     [][]string
	err      error
	affected int64
	lastID   int64
	exec     bool
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// fetch runs a read and reads the whole answer, every value as text.
// prepared runs it as a prepared statement (binary protocol).
func fetch(ctx context.Context, db querier, prepared bool, q string, args ...any) (a answer) {
	var rows *sql.Rows
	if prepared {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			a.err = err
			return a
		}
		defer st.Close()
		rows, a.err = st.QueryContext(ctx, args...)
	} else {
		rows, a.err = db.QueryContext(ctx, q)
	}
	if a.err != nil {
		return a
	}
	defer rows.Close()
	types, err := rows.ColumnTypes()
	if err != nil {
		a.err = err
		return a
	}
	for _, ct := range types {
		a.cols = append(a.cols, ct.Name()+" "+ct.DatabaseTypeName())
	}
	vals := make([]sql.NullString, len(types))
	ptrs := make([]any, len(types))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			a.err = err
			return a
		}
		row := make([]string, len(vals))
		for i, v := range vals {
			row[i] = nullText
			if v.Valid {
				row[i] = v.String
			}
		}
		a.rows = append(a.rows, row)
	}
	a.err = rows.Err()
	return a
}

// execute runs a write and keeps its affected rows and last insert id.
func execute(ctx context.Context, db querier, prepared bool, q string, args ...any) (a answer) {
	a.exec = true
	var res sql.Result
	if prepared {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			a.err = err
			return a
		}
		defer st.Close()
		res, a.err = st.ExecContext(ctx, args...)
	} else {
		res, a.err = db.ExecContext(ctx, q)
	}
	if a.err != nil {
		return a
	}
	a.affected, _ = res.RowsAffected()
	a.lastID, _ = res.LastInsertId()
	return a
}

func errno(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// refusal is keyshard's 1235 and its reason, or "".
func refusal(err error) string {
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != erNotSupportedYet {
		return ""
	}
	return reasonKey(me.Message)
}

var (
	reNumbers = regexp.MustCompile(`\b\d+\b`)
	reQuoted  = regexp.MustCompile("'[^']*'|`[^`]*`")
	reTables  = regexp.MustCompile(`\b(th2|th|tr|tl|tc|td|g|dp)(_\d+)?\b`)
	reNodes   = regexp.MustCompile(`\bnode\d\b`)
)

// reasonKey shortens a refusal's message to a key that counts the same
// reason once: no numbers, table or node names, quoted text; the first
// clause only.
func reasonKey(msg string) string {
	msg = strings.TrimPrefix(msg, "keyshard: ")
	msg = reQuoted.ReplaceAllString(msg, "'?'")
	msg = reTables.ReplaceAllString(msg, "T")
	msg = reNodes.ReplaceAllString(msg, "NODE")
	msg = reNumbers.ReplaceAllString(msg, "N")
	if i := strings.IndexAny(msg, ";("); i > 0 {
		msg = msg[:i]
	}
	msg = strings.TrimSpace(msg)
	if len(msg) > 90 {
		msg = msg[:90]
	}
	return msg
}

// compareRead says why keyshard's answer to a read differs from the
// reference's, or "". full is the reference's answer without the LIMIT
// when s.limit.
func compareRead(s *stmt, ks, ref, full answer) string {
	if ks.err != nil || ref.err != nil {
		if ks.err == nil || ref.err == nil || errno(ks.err) != errno(ref.err) || errno(ks.err) == 0 {
			return "errors differ"
		}
		return ""
	}
	if !slices.Equal(ks.cols, ref.cols) {
		return "columns differ"
	}
	a, b := sqldiff.Normalize(ks.rows, s.fold, s.concat), sqldiff.Normalize(ref.rows, s.fold, s.concat)
	if s.total {
		if !slices.Equal(sqldiff.JoinRows(a), sqldiff.JoinRows(b)) {
			return "rows differ (ordered: the ORDER BY fixes the order)"
		}
		return ""
	}
	if s.keyCols != nil {
		proj := func(rows [][]string) []string {
			out := make([]string, len(rows))
			for i, r := range rows {
				var k []string
				for _, c := range s.keyCols {
					k = append(k, strings.ToLower(r[c]))
				}
				out[i] = strings.Join(k, "\x1f")
			}
			return out
		}
		if !slices.Equal(proj(a), proj(b)) {
			return "ORDER BY key values differ"
		}
	}
	ja, jb := sqldiff.JoinRows(a), sqldiff.JoinRows(b)
	slices.Sort(ja)
	slices.Sort(jb)
	if s.limit {
		if len(a) != len(b) {
			return "row counts differ (LIMIT)"
		}
		if full.err != nil {
			// Without the LIMIT the reference computes rows it skipped
			// (1690 on a group MAX(k)-MIN(k) overflows): the rows
			// cannot be checked against the whole answer, only against
			// the reference's own.
			if slices.Equal(ja, jb) {
				return ""
			}
			return "the reference failed without the LIMIT"
		}
		// Some k rows of the full answer.
		jf := sqldiff.JoinRows(sqldiff.Normalize(full.rows, s.fold, s.concat))
		slices.Sort(jf)
		i := 0
		for _, r := range ja {
			for i < len(jf) && jf[i] < r {
				i++
			}
			if i == len(jf) || jf[i] != r {
				return "a row that is not in the whole answer (LIMIT)"
			}
			i++
		}
		return ""
	}
	if !slices.Equal(ja, jb) {
		return "rows differ (as multisets)"
	}
	return ""
}

// compareWrite says why keyshard's answer to a write differs, or "".
func compareWrite(ks, ref answer) string {
	if ks.err != nil || ref.err != nil {
		if ks.err == nil || ref.err == nil || errno(ks.err) != errno(ref.err) || errno(ks.err) == 0 {
			return "errors differ"
		}
		return ""
	}
	if ks.affected != ref.affected {
		return "affected rows differ"
	}
	if ks.lastID != ref.lastID {
		return "last insert ids differ"
	}
	return ""
}

func (a answer) String() string {
	var b strings.Builder
	if a.err != nil {
		fmt.Fprintf(&b, "error: %v", a.err)
		return b.String()
	}
	if a.exec {
		return fmt.Sprintf("OK, %d rows affected, last insert id %d", a.affected, a.lastID)
	}
	fmt.Fprintf(&b, "columns %q, %d rows", a.cols, len(a.rows))
	for i, r := range a.rows {
		if i == 12 {
			b.WriteString("\n      ...")
			break
		}
		line := strings.ReplaceAll(strings.Join(r, " | "), nullText, "NULL")
		if len(line) > 200 {
			line = line[:200] + "..."
		}
		b.WriteString("\n      " + line)
	}
	return b.String()
}
