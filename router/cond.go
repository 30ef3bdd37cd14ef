package router

import (
	"errors"
	"slices"
	"strconv"

	"github.com/keyshard/keyshard/router/shard"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	driver "github.com/pingcap/tidb/pkg/parser/test_driver"
)

// cond is what a WHERE clause says about the shard key, kept symbolic so a
// cached plan can be evaluated against each query's literals. A nil *cond
// means "any sub-table".
type cond struct {
	op     condOp
	kids   []*cond
	vals   []operand // condEq: key = any of these
	lo, hi *operand  // condRange: nil end = unbounded
	loInc  bool
	hiInc  bool
}

type condOp uint8

const (
	condAnd condOp = iota + 1
	condOr
	condEq
	condRange
)

// operand is a value in a condition: a parameter of the shape (index into
// the literals), or a constant from a statement parsed as written.
type operand struct {
	param int // -1: konst
	neg   bool
	konst any
}

func (o operand) value(lits []Literal) any {
	v := o.konst
	if o.param >= 0 {
		v = lits[o.param].Value()
	}
	if o.neg {
		switch x := v.(type) {
		case int64:
			return -x
		case uint64:
			if x <= 1<<63 {
				return -int64(x)
			}
			return -float64(x)
		case float64:
			return -x
		case string:
			if f, err := strconv.ParseFloat(x, 64); err == nil {
				return -f
			}
		}
	}
	return v
}

// find places o's value with rule r; null reports a NULL key (which
// matches nothing). An integer literal takes the rule's unboxed path.
func (o operand) find(r shard.Rule, lits []Literal) (i int, null bool, err error) {
	if o.param >= 0 && lits[o.param].Kind == LitInt {
		if f, ok := r.(shard.IntFinder); ok {
			if k, perr := strconv.ParseInt(lits[o.param].Text, 10, 64); perr == nil {
				if o.neg {
					k = -k
				}
				i, err = f.FindInt(k)
				return i, false, err
			}
		}
	}
	v := o.value(lits)
	if v == nil {
		return -1, true, nil
	}
	i, err = r.Find(v)
	return i, false, err
}

// condOf derives the key condition of a WHERE clause.
func (b *builder) condOf(e ast.ExprNode) *cond {
	switch x := e.(type) {
	case *ast.ParenthesesExpr:
		return b.condOf(x.Expr)
	case *ast.BinaryOperationExpr:
		switch x.Op {
		case opcode.LogicAnd:
			l, r := b.condOf(x.L), b.condOf(x.R)
			switch {
			case l == nil:
				return r
			case r == nil:
				return l
			}
			return &cond{op: condAnd, kids: []*cond{l, r}}
		case opcode.LogicOr:
			l, r := b.condOf(x.L), b.condOf(x.R)
			if l == nil || r == nil {
				return nil
			}
			return &cond{op: condOr, kids: []*cond{l, r}}
		case opcode.EQ, opcode.NullEQ, opcode.LT, opcode.LE, opcode.GT, opcode.GE:
			op := x.Op
			col, val := b.keyOperand(x.L, x.R)
			if col == nil {
				col, val = b.keyOperand(x.R, x.L)
				op = flip(op)
			}
			if col == nil {
				return nil
			}
			switch op {
			case opcode.EQ, opcode.NullEQ:
				return &cond{op: condEq, vals: []operand{*val}}
			case opcode.LT:
				return &cond{op: condRange, hi: val}
			case opcode.LE:
				return &cond{op: condRange, hi: val, hiInc: true}
			case opcode.GT:
				return &cond{op: condRange, lo: val}
			case opcode.GE:
				return &cond{op: condRange, lo: val, loInc: true}
			}
		}
	case *ast.PatternInExpr:
		if x.Not || x.Sel != nil {
			return nil
		}
		c, ok := x.Expr.(*ast.ColumnNameExpr)
		if !ok || b.keyColumn(c.Name) == nil {
			return nil
		}
		out := &cond{op: condEq}
		for _, item := range x.List {
			o, ok := operandOf(item)
			if !ok {
				return nil
			}
			out.vals = append(out.vals, o)
		}
		return out
	case *ast.BetweenExpr:
		if x.Not {
			return nil
		}
		c, ok := x.Expr.(*ast.ColumnNameExpr)
		if !ok || b.keyColumn(c.Name) == nil {
			return nil
		}
		lo, ok1 := operandOf(x.Left)
		hi, ok2 := operandOf(x.Right)
		if !ok1 || !ok2 {
			return nil
		}
		return &cond{op: condRange, lo: &lo, hi: &hi, loInc: true, hiInc: true}
	}
	return nil
}

// keyOperand matches "key column" against "value" (in that order).
func (b *builder) keyOperand(colSide, valSide ast.ExprNode) (*ast.ColumnNameExpr, *operand) {
	c, ok := colSide.(*ast.ColumnNameExpr)
	if !ok || b.keyColumn(c.Name) == nil {
		return nil, nil
	}
	o, ok := operandOf(valSide)
	if !ok {
		return nil, nil
	}
	return c, &o
}

func flip(op opcode.Op) opcode.Op {
	switch op {
	case opcode.LT:
		return opcode.GT
	case opcode.LE:
		return opcode.GE
	case opcode.GT:
		return opcode.LT
	case opcode.GE:
		return opcode.LE
	}
	return op
}

// operandOf accepts a literal, a parameter, or either negated.
func operandOf(e ast.ExprNode) (operand, bool) {
	switch x := e.(type) {
	case *ast.ParenthesesExpr:
		return operandOf(x.Expr)
	case *driver.ParamMarkerExpr:
		return operand{param: x.Order}, true
	case *driver.ValueExpr:
		v := x.GetValue()
		switch d := v.(type) {
		case nil, int64, uint64, float64, string:
		case []byte:
			v = string(d)
		case float32:
			v = float64(d)
		case *driver.MyDecimal:
			f, err := strconv.ParseFloat(d.String(), 64)
			if err != nil {
				return operand{}, false
			}
			v = f
		default:
			return operand{}, false
		}
		return operand{param: -1, konst: v}, true
	case *ast.UnaryOperationExpr:
		if x.Op == opcode.Minus {
			o, ok := operandOf(x.V)
			if ok {
				o.neg = !o.neg
			}
			return o, ok
		}
	}
	return operand{}, false
}

// eval returns the sorted sub-table indexes c allows (nil = all, empty =
// none). buf, if it has capacity, holds the result of a top-level
// equality (no allocation for a point query).
func (c *cond) eval(r shard.Rule, lits []Literal, buf []int) ([]int, error) {
	if c == nil {
		return nil, nil
	}
	switch c.op {
	case condEq:
		out := buf[:0]
		if cap(buf) < len(c.vals) || out == nil {
			out = make([]int, 0, len(c.vals)) // non-nil: empty is "none"
		}
		for _, o := range c.vals {
			i, null, err := o.find(r, lits)
			if null {
				continue // key = NULL matches nothing
			}
			if errors.Is(err, shard.ErrKeyOutOfRange) {
				continue // no sub-table holds this value; the others still count
			}
			if err != nil {
				return nil, err
			}
			out = append(out, i)
		}
		slices.Sort(out)
		return slices.Compact(out), nil
	case condRange:
		lo := shard.Bound{Unbounded: c.lo == nil, Inclusive: c.loInc}
		hi := shard.Bound{Unbounded: c.hi == nil, Inclusive: c.hiInc}
		if c.lo != nil {
			lo.Value = c.lo.value(lits)
		}
		if c.hi != nil {
			hi.Value = c.hi.value(lits)
		}
		out, err := r.FindRange(lo, hi)
		if errors.Is(err, shard.ErrKeyOutOfRange) {
			return []int{}, nil
		}
		if out == nil && err == nil {
			out = []int{}
		}
		return out, err
	case condAnd, condOr:
		var acc []int
		for i, k := range c.kids {
			s, err := k.eval(r, lits, nil)
			if err != nil {
				return nil, err
			}
			switch {
			case i == 0:
				acc = s
			case c.op == condAnd:
				acc = intersect(acc, s)
			default:
				acc = union(acc, s)
			}
		}
		return acc, nil
	}
	return nil, nil
}

// intersect and union work on sorted sets where nil is "all".
func intersect(a, b []int) []int {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	out := []int{}
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] == b[j]:
			out = append(out, a[i])
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return out
}

func union(a, b []int) []int {
	if a == nil || b == nil {
		return nil
	}
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}
