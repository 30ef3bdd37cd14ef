package join

import (
	"testing"

	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/proxy/merge"
)

// The proxy matches join values as the server compares them: numbers by
// value, dates with and without a time, and writes them back as
// literals of their kind.
func TestJoinKeys(t *testing.T) {
	for _, c := range [][2]string{{"5", "5.00"}, {"-0.50", "-.5"}, {"0", "-0.00"}, {"1e3", "1000"}} {
		if numberKey([]byte(c[0])) != numberKey([]byte(c[1])) {
			t.Errorf("%s and %s are one number", c[0], c[1])
		}
	}
	if numberKey([]byte("5")) == numberKey([]byte("5.01")) {
		t.Error("5 and 5.01 are two numbers")
	}
	for _, c := range [][2]string{{"2020-01-02", "2020-01-02 00:00:00"}, {"2020-01-02 10:00:00.500000", "2020-01-02 10:00:00.5"}, {"2020-01-02 10:00:00.000", "2020-01-02 10:00:00"}} {
		if temporalKey([]byte(c[0])) != temporalKey([]byte(c[1])) {
			t.Errorf("%s and %s are one instant", c[0], c[1])
		}
	}
	str := merge.Column{Type: wire.TypeVarString, Charset: 45}
	for v, want := range map[string]string{"it's": `'it''s'`, `a\b`: `'a\\b'`} {
		if got := literal([]byte(v), str); got != want {
			t.Errorf("literal(%q) = %s, want %s", v, got, want)
		}
	}
	if got := literal([]byte{0xff, 0}, merge.Column{Type: wire.TypeVarString, Charset: 63}); got != "X'ff00'" {
		t.Errorf("binary literal: %s", got)
	}
	if got := literal([]byte("12.50"), merge.Column{Type: wire.TypeNewDecimal}); got != "12.50" {
		t.Errorf("number literal: %s", got)
	}
	if classOf(str) == classOf(merge.Column{Type: wire.TypeLong}) {
		t.Error("a string and a number are of different kinds")
	}
}

// split reads text-protocol rows; NULL is nil, the empty string empty.
func TestSplit(t *testing.T) {
	row := []byte{1, 'a', 0xfb, 0}
	cells, err := split(row, 3, nil)
	if err != nil || string(cells[0]) != "a" || cells[1] != nil || cells[2] == nil || len(cells[2]) != 0 {
		t.Fatalf("split: %q %v", cells, err)
	}
	if _, err := split(row, 4, nil); err == nil {
		t.Fatal("a short row splits")
	}
}
