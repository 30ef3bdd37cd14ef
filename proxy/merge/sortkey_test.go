package merge

import (
	"testing"

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
