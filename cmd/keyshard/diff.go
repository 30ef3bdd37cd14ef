package main

import (
	"fmt"
	"slices"
	"strings"
)

// unifiedDiff returns the differences from a to b in unified form (3 lines
// of context), or "" if they are equal. Config files are small: a longest
// common subsequence over lines is enough.
func unifiedDiff(nameA, nameB, a, b string) string {
	if a == b {
		return ""
	}
	x, y := splitLines(a), splitLines(b)
	if slices.Equal(x, y) {
		return fmt.Sprintf("--- %s\n+++ %s\n(they differ only in the final newline)\n", nameA, nameB)
	}
	// lcs[i][j]: the longest common subsequence of x[i:] and y[j:].
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type line struct {
		op   byte // ' ', '-', '+'
		text string
		i, j int // line numbers (0-based) in x and y before this line
	}
	var script []line
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			script = append(script, line{' ', x[i], i, j})
			i, j = i+1, j+1
		case i < len(x) && (j == len(y) || lcs[i+1][j] >= lcs[i][j+1]):
			script = append(script, line{'-', x[i], i, j})
			i++
		default:
			script = append(script, line{'+', y[j], i, j})
			j++
		}
	}
	const ctx = 3
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", nameA, nameB)
	for k := 0; k < len(script); {
		if script[k].op == ' ' {
			k++
			continue
		}
		// A hunk: from ctx lines before this change to ctx lines after
		// the last change closer than 2*ctx lines of context apart.
		start := max(0, k-ctx)
		end := k
		for end < len(script) {
			if script[end].op != ' ' {
				end++
				continue
			}
			run := end
			for run < len(script) && script[run].op == ' ' {
				run++
			}
			if run == len(script) || run-end > 2*ctx {
				end = min(run, end+ctx)
				break
			}
			end = run
		}
		na, nb := 0, 0
		for _, l := range script[start:end] {
			if l.op != '+' {
				na++
			}
			if l.op != '-' {
				nb++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(script[start].i, na), hunkRange(script[start].j, nb))
		for _, l := range script[start:end] {
			out.WriteByte(l.op)
			out.WriteString(l.text)
			out.WriteByte('\n')
		}
		k = end
	}
	return out.String()
}

// hunkRange is a unified diff's "start,count" (1-based; start is the line
// before an empty range).
func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprint(start + 1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
