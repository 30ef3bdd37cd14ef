package xa

import (
	"testing"
	"time"
)

func TestParseXID(t *testing.T) {
	x := &Coordinator{instance: "0a1b2c3d"}
	before := time.Now().Add(-time.Millisecond)
	xid := x.TxXID("node-2.a")
	began, node, ok := parseXID(xid)
	if !ok || node != "node-2.a" || began.Before(before.Truncate(time.Millisecond)) || time.Since(began) > time.Minute {
		t.Fatalf("parseXID(%q) = %v %q %v", xid, began, node, ok)
	}
	if len(xid) > 64 {
		t.Errorf("%q is longer than an XA gtrid may be", xid)
	}
	for _, bad := range []string{"", "ks-", "ks-a-b-c", "other-1-2-3-n", "ks-a-notanumber-1-n"} {
		if _, _, ok := parseXID(bad); ok {
			t.Errorf("parseXID(%q) accepted", bad)
		}
	}
}
