package shard

import (
	"fmt"
	"hash/crc32"
	"unsafe"
)

// hashRule is kingshard's hash: key mod N over the global sub-tables.
type hashRule struct {
	tableSet
	n uint64
}

func newHash(tables []SubTable) *hashRule {
	return &hashRule{tableSet: tableSet{typ: TypeHash, tables: tables}, n: uint64(len(tables))}
}

// Find follows kingshard's HashValue (proxy/router/shard.go): integers are
// reinterpreted as uint64 (so negatives wrap), strings that ParseUint
// accepts are their number, other strings are crc32 IEEE. A []byte is read
// as a string: kingshard's []byte branch (always crc32) is unreachable from
// SQL, whose literals reach the router only as int64 or string
// (planbuilder.go getBoundValue), and reading bytes and strings alike keeps
// a prepared-statement parameter on the same sub-table as the same literal.
// Floats are errors: kingshard fails to parse "2.5" as an integer literal.
func (r *hashRule) Find(v any) (int, error) {
	var h uint64
	switch x := v.(type) {
	case int64:
		h = uint64(x)
	case int:
		h = uint64(x)
	case uint64:
		h = x
	case string:
		h = hashText(x)
	case []byte:
		h = hashBytes(x)
	case nil:
		return -1, ErrNullKey
	case float64:
		return -1, fmt.Errorf("hash rule: %w: float %v (kingshard hashes only integers and strings)", ErrKeyType, x)
	default:
		return -1, keyTypeError(TypeHash, v)
	}
	return int(h % r.n), nil
}

// FindInt is Find for an int64 key.
func (r *hashRule) FindInt(k int64) (int, error) { return int(uint64(k) % r.n), nil }

// FindRange returns every sub-table: hash has no order.
func (r *hashRule) FindRange(lo, hi Bound) ([]int, error) { return r.all(), nil }

func hashText(s string) uint64 {
	if n, sign, ok := decimal(s); ok && sign == 0 {
		return n
	}
	// crc32 only reads the bytes; viewing the string in place avoids the
	// copy (and the allocation) of []byte(s).
	return uint64(crc32.ChecksumIEEE(unsafe.Slice(unsafe.StringData(s), len(s))))
}

func hashBytes(b []byte) uint64 {
	if n, sign, ok := decimal(b); ok && sign == 0 {
		return n
	}
	return uint64(crc32.ChecksumIEEE(b))
}

// decimal reads an optional sign ('+' or '-', returned in sign, else 0)
// followed by one or more ASCII digits, with no spaces or underscores, and
// returns the magnitude. ok is false for anything else or a magnitude past
// MaxUint64. With sign == 0 it accepts exactly what strconv.ParseUint(s, 10,
// 64) accepts, without the allocation strconv makes for its error.
func decimal[T ~string | ~[]byte](s T) (mag uint64, sign byte, ok bool) {
	i := 0
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		sign = s[0]
		i = 1
	}
	if i == len(s) {
		return 0, 0, false
	}
	const cutoff = (1<<64-1)/10 + 1
	for ; i < len(s); i++ {
		c := s[i] - '0'
		if c > 9 {
			return 0, 0, false
		}
		if mag >= cutoff {
			return 0, 0, false
		}
		next := mag*10 + uint64(c)
		if next < mag*10 {
			return 0, 0, false
		}
		mag = next
	}
	return mag, sign, true
}
