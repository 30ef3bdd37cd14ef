package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strings"

	"github.com/keyshard/keyshard/router"
)

// blacklist is kingshard's SQL blacklist (blacklist_sql_file): statements
// whose normalized form matches an entry are refused. Entries are matched
// on their shape (literals replaced by ?, whitespace collapsed, case
// folded), so one entry covers every value of its literals. Immutable;
// changes build a new one.
type blacklist struct {
	sqls []string            // as the operator wrote them, in order
	keys map[string]struct{} // blackKey of each
}

// blackKey is the form a statement is matched in.
func blackKey(sql string) string {
	shape, _ := router.Normalize(strings.TrimRight(strings.TrimSpace(sql), "; \t\r\n"))
	return strings.ToLower(strings.Join(strings.Fields(shape), " "))
}

func newBlacklist(sqls []string) *blacklist {
	b := &blacklist{keys: make(map[string]struct{}, len(sqls))}
	for _, q := range sqls {
		q = strings.TrimSpace(q)
		if q == "" {
			continue
		}
		k := blackKey(q)
		if _, dup := b.keys[k]; dup {
			continue
		}
		b.keys[k] = struct{}{}
		b.sqls = append(b.sqls, q)
	}
	return b
}

// loadBlacklist reads one statement per line; blank lines and lines
// starting with # are skipped. A missing file is an empty list (admin
// 'save' creates it).
func loadBlacklist(path string) (*blacklist, error) {
	if path == "" {
		return newBlacklist(nil), nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return newBlacklist(nil), nil
	}
	if err != nil {
		return nil, err
	}
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
	return newBlacklist(sqls), sc.Err()
}

// blocked reports whether sql matches an entry. An empty list costs nothing.
func (b *blacklist) blocked(sql string) bool {
	if len(b.keys) == 0 {
		return false
	}
	_, ok := b.keys[blackKey(sql)]
	return ok
}

// with returns a copy with sql added (ok false if it was there).
func (b *blacklist) with(sql string) (*blacklist, bool) {
	if _, ok := b.keys[blackKey(sql)]; ok {
		return b, false
	}
	return newBlacklist(append(append([]string(nil), b.sqls...), sql)), true
}

// without returns a copy with sql's entry removed (ok false if absent).
func (b *blacklist) without(sql string) (*blacklist, bool) {
	k := blackKey(sql)
	if _, ok := b.keys[k]; !ok {
		return b, false
	}
	var rest []string
	for _, q := range b.sqls {
		if blackKey(q) != k {
			rest = append(rest, q)
		}
	}
	return newBlacklist(rest), true
}

// file is the list as blacklist_sql_file holds it.
func (b *blacklist) file() []byte {
	var buf bytes.Buffer
	for _, q := range b.sqls {
		buf.WriteString(q)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// blacklisted is the error for a statement the blacklist refuses.
func blacklisted(sql string) error {
	if len(sql) > 200 {
		sql = sql[:200] + "..."
	}
	return newErr(errBlacklisted, "The keyshard server is running with the SQL blacklist (blacklist_sql_file) option so it cannot execute this statement: %s", sql)
}
