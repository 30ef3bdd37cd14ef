package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// xparam is one parameter of a hand-built COM_STMT_EXECUTE packet.
type xparam struct {
	typ      byte
	unsigned bool
	null     bool
	long     bool   // sent as long data: no value in the packet
	val      []byte // the binary-protocol encoding of the value
}

// buildExecute builds a COM_STMT_EXECUTE packet (command byte first). With
// bound false the types are left out (the client reuses the previous ones).
func buildExecute(id uint32, flags byte, iter uint32, bound bool, ps []xparam) []byte {
	b := []byte{0x17}
	b = binary.LittleEndian.AppendUint32(b, id)
	b = append(b, flags)
	b = binary.LittleEndian.AppendUint32(b, iter)
	if len(ps) == 0 {
		return b
	}
	nm := make([]byte, (len(ps)+7)/8)
	for i, p := range ps {
		if p.null {
			nm[i/8] |= 1 << (i % 8)
		}
	}
	b = append(b, nm...)
	if bound {
		b = append(b, 1)
		b = append(b, typesOf(ps)...)
	} else {
		b = append(b, 0)
	}
	for _, p := range ps {
		if !p.null && !p.long {
			b = append(b, p.val...)
		}
	}
	return b
}

func typesOf(ps []xparam) []byte {
	var t []byte
	for _, p := range ps {
		var f byte
		if p.unsigned {
			f = 0x80
		}
		t = append(t, p.typ, f)
	}
	return t
}

func longOf(ps []xparam) func(int) bool {
	return func(i int) bool { return i < len(ps) && ps[i].long }
}

func le16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func lenenc(s string) []byte { return AppendLenEncString(nil, s) }

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

// temporalBytes encodes a binary DATE/DATETIME with the given length byte.
func temporalBytes(n byte, y uint16, mo, d, h, mi, s byte, micro uint32) []byte {
	full := cat(le16(y), []byte{mo, d, h, mi, s}, le32(micro))
	return append([]byte{n}, full[:n]...)
}

// timeBytes encodes a binary TIME with the given length byte.
func timeBytes(n byte, neg bool, days uint32, h, m, s byte, micro uint32) []byte {
	var sign byte
	if neg {
		sign = 1
	}
	full := cat([]byte{sign}, le32(days), []byte{h, m, s}, le32(micro))
	return append([]byte{n}, full[:n]...)
}

type valueCase struct {
	name string
	p    xparam
	want any
}

// valueCases covers every type the decoder sizes.
func valueCases() []valueCase {
	long300 := strings.Repeat("x", 300)
	long70k := strings.Repeat("y", 70000)
	return []valueCase{
		{"tiny signed", xparam{typ: TypeTiny, val: []byte{0xff}}, int64(-1)},
		{"tiny unsigned", xparam{typ: TypeTiny, unsigned: true, val: []byte{0xff}}, int64(255)},
		{"tiny min", xparam{typ: TypeTiny, val: []byte{0x80}}, int64(-128)},
		{"short signed", xparam{typ: TypeShort, val: le16(0x8000)}, int64(-32768)},
		{"short unsigned", xparam{typ: TypeShort, unsigned: true, val: le16(0xffff)}, int64(65535)},
		{"year", xparam{typ: TypeYear, val: le16(2024)}, int64(2024)},
		{"year high bit", xparam{typ: TypeYear, val: le16(0xffff)}, int64(65535)},
		{"long signed", xparam{typ: TypeLong, val: le32(0xffffffff)}, int64(-1)},
		{"long min", xparam{typ: TypeLong, val: le32(0x80000000)}, int64(math.MinInt32)},
		{"long unsigned", xparam{typ: TypeLong, unsigned: true, val: le32(0xffffffff)}, int64(math.MaxUint32)},
		{"int24 signed", xparam{typ: TypeInt24, val: le32(0xfffffffe)}, int64(-2)},
		{"int24 unsigned", xparam{typ: TypeInt24, unsigned: true, val: le32(16777215)}, int64(16777215)},
		{"longlong min", xparam{typ: TypeLongLong, val: le64(1 << 63)}, int64(math.MinInt64)},
		{"longlong -1", xparam{typ: TypeLongLong, val: le64(math.MaxUint64)}, int64(-1)},
		{"longlong unsigned max", xparam{typ: TypeLongLong, unsigned: true, val: le64(math.MaxUint64)}, uint64(math.MaxUint64)},
		{"longlong unsigned small", xparam{typ: TypeLongLong, unsigned: true, val: le64(5)}, int64(5)},
		{"longlong unsigned maxint", xparam{typ: TypeLongLong, unsigned: true, val: le64(math.MaxInt64)}, int64(math.MaxInt64)},
		{"float", xparam{typ: TypeFloat, val: le32(math.Float32bits(1.5))}, float64(1.5)},
		{"double", xparam{typ: TypeDouble, val: le64(math.Float64bits(-2.25))}, float64(-2.25)},
		{"null type", xparam{typ: TypeNull}, nil},
		{"date", xparam{typ: TypeDate, val: temporalBytes(4, 2024, 2, 29, 0, 0, 0, 0)}, "2024-02-29"},
		{"date zero length", xparam{typ: TypeDate, val: []byte{0}}, "0000-00-00"},
		{"newdate", xparam{typ: TypeNewDate, val: temporalBytes(4, 1999, 12, 31, 0, 0, 0, 0)}, "1999-12-31"},
		{"datetime 7", xparam{typ: TypeDatetime, val: temporalBytes(7, 2024, 2, 29, 13, 14, 15, 0)}, "2024-02-29 13:14:15"},
		{"datetime 11", xparam{typ: TypeDatetime, val: temporalBytes(11, 2024, 1, 2, 3, 4, 5, 123456)}, "2024-01-02 03:04:05.123456"},
		{"datetime 11 small micro", xparam{typ: TypeDatetime, val: temporalBytes(11, 2024, 1, 2, 3, 4, 5, 5)}, "2024-01-02 03:04:05.000005"},
		{"datetime 4", xparam{typ: TypeDatetime, val: temporalBytes(4, 2024, 1, 2, 0, 0, 0, 0)}, "2024-01-02 00:00:00"},
		{"datetime 0", xparam{typ: TypeDatetime, val: []byte{0}}, "0000-00-00 00:00:00"},
		{"timestamp", xparam{typ: TypeTimestamp, val: temporalBytes(7, 2038, 1, 19, 3, 14, 7, 0)}, "2038-01-19 03:14:07"},
		{"time 0", xparam{typ: TypeTime, val: []byte{0}}, "00:00:00"},
		{"time 8", xparam{typ: TypeTime, val: timeBytes(8, false, 0, 12, 34, 56, 0)}, "12:34:56"},
		{"time negative days", xparam{typ: TypeTime, val: timeBytes(8, true, 1, 2, 3, 4, 0)}, "-26:03:04"},
		{"time big", xparam{typ: TypeTime, val: timeBytes(8, false, 34, 22, 59, 59, 0)}, "838:59:59"},
		{"time 12", xparam{typ: TypeTime, val: timeBytes(12, false, 0, 1, 2, 3, 7)}, "01:02:03.000007"},
		{"decimal", xparam{typ: TypeDecimal, val: lenenc("1.5")}, "1.5"},
		{"newdecimal", xparam{typ: TypeNewDecimal, val: lenenc("-123456789012345678901234567890.123")}, "-123456789012345678901234567890.123"},
		{"varchar", xparam{typ: TypeVarchar, val: lenenc("abc")}, "abc"},
		{"bit", xparam{typ: TypeBit, val: lenenc("\x01\x02")}, "\x01\x02"},
		{"json", xparam{typ: TypeJSON, val: lenenc(`{"a":[1,2]}`)}, `{"a":[1,2]}`},
		{"enum", xparam{typ: TypeEnum, val: lenenc("red")}, "red"},
		{"set", xparam{typ: TypeSet, val: lenenc("a,b")}, "a,b"},
		{"tinyblob", xparam{typ: TypeTinyBlob, val: lenenc("\x00\xff")}, "\x00\xff"},
		{"mediumblob", xparam{typ: TypeMediumBlob, val: lenenc(long300)}, long300},
		{"longblob 0xfd", xparam{typ: TypeLongBlob, val: lenenc(long70k)}, long70k},
		{"blob", xparam{typ: TypeBlob, val: lenenc("b")}, "b"},
		{"var string utf8mb4", xparam{typ: TypeVarString, val: lenenc("héllo 🦀")}, "héllo 🦀"},
		{"var string empty", xparam{typ: TypeVarString, val: lenenc("")}, ""},
		{"string", xparam{typ: TypeString, val: lenenc("s")}, "s"},
		{"geometry", xparam{typ: TypeGeometry, val: lenenc("\x00\x00\x00\x00\x01")}, "\x00\x00\x00\x00\x01"},
		{"string 8-byte length", xparam{typ: TypeString, val: append([]byte{0xfe}, append(le64(2), 'h', 'i')...)}, "hi"},
	}
}

func TestParseExecuteTypes(t *testing.T) {
	for _, c := range valueCases() {
		t.Run(c.name, func(t *testing.T) {
			// The parameter alone, then between two others so its size is
			// checked by where the next one starts.
			for _, ps := range [][]xparam{
				{c.p},
				{{typ: TypeTiny, val: []byte{7}}, c.p, {typ: TypeVarString, val: lenenc("end")}},
			} {
				at := 0
				if len(ps) == 3 {
					at = 1
				}
				p := buildExecute(42, 0, 1, true, ps)
				e, err := ParseExecute(p, len(ps), nil, nil)
				if err != nil {
					t.Fatalf("parse: %v", err)
				}
				if e.ID != 42 || e.Iter != 1 || !e.Bound || !bytes.Equal(e.Types, typesOf(ps)) {
					t.Fatalf("header: %+v", e)
				}
				s := e.Spans[at]
				if got := p[s[0]:s[1]]; !bytes.Equal(got, c.p.val) {
					t.Fatalf("span %v holds % x, want % x", s, got, c.p.val)
				}
				if s := e.Spans[len(ps)-1]; s[1] != len(p) {
					t.Fatalf("last span ends at %d, packet is %d bytes", s[1], len(p))
				}
				v, ok := e.Value(p, at)
				if !ok || !reflect.DeepEqual(v, c.want) {
					t.Fatalf("Value = %#v, %v; want %#v", v, ok, c.want)
				}
				if len(ps) == 3 {
					if v, _ := e.Value(p, 2); v != "end" {
						t.Fatalf("next parameter = %#v", v)
					}
				}
			}
		})
	}
}

func TestParseExecuteNoParams(t *testing.T) {
	p := buildExecute(7, CursorReadOnly, 1, true, nil)
	e, err := ParseExecute(p, 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.ID != 7 || e.Flags != CursorReadOnly || e.Iter != 1 || e.NullMap != nil || e.Spans != nil || e.ValuesAt != 10 || e.Params != 0 {
		t.Fatalf("%+v", e)
	}
	if q := AppendExecute(nil, 9, e, p, nil); !bytes.Equal(q, append([]byte{0x17}, cat(le32(9), []byte{CursorReadOnly}, le32(1))...)) {
		t.Fatalf("AppendExecute without parameters: % x", q)
	}
}

func TestParseExecuteNullBitmap(t *testing.T) {
	// 10 parameters: the bitmap takes 2 bytes; NULLs at 0, 7, 8 and 9.
	ps := make([]xparam, 10)
	for i := range ps {
		ps[i] = xparam{typ: TypeLong, val: le32(uint32(i))}
	}
	for _, i := range []int{0, 7, 8, 9} {
		ps[i].null = true
	}
	ps[8].typ = TypeNull
	p := buildExecute(1, 0, 1, true, ps)
	e, err := ParseExecute(p, len(ps), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.NullMap) != 2 || e.NullMap[0] != 0x81 || e.NullMap[1] != 0x03 {
		t.Fatalf("NullMap % x", e.NullMap)
	}
	for i, x := range ps {
		if e.Null(i) != x.null {
			t.Fatalf("Null(%d) = %v", i, e.Null(i))
		}
		v, ok := e.Value(p, i)
		if !ok {
			t.Fatalf("Value(%d) not ok", i)
		}
		if x.null {
			if v != nil || e.Spans[i][0] != e.Spans[i][1] {
				t.Fatalf("NULL %d: %v span %v", i, v, e.Spans[i])
			}
		} else if v != int64(i) {
			t.Fatalf("Value(%d) = %v", i, v)
		}
	}
	// All NULL: no values at all, the packet ends after the types.
	for i := range ps {
		ps[i].null = true
	}
	p = buildExecute(1, 0, 1, true, ps)
	e, err = ParseExecute(p, len(ps), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.ValuesAt != len(p) {
		t.Fatalf("ValuesAt %d, packet %d", e.ValuesAt, len(p))
	}
}

func TestParseExecutePrevTypes(t *testing.T) {
	ps := []xparam{
		{typ: TypeLongLong, unsigned: true, val: le64(math.MaxUint64)},
		{typ: TypeVarString, val: lenenc("two")},
		{typ: TypeDouble, null: true},
		{typ: TypeDatetime, val: temporalBytes(7, 2020, 5, 6, 7, 8, 9, 0)},
	}
	prev := typesOf(ps)
	p := buildExecute(3, 0, 1, false, ps)
	e, err := ParseExecute(p, len(ps), prev, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.Bound || !bytes.Equal(e.Types, prev) {
		t.Fatalf("Bound %v Types % x", e.Bound, e.Types)
	}
	want := []any{uint64(math.MaxUint64), "two", nil, "2020-05-06 07:08:09"}
	for i := range ps {
		if v, ok := e.Value(p, i); !ok || !reflect.DeepEqual(v, want[i]) {
			t.Fatalf("Value(%d) = %#v %v, want %#v", i, v, ok, want[i])
		}
	}
	// Types never bound, or bound for another parameter count.
	for _, bad := range [][]byte{nil, prev[:6], append(append([]byte{}, prev...), 1, 0)} {
		if _, err := ParseExecute(p, len(ps), bad, nil); !errors.Is(err, ErrBadExecute) {
			t.Fatalf("prevTypes % x: err %v, want ErrBadExecute", bad, err)
		}
	}

	// WithTypes makes the packet self-contained, for a backend statement
	// that never saw those types: same values, new id, types bound.
	q := WithTypes(nil, 99, e, p)
	e2, err := ParseExecute(q, len(ps), nil, nil)
	if err != nil {
		t.Fatalf("WithTypes packet: %v (% x)", err, q)
	}
	if e2.ID != 99 || !e2.Bound || !bytes.Equal(e2.Types, prev) || e2.Flags != e.Flags || e2.Iter != e.Iter {
		t.Fatalf("WithTypes header: %+v", e2)
	}
	for i := range ps {
		v1, _ := e.Value(p, i)
		v2, _ := e2.Value(q, i)
		if !reflect.DeepEqual(v1, v2) {
			t.Fatalf("WithTypes parameter %d: %#v, want %#v", i, v2, v1)
		}
	}
	if !bytes.Equal(q[e2.ValuesAt:], p[e.ValuesAt:]) {
		t.Fatal("WithTypes changed the values")
	}
	// Bound packets keep their own types whatever prevTypes says.
	pb := buildExecute(3, 0, 1, true, ps)
	other := bytes.Repeat([]byte{TypeTiny, 0}, len(ps))
	eb, err := ParseExecute(pb, len(ps), other, nil)
	if err != nil || !bytes.Equal(eb.Types, prev) {
		t.Fatalf("bound packet with stale prevTypes: % x %v", eb.Types, err)
	}
}

func TestParseExecuteLongData(t *testing.T) {
	ps := []xparam{
		{typ: TypeLong, val: le32(1)},
		{typ: TypeBlob, long: true},
		{typ: TypeVarString, val: lenenc("x")},
		{typ: TypeString, long: true, null: true}, // NULL wins
	}
	p := buildExecute(5, 0, 1, true, ps)
	e, err := ParseExecute(p, len(ps), nil, longOf(ps))
	if err != nil {
		t.Fatal(err)
	}
	if s := e.Spans[1]; s[0] != s[1] {
		t.Fatalf("long-data span %v", s)
	}
	if v, ok := e.Value(p, 1); ok || v != nil {
		t.Fatalf("long-data Value = %#v %v, want nil false", v, ok)
	}
	if v, ok := e.Value(p, 2); !ok || v != "x" {
		t.Fatalf("Value after long data = %#v %v", v, ok)
	}
	if v, ok := e.Value(p, 3); !ok || v != nil {
		t.Fatalf("NULL long-data Value = %#v %v", v, ok)
	}
	// Without knowing parameter 1 is long data, the packet is misread.
	if e2, err := ParseExecute(p, len(ps), nil, nil); err == nil {
		if v, _ := e2.Value(p, 2); v == "x" {
			t.Fatal("long data ignored but parameter 2 still read right?")
		}
	}
	// AppendExecute of a subset that includes the long parameter: it stays
	// without a value, for the long data sent separately.
	q := AppendExecute(nil, 6, e, p, []int{2, 1})
	e3, err := ParseExecute(q, 2, nil, func(i int) bool { return i == 1 })
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := e3.Value(q, 0); v != "x" {
		t.Fatalf("subset value %#v", v)
	}
	if e3.Spans[1][0] != e3.Spans[1][1] || e3.Spans[1][1] != len(q) {
		t.Fatalf("subset long span %v of %d", e3.Spans[1], len(q))
	}
}

// Value promises ok false for every parameter sent as long data: clients
// may send long data for any parameter type (MySQL accepts it), and the
// router binds values of sharded statements with Value.
func TestExecuteValueLongDataEveryType(t *testing.T) {
	for _, c := range valueCases() {
		if c.p.typ == TypeNull {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			ps := []xparam{{typ: c.p.typ, unsigned: c.p.unsigned, long: true}}
			p := buildExecute(1, 0, 1, true, ps)
			e, err := ParseExecute(p, 1, nil, longOf(ps))
			if err != nil {
				t.Fatal(err)
			}
			v, ok, panicked := safeValue(e, p, 0)
			if panicked != nil {
				t.Fatalf("Value panics on a long-data parameter of type 0x%02x: %v", c.p.typ, panicked)
			}
			if ok || v != nil {
				t.Fatalf("Value = %#v %v, want nil false", v, ok)
			}
		})
	}
}

func safeValue(e *Execute, p []byte, i int) (v any, ok bool, panicked any) {
	defer func() { panicked = recover() }()
	v, ok = e.Value(p, i)
	return
}

func TestAppendExecuteSubset(t *testing.T) {
	ps := []xparam{
		{typ: TypeLongLong, val: le64(10)},
		{typ: TypeVarString, null: true},
		{typ: TypeVarString, val: lenenc("b")},
		{typ: TypeDouble, unsigned: true, val: le64(math.Float64bits(0.5))},
		{typ: TypeLong, null: true},
		{typ: TypeLongLong, val: le64(20)},
		{typ: TypeVarString, val: lenenc("c")},
		{typ: TypeTime, val: timeBytes(8, true, 0, 1, 0, 0, 0)},
		{typ: TypeTiny, null: true},
	}
	for _, bound := range []bool{true, false} {
		p := buildExecute(11, CursorReadOnly, 1, bound, ps)
		e, err := ParseExecute(p, len(ps), typesOf(ps), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, sub := range [][]int{{0, 1, 2}, {5, 6, 4}, {8, 7, 6, 5, 4, 3, 2, 1, 0}, {3}, {1}} {
			q := AppendExecute([]byte("junk"), 12, e, p, sub)
			if string(q[:4]) != "junk" {
				t.Fatal("AppendExecute overwrote its buffer")
			}
			q = q[4:]
			e2, err := ParseExecute(q, len(sub), nil, nil)
			if err != nil {
				t.Fatalf("subset %v: %v", sub, err)
			}
			if e2.ID != 12 || e2.Flags != CursorReadOnly || e2.Iter != 1 || !e2.Bound {
				t.Fatalf("subset %v header %+v", sub, e2)
			}
			for j, i := range sub {
				if e2.Null(j) != ps[i].null {
					t.Fatalf("subset %v: Null(%d) = %v", sub, j, e2.Null(j))
				}
				if e2.Types[2*j] != e.Types[2*i] || e2.Types[2*j+1] != e.Types[2*i+1] {
					t.Fatalf("subset %v: type of %d", sub, j)
				}
				v1, _ := e.Value(p, i)
				v2, _ := e2.Value(q, j)
				if !reflect.DeepEqual(v1, v2) {
					t.Fatalf("subset %v: parameter %d = %#v, want %#v", sub, j, v2, v1)
				}
			}
			if e2.Spans[len(sub)-1][1] > len(q) {
				t.Fatal("span past packet")
			}
		}
	}
}

// Every strict prefix of a valid packet whose last byte belongs to a value
// is refused with ErrBadExecute, never a panic.
func TestParseExecuteTruncated(t *testing.T) {
	var packets [][]xparam
	for _, c := range valueCases() {
		if len(c.p.val) == 0 {
			continue
		}
		packets = append(packets, []xparam{c.p}, []xparam{{typ: TypeNull, null: true}, c.p})
	}
	// Nine parameters: a two-byte bitmap.
	nine := make([]xparam, 9)
	for i := range nine {
		nine[i] = xparam{typ: TypeTiny, val: []byte{byte(i)}}
	}
	packets = append(packets, nine)
	for _, ps := range packets {
		for _, bound := range []bool{true, false} {
			p := buildExecute(1, 0, 1, bound, ps)
			if _, err := ParseExecute(p, len(ps), typesOf(ps), nil); err != nil {
				t.Fatalf("full packet % x: %v", p, err)
			}
			for n := range len(p) {
				e, err := ParseExecute(p[:n:n], len(ps), typesOf(ps), nil)
				if !errors.Is(err, ErrBadExecute) {
					t.Fatalf("type 0x%02x bound %v: %d of %d bytes: %+v %v, want ErrBadExecute", ps[len(ps)-1].typ, bound, n, len(p), e, err)
				}
			}
		}
	}
}

func TestParseExecuteBad(t *testing.T) {
	for _, c := range []struct {
		name    string
		p       []byte
		nparams int
	}{
		{"empty", nil, 0},
		{"3 bytes", []byte{0x17, 1, 0}, 1},
		{"9 bytes", []byte{0x17, 1, 0, 0, 0, 0, 1, 0, 0}, 0},
		{"no bitmap", buildExecute(1, 0, 1, true, nil), 1},
		{"no bound flag", append(buildExecute(1, 0, 1, true, nil), 0), 1},
		{"types cut", append(buildExecute(1, 0, 1, true, nil), 0, 1, TypeLong), 1},
		{"unknown type", append(buildExecute(1, 0, 1, true, nil), 0, 1, 0x20, 0, 1), 1},
		{"lenenc 0xff", append(buildExecute(1, 0, 1, true, nil), 0, 1, TypeVarString, 0, 0xff), 1},
		{"lenenc cut", append(buildExecute(1, 0, 1, true, nil), 0, 1, TypeVarString, 0, 0xfc, 1), 1},
		{"string past end", append(buildExecute(1, 0, 1, true, nil), 0, 1, TypeBlob, 0, 5, 'a'), 1},
		{"huge 8-byte length", append(append(buildExecute(1, 0, 1, true, nil), 0, 1, TypeBlob, 0, 0xfe), le64(math.MaxUint64)...), 1},
		{"length near MaxInt", append(append(buildExecute(1, 0, 1, true, nil), 0, 1, TypeBlob, 0, 0xfe), le64(math.MaxInt64)...), 1},
		{"temporal cut", append(buildExecute(1, 0, 1, true, nil), 0, 1, TypeDatetime, 0, 11, 1, 2), 1},
		{"temporal length missing", append(buildExecute(1, 0, 1, true, nil), 0, 1, TypeTime, 0), 1},
		{"too few params", buildExecute(1, 0, 1, true, []xparam{{typ: TypeLong, val: le32(1)}}), 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, err := ParseExecute(c.p, c.nparams, nil, nil)
			if !errors.Is(err, ErrBadExecute) {
				t.Fatalf("%+v %v, want ErrBadExecute", e, err)
			}
		})
	}
}

// FuzzParseExecute: the decoder never panics; what it accepts has its spans
// inside the packet, in order, and survives a round trip through
// AppendExecute.
func FuzzParseExecute(f *testing.F) {
	var all []xparam
	for _, c := range valueCases() {
		if len(c.p.val) < 1000 {
			all = append(all, c.p)
		}
	}
	f.Add(buildExecute(1, 0, 1, true, all), uint16(len(all)), []byte(nil), uint64(0))
	f.Add(buildExecute(1, 0, 1, false, all), uint16(len(all)), typesOf(all), uint64(0))
	for _, c := range valueCases() {
		if len(c.p.val) < 1000 {
			f.Add(buildExecute(2, 1, 1, true, []xparam{c.p}), uint16(1), []byte(nil), uint64(0))
		}
	}
	withLong := []xparam{{typ: TypeBlob, long: true}, {typ: TypeLong, null: true}, {typ: TypeVarString, val: lenenc("v")}, {typ: TypeString, long: true}}
	f.Add(buildExecute(3, 0, 1, true, withLong), uint16(4), []byte(nil), uint64(0b1001))
	f.Add(buildExecute(4, 0, 1, true, nil), uint16(0), []byte(nil), uint64(0))
	f.Add([]byte{0x17, 1, 0}, uint16(1), []byte(nil), uint64(0))
	f.Fuzz(func(t *testing.T, p []byte, nparams uint16, prev []byte, longMask uint64) {
		n := int(nparams % 200)
		long := func(i int) bool { return longMask&(1<<(i%64)) != 0 }
		e, err := ParseExecute(p, n, prev, long)
		if err != nil {
			if !errors.Is(err, ErrBadExecute) {
				t.Fatalf("error %v does not wrap ErrBadExecute", err)
			}
			return
		}
		if e.Params != n || e.ValuesAt > len(p) || e.ValuesAt < 10 {
			t.Fatalf("Params %d ValuesAt %d of %d", e.Params, e.ValuesAt, len(p))
		}
		if n == 0 {
			return
		}
		if len(e.Types) != 2*n || len(e.Spans) != n || len(e.NullMap) != (n+7)/8 {
			t.Fatalf("Types %d Spans %d NullMap %d for %d parameters", len(e.Types), len(e.Spans), len(e.NullMap), n)
		}
		at := e.ValuesAt
		all := make([]int, n)
		for i, s := range e.Spans {
			all[i] = i
			if s[0] != at || s[1] < s[0] || s[1] > len(p) {
				t.Fatalf("span %d = %v, want from %d inside %d bytes", i, s, at, len(p))
			}
			if (e.Null(i) || long(i)) && s[0] != s[1] {
				t.Fatalf("NULL or long parameter %d has span %v", i, s)
			}
			at = s[1]
		}
		vals := make([]any, n)
		for i := range n {
			if long(i) && !e.Null(i) {
				continue // see TestExecuteValueLongDataEveryType
			}
			v, ok := e.Value(p, i)
			if !ok {
				t.Fatalf("Value(%d) not ok", i)
			}
			vals[i] = v
		}
		q := AppendExecute(nil, e.ID+1, e, p, all)
		e2, err := ParseExecute(q, n, nil, long)
		if err != nil {
			t.Fatalf("AppendExecute output does not parse: %v\n% x", err, q)
		}
		if e2.ID != e.ID+1 || e2.Flags != e.Flags || e2.Iter != e.Iter || !e2.Bound || !bytes.Equal(e2.Types, e.Types) {
			t.Fatalf("round trip header %+v, want %+v", e2, e)
		}
		for i := range n {
			if e2.Null(i) != e.Null(i) {
				t.Fatalf("round trip Null(%d)", i)
			}
			s1, s2 := e.Spans[i], e2.Spans[i]
			if !bytes.Equal(p[s1[0]:s1[1]], q[s2[0]:s2[1]]) {
				t.Fatalf("round trip parameter %d bytes differ", i)
			}
			if long(i) && !e.Null(i) {
				continue
			}
			v, _ := e2.Value(q, i)
			if !sameValue(v, vals[i]) {
				t.Fatalf("round trip parameter %d = %#v, want %#v", i, v, vals[i])
			}
		}
		if !e.Bound {
			w := WithTypes(nil, e.ID, e, p)
			e3, err := ParseExecute(w, n, nil, long)
			if err != nil {
				t.Fatalf("WithTypes output does not parse: %v", err)
			}
			for i := range n {
				s1, s3 := e.Spans[i], e3.Spans[i]
				if !bytes.Equal(p[s1[0]:s1[1]], w[s3[0]:s3[1]]) || e3.Null(i) != e.Null(i) {
					t.Fatalf("WithTypes parameter %d differs", i)
				}
			}
		}
	})
}

// sameValue is reflect.DeepEqual with NaN equal to itself.
func sameValue(a, b any) bool {
	if fa, ok := a.(float64); ok {
		if fb, ok := b.(float64); ok && math.IsNaN(fa) && math.IsNaN(fb) {
			return true
		}
	}
	return reflect.DeepEqual(a, b)
}
