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

func TestXIDInstance(t *testing.T) {
	x := &Coordinator{instance: "0a1b2c3d"}
	if got := xidInstance(x.TxXID("node-2")); got != "0a1b2c3d" {
		t.Fatalf("xidInstance of this instance's XID: %q", got)
	}
	for _, bad := range []string{"", "ks-a-b-c", "other-0a1b2c3d-1-2-n"} {
		if got := xidInstance(bad); got != "" {
			t.Errorf("xidInstance(%q) = %q, want none", bad, got)
		}
	}
	if got := lockName("0a1b2c3d"); got != "keyshard-xa-0a1b2c3d" {
		t.Errorf("lockName: %q", got)
	}
}

// Recovery runs again a second after it finds another instance's branch
// in doubt for the first time, backing off to xa_recover_interval while
// branches stay in doubt.
func TestNextPass(t *testing.T) {
	x := &Coordinator{}
	const interval = 30 * time.Second
	for _, c := range []struct {
		r          passResult
		last, want time.Duration
	}{
		{passResult{}, interval, interval},
		{passResult{othersInDoubt: 1, newInDoubt: true}, interval, time.Second},
		{passResult{othersInDoubt: 1}, time.Second, 2 * time.Second},
		{passResult{othersInDoubt: 3}, 16 * time.Second, interval},
		{passResult{othersInDoubt: 1, newInDoubt: true}, 8 * time.Second, time.Second},
		{passResult{}, 2 * time.Second, interval},
	} {
		if got := x.nextPass(c.r, c.last, interval); got != c.want {
			t.Errorf("nextPass(%+v, %s) = %s, want %s", c.r, c.last, got, c.want)
		}
	}
	if got := x.nextPass(passResult{othersInDoubt: 1, newInDoubt: true}, 200*time.Millisecond, 200*time.Millisecond); got != 200*time.Millisecond {
		t.Errorf("nextPass with a 200ms interval: %s", got)
	}
}
