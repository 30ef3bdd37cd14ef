package merge

import (
	"encoding/binary"
	"math"
	"strconv"

	"github.com/keyshard/keyshard/backend/wire"
)

// AppendBinaryRow appends the binary-protocol row of text values (a nil
// value is NULL) of columns cols: what a client of a prepared statement
// reads, for rows keyshard read as text (the proxy's joins).
func AppendBinaryRow(b []byte, vals [][]byte, cols []Column) []byte {
	nb := (len(cols) + 7 + 2) / 8
	b = append(b, 0)
	start := len(b)
	for range nb {
		b = append(b, 0)
	}
	for i, v := range vals {
		if v == nil {
			bit := i + 2
			b[start+bit/8] |= 1 << (bit % 8)
			continue
		}
		b = appendBinaryValue(b, v, cols[i])
	}
	return b
}

// appendBinaryValue encodes text value v of column col for the binary
// protocol.
func appendBinaryValue(b, v []byte, col Column) []byte {
	s := str(v)
	unsigned := col.Flags&flagUnsigned != 0
	switch col.Type {
	case wire.TypeTiny, wire.TypeShort, wire.TypeYear, wire.TypeLong, wire.TypeInt24, wire.TypeLongLong:
		var u uint64
		if unsigned {
			u, _ = strconv.ParseUint(s, 10, 64)
		} else {
			n, _ := strconv.ParseInt(s, 10, 64)
			u = uint64(n)
		}
		switch col.Type {
		case wire.TypeTiny:
			return append(b, byte(u))
		case wire.TypeShort, wire.TypeYear:
			return binary.LittleEndian.AppendUint16(b, uint16(u))
		case wire.TypeLong, wire.TypeInt24:
			return binary.LittleEndian.AppendUint32(b, uint32(u))
		}
		return binary.LittleEndian.AppendUint64(b, u)
	case wire.TypeFloat:
		f, _ := strconv.ParseFloat(s, 32)
		return binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(f)))
	case wire.TypeDouble:
		f, _ := strconv.ParseFloat(s, 64)
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
	case wire.TypeDate, wire.TypeNewDate, wire.TypeDatetime, wire.TypeTimestamp, wire.TypeTime:
		return appendBinTemporal(b, col.Type, s)
	}
	return appendLenEnc(b, v)
}
