package merge

import (
	"encoding/binary"
	"math"
	"math/big"
	"strconv"

	"github.com/keyshard/keyshard/backend/wire"
)

// Values encoded back into a row (text or binary protocol).

// encode appends v as the value of a column col of a row being built
// (text or binary protocol; false for NULL, which the caller marks).
func encode(b []byte, v value, col Column, bin bool) ([]byte, bool) {
	if v.k == kNull {
		if !bin {
			b = append(b, 0xfb)
		}
		return b, false
	}
	var text string
	switch col.Type {
	case wire.TypeDate, wire.TypeNewDate, wire.TypeDatetime, wire.TypeTimestamp, wire.TypeTime:
		if bin && v.k == kStr {
			return appendBinTemporal(b, col.Type, str(v.s)), true
		}
		switch v.k {
		case kDec:
			text = decText(v)
		case kFloat:
			text = floatText(v.f, 64)
		default:
			return appendLenEnc(b, v.s), true
		}
	case wire.TypeTiny, wire.TypeShort, wire.TypeLong, wire.TypeInt24, wire.TypeLongLong, wire.TypeYear:
		n := toNum(v)
		var i *big.Int
		if n.k == kFloat {
			i = decFromFloatTrunc(math.Round(n.f)).n
		} else {
			i = round(n, 0).n
		}
		if !bin {
			return appendLenEnc(b, i.Append(nil, 10)), true
		}
		var u uint64
		if i.Sign() < 0 {
			u = uint64(i.Int64())
		} else {
			u = i.Uint64()
		}
		switch col.Type {
		case wire.TypeTiny:
			return append(b, byte(u)), true
		case wire.TypeShort, wire.TypeYear:
			return binary.LittleEndian.AppendUint16(b, uint16(u)), true
		case wire.TypeLong, wire.TypeInt24:
			return binary.LittleEndian.AppendUint32(b, uint32(u)), true
		}
		return binary.LittleEndian.AppendUint64(b, u), true
	case wire.TypeFloat, wire.TypeDouble:
		f := toFloat(v)
		if bin {
			if col.Type == wire.TypeFloat {
				return binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(f))), true
			}
			return binary.LittleEndian.AppendUint64(b, math.Float64bits(f)), true
		}
		if col.Type == wire.TypeFloat {
			text = floatText(f, 32)
		} else {
			text = floatText(f, 64)
		}
	case wire.TypeDecimal, wire.TypeNewDecimal:
		n := toNum(v)
		if n.k == kFloat {
			text = strconv.FormatFloat(n.f, 'f', int(col.Decimals), 64)
		} else {
			text = decText(round(n, int32(col.Decimals)))
		}
	default:
		switch v.k {
		case kDec:
			text = decText(v)
		case kFloat:
			text = floatText(v.f, 64)
		default:
			return appendLenEnc(b, v.s), true
		}
	}
	return appendLenEnc(b, []byte(text)), true
}

// appendBinTemporal encodes a DATE/DATETIME/TIMESTAMP ("2020-01-02
// 03:04:05.000006") or TIME ("-26:03:04.5") in text form as the binary
// protocol sends it: a length byte and the fields.
func appendBinTemporal(b []byte, t byte, s string) []byte {
	if t == wire.TypeTime {
		us := timeMicros([]byte(s), false)
		neg := byte(0)
		if us < 0 {
			neg, us = 1, -us
		}
		sec, frac := us/1e6, uint32(us%1e6)
		if us == 0 {
			return append(b, 0)
		}
		n := byte(8)
		if frac != 0 {
			n = 12
		}
		b = append(b, n, neg)
		b = binary.LittleEndian.AppendUint32(b, uint32(sec/86400))
		b = append(b, byte(sec%86400/3600), byte(sec%3600/60), byte(sec%60))
		if n == 12 {
			b = binary.LittleEndian.AppendUint32(b, frac)
		}
		return b
	}
	var f [7]int // year, month, day, hour, minute, second, microsecond
	i, digits := 0, 0
	for j := 0; j < len(s) && i < len(f); j++ {
		if c := s[j]; c >= '0' && c <= '9' {
			f[i] = f[i]*10 + int(c-'0')
			if i == 6 {
				digits++
			}
			continue
		}
		i++
	}
	for ; digits > 0 && digits < 6; digits++ {
		f[6] *= 10
	}
	n := byte(11)
	switch {
	case t == wire.TypeDate || t == wire.TypeNewDate || f[3]|f[4]|f[5]|f[6] == 0:
		n = 4
		if f[0]|f[1]|f[2] == 0 {
			n = 0
		}
	case f[6] == 0:
		n = 7
	}
	b = append(b, n)
	if n == 0 {
		return b
	}
	b = binary.LittleEndian.AppendUint16(b, uint16(f[0]))
	b = append(b, byte(f[1]), byte(f[2]))
	if n == 4 {
		return b
	}
	b = append(b, byte(f[3]), byte(f[4]), byte(f[5]))
	if n == 7 {
		return b
	}
	return binary.LittleEndian.AppendUint32(b, uint32(f[6]))
}
