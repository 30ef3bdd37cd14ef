package shard

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Rule type names, as written in ks.yaml's shard.type.
const (
	TypeHash           = "hash"
	TypeRange          = "range"
	TypeDateYear       = "date_year"
	TypeDateMonth      = "date_month"
	TypeDateDay        = "date_day"
	TypeList           = "list"
	TypeConsistentHash = "consistent_hash"
	// TypeGlobal is not a split: the table is copied whole on every node of
	// its rule, under its own name (see Global).
	TypeGlobal = "global"
)

// Types lists every rule type New accepts.
var Types = []string{TypeHash, TypeRange, TypeDateYear, TypeDateMonth, TypeDateDay, TypeList, TypeConsistentHash, TypeGlobal}

// maxSubTables bounds one rule, so that a typo such as a date_day range over
// centuries fails at load instead of allocating millions of sub-tables.
const maxSubTables = 100_000

// Errors returned by Find and FindRange, wrapped with the value and rule.
var (
	// ErrNullKey: the key is SQL NULL, which no rule can place.
	ErrNullKey = errors.New("shard key cannot be NULL")
	// ErrKeyType: the value's Go type or text is not one the rule reads
	// (a float on a hash rule, a malformed date, a non-integer on range).
	ErrKeyType = errors.New("unsupported shard key value")
	// ErrKeyOutOfRange: the value is valid but no sub-table holds it
	// (past a range rule's end, outside every date_range, not in a list).
	ErrKeyOutOfRange = errors.New("shard key out of range")
)

// SubTable is one physical table of a rule.
type SubTable struct {
	Node   int    // index into the rule's node list
	Suffix string // "_0003", "_2015", "_201501", ...
}

// Bound is one end of a key range; Unbounded means -inf/+inf.
//
// A Value of nil that is not Unbounded is SQL NULL: no key compares true
// with it, so ordered rules return no sub-table.
type Bound struct {
	Value     any // int64, uint64, string, float64 (as extracted from SQL literals)
	Inclusive bool
	Unbounded bool
}

// Rule places shard-key values on sub-tables. Implementations are immutable
// and safe for concurrent use.
type Rule interface {
	// Type is the rule type name: "hash", "range", "date_year", ...
	Type() string
	// Tables returns all sub-tables in global index order. The slice is a
	// copy; callers that need it often should keep it.
	Tables() []SubTable
	// Find returns the index into Tables() of the sub-table holding key v.
	// v is int64, uint64, int, string, float64, []byte or nil (SQL NULL).
	// Errors wrap ErrNullKey, ErrKeyType or ErrKeyOutOfRange.
	Find(v any) (int, error)
	// FindRange returns the sorted, de-duplicated indexes that may hold
	// keys in [lo, hi] (respecting Inclusive/Unbounded). Rules without
	// order (hash, list, consistent_hash) return every index. It never
	// returns an error for an empty range: it returns nil. An error means a
	// bound could not be read (wrong type or malformed text).
	FindRange(lo, hi Bound) ([]int, error)
}

// IntFinder is implemented by rules that place an int64 key without boxing
// it in an interface (a heap allocation for most values): FindInt(k)
// answers exactly as Find(k). The router uses it for integer literals.
type IntFinder interface {
	FindInt(k int64) (int, error)
}

// Config is what New needs. It mirrors proxy/config.ShardConfig without
// importing it.
type Config struct {
	Type          string
	Nodes         int            // number of nodes
	Locations     []int          // sub-tables per node (hash, range, list, consistent_hash)
	TableRowLimit int            // range
	DateRange     []string       // date_*: one per node
	ListValues    map[string]int // list: value text -> sub-table index
	Location      *time.Location // date_* unix timestamps; nil = time.Local, as kingshard
}

// New validates c and builds its rule. Errors name the offending field.
//
// Fields a type does not use are ignored, as kingshard ignores them. For
// list and consistent_hash, empty Locations means one sub-table per node.
// A location of 0 (a node with no sub-table) is accepted as in kingshard, as
// long as the rule has at least one sub-table.
func New(c Config) (Rule, error) {
	if c.Nodes < 1 {
		return nil, configError(c.Type, "nodes", "at least one node is required, got %d", c.Nodes)
	}
	switch c.Type {
	case TypeHash, TypeRange, TypeList, TypeConsistentHash:
		tables, err := locationTables(c)
		if err != nil {
			return nil, err
		}
		switch c.Type {
		case TypeHash:
			return newHash(tables), nil
		case TypeRange:
			return newRange(c, tables)
		case TypeList:
			return newList(c, tables)
		default:
			return newConsistent(tables), nil
		}
	case TypeDateYear, TypeDateMonth, TypeDateDay:
		return newDate(c)
	case TypeGlobal:
		return newGlobal(c.Nodes), nil
	case "":
		return nil, configError(c.Type, "type", "required: one of %s", strings.Join(Types, ", "))
	default:
		return nil, configError(c.Type, "type", "unknown shard type %q: want one of %s", c.Type, strings.Join(Types, ", "))
	}
}

// locationTables numbers the sub-tables globally across the nodes, in node
// order, as kingshard's parseRule does.
func locationTables(c Config) ([]SubTable, error) {
	locs := c.Locations
	if len(locs) == 0 && (c.Type == TypeList || c.Type == TypeConsistentHash) {
		locs = make([]int, c.Nodes)
		for i := range locs {
			locs[i] = 1
		}
	}
	if len(locs) != c.Nodes {
		return nil, configError(c.Type, "locations", "has %d entries but there are %d nodes: want one per node", len(locs), c.Nodes)
	}
	total := 0
	for i, n := range locs {
		if n < 0 {
			return nil, configError(c.Type, fmt.Sprintf("locations[%d]", i), "must not be negative, got %d", n)
		}
		total += n
		if total > maxSubTables {
			return nil, configError(c.Type, "locations", "more than %d sub-tables", maxSubTables)
		}
	}
	if total == 0 {
		return nil, configError(c.Type, "locations", "the rule has no sub-table: at least one entry must be >= 1")
	}
	tables := make([]SubTable, 0, total)
	for node, n := range locs {
		for range n {
			tables = append(tables, SubTable{Node: node, Suffix: fmt.Sprintf("_%04d", len(tables))})
		}
	}
	return tables, nil
}

func configError(typ, field, format string, args ...any) error {
	if typ == "" {
		return fmt.Errorf("shard: %s: %s", field, fmt.Sprintf(format, args...))
	}
	return fmt.Errorf("shard: %s rule: %s: %s", typ, field, fmt.Sprintf(format, args...))
}

// tableSet is the part every rule shares.
type tableSet struct {
	typ    string
	tables []SubTable
}

func (t *tableSet) Type() string { return t.typ }

func (t *tableSet) Tables() []SubTable { return append([]SubTable(nil), t.tables...) }

// all returns every index, for rules without order.
func (t *tableSet) all() []int {
	out := make([]int, len(t.tables))
	for i := range out {
		out[i] = i
	}
	return out
}

// span returns the indexes first..last.
func span(first, last int) []int {
	if first > last {
		return nil
	}
	out := make([]int, 0, last-first+1)
	for i := first; i <= last; i++ {
		out = append(out, i)
	}
	return out
}

func keyTypeError(typ string, v any) error {
	return fmt.Errorf("%s rule: %w: type %T", typ, ErrKeyType, v)
}
