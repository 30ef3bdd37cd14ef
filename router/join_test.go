package router

import (
	"strings"
	"testing"
)

// A prepared join is prepared on a backend as a stand-in with as many
// columns (* counted by the tables' columns) and parameters as the
// statement.
func TestJoinProbe(t *testing.T) {
	s := tpccSchema(t, true)
	p := NewParser()
	for q, want := range map[string]string{
		"SELECT * FROM customer1 JOIN item2 ON c_id = i_id WHERE c_w_id = ? LIMIT ?": "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM DUAL WHERE COALESCE(?, ?, 1) IS NOT NULL",
		"SELECT c_last, i.* FROM customer1 JOIN item2 i ON c_id = i_id":              "SELECT NULL, NULL, NULL, NULL",
	} {
		pl, lits, err := s.Plan(p, q, "tpcc", KindSelect)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if pl.Join() == nil {
			t.Fatalf("%s: not a join in the proxy", q)
		}
		node, sql := pl.Probe(lits, "")
		if node != "node1" || sql != want {
			t.Errorf("%s: probe %s %q, want node1 %q", q, node, sql, want)
		}
	}
	// A shape's literals are the statement's own.
	pl, lits, err := s.Plan(p, "SELECT c_last FROM customer1 JOIN item2 ON c_id = i_id WHERE i_price > 5", "tpcc", KindSelect)
	if err != nil {
		t.Fatal(err)
	}
	if _, sql := pl.Probe(lits, ""); !strings.Contains(sql, "COALESCE(5, 1)") {
		t.Errorf("probe %q", sql)
	}
}
