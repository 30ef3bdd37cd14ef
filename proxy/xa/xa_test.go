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

func TestOutcomeStats(t *testing.T) {
	x := &Coordinator{}
	x.Outcome(true, 1)
	x.Outcome(true, 3)
	x.Outcome(false, 2)
	x.Outcome(false, 1)
	x.Outcome(false, 1)
	want := Stats{Commits: 1, Rollbacks: 1, AtomicCommits: 2, AtomicRollbacks: 3}
	if got := x.Stats(); got != want {
		t.Fatalf("Stats() = %+v, want %+v", got, want)
	}
}

func TestKillAtRejects(t *testing.T) {
	for _, bad := range []string{"", "kill", "kill:prepare", "kill:start:1", "stop:commit:1", "kill:commit:0", "kill:commit:x"} {
		if err := KillAt(bad); err == nil {
			t.Errorf("KillAt(%q) accepted", bad)
		}
	}
}
