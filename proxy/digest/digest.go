// Package digest keeps statement digests: for each normalized statement
// (its shape, the plan cache key) how often it ran, how it ended and where
// its time went.
//
// Recording takes no lock: the table is a sync.Map read without locking
// (a new shape is stored once), and an entry's counters are atomics. The
// table is bounded: once it holds Size shapes, statements of new shapes
// are counted in one "other" entry, as MySQL's performance_schema does.
// Reset swaps in an empty table.
package digest

import (
	"bytes"
	"hash/fnv"
	"math/bits"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"
)

// Stage is a part of a statement's time.
type Stage int

// The stages, in the order a statement goes through them. They split the
// statement's time: their sum is its total.
const (
	Parse   Stage = iota // classify, normalize, plan lookup (and the TiDB parse on a plan cache miss)
	Route                // bind the plan: sub-tables, rewritten SQL, node choice
	Wait                 // get a backend connection ready: pool wait, dial, session state sync
	Backend              // send the statement and wait for the first packet of the answer
	Relay                // relay the rest of the answer to the client
	NumStages
)

var stageNames = [NumStages]string{"parse", "route", "pool_wait", "backend", "relay"}

func (s Stage) String() string { return stageNames[s] }

// MaxText bounds a digest's text (the shape): longer shapes are cut, so
// statements that differ only past it share a digest.
const MaxText = 1024

// OtherText is the text of the entry that counts statements of shapes that
// found the table full.
const OtherText = "(other: the digest table is full; raise digest_size)"

// Buckets is the number of latency histogram buckets. Bucket 0 holds times
// under 8.192 µs; then each power of two is split in two halves, up to
// bucket Buckets-1 which holds everything from about 69 s.
const Buckets = 48

const firstBound = 1 << 13 // ns, upper bound of bucket 0

func bucket(ns int64) int {
	if ns < firstBound {
		return 0
	}
	k := bits.Len64(uint64(ns)) // ns in [2^(k-1), 2^k)
	half := int(ns>>(k-2)) & 1  // in the upper half of that range
	return min(2*(k-14)+half+1, Buckets-1)
}

// bucketLow is the lower bound of bucket i in ns.
func bucketLow(i int) int64 {
	if i == 0 {
		return 0
	}
	k := (i-1)/2 + 14
	return int64(2+(i-1)%2) << (k - 2)
}

// Sample is what one statement did.
type Sample struct {
	Start          time.Time
	Total          time.Duration
	Stages         [NumStages]time.Duration
	Rows, Affected uint64 // rows sent to the client; rows changed
	Bytes          uint64 // bytes sent to the client
	Err            bool
	Cached         bool // answered from the result cache
}

// Entry is one digest's counters.
type Entry struct {
	ID    uint64 // FNV-1a of the key: stable across restarts
	DB    string // current database when the statement ran
	Text  string // the shape
	other bool

	count, errors, cached atomic.Uint64
	rows, affected, bytes atomic.Uint64
	total, minNs, maxNs   atomic.Int64
	first, last           atomic.Int64 // unix ns
	stages                [NumStages]atomic.Int64
	hist                  [Buckets]atomic.Uint64
}

// Record adds a sample: one execution of the statement.
func (e *Entry) Record(s *Sample) {
	ns := int64(s.Total)
	e.count.Add(1)
	if s.Err {
		e.errors.Add(1)
	}
	if s.Cached {
		e.cached.Add(1)
	}
	e.add(s)
	for cur := e.minNs.Load(); (cur == 0 || ns < cur) && !e.minNs.CompareAndSwap(cur, max(ns, 1)); cur = e.minNs.Load() {
	}
	for cur := e.maxNs.Load(); ns > cur && !e.maxNs.CompareAndSwap(cur, ns); cur = e.maxNs.Load() {
	}
	e.hist[bucket(ns)].Add(1)
	if e.first.Load() == 0 {
		e.first.CompareAndSwap(0, s.Start.UnixNano())
	}
}

// RecordFetch adds a cursor fetch of an execution already recorded: its
// rows, bytes and time count (total and stages), not as another call, and
// not in min, max or the histogram, which are per execution.
func (e *Entry) RecordFetch(s *Sample) {
	if s.Err {
		e.errors.Add(1)
	}
	e.add(s)
}

func (e *Entry) add(s *Sample) {
	if s.Rows != 0 {
		e.rows.Add(s.Rows)
	}
	if s.Affected != 0 {
		e.affected.Add(s.Affected)
	}
	e.bytes.Add(s.Bytes)
	e.total.Add(int64(s.Total))
	for i, d := range s.Stages {
		if d != 0 {
			e.stages[i].Add(int64(d))
		}
	}
	e.last.Store(s.Start.Add(s.Total).UnixNano())
}

// IsOther reports whether e is the entry that counts the statements of
// shapes that found the table full.
func (e *Entry) IsOther() bool { return e.other }

// Stats is a copy of an entry's counters.
type Stats struct {
	ID       string `json:"digest"` // 16 hex digits
	Schema   string `json:"schema"`
	Text     string `json:"text"`
	Count    uint64 `json:"count"`
	Errors   uint64 `json:"errors"`
	Cached   uint64 `json:"cache_hits"` // calls answered from the result cache
	Rows     uint64 `json:"rows_sent"`
	Affected uint64 `json:"rows_affected"`
	Bytes    uint64 `json:"bytes_sent"`

	Total, Min, Max, Avg, P50, P99 time.Duration            `json:"-"`
	Stages                         [NumStages]time.Duration `json:"-"`

	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
}

// Stats copies e's counters. Taken while statements run, the copy is not
// one instant's, but each counter is exact.
func (e *Entry) Stats() Stats {
	st := Stats{
		ID: FormatID(e.ID), Schema: e.DB, Text: e.Text,
		Count: e.count.Load(), Errors: e.errors.Load(), Cached: e.cached.Load(), Rows: e.rows.Load(), Affected: e.affected.Load(), Bytes: e.bytes.Load(),
		Total: time.Duration(e.total.Load()), Min: time.Duration(e.minNs.Load()), Max: time.Duration(e.maxNs.Load()),
		FirstSeen: time.Unix(0, e.first.Load()), LastSeen: time.Unix(0, e.last.Load()),
	}
	if st.Count > 0 {
		st.Avg = st.Total / time.Duration(st.Count)
	}
	for i := range st.Stages {
		st.Stages[i] = time.Duration(e.stages[i].Load())
	}
	var h [Buckets]uint64
	var n uint64
	for i := range h {
		h[i] = e.hist[i].Load()
		n += h[i]
	}
	st.P50 = quantile(&h, n, 0.50, st.Min, st.Max)
	st.P99 = quantile(&h, n, 0.99, st.Min, st.Max)
	return st
}

// quantile estimates the q-quantile from the histogram (n samples):
// linear within the bucket that holds it, kept within [lo, hi] (the
// observed min and max).
func quantile(h *[Buckets]uint64, n uint64, q float64, lo, hi time.Duration) time.Duration {
	if n == 0 {
		return 0
	}
	rank := q * float64(n)
	var seen float64
	for i, c := range h {
		if c == 0 {
			continue
		}
		if seen+float64(c) >= rank {
			low, high := float64(bucketLow(i)), float64(bucketLow(i+1))
			if i == Buckets-1 {
				high = float64(hi)
			}
			v := time.Duration(low + (high-low)*(rank-seen)/float64(c))
			return min(max(v, lo), hi)
		}
		seen += float64(c)
	}
	return hi
}

// Millis is d in milliseconds, to the microsecond (how digests and logs
// show times).
func Millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// FormatID is an ID as 16 hex digits.
func FormatID(id uint64) string {
	s := strconv.FormatUint(id, 16)
	for len(s) < 16 {
		s = "0" + s
	}
	return s
}

// Key cuts a digest key (database, NUL, digest text) to MaxText bytes of
// text, at a character boundary. The result may alias key.
func Key(key []byte) []byte {
	db := bytes.IndexByte(key, 0)
	if db < 0 || len(key)-db-1 <= MaxText {
		return key
	}
	end := db + 1 + MaxText
	for end > db+1 && !utf8.RuneStart(key[end]) {
		end--
	}
	return key[:end]
}

// ID is the digest ID of a key cut by Key.
func ID(key string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(unsafe.Slice(unsafe.StringData(key), len(key)))
	return h.Sum64()
}

// table is one generation of digests.
type table struct {
	m     sync.Map // string key -> *Entry
	n     atomic.Int64
	other *Entry
	gen   uint64
	since time.Time
}

// Digests is the digest table of a proxy.
type Digests struct {
	cur  atomic.Pointer[table]
	gens atomic.Uint64
	size atomic.Int64 // 0: off
}

// New returns a table holding at most size digests (0: off).
func New(size int) *Digests {
	d := &Digests{}
	d.Reset()
	d.SetSize(size)
	return d
}

// SetSize changes the bound (on reload); 0 turns digests off. A smaller
// bound keeps the digests already there and stops adding new ones.
func (d *Digests) SetSize(size int) { d.size.Store(int64(max(size, 0))) }

// On reports whether digests are kept.
func (d *Digests) On() bool { return d.size.Load() > 0 }

// Lookup returns the entry for a digest key (cut by Key here), adding it
// if new; nil when digests are off. key is not kept.
func (d *Digests) Lookup(key []byte) *Entry {
	size := d.size.Load()
	if size == 0 {
		return nil
	}
	key = Key(key)
	return d.cur.Load().lookup(unsafe.String(unsafe.SliceData(key), len(key)), size)
}

// lookup finds or adds key, which may alias a buffer: it is not kept.
func (t *table) lookup(key string, size int64) *Entry {
	if e, ok := t.m.Load(key); ok {
		return e.(*Entry)
	}
	if t.n.Add(1) > size {
		t.n.Add(-1)
		return t.other
	}
	k := strings.Clone(key) // the map key; DB and Text are parts of it
	e := newEntry(k)
	if old, loaded := t.m.LoadOrStore(k, e); loaded {
		t.n.Add(-1)
		return old.(*Entry)
	}
	return e
}

func newEntry(key string) *Entry {
	db := strings.IndexByte(key, 0)
	if db < 0 {
		return &Entry{ID: ID(key), Text: key}
	}
	return &Entry{ID: ID(key), DB: key[:db], Text: key[db+1:]}
}

// Ref caches a statement's entry (a prepared statement's: looked up once,
// not at every execution). Key is a digest key already cut by Key.
type Ref struct {
	Key string
	gen uint64
	e   *Entry
}

// Get returns r's entry in the current table (nil when digests are off).
func (d *Digests) Get(r *Ref) *Entry {
	size := d.size.Load()
	if size == 0 || r.Key == "" {
		return nil
	}
	t := d.cur.Load()
	if r.e != nil && r.gen == t.gen {
		return r.e
	}
	e := t.lookup(r.Key, size)
	if e != t.other { // "other" is not kept: a reset or a bigger digest_size may make room
		r.gen, r.e = t.gen, e
	}
	return e
}

// Reset drops every digest.
func (d *Digests) Reset() {
	d.cur.Store(&table{other: &Entry{Text: OtherText, other: true}, gen: d.gens.Add(1), since: time.Now()})
}

// Since is when the current table was started (start or last Reset).
func (d *Digests) Since() time.Time { return d.cur.Load().since }

// Len is the number of digests held (the "other" entry not counted).
func (d *Digests) Len() int { return int(d.cur.Load().n.Load()) }

// All returns every digest's stats, the "other" entry last if it counted
// anything.
func (d *Digests) All() []Stats {
	t := d.cur.Load()
	var out []Stats
	t.m.Range(func(_, v any) bool {
		out = append(out, v.(*Entry).Stats())
		return true
	})
	if t.other.count.Load() > 0 {
		out = append(out, t.other.Stats())
	}
	return out
}

// Orders are the orders Sort knows.
var Orders = []string{"total", "count", "errors", "avg", "max", "p99", "rows"}

// Sort orders stats by the named column, largest first; false for an
// unknown order.
func Sort(stats []Stats, by string) bool {
	var key func(s *Stats) float64
	switch by {
	case "total", "":
		key = func(s *Stats) float64 { return float64(s.Total) }
	case "count":
		key = func(s *Stats) float64 { return float64(s.Count) }
	case "errors":
		key = func(s *Stats) float64 { return float64(s.Errors) }
	case "avg":
		key = func(s *Stats) float64 { return float64(s.Avg) }
	case "max":
		key = func(s *Stats) float64 { return float64(s.Max) }
	case "p99":
		key = func(s *Stats) float64 { return float64(s.P99) }
	case "rows":
		key = func(s *Stats) float64 { return float64(s.Rows + s.Affected) }
	default:
		return false
	}
	sort.SliceStable(stats, func(i, j int) bool {
		ki, kj := key(&stats[i]), key(&stats[j])
		if ki != kj {
			return ki > kj
		}
		return stats[i].ID < stats[j].ID
	})
	return true
}

// Top returns the n digests (all when n <= 0) first by the named order.
func (d *Digests) Top(n int, by string) ([]Stats, bool) {
	all := d.All()
	if !Sort(all, by) {
		return nil, false
	}
	if n > 0 && len(all) > n {
		all = all[:n]
	}
	return all, true
}
