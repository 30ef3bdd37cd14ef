package merge

import (
	"bytes"
	"math/big"
	"slices"
	"strconv"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/router"
)

// groupConcatMax is MariaDB's default group_concat_max_len.
const groupConcatMax = 1 << 20

// group is the group being combined in grouped mode.
type group struct {
	have   bool
	first  []byte // copy of the group's first row
	cells  []cell // its cells
	prev   []byte // copy of the previous row (DISTINCT arguments)
	pcell  []cell
	acc    []acc
	vals   []value // the aggregates' final values, by finish
	none   []cell  // all-NULL cells, for an empty result
	starts []int   // scratch for splitting copied binary rows
}

// acc accumulates one aggregate over a group.
type acc struct {
	count int64
	sum   value
	best  []byte // MIN/MAX: the best cell so far (copied) and its weight
	bestW []byte
	bestN bool // no best yet (or all NULL)
	cat   []byte
	catOK bool
}

// finalRow is a group buffered for a re-sort: the row for the client and
// its sort key values.
type finalRow struct {
	row  []byte
	keys []value
	err  error // the row's overflow (rangeErr): an error once sent, as from one server
}

// emitStripped sends source i's current row without the hidden columns.
func (m *Merger) emitStripped(i int) error {
	row := m.rows[i]
	if m.Spec.Hidden == 0 {
		return m.send(row)
	}
	if !m.Binary {
		// The visible columns are a prefix of the text row: cut at the
		// first hidden cell.
		end := 0
		for j := range m.visible {
			c := m.cells[i][j]
			if c.null {
				end++
				continue
			}
			_, _, next, _ := wire.ReadLenEncString(row, end)
			end = next
		}
		return m.send(row[:end])
	}
	// Binary: a NULL bitmap for the visible columns, then their values.
	nb := (m.visible + 7 + 2) / 8
	b := append(m.buf[:0], 0)
	b = append(b, make([]byte, nb)...)
	for j := range m.visible {
		if m.cells[i][j].null {
			bit := j + 2
			b[1+bit/8] |= 1 << (bit % 8)
		}
	}
	oldNB := (len(m.Cols) + 7 + 2) / 8
	b = append(b, row[1+oldNB:m.starts[i][m.visible]]...)
	m.buf = b
	return m.send(b)
}

func (m *Merger) send(row []byte) error {
	m.sent++
	if m.left > 0 {
		m.left--
	}
	return m.out(row)
}

// runGrouped combines the rows of each group (adjacent in the merged
// order) and sends the groups.
func (m *Merger) runGrouped() (bool, error) {
	sp := m.Spec
	g := &m.g
	g.acc = make([]acc, len(sp.Aggs))
	g.vals = make([]value, len(sp.Aggs))
	g.cells = make([]cell, len(m.Cols))
	g.pcell = make([]cell, len(m.Cols))
	groupKeys := m.keys[:sp.GroupKeys]
	distinct := m.keys[sp.GroupKeys : sp.GroupKeys+sp.DistinctArgs]
	for len(m.heap) > 0 {
		i := m.heap[0]
		cells := m.cells[i]
		newGroup := !g.have || m.compareKeys(groupKeys, g.cells, cells) != 0
		if newGroup {
			if g.have {
				stop, err := m.finishGroup(false)
				if err != nil || stop {
					return false, err
				}
			}
			m.startGroup(i)
		}
		newTuple := newGroup || m.compareKeys(distinct, g.pcell, cells) != 0
		if err := m.accumulate(cells, newTuple); err != nil {
			return false, err
		}
		if len(distinct) > 0 {
			g.prev = append(g.prev[:0], m.rows[i]...)
			m.resplit(g.prev, g.pcell)
		}
		if err := m.next(i); err != nil {
			return false, err
		}
	}
	if g.have {
		if stop, err := m.finishGroup(false); err != nil || stop {
			return false, err
		}
	} else if sp.GroupKeys == 0 {
		// Aggregates over no rows at all: one row (COUNT 0, SUM NULL...).
		g.none = make([]cell, len(m.Cols))
		for j := range g.none {
			g.none[j] = cell{null: true}
		}
		copy(g.cells, g.none)
		for j := range g.acc {
			g.acc[j] = acc{bestN: true}
		}
		if _, err := m.finishGroup(true); err != nil {
			return false, err
		}
	}
	return true, m.flushFinal()
}

// startGroup makes source i's current row the first of a new group.
func (m *Merger) startGroup(i int) {
	g := &m.g
	g.have = true
	g.first = append(g.first[:0], m.rows[i]...)
	m.resplit(g.first, g.cells)
	for j := range g.acc {
		g.acc[j] = acc{bestN: true, best: g.acc[j].best[:0], bestW: g.acc[j].bestW[:0], cat: g.acc[j].cat[:0]}
	}
}

// resplit splits a copied row again (its cells then point into the copy).
func (m *Merger) resplit(row []byte, out []cell) {
	if m.Binary {
		if len(m.g.starts) != len(m.Cols)+1 {
			m.g.starts = make([]int, len(m.Cols)+1)
		}
		_ = splitBinary(row, m.Cols, out, m.g.starts)
		return
	}
	_ = splitText(row, out)
}

// accumulate adds a row's partial aggregates; newTuple: its DISTINCT
// arguments differ from the previous row's.
func (m *Merger) accumulate(cells []cell, newTuple bool) error {
	sp := m.Spec
	g := &m.g
	for j, a := range sp.Aggs {
		ac := &g.acc[j]
		col := m.visible + a.A
		switch a.Kind {
		case router.AggCount:
			v := decode(cells[col], m.Cols[col], m.Binary, cell{null: true})
			if v.k == kDec {
				ac.count += v.n.Int64()
			}
		case router.AggSum:
			ac.sum = addSum(ac.sum, decode(cells[col], m.Cols[col], m.Binary, cell{null: true}))
		case router.AggAvg:
			ac.sum = addSum(ac.sum, decode(cells[col], m.Cols[col], m.Binary, cell{null: true}))
			colB := m.visible + a.B
			if v := decode(cells[colB], m.Cols[colB], m.Binary, cell{null: true}); v.k == kDec {
				ac.count += v.n.Int64()
			}
		case router.AggMin, router.AggMax:
			c := cells[col]
			if c.null {
				continue
			}
			better := ac.bestN
			if !better {
				k := &m.aggCmp[j]
				r := k.compareCells(c, cell{b: ac.best}, cells[col+1], cell{b: ac.bestW})
				better = (a.Kind == router.AggMin && r < 0) || (a.Kind == router.AggMax && r > 0)
			}
			if better {
				ac.best = append(ac.best[:0], c.b...)
				ac.bestW = append(ac.bestW[:0], cells[col+1].b...)
				ac.bestN = false
			}
		case router.AggCountDistinct:
			if newTuple && m.distinctNotNull(cells) {
				ac.count++
			}
		case router.AggSumDistinct, router.AggAvgDistinct:
			if newTuple {
				v := decode(cells[col], m.Cols[col], m.Binary, cell{null: true})
				if v.k != kNull {
					ac.sum = addSum(ac.sum, v)
					ac.count++
				}
			}
		case router.AggGroupConcat:
			c := cells[col]
			if c.null {
				continue
			}
			if ac.catOK {
				ac.cat = append(ac.cat, m.separator(a)...)
			}
			ac.cat = append(ac.cat, c.b...)
			ac.catOK = true
			if len(ac.cat) > groupConcatMax {
				ac.cat = ac.cat[:groupConcatMax]
			}
		}
	}
	return nil
}

func (m *Merger) separator(a router.Agg) []byte {
	if a.Sep == nil {
		return []byte(",")
	}
	v := m.eval(a.Sep)
	if v.k == kStr {
		return v.s
	}
	return []byte(decTextOrFloat(v))
}

func decTextOrFloat(v value) string {
	switch v.k {
	case kDec:
		return decText(v)
	case kFloat:
		return floatText(v.f, 64)
	}
	return string(v.s)
}

func (m *Merger) distinctNotNull(cells []cell) bool {
	sp := m.Spec
	for _, k := range m.keys[sp.GroupKeys : sp.GroupKeys+sp.DistinctArgs] {
		if cells[k.col].null {
			return false
		}
	}
	return true
}

// addSum adds a partial sum (NULL partials are skipped; all NULL: NULL).
func addSum(sum, v value) value {
	if v.k == kNull {
		return sum
	}
	if sum.k == kNull {
		if v.k == kDec {
			return value{k: kDec, n: new(big.Int).Set(v.n), scale: v.scale}
		}
		return toNum(v)
	}
	return arith(router.ExprAdd, sum, v)
}

// finishGroup computes the group's row: HAVING, then sent (streaming)
// or buffered for the re-sort. stop: the LIMIT is satisfied.
func (m *Merger) finishGroup(empty bool) (stop bool, err error) {
	sp := m.Spec
	g := &m.g
	for j, a := range sp.Aggs {
		ac := &g.acc[j]
		var v value
		switch a.Kind {
		case router.AggCount, router.AggCountDistinct:
			v = decInt(ac.count)
		case router.AggSum, router.AggSumDistinct:
			v = ac.sum
		case router.AggAvg, router.AggAvgDistinct:
			if ac.count > 0 && ac.sum.k != kNull {
				v = arith(router.ExprDiv, ac.sum, decInt(ac.count))
				if v.k == kDec && ac.sum.k == kDec && sp.GroupKeys > 0 && sp.DistinctArgs == 0 {
					// MariaDB keeps a GROUP BY's AVG in a temporary table
					// at its column's scale (the sum's plus
					// div_precision_increment), so expressions see it
					// rounded; without GROUP BY, or grouping by sorting
					// for a DISTINCT aggregate, they see all its digits.
					v = round(v, ac.sum.scale+divPrecision)
				}
			}
		case router.AggMin, router.AggMax:
			if !ac.bestN {
				col := m.visible + a.A
				v = decode(cell{b: ac.best}, m.Cols[col], m.Binary, cell{b: ac.bestW})
			}
		case router.AggGroupConcat:
			if ac.catOK {
				v = value{k: kStr, s: ac.cat}
			}
		}
		g.vals[j] = v
	}
	if sp.Having != nil {
		if err := m.overflow(sp.Having); err != nil {
			return false, err
		}
		ok, isNull := truth(m.eval(sp.Having))
		if !ok || isNull {
			return false, nil
		}
	}
	if sp.Final == nil {
		if m.skip > 0 {
			m.skip--
			return false, nil
		}
		row, err := m.groupRow()
		if err != nil {
			return false, err
		}
		if err := m.send(row); err != nil {
			return false, err
		}
		return m.left == 0, nil
	}
	if len(m.final) >= m.MaxRows {
		return false, &mysql.MyError{Code: mysql.ER_OUT_OF_SORTMEMORY, State: "HY001", Message: "keyshard: merging sharded table " +
			m.Spec.Table + " needs more than max_merge_rows (" + strconv.Itoa(m.MaxRows) + ") groups in memory to sort them by the ORDER BY; " +
			"order by the GROUP BY columns, add a LIMIT-friendly filter, or raise max_merge_rows"}
	}
	row, rowErr := m.groupRow()
	keys := make([]value, len(sp.Final))
	for j, f := range sp.Final {
		if err := m.overflow(f.E); err != nil {
			return false, err
		}
		keys[j] = cloneValue(m.sortKey(f.E))
	}
	m.final = append(m.final, finalRow{row: bytes.Clone(row), keys: keys, err: rowErr})
	return false, nil
}

// cloneValue copies the bytes a value points into (a row buffer).
func cloneValue(v value) value {
	v.s = bytes.Clone(v.s)
	v.w = bytes.Clone(v.w)
	return v
}

// groupRow builds the client's row for the current group, and the error
// one server gives for it when a computed integer column is out of range
// (rangeErr).
func (m *Merger) groupRow() ([]byte, error) {
	sp := m.Spec
	g := &m.g
	b := m.buf[:0]
	nb := 0
	var rowErr error
	if m.Binary {
		nb = (m.visible + 7 + 2) / 8
		b = append(b, 0)
		b = append(b, make([]byte, nb)...)
	}
	for j := range m.visible {
		col := m.Cols[j]
		var isNull bool
		f := sp.Fields[j]
		switch {
		case f == nil:
			c := g.cells[j]
			isNull = c.null
			if !m.Binary || !c.null {
				b = appendCell(b, c, col, m.Binary)
			}
		case f.Op == router.ExprAgg && (sp.Aggs[f.Agg].Kind == router.AggMin || sp.Aggs[f.Agg].Kind == router.AggMax):
			// The best cell as the sub-table sent it.
			ac := &g.acc[f.Agg]
			isNull = ac.bestN
			if !m.Binary || !isNull {
				b = appendCell(b, cell{b: ac.best, null: isNull}, col, m.Binary)
			}
		default:
			var ok bool
			v := m.eval(f)
			if rowErr == nil {
				rowErr = m.overflow(f)
			}
			if rowErr == nil {
				rowErr = rangeErr(v, col, f)
			}
			b, ok = encode(b, v, col, m.Binary)
			isNull = !ok
		}
		if isNull && m.Binary {
			bit := j + 2
			b[1+bit/8] |= 1 << (bit % 8)
		}
	}
	m.buf = b
	return b, rowErr
}

// flushFinal sorts the buffered groups and sends them.
func (m *Merger) flushFinal() error {
	sp := m.Spec
	if sp.Final == nil {
		return nil
	}
	slices.SortStableFunc(m.final, func(a, b finalRow) int {
		for j, f := range sp.Final {
			c := compareNullFirst(a.keys[j], b.keys[j])
			if f.Desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return 0
	})
	for _, r := range m.final {
		if m.skip > 0 {
			m.skip--
			continue
		}
		if m.left == 0 {
			break
		}
		if r.err != nil {
			return r.err
		}
		if err := m.send(r.row); err != nil {
			return err
		}
	}
	m.final = nil
	return nil
}

func compareNullFirst(a, b value) int {
	switch {
	case a.k == kNull && b.k == kNull:
		return 0
	case a.k == kNull:
		return -1
	case b.k == kNull:
		return 1
	}
	return compare(a, b)
}

// eval evaluates a merge expression over the current group.
func (m *Merger) eval(e *router.Expr) value {
	g := &m.g
	switch e.Op {
	case router.ExprCol:
		col := m.visible + e.Col
		return decode(g.cells[col], m.Cols[col], m.Binary, g.cells[col+1])
	case router.ExprAgg:
		return g.vals[e.Agg]
	case router.ExprLit:
		if e.Lit < len(m.Args) {
			return fromAny(m.Args[e.Lit])
		}
		return null
	case router.ExprConst:
		return fromAny(e.Val)
	case router.ExprNeg:
		return neg(m.eval(e.Args[0]))
	case router.ExprNot:
		t, isNull := truth(m.eval(e.Args[0]))
		if isNull {
			return null
		}
		return boolean(!t)
	case router.ExprAdd, router.ExprSub, router.ExprMul, router.ExprDiv, router.ExprIntDiv, router.ExprMod:
		return arith(e.Op, m.eval(e.Args[0]), m.eval(e.Args[1]))
	case router.ExprEQ, router.ExprNE, router.ExprLT, router.ExprLE, router.ExprGT, router.ExprGE, router.ExprNullEQ:
		a, b := m.eval(e.Args[0]), m.eval(e.Args[1])
		if e.Op == router.ExprNullEQ {
			if a.k == kNull || b.k == kNull {
				return boolean(a.k == kNull && b.k == kNull)
			}
			return boolean(compare(a, b) == 0)
		}
		if a.k == kNull || b.k == kNull {
			return null
		}
		c := compare(a, b)
		switch e.Op {
		case router.ExprEQ:
			return boolean(c == 0)
		case router.ExprNE:
			return boolean(c != 0)
		case router.ExprLT:
			return boolean(c < 0)
		case router.ExprLE:
			return boolean(c <= 0)
		case router.ExprGT:
			return boolean(c > 0)
		}
		return boolean(c >= 0)
	case router.ExprAnd, router.ExprOr, router.ExprXor:
		a, an := truth(m.eval(e.Args[0]))
		b, bn := truth(m.eval(e.Args[1]))
		switch e.Op {
		case router.ExprAnd:
			if (!an && !a) || (!bn && !b) {
				return boolean(false)
			}
			if an || bn {
				return null
			}
			return boolean(true)
		case router.ExprOr:
			if (!an && a) || (!bn && b) {
				return boolean(true)
			}
			if an || bn {
				return null
			}
			return boolean(false)
		}
		if an || bn {
			return null
		}
		return boolean(a != b)
	case router.ExprIsNull:
		return boolean(m.eval(e.Args[0]).k == kNull)
	case router.ExprIsNotNull:
		return boolean(m.eval(e.Args[0]).k != kNull)
	case router.ExprCoalesce:
		for _, a := range e.Args {
			if v := m.eval(a); v.k != kNull {
				return v
			}
		}
		return null
	case router.ExprIf:
		if t, isNull := truth(m.eval(e.Args[0])); t && !isNull {
			return m.eval(e.Args[1])
		}
		return m.eval(e.Args[2])
	case router.ExprIn, router.ExprNotIn:
		a := m.eval(e.Args[0])
		if a.k == kNull {
			return null
		}
		sawNull := false
		for _, x := range e.Args[1:] {
			v := m.eval(x)
			if v.k == kNull {
				sawNull = true
				continue
			}
			if compare(a, v) == 0 {
				return boolean(e.Op == router.ExprIn)
			}
		}
		if sawNull {
			return null
		}
		return boolean(e.Op == router.ExprNotIn)
	}
	return null
}
