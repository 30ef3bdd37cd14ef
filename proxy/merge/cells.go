// Package merge merges the result sets of several sub-tables into the one
// a client asked for: a k-way merge of ordered streams, LIMIT, and the
// combination of partial aggregates (router.MergeSpec says how). Rows are
// decoded only as far as the merge needs; memory is a few rows per stream,
// plus the groups of a re-sort (bounded by max_merge_rows).
package merge

import (
	"encoding/binary"
	"errors"

	"github.com/keyshard/keyshard/backend/wire"
)

// Column is what the merge needs of a column definition.
type Column struct {
	Type     byte
	Flags    uint16
	Charset  uint16
	Decimals byte
}

// Column flags.
const (
	flagUnsigned = 0x20
	flagEnum     = 0x100
	flagSet      = 0x800
	binaryCS     = 63
)

// ParseColumn reads a column definition packet (protocol 4.1).
func ParseColumn(p []byte, ext bool) (Column, error) {
	pos, err := wire.ColumnFixed(p, ext) // ext: MariaDB's extended type info
	if err != nil {
		return Column{}, err
	}
	return Column{
		Charset:  binary.LittleEndian.Uint16(p[pos+1:]),
		Type:     p[pos+7],
		Flags:    binary.LittleEndian.Uint16(p[pos+8:]),
		Decimals: p[pos+10],
	}, nil
}

// cell is one column value of a row as it came: text protocol, the
// string; binary protocol, the value's encoding.
type cell struct {
	b    []byte
	null bool
}

var errRow = errors.New("malformed row")

// splitText cuts a text-protocol row into its cells.
func splitText(p []byte, out []cell) error {
	pos := 0
	for i := range out {
		if pos >= len(p) {
			return errRow
		}
		if p[pos] == 0xfb {
			out[i] = cell{null: true}
			pos++
			continue
		}
		s, _, next, err := wire.ReadLenEncString(p, pos)
		if err != nil {
			return errRow
		}
		out[i] = cell{b: s}
		pos = next
	}
	return nil
}

// splitBinary cuts a binary-protocol row into its cells; starts[i] is
// where cell i's encoding begins (its length prefix included), for
// cutting rows.
func splitBinary(p []byte, cols []Column, out []cell, starts []int) error {
	nb := (len(cols) + 7 + 2) / 8
	if len(p) < 1+nb || p[0] != 0 {
		return errRow
	}
	pos := 1 + nb
	for i, c := range cols {
		starts[i] = pos
		bit := i + 2
		if p[1+bit/8]&(1<<(bit%8)) != 0 {
			out[i] = cell{null: true}
			continue
		}
		n, err := wire.ValueLen(c.Type, p, pos)
		if err != nil || pos+n > len(p) {
			return errRow
		}
		v := p[pos : pos+n]
		switch c.Type {
		case wire.TypeDecimal, wire.TypeNewDecimal, wire.TypeVarchar, wire.TypeBit, wire.TypeJSON, wire.TypeEnum, wire.TypeSet,
			wire.TypeTinyBlob, wire.TypeMediumBlob, wire.TypeLongBlob, wire.TypeBlob, wire.TypeVarString, wire.TypeString, wire.TypeGeometry:
			s, _, _, err := wire.ReadLenEncString(p, pos)
			if err != nil {
				return errRow
			}
			v = s
		case wire.TypeDate, wire.TypeNewDate, wire.TypeDatetime, wire.TypeTimestamp, wire.TypeTime:
			v = v[1:]
		}
		out[i] = cell{b: v}
		pos += n
	}
	if len(starts) > len(cols) {
		starts[len(cols)] = pos
	}
	return nil
}

// isString reports whether values of c compare as strings of a
// collation (by weight string).
func (c Column) isString() bool {
	switch c.Type {
	case wire.TypeVarchar, wire.TypeVarString, wire.TypeString, wire.TypeTinyBlob, wire.TypeMediumBlob,
		wire.TypeLongBlob, wire.TypeBlob, wire.TypeJSON, wire.TypeEnum, wire.TypeSet:
		return true
	}
	return false
}

func (c Column) isInt() bool {
	switch c.Type {
	case wire.TypeTiny, wire.TypeShort, wire.TypeLong, wire.TypeInt24, wire.TypeLongLong, wire.TypeYear:
		return true
	}
	return false
}

// appendCell appends a cell, encoded for its protocol, to a row being
// built (text: length-encoded string or NULL; binary: the value; the
// NULL bit is the caller's).
func appendCell(b []byte, c cell, col Column, bin bool) []byte {
	if !bin {
		if c.null {
			return append(b, 0xfb)
		}
		return appendLenEnc(b, c.b)
	}
	switch col.Type {
	case wire.TypeTiny, wire.TypeShort, wire.TypeYear, wire.TypeLong, wire.TypeInt24, wire.TypeFloat, wire.TypeLongLong, wire.TypeDouble:
		return append(b, c.b...)
	case wire.TypeDate, wire.TypeNewDate, wire.TypeDatetime, wire.TypeTimestamp, wire.TypeTime:
		return append(append(b, byte(len(c.b))), c.b...)
	}
	return appendLenEnc(b, c.b)
}

func appendLenEnc(b, s []byte) []byte {
	n := uint64(len(s))
	switch {
	case n < 251:
		b = append(b, byte(n))
	case n < 1<<16:
		b = append(b, 0xfc, byte(n), byte(n>>8))
	case n < 1<<24:
		b = append(b, 0xfd, byte(n), byte(n>>8), byte(n>>16))
	default:
		b = append(b, 0xfe)
		b = binary.LittleEndian.AppendUint64(b, n)
	}
	return append(b, s...)
}
