package router

import (
	"strings"
	"testing"

	"github.com/keyshard/keyshard/router/shard"
)

func lookSchema(t *testing.T) *Schema {
	t.Helper()
	s, err := NewSchema(SchemaConfig{Default: "n1", Nodes: []string{"n1", "n2"}, Tables: []TableConfig{
		{DB: "app", Table: "orders", Key: "id", Nodes: []string{"n2", "n1"}, Shard: shard.Config{Type: "hash", Nodes: 2, Locations: []int{2, 2}}},
		{DB: "app", Table: "users", Key: "id", Nodes: []string{"n1", "n2"}, Shard: shard.Config{Type: "hash", Nodes: 2, Locations: []int{1, 1}}},
	}}, 16)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLookOne(t *testing.T) {
	s := lookSchema(t)
	p := NewParser()
	for _, c := range []struct {
		sql, node, out string
		ddl            bool
	}{
		{"SHOW CREATE TABLE orders", "n2", "SHOW CREATE TABLE `orders_0000`", true},
		{"show create table app.Orders", "n2", "SHOW CREATE TABLE `app`.`orders_0000`", true},
		{"DESCRIBE orders", "n2", "DESC `orders_0000`", false},
		{"desc app.orders id", "n2", "DESC `app`.`orders_0000` `id`", false},
		{"SHOW FULL COLUMNS FROM orders FROM app LIKE 'i%'", "n2", "SHOW FULL COLUMNS IN `orders_0000` IN `app` LIKE 'i%'", false},
		{"SHOW INDEX FROM users", "n1", "SHOW INDEX IN `users_0000`", false},
		{"SELECT column_name FROM information_schema.columns WHERE table_schema = 'app' AND table_name = 'orders' ORDER BY ordinal_position",
			"n2", "SELECT `column_name` FROM `information_schema`.`columns` WHERE `table_schema`='app' AND `table_name`='orders_0000' ORDER BY `ordinal_position`", false},
	} {
		l := s.Look(p, c.sql, "app")
		if l == nil || l.Kind != LookOne || l.Node != c.node || l.SQL != c.out || l.DDL != c.ddl {
			t.Errorf("Look(%q) = %+v, want %s on %s", c.sql, l, c.out, c.node)
			continue
		}
		if len(l.Rename) != 1 {
			t.Errorf("Look(%q): rename %v", c.sql, l.Rename)
		}
	}
	for _, sql := range []string{"SHOW CREATE TABLE plain", "DESCRIBE other.orders", "SELECT 'orders'",
		"SELECT * FROM information_schema.tables WHERE table_name IN ('orders', 'users')", "SHOW TABLES FROM other"} {
		if l := s.Look(p, sql, "app"); l != nil {
			t.Errorf("Look(%q) = %+v, want nil", sql, l)
		}
	}
}

func TestLookList(t *testing.T) {
	s := lookSchema(t)
	p := NewParser()
	l := s.Look(p, "SHOW FULL TABLES LIKE 'o%'", "app")
	if l == nil || l.Kind != LookTables || !l.Full || l.Like != "o%" || l.DB != "app" || len(l.Tables) != 2 || l.Tables[0].Table != "orders" {
		t.Fatalf("SHOW FULL TABLES: %+v", l)
	}
	l = s.Look(p, "SHOW TABLE STATUS FROM app WHERE Data_length > 3", "")
	if l == nil || l.Kind != LookStatus || l.Where != "`Data_length`>3" {
		t.Fatalf("SHOW TABLE STATUS: %+v", l)
	}
	if !s.IsSubTable("App", "ORDERS_0003") || s.IsSubTable("app", "orders_0004") || s.IsSubTable("other", "orders_0000") {
		t.Error("IsSubTable")
	}
}

// Strings written out again keep their backslashes.
func TestLookEscapes(t *testing.T) {
	s := lookSchema(t)
	l := s.Look(NewParser(), `SELECT column_name FROM information_schema.columns WHERE table_name = 'orders' AND column_name LIKE 'a\\_b'`, "app")
	if l == nil || !strings.Contains(l.SQL, `LIKE 'a\\_b'`) {
		t.Fatalf("Look: %+v", l)
	}
}
