package join

import (
	"fmt"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/proxy/merge"
	"github.com/keyshard/keyshard/router"
)

// An ORDER BY over keys of both tables (or of a LEFT JOIN's right table)
// is sorted here: the joined rows are kept, each with its keys' values and
// weight strings, up to max_merge_rows, then put in order by package
// merge (one source per row: its heap is the sort, its comparisons the
// merge's, NULLs first and strings by weight), which applies the LIMIT.

// sortRow is a kept row: text-protocol values, then each sort key's value
// and weight.
type sortRow []byte

func (r *runner) sorting() bool { return len(r.jp.Sort) > 0 }

// sortCell is the cell of a sort key's value (weight: +1) in a side's row.
func (r *runner) sortCell(k router.JoinSort) int {
	if k.Side == 0 {
		return r.outerVis + 2*r.jp.Keys + 2*k.Col
	}
	return r.innerVis + 2*r.jp.Keys + 2*k.Col
}

// keep adds the joined row r.vals to the rows to sort.
func (r *runner) keep(outer, inner [][]byte) error {
	if r.c.MaxRows > 0 && len(r.sorted) >= r.c.MaxRows {
		return &mysql.MyError{Code: mysql.ER_OUT_OF_SORTMEMORY, State: "HY001", Message: fmt.Sprintf(
			"keyshard: cross-shard join %s: sorting its rows in the proxy holds more than max_merge_rows (%d) rows; "+
				"order by columns of %s only (then the rows stream), narrow the WHERE, or raise max_merge_rows", r.jp.Name, r.c.MaxRows, r.jp.Sides[0].Table)}
	}
	var row []byte
	add := func(v []byte) {
		if v == nil {
			row = append(row, 0xfb)
			return
		}
		row = mysql.AppendLengthEncodedInteger(row, uint64(len(v)))
		row = append(row, v...)
	}
	for _, v := range r.vals {
		add(v)
	}
	for _, k := range r.jp.Sort {
		cells := outer
		if k.Side == 1 {
			cells = inner
		}
		c := r.sortCell(k)
		add(cells[c])
		add(cells[c+1])
	}
	r.sorted = append(r.sorted, row)
	return nil
}

type oneRow struct{ row []byte }

func (o *oneRow) Next() ([]byte, error) {
	p := o.row
	o.row = nil
	return p, nil
}

// sort sends the kept rows in order, offset and count applied.
func (r *runner) sort(offset, count int64) error {
	spec := &router.MergeSpec{Visible: len(r.outCols), Hidden: 2 * len(r.jp.Sort), Table: r.jp.Name}
	cols := append([]merge.Column(nil), r.outCols...)
	for i, k := range r.jp.Sort {
		side := r.outerCols
		if k.Side == 1 {
			side = r.innerCols
		}
		c := r.sortCell(k)
		cols = append(cols, side[c], side[c+1])
		spec.Sort = append(spec.Sort, router.SortKey{Col: 2 * i, Desc: k.Desc})
	}
	m, err := merge.New(merge.Config{Spec: spec, Offset: offset, Count: count, Cols: cols, MaxRows: r.c.MaxRows})
	if err != nil {
		return err
	}
	srcs := make([]merge.Source, len(r.sorted))
	for i, row := range r.sorted {
		srcs[i] = &oneRow{row}
	}
	r.sorted = nil
	n := len(r.outCols)
	_, err = m.Run(srcs, func(row []byte) error {
		vals, err := split(row, n, r.vals[:0])
		if err != nil {
			return err
		}
		r.vals = vals
		return r.send(vals)
	})
	return err
}
