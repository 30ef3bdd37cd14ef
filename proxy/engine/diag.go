package engine

import (
	"errors"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
)

// Diag is the diagnostics area of the session's last statement when no
// one backend connection holds it: a statement over several legs (each
// leg's connection knows its own warnings only, and goes back to its
// pool), or keyshard's own (an admin statement's warnings). SHOW
// WARNINGS, SHOW ERRORS, their COUNT(*) forms and SELECT @@warning_count,
// @@error_count are answered from it (Engine.Diagnostics) while it is on;
// any other statement turns it off (Clear), and they go to a backend
// again.
//
// A leg's conditions are read from its connection with SHOW WARNINGS
// before the connection runs anything else or goes back to its pool, and
// only when its answer reported warnings: a statement without warnings
// costs nothing more.
type Diag struct {
	on     bool
	max    int // max_error_count: the conditions kept (counted beyond it)
	count  int // conditions raised, as warning_count says
	errors int // of which errors, as error_count says
	rows   [][]string
}

// DefaultMaxErrorCount is the server's default max_error_count.
const DefaultMaxErrorCount = 64

// On reports whether the last statement's diagnostics are keyshard's.
func (d *Diag) On() bool { return d.on }

// Clear forgets the last statement's diagnostics: the next SHOW WARNINGS
// goes to a backend.
func (d *Diag) Clear() {
	if d.on {
		*d = Diag{rows: d.rows[:0]}
	}
}

// Start makes the running statement's diagnostics keyshard's, empty, with
// max conditions kept (max_error_count).
func (d *Diag) Start(max int) {
	*d = Diag{on: true, max: max, rows: d.rows[:0]}
}

// Own starts the diagnostics of one of keyshard's own statements: its
// warnings (ER_UNKNOWN_ERROR).
func (d *Diag) Own(warnings []string) {
	d.Start(DefaultMaxErrorCount)
	for _, w := range warnings {
		d.add("Warning", mysql.ER_UNKNOWN_ERROR, w)
	}
}

// add counts one condition and keeps it within max.
func (d *Diag) add(level string, code uint16, msg string) {
	d.count++
	if level == "Error" {
		d.errors++
	}
	if len(d.rows) < d.max {
		d.rows = append(d.rows, []string{level, strconv.Itoa(int(code)), msg})
	}
}

// fail records the error the client got for the statement.
func (d *Diag) fail(e *mysql.MyError) {
	if d.on && e != nil {
		d.add("Error", e.Code, e.Message)
	}
}

// leg adds the conditions of leg l's statements: those SHOW WARNINGS on
// its connection lists for its last statement, and a note of keyshard's
// for the warnings of its earlier statements, which a batch did not keep.
// It runs before the connection does anything else.
// errNoWarnings: a leg's warnings cannot be read (its connection broke,
// or its answer was not read to the end).
var errNoWarnings = errors.New("warnings not readable")

func (d *Diag) leg(l *Leg) {
	last, lost := l.warn, l.lostWarn
	l.warn, l.lostWarn = 0, 0
	var queued *backend.Result
	var qerr error
	if l.warnQueued && !l.BC.Broken() && l.finished {
		queued, qerr = l.queuedWarnings() // read whatever happens: it is on the wire
	}
	if !d.on || last == 0 && lost == 0 {
		return
	}
	if last > 0 {
		r, err := queued, qerr
		switch {
		case l.BC.Broken() || !l.finished:
			r, err = nil, errNoWarnings
		case r == nil && err == nil:
			r, err = l.BC.Exec("SHOW WARNINGS")
		}
		if err != nil {
			lost += last
		} else {
			for _, row := range r.Rows {
				if len(row) == 3 && row[0] != nil && row[1] != nil && row[2] != nil {
					code, _ := strconv.Atoi(*row[1])
					d.add(*row[0], uint16(code), *row[2])
				}
			}
			// The server's count may pass its max_error_count.
			for n := len(r.Rows); n < int(last); n++ {
				d.count++
			}
		}
	}
	if lost > 0 {
		d.add("Warning", mysql.ER_UNKNOWN_ERROR, "keyshard: node "+l.BC.Node()+": "+strconv.Itoa(int(lost))+
			" warnings of earlier statements of its batch ("+strings.Join(l.Route.SubTables, ", ")+") are not kept; "+
			"their statements ran as one batch, whose last statement's warnings alone the server keeps")
		d.count += int(lost) - 1
	}
}

// maxErrorCount is the session's max_error_count.
func maxErrorCount(st *backend.State) int {
	if st != nil {
		if v, ok := st.Get("max_error_count"); ok {
			if n, err := strconv.Atoi(strings.Trim(v, "'")); err == nil && n >= 0 {
				return n
			}
		}
	}
	return DefaultMaxErrorCount
}

// diagStmt is a statement answered from the diagnostics area.
type diagStmt struct {
	count  bool // SHOW COUNT(*) ...
	errors bool // ... ERRORS, not WARNINGS
	offset int
	limit  int      // -1: none
	vars   []string // SELECT @@warning_count, @@error_count: the columns
}

// IsDiagnostics reports whether sql only reads the diagnostics area (SHOW
// WARNINGS, SHOW ERRORS, their COUNT(*) and LIMIT forms, SELECT
// @@warning_count / @@error_count), which keeps it for the next one.
func IsDiagnostics(sql string) bool {
	_, ok := parseDiag(sql)
	return ok
}

// parseDiag parses a statement that reads the diagnostics area.
func parseDiag(sql string) (diagStmt, bool) {
	d := diagStmt{limit: -1}
	if len(sql) > 256 || !hasFold(sql, "warning") && !hasFold(sql, "error") {
		return d, false // most statements: no allocation
	}
	sql = strings.TrimSuffix(strings.TrimSpace(sql), ";")
	f := strings.Fields(strings.ToLower(sql))
	if len(f) < 2 {
		return d, false
	}
	if f[0] == "select" {
		for _, v := range strings.Split(strings.Join(f[1:], ""), ",") {
			name := strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(v, "@@"), "session."), "local.")
			if !strings.HasPrefix(v, "@@") || name != "warning_count" && name != "error_count" {
				return d, false
			}
		}
		// The columns are named as written.
		for _, v := range strings.Split(strings.TrimSpace(sql[len("select"):]), ",") {
			d.vars = append(d.vars, strings.TrimSpace(v))
		}
		return d, true
	}
	if f[0] != "show" {
		return d, false
	}
	f = f[1:]
	if len(f) >= 2 && f[0] == "count(*)" || len(f) >= 4 && f[0] == "count" && f[1] == "(" && f[2] == "*" && f[3] == ")" {
		d.count = true
		f = f[len(f)-1:]
		if f[0] != "warnings" && f[0] != "errors" {
			return d, false
		}
	}
	switch f[0] {
	case "warnings":
	case "errors":
		d.errors = true
	default:
		return d, false
	}
	f = f[1:]
	if len(f) == 0 {
		return d, true
	}
	if d.count || f[0] != "limit" || len(f) < 2 {
		return d, false
	}
	nums := strings.Split(strings.Join(f[1:], ""), ",")
	if len(nums) > 2 {
		return d, false
	}
	var n [2]int
	for i, s := range nums {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			return d, false
		}
		n[i] = v
	}
	if len(nums) == 2 {
		d.offset, d.limit = n[0], n[1]
	} else {
		d.limit = n[0]
	}
	return d, true
}

// Diagnostics answers sql from the diagnostics area if it is on and sql
// reads it (answered false: it is not such a statement).
func (e *Engine) Diagnostics(sql string) (answered bool, err error) {
	d := &e.Diag
	st, ok := parseDiag(sql)
	if !d.on || !ok {
		return false, nil
	}
	status := e.Conns.Status()
	switch {
	case st.vars != nil:
		row := make([]string, len(st.vars))
		for i, v := range st.vars {
			row[i] = strconv.Itoa(d.count)
			if strings.HasSuffix(strings.ToLower(v), "error_count") {
				row[i] = strconv.Itoa(d.errors)
			}
		}
		return true, e.Client.ResultSet(st.vars, [][]string{row}, status)
	case st.count && st.errors:
		return true, e.Client.ResultSet([]string{"@@session.error_count"}, [][]string{{strconv.Itoa(d.errors)}}, status)
	case st.count:
		return true, e.Client.ResultSet([]string{"@@session.warning_count"}, [][]string{{strconv.Itoa(d.count)}}, status)
	}
	rows := d.rows
	if st.errors {
		rows = nil
		for _, r := range d.rows {
			if r[0] == "Error" {
				rows = append(rows, r)
			}
		}
	}
	if st.limit >= 0 {
		rows = rows[min(st.offset, len(rows)):]
		rows = rows[:min(st.limit, len(rows))]
	}
	return true, e.Client.ResultSet([]string{"Level", "Code", "Message"}, rows, status)
}

// hasFold reports whether s contains the lower-case ASCII word sub, in
// any case.
func hasFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i]|0x20 == sub[0] && strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}
