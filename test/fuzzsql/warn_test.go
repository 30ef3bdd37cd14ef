package fuzzsql

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"
	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-sql-driver/mysql"
)

// warnPct is the share (percent) of text-protocol statements in autocommit
// whose warnings are compared too: the warning count of the OK or EOF
// packet, and SHOW WARNINGS (a difference there only counted unless
// KS_FUZZSQL_SHOW_WARNINGS is set: see README.md). database/sql does not show warnings, so these
// run on go-mysql connections of their own (ru.wks, ru.wref).
const warnPct = 25

// openWarnConns opens the go-mysql connections checkWarn uses.
func (ru *run) openWarnConns(addr string) {
	var err error
	if ru.wks, err = client.Connect(addr, "ks", "ks", "fz"); err != nil {
		ru.t.Fatalf("keyshard: %v", err)
	}
	if ru.wref, err = client.Connect(fmt.Sprintf("127.0.0.1:%d", refPort), "ks", "ks", "fzref"); err != nil {
		ru.t.Fatalf("reference: %v", err)
	}
	ru.t.Cleanup(func() { ru.wks.Close(); ru.wref.Close() })
}

// warned is what a statement on a go-mysql connection said of warnings.
type warned struct {
	count uint16   // in the OK or EOF packet
	list  []string // SHOW WARNINGS: level, code, message
}

// runWarn runs q on c: a write's answer (affected rows, last insert id, the
// error as go-sql-driver's, so that errno and refusal read it), and its
// warnings. A read's rows are not kept (check compares them).
func runWarn(c *client.Conn, q string) (a answer, w warned) {
	a.exec = true
	r, err := c.Execute(q)
	if err != nil {
		var me *gomysql.MyError
		if errors.As(err, &me) {
			err = &mysql.MySQLError{Number: me.Code, Message: me.Message}
		}
		a.err = err
		return a, w
	}
	defer r.Close()
	a.affected, a.lastID, w.count = int64(r.AffectedRows), int64(r.InsertId), r.Warnings
	sw, err := c.Execute("SHOW WARNINGS")
	if err != nil {
		w.list = []string{"SHOW WARNINGS: " + err.Error()}
		return a, w
	}
	defer sw.Close()
	for i := range sw.RowNumber() {
		var f []string
		for j := range sw.ColumnNumber() {
			v, _ := sw.GetString(i, j)
			f = append(f, v)
		}
		w.list = append(w.list, strings.Join(f, " "))
	}
	return a, w
}

// checkWarn is check in the text protocol on the warning connections, with
// the warnings compared too. A read runs through check first (its rows),
// then again here for its warnings.
func (ru *run) checkWarn(s *stmt) (why string, ks, ref answer) {
	var kw, rw warned
	if s.write {
		ks, kw = runWarn(ru.wks, s.text)
		if refusal(ks.err) != "" {
			return "", ks, ref
		}
		ref, rw = runWarn(ru.wref, s.text)
		if why = compareWrite(ks, ref); why != "" {
			return why, ks, ref
		}
	} else {
		if why, ks, ref = check(ru.ks, ru.ref, s, false); why != "" || refusal(ks.err) != "" {
			return why, ks, ref
		}
		var kerr, rerr answer
		kerr, kw = runWarn(ru.wks, s.text)
		rerr, rw = runWarn(ru.wref, s.text)
		if (kerr.err == nil) != (ks.err == nil) || (rerr.err == nil) != (ref.err == nil) {
			return "the statement answered differently the second time", kerr, rerr
		}
	}
	if ks.err != nil {
		return "", ks, ref
	}
	if kw.count != rw.count {
		if n := uint16(countPrefix(rw.list, "Warning 1526 ")); n > 0 && rw.count-kw.count == n && strings.HasPrefix(s.text, "INSERT IGNORE") {
			// Known (README.md): keyshard leaves out the rows of an
			// INSERT IGNORE that no sub-table holds without MariaDB's
			// warning for each. Counted, not failed.
			ru.warnIgnore1526++
			return "", ks, ref
		}
		return fmt.Sprintf("warning counts differ: reference %d %q, keyshard %d %q", rw.count, rw.list, kw.count, kw.list), ks, ref
	}
	a, b := slices.Clone(kw.list), slices.Clone(rw.list)
	slices.Sort(a)
	slices.Sort(b)
	if !slices.Equal(a, b) {
		legs := ru.legs(s.text)
		if os.Getenv("KS_FUZZSQL_SHOW_WARNINGS") == "" {
			// Known (README.md): SHOW WARNINGS after a routed statement
			// reads a pooled connection of the default node, not the
			// statement's. Counted, not failed, until that is fixed.
			if legs == 1 {
				ru.showWarnOne++
			} else {
				ru.showWarnMulti++
			}
			return "", ks, ref
		}
		return fmt.Sprintf("SHOW WARNINGS differs (%d sub-tables): reference %q, keyshard %q", legs, rw.list, kw.list), ks, ref
	}
	return "", ks, ref
}

// legs is how many sub-tables keyshard runs q on (EXPLAIN SHARD), -1 when
// it cannot say.
func (ru *run) legs(q string) int {
	r, err := ru.wks.Execute("EXPLAIN SHARD " + q)
	if err != nil {
		return -1
	}
	defer r.Close()
	return r.RowNumber()
}

// countPrefix counts the lines of list that begin with prefix.
func countPrefix(list []string, prefix string) int {
	n := 0
	for _, l := range list {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}
