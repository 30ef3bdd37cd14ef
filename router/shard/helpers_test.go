package shard

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func mustNew(t testing.TB, c Config) Rule {
	t.Helper()
	r, err := New(c)
	if err != nil {
		t.Fatalf("New(%+v): %v", c, err)
	}
	return r
}

// findCase is one Find input and its expected sub-table index, or the
// error it must wrap (want is then ignored).
type findCase struct {
	v    any
	want int
	err  error
}

func checkFind(t *testing.T, r Rule, cases []findCase) {
	t.Helper()
	for _, c := range cases {
		got, err := r.Find(c.v)
		switch {
		case c.err != nil:
			if !errors.Is(err, c.err) {
				t.Errorf("%s Find(%T %#v) = %d, %v; want error %v", r.Type(), c.v, c.v, got, err, c.err)
			}
		case err != nil:
			t.Errorf("%s Find(%T %#v): unexpected error %v", r.Type(), c.v, c.v, err)
		case got != c.want:
			t.Errorf("%s Find(%T %#v) = %d, want %d", r.Type(), c.v, c.v, got, c.want)
		}
	}
}

type rangeCase struct {
	lo, hi Bound
	want   []int
	err    error
}

func checkRange(t *testing.T, r Rule, cases []rangeCase) {
	t.Helper()
	for _, c := range cases {
		got, err := r.FindRange(c.lo, c.hi)
		switch {
		case c.err != nil:
			if !errors.Is(err, c.err) {
				t.Errorf("%s FindRange(%+v, %+v) = %v, %v; want error %v", r.Type(), c.lo, c.hi, got, err, c.err)
			}
		case err != nil:
			t.Errorf("%s FindRange(%+v, %+v): unexpected error %v", r.Type(), c.lo, c.hi, err)
		case !slices.Equal(got, c.want):
			t.Errorf("%s FindRange(%+v, %+v) = %v, want %v", r.Type(), c.lo, c.hi, got, c.want)
		}
	}
}

func incl(v any) Bound { return Bound{Value: v, Inclusive: true} }
func excl(v any) Bound { return Bound{Value: v} }
func unbounded() Bound { return Bound{Unbounded: true} }

func seq(first, last int) []int {
	var out []int
	for i := first; i <= last; i++ {
		out = append(out, i)
	}
	return out
}

func suffixes(r Rule) string {
	var b strings.Builder
	for i, st := range r.Tables() {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(st.Suffix)
		b.WriteByte('@')
		b.WriteByte(byte('0' + st.Node))
	}
	return b.String()
}
