// Package blacklist is kingshard's SQL blacklist (blacklist_sql_file):
// the list both planes share. The data plane checks each statement
// against the running list; the control plane (proxy/control) edits it,
// reads it from its file or from etcd, and saves it. It never imports
// package proxy or the engine.
package blacklist

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/keyshard/keyshard/router"
)

// List is kingshard's SQL blacklist (blacklist_sql_file): statements
// whose canonical form (router.Canonical) matches an entry's are refused.
// The form is read from the parse tree, so one entry covers every value of
// its literals, every spelling of its names (quoted, qualified with the
// database, aliased), executable comments, constant conditions such as
// WHERE 1=1, and the statement inside a batch, a PREPARE or an EXECUTE
// IMMEDIATE. Immutable; changes build a new one.
type List struct {
	sqls  []string            // as the operator wrote them, in order
	keys  map[string]struct{} // blackKey of each
	kinds [32]bool            // router.Classify kinds of the entries
}

// blackKey is the form an entry is matched in: its first statement's
// canonical form, its names qualified only where the entry qualifies them
// (so an unqualified entry covers the table in every database). p may be
// nil.
func blackKey(p *router.Parser, sql string) string {
	if p == nil {
		p = router.NewParser()
	}
	var key string
	if _, err := p.Canonical(sql, "", func(f string) bool { key = f; return true }); err != nil || key == "" {
		shape, _ := router.Normalize(strings.TrimRight(strings.TrimSpace(sql), "; \t\r\n"))
		key = strings.ToLower(strings.Join(strings.Fields(shape), " "))
	}
	return key
}

// New is a list of sqls: blank entries, duplicates (by shape) and entries
// that are not one statement are left out.
func New(sqls []string) *List {
	b := &List{keys: make(map[string]struct{}, len(sqls))}
	p := router.NewParser()
	for _, q := range sqls {
		q = strings.TrimSpace(q)
		if q == "" {
			continue
		}
		k, info := blackKey(p, q), router.Classify(q)
		if _, dup := b.keys[k]; dup || k == "" || info.Flags&router.FlagMulti != 0 {
			continue // one statement per entry (see with)
		}
		b.keys[k] = struct{}{}
		b.kinds[info.Kind%32] = true
		b.sqls = append(b.sqls, q)
	}
	return b
}

// Load reads one statement per line; blank lines and lines
// starting with # are skipped. A missing file is an empty list (admin
// 'save' creates it).
func Load(path string) (*List, error) {
	if path == "" {
		return New(nil), nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return New(nil), nil
	}
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// Parse reads a blacklist file's content: one statement per
// line; blank lines and lines starting with # are skipped.
func Parse(data []byte) (*List, error) {
	var sqls []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		sqls = append(sqls, line)
	}
	return New(sqls), sc.Err()
}

// Empty reports whether the list has no entry.
func (b *List) Empty() bool { return len(b.keys) == 0 }

// MayMatch reports whether sql (classified as info) needs checking: not
// with an empty list, nor for a single statement of a kind no entry has
// (a batch, PREPARE, EXECUTE, SET (STATEMENT ... FOR), a statement the
// classifier cannot name or one with comments is always checked).
func (b *List) MayMatch(sql string, info router.Info) bool {
	if len(b.keys) == 0 {
		return false
	}
	switch info.Kind {
	case router.KindOther, router.KindSet, router.KindPrepare, router.KindExecute, router.KindBegin:
		return true
	}
	return b.kinds[info.Kind%32] || info.Flags&router.FlagMulti != 0 || strings.Contains(sql, "/*")
}

// Check refuses sql, run in database db, if one of its statements matches
// an entry, and a statement whose text cannot be seen (PREPARE or EXECUTE
// IMMEDIATE of anything but one string literal, a compound statement)
// while the list has entries.
func (b *List) Check(p *router.Parser, sql, db string) error {
	if len(b.keys) == 0 {
		return nil
	}
	hit, err := p.Canonical(sql, db, func(f string) bool { _, ok := b.keys[f]; return ok })
	switch {
	case errors.Is(err, router.ErrUncheckable):
		return &Error{Uncheckable: true, msg: fmt.Sprintf("keyshard: the SQL blacklist (blacklist_sql_file) is on, and this statement's text "+
			"cannot be checked against it (PREPARE or EXECUTE IMMEDIATE of anything but one string literal, a compound "+
			"statement): %s; give the text as one string literal, prepare it with the binary protocol, or send the "+
			"compound statement's parts one by one", clip(sql))}
	case hit:
		return blacklisted(sql)
	}
	return nil
}

// With returns a copy with sql added (ok false if it was there).
func (b *List) With(sql string) (*List, bool) {
	if _, ok := b.keys[blackKey(nil, sql)]; ok || router.Classify(sql).Flags&router.FlagMulti != 0 {
		return b, false
	}
	return New(append(append([]string(nil), b.sqls...), sql)), true
}

// Without returns a copy with sql's entry removed (ok false if absent).
func (b *List) Without(sql string) (*List, bool) {
	p := router.NewParser()
	k := blackKey(p, sql)
	if _, ok := b.keys[k]; !ok {
		return b, false
	}
	var rest []string
	for _, q := range b.sqls {
		if blackKey(p, q) != k {
			rest = append(rest, q)
		}
	}
	return New(rest), true
}

// File is the list as blacklist_sql_file holds it.
func (b *List) File() []byte {
	var buf bytes.Buffer
	for _, q := range b.sqls {
		buf.WriteString(q)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// SQLs returns the entries, as written (a copy).
func (b *List) SQLs() []string { return slices.Clone(b.sqls) }

// Error is a statement the list refuses (proxy maps it to a MySQL error).
// Uncheckable: its text cannot be seen while the list has entries.
type Error struct {
	Uncheckable bool
	msg         string
}

func (e *Error) Error() string { return e.msg }

// blacklisted is the error for a statement the blacklist refuses.
func blacklisted(sql string) error {
	return &Error{msg: fmt.Sprintf("The keyshard server is running with the SQL blacklist (blacklist_sql_file) option so it cannot execute this statement: %s", clip(sql))}
}

// clip shortens sql quoted in an error message.
func clip(sql string) string {
	if len(sql) > 200 {
		return sql[:200] + "..."
	}
	return sql
}
