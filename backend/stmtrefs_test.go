package backend

import "testing"

func TestStmtRefs(t *testing.T) {
	r := NewStmtRefs()
	a1 := r.Hold("db\x00SELECT 1")
	a2 := r.Hold("db\x00SELECT 1")
	b := r.Hold("db\x00SELECT 2")
	if a1 != a2 || a1 == b || r.Len() != 2 || r.drops.Load() != 0 {
		t.Fatalf("holds: same ref %v, len %d", a1 == a2, r.Len())
	}
	r.Drop(a1)
	if a1.n.Load() != 1 || r.drops.Load() != 0 {
		t.Fatalf("one of two holders dropped: count %d, drops %d", a1.n.Load(), r.drops.Load())
	}
	r.Drop(a2)
	if a1.n.Load() != 0 || r.drops.Load() != 1 || r.Len() != 1 {
		t.Fatalf("last holder dropped: count %d, drops %d, len %d", a1.n.Load(), r.drops.Load(), r.Len())
	}
	// Held again: a new ref; the old one stays at zero.
	if c := r.Hold("db\x00SELECT 1"); c == a1 || c.n.Load() != 1 || a1.n.Load() != 0 {
		t.Fatal("a text held again after its last drop must get a fresh ref")
	}
}
