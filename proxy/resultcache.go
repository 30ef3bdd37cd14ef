package proxy

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/router"
)

// The result cache keeps the answers of hot read-only statements for a
// few seconds (result_cache_rules, or a /*+ cache(ttl) */ hint): the
// packets a client was sent, kept as they were and sent again to the next
// client that asks the same (same text, user, database, session state and
// protocol options). Never inside a transaction or on a pinned connection;
// a write through this instance to a table makes its entries stale.
// Bounded by result_cache_mb (least recently used out first, with a
// second chance for entries hit since the last sweep) and
// result_cache_entry_kb per answer.

// resultCache is the server's cache; its size and rules come from the
// running config (cacheRules).
type resultCache struct {
	mu      sync.RWMutex
	entries map[string]*cacheEntry
	head    cacheEntry // the list of entries, most recently stored first
	bytes   int64
	max     int64
	// Table generations: a write to a table bumps its own; a write whose
	// tables are unknown bumps global. An entry is valid while those it
	// was filled under are unchanged.
	gens   map[string]uint64
	global uint64
	on     atomic.Bool // result_cache_mb > 0: writes must invalidate

	hits, misses, stores, evictions, invalidations atomic.Int64
}

type cacheEntry struct {
	key        string
	packets    []byte
	rows       uint64
	expires    int64 // unix nanos
	ttl        time.Duration
	refreshing atomic.Bool // expired, and a session runs the statement again
	tables     []string
	gens       []uint64
	global     uint64
	used       atomic.Bool // hit since the last sweep (second chance)
	prev, next *cacheEntry
}

func newResultCache() *resultCache {
	c := &resultCache{entries: map[string]*cacheEntry{}, gens: map[string]uint64{}}
	c.head.prev, c.head.next = &c.head, &c.head
	return c
}

// cacheRules are a config's cache settings, compiled.
type cacheRules struct {
	maxEntry int
	digests  map[uint64]time.Duration // digest id -> TTL
	tables   map[string]time.Duration // db.table (lower case) -> TTL
	names    []string                 // the tables' names without db, for a quick look at a statement's text
}

// newCacheRules compiles cfg's cache settings; nil when the cache is off.
func newCacheRules(cfg *config.Config) *cacheRules {
	if cfg.ResultCacheMB <= 0 {
		return nil
	}
	r := &cacheRules{maxEntry: cfg.ResultCacheEntryKB << 10, digests: map[uint64]time.Duration{}, tables: map[string]time.Duration{}}
	for _, rule := range cfg.ResultCacheRules {
		if rule.Digest != "" {
			id, _ := strconv.ParseUint(rule.Digest, 16, 64) // validated: 16 hex digits
			r.digests[id] = rule.TTL.D()
		} else {
			t := strings.ToLower(rule.Table)
			r.tables[t] = rule.TTL.D()
			_, name, _ := strings.Cut(t, ".")
			r.names = append(r.names, name)
		}
	}
	return r
}

// resize sets the memory bound, dropping entries to fit.
func (c *resultCache) resize(mb int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.max = int64(mb) << 20
	c.on.Store(mb > 0)
	c.evictLocked(0)
}

// get returns the packets stored under key if they are still valid.
func (c *resultCache) get(key []byte, now time.Time) (*cacheEntry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e := c.entries[string(key)]
	if e == nil || e.global != c.global {
		c.misses.Add(1)
		return nil, false
	}
	for i, t := range e.tables {
		if c.gens[t] != e.gens[i] {
			c.misses.Add(1)
			return nil, false
		}
	}
	if ns := now.UnixNano(); ns >= e.expires {
		// Expired: the first to see it runs the statement again; the
		// others are answered from it meanwhile (for at most another
		// TTL), so the backend sees one statement, not one per client.
		if ns >= e.expires+int64(e.ttl) || e.refreshing.CompareAndSwap(false, true) {
			c.misses.Add(1)
			return nil, false
		}
	}
	e.used.Store(true)
	c.hits.Add(1)
	return e, true
}

// generations returns the current generations of tables, to fill an entry
// under.
func (c *resultCache) generations(tables []string) ([]uint64, uint64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	gens := make([]uint64, len(tables))
	for i, t := range tables {
		gens[i] = c.gens[t]
	}
	return gens, c.global
}

// put stores a copy of packets under key for ttl, valid while tables keep
// the generations gens (and global) read before the statement ran.
// The answer is as old as the statement: its TTL runs from start.
func (c *resultCache) put(key string, packets []byte, rows uint64, start time.Time, ttl time.Duration, tables []string, gens []uint64, global uint64) {
	e := &cacheEntry{key: key, packets: append([]byte(nil), packets...), rows: rows, expires: start.Add(ttl).UnixNano(), ttl: ttl,
		tables: tables, gens: gens, global: global}
	size := e.size()
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > c.max {
		return
	}
	if old := c.entries[key]; old != nil {
		if old.expires > e.expires && old.global == global && slices.Equal(old.gens, gens) {
			return // a fill that began later is there already
		}
		c.removeLocked(old)
	}
	c.evictLocked(size)
	c.entries[key] = e
	e.next, e.prev = c.head.next, &c.head
	e.next.prev, c.head.next = e, e
	c.bytes += size
	c.stores.Add(1)
}

// size is what an entry counts against result_cache_mb.
func (e *cacheEntry) size() int64 {
	n := len(e.key) + len(e.packets) + 8*len(e.gens) + 128
	for _, t := range e.tables {
		n += len(t) + 16
	}
	return int64(n)
}

// evictLocked drops entries, oldest first (those hit since the last sweep
// get a second chance), until need more bytes fit.
func (c *resultCache) evictLocked(need int64) {
	for c.bytes+need > c.max && c.head.prev != &c.head {
		e := c.head.prev
		if e.used.Swap(false) {
			// Hit lately: to the front, once per sweep (the flag is
			// cleared, so the loop ends).
			e.prev.next, e.next.prev = e.next, e.prev
			e.next, e.prev = c.head.next, &c.head
			e.next.prev, c.head.next = e, e
			continue
		}
		c.removeLocked(e)
		c.evictions.Add(1)
	}
}

func (c *resultCache) removeLocked(e *cacheEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	delete(c.entries, e.key)
	c.bytes -= e.size()
}

// invalidate makes the entries that read tables stale (all of them when
// tables are unknown, nil).
func (c *resultCache) invalidate(tables []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.invalidations.Add(1)
	if tables == nil {
		c.global++
		return
	}
	for _, t := range tables {
		c.gens[t]++
	}
}

// stats are the cache's counters for the metrics.
func (c *resultCache) stats() (entries int, bytes int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries), c.bytes
}

// Session side.

// cacheUse is a session's use of the result cache: the answers it looks
// up and fills, and the stale entries its writes make.
type cacheUse struct {
	s      *Session
	keyBuf []byte // scratch for keys
	// The tables the open transaction wrote (txWroteAll: unknown ones),
	// whose cache entries go stale again when it ends.
	txWrote    []string
	txWroteAll bool
}

// ttl is how long statement sql's answer may be cached, and whether
// to look: its hint's TTL, its digest's rule, or (maybe: confirmed by
// cacheTables before filling) a rule of a table whose name it holds.
func (u *cacheUse) ttl(r *cacheRules, sql string, info router.Info) (ttl time.Duration, byTable bool) {
	s := u.s
	if arg, ok := selectHint(sql, info, "cache"); ok {
		if d, err := time.ParseDuration(arg); err == nil && d > 0 {
			return d, false
		}
		return 0, false
	}
	if len(r.digests) > 0 {
		if d, ok := r.digests[s.digestID(sql)]; ok {
			return d, false
		}
	}
	for _, name := range r.names {
		if containsFold(sql, name) {
			return time.Nanosecond, true // decided once its tables are known
		}
	}
	return 0, false
}

// cacheable reports whether statement sql may be answered from the cache
// or fill it: a plain SELECT (no variables, session functions, locks or
// FOUND_ROWS), outside a transaction, on no pinned connection (temporary
// tables), without compression.
func (u *cacheUse) cacheable(info router.Info) bool {
	s := u.s
	const not = router.FlagMulti | router.FlagUserVar | router.FlagSessionFunc | router.FlagGetLock |
		router.FlagCalcFoundRows | router.FlagSysVar | router.FlagMasterOnly | router.FlagTemporary
	return info.Kind == router.KindSelect && info.Flags&not == 0 && !s.lease.Holding() && s.lease.Pinned() == nil &&
		s.c.Packets().Compression() == wire.CompressNone
}

// key is the key of sql's answer for this session: who asks, where,
// with what session state and protocol options, and the exact text.
func (u *cacheUse) key(sql string) []byte {
	s := u.s
	caps, ext := s.c.Caps(), s.c.GreetExt()
	k := append(u.keyBuf[:0], s.user...)
	k = append(k, 0)
	k = append(k, s.vars.DB...)
	k = append(k, 0)
	k = append(k, s.vars.State.Key()...)
	k = append(k, 0, byte(caps), byte(caps>>8), byte(caps>>16), byte(caps>>24),
		byte(ext), byte(ext>>8), byte(ext>>16), byte(ext>>24))
	k = append(k, sql...)
	u.keyBuf = k
	return k
}

// lookup answers sql from the cache if it can: handled is true when
// it did. Otherwise, when sql's answer may be cached, fill is what to
// call once it ran (nil: nothing to keep).
func (u *cacheUse) lookup(sql string, info router.Info) (handled bool, fill func(error), err error) {
	s := u.s
	r := s.snap.cacheRules
	if r == nil || !u.cacheable(info) || s.cl.More() {
		// A statement of a batch but its last: its answer ends with
		// SERVER_MORE_RESULTS_EXISTS (batch.go), which a cached answer
		// does not say, nor may a kept one.
		return false, nil, nil
	}
	ttl, byTable := u.ttl(r, sql, info)
	if ttl <= 0 {
		return false, nil, nil
	}
	rc := s.srv.rcache
	key := u.key(sql)
	if e, ok := rc.get(key, time.Now()); ok {
		s.tr.Sent(e.rows, 0)
		s.tr.cached = true
		s.last.RowCount, s.last.FoundRows = -1, e.rows // as after the SELECT
		return true, nil, s.c.Packets().WriteCaptured(e.packets)
	}
	tables, ok := s.getParser().Tables(sql, s.vars.DB)
	if !ok {
		return false, nil, nil
	}
	if byTable {
		ttl = 0
		for _, t := range tables {
			if d, ok := r.tables[t]; ok && (ttl == 0 || d < ttl) {
				ttl = d
			}
		}
		if ttl == 0 {
			return false, nil, nil
		}
	}
	gens, global := rc.generations(tables)
	skey := string(key)
	rows, start := s.tr.rows, s.tr.start
	s.c.Packets().StartCapture(r.maxEntry)
	return false, func(err error) {
		packets, ok := s.c.Packets().StopCapture()
		if ok && err == nil && !hasErrPacket(packets) {
			rc.put(skey, packets, s.tr.rows-rows, start, ttl, tables, gens, global)
		}
	}, nil
}

// hasErrPacket reports whether packets (as a capture keeps them) hold an
// ERR packet: a row never starts with 0xff.
func hasErrPacket(packets []byte) bool {
	for len(packets) >= 5 {
		n := int(packets[0]) | int(packets[1])<<8 | int(packets[2])<<16
		if packets[4] == wire.ErrHeader {
			return true
		}
		if 4+n > len(packets) {
			return true // cut: not a whole answer
		}
		packets = packets[4+n:]
	}
	return len(packets) != 0
}

// cacheWrites reports whether a statement may change the rows of tables
// whose answers the cache holds.
func cacheWrites(info router.Info) bool {
	switch info.Kind {
	case router.KindInsert, router.KindUpdate, router.KindDelete, router.KindReplace, router.KindDDL,
		router.KindCall, router.KindLoad, router.KindExecute:
		return true
	}
	return info.Flags&router.FlagMulti != 0
}

// written are the tables statement sql (classified as info) may
// write, read before it runs (LOAD DATA's file reuses its buffer); nil
// when they are unknown (a CALL, an EXECUTE, a batch): every table.
func (u *cacheUse) written(sql string, info router.Info) []string {
	s := u.s
	if info.Kind == router.KindCall || info.Kind == router.KindExecute || info.Flags&router.FlagMulti != 0 {
		return nil
	}
	tables, ok := s.getParser().Tables(sql, s.vars.DB)
	if !ok || len(tables) == 0 {
		return nil
	}
	return tables
}

// wrote makes the cache entries of tables (nil: all) stale once a write
// to them ran. Inside a transaction it does so again when the transaction
// ends (endTx): another session may cache what was committed before
// in between.
func (u *cacheUse) wrote(tables []string) {
	s := u.s
	s.srv.rcache.invalidate(tables)
	if s.lease.InTx() {
		if tables == nil {
			u.txWroteAll = true
		}
		u.txWrote = append(u.txWrote, tables...)
	}
}

// endTx makes stale, once the session's transaction ended, the
// entries of the tables it wrote.
func (u *cacheUse) endTx() {
	s := u.s
	if s.lease.InTx() {
		return
	}
	if u.txWroteAll {
		s.srv.rcache.invalidate(nil)
	} else {
		s.srv.rcache.invalidate(u.txWrote)
	}
	u.txWrote, u.txWroteAll = nil, false
}
