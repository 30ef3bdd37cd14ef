package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Binary-protocol column / parameter types (MYSQL_TYPE_*) that the EXECUTE
// decoder needs to size values.
const (
	TypeDecimal    = 0x00
	TypeTiny       = 0x01
	TypeShort      = 0x02
	TypeLong       = 0x03
	TypeFloat      = 0x04
	TypeDouble     = 0x05
	TypeNull       = 0x06
	TypeTimestamp  = 0x07
	TypeLongLong   = 0x08
	TypeInt24      = 0x09
	TypeDate       = 0x0a
	TypeTime       = 0x0b
	TypeDatetime   = 0x0c
	TypeYear       = 0x0d
	TypeNewDate    = 0x0e
	TypeVarchar    = 0x0f
	TypeBit        = 0x10
	TypeJSON       = 0xf5
	TypeNewDecimal = 0xf6
	TypeEnum       = 0xf7
	TypeSet        = 0xf8
	TypeTinyBlob   = 0xf9
	TypeMediumBlob = 0xfa
	TypeLongBlob   = 0xfb
	TypeBlob       = 0xfc
	TypeVarString  = 0xfd
	TypeString     = 0xfe
	TypeGeometry   = 0xff
)

// CursorReadOnly is the COM_STMT_EXECUTE flag that opens a cursor.
const CursorReadOnly = 0x01

// ErrBadExecute is wrapped by every COM_STMT_EXECUTE decoding error.
var ErrBadExecute = errors.New("malformed COM_STMT_EXECUTE packet")

// Execute is a decoded COM_STMT_EXECUTE packet (command byte included in
// the packet it was parsed from). Values are not copied: Spans index the
// packet.
type Execute struct {
	ID    uint32
	Flags byte
	Iter  uint32
	// Params is the statement's parameter count (from PREPARE).
	Params int
	// NullMap is the NULL bitmap; nil without parameters.
	NullMap []byte
	// Bound is the new-params-bound flag of the packet.
	Bound bool
	// Types holds 2 bytes per parameter: the packet's own when Bound, else
	// the ones passed to ParseExecute (the previous execution's).
	Types []byte
	// Spans gives each parameter's value as [start, end) in the packet;
	// start == end for NULL, for parameters sent as long data, and for
	// zero-length values (told apart by Null and LongData).
	Spans [][2]int
	// ValuesAt is where the values start in the packet.
	ValuesAt int
}

// Null reports whether parameter i is NULL.
func (e *Execute) Null(i int) bool { return e.NullMap[i>>3]&(1<<(i&7)) != 0 }

// ParseExecute decodes p (a COM_STMT_EXECUTE packet, command byte first)
// for a statement with nparams parameters. prevTypes are the types bound
// by the previous execution, used when the packet does not rebind them;
// long reports the parameters whose value was sent with
// COM_STMT_SEND_LONG_DATA (they have no value in the packet). The decoder
// never panics on bad input; a truncated or inconsistent packet returns an
// error wrapping ErrBadExecute.
func ParseExecute(p []byte, nparams int, prevTypes []byte, long func(i int) bool) (*Execute, error) {
	if len(p) < 10 {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadExecute, len(p))
	}
	e := &Execute{
		ID:     binary.LittleEndian.Uint32(p[1:]),
		Flags:  p[5],
		Iter:   binary.LittleEndian.Uint32(p[6:]),
		Params: nparams,
	}
	pos := 10
	if nparams == 0 {
		e.ValuesAt = pos
		return e, nil
	}
	nb := (nparams + 7) / 8
	if pos+nb+1 > len(p) {
		return nil, fmt.Errorf("%w: NULL bitmap for %d parameters missing", ErrBadExecute, nparams)
	}
	e.NullMap = p[pos : pos+nb]
	pos += nb
	e.Bound = p[pos] == 1
	pos++
	if e.Bound {
		if pos+2*nparams > len(p) {
			return nil, fmt.Errorf("%w: parameter types missing", ErrBadExecute)
		}
		e.Types = p[pos : pos+2*nparams]
		pos += 2 * nparams
	} else {
		if len(prevTypes) != 2*nparams {
			return nil, fmt.Errorf("%w: parameter types never bound", ErrBadExecute)
		}
		e.Types = prevTypes
	}
	e.ValuesAt = pos
	e.Spans = make([][2]int, nparams)
	for i := range nparams {
		if e.Null(i) || long != nil && long(i) {
			e.Spans[i] = [2]int{pos, pos}
			continue
		}
		n, err := ValueLen(e.Types[2*i], p, pos)
		if err != nil {
			return nil, fmt.Errorf("%w: parameter %d: %v", ErrBadExecute, i+1, err)
		}
		if pos+n > len(p) {
			return nil, fmt.Errorf("%w: parameter %d truncated", ErrBadExecute, i+1)
		}
		e.Spans[i] = [2]int{pos, pos + n}
		pos += n
	}
	return e, nil
}

// ValueLen returns the size of a binary-protocol value of type t at p[pos:].
func ValueLen(t byte, p []byte, pos int) (int, error) {
	switch t {
	case TypeNull:
		return 0, nil
	case TypeTiny:
		return 1, nil
	case TypeShort, TypeYear:
		return 2, nil
	case TypeLong, TypeInt24, TypeFloat:
		return 4, nil
	case TypeLongLong, TypeDouble:
		return 8, nil
	case TypeDate, TypeNewDate, TypeDatetime, TypeTimestamp, TypeTime:
		if pos >= len(p) {
			return 0, errors.New("temporal length missing")
		}
		return 1 + int(p[pos]), nil
	case TypeDecimal, TypeNewDecimal, TypeVarchar, TypeBit, TypeJSON, TypeEnum, TypeSet,
		TypeTinyBlob, TypeMediumBlob, TypeLongBlob, TypeBlob, TypeVarString, TypeString, TypeGeometry:
		v, next, err := ReadLenEncInt(p, pos)
		if err != nil {
			return 0, err
		}
		if v > uint64(len(p)) {
			return 0, errors.New("string length beyond packet")
		}
		return next - pos + int(v), nil
	}
	return 0, fmt.Errorf("unknown type 0x%02x", t)
}

// Value returns parameter i as a Go value for routing: nil (NULL), int64,
// uint64, float64, string (strings, decimals, dates and times in SQL text
// form) or []byte. Long-data parameters return ok false.
func (e *Execute) Value(p []byte, i int) (v any, ok bool) {
	if e.Null(i) {
		return nil, true
	}
	if e.Types[2*i] == TypeNull {
		return nil, true
	}
	s := e.Spans[i]
	if s[0] == s[1] {
		return nil, false // sent as long data: no value in the packet
	}
	b := p[s[0]:s[1]]
	t, unsigned := e.Types[2*i], e.Types[2*i+1]&0x80 != 0
	switch t {
	case TypeNull:
		return nil, true
	case TypeTiny:
		if unsigned {
			return int64(b[0]), true
		}
		return int64(int8(b[0])), true
	case TypeShort, TypeYear:
		u := binary.LittleEndian.Uint16(b)
		if unsigned || t == TypeYear {
			return int64(u), true
		}
		return int64(int16(u)), true
	case TypeLong, TypeInt24:
		u := binary.LittleEndian.Uint32(b)
		if unsigned {
			return int64(u), true
		}
		return int64(int32(u)), true
	case TypeLongLong:
		u := binary.LittleEndian.Uint64(b)
		if unsigned && u > math.MaxInt64 {
			return u, true
		}
		return int64(u), true
	case TypeFloat:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), true
	case TypeDouble:
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), true
	case TypeDate, TypeNewDate, TypeDatetime, TypeTimestamp:
		return temporal(b[1:], t == TypeDate || t == TypeNewDate), true
	case TypeTime:
		return timeValue(b[1:]), true
	}
	str, _, _, err := ReadLenEncString(p, s[0])
	if err != nil {
		return nil, false
	}
	return string(str), true
}

// temporal renders a binary DATE/DATETIME value as SQL text.
func temporal(b []byte, dateOnly bool) string {
	var year, month, day, hour, minute, second, micro int
	if len(b) >= 4 {
		year = int(binary.LittleEndian.Uint16(b))
		month, day = int(b[2]), int(b[3])
	}
	if len(b) >= 7 {
		hour, minute, second = int(b[4]), int(b[5]), int(b[6])
	}
	if len(b) >= 11 {
		micro = int(binary.LittleEndian.Uint32(b[7:]))
	}
	out := make([]byte, 0, 26)
	out = pad(out, year, 4)
	out = append(out, '-')
	out = pad(out, month, 2)
	out = append(out, '-')
	out = pad(out, day, 2)
	if dateOnly {
		return string(out)
	}
	out = append(out, ' ')
	out = pad(out, hour, 2)
	out = append(out, ':')
	out = pad(out, minute, 2)
	out = append(out, ':')
	out = pad(out, second, 2)
	if micro != 0 {
		out = append(out, '.')
		out = pad(out, micro, 6)
	}
	return string(out)
}

// timeValue renders a binary TIME value as SQL text.
func timeValue(b []byte) string {
	if len(b) < 8 {
		return "00:00:00"
	}
	neg := b[0] == 1
	days := int(binary.LittleEndian.Uint32(b[1:]))
	h := days*24 + int(b[5])
	out := make([]byte, 0, 20)
	if neg {
		out = append(out, '-')
	}
	out = pad(out, h, 2)
	out = append(out, ':')
	out = pad(out, int(b[6]), 2)
	out = append(out, ':')
	out = pad(out, int(b[7]), 2)
	if len(b) >= 12 {
		if micro := int(binary.LittleEndian.Uint32(b[8:])); micro != 0 {
			out = append(out, '.')
			out = pad(out, micro, 6)
		}
	}
	return string(out)
}

func pad(b []byte, v, width int) []byte {
	s := strconv.Itoa(v)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

// AppendExecute appends a COM_STMT_EXECUTE packet (command byte first) for
// statement id that carries the parameters params of e (in that order,
// indexes into e's parameters), taken from packet p. Types are always
// bound.
func AppendExecute(b []byte, id uint32, e *Execute, p []byte, params []int) []byte {
	b = append(b, 0x17)
	b = binary.LittleEndian.AppendUint32(b, id)
	b = append(b, e.Flags)
	b = binary.LittleEndian.AppendUint32(b, e.Iter)
	if len(params) == 0 {
		return b
	}
	nb := (len(params) + 7) / 8
	at := len(b)
	for range nb {
		b = append(b, 0)
	}
	for j, i := range params {
		if e.Null(i) {
			b[at+(j>>3)] |= 1 << (j & 7)
		}
	}
	b = append(b, 1)
	for _, i := range params {
		b = append(b, e.Types[2*i], e.Types[2*i+1])
	}
	for _, i := range params {
		s := e.Spans[i]
		b = append(b, p[s[0]:s[1]]...)
	}
	return b
}

// WithTypes appends p (a COM_STMT_EXECUTE packet whose new-params-bound
// flag is 0) rewritten to bind types explicitly, with statement id.
func WithTypes(b []byte, id uint32, e *Execute, p []byte) []byte {
	b = append(b, 0x17)
	b = binary.LittleEndian.AppendUint32(b, id)
	b = append(b, p[5:10]...)
	b = append(b, e.NullMap...)
	b = append(b, 1)
	b = append(b, e.Types...)
	return append(b, p[e.ValuesAt:]...)
}
