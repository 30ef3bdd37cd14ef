package backend

import (
	"reflect"
	"testing"
)

func TestStateDiff(t *testing.T) {
	base := NewState("utf8mb4", "")
	a := base.WithVars(Var{Name: "sql_mode", Value: "'ANSI_QUOTES'"}).WithVars(Var{Name: "time_zone", Value: "'+05:00'"})
	b := base.WithVars(Var{Name: "SQL_MODE", Value: "'NO_ZERO_DATE'"}).WithNames("latin1", "")
	cases := []struct {
		from, to *State
		want     []string
	}{
		{base, base, nil},
		{nil, base, []string{"NAMES utf8mb4"}},
		{base, a, []string{"@@SESSION.sql_mode = 'ANSI_QUOTES'", "@@SESSION.time_zone = '+05:00'"}},
		{a, b, []string{"NAMES latin1", "@@SESSION.sql_mode = 'NO_ZERO_DATE'", "@@SESSION.time_zone = DEFAULT"}},
		{b, base, []string{"NAMES utf8mb4", "@@SESSION.sql_mode = DEFAULT"}},
	}
	for i, c := range cases {
		if got := diff(c.from, c.to); !reflect.DeepEqual(got, c.want) {
			t.Errorf("case %d: diff = %q, want %q", i, got, c.want)
		}
	}
	if v, ok := a.Get("time_zone"); !ok || v != "'+05:00'" {
		t.Fatalf("Get = %q %v", v, ok)
	}
	// WithNames drops what SET NAMES overrides.
	c := base.WithVars(Var{Name: "character_set_results", Value: "NULL"}).WithNames("utf8mb4", "utf8mb4_bin")
	if len(c.Vars) != 0 || c.Collation != "utf8mb4_bin" {
		t.Fatalf("WithNames kept %v", c.Vars)
	}
}

func TestQuote(t *testing.T) {
	if got := Quote("it's a \\ test\x00"); got != `'it''s a \\ test\0'` {
		t.Fatalf("Quote = %s", got)
	}
}
