package router

import "testing"

func TestDigestKey(t *testing.T) {
	for _, c := range []struct{ sql, want string }{
		{"SELECT * FROM t WHERE id = 5", "SELECT * FROM t WHERE id = ?"},
		{"INSERT INTO b (id, b) VALUES (1, _binary'\xc6\xc1P\\'x')", "INSERT INTO b (id, b) VALUES (?, _binary ?)"},
		{"SELECT N'abc', _utf8mb4'x' COLLATE 'utf8mb4_bin'", "SELECT N ?, _utf8mb4 ? COLLATE ?"},
		{"CREATE USER u IDENTIFIED BY 'secret'", "CREATE USER u IDENTIFIED BY ?"},
		{"SELECT `it''s` FROM t WHERE a = 'x'", "SELECT `it''s` FROM t WHERE a = ?"},
	} {
		p := NewParser()
		key := p.Shape(c.sql, "db")
		got := DigestKey(nil, key)
		if string(got) != "db\x00"+c.want {
			t.Errorf("%q: digest key %q, want %q", c.sql, got[3:], c.want)
		}
	}
	// Keys without a kept literal are returned as they are.
	key := []byte("db\x00SELECT ?")
	if got := DigestKey(nil, key); &got[0] != &key[0] {
		t.Error("a key without literals was copied")
	}
}
