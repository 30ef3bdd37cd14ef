package frontend

import (
	"testing"
	"time"
)

func TestLoginFailures(t *testing.T) {
	var l Lockout
	var delays []time.Duration
	for range 12 {
		_, d := l.failed("10.0.0.1", 0, 0)
		delays = append(delays, d)
	}
	want := []time.Duration{0, 0, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second}
	for i, w := range want {
		if delays[i] != w {
			t.Errorf("failure %d: delay %s, want %s", i+1, delays[i], w)
		}
	}
	if delays[11] != loginMaxDelay {
		t.Errorf("failure 12: delay %s, want the cap %s", delays[11], loginMaxDelay)
	}
	// Another address is not slowed; a success clears the count.
	if n, d := l.failed("10.0.0.2", 0, 0); n != 1 || d != 0 {
		t.Errorf("another address: %d failures, delay %s", n, d)
	}
	l.Succeeded("10.0.0.1")
	if n, d := l.failed("10.0.0.1", 0, 0); n != 1 || d != 0 {
		t.Errorf("after a success: %d failures, delay %s", n, d)
	}
	// Old failures no longer count.
	l.byHost["10.0.0.1"].n, l.byHost["10.0.0.1"].last = 9, time.Now().Add(-2*loginFailWindow)
	if n, _ := l.failed("10.0.0.1", 0, 0); n != 1 {
		t.Errorf("after the window: %d failures, want 1", n)
	}
	// The lockAfter-th failure locks the address out.
	var k Lockout
	for range 2 {
		k.failed("10.0.0.3", 3, time.Minute)
	}
	if d := k.LockedFor("10.0.0.3"); d != 0 {
		t.Errorf("locked after 2 failures (lock after 3): %s", d)
	}
	k.failed("10.0.0.3", 3, time.Minute)
	if d := k.LockedFor("10.0.0.3"); d <= 0 || d > time.Minute {
		t.Errorf("after the 3rd failure: locked for %s, want up to 1m", d)
	}
	// At most loginLogPerSecond lines a second; the next says how many
	// were not logged.
	var m Lockout
	logged := 0
	for range 25 {
		if ok, _ := m.logLine(); ok {
			logged++
		}
	}
	if logged > loginLogPerSecond || logged < 1 {
		t.Errorf("%d of 25 lines logged in a burst", logged)
	}
	m.second-- // a second later
	if ok, suppressed := m.logLine(); !ok || suppressed != 25-logged {
		t.Errorf("the next second's first line: logged %v, %d suppressed, want %d", ok, suppressed, 25-logged)
	}
}
