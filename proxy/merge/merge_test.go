package merge

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/router"
)

// ---- helpers: building rows as a sub-table sends them -------------------

// Column types of the tests. The weight-string columns are binary strings.
var (
	colTiny   = Column{Type: wire.TypeTiny, Charset: binaryCS}
	colLong   = Column{Type: wire.TypeLong, Charset: binaryCS}
	colLL     = Column{Type: wire.TypeLongLong, Charset: binaryCS}
	colDouble = Column{Type: wire.TypeDouble, Charset: binaryCS, Decimals: 31}
	colDate   = Column{Type: wire.TypeDate, Charset: binaryCS}
	colDT     = Column{Type: wire.TypeDatetime, Charset: binaryCS}
	colTime   = Column{Type: wire.TypeTime, Charset: binaryCS}
	colStr    = Column{Type: wire.TypeVarString, Charset: 33} // utf8_general_ci
	colWeight = Column{Type: wire.TypeVarString, Charset: binaryCS}
)

func colDec(d byte) Column { return Column{Type: wire.TypeNewDecimal, Charset: binaryCS, Decimals: d} }

// textRow builds a text-protocol row: nil is NULL, a string or []byte a
// length-encoded string, an int its decimal digits.
func textRow(vals ...any) []byte {
	var b []byte
	for _, v := range vals {
		switch x := v.(type) {
		case nil:
			b = append(b, 0xfb)
		case string:
			b = appendLenEnc(b, []byte(x))
		case []byte:
			b = appendLenEnc(b, x)
		case int:
			b = appendLenEnc(b, []byte(strconv.Itoa(x)))
		default:
			panic(fmt.Sprintf("textRow: %T", v))
		}
	}
	return b
}

// binRow builds a binary-protocol row from encoded values (nil: NULL).
func binRow(vals ...[]byte) []byte {
	nb := (len(vals) + 7 + 2) / 8
	b := make([]byte, 1+nb)
	for i, v := range vals {
		if v == nil {
			bit := i + 2
			b[1+bit/8] |= 1 << (bit % 8)
			continue
		}
		b = append(b, v...)
	}
	return b
}

func le8(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }
func le4(v int32) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }
func dbl(f float64) []byte {
	return binary.LittleEndian.AppendUint64(nil, math.Float64bits(f))
}
func lenc(s string) []byte { return appendLenEnc(nil, []byte(s)) }

// date is a binary DATE/DATETIME value without its length byte: 4, 7 or
// 11 bytes as given.
func date(y, mo, d int, rest ...int) []byte {
	b := binary.LittleEndian.AppendUint16(nil, uint16(y))
	b = append(b, byte(mo), byte(d))
	if len(rest) >= 3 {
		b = append(b, byte(rest[0]), byte(rest[1]), byte(rest[2]))
	}
	if len(rest) >= 4 {
		b = binary.LittleEndian.AppendUint32(b, uint32(rest[3]))
	}
	return b
}

// withLen prefixes a temporal value with its length byte, as in a row.
func withLen(b []byte) []byte { return append([]byte{byte(len(b))}, b...) }

// fakeSource returns prebuilt rows. It hands them out in one reused
// buffer and scribbles over it at the end, so a merge that keeps a row
// past the next call sees garbage.
type fakeSource struct {
	rows [][]byte
	i    int
	buf  []byte
	err  error // returned after the rows, if set
}

func (s *fakeSource) Next() ([]byte, error) {
	if s.i >= len(s.rows) {
		for j := range s.buf {
			s.buf[j] = 0xee
		}
		if s.err != nil {
			return nil, s.err
		}
		return nil, nil
	}
	s.buf = append(s.buf[:0], s.rows[s.i]...)
	s.i++
	return s.buf, nil
}

func sources(rows ...[][]byte) []Source {
	out := make([]Source, len(rows))
	for i, r := range rows {
		out[i] = &fakeSource{rows: r}
	}
	return out
}

// run merges srcs and returns the rows sent to the client (copied).
func run(t *testing.T, cfg Config, srcs []Source) (rows [][]byte, done bool, err error) {
	t.Helper()
	if cfg.MaxRows == 0 {
		cfg.MaxRows = 1000
	}
	m, err := New(cfg)
	if err != nil {
		return nil, false, err
	}
	done, err = m.Run(srcs, func(r []byte) error {
		rows = append(rows, bytes.Clone(r))
		return nil
	})
	if err == nil && m.Sent() != uint64(len(rows)) {
		t.Errorf("Sent() = %d, sent %d rows", m.Sent(), len(rows))
	}
	return rows, done, err
}

// textRows renders text rows of n columns as "a|b|NULL".
func textRows(t *testing.T, rows [][]byte, n int) []string {
	t.Helper()
	var out []string
	for _, r := range rows {
		cells := make([]cell, n)
		if err := splitText(r, cells); err != nil {
			t.Fatalf("client row %q: %v", r, err)
		}
		// The row must end after the n-th cell: hidden columns stripped.
		end := 0
		for _, c := range cells {
			if c.null {
				end++
			} else {
				_, _, end, _ = wire.ReadLenEncString(r, end)
			}
		}
		if end != len(r) {
			t.Errorf("client row %q has %d bytes after its %d columns", r, len(r)-end, n)
		}
		parts := make([]string, n)
		for i, c := range cells {
			if c.null {
				parts[i] = "NULL"
			} else {
				parts[i] = string(c.b)
			}
		}
		out = append(out, strings.Join(parts, "|"))
	}
	return out
}

func eqStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n got: %q\nwant: %q", what, got, want)
	}
}

// ---- decimal, temporal and integer comparisons ---------------------------

func TestCompareDecText(t *testing.T) {
	cases := []struct {
		x, y string
		want int
	}{
		{"1.5", "1.50", 0},
		{"1.50", "1.5", 0},
		{"-0.00", "0", 0},
		{"0", "-0.00", 0},
		{"-0", "0.000", 0},
		{"10", "9.99", 1},
		{"9.99", "10", -1},
		{"-10", "-9", -1},
		{"-9", "-10", 1},
		{"-1", "1", -1},
		{"1", "-1", 1},
		{"007", "7", 0},
		{"-007.50", "-7.5", 0},
		{"0.001", "0.01", -1},
		{"123.45", "123.456", -1},
		{"-123.45", "-123.456", 1},
		{"0", "-0.01", 1},
		{"-0.00", "0.01", -1},
		{"-0.00", "-0.01", 1},
		{"+5", "5", 0},
		{"99999999999999999999999999.5", "99999999999999999999999999.49", 1},
		{"-99999999999999999999999999.5", "-99999999999999999999999999.49", -1},
	}
	for _, c := range cases {
		if got := compareDecText([]byte(c.x), []byte(c.y)); got != c.want {
			t.Errorf("compareDecText(%q, %q) = %d, want %d", c.x, c.y, got, c.want)
		}
	}
}

func TestCompareAbsDec(t *testing.T) {
	cases := []struct {
		x, y string
		want int
	}{
		{"10", "9.99", 1},
		{"0.5", ".5", 0},
		{"1.50", "1.5", 0},
		{"00012", "12", 0},
		{"1.05", "1.5", -1},
		{"100", "99", 1},
		{"0.10", "0.09", 1},
		{"0", "0.0001", -1},
		{"", "0", 0},
	}
	for _, c := range cases {
		if got := compareAbsDec([]byte(c.x), []byte(c.y)); got != c.want {
			t.Errorf("compareAbsDec(%q, %q) = %d, want %d", c.x, c.y, got, c.want)
		}
	}
}

// binTime encodes a binary TIME value (without its length byte).
func binTime(neg bool, days uint32, h, m, s byte, us ...uint32) []byte {
	b := []byte{0}
	if neg {
		b[0] = 1
	}
	b = binary.LittleEndian.AppendUint32(b, days)
	b = append(b, h, m, s)
	if len(us) > 0 {
		b = binary.LittleEndian.AppendUint32(b, us[0])
	}
	return b
}

func TestTimeMicros(t *testing.T) {
	const s = int64(1e6)
	cases := []struct {
		text string
		bin  []byte
		want int64
	}{
		{"-838:59:59", binTime(true, 34, 22, 59, 59), -(838*3600 + 59*60 + 59) * s},
		{"838:59:59", binTime(false, 34, 22, 59, 59), (838*3600 + 59*60 + 59) * s},
		{"100:00:00.5", binTime(false, 4, 4, 0, 0, 500000), 100*3600*s + 500000},
		{"00:00:01", binTime(false, 0, 0, 0, 1), s},
		{"00:00:00.000001", binTime(false, 0, 0, 0, 0, 1), 1},
		{"-00:00:01.25", binTime(true, 0, 0, 0, 1, 250000), -s - 250000},
		{"12:34:56.123456", binTime(false, 0, 12, 34, 56, 123456), (12*3600+34*60+56)*s + 123456},
		{"00:00:00", []byte{}, 0}, // binary: length 0 is 00:00:00
	}
	for _, c := range cases {
		if got := timeMicros([]byte(c.text), false); got != c.want {
			t.Errorf("timeMicros(%q, text) = %d, want %d", c.text, got, c.want)
		}
		if got := timeMicros(c.bin, true); got != c.want {
			t.Errorf("timeMicros(% x, binary) = %d, want %d (%s)", c.bin, got, c.want, c.text)
		}
		// The binary value renders as a text TIME of the same value.
		if got := binTemporalText(wire.TypeTime, c.bin); timeMicros([]byte(got), false) != c.want {
			t.Errorf("binTemporalText(TIME % x) = %q, want the value of %q", c.bin, got, c.text)
		}
	}
	// Ordering through the comparator: text and binary agree.
	ordered := []string{"-838:59:59", "-00:00:01.25", "00:00:00", "00:00:00.000001", "00:00:01", "100:00:00.5", "838:59:59"}
	k := &keyCmp{col: 0, weight: 1, how: cmpTime, typ: wire.TypeTime}
	for i := range ordered {
		for j := range ordered {
			want := cmpI64(int64(i), int64(j))
			a := []cell{{b: []byte(ordered[i])}, {null: true}}
			b := []cell{{b: []byte(ordered[j])}, {null: true}}
			if got := k.compare(a, b); got != want {
				t.Errorf("TIME %q vs %q = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
}

func TestTemporalKeyOrder(t *testing.T) {
	// Ascending; entries of one group are equal (MySQL sends a DATETIME
	// whose time is 00:00:00 as 4 bytes and without microseconds as 7).
	groups := [][][]byte{
		{{}}, // 0000-00-00 00:00:00
		{date(2019, 12, 31)},
		{date(2020, 1, 2), date(2020, 1, 2, 0, 0, 0), date(2020, 1, 2, 0, 0, 0, 0)},
		{date(2020, 1, 2, 0, 0, 1)},
		{date(2020, 1, 2, 0, 0, 1, 1)},
		{date(2020, 1, 2, 0, 0, 1, 256)}, // little-endian 00 01 00 00 > 01 00 00 00
		{date(2020, 1, 2, 0, 1, 0)},
		{date(2020, 1, 2, 23, 0, 0)},
		{date(2020, 2, 1)},
		{date(2100, 1, 1)}, // 0x0834 little-endian 34 08 < e4 07 (2020)
		{date(9999, 12, 31, 23, 59, 59, 999999)},
	}
	type item struct {
		g int
		b []byte
	}
	var items []item
	for g, vs := range groups {
		for _, v := range vs {
			items = append(items, item{g, v})
		}
	}
	k := &keyCmp{col: 0, weight: 1, how: cmpTemporalBin, typ: wire.TypeDatetime, binary: true}
	for _, x := range items {
		for _, y := range items {
			want := cmpI64(int64(x.g), int64(y.g))
			if got := bytes.Compare(temporalKey(x.b), temporalKey(y.b)); got != want {
				t.Errorf("temporalKey(% x) vs (% x) = %d, want %d", x.b, y.b, got, want)
			}
			if got := k.compareCells(cell{b: x.b}, cell{b: y.b}, cell{}, cell{}); got != want {
				t.Errorf("compareCells DATETIME (% x) vs (% x) = %d, want %d", x.b, y.b, got, want)
			}
		}
	}
}

func TestCompareCells(t *testing.T) {
	cases := []struct {
		name string
		k    keyCmp
		x, y cell
		xw   cell
		yw   cell
		want int
	}{
		{"NULL first", keyCmp{how: cmpInt, typ: wire.TypeLong}, cell{null: true}, cell{b: []byte("-5")}, cell{}, cell{}, -1},
		{"NULL = NULL", keyCmp{how: cmpInt, typ: wire.TypeLong}, cell{null: true}, cell{null: true}, cell{}, cell{}, 0},
		{"int numeric, not bytes", keyCmp{how: cmpInt, typ: wire.TypeLong}, cell{b: []byte("9")}, cell{b: []byte("10")}, cell{}, cell{}, -1},
		{"int negative", keyCmp{how: cmpInt, typ: wire.TypeLongLong}, cell{b: []byte("-10")}, cell{b: []byte("-9")}, cell{}, cell{}, -1},
		{"unsigned bigint above int64", keyCmp{how: cmpInt, typ: wire.TypeLongLong, unsigned: true}, cell{b: []byte("18446744073709551615")}, cell{b: []byte("9223372036854775808")}, cell{}, cell{}, 1},
		{"binary unsigned bigint", keyCmp{how: cmpInt, typ: wire.TypeLongLong, unsigned: true, binary: true}, cell{b: le8(-1)}, cell{b: le8(1)}, cell{}, cell{}, 1},
		{"binary signed bigint", keyCmp{how: cmpInt, typ: wire.TypeLongLong, binary: true}, cell{b: le8(-1)}, cell{b: le8(1)}, cell{}, cell{}, -1},
		{"binary signed tiny", keyCmp{how: cmpInt, typ: wire.TypeTiny, binary: true}, cell{b: []byte{0xff}}, cell{b: []byte{1}}, cell{}, cell{}, -1},
		{"binary unsigned tiny", keyCmp{how: cmpInt, typ: wire.TypeTiny, binary: true, unsigned: true}, cell{b: []byte{0xff}}, cell{b: []byte{1}}, cell{}, cell{}, 1},
		{"binary long", keyCmp{how: cmpInt, typ: wire.TypeLong, binary: true}, cell{b: le4(-70000)}, cell{b: le4(3)}, cell{}, cell{}, -1},
		{"binary year", keyCmp{how: cmpInt, typ: wire.TypeYear, binary: true}, cell{b: []byte{0xd0, 0x07}}, cell{b: []byte{0x6c, 0x07}}, cell{}, cell{}, 1},
		{"float text", keyCmp{how: cmpFloat, typ: wire.TypeDouble}, cell{b: []byte("1e2")}, cell{b: []byte("99.5")}, cell{}, cell{}, 1},
		{"float binary", keyCmp{how: cmpFloat, typ: wire.TypeDouble, binary: true}, cell{b: dbl(-0.5)}, cell{b: dbl(-0.25)}, cell{}, cell{}, -1},
		{"float32 binary", keyCmp{how: cmpFloat, typ: wire.TypeFloat, binary: true}, cell{b: binary.LittleEndian.AppendUint32(nil, math.Float32bits(2.5))}, cell{b: binary.LittleEndian.AppendUint32(nil, math.Float32bits(10))}, cell{}, cell{}, -1},
		{"decimal", keyCmp{how: cmpDec, typ: wire.TypeNewDecimal}, cell{b: []byte("-0.50")}, cell{b: []byte("-0.5")}, cell{}, cell{}, 0},
		{"weight, not bytes", keyCmp{how: cmpWeight, typ: wire.TypeVarString}, cell{b: []byte("b")}, cell{b: []byte("A")}, cell{b: []byte("B")}, cell{b: []byte("A")}, 1},
		{"weight equal, bytes differ", keyCmp{how: cmpWeight, typ: wire.TypeVarString}, cell{b: []byte("a ")}, cell{b: []byte("A")}, cell{b: []byte("A")}, cell{b: []byte("A")}, 0},
		{"binary string by bytes", keyCmp{how: cmpBytes, typ: wire.TypeVarString}, cell{b: []byte("a")}, cell{b: []byte("B")}, cell{}, cell{}, 1},
		{"text datetime by bytes", keyCmp{how: cmpBytes, typ: wire.TypeDatetime}, cell{b: []byte("2020-01-02 00:00:00")}, cell{b: []byte("2019-12-31 23:59:59")}, cell{}, cell{}, 1},
	}
	for _, c := range cases {
		if got := c.k.compareCells(c.x, c.y, c.xw, c.yw); got != c.want {
			t.Errorf("%s: compareCells = %d, want %d", c.name, got, c.want)
		}
		if got := c.k.compareCells(c.y, c.x, c.yw, c.xw); got != -c.want {
			t.Errorf("%s: reversed compareCells = %d, want %d", c.name, got, -c.want)
		}
		// DESC reverses, NULL included (NULL last).
		c.k.col, c.k.weight, c.k.desc = 0, 1, true
		if got := c.k.compare([]cell{c.x, c.xw}, []cell{c.y, c.yw}); got != -c.want {
			t.Errorf("%s: DESC compare = %d, want %d", c.name, got, -c.want)
		}
	}
}

// ---- arithmetic ---------------------------------------------------------

// num parses a test operand: "NULL", a decimal ("1.50"), a float ("f:0.25")
// or a string ("s:3abc").
func num(t *testing.T, s string) value {
	t.Helper()
	switch {
	case s == "NULL":
		return null
	case strings.HasPrefix(s, "f:"):
		f, err := strconv.ParseFloat(s[2:], 64)
		if err != nil {
			t.Fatal(err)
		}
		return value{k: kFloat, f: f}
	case strings.HasPrefix(s, "s:"):
		return value{k: kStr, s: []byte(s[2:])}
	}
	d, ok := parseDec(s)
	if !ok {
		t.Fatalf("bad decimal %q", s)
	}
	return d
}

// show renders a value for comparison: "NULL", the decimal text at its
// scale, "f:" and the shortest float text.
func show(v value) string {
	switch v.k {
	case kNull:
		return "NULL"
	case kDec:
		return decText(v)
	case kFloat:
		return "f:" + strconv.FormatFloat(v.f, 'g', -1, 64)
	}
	return "s:" + string(v.s)
}

func TestArith(t *testing.T) {
	const (
		add = router.ExprAdd
		sub = router.ExprSub
		mul = router.ExprMul
		div = router.ExprDiv
		idv = router.ExprIntDiv
		mod = router.ExprMod
	)
	cases := []struct {
		op   router.ExprOp
		a, b string
		want string
	}{
		// Integer division truncates toward zero.
		{idv, "7", "2", "3"},
		{idv, "-7", "2", "-3"},
		{idv, "7", "-2", "-3"},
		{idv, "7", "0", "NULL"},
		{idv, "7.5", "2", "3"},
		{idv, "7", "2.5", "2"},
		{idv, "f:7.9", "f:2", "3"},
		{idv, "f:-7.9", "2", "-3"},
		{idv, "f:1", "f:0", "NULL"},
		// Modulo takes the dividend's sign; % 0 is NULL.
		{mod, "5", "0", "NULL"},
		{mod, "7", "3", "1"},
		{mod, "-7", "3", "-1"},
		{mod, "7", "-3", "1"},
		{mod, "7.5", "2", "1.5"},
		{mod, "f:7.5", "2", "f:1.5"},
		{mod, "f:5", "f:0", "NULL"},
		// + - *: exact, scale max(a, b) or a+b for *.
		{add, "1.5", "1.50", "3.00"},
		{sub, "1", "1.25", "-0.25"},
		{mul, "1.5", "1.5", "2.25"},
		{mul, "-0.5", "3", "-1.5"},
		{mul, "0.10", "0.10", "0.0100"},
		{add, "9223372036854775807", "1", "9223372036854775808"},
		{mul, "18446744073709551615", "18446744073709551615", "340282366920938463426481119284349108225"},
		// A float makes the result a float.
		{add, "1.5", "f:0.25", "f:1.75"},
		{sub, "f:0.5", "1", "f:-0.5"},
		{mul, "f:0.1", "3", "f:0.30000000000000004"},
		{div, "f:1", "f:4", "f:0.25"},
		{div, "1", "f:8", "f:0.125"},
		{div, "f:1", "0", "NULL"},
		{div, "1", "f:0", "NULL"},
		// NULL in, NULL out.
		{add, "NULL", "1", "NULL"},
		{mul, "1", "NULL", "NULL"},
		{div, "NULL", "0", "NULL"},
		{mod, "NULL", "NULL", "NULL"},
		{idv, "NULL", "2", "NULL"},
		// Strings are read as numbers (a leading number).
		{add, "s:3abc", "1", "4"},
		{add, "s:1e2", "1", "f:101"},
		{add, "s:abc", "1", "f:1"}, // no number at all: 0, a double as in MySQL
		{mul, "s: 2.50 ", "2", "5.00"},
	}
	for _, c := range cases {
		got := show(arith(c.op, num(t, c.a), num(t, c.b)))
		if got != c.want {
			t.Errorf("arith(%d, %s, %s) = %s, want %s", c.op, c.a, c.b, got, c.want)
		}
	}
}

// TestArithDiv: exact division as the client sees it, in a DECIMAL
// column of the dividend's scale + div_precision_increment (4) decimals,
// rounded half away from zero.
func TestArithDiv(t *testing.T) {
	cases := []struct {
		a, b string
		want string // at scale(a) + 4
	}{
		{"1", "3", "0.3333"},
		{"2", "3", "0.6667"},
		{"-2", "3", "-0.6667"},
		{"2", "-3", "-0.6667"},
		{"-2", "-3", "0.6667"},
		{"2.25", "1", "2.250000"},
		{"-7", "2", "-3.5000"},
		{"10", "4", "2.5000"},
		{"1.0", "3", "0.33333"},
		{"0.5", "0.25", "2.00000"},
		{"1", "8", "0.1250"},
		{"1", "32", "0.0313"}, // 0.03125
		{"-1", "32", "-0.0313"},
		{"0", "5", "0.0000"},
		{"1", "0", "NULL"},
		{"1", "0.00", "NULL"},
		{"123456789012345678901234567890", "7", "17636684144620811271604938270.0000"},
	}
	for _, c := range cases {
		a, b := num(t, c.a), num(t, c.b)
		v := arith(router.ExprDiv, a, b)
		got := show(v)
		if v.k == kDec {
			if v.scale < a.scale+divPrecision {
				t.Errorf("%s / %s: scale %d, less than the dividend's %d + %d", c.a, c.b, v.scale, a.scale, divPrecision)
			}
			got = decText(round(v, a.scale+divPrecision))
			// And so it is encoded for a column of that many decimals.
			b, _ := encode(nil, v, colDec(byte(a.scale+divPrecision)), false)
			if !bytes.Equal(b, lenc(got)) {
				t.Errorf("%s / %s encoded as %q, want %q", c.a, c.b, b, lenc(got))
			}
		}
		if got != c.want {
			t.Errorf("%s / %s = %s, want %s", c.a, c.b, got, c.want)
		}
	}
	// The quotient keeps more digits than it shows: 1/3*3 is 1.0000 as in
	// MariaDB, not 0.9999.
	third := arith(router.ExprDiv, decInt(1), decInt(3))
	if got := decText(round(arith(router.ExprMul, third, decInt(3)), 4)); got != "1.0000" {
		t.Errorf("1/3*3 = %s, want 1.0000", got)
	}
}

func TestRound(t *testing.T) {
	cases := []struct {
		in   string
		s    int32
		want string
	}{
		{"2.5", 0, "3"},
		{"-2.5", 0, "-3"},
		{"2.49", 0, "2"},
		{"-2.49", 0, "-2"},
		{"1.005", 2, "1.01"},
		{"-1.005", 2, "-1.01"},
		{"1.5", 3, "1.500"},
		{"0.0049", 2, "0.00"},
		{"-0.005", 2, "-0.01"},
		{"999.995", 2, "1000.00"},
	}
	for _, c := range cases {
		d, _ := parseDec(c.in)
		if got := decText(round(d, c.s)); got != c.want {
			t.Errorf("round(%s, %d) = %s, want %s", c.in, c.s, got, c.want)
		}
	}
}

// ---- encoding values for the client --------------------------------------

func TestDecText(t *testing.T) {
	cases := []struct {
		n     int64
		scale int32
		want  string
	}{
		{5, 3, "0.005"},
		{-5, 3, "-0.005"},
		{12345, 2, "123.45"},
		{-12345, 2, "-123.45"},
		{0, 2, "0.00"},
		{-100, 2, "-1.00"},
		{7, 0, "7"},
		{-7, 0, "-7"},
		{100, 2, "1.00"},
		{1, 1, "0.1"},
	}
	for _, c := range cases {
		if got := decText(value{k: kDec, n: big.NewInt(c.n), scale: c.scale}); got != c.want {
			t.Errorf("decText(%d e-%d) = %q, want %q", c.n, c.scale, got, c.want)
		}
	}
}

func TestFloatText(t *testing.T) {
	a, b := 0.1, 0.2 // not constants: 0.1 + 0.2 folded exactly is 0.3
	cases := []struct {
		f    float64
		want string
	}{
		{a + b, "0.30000000000000004"},
		{1e20, "1e20"},
		{1234567, "1234567"},
		{0, "0"},
		{-1.5, "-1.5"},
		{1e-7, "1e-7"},
		{-2.5e-10, "-2.5e-10"},
		{1.2345678901234568e20, "1.2345678901234568e20"},
		{1e15, "1e15"},
		{999999999999999, "999999999999999"},
		{0.00001, "0.00001"},
		{math.MaxFloat64, "1.7976931348623157e308"},
	}
	for _, c := range cases {
		if got := floatText(c.f, 64); got != c.want {
			t.Errorf("floatText(%v) = %q, want %q", c.f, got, c.want)
		}
	}
	if got := floatText(float64(float32(0.1)), 32); got != "0.1" {
		t.Errorf("floatText(float32 0.1) = %q, want 0.1", got)
	}
}

func TestEncode(t *testing.T) {
	dec := func(s string) value { d, _ := parseDec(s); return d }
	flt := func(f float64) value { return value{k: kFloat, f: f} }
	a, b := 0.1, 0.2
	cases := []struct {
		name string
		v    value
		col  Column
		text string // the cell's text; "NULL"
		bin  []byte // the binary encoding; nil: NULL
	}{
		{"bigint", decInt(42), colLL, "42", le8(42)},
		{"bigint negative", decInt(-1), colLL, "-1", le8(-1)},
		{"bigint from decimal rounds", dec("2.5"), colLL, "3", le8(3)},
		{"bigint from negative decimal", dec("-2.5"), colLL, "-3", le8(-3)},
		{"bigint from float rounds", flt(2.5), colLL, "3", le8(3)},
		{"bigint unsigned max", value{k: kDec, n: new(big.Int).SetUint64(math.MaxUint64)}, Column{Type: wire.TypeLongLong, Flags: flagUnsigned}, "18446744073709551615", le8(-1)},
		{"int", decInt(-70000), colLong, "-70000", le4(-70000)},
		{"tiny", decInt(-1), colTiny, "-1", []byte{0xff}},
		{"decimal(2) pads", decInt(3), colDec(2), "3.00", lenc("3.00")},
		{"decimal(2) rounds half away", dec("1.005"), colDec(2), "1.01", lenc("1.01")},
		{"decimal(2) negative", dec("-0.125"), colDec(2), "-0.13", lenc("-0.13")},
		{"decimal(4) of a division", arith(router.ExprDiv, decInt(10), decInt(3)), colDec(4), "3.3333", lenc("3.3333")},
		{"decimal(4) pads", dec("1.5"), colDec(4), "1.5000", lenc("1.5000")},
		{"decimal(4) from float", flt(0.5), colDec(4), "0.5000", lenc("0.5000")},
		{"double", flt(a + b), colDouble, "0.30000000000000004", dbl(a + b)},
		{"double 1e20", flt(1e20), colDouble, "1e20", dbl(1e20)},
		{"double integral", flt(1234567), colDouble, "1234567", dbl(1234567)},
		{"double from decimal", dec("0.5"), colDouble, "0.5", dbl(0.5)},
		{"varchar of a decimal", dec("-1.50"), colStr, "-1.50", lenc("-1.50")},
		{"varchar of a string", value{k: kStr, s: []byte("héllo")}, colStr, "héllo", lenc("héllo")},
		{"NULL", null, colLL, "NULL", nil},
		{"NULL decimal", null, colDec(2), "NULL", nil},
	}
	for _, c := range cases {
		b, ok := encode([]byte{0xaa}, c.v, c.col, false)
		if c.text == "NULL" {
			if ok || !bytes.Equal(b, []byte{0xaa, 0xfb}) {
				t.Errorf("%s: text encode = % x %v, want aa fb false", c.name, b, ok)
			}
		} else if want := append([]byte{0xaa}, lenc(c.text)...); !ok || !bytes.Equal(b, want) {
			t.Errorf("%s: text encode = %q %v, want %q", c.name, b, ok, want)
		}
		b, ok = encode([]byte{0xaa}, c.v, c.col, true)
		if c.bin == nil {
			if ok || !bytes.Equal(b, []byte{0xaa}) {
				t.Errorf("%s: binary encode = % x %v, want aa false", c.name, b, ok)
			}
		} else if want := append([]byte{0xaa}, c.bin...); !ok || !bytes.Equal(b, want) {
			t.Errorf("%s: binary encode = % x %v, want % x", c.name, b, ok, want)
		}
	}
}

// TestEncodeBinaryTemporal: an expression over aggregates whose type is
// a temporal one (COALESCE(MAX(d), MIN(d)) is a DATE) must be sent in the
// binary protocol's temporal encoding, a length byte and the value.
func TestEncodeBinaryTemporal(t *testing.T) {
	cases := []struct {
		name string
		cell []byte
		col  Column
		want []byte
	}{
		{"DATE", date(2020, 1, 2), colDate, withLen(date(2020, 1, 2))},
		{"DATETIME", date(2020, 1, 2, 3, 4, 5), colDT, withLen(date(2020, 1, 2, 3, 4, 5))},
		{"DATETIME(6)", date(2020, 1, 2, 3, 4, 5, 6), colDT, withLen(date(2020, 1, 2, 3, 4, 5, 6))},
		{"TIME", binTime(true, 1, 2, 3, 4), colTime, withLen(binTime(true, 1, 2, 3, 4))},
	}
	for _, c := range cases {
		v := decode(cell{b: c.cell}, c.col, true, cell{null: true})
		got, ok := encode(nil, v, c.col, true)
		if !ok || !bytes.Equal(got, c.want) {
			t.Errorf("%s: binary encode of a decoded binary value = % x (%q), want % x", c.name, got, got, c.want)
		}
	}
}

func TestDecode(t *testing.T) {
	cases := []struct {
		name string
		c    cell
		col  Column
		bin  bool
		want string
	}{
		{"text int", cell{b: []byte("-12")}, colLong, false, "-12"},
		{"text decimal", cell{b: []byte("-12.50")}, colDec(2), false, "-12.50"},
		{"text double", cell{b: []byte("1e20")}, colDouble, false, "f:1e+20"},
		{"text NULL", cell{null: true}, colLong, false, "NULL"},
		{"binary tiny", cell{b: []byte{0xfe}}, colTiny, true, "-2"},
		{"binary unsigned tiny", cell{b: []byte{0xfe}}, Column{Type: wire.TypeTiny, Flags: flagUnsigned}, true, "254"},
		{"binary long", cell{b: le4(-5)}, colLong, true, "-5"},
		{"binary unsigned bigint", cell{b: le8(-1)}, Column{Type: wire.TypeLongLong, Flags: flagUnsigned}, true, "18446744073709551615"},
		{"binary double", cell{b: dbl(0.25)}, colDouble, true, "f:0.25"},
		{"binary decimal", cell{b: []byte("3.25")}, colDec(2), true, "3.25"},
		{"binary date", cell{b: date(2020, 1, 2)}, colDate, true, "s:2020-01-02"},
		{"binary datetime 4 bytes", cell{b: date(2020, 1, 2)}, colDT, true, "s:2020-01-02 00:00:00"},
		{"binary datetime micros", cell{b: date(2020, 1, 2, 3, 4, 5, 60)}, colDT, true, "s:2020-01-02 03:04:05.000060"},
		{"binary date zero", cell{b: []byte{}}, colDate, true, "s:0000-00-00"},
		{"binary time", cell{b: binTime(true, 1, 2, 3, 4, 500000)}, colTime, true, "s:-26:03:04.500000"},
	}
	for _, c := range cases {
		if got := show(decode(c.c, c.col, c.bin, cell{null: true})); got != c.want {
			t.Errorf("%s: decode = %s, want %s", c.name, got, c.want)
		}
	}
	// A string takes its weight when it has one and is not binary.
	v := decode(cell{b: []byte("a")}, colStr, false, cell{b: []byte("A")})
	if !v.haveW || string(v.w) != "A" {
		t.Errorf("decode string with weight: %+v", v)
	}
	v = decode(cell{b: []byte("a")}, colWeight, false, cell{b: []byte("A")})
	if v.haveW {
		t.Errorf("decode binary string took a weight: %+v", v)
	}
}

// compare orders the values the merge computes (HAVING, re-sort keys) as
// MySQL orders them.
func TestCompareValues(t *testing.T) {
	txt := func(s string, col Column) value { return decode(cell{b: []byte(s)}, col, false, cell{null: true}) }
	w := func(s, weight string) value {
		return decode(cell{b: []byte(s)}, colStr, false, cell{b: []byte(weight)})
	}
	cases := []struct {
		name string
		a, b value
		want int
	}{
		{"decimals at different scales", txt("1.5", colDec(1)), txt("1.50", colDec(2)), 0},
		{"decimal vs int", txt("10", colLong), txt("9.99", colDec(2)), 1},
		{"decimal vs float", txt("0.5", colDec(1)), txt("0.25", colDouble), 1},
		{"number vs numeric string", decInt(10), value{k: kStr, s: []byte("9")}, 1},
		{"strings by weight", w("b", "B"), w("A", "A"), 1},
		{"strings by weight, equal", w("a ", "A"), w("A", "A"), 0},
		{"strings without weight: case-folded", value{k: kStr, s: []byte("abc")}, value{k: kStr, s: []byte("ABD")}, -1},
		{"text DATE", txt("2020-01-02", colDate), txt("2019-12-31", colDate), 1},
		{"text DATETIME", txt("2020-01-02 00:00:00", colDT), txt("2020-01-02 00:00:00.5", colDT), -1},
		{"text TIME, 100 hours", txt("100:00:00", colTime), txt("99:00:00", colTime), 1},
		{"text TIME, negative", txt("-02:00:00", colTime), txt("-01:00:00", colTime), -1},
	}
	for _, c := range cases {
		if got := compare(c.a, c.b); got != c.want {
			t.Errorf("%s: compare = %d, want %d", c.name, got, c.want)
		}
		if got := compare(c.b, c.a); got != -c.want {
			t.Errorf("%s: reversed compare = %d, want %d", c.name, got, -c.want)
		}
	}
}

// ---- cutting rows ---------------------------------------------------------

func TestSplitText(t *testing.T) {
	s250, s251, s300 := strings.Repeat("a", 250), strings.Repeat("b", 251), strings.Repeat("c", 300)
	row := textRow(nil, "", s250, s251, s300, "x", nil)
	// The length prefixes: 250 in one byte, 251 and 300 as 0xfc + 2 bytes.
	if row[2] != 250 || !bytes.Equal(row[3+250:3+250+3], []byte{0xfc, 251, 0}) {
		t.Fatalf("test row built wrong: % x", row[:8])
	}
	cells := make([]cell, 7)
	if err := splitText(row, cells); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		null bool
		s    string
	}{{true, ""}, {false, ""}, {false, s250}, {false, s251}, {false, s300}, {false, "x"}, {true, ""}}
	for i, w := range want {
		if cells[i].null != w.null || string(cells[i].b) != w.s {
			t.Errorf("cell %d = null %v len %d, want null %v len %d", i, cells[i].null, len(cells[i].b), w.null, len(w.s))
		}
		if !w.null && cells[i].b == nil {
			t.Errorf("cell %d: empty string read as nil", i)
		}
	}
	// Fewer cells than columns, a truncated string: malformed.
	if err := splitText(row, make([]cell, 8)); !errors.Is(err, errRow) {
		t.Errorf("row short of a cell: %v", err)
	}
	if err := splitText(row[:len(row)-3], make([]cell, 7)); !errors.Is(err, errRow) {
		t.Errorf("truncated row: %v", err)
	}
	if err := splitText(nil, make([]cell, 1)); !errors.Is(err, errRow) {
		t.Errorf("empty row: %v", err)
	}
	// A 64 KiB string: 0xfd + 3 bytes.
	big := strings.Repeat("z", 1<<16)
	row = textRow(big, "y")
	cells = make([]cell, 2)
	if err := splitText(row, cells); err != nil || len(cells[0].b) != 1<<16 || string(cells[1].b) != "y" {
		t.Errorf("64 KiB cell: %v %d %q", err, len(cells[0].b), cells[1].b)
	}
}

func TestSplitBinary(t *testing.T) {
	cols := []Column{colLL, colDouble, colDate, colDT, colStr, colDec(2), colTiny, colTime, colLong, colDT, colStr}
	s300 := strings.Repeat("s", 300)
	vals := [][]byte{
		le8(-2),
		dbl(1.5),
		withLen(date(2020, 1, 2)),
		withLen(date(2020, 1, 2, 3, 4, 5, 6)),
		lenc(s300),
		lenc("-1.25"),
		nil, // NULL tiny
		withLen(binTime(false, 0, 1, 2, 3)),
		nil,          // NULL int: bit 10, the second bitmap byte
		withLen(nil), // DATETIME of length 0
		lenc(""),
	}
	row := binRow(vals...)
	// NULL cells 6 and 8: bits 8 and 10, both in the second bitmap byte.
	if nb := (len(cols) + 9) / 8; nb != 2 || row[1] != 0 || row[2] != 1<<0|1<<2 {
		t.Fatalf("test row bitmap built wrong: % x", row[:3])
	}
	cells := make([]cell, len(cols))
	starts := make([]int, len(cols)+1)
	if err := splitBinary(row, cols, cells, starts); err != nil {
		t.Fatal(err)
	}
	want := [][]byte{
		le8(-2), dbl(1.5), date(2020, 1, 2), date(2020, 1, 2, 3, 4, 5, 6), []byte(s300), []byte("-1.25"),
		nil, binTime(false, 0, 1, 2, 3), nil, {}, {},
	}
	pos := 3
	for i, w := range want {
		c := cells[i]
		if (w == nil) != c.null || !bytes.Equal(c.b, w) {
			t.Errorf("cell %d = null %v % x, want % x", i, c.null, c.b, w)
		}
		if starts[i] != pos {
			t.Errorf("starts[%d] = %d, want %d", i, starts[i], pos)
		}
		pos += len(vals[i])
	}
	if starts[len(cols)] != len(row) {
		t.Errorf("starts[end] = %d, want %d", starts[len(cols)], len(row))
	}
	// Malformed: no 0x00 header, a short bitmap, a truncated value.
	for name, bad := range map[string][]byte{
		"header":    append([]byte{1}, row[1:]...),
		"bitmap":    row[:2],
		"truncated": row[:len(row)-1],
		"in a long": row[:3+4],
	} {
		if err := splitBinary(bad, cols, make([]cell, len(cols)), make([]int, len(cols)+1)); !errors.Is(err, errRow) {
			t.Errorf("%s: splitBinary = %v, want errRow", name, err)
		}
	}
}

// ---- the merge: sort mode ---------------------------------------------------

// A sort-mode merge of `SELECT id, name FROM user ORDER BY id`: the
// sub-tables return id, name, then hidden id and its weight string.
func sortCfg(desc bool) Config {
	return Config{
		Spec:  &router.MergeSpec{Visible: 2, Hidden: 2, Sort: []router.SortKey{{Col: 0, Desc: desc}}, Table: "user"},
		Count: -1,
		Cols:  []Column{colLong, colStr, colLong, colWeight},
	}
}

func idRow(id any, name string) []byte {
	if id == nil {
		return textRow(nil, name, nil, nil)
	}
	s := strconv.Itoa(id.(int))
	return textRow(s, name, s, s)
}

func TestMergeSort(t *testing.T) {
	asc := [][][]byte{
		{idRow(nil, "a"), idRow(-10, "b"), idRow(5, "c"), idRow(10, "d")},
		{idRow(nil, "e"), idRow(2, "f"), idRow(9, "g")},
		{idRow(-1, "h"), idRow(5, "i"), idRow(100, "j")},
		{}, // an empty sub-table
	}
	wantAsc := []string{"NULL|a", "NULL|e", "-10|b", "-1|h", "2|f", "5|c", "5|i", "9|g", "10|d", "100|j"}
	desc := [][][]byte{
		{idRow(10, "d"), idRow(5, "c"), idRow(-10, "b"), idRow(nil, "a")},
		{idRow(9, "g"), idRow(2, "f"), idRow(nil, "e")},
		{idRow(100, "j"), idRow(5, "i"), idRow(-1, "h")},
		{},
	}
	wantDesc := []string{"100|j", "10|d", "9|g", "5|c", "5|i", "2|f", "-1|h", "-10|b", "NULL|a", "NULL|e"}

	cases := []struct {
		name          string
		desc          bool
		offset, count int64
		want          []string
		done          bool
	}{
		{"asc, NULL first, equal keys in sub-table order", false, 0, -1, wantAsc, true},
		{"desc, NULL last", true, 0, -1, wantDesc, true},
		{"limit 3", false, 0, 3, wantAsc[:3], false},
		{"limit 2, 3", false, 2, 3, wantAsc[2:5], false},
		{"desc limit 4, 2", true, 4, 2, wantDesc[4:6], false},
		{"limit covering everything", false, 0, 100, wantAsc, true},
		{"limit 8, 100", false, 8, 100, wantAsc[8:], true},
		{"offset past the end", false, 20, 5, nil, true},
		{"limit 0", false, 0, 0, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := sortCfg(c.desc)
			cfg.Offset, cfg.Count = c.offset, c.count
			in := asc
			if c.desc {
				in = desc
			}
			rows, done, err := run(t, cfg, sources(in...))
			if err != nil {
				t.Fatal(err)
			}
			eqStrings(t, "rows", textRows(t, rows, 2), c.want)
			if done != c.done {
				t.Errorf("done = %v, want %v", done, c.done)
			}
		})
	}
}

// Strings sort by their weight strings (here: a case-insensitive
// collation), several keys, a decimal key.
func TestMergeSortWeightsAndKeys(t *testing.T) {
	// SELECT name, price FROM t ORDER BY price, name DESC: hidden price,
	// weight, name, weight.
	cfg := Config{
		Spec:  &router.MergeSpec{Visible: 2, Hidden: 4, Sort: []router.SortKey{{Col: 0}, {Col: 2, Desc: true}}, Table: "t"},
		Count: -1,
		Cols:  []Column{colStr, colDec(2), colDec(2), colWeight, colStr, colWeight},
	}
	r := func(name, price string) []byte {
		return textRow(name, price, price, price, name, strings.ToUpper(name))
	}
	in := [][][]byte{
		{r("b", "-10.50"), r("Z", "9.99"), r("a", "9.99"), r("c", "100.00")},
		{r("B", "-9.00"), r("y", "9.99"), r("C", "10.00")},
		{r("x", "-10.50"), r("A", "9.99")},
	}
	rows, done, err := run(t, cfg, sources(in...))
	if err != nil || !done {
		t.Fatal(err, done)
	}
	eqStrings(t, "rows", textRows(t, rows, 2), []string{
		"x|-10.50", "b|-10.50", "B|-9.00", "Z|9.99", "y|9.99", "a|9.99", "A|9.99", "C|10.00", "c|100.00",
	})
}

// The same merge in the binary protocol: the client's rows get a NULL
// bitmap sized for the visible columns only.
func TestMergeSortBinary(t *testing.T) {
	// Six visible columns (bitmap 1 byte), two hidden (2 bytes in all).
	cols := []Column{colLL, colStr, colDate, colDouble, colTiny, colDec(2), colLL, colWeight}
	cfg := Config{
		Spec:   &router.MergeSpec{Visible: 6, Hidden: 2, Sort: []router.SortKey{{Col: 0}}, Table: "user"},
		Count:  -1,
		Cols:   cols,
		Binary: true,
	}
	vis := func(id int64, null bool) [][]byte {
		v := [][]byte{le8(id), lenc(fmt.Sprint("n", id)), withLen(date(2000+int(id), 1, 1)), dbl(float64(id) / 2), {byte(id)}, lenc(fmt.Sprintf("%d.00", id))}
		if null {
			v[0], v[5] = nil, nil // bits 2 and 7
		}
		return v
	}
	full := func(id int64, null bool) []byte {
		v := vis(id, null)
		if null {
			return binRow(append(v, nil, nil)...)
		}
		return binRow(append(v, le8(id), lenc(strconv.FormatInt(id, 10)))...)
	}
	in := [][][]byte{
		{full(0, true), full(3, false), full(300, false)},
		{full(-1, false), full(4, false)},
		{full(0, true), full(2, false)},
	}
	rows, done, err := run(t, Config{Spec: cfg.Spec, Count: 4, Offset: 1, Cols: cols, Binary: true}, sources(in...))
	if err != nil {
		t.Fatal(err)
	}
	if done {
		t.Error("done = true, want false: the LIMIT stopped the merge")
	}
	want := [][]byte{binRow(vis(0, true)...), binRow(vis(-1, false)...), binRow(vis(2, false)...), binRow(vis(3, false)...)}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i := range want {
		if !bytes.Equal(rows[i], want[i]) {
			t.Errorf("row %d:\n got % x\nwant % x", i, rows[i], want[i])
		}
	}
	if rows[0][1] != 1<<2|1<<7 {
		t.Errorf("row 0 bitmap %08b, want NULL bits 2 and 7", rows[0][1])
	}
}

func TestMergeErrors(t *testing.T) {
	// ENUM sort key.
	cfg := sortCfg(false)
	cfg.Cols = []Column{colLong, colStr, {Type: wire.TypeString, Flags: flagEnum, Charset: 33}, colWeight}
	var me *mysql.MyError
	if _, err := New(cfg); !errors.As(err, &me) || me.Code != mysql.ER_NOT_SUPPORTED_YET {
		t.Errorf("ENUM key: %v", err)
	}
	// The sub-tables returned another number of columns.
	cfg = sortCfg(false)
	cfg.Cols = cfg.Cols[:3]
	if _, err := New(cfg); err == nil {
		t.Error("3 columns for 2 visible + 2 hidden: no error")
	}
	// A malformed row.
	_, _, err := run(t, sortCfg(false), sources([][]byte{idRow(1, "a")}, [][]byte{{0x05, 'a'}}))
	if !errors.As(err, &me) || me.Code != mysql.ER_UNKNOWN_ERROR || !strings.Contains(me.Message, "malformed") {
		t.Errorf("malformed row: %v", err)
	}
	// A source's error is returned as it is.
	boom := errors.New("boom")
	srcs := sources([][]byte{idRow(1, "a")}, [][]byte{idRow(2, "b")})
	srcs[1].(*fakeSource).err = boom
	if _, _, err := run(t, sortCfg(false), srcs); !errors.Is(err, boom) {
		t.Errorf("source error: %v", err)
	}
	// The client's error stops the merge.
	m, _ := New(sortCfg(false))
	if _, err := m.Run(sources([][]byte{idRow(1, "a"), idRow(2, "b")}), func([]byte) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("client error: %v", err)
	}
}

// ---- the merge: grouped mode ------------------------------------------------

// aggCfg is the merge of
//
//	SELECT name, COUNT(*), SUM(age), AVG(age), MIN(age), MAX(age) FROM user GROUP BY name
//
// as the router plans it: hidden h0 COUNT(1), h1 SUM(age), h2 COUNT(age),
// h3 MIN(age) h4 its weight, h5 MAX(age) h6 its weight, h7 name h8 its
// weight.
func aggCfg() Config {
	agg := func(i int) *router.Expr { return &router.Expr{Op: router.ExprAgg, Agg: i} }
	return Config{
		Spec: &router.MergeSpec{
			Visible: 6, Hidden: 9, Grouped: true, GroupKeys: 1,
			Sort:   []router.SortKey{{Col: 7}},
			Fields: []*router.Expr{nil, agg(0), agg(1), agg(2), agg(3), agg(4)},
			Aggs: []router.Agg{
				{Kind: router.AggCount, A: 0, Text: "COUNT(1)"},
				{Kind: router.AggSum, A: 1, Text: "SUM(`age`)"},
				{Kind: router.AggAvg, A: 1, B: 2, Text: "AVG(`age`)"},
				{Kind: router.AggMin, A: 3, Text: "MIN(`age`)"},
				{Kind: router.AggMax, A: 5, Text: "MAX(`age`)"},
			},
			Table: "user",
		},
		Count: -1,
		Cols: []Column{
			colStr, colLL, colDec(0), colDec(4), colLong, colLong,
			colLL, colDec(0), colLL, colLong, colWeight, colLong, colWeight, colStr, colWeight,
		},
	}
}

// aggRow is a sub-table's group: count(*), sum, count(age), min, max (nil:
// NULL).
func aggRow(name string, count int, sum, cnt, lo, hi any) []byte {
	avg := any(nil)
	if sum != nil && cnt.(int) > 0 {
		avg = decText(arith(router.ExprDiv, decInt(int64(sum.(int))), decInt(int64(cnt.(int)))))
	}
	return textRow(name, count, sum, avg, lo, hi,
		count, sum, cnt, lo, lo, hi, hi, name, strings.ToUpper(name))
}

func aggSources() []Source {
	return sources(
		[][]byte{aggRow("a", 2, 3, 2, 1, 2), aggRow("c", 1, 9, 1, 9, 9)},
		// "A" is "a" in the collation: one group.
		[][]byte{aggRow("A", 3, nil, 0, nil, nil), aggRow("c", 1, 10, 1, 10, 10)},
		[][]byte{aggRow("a", 1, 7, 1, 7, 7), aggRow("b", 1, nil, 0, nil, nil), aggRow("d", 4, -8, 4, -5, 1)},
	)
}

func TestMergeGrouped(t *testing.T) {
	all := []string{
		"a|6|10|3.3333|1|7", // the group's name as its first row has it
		"b|1|NULL|NULL|NULL|NULL",
		"c|2|19|9.5000|9|10", // MIN/MAX numeric: 9 < 10
		"d|4|-8|-2.0000|-5|1",
	}
	agg := func(i int) *router.Expr { return &router.Expr{Op: router.ExprAgg, Agg: i} }
	gt := func(a, b *router.Expr) *router.Expr {
		return &router.Expr{Op: router.ExprGT, Args: []*router.Expr{a, b}}
	}
	cases := []struct {
		name          string
		having        *router.Expr
		final         []router.FinalKey
		args          []any
		offset, count int64
		want          []string
		done          bool
	}{
		{name: "combined", count: -1, want: all, done: true},
		{name: "limit 1, 2", offset: 1, count: 2, want: all[1:3], done: false},
		{name: "limit 0, 4", count: 4, want: all, done: false},
		{name: "limit past the end", offset: 1, count: 10, want: all[1:], done: true},
		{name: "having COUNT(*) > 1", having: gt(agg(0), &router.Expr{Op: router.ExprConst, Val: int64(1)}), count: -1,
			want: []string{all[0], all[2], all[3]}, done: true},
		{name: "having SUM(age) > ? (bound literal)", having: gt(agg(1), &router.Expr{Op: router.ExprLit, Lit: 1}), args: []any{int64(0), router.Decimal("9.5")},
			count: -1, want: []string{all[0], all[2]}, done: true},
		{name: "having AVG(age) IS NULL", having: &router.Expr{Op: router.ExprIsNull, Args: []*router.Expr{agg(2)}}, count: -1,
			want: []string{all[1]}, done: true},
		{name: "re-sort by COUNT(*) DESC", final: []router.FinalKey{{E: agg(0), Desc: true}}, count: -1,
			want: []string{all[0], all[3], all[2], all[1]}, done: true},
		{name: "re-sort by SUM(age), NULL first, limit 1, 2", final: []router.FinalKey{{E: agg(1)}}, offset: 1, count: 2,
			want: []string{all[3], all[0]}, done: true},
		{name: "re-sort by MAX(age) DESC, COUNT(*)", final: []router.FinalKey{{E: agg(4), Desc: true}, {E: agg(0)}}, count: -1,
			want: []string{all[2], all[0], all[3], all[1]}, done: true},
		{name: "re-sort with having", having: gt(agg(0), &router.Expr{Op: router.ExprConst, Val: int64(1)}),
			final: []router.FinalKey{{E: agg(3)}}, count: -1, want: []string{all[3], all[0], all[2]}, done: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := aggCfg()
			cfg.Spec.Having, cfg.Spec.Final = c.having, c.final
			cfg.Args, cfg.Offset, cfg.Count = c.args, c.offset, c.count
			rows, done, err := run(t, cfg, aggSources())
			if err != nil {
				t.Fatal(err)
			}
			eqStrings(t, "rows", textRows(t, rows, 6), c.want)
			if done != c.done {
				t.Errorf("done = %v, want %v", done, c.done)
			}
		})
	}
}

func TestMergeGroupedMaxRows(t *testing.T) {
	cfg := aggCfg()
	cfg.Spec.Final = []router.FinalKey{{E: &router.Expr{Op: router.ExprAgg, Agg: 0}, Desc: true}}
	cfg.MaxRows = 3
	_, _, err := run(t, cfg, aggSources())
	var me *mysql.MyError
	if !errors.As(err, &me) || me.Code != 1038 || !strings.Contains(me.Message, "max_merge_rows (3)") {
		t.Fatalf("4 groups, max 3: %v", err)
	}
	cfg.MaxRows = 4
	if rows, _, err := run(t, cfg, aggSources()); err != nil || len(rows) != 4 {
		t.Fatalf("4 groups, max 4: %d rows, %v", len(rows), err)
	}
	// Streaming (no re-sort) holds no groups: no limit applies.
	cfg = aggCfg()
	cfg.MaxRows = 1
	if rows, _, err := run(t, cfg, aggSources()); err != nil || len(rows) != 4 {
		t.Fatalf("streaming with max 1: %d rows, %v", len(rows), err)
	}
}

// SELECT name, COUNT(DISTINCT age), SUM(DISTINCT age), AVG(DISTINCT age)
// FROM user GROUP BY name: the sub-tables group by name and age, ordered;
// the merge counts each (name, age) once.
func TestMergeCountDistinct(t *testing.T) {
	agg := func(i int) *router.Expr { return &router.Expr{Op: router.ExprAgg, Agg: i} }
	cfg := Config{
		Spec: &router.MergeSpec{
			Visible: 4, Hidden: 4, Grouped: true, GroupKeys: 1, DistinctArgs: 1,
			Sort:   []router.SortKey{{Col: 0}, {Col: 2}},
			Fields: []*router.Expr{nil, agg(0), agg(1), agg(2)},
			Aggs: []router.Agg{
				{Kind: router.AggCountDistinct, Text: "COUNT(DISTINCT `age`)"},
				{Kind: router.AggSumDistinct, A: 2, Text: "SUM(DISTINCT `age`)"},
				{Kind: router.AggAvgDistinct, A: 2, Text: "AVG(DISTINCT `age`)"},
			},
			Table: "user",
		},
		Count: -1,
		Cols:  []Column{colStr, colLL, colDec(0), colDec(4), colStr, colWeight, colLong, colWeight},
	}
	r := func(name string, age any) []byte {
		n, s, a := 0, any(nil), any(nil)
		if age != nil {
			n, s, a = 1, strconv.Itoa(age.(int)), strconv.Itoa(age.(int))+".0000"
		}
		return textRow(name, n, s, a, name, strings.ToUpper(name), age, age)
	}
	in := [][][]byte{
		{r("a", 1), r("a", 2), r("b", nil)},
		{r("a", 2), r("a", 3), r("b", 5)},
		{r("a", 1), r("b", 5), r("b", 6), r("c", nil)},
	}
	rows, done, err := run(t, cfg, sources(in...))
	if err != nil || !done {
		t.Fatal(err, done)
	}
	eqStrings(t, "rows", textRows(t, rows, 4), []string{"a|3|6|2.0000", "b|2|11|5.5000", "c|0|NULL|NULL"})

	// SELECT COUNT(DISTINCT age), SUM(DISTINCT age), AVG(DISTINCT age)
	// FROM user over no rows at all: one row, COUNT 0 and SUM NULL.
	cfg = Config{
		Spec: &router.MergeSpec{
			Visible: 3, Hidden: 2, Grouped: true, DistinctArgs: 1,
			Sort:   []router.SortKey{{Col: 0}},
			Fields: []*router.Expr{agg(0), agg(1), agg(2)},
			Aggs: []router.Agg{
				{Kind: router.AggCountDistinct},
				{Kind: router.AggSumDistinct, A: 0},
				{Kind: router.AggAvgDistinct, A: 0},
			},
			Table: "user",
		},
		Count: -1,
		Cols:  []Column{colLL, colDec(0), colDec(4), colLong, colWeight},
	}
	rows, done, err = run(t, cfg, sources(nil, nil))
	if err != nil || !done {
		t.Fatal(err, done)
	}
	eqStrings(t, "no rows", textRows(t, rows, 3), []string{"0|NULL|NULL"})
}

// GROUP_CONCAT partials joined with the separator; an expression over
// aggregates; a non-aggregate column as the group's first row has it.
func TestMergeGroupConcatAndExpr(t *testing.T) {
	agg := func(i int) *router.Expr { return &router.Expr{Op: router.ExprAgg, Agg: i} }
	// SELECT name, GROUP_CONCAT(age SEPARATOR ';'), SUM(age) / COUNT(*) + 1 AS r, note
	// FROM user GROUP BY name: hidden h0 GROUP_CONCAT, h1 SUM(age), h2 COUNT(1), h3 name, h4 weight.
	cfg := Config{
		Spec: &router.MergeSpec{
			Visible: 4, Hidden: 5, Grouped: true, GroupKeys: 1,
			Sort: []router.SortKey{{Col: 3}},
			Fields: []*router.Expr{nil, agg(0), {Op: router.ExprAdd, Args: []*router.Expr{
				{Op: router.ExprDiv, Args: []*router.Expr{agg(1), agg(2)}},
				{Op: router.ExprConst, Val: int64(1)},
			}}, nil},
			Aggs: []router.Agg{
				{Kind: router.AggGroupConcat, A: 0, Sep: &router.Expr{Op: router.ExprConst, Val: ";"}},
				{Kind: router.AggSum, A: 1},
				{Kind: router.AggCount, A: 2},
			},
			Table: "user",
		},
		Count: -1,
		Cols:  []Column{colStr, colStr, colDec(4), colStr, colStr, colDec(0), colLL, colStr, colWeight},
	}
	r := func(name, cat string, sum any, count int, note string) []byte {
		c := any(cat)
		if cat == "" {
			c = nil
		}
		return textRow(name, c, "x", note, c, sum, count, name, name)
	}
	in := [][][]byte{
		{r("a", "1;2", 3, 2, "first"), r("b", "", nil, 1, "b1")},
		{r("a", "3", 3, 1, "second"), r("b", "", nil, 2, "b2")},
		{r("a", "", nil, 1, "third")}, // a group whose ages are all NULL
	}
	rows, _, err := run(t, cfg, sources(in...))
	if err != nil {
		t.Fatal(err)
	}
	// a: 6 / 4 + 1 = 2.5000; b: NULL / 3 + 1 is NULL, and GROUP_CONCAT of
	// only NULLs is NULL.
	eqStrings(t, "rows", textRows(t, rows, 4), []string{"a|1;2;3|2.5000|first", "b|NULL|NULL|b1"})
}

// The aggregates in the binary protocol: COUNT as 8 bytes, SUM and AVG as
// length-encoded decimals, MIN/MAX as the sub-table sent them.
func TestMergeGroupedBinary(t *testing.T) {
	cfg := aggCfg()
	cfg.Binary = true
	s := func(v any) []byte {
		if v == nil {
			return nil
		}
		return lenc(fmt.Sprint(v))
	}
	i4 := func(v any) []byte {
		if v == nil {
			return nil
		}
		return le4(int32(v.(int)))
	}
	r := func(name string, count int, sum, cnt, lo, hi any) []byte {
		var avg []byte
		if sum != nil && cnt.(int) > 0 {
			avg = lenc(decText(arith(router.ExprDiv, decInt(int64(sum.(int))), decInt(int64(cnt.(int))))))
		}
		return binRow(lenc(name), le8(int64(count)), s(sum), avg, i4(lo), i4(hi),
			le8(int64(count)), s(sum), le8(int64(cnt.(int))), i4(lo), s(lo), i4(hi), s(hi), lenc(name), lenc(strings.ToUpper(name)))
	}
	srcs := sources(
		[][]byte{r("a", 2, 3, 2, 1, 2), r("c", 1, 9, 1, 9, 9)},
		[][]byte{r("A", 3, nil, 0, nil, nil), r("c", 1, 10, 1, 10, 10)},
		[][]byte{r("a", 1, 7, 1, 7, 7), r("b", 1, nil, 0, nil, nil), r("d", 4, -8, 4, -5, 1)},
	)
	rows, done, err := run(t, cfg, srcs)
	if err != nil || !done {
		t.Fatal(err, done)
	}
	want := [][]byte{
		binRow(lenc("a"), le8(6), lenc("10"), lenc("3.3333"), le4(1), le4(7)),
		binRow(lenc("b"), le8(1), nil, nil, nil, nil),
		binRow(lenc("c"), le8(2), lenc("19"), lenc("9.5000"), le4(9), le4(10)),
		binRow(lenc("d"), le8(4), lenc("-8"), lenc("-2.0000"), le4(-5), le4(1)),
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i := range want {
		if !bytes.Equal(rows[i], want[i]) {
			t.Errorf("row %d:\n got % x\nwant % x", i, rows[i], want[i])
		}
	}
}

// SELECT g, COALESCE(MAX(d), MIN(d)) FROM t GROUP BY g, prepared: a DATE
// computed by the merge goes to the client in the binary DATE encoding.
func TestMergeGroupedBinaryDate(t *testing.T) {
	agg := func(i int) *router.Expr { return &router.Expr{Op: router.ExprAgg, Agg: i} }
	cfg := Config{
		Spec: &router.MergeSpec{
			Visible: 2, Hidden: 6, Grouped: true, GroupKeys: 1,
			Sort:   []router.SortKey{{Col: 4}},
			Fields: []*router.Expr{nil, {Op: router.ExprCoalesce, Args: []*router.Expr{agg(0), agg(1)}}},
			Aggs:   []router.Agg{{Kind: router.AggMax, A: 0}, {Kind: router.AggMin, A: 2}},
			Table:  "t",
		},
		Count:  -1,
		Binary: true,
		Cols:   []Column{colLong, colDate, colDate, colWeight, colDate, colWeight, colLong, colWeight},
	}
	d := withLen(date(2020, 1, 2))
	in := [][][]byte{{binRow(le4(1), d, d, lenc("x"), d, lenc("x"), le4(1), lenc("1"))}}
	rows, _, err := run(t, cfg, sources(in...))
	if err != nil {
		t.Fatal(err)
	}
	want := binRow(le4(1), d)
	if len(rows) != 1 || !bytes.Equal(rows[0], want) {
		t.Errorf("binary DATE from an expression:\n got % x\nwant % x", rows, want)
	}
}

// SELECT g, MAX(price) AS m FROM t GROUP BY g ORDER BY m, prepared: the
// re-sort compares the DECIMAL maxima as numbers, as in the text protocol.
func TestMergeGroupedBinaryDecimalResort(t *testing.T) {
	for _, bin := range []bool{false, true} {
		cfg := Config{
			Spec: &router.MergeSpec{
				Visible: 2, Hidden: 4, Grouped: true, GroupKeys: 1,
				Sort:   []router.SortKey{{Col: 2}},
				Fields: []*router.Expr{nil, {Op: router.ExprAgg, Agg: 0}},
				Aggs:   []router.Agg{{Kind: router.AggMax, A: 0}},
				Final:  []router.FinalKey{{E: &router.Expr{Op: router.ExprAgg, Agg: 0}}},
				Table:  "t",
			},
			Count:  -1,
			Binary: bin,
			Cols:   []Column{colLong, colDec(2), colDec(2), colWeight, colLong, colWeight},
		}
		r := func(g int, m string) []byte {
			if bin {
				return binRow(le4(int32(g)), lenc(m), lenc(m), lenc(m), le4(int32(g)), lenc(strconv.Itoa(g)))
			}
			return textRow(g, m, m, m, g, g)
		}
		rows, _, err := run(t, cfg, sources([][]byte{r(1, "10.00"), r(2, "9.99"), r(3, "-1.00"), r(4, "-20.00")}))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, row := range rows {
			if bin {
				cells, starts := make([]cell, 2), make([]int, 3)
				if err := splitBinary(row, cfg.Cols[:2], cells, starts); err != nil {
					t.Fatal(err)
				}
				got = append(got, string(cells[1].b))
			} else {
				got = append(got, strings.Split(textRows(t, [][]byte{row}, 2)[0], "|")[1])
			}
		}
		eqStrings(t, fmt.Sprintf("binary %v: MAX(price) re-sorted", bin), got, []string{"-20.00", "-1.00", "9.99", "10.00"})
	}
}

// ---- allocation and speed ----------------------------------------------------

// benchSources: n sources of rows text rows each, ids interleaved.
func benchRows(n, rows int) [][][]byte {
	out := make([][][]byte, n)
	for s := range out {
		for i := range rows {
			id := strconv.Itoa(i*n + s)
			out[s] = append(out[s], textRow(id, "name-"+id, id, id))
		}
	}
	return out
}

// rowSource hands out prebuilt rows without copying.
type rowSource struct {
	rows [][]byte
	i    int
}

func (s *rowSource) Next() ([]byte, error) {
	if s.i >= len(s.rows) {
		return nil, nil
	}
	s.i++
	return s.rows[s.i-1], nil
}

// TestMergeSortNoPerRowAllocs: the sort merge allocates per merge, not
// per row.
func TestMergeSortNoPerRowAllocs(t *testing.T) {
	in := benchRows(8, 1000)
	srcs := make([]Source, len(in))
	rs := make([]rowSource, len(in))
	allocs := testing.AllocsPerRun(5, func() {
		for i := range rs {
			rs[i] = rowSource{rows: in[i]}
			srcs[i] = &rs[i]
		}
		m, err := New(sortCfg(false))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Run(srcs, func([]byte) error { return nil }); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 100 {
		t.Errorf("%v allocations merging 8000 rows, want a constant number (<= 100)", allocs)
	}
}

// BenchmarkMergeSort: 8 sub-tables × 10k text rows ordered by an INT key.
func BenchmarkMergeSort(b *testing.B) {
	const nsrc, nrows = 8, 10000
	in := benchRows(nsrc, nrows)
	srcs := make([]Source, nsrc)
	rs := make([]rowSource, nsrc)
	var sent uint64
	b.ReportAllocs()
	for b.Loop() {
		for i := range rs {
			rs[i] = rowSource{rows: in[i]}
			srcs[i] = &rs[i]
		}
		m, err := New(sortCfg(false))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.Run(srcs, func([]byte) error { return nil }); err != nil {
			b.Fatal(err)
		}
		sent += m.Sent()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(sent), "ns/row")
}
