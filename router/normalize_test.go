package router

import (
	"strings"
	"testing"
)

func TestDigestKey(t *testing.T) {
	for _, c := range []struct{ sql, want string }{
		{"SELECT * FROM t WHERE id = 5", "SELECT * FROM t WHERE id = ?"},
		{"INSERT INTO b (id, b) VALUES (1, _binary'\xc6\xc1P\\'x')", "INSERT INTO b (id, b) VALUES (?, _binary ?)"},
		{"SELECT N'abc', _utf8mb4 'x' COLLATE 'utf8mb4_bin'", "SELECT N ?, _utf8mb4 ? COLLATE ?"},
		{"CREATE USER u IDENTIFIED BY 'secret'", "CREATE USER u IDENTIFIED BY ?"},
		{"SELECT `it''s` FROM t WHERE a = 'x' /* c */", "SELECT `it''s` FROM t WHERE a = ?"},
	} {
		got := string(DigestKey(nil, "db", c.sql, 0))
		if got != "db\x00"+c.want {
			t.Errorf("%q: digest key %q, want %q", c.sql, got[3:], c.want)
		}
		// A plan cache key without a quote is the digest key itself (a
		// quote in an identifier makes IsDigestKey say no, needlessly).
		key := NewParser().Shape(c.sql, "db").Key
		if IsDigestKey(key) && string(key) != got || !IsDigestKey(key) && !strings.ContainsAny(string(key), `'"`) {
			t.Errorf("%q: IsDigestKey(%q) = %v", c.sql, key, IsDigestKey(key))
		}
	}
}

// TestDigestKeyBounded: a cut digest key is the start of the whole one,
// whatever the literals (so long statements of one shape share a digest).
func TestDigestKeyBounded(t *testing.T) {
	const max = 100
	var rows []string
	for i := range 50 {
		rows = append(rows, "("+strings.Repeat("7", i%9+1)+", _binary'"+strings.Repeat("\xff", i*3)+"', 'é')")
	}
	sql := "INSERT INTO t VALUES " + strings.Join(rows, ",")
	full := DigestKey(nil, "db", sql, 0)
	cut := DigestKey(nil, "db", sql, max)
	if len(cut) > 3+max || len(cut) < 3+max-3 || !strings.HasPrefix(string(full), string(cut)) {
		t.Fatalf("cut key %q is not a prefix of %q", cut, full[:3+max])
	}
	other := strings.ReplaceAll(sql, "7", "12345")
	if string(DigestKey(nil, "db", other, max)) != string(cut) {
		t.Fatal("statements differing in literals got different cut keys")
	}
}
