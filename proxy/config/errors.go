package config

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// Error is one problem found in a config file. Line is 0 when it is not
// known (a Config built in code rather than parsed).
type Error struct {
	Source string // file name as given to Load or Parse; may be empty
	Line   int
	Path   string // key path such as "nodes[1].master"; empty for unknown keys
	Msg    string
}

func (e *Error) Error() string {
	var b []byte
	switch {
	case e.Source != "" && e.Line > 0:
		b = fmt.Appendf(b, "%s:%d: ", e.Source, e.Line)
	case e.Source != "":
		b = append(b, e.Source+": "...)
	case e.Line > 0:
		b = append(b, "line "+strconv.Itoa(e.Line)+": "...)
	}
	if e.Path != "" {
		b = append(b, e.Path+": "...)
	}
	return string(append(b, e.Msg...))
}

// maxProblems caps the problems reported for one file: past it the rest is
// noise, and a hostile file must not be able to produce a gigabyte of them.
const maxProblems = 50

// problems collects errors so that one run reports every mistake in a file,
// not just the first.
type problems struct {
	src     string
	errs    []*Error
	dropped int
}

func (p *problems) add(line int, path, format string, args ...any) {
	if len(p.errs) >= maxProblems {
		p.dropped++
		return
	}
	p.errs = append(p.errs, &Error{Source: p.src, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (p *problems) full() bool { return len(p.errs) >= maxProblems }

// err returns nil or all problems sorted by line, joined.
func (p *problems) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(p.errs, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
	errs := make([]error, len(p.errs), len(p.errs)+1)
	for i, e := range p.errs {
		errs[i] = e
	}
	if p.dropped > 0 {
		errs = append(errs, &Error{Source: p.src, Msg: fmt.Sprintf("... and %d more problems", p.dropped)})
	}
	return errors.Join(errs...)
}
