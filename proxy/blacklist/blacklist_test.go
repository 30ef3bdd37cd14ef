package blacklist

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/keyshard/keyshard/router"
)

// blocks reports whether b refuses sql run in database app.
func blocks(b *List, sql string) bool {
	return b.MayMatch(sql, router.Classify(sql)) && b.Check(router.NewParser(), sql, "app") != nil
}

func TestBlacklist(t *testing.T) {
	b := New([]string{"SELECT * FROM t WHERE id = 1", "  ", "select * from T where id = 2;", "DELETE FROM t"})
	if len(b.sqls) != 2 {
		t.Fatalf("entries %q: the second select has the first's shape", b.sqls)
	}
	for sql, want := range map[string]bool{
		"select * from t where id = 99":           true,
		"SELECT *\n  FROM t\tWHERE id = 'abc';":   true,
		"delete from t":                           true,
		"select * from t where id = 1 and x=2":    false,
		"delete from t where id = 1":              false,
		"select 1":                                false,
		"delete from app.`T` where 1":             true,
		"select 1; delete from t":                 true,
		"prepare s from @q":                       true, // cannot be checked
		"select 2":                                false,
		"/*!99999 select * from t where id = 3*/": true,
	} {
		if got := blocks(b, sql); got != want {
			t.Errorf("blocked(%q) = %v", sql, got)
		}
	}
	if blocks(New(nil), "select 1") {
		t.Error("empty list blocks")
	}
	nb, ok := b.With("select 1")
	if !ok || !blocks(nb, "SELECT 2") || blocks(b, "select 2") {
		t.Error("with: the copy should block, the original not")
	}
	if _, ok := nb.With("select 3"); ok {
		t.Error("with: a duplicate shape was added")
	}
	if _, ok := nb.With("select 7; delete from t where id = 1"); ok {
		t.Error("with: a batch was added (it would block its first statement's every form)")
	}
	if nb := New([]string{"-- only a comment", "select 1; delete from t"}); len(nb.sqls) != 0 {
		t.Errorf("entries without one statement kept: %q", nb.sqls)
	}
	nb, ok = nb.Without("select 5")
	if !ok || blocks(nb, "select 1") || len(nb.sqls) != 2 {
		t.Errorf("without: %q", nb.sqls)
	}
	if _, ok := nb.Without("select 5"); ok {
		t.Error("without: removed a missing entry")
	}
	if got := string(nb.File()); got != "SELECT * FROM t WHERE id = 1\nDELETE FROM t\n" {
		t.Errorf("file: %q", got)
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "bl")
	if err := os.WriteFile(path, []byte("# a comment\n\nselect 1\n  update t set a = 1  \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lb, err := Load(path)
	if err != nil || len(lb.sqls) != 2 || !blocks(lb, "UPDATE t SET a = 5") {
		t.Errorf("load: %q %v", lb.sqls, err)
	}
	if lb, err := Load(filepath.Join(dir, "missing")); err != nil || len(lb.sqls) != 0 {
		t.Errorf("missing file: %v %v", lb, err)
	}
}
