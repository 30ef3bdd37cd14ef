package merge

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/router"
)

// Source is one sub-table's result rows.
type Source interface {
	// Next returns the next row packet, or nil after the last. The row is
	// valid until the next call.
	Next() ([]byte, error)
}

// Config is one execution of a merge.
type Config struct {
	Spec          *router.MergeSpec
	Offset, Count int64 // LIMIT; Count < 0: none
	Args          []any // the statement's literal values
	Cols          []Column
	Binary        bool // rows are in the binary protocol (prepared statements)
	MaxRows       int  // groups a re-sort may hold
}

// Merger runs one merge.
type Merger struct {
	Config
	visible int // columns the client sees; the hidden ones follow
	keys    []keyCmp
	srcs    []Source
	rows    [][]byte
	cells   [][]cell
	starts  [][]int
	heap    []int
	out     func([]byte) error
	buf     []byte
	skip    int64
	left    int64 // rows still to send; < 0: no limit
	sent    uint64

	// grouped mode
	g      group
	aggCmp []keyCmp // MIN/MAX partial columns
	final  []finalRow
}

// keyCmp compares one column of two rows.
type keyCmp struct {
	col, weight int // cell indexes; weight < 0: none
	desc        bool
	how         cmpKind
	unsigned    bool
	typ         byte
	binary      bool
	collation   uint16
}

type cmpKind uint8

const (
	cmpBytes cmpKind = iota
	cmpWeight
	cmpInt
	cmpDec
	cmpFloat
	cmpTemporalBin
	cmpTime
)

// New prepares a merge over the given result columns (those of the
// sub-tables' statement: visible, then hidden).
func New(cfg Config) (*Merger, error) {
	m := &Merger{Config: cfg}
	sp := cfg.Spec
	m.visible = len(cfg.Cols) - sp.Hidden
	if m.visible < 0 || (sp.Visible >= 0 && m.visible != sp.Visible) {
		return nil, mergeErr("keyshard: sub-tables of %s returned %d columns, the merge expects %d", sp.Table, len(cfg.Cols), sp.Visible+sp.Hidden)
	}
	for _, k := range sp.Sort {
		col := m.visible + k.Col
		if k.Visible {
			if k.Col < 0 || k.Col >= m.visible {
				return nil, &mysql.MyError{Code: mysql.ER_BAD_FIELD_ERROR, State: "42S22",
					Message: fmt.Sprintf("Unknown column '%d' in 'order clause'", k.Col+1)}
			}
			col = k.Col
		}
		if !k.Visible && col+1 >= len(m.Cols) {
			return nil, mergeErr("keyshard: merge of %s: sort column %d out of range", sp.Table, col)
		}
		kc, err := m.keyCmp(col, k.Desc)
		if err != nil {
			return nil, err
		}
		if k.Visible {
			kc.weight = -1
		}
		m.keys = append(m.keys, kc)
	}
	for _, a := range sp.Aggs {
		var kc keyCmp
		if a.Kind == router.AggMin || a.Kind == router.AggMax {
			var err error
			if kc, err = m.keyCmp(m.visible+a.A, false); err != nil {
				return nil, err
			}
		}
		m.aggCmp = append(m.aggCmp, kc)
	}
	m.skip, m.left = cfg.Offset, cfg.Count
	return m, nil
}

func (m *Merger) keyCmp(col int, desc bool) (keyCmp, error) {
	if col >= len(m.Cols) {
		return keyCmp{}, mergeErr("keyshard: merge of %s: sort column %d out of range", m.Spec.Table, col)
	}
	c := m.Cols[col]
	k := keyCmp{col: col, weight: col + 1, desc: desc, typ: c.Type, unsigned: c.Flags&flagUnsigned != 0, binary: m.Binary, collation: c.Charset}
	switch {
	case c.Flags&(flagEnum|flagSet) != 0:
		return k, &mysql.MyError{Code: mysql.ER_NOT_SUPPORTED_YET, State: "42000",
			Message: "keyshard: ordering or grouping by an ENUM or SET column over several sub-tables of " + m.Spec.Table + " is not supported"}
	case c.isInt():
		k.how = cmpInt
	case c.Type == wire.TypeDecimal || c.Type == wire.TypeNewDecimal:
		k.how = cmpDec
	case c.Type == wire.TypeFloat || c.Type == wire.TypeDouble:
		k.how = cmpFloat
	case c.Type == wire.TypeTime:
		k.how = cmpTime
	case c.Type == wire.TypeDate || c.Type == wire.TypeNewDate || c.Type == wire.TypeDatetime || c.Type == wire.TypeTimestamp:
		if m.Binary {
			k.how = cmpTemporalBin
		}
	case c.isString() && c.Charset != binaryCS:
		k.how = cmpWeight
	}
	return k, nil
}

func mergeErr(format string, args ...any) *mysql.MyError {
	return &mysql.MyError{Code: mysql.ER_UNKNOWN_ERROR, State: mysql.DEFAULT_MYSQL_STATE, Message: fmt.Sprintf(format, args...)}
}

// Run merges the sources, calling out with each row for the client. It
// returns early, with done false, once the LIMIT is satisfied: the
// sources may hold unread rows then.
func (m *Merger) Run(srcs []Source, out func([]byte) error) (done bool, err error) {
	m.srcs, m.out = srcs, out
	n := len(m.Cols)
	m.rows = make([][]byte, len(srcs))
	m.cells = make([][]cell, len(srcs))
	m.starts = make([][]int, len(srcs))
	for i := range srcs {
		m.cells[i] = make([]cell, n)
		m.starts[i] = make([]int, n+1)
	}
	if m.left == 0 {
		return false, nil
	}
	for i := range srcs {
		if err := m.advance(i); err != nil {
			return false, err
		}
	}
	if m.Spec.Grouped {
		return m.runGrouped()
	}
	for len(m.heap) > 0 {
		i := m.heap[0]
		if m.skip > 0 {
			m.skip--
		} else {
			if err := m.emitStripped(i); err != nil {
				return false, err
			}
			if m.left == 0 {
				return false, nil
			}
		}
		if err := m.next(i); err != nil {
			return false, err
		}
	}
	return true, nil
}

// Sent is the number of rows sent to the client.
func (m *Merger) Sent() uint64 { return m.sent }

// advance reads source i's next row into the heap.
func (m *Merger) advance(i int) error {
	row, err := m.srcs[i].Next()
	if err != nil {
		return err
	}
	if row == nil {
		return nil
	}
	if err := m.split(i, row); err != nil {
		return err
	}
	m.heap = append(m.heap, i)
	m.up(len(m.heap) - 1)
	return nil
}

// next replaces the heap's top (source i) with i's next row.
func (m *Merger) next(i int) error {
	row, err := m.srcs[i].Next()
	if err != nil {
		return err
	}
	if row == nil {
		last := len(m.heap) - 1
		m.heap[0] = m.heap[last]
		m.heap = m.heap[:last]
	} else if err := m.split(i, row); err != nil {
		return err
	}
	m.down(0)
	return nil
}

func (m *Merger) split(i int, row []byte) error {
	m.rows[i] = row
	var err error
	if m.Binary {
		err = splitBinary(row, m.Cols, m.cells[i], m.starts[i])
	} else {
		err = splitText(row, m.cells[i])
	}
	if err != nil {
		return mergeErr("keyshard: merge of %s: a sub-table sent a malformed row", m.Spec.Table)
	}
	return nil
}

func (m *Merger) less(a, b int) bool {
	c := m.compareKeys(m.keys, m.cells[a], m.cells[b])
	if c != 0 {
		return c < 0
	}
	return a < b // stable: sub-table order among equals
}

func (m *Merger) up(j int) {
	h := m.heap
	for j > 0 {
		p := (j - 1) / 2
		if !m.less(h[j], h[p]) {
			break
		}
		h[j], h[p] = h[p], h[j]
		j = p
	}
}

func (m *Merger) down(j int) {
	h := m.heap
	n := len(h)
	for {
		l := 2*j + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && m.less(h[r], h[l]) {
			c = r
		}
		if !m.less(h[c], h[j]) {
			return
		}
		h[j], h[c] = h[c], h[j]
		j = c
	}
}

// compareKeys orders two rows by keys.
func (m *Merger) compareKeys(keys []keyCmp, a, b []cell) int {
	for i := range keys {
		if c := keys[i].compare(a, b); c != 0 {
			return c
		}
	}
	return 0
}

// compare orders the key's cells of rows a and b (NULL first, reversed
// for DESC).
func (k *keyCmp) compare(a, b []cell) int {
	var c int
	if k.weight < 0 {
		c = k.compareCells(a[k.col], b[k.col], cell{}, cell{})
	} else {
		c = k.compareCells(a[k.col], b[k.col], a[k.weight], b[k.weight])
	}
	if k.desc {
		return -c
	}
	return c
}

func (k *keyCmp) compareCells(x, y, xw, yw cell) int {
	switch {
	case x.null && y.null:
		return 0
	case x.null:
		return -1
	case y.null:
		return 1
	}
	switch k.how {
	case cmpWeight:
		if k.weight < 0 {
			return k.collate(x.b, y.b)
		}
		return bytes.Compare(xw.b, yw.b)
	case cmpInt:
		return compareInt(k, x.b, y.b)
	case cmpDec:
		return compareDecText(x.b, y.b)
	case cmpFloat:
		return compareFloat(k, x.b, y.b)
	case cmpTemporalBin:
		return bytes.Compare(temporalKey(x.b), temporalKey(y.b))
	case cmpTime:
		return cmpI64(timeMicros(x.b, k.binary), timeMicros(y.b, k.binary))
	}
	return bytes.Compare(x.b, y.b)
}

func cmpI64(a, b int64) int { return cmp.Compare(a, b) }

// compareInt compares integers: text digits, or binary little-endian of
// the column's size.
func compareInt(k *keyCmp, x, y []byte) int {
	if k.unsigned {
		return cmp.Compare(uintOf(x, k.typ, k.binary), uintOf(y, k.typ, k.binary))
	}
	return cmpI64(intOf(x, k.typ, k.binary), intOf(y, k.typ, k.binary))
}

func intOf(b []byte, typ byte, bin bool) int64 {
	if !bin {
		n, _ := strconv.ParseInt(str(b), 10, 64)
		return n
	}
	switch typ {
	case wire.TypeTiny:
		return int64(int8(b[0]))
	case wire.TypeShort:
		return int64(int16(binary.LittleEndian.Uint16(b)))
	case wire.TypeYear:
		return int64(binary.LittleEndian.Uint16(b))
	case wire.TypeLong, wire.TypeInt24:
		return int64(int32(binary.LittleEndian.Uint32(b)))
	}
	return int64(binary.LittleEndian.Uint64(b))
}

func uintOf(b []byte, typ byte, bin bool) uint64 {
	if !bin {
		n, _ := strconv.ParseUint(str(b), 10, 64)
		return n
	}
	switch typ {
	case wire.TypeTiny:
		return uint64(b[0])
	case wire.TypeShort, wire.TypeYear:
		return uint64(binary.LittleEndian.Uint16(b))
	case wire.TypeLong, wire.TypeInt24:
		return uint64(binary.LittleEndian.Uint32(b))
	}
	return binary.LittleEndian.Uint64(b)
}

func compareFloat(k *keyCmp, x, y []byte) int {
	return cmp.Compare(floatOf(x, k.typ, k.binary), floatOf(y, k.typ, k.binary))
}

func floatOf(b []byte, typ byte, bin bool) float64 {
	if !bin {
		f, _ := strconv.ParseFloat(str(b), 64)
		return f
	}
	if typ == wire.TypeFloat {
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b))
}

// compareDecText compares two decimals in text form ("-12.50").
func compareDecText(x, y []byte) int {
	xn, yn := len(x) > 0 && x[0] == '-', len(y) > 0 && y[0] == '-'
	if xn != yn {
		if isZeroDec(x) && isZeroDec(y) {
			return 0
		}
		if xn {
			return -1
		}
		return 1
	}
	c := compareAbsDec(bytes.TrimLeft(x, "-+"), bytes.TrimLeft(y, "-+"))
	if xn {
		return -c
	}
	return c
}

func isZeroDec(b []byte) bool {
	for _, c := range b {
		if c >= '1' && c <= '9' {
			return false
		}
	}
	return true
}

func compareAbsDec(x, y []byte) int {
	xi, xf, _ := bytes.Cut(x, []byte("."))
	yi, yf, _ := bytes.Cut(y, []byte("."))
	xi, yi = bytes.TrimLeft(xi, "0"), bytes.TrimLeft(yi, "0")
	if len(xi) != len(yi) {
		return cmpI64(int64(len(xi)), int64(len(yi)))
	}
	if c := bytes.Compare(xi, yi); c != 0 {
		return c
	}
	for i := 0; i < len(xf) || i < len(yf); i++ {
		a, b := byte('0'), byte('0')
		if i < len(xf) {
			a = xf[i]
		}
		if i < len(yf) {
			b = yf[i]
		}
		if a != b {
			return cmpI64(int64(a), int64(b))
		}
	}
	return 0
}

// temporalKey makes a binary DATE/DATETIME/TIMESTAMP value (0, 4, 7 or
// 11 bytes) comparable as bytes.
func temporalKey(b []byte) []byte {
	var k [11]byte
	if len(b) >= 4 {
		binary.BigEndian.PutUint16(k[0:], binary.LittleEndian.Uint16(b))
		k[2], k[3] = b[2], b[3]
	}
	if len(b) >= 7 {
		k[4], k[5], k[6] = b[4], b[5], b[6]
	}
	if len(b) >= 11 {
		binary.BigEndian.PutUint32(k[7:], binary.LittleEndian.Uint32(b[7:]))
	}
	return k[:]
}

// timeMicros reads a TIME value (text "-838:59:59.5" or binary) as
// signed microseconds.
func timeMicros(b []byte, bin bool) int64 {
	if bin {
		if len(b) < 8 {
			return 0
		}
		t := (int64(binary.LittleEndian.Uint32(b[1:]))*24+int64(b[5]))*3600 + int64(b[6])*60 + int64(b[7])
		t *= 1e6
		if len(b) >= 12 {
			t += int64(binary.LittleEndian.Uint32(b[8:]))
		}
		if b[0] == 1 {
			t = -t
		}
		return t
	}
	s := str(b)
	neg := false
	if s != "" && s[0] == '-' {
		neg, s = true, s[1:]
	}
	var parts [3]int64
	var frac int64
	p := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ':' && p < 2:
			p++
		case c == '.':
			digits := 0
			for i++; i < len(s) && digits < 6; i++ {
				frac = frac*10 + int64(s[i]-'0')
				digits++
			}
			for ; digits < 6; digits++ {
				frac *= 10
			}
		case c >= '0' && c <= '9':
			parts[p] = parts[p]*10 + int64(c-'0')
		}
	}
	t := ((parts[0]*60+parts[1])*60+parts[2])*1e6 + frac
	if neg {
		t = -t
	}
	return t
}

// binCollations are the common byte-order collations (MariaDB ids).
var binCollations = map[uint16]bool{46: true, 83: true, 47: true, 65: true, 84: true, 63: true}

// collate compares strings without their weight strings: bytes for the
// _bin collations, else ASCII case-insensitively without trailing spaces
// (exact for the _ci collations over ASCII text).
func (k *keyCmp) collate(x, y []byte) int {
	if binCollations[k.collation] {
		return bytes.Compare(bytes.TrimRight(x, " "), bytes.TrimRight(y, " "))
	}
	return compareFold(x, y)
}
