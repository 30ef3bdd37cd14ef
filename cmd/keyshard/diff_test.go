package main

import "testing"

func TestUnifiedDiff(t *testing.T) {
	if d := unifiedDiff("a", "b", "x\ny\n", "x\ny\n"); d != "" {
		t.Errorf("equal: %q", d)
	}
	a := "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n"
	b := "1\n2\n3\n4\nfive\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n"
	want := `--- a
+++ b
@@ -2,7 +2,7 @@
 2
 3
 4
-5
+five
 6
 7
 8
@@ -13,3 +13,4 @@
 13
 14
 15
+16
`
	if d := unifiedDiff("a", "b", a, b); d != want {
		t.Errorf("got\n%s\nwant\n%s", d, want)
	}
	if d := unifiedDiff("a", "b", "", "x\n"); d != "--- a\n+++ b\n@@ -0,0 +1 @@\n+x\n" {
		t.Errorf("from empty: %q", d)
	}
}
