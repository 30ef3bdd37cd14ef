package shard

import (
	"fmt"
	"strconv"
)

// consistentRule is jump consistent hash (Lamping & Veach, "A Fast,
// Minimal Memory, Consistent Hash Algorithm", 2014) over the sub-tables, of
// FNV-1a 64 of the key's canonical text. Growing the rule from N to N+1
// sub-tables moves only about 1/(N+1) of the keys, all to the new one.
// kingshard has no such rule; this is keyshard's.
type consistentRule struct {
	tableSet
	n int64
}

func newConsistent(tables []SubTable) *consistentRule {
	return &consistentRule{tableSet: tableSet{typ: TypeConsistentHash, tables: tables}, n: int64(len(tables))}
}

// Find hashes the canonical text (see canonical), so 42 and "42" agree.
func (r *consistentRule) Find(v any) (int, error) {
	if v == nil {
		return -1, ErrNullKey
	}
	var buf [24]byte
	b, err := canonical(v, buf[:0])
	if err != nil {
		return -1, fmt.Errorf("consistent_hash rule: %w", err)
	}
	return int(jump(fnv1a64(b), r.n)), nil
}

// FindInt is Find for an int64 key.
func (r *consistentRule) FindInt(k int64) (int, error) {
	var buf [24]byte
	return int(jump(fnv1a64(strconv.AppendInt(buf[:0], k, 10)), r.n)), nil
}

// FindRange returns every sub-table: a hash has no order.
func (r *consistentRule) FindRange(lo, hi Bound) ([]int, error) { return r.all(), nil }

// fnv1a64 is hash/fnv's New64a, written out so that hashing a key does not
// allocate a hash.Hash64.
func fnv1a64(b []byte) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for _, c := range b {
		h ^= uint64(c)
		h *= prime
	}
	return h
}

// jump maps key to a bucket in [0, n), n >= 1.
func jump(key uint64, n int64) int64 {
	var b, j int64 = -1, 0
	for j < n {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return b
}
