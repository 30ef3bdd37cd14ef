package merge

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unsafe"

	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/router"
)

// kind is the kind of a merge value.
type kind uint8

const (
	kNull kind = iota
	kDec       // exact number: unscaled × 10^-scale
	kFloat
	kStr // string (w: its weight string, when known), temporal text, bytes
)

// value is a value the merge computes with.
type value struct {
	k     kind
	n     *big.Int
	scale int32
	f     float64
	s     []byte
	w     []byte
	haveW bool
	time  bool // s is a TIME ("-838:59:59.5"): compares by its value
}

var null = value{}

func decInt(i int64) value { return value{k: kDec, n: big.NewInt(i)} }

func boolean(b bool) value {
	if b {
		return decInt(1)
	}
	return decInt(0)
}

// str views b as a string without copying, for parsing only.
func str(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// parseDec parses an exact decimal in text form.
func parseDec(s string) (value, bool) {
	s = strings.TrimSpace(s)
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	digits := intPart + frac
	if digits == "" {
		return null, false
	}
	n, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		return null, false
	}
	if neg {
		n.Neg(n)
	}
	return value{k: kDec, n: n, scale: int32(len(frac))}, true
}

// fromAny converts a bound literal (router.LitValue) to a value.
func fromAny(v any) value {
	switch x := v.(type) {
	case nil:
		return null
	case int64:
		return decInt(x)
	case uint64:
		return value{k: kDec, n: new(big.Int).SetUint64(x)}
	case float64:
		return value{k: kFloat, f: x}
	case router.Decimal:
		if d, ok := parseDec(string(x)); ok {
			return d
		}
		return value{k: kStr, s: []byte(x)}
	case string:
		return value{k: kStr, s: []byte(x)}
	case []byte:
		return value{k: kStr, s: x}
	}
	return value{k: kStr, s: fmt.Append(nil, v)}
}

// decode reads a cell of column col into a value; weight is the cell of
// its weight string (or a null cell).
func decode(c cell, col Column, bin bool, weight cell) value {
	if c.null {
		return null
	}
	b := c.b
	if bin {
		switch col.Type {
		case wire.TypeTiny:
			if col.Flags&flagUnsigned != 0 {
				return decInt(int64(b[0]))
			}
			return decInt(int64(int8(b[0])))
		case wire.TypeShort, wire.TypeYear:
			u := binary.LittleEndian.Uint16(b)
			if col.Flags&flagUnsigned != 0 || col.Type == wire.TypeYear {
				return decInt(int64(u))
			}
			return decInt(int64(int16(u)))
		case wire.TypeLong, wire.TypeInt24:
			u := binary.LittleEndian.Uint32(b)
			if col.Flags&flagUnsigned != 0 {
				return decInt(int64(u))
			}
			return decInt(int64(int32(u)))
		case wire.TypeLongLong:
			u := binary.LittleEndian.Uint64(b)
			if col.Flags&flagUnsigned != 0 {
				return value{k: kDec, n: new(big.Int).SetUint64(u)}
			}
			return decInt(int64(u))
		case wire.TypeFloat:
			return value{k: kFloat, f: float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))}
		case wire.TypeDouble:
			return value{k: kFloat, f: math.Float64frombits(binary.LittleEndian.Uint64(b))}
		case wire.TypeDate, wire.TypeNewDate, wire.TypeDatetime, wire.TypeTimestamp, wire.TypeTime:
			return value{k: kStr, s: []byte(binTemporalText(col.Type, b)), time: col.Type == wire.TypeTime}
		case wire.TypeDecimal, wire.TypeNewDecimal:
			if d, ok := parseDec(str(b)); ok {
				return d
			}
		}
	} else {
		switch {
		case col.isInt(), col.Type == wire.TypeDecimal, col.Type == wire.TypeNewDecimal:
			if d, ok := parseDec(str(b)); ok {
				return d
			}
		case col.Type == wire.TypeFloat || col.Type == wire.TypeDouble:
			f, _ := strconv.ParseFloat(str(b), 64)
			return value{k: kFloat, f: f}
		}
	}
	v := value{k: kStr, s: b, time: col.Type == wire.TypeTime}
	if col.isString() && col.Charset != binaryCS && !weight.null && weight.b != nil {
		v.w, v.haveW = weight.b, true
	}
	return v
}

// binTemporalText renders a binary temporal value as MySQL text.
func binTemporalText(t byte, b []byte) string {
	if t == wire.TypeTime {
		var neg bool
		var days, h, m, s, us int
		if len(b) >= 8 {
			neg = b[0] == 1
			days = int(binary.LittleEndian.Uint32(b[1:]))
			h, m, s = int(b[5]), int(b[6]), int(b[7])
		}
		if len(b) >= 12 {
			us = int(binary.LittleEndian.Uint32(b[8:]))
		}
		out := fmt.Sprintf("%02d:%02d:%02d", days*24+h, m, s)
		if us != 0 {
			out += fmt.Sprintf(".%06d", us)
		}
		if neg {
			out = "-" + out
		}
		return out
	}
	var y, mo, d, h, mi, s, us int
	if len(b) >= 4 {
		y, mo, d = int(binary.LittleEndian.Uint16(b)), int(b[2]), int(b[3])
	}
	if len(b) >= 7 {
		h, mi, s = int(b[4]), int(b[5]), int(b[6])
	}
	if len(b) >= 11 {
		us = int(binary.LittleEndian.Uint32(b[7:]))
	}
	if t == wire.TypeDate || t == wire.TypeNewDate {
		return fmt.Sprintf("%04d-%02d-%02d", y, mo, d)
	}
	out := fmt.Sprintf("%04d-%02d-%02d %02d:%02d:%02d", y, mo, d, h, mi, s)
	if us != 0 {
		out += fmt.Sprintf(".%06d", us)
	}
	return out
}

// toNum converts a value for arithmetic and numeric comparison: strings
// are read as numbers the way MySQL does (a leading number, else 0).
func toNum(v value) value {
	if v.k != kStr {
		return v
	}
	s := strings.TrimSpace(str(v.s))
	end := 0
	for end < len(s) && strings.IndexByte("+-0123456789.eE", s[end]) >= 0 {
		end++
	}
	s = s[:end]
	if d, ok := parseDec(s); ok && !strings.ContainsAny(s, "eE") {
		return d
	}
	f, _ := strconv.ParseFloat(s, 64)
	return value{k: kFloat, f: f}
}

func toFloat(v value) float64 {
	v = toNum(v)
	if v.k == kFloat {
		return v.f
	}
	f, _ := new(big.Rat).SetFrac(v.n, pow10(v.scale)).Float64()
	return f
}

var pow10s [40]*big.Int

func init() {
	p := big.NewInt(1)
	for i := range pow10s {
		pow10s[i] = new(big.Int).Set(p)
		p.Mul(p, big.NewInt(10))
	}
}

func pow10(n int32) *big.Int {
	if int(n) < len(pow10s) {
		return pow10s[n]
	}
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
}

// rescale returns d's unscaled value at scale s >= d.scale.
func rescale(d value, s int32) *big.Int {
	if s == d.scale {
		return d.n
	}
	return new(big.Int).Mul(d.n, pow10(s-d.scale))
}

// round rounds an exact number to scale s, half away from zero.
func round(d value, s int32) value {
	if d.scale <= s {
		return value{k: kDec, n: rescale(d, s), scale: s}
	}
	div := pow10(d.scale - s)
	q, r := new(big.Int).QuoRem(d.n, div, new(big.Int))
	r.Abs(r).Mul(r, big.NewInt(2))
	if r.Cmp(div) >= 0 {
		if d.n.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return value{k: kDec, n: q, scale: s}
}

// divPrecision is MySQL's div_precision_increment default.
const divPrecision = 4

// arith applies + - * / DIV % with MySQL's rules: NULL in, NULL out;
// exact numbers stay exact unless a float is involved; division by zero
// is NULL.
func arith(op router.ExprOp, a, b value) value {
	if a.k == kNull || b.k == kNull {
		return null
	}
	a, b = toNum(a), toNum(b)
	if op == router.ExprIntDiv {
		if a.k == kFloat || b.k == kFloat {
			fb := toFloat(b)
			if fb == 0 {
				return null
			}
			return decFromFloatTrunc(toFloat(a) / fb)
		}
		s := max(a.scale, b.scale)
		x, y := rescale(a, s), rescale(b, s)
		if y.Sign() == 0 {
			return null
		}
		return value{k: kDec, n: new(big.Int).Quo(x, y)}
	}
	if a.k == kFloat || b.k == kFloat {
		x, y := toFloat(a), toFloat(b)
		switch op {
		case router.ExprAdd:
			return value{k: kFloat, f: x + y}
		case router.ExprSub:
			return value{k: kFloat, f: x - y}
		case router.ExprMul:
			return value{k: kFloat, f: x * y}
		case router.ExprDiv:
			if y == 0 {
				return null
			}
			return value{k: kFloat, f: x / y}
		case router.ExprMod:
			if y == 0 {
				return null
			}
			return value{k: kFloat, f: math.Mod(x, y)}
		}
		return null
	}
	switch op {
	case router.ExprAdd, router.ExprSub, router.ExprMod:
		s := max(a.scale, b.scale)
		x, y := rescale(a, s), rescale(b, s)
		r := new(big.Int)
		switch op {
		case router.ExprAdd:
			r.Add(x, y)
		case router.ExprSub:
			r.Sub(x, y)
		default:
			if y.Sign() == 0 {
				return null
			}
			r.Rem(x, y)
		}
		return value{k: kDec, n: r, scale: s}
	case router.ExprMul:
		return value{k: kDec, n: new(big.Int).Mul(a.n, b.n), scale: a.scale + b.scale}
	case router.ExprDiv:
		if b.n.Sign() == 0 {
			return null
		}
		// MariaDB divides exact numbers to the dividend's scale plus
		// div_precision_increment, rounded up to whole 9-digit words,
		// truncating; what is shown is rounded to the column's decimals.
		s := (a.scale + divPrecision + 8) / 9 * 9
		num := new(big.Int).Mul(a.n, pow10(b.scale+s-a.scale))
		return value{k: kDec, n: num.Quo(num, b.n), scale: s}
	}
	return null
}

func decFromFloatTrunc(f float64) value {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return null
	}
	bf := new(big.Float).SetFloat64(math.Trunc(f))
	n, _ := bf.Int(nil)
	return value{k: kDec, n: n}
}

func neg(a value) value {
	a = toNum(a)
	switch a.k {
	case kDec:
		return value{k: kDec, n: new(big.Int).Neg(a.n), scale: a.scale}
	case kFloat:
		return value{k: kFloat, f: -a.f}
	}
	return null
}

// compare orders two non-NULL values as MySQL compares them: numbers
// numerically, strings by weight when both have one, else by bytes
// (ASCII case-insensitively, as the common _ci collations).
func compare(a, b value) int {
	if a.k == kStr && b.k == kStr {
		if a.time && b.time {
			return cmpI64(timeMicros(a.s, false), timeMicros(b.s, false))
		}
		if a.haveW && b.haveW {
			return bytes.Compare(a.w, b.w)
		}
		return compareFold(a.s, b.s)
	}
	a, b = toNum(a), toNum(b)
	if a.k == kFloat || b.k == kFloat {
		x, y := toFloat(a), toFloat(b)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	}
	s := max(a.scale, b.scale)
	return rescale(a, s).Cmp(rescale(b, s))
}

func compareFold(a, b []byte) int {
	a, b = bytes.TrimRight(a, " "), bytes.TrimRight(b, " ")
	for i := 0; i < len(a) && i < len(b); i++ {
		x, y := upper(a[i]), upper(b[i])
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return 0
}

// upper folds ASCII as the _ci collations weigh it (by upper case, so
// '_' sorts after the letters).
func upper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

func truth(v value) (val, isNull bool) {
	switch v.k {
	case kNull:
		return false, true
	case kFloat:
		return v.f != 0, false
	case kDec:
		return v.n.Sign() != 0, false
	}
	n := toNum(v)
	return toFloat(n) != 0, false
}

// decText formats an exact number at its scale.
func decText(d value) string {
	s := new(big.Int).Abs(d.n).String()
	if d.scale > 0 {
		if len(s) <= int(d.scale) {
			s = strings.Repeat("0", int(d.scale)-len(s)+1) + s
		}
		s = s[:len(s)-int(d.scale)] + "." + s[len(s)-int(d.scale):]
	}
	if d.n.Sign() < 0 {
		s = "-" + s
	}
	return s
}

// floatText formats a double as MariaDB does in the text protocol:
// shortest round-trip digits, exponent form outside 1e-5..1e15.
func floatText(f float64, bits int) string {
	if f == 0 {
		return "0"
	}
	a := math.Abs(f)
	if a >= 1e-5 && a < 1e15 {
		return strconv.FormatFloat(f, 'f', -1, bits)
	}
	s := strconv.FormatFloat(f, 'e', -1, bits)
	mant, exp, _ := strings.Cut(s, "e")
	if exp[0] == '+' {
		exp = exp[1:]
	} else if exp[0] == '-' {
		exp = "-" + strings.TrimLeft(exp[1:], "0")
		return mant + "e" + exp
	}
	return mant + "e" + strings.TrimLeft(exp, "0")
}
