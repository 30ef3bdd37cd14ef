package merge

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/router"
)

// A re-sort key that is a division (or an AVG) compares rounded to its
// item's decimals, as MariaDB's filesort does: SUM(age)/COUNT(*) of
// 190/189 (1.005291...) and 189/188 (1.005319...) tie at 1.0053, and the
// next key, COUNT(*) ASC, puts b (188) first (TestMergeDiff,
// KS_MERGE_SEED=1795844231830510674, query 190, unrounded put a first).
func TestMergeResortRoundsToScale(t *testing.T) {
	agg := func(i int) *router.Expr { return &router.Expr{Op: router.ExprAgg, Agg: i} }
	div := &router.Expr{Op: router.ExprDiv, Args: []*router.Expr{agg(1), agg(0)}}
	srcs := func() []Source {
		return sources([][]byte{aggRow("a", 189, 190, 189, 1, 2)}, [][]byte{aggRow("b", 188, 189, 188, 1, 2)})
	}
	for _, c := range []struct {
		name  string
		final []router.FinalKey
		want  []string
	}{
		{"SUM/COUNT, COUNT", []router.FinalKey{{E: div}, {E: agg(0)}}, []string{"b|188|189|1.0053|1|2", "a|189|190|1.0053|1|2"}},
		{"SUM/COUNT DESC, COUNT DESC", []router.FinalKey{{E: div, Desc: true}, {E: agg(0), Desc: true}}, []string{"a|189|190|1.0053|1|2", "b|188|189|1.0053|1|2"}},
		// Not a tie at 4 decimals: the first key decides.
		{"SUM/COUNT + 1/1000", []router.FinalKey{{E: &router.Expr{Op: router.ExprAdd, Args: []*router.Expr{div,
			{Op: router.ExprConst, Val: router.Decimal("0.001")}}}}, {E: agg(0)}}, []string{"b|188|189|1.0053|1|2", "a|189|190|1.0053|1|2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := aggCfg()
			cfg.Spec.Final = c.final
			rows, _, err := run(t, cfg, srcs())
			if err != nil {
				t.Fatal(err)
			}
			eqStrings(t, "rows", textRows(t, rows, 6), c.want)
		})
	}
}

// MAX(age)-MIN(age) computed by the merge (the sub-tables send
// IF(0, ..., NULL)) over a group spanning -2^63..2^63-1: 1690 when that
// group is sent, nothing when the LIMIT skips it, with or without a
// re-sort (test/fuzzsql seed 1, statement 7).
func TestMergeComputedOverflow(t *testing.T) {
	agg := func(i int) *router.Expr { return &router.Expr{Op: router.ExprAgg, Agg: i} }
	span := &router.Expr{Op: router.ExprSub, Args: []*router.Expr{agg(4), agg(3)}, Text: "max(age) - min(age)"}
	srcs := func() []Source {
		return sources(
			[][]byte{aggRow("a", 1, 1, 1, "-9223372036854775808", "-9223372036854775808"), aggRow("b", 1, 1, 1, "1", "2")},
			[][]byte{aggRow("a", 1, 1, 1, "9223372036854775807", "9223372036854775807")},
		)
	}
	for _, c := range []struct {
		name          string
		final         []router.FinalKey
		having        *router.Expr
		offset, count int64
		want          []string
		err           bool
	}{
		{name: "the group sent", count: -1, err: true},
		{name: "the group skipped", offset: 1, count: 1, want: []string{"b|1|1|1.0000|1|1"}},
		{name: "re-sort, the group sent", final: []router.FinalKey{{E: agg(0), Desc: true}}, count: 1, err: true},
		{name: "re-sort, the group skipped", final: []router.FinalKey{{E: agg(0), Desc: true}}, offset: 1, count: 1, want: []string{"b|1|1|1.0000|1|1"}},
		// Sorted by it, or filtered by it: computed for every group, sent
		// or not (test/fuzzsql seed 800059, statement 719: ORDER BY 2
		// DESC, 1 LIMIT 100, 2).
		{name: "re-sort by it, the group skipped", final: []router.FinalKey{{E: agg(0), Desc: true}, {E: span}}, offset: 5, count: 1, err: true},
		{name: "HAVING it, the group skipped", having: &router.Expr{Op: router.ExprGT, Args: []*router.Expr{span, {Op: router.ExprConst, Val: int64(0)}}},
			offset: 5, count: 1, err: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := aggCfg()
			cfg.Spec.Fields[5] = span
			cfg.Cols[5] = colLL
			cfg.Spec.Final, cfg.Spec.Having, cfg.Offset, cfg.Count = c.final, c.having, c.offset, c.count
			rows, _, err := run(t, cfg, srcs())
			var me *mysql.MyError
			if c.err {
				if !errors.As(err, &me) || me.Code != 1690 || !strings.Contains(me.Message, "BIGINT value is out of range in 'max(age) - min(age)'") {
					t.Fatalf("want 1690, got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			eqStrings(t, "rows", textRows(t, rows, 6), c.want)
		})
	}
}
