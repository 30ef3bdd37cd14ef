package proxy

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestLabelText: digest texts may hold bytes of any charset (a shape keeps
// some literals); Prometheus panics on a label value that is not UTF-8.
func TestLabelText(t *testing.T) {
	for _, in := range []string{
		"SELECT ?",
		"INSERT INTO b VALUES (?, _binary'\xc6\xc1P\xa9\x12R')",
		strings.Repeat("é", 200),
		strings.Repeat("\xff", 300),
	} {
		out := labelText(in)
		if !utf8.ValidString(out) || len(out) > maxLabelText+len("...") {
			t.Errorf("labelText(%q) = %q", in, out)
		}
	}
	if labelText("SELECT ?") != "SELECT ?" {
		t.Error("a short valid text changed")
	}
}
