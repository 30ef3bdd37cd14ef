package router

import "testing"

// What a DDL on a sharded or global table needs of its sub-tables before
// it runs: Alters (all alike), Creates (none there), Drops (all there).
func TestPlanDDLNeeds(t *testing.T) {
	s, p := testSchema(t), NewParser()
	for _, c := range []struct {
		sql                    string
		alters, creates, drops bool
	}{
		{"CREATE TABLE user (id INT)", false, true, false},
		{"CREATE TABLE IF NOT EXISTS user (id INT)", false, false, false},
		{"CREATE TABLE country (code CHAR(2))", false, true, false},
		{"ALTER TABLE user ADD COLUMN b INT", true, false, false},
		{"CREATE INDEX i ON user (id)", true, false, false},
		{"DROP INDEX i ON user", true, false, false},
		{"DROP TABLE user", false, false, true},
		{"DROP TABLE IF EXISTS user", false, false, false},
		{"TRUNCATE TABLE user", false, false, true},
		{"CREATE TABLE plain (id INT)", false, false, false}, // not sharded: the default node
	} {
		pl, _, err := s.Plan(p, c.sql, "kingshard", KindDDL)
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		if pl.Alters != c.alters || pl.Creates != c.creates || pl.Drops != c.drops {
			t.Errorf("%s: alters %v creates %v drops %v, want %v %v %v", c.sql, pl.Alters, pl.Creates, pl.Drops, c.alters, c.creates, c.drops)
		}
	}
}
