package router

import (
	"sync"
	"sync/atomic"
)

// planCache maps statement shapes to plans.
//
// A hit takes no lock and allocates nothing: plans live in a read-only map
// behind an atomic pointer, looked up with the caller's key bytes. New
// plans go to a dirty map under a mutex (only misses and the first uses of
// a new shape touch it) and are promoted into a fresh read map once the
// dirty map has been hit as many times as it has entries, as sync.Map does,
// so the copying is amortised over the lookups it saves.
//
// The size is bounded: past max entries, a promotion drops about a tenth.
type planCache struct {
	read   atomic.Pointer[map[string]*Plan]
	ndirty atomic.Int64 // len(dirty), readable without the lock

	mu        sync.Mutex
	dirty     map[string]*Plan
	dirtyHits int

	max     int
	size    atomic.Int64
	hits    atomic.Int64
	misses  atomic.Int64
	evicted atomic.Int64
}

// CacheStats are plan cache counters.
type CacheStats struct {
	Size, Hits, Misses, Evicted int64
}

func newPlanCache(size int) *planCache {
	if size <= 0 {
		size = 4096
	}
	c := &planCache{max: size, dirty: map[string]*Plan{}}
	c.read.Store(&map[string]*Plan{})
	return c
}

func (c *planCache) get(key []byte) *Plan {
	if pl, ok := (*c.read.Load())[string(key)]; ok {
		c.hits.Add(1)
		return pl
	}
	if c.ndirty.Load() == 0 {
		c.misses.Add(1)
		return nil
	}
	c.mu.Lock()
	pl := c.dirty[string(key)]
	if pl != nil {
		c.dirtyHits++
		if c.dirtyHits >= len(c.dirty) {
			c.promote()
		}
	}
	c.mu.Unlock()
	if pl == nil {
		c.misses.Add(1)
		return nil
	}
	c.hits.Add(1)
	return pl
}

func (c *planCache) put(key string, p *Plan) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := (*c.read.Load())[key]; ok {
		return
	}
	if _, ok := c.dirty[key]; ok {
		return
	}
	c.dirty[key] = p
	c.ndirty.Store(int64(len(c.dirty)))
	c.size.Add(1)
	if len(*c.read.Load())+len(c.dirty) > c.max {
		// Full: promotion evicts a tenth, so this happens once per
		// max/10 new shapes.
		c.promote()
	}
}

// promote merges the dirty map into a new read map. Called with mu held.
func (c *planCache) promote() {
	old := *c.read.Load()
	drop := 0
	if n := len(old) + len(c.dirty); n > c.max {
		drop = max(n-c.max+c.max/10, 1)
	}
	m := make(map[string]*Plan, len(old)+len(c.dirty)-drop)
	for k, v := range old {
		if drop > 0 {
			drop-- // map order is unspecified: an arbitrary victim
			c.evicted.Add(1)
			continue
		}
		m[k] = v
	}
	for k, v := range c.dirty {
		if drop > 0 {
			drop--
			c.evicted.Add(1)
			continue
		}
		m[k] = v
	}
	c.read.Store(&m)
	c.size.Store(int64(len(m)))
	c.dirty = map[string]*Plan{}
	c.ndirty.Store(0)
	c.dirtyHits = 0
}

func (c *planCache) stats() CacheStats {
	return CacheStats{Size: c.size.Load(), Hits: c.hits.Load(), Misses: c.misses.Load(), Evicted: c.evicted.Load()}
}
