package proxy

import (
	"testing"
	"time"
)

func TestResultCacheBounds(t *testing.T) {
	c := newResultCache()
	c.resize(1) // 1 MiB
	data := make([]byte, 300<<10)
	now := time.Now()
	for _, k := range []string{"a", "b", "c"} {
		gens, g := c.generations([]string{"db.t"})
		c.put(k, data, 1, time.Now(), time.Minute, []string{"db.t"}, gens, g)
	}
	if _, ok := c.get([]byte("a"), now); !ok { // a hit: a second chance
		t.Fatal("a is not cached")
	}
	gens, g := c.generations(nil)
	c.put("d", data, 1, time.Now(), time.Minute, nil, gens, g) // over 1 MiB: b goes, not a
	if _, ok := c.get([]byte("b"), now); ok {
		t.Error("b outlived the bound")
	}
	for _, k := range []string{"a", "c", "d"} {
		if _, ok := c.get([]byte(k), now); !ok {
			t.Errorf("%s was evicted", k)
		}
	}
	if n, b := c.stats(); n != 3 || b > 1<<20 || c.evictions.Load() != 1 {
		t.Errorf("entries %d, bytes %d, evictions %d", n, b, c.evictions.Load())
	}
	// Too big for the cache: not kept.
	c.put("e", make([]byte, 2<<20), 1, time.Now(), time.Minute, nil, gens, g)
	if _, ok := c.get([]byte("e"), now); ok {
		t.Error("an entry over the whole bound was kept")
	}
	// A write to db.t makes a and c stale, not d; unknown tables, all.
	c.invalidate([]string{"db.t"})
	if _, ok := c.get([]byte("a"), now); ok {
		t.Error("a survived a write to its table")
	}
	if _, ok := c.get([]byte("d"), now); !ok {
		t.Error("d went with a write to another table")
	}
	c.invalidate(nil)
	if _, ok := c.get([]byte("d"), now); ok {
		t.Error("d survived a write to unknown tables")
	}
	// Expiry: the first to see an entry expired runs the statement again
	// (a miss), the others are answered from it meanwhile, for at most
	// another TTL.
	gens, g = c.generations(nil)
	c.put("f", data[:10], 1, time.Now(), time.Second, nil, gens, g)
	later := time.Now().Add(1500 * time.Millisecond)
	if _, ok := c.get([]byte("f"), later); ok {
		t.Error("the first read of an expired entry was a hit")
	}
	if _, ok := c.get([]byte("f"), later); !ok {
		t.Error("a read while another refreshes was a miss")
	}
	if _, ok := c.get([]byte("f"), later.Add(time.Second)); ok {
		t.Error("an expired entry served past another TTL")
	}
}

func TestHasErrPacket(t *testing.T) {
	ok := []byte{1, 0, 0, 1, 1, 2, 0, 0, 2, 'a', 'b'}
	if hasErrPacket(ok) {
		t.Error("rows taken for an error")
	}
	if !hasErrPacket(append(ok, 3, 0, 0, 3, 0xff, 1, 2)) {
		t.Error("an ERR packet not seen")
	}
	if !hasErrPacket(ok[:7]) {
		t.Error("a cut answer taken as whole")
	}
}
