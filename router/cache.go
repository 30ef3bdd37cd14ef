package router

import (
	"sync"
	"sync/atomic"
)

// planCache maps statement shapes to plans. Lookups take no lock
// (sync.Map's read path); the size is bounded by dropping about a tenth of
// the entries when it is exceeded, which is rare once an application's
// statement shapes are known.
type planCache struct {
	m       sync.Map // string -> *Plan
	n       atomic.Int64
	max     int64
	hits    atomic.Int64
	misses  atomic.Int64
	evicted atomic.Int64
	evictMu sync.Mutex
}

// CacheStats are plan cache counters.
type CacheStats struct {
	Size, Hits, Misses, Evicted int64
}

func newPlanCache(size int) *planCache {
	if size <= 0 {
		size = 4096
	}
	return &planCache{max: int64(size)}
}

func (c *planCache) get(key string) *Plan {
	if v, ok := c.m.Load(key); ok {
		c.hits.Add(1)
		return v.(*Plan)
	}
	c.misses.Add(1)
	return nil
}

func (c *planCache) put(key string, p *Plan) {
	if _, loaded := c.m.LoadOrStore(key, p); loaded {
		return
	}
	if c.n.Add(1) <= c.max {
		return
	}
	if !c.evictMu.TryLock() {
		return
	}
	defer c.evictMu.Unlock()
	drop := c.max / 10
	if drop < 1 {
		drop = 1
	}
	c.m.Range(func(k, _ any) bool {
		if drop <= 0 {
			return false
		}
		c.m.Delete(k)
		c.n.Add(-1)
		c.evicted.Add(1)
		drop--
		return true
	})
}

func (c *planCache) stats() CacheStats {
	return CacheStats{Size: c.n.Load(), Hits: c.hits.Load(), Misses: c.misses.Load(), Evicted: c.evicted.Load()}
}
