package users

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/keyshard/keyshard/backend"
)

// Lookups read the accounts when none were read, after a failed login at
// most once per MinInterval, and after Invalidate at once; a failed read
// is told to OnError and leaves the accounts as they were. (The reads
// themselves are tested against MariaDB in test/e2e.)
func TestDirectoryReads(t *testing.T) {
	var errs []string
	d := NewDirectory(func() *backend.Node { return nil })
	d.OnError = func(err error) { errs = append(errs, err.Error()) }
	ctx := context.Background()
	start := time.Now()
	for range 20 {
		if _, ok := d.Lookup(ctx, "alice", "127.0.0.1", true); ok {
			t.Fatal("found alice with no accounts")
		}
	}
	elapsed := time.Since(start)
	if n := d.Reads(); n < 1 || float64(n) > elapsed.Seconds()/MinInterval.Seconds()+1 {
		t.Fatalf("20 failed lookups in %v read %d times: want at most one per %v", elapsed, n, MinInterval)
	}
	if len(errs) == 0 || !strings.Contains(errs[0], "no node to read the accounts from") {
		t.Fatalf("errors: %q", errs)
	}
	// Accounts in hand: a lookup that did not fail reads nothing.
	d.cur.Store(newSet([]Account{{User: "alice", Host: "%"}}))
	n := d.Reads()
	if _, ok := d.Lookup(ctx, "alice", "10.0.0.1", false); !ok || d.Reads() != n {
		t.Fatalf("alice: %v, reads %d -> %d", ok, n, d.Reads())
	}
	// After Invalidate the next lookup reads at once; the failed read
	// keeps alice.
	d.Invalidate()
	if _, ok := d.Lookup(ctx, "alice", "10.0.0.1", false); !ok || d.Reads() != n+1 {
		t.Fatalf("after Invalidate: %v, reads %d -> %d", ok, n, d.Reads())
	}
}
