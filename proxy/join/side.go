package join

import (
	"fmt"

	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/proxy/merge"
	"github.com/keyshard/keyshard/router"
)

// stream is one side statement's rows, over the sub-tables it reaches: in
// their order, or merged when the statement needs it (ORDER BY over
// several sub-tables).
type stream struct {
	defs  [][]byte
	cols  []merge.Column
	each  func(out func(row []byte) error) error
	close func()
}

type target struct{ node, sql string }

// open plans a side's statement and opens its answer. first: only the
// first sub-table's (the inner side's NULL row).
func (r *runner) open(sql string, first bool) (*stream, error) {
	p, err := r.pl.PlanSide(sql)
	if err != nil {
		return nil, err
	}
	var targets []target
	var rt *router.Routing
	if p.Kind == router.PlanDefault {
		targets = []target{{r.pl.Default(), sql}}
	} else {
		if rt, err = p.Bind(nil, ""); err != nil {
			return nil, err
		}
		if rt.Join != nil || rt.Merge != "" {
			why := rt.Merge
			if why == "" {
				why = "it is a join itself"
			}
			return nil, notSupported(fmt.Sprintf("keyshard: cross-shard join %s: a side's statement over several sub-tables: %s", r.jp.Name, why))
		}
		for _, rr := range rt.Routes {
			for _, q := range rr.SQL {
				targets = append(targets, target{rr.Node, q})
			}
		}
	}
	if first || len(targets) == 0 {
		targets = targets[:1]
	}
	rename := func(defs [][]byte) [][]byte {
		out := make([][]byte, len(defs))
		for i, d := range defs {
			if n, renamed := wire.RenameColumnTable(nil, d, p.Logical); renamed {
				d = n
			}
			out[i] = d
		}
		return out
	}
	if rt != nil && rt.Spec != nil && !first && len(targets) > 1 {
		return r.merged(rt, targets, rename)
	}
	cur, err := r.env.Query(targets[0].node, targets[0].sql)
	if err != nil {
		return nil, err
	}
	s := &stream{defs: rename(cur.Defs()), cols: cur.Cols()}
	s.close = func() {
		if cur != nil {
			cur.Close()
			cur = nil
		}
	}
	s.each = func(out func([]byte) error) error {
		for i := range targets {
			if i > 0 {
				if cur, err = r.env.Query(targets[i].node, targets[i].sql); err != nil {
					return err
				}
			}
			for {
				row, err := cur.Next()
				if err != nil {
					return err
				}
				if row == nil {
					break
				}
				if err := out(row); err != nil {
					return err
				}
			}
			cur.Close()
			cur = nil
		}
		return nil
	}
	return s, nil
}

// merged opens a statement whose sub-tables' rows the merge puts in
// order.
func (r *runner) merged(rt *router.Routing, targets []target, rename func([][]byte) [][]byte) (*stream, error) {
	var all []Rows
	closeAll := func() {
		for _, x := range all {
			x.Close()
		}
		all = nil
	}
	for _, t := range targets {
		x, err := r.env.Query(t.node, t.sql)
		if err != nil {
			closeAll()
			return nil, err
		}
		all = append(all, x)
	}
	cols := all[0].Cols()
	vis := len(cols) - rt.Spec.Hidden
	if vis < 0 {
		closeAll()
		return nil, fail("keyshard: cross-shard join %s: a side's statement returned %d columns", r.jp.Name, len(cols))
	}
	s := &stream{defs: rename(all[0].Defs()[:vis]), cols: cols[:vis], close: closeAll}
	s.each = func(out func([]byte) error) error {
		m, err := merge.New(merge.Config{Spec: rt.Spec, Offset: rt.Offset, Count: rt.Count, Args: rt.Args, Cols: cols, MaxRows: r.c.MaxRows})
		if err != nil {
			return err
		}
		srcs := make([]merge.Source, len(all))
		for i, x := range all {
			srcs[i] = x
		}
		_, err = m.Run(srcs, out)
		return err
	}
	return s, nil
}
