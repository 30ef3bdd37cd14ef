// Package sqldiff holds what the differential tests share (the merge diff
// in test/e2e, the SQL fuzzer in test/fuzzsql): statements built with
// literals and with ? at once, and answers normalised before they are
// compared with the single server's.
package sqldiff

import (
	"slices"
	"strings"
)

// Null is how a NULL cell reads in the answers compared (no value's text).
const Null = "\x00NULL"

// Builder builds a statement twice: Text with literals, PText with ? in
// place of the literals given to Lit (their values in Args), for the
// binary protocol.
type Builder struct {
	Text, PText strings.Builder
	Args        []any
}

// Add appends s to both texts.
func (w *Builder) Add(s string) {
	w.Text.WriteString(s)
	w.PText.WriteString(s)
}

// Lit appends a literal: its text to Text, ? to PText and arg to Args.
func (w *Builder) Lit(text string, arg any) {
	w.Text.WriteString(text)
	w.PText.WriteString("?")
	w.Args = append(w.Args, arg)
}

// Normalize applies what a statement leaves unspecified: the order of
// GROUP_CONCAT's elements (the columns concat marks), and with fold which
// of 'abc' and 'ABC' stands for a group.
func Normalize(rows [][]string, fold bool, concat []bool) [][]string {
	out := make([][]string, len(rows))
	for i, row := range rows {
		nr := slices.Clone(row)
		for c := range nr {
			if fold {
				nr[c] = strings.ToLower(nr[c])
			}
			if c < len(concat) && concat[c] && nr[c] != Null {
				parts := strings.Split(nr[c], ",")
				slices.Sort(parts)
				nr[c] = strings.Join(parts, ",")
			}
		}
		out[i] = nr
	}
	return out
}

// JoinRows makes each row one comparable string.
func JoinRows(rows [][]string) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = strings.Join(r, "\x1f")
	}
	return out
}
