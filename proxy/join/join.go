// Package join runs the joins across shards that the router plans
// (router.JoinPlan): a nested loop with batched lookups. The outer side's
// rows stream in its own order (merged over its sub-tables when its
// statement needs it, package merge) and are read in batches; for each
// batch the inner side is asked for the rows whose join column is one of
// the batch's values (routed by them), held in a hash table, and matched
// with each outer row of the batch in order. Memory is one batch of outer
// rows and the inner rows they match, at most max_merge_rows (past it, a
// clear error); rows stream to the client as they are joined, and a LIMIT
// stops the reading.
//
// Every statement runs as text; rows for a client of a prepared statement
// are encoded in the binary protocol here. The package declares what it
// needs (Env, Planner) and never imports proxy or proxy/engine.
package join

import (
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/proxy/merge"
	"github.com/keyshard/keyshard/router"
)

// Env is what a join needs of the session's engine.
type Env interface {
	// Query runs a read on node, on a connection of its own, and returns
	// its answer once the column definitions are read.
	Query(node, sql string) (Rows, error)
	// Columns starts the client's result set.
	Columns(defs [][]byte) error
	// Row sends the client one row, encoded for its protocol.
	Row(p []byte) error
	// End ends the client's result set after rows rows.
	End(rows uint64) error
}

// Rows is the answer of one statement.
type Rows interface {
	Defs() [][]byte
	Cols() []merge.Column
	// Next returns the next text-protocol row (valid until the next
	// call), nil after the last.
	Next() ([]byte, error)
	// Close gives the connection back, cancelling what was not read.
	Close()
}

// Planner plans the statements of the sides.
type Planner interface {
	PlanSide(sql string) (*router.Plan, error)
	// Default is the node of the tables that are not sharded.
	Default() string
}

// Config is one execution.
type Config struct {
	Plan    *router.JoinPlan
	Lits    []router.Literal // router.TextLiterals of the statement's
	Binary  bool             // the client reads binary-protocol rows
	MaxRows int              // max_merge_rows
	Batch   int              // outer rows per lookup (0: DefaultBatch)
}

// DefaultBatch is how many outer rows one lookup serves.
const DefaultBatch = 256

// errStop ends the outer side's reading once the LIMIT is met.
var errStop = errors.New("limit reached")

type runner struct {
	env  Env
	pl   Planner
	c    Config
	jp   *router.JoinPlan
	sent uint64
	skip int64
	left int64 // rows still to send; < 0: no limit

	outerCols, innerCols []merge.Column
	outerVis, innerVis   int      // visible columns of each side
	ranges               [][2]int // per client column: its side and column there
	outCols              []merge.Column
	null                 [][]byte  // the inner side's NULL row
	sorted               []sortRow // the joined rows, when the proxy sorts them

	batch [][]byte // outer rows of the batch (copies)
	held  int      // inner rows held
	row   []byte
	vals  [][]byte
}

// Run runs a join and sends its result set.
func Run(env Env, pl Planner, c Config) error {
	if c.Batch <= 0 {
		c.Batch = DefaultBatch
	}
	r := &runner{env: env, pl: pl, c: c, jp: c.Plan}
	off, count, err := c.Plan.Limit(c.Lits)
	if err != nil {
		return notSupported(err.Error())
	}
	r.skip, r.left = off, count
	// The inner side's NULL row: its columns, and what a LEFT JOIN gives
	// an outer row without a match.
	null, err := r.open(r.jp.SideSQL(1, c.Lits), true)
	if err != nil {
		return err
	}
	innerDefs := null.defs
	r.innerCols = null.cols
	var nullRow []byte
	err = null.each(func(row []byte) error {
		if nullRow == nil {
			nullRow = append([]byte(nil), row...)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if r.innerVis = len(r.innerCols) - 2*r.jp.Keys - 2*r.jp.Sides[1].Sorts - r.jp.Sides[1].Filters; r.innerVis < 0 || nullRow == nil {
		return fail("keyshard: cross-shard join %s: the NULL row of %s did not come back", r.jp.Name, r.jp.Sides[1].Table)
	}
	if r.null, err = split(nullRow, len(r.innerCols), nil); err != nil {
		return err
	}
	outer, err := r.open(r.jp.SideSQL(0, c.Lits), false)
	if err != nil {
		return err
	}
	r.outerCols = outer.cols
	if r.outerVis = len(r.outerCols) - 2*r.jp.Keys - 2*r.jp.Sides[0].Sorts; r.outerVis < 0 {
		outer.close()
		return fail("keyshard: cross-shard join %s: %s returned %d columns", r.jp.Name, r.jp.Sides[0].Table, len(r.outerCols))
	}
	for k := range r.jp.Keys {
		if err := r.comparable(k); err != nil {
			outer.close()
			return err
		}
	}
	defs, err := r.layout(outer.defs, innerDefs)
	if err != nil {
		outer.close()
		return err
	}
	if err := env.Columns(defs); err != nil {
		outer.close()
		return err
	}
	if r.sorting() {
		r.skip, r.left = 0, -1 // the sort applies the LIMIT
	}
	if r.left != 0 || r.sorting() {
		err = outer.each(func(row []byte) error {
			r.batch = append(r.batch, append([]byte(nil), row...))
			if len(r.batch) >= r.c.Batch {
				return r.flush()
			}
			return nil
		})
		if err == nil {
			err = r.flush()
		}
	}
	outer.close()
	if err != nil && !errors.Is(err, errStop) {
		return err
	}
	if r.sorting() {
		if err := r.sort(off, count); err != nil {
			return err
		}
	}
	return env.End(r.sent)
}

// layout maps the client's columns to the sides' and returns their
// definitions.
func (r *runner) layout(outerDefs, innerDefs [][]byte) ([][]byte, error) {
	var defs [][]byte
	width := func(s *router.JoinSide, vis int) (int, error) {
		w := 1
		if s.Wild >= 0 {
			w = vis - (s.Items - 1)
		} else if vis != s.Items {
			return 0, fail("keyshard: cross-shard join %s: %s returned %d columns, the join expects %d", r.jp.Name, s.Table, vis, s.Items)
		}
		return w, nil
	}
	var starts [2][]int
	for side, vis := range []int{r.outerVis, r.innerVis} {
		s := &r.jp.Sides[side]
		w, err := width(s, vis)
		if err != nil {
			return nil, err
		}
		at := 0
		for i := range s.Items {
			starts[side] = append(starts[side], at)
			if i == s.Wild {
				at += w
			} else {
				at++
			}
		}
		starts[side] = append(starts[side], at)
	}
	for _, it := range r.jp.Items {
		from, to := starts[it.Side][it.Pos], starts[it.Side][it.Pos+1]
		for c := from; c < to; c++ {
			if it.Side == 0 {
				defs, r.outCols = append(defs, outerDefs[c]), append(r.outCols, r.outerCols[c])
			} else {
				defs, r.outCols = append(defs, innerDefs[c]), append(r.outCols, r.innerCols[c])
			}
			r.ranges = append(r.ranges, [2]int{it.Side, c})
		}
	}
	return defs, nil
}

// flush joins the batch: one lookup of its join values, then each outer
// row in order with its matches.
func (r *runner) flush() error {
	if len(r.batch) == 0 {
		return nil
	}
	defer func() { r.batch = r.batch[:0] }()
	n := len(r.outerCols)
	outer := make([][][]byte, len(r.batch))
	keys := make([]string, len(r.batch))
	var vals []string
	seen := map[string]bool{}
	for i, row := range r.batch {
		cells, err := split(row, n, nil)
		if err != nil {
			return err
		}
		outer[i] = cells
		k, ok := r.key(cells, r.outerVis, r.outerCols)
		if !ok {
			continue
		}
		keys[i] = k
		v := cells[r.outerVis]
		lit := literal(v, r.outerCols[r.outerVis])
		if !seen[lit] {
			seen[lit] = true
			vals = append(vals, lit)
		}
	}
	matches := map[string][][][]byte{}
	if len(vals) > 0 {
		inner, err := r.open(r.jp.LookupSQL(r.c.Lits, vals), false)
		if err != nil {
			return err
		}
		r.held = 0
		err = inner.each(func(row []byte) error {
			if r.held++; r.c.MaxRows > 0 && r.held > r.c.MaxRows {
				return &mysql.MyError{Code: mysql.ER_OUT_OF_SORTMEMORY, State: "HY001", Message: fmt.Sprintf(
					"keyshard: cross-shard join %s: %d rows of %s matched more than max_merge_rows (%d) rows of %s; "+
						"narrow the WHERE, or raise max_merge_rows", r.jp.Name, len(r.batch), r.jp.Sides[0].Table, r.c.MaxRows, r.jp.Sides[1].Table)}
			}
			cells, err := split(append([]byte(nil), row...), len(r.innerCols), nil)
			if err != nil {
				return err
			}
			if k, ok := r.key(cells, r.innerVis, r.innerCols); ok {
				matches[k] = append(matches[k], cells)
			}
			return nil
		})
		inner.close()
		if err != nil {
			return err
		}
	}
	for i, cells := range outer {
		var ms [][][]byte
		if keys[i] != "" {
			ms = matches[keys[i]]
		}
		if len(ms) == 0 && r.jp.Left {
			ms = [][][]byte{r.null}
		}
		for _, m := range ms {
			if !r.pass(m) {
				continue
			}
			if err := r.emit(cells, m); err != nil {
				return err
			}
		}
	}
	return nil
}

// pass reports whether an inner row (or the NULL row) passes the WHERE
// conditions on a LEFT JOIN's right table (their truth is its last
// columns).
func (r *runner) pass(inner [][]byte) bool {
	n := r.jp.Sides[1].Filters
	for _, v := range inner[len(inner)-n:] {
		if string(v) != "1" {
			return false
		}
	}
	return true
}

// emit sends one joined row, after the offset and up to the count (or
// keeps it for the sort).
func (r *runner) emit(outer, inner [][]byte) error {
	if r.skip > 0 {
		r.skip--
		return nil
	}
	r.vals = r.vals[:0]
	for _, rg := range r.ranges {
		if rg[0] == 0 {
			r.vals = append(r.vals, outer[rg[1]])
		} else {
			r.vals = append(r.vals, inner[rg[1]])
		}
	}
	if r.sorting() {
		return r.keep(outer, inner)
	}
	return r.send(r.vals)
}

// send sends the client one row of values.
func (r *runner) send(vals [][]byte) error {
	r.row = r.row[:0]
	if r.c.Binary {
		r.row = merge.AppendBinaryRow(r.row, vals, r.outCols)
	} else {
		for _, v := range vals {
			if v == nil {
				r.row = append(r.row, 0xfb)
				continue
			}
			r.row = mysql.AppendLengthEncodedInteger(r.row, uint64(len(v)))
			r.row = append(r.row, v...)
		}
	}
	if err := r.env.Row(r.row); err != nil {
		return err
	}
	r.sent++
	if r.left > 0 {
		r.left--
		if r.left == 0 {
			return errStop
		}
	}
	return nil
}

// key is the match key of a row's join values (ok false: one is NULL,
// which matches nothing).
func (r *runner) key(cells [][]byte, vis int, cols []merge.Column) (string, bool) {
	var sb strings.Builder
	for k := range r.jp.Keys {
		v, w := cells[vis+2*k], cells[vis+2*k+1]
		if v == nil {
			return "", false
		}
		var part string
		switch classOf(cols[vis+2*k]) {
		case classNumber:
			part = numberKey(v)
		case classString:
			part = string(w)
		case classTemporal:
			part = temporalKey(v)
		default:
			part = string(v)
		}
		fmt.Fprintf(&sb, "%d:%s|", len(part), part)
	}
	return sb.String(), true
}

// comparable checks that join column pair k compares the same way in the
// proxy as on a server.
func (r *runner) comparable(k int) error {
	a, b := r.outerCols[r.outerVis+2*k], r.innerCols[r.innerVis+2*k]
	if ca, cb := classOf(a), classOf(b); ca != cb || ca == classString && a.Charset != b.Charset {
		return notSupported(fmt.Sprintf("keyshard: cross-shard join %s: join columns of different kinds (%s of %s, %s of %s) are not supported; "+
			"join columns of one type and collation", r.jp.Name, className(a), r.jp.Sides[0].Table, className(b), r.jp.Sides[1].Table))
	}
	return nil
}

type class int

const (
	classNumber class = iota
	classString
	classTemporal
	classBytes
	classTime
)

func classOf(c merge.Column) class {
	switch c.Type {
	case wire.TypeTiny, wire.TypeShort, wire.TypeLong, wire.TypeInt24, wire.TypeLongLong, wire.TypeYear,
		wire.TypeDecimal, wire.TypeNewDecimal, wire.TypeFloat, wire.TypeDouble:
		return classNumber
	case wire.TypeDate, wire.TypeNewDate, wire.TypeDatetime, wire.TypeTimestamp:
		return classTemporal
	case wire.TypeTime:
		return classTime
	case wire.TypeVarchar, wire.TypeVarString, wire.TypeString, wire.TypeTinyBlob, wire.TypeMediumBlob,
		wire.TypeLongBlob, wire.TypeBlob, wire.TypeEnum, wire.TypeSet, wire.TypeJSON:
		if c.Charset == 63 {
			return classBytes
		}
		return classString
	}
	return classBytes
}

func className(c merge.Column) string {
	return [...]string{"a number", "a string", "a date", "a binary string", "a time"}[classOf(c)]
}

// numberKey is a number's value as exact text: 5, 5.0 and 5.00 are one.
func numberKey(v []byte) string {
	var x big.Rat
	if _, ok := x.SetString(string(v)); !ok {
		return string(v)
	}
	return x.RatString()
}

// temporalKey is a DATE or DATETIME value as one text: 2020-01-02 is
// 2020-01-02 00:00:00.
func temporalKey(v []byte) string {
	s := string(v)
	if len(s) == 10 {
		s += " 00:00:00"
	}
	if i := strings.IndexByte(s, '.'); i >= 0 {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// literal writes a join value as an SQL literal for the lookup.
func literal(v []byte, c merge.Column) string {
	switch classOf(c) {
	case classNumber:
		return string(v)
	case classBytes:
		return fmt.Sprintf("X'%x'", v)
	}
	return router.QuoteString(string(v))
}

// split cuts a text-protocol row into its values (nil: NULL).
func split(p []byte, n int, out [][]byte) ([][]byte, error) {
	out = out[:0]
	pos := 0
	for range n {
		if pos >= len(p) {
			return nil, fail("keyshard: a join's statement sent a malformed row")
		}
		if p[pos] == 0xfb {
			out = append(out, nil)
			pos++
			continue
		}
		s, _, next, err := wire.ReadLenEncString(p, pos)
		if err != nil {
			return nil, fail("keyshard: a join's statement sent a malformed row")
		}
		if s == nil {
			s = []byte{}
		}
		out = append(out, s)
		pos = next
	}
	return out, nil
}

func fail(format string, args ...any) *mysql.MyError {
	return &mysql.MyError{Code: mysql.ER_UNKNOWN_ERROR, State: mysql.DEFAULT_MYSQL_STATE, Message: fmt.Sprintf(format, args...)}
}

func notSupported(msg string) *mysql.MyError {
	return &mysql.MyError{Code: mysql.ER_NOT_SUPPORTED_YET, State: "42000", Message: msg}
}

// SchemaPlanner plans the sides with a session's schema, parser and
// current database.
type SchemaPlanner struct {
	Schema *router.Schema
	Parser *router.Parser
	DB     string
}

// PlanSide implements Planner.
func (s SchemaPlanner) PlanSide(sql string) (*router.Plan, error) {
	return s.Schema.PlanSide(s.Parser, sql, s.DB)
}

// Default implements Planner.
func (s SchemaPlanner) Default() string { return s.Schema.Default }
