package wire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// Packet header bytes.
const (
	OKHeader       = 0x00
	ErrHeader      = 0xff
	EOFHeader      = 0xfe
	LocalInfileHdr = 0xfb
)

// Status flags (server_status in OK/EOF packets).
const (
	StatusInTrans            = mysql.SERVER_STATUS_IN_TRANS
	StatusAutocommit         = mysql.SERVER_STATUS_AUTOCOMMIT
	StatusMoreResultsExists  = mysql.SERVER_MORE_RESULTS_EXISTS
	StatusCursorExists       = mysql.SERVER_STATUS_CURSOR_EXISTS
	StatusLastRowSent        = mysql.SERVER_STATUS_LAST_ROW_SEND
	StatusSessionStateChange = mysql.SERVER_SESSION_STATE_CHANGED
)

// ErrMalformed reports a packet that does not decode.
var ErrMalformed = errors.New("malformed packet")

// IsEOF reports whether a payload is an EOF packet or, with
// CLIENT_DEPRECATE_EOF, the OK packet that ends a result set.
func IsEOF(p []byte) bool {
	return len(p) > 0 && p[0] == EOFHeader && len(p) < MaxPayload
}

// IsOldEOF reports whether p is a classic EOF packet: 0xfe, warnings and
// status, exactly 5 bytes (the 0xfe-headed OK that replaces it under
// CLIENT_DEPRECATE_EOF is at least 7).
func IsOldEOF(p []byte) bool { return len(p) == 5 && p[0] == EOFHeader }

// OK is the decoded part of an OK packet keyshard needs.
type OK struct {
	AffectedRows uint64
	InsertID     uint64
	Status       uint16
	Warnings     uint16
	Info         []byte // human readable info (aliases the packet)
	// State is the session-state information (CLIENT_SESSION_TRACK, with
	// StatusSessionStateChange), undecoded; it aliases the packet.
	State []byte
}

// ParseOK decodes an OK packet (header 0x00 or, at the end of a result set
// with CLIENT_DEPRECATE_EOF, 0xfe). The info is length-encoded, as MySQL
// and MariaDB always send it whatever the protocol documentation says.
func ParseOK(p []byte) (OK, error) {
	var ok OK
	if len(p) < 1 {
		return ok, ErrMalformed
	}
	pos := 1
	var n int
	var isNull bool
	ok.AffectedRows, isNull, n = lenEncInt(p[pos:])
	if isNull || n == 0 || pos+n > len(p) {
		return ok, ErrMalformed
	}
	pos += n
	ok.InsertID, isNull, n = lenEncInt(p[pos:])
	if isNull || n == 0 || pos+n > len(p) {
		return ok, ErrMalformed
	}
	pos += n
	if pos+4 > len(p) {
		// Pre-4.1 style OK without status; treat as autocommit, no warnings.
		ok.Status = StatusAutocommit
		return ok, nil
	}
	ok.Status = binary.LittleEndian.Uint16(p[pos:])
	ok.Warnings = binary.LittleEndian.Uint16(p[pos+2:])
	pos += 4
	if pos < len(p) {
		info, _, next, err := ReadLenEncString(p, pos)
		if err != nil {
			ok.Info = p[pos:] // a string to the end, from an old server
			return ok, nil
		}
		ok.Info, pos = info, next
		if ok.Status&StatusSessionStateChange != 0 && pos < len(p) {
			if st, _, _, err := ReadLenEncString(p, pos); err == nil {
				ok.State = st
			}
		}
	}
	return ok, nil
}

// ParseEOF decodes a classic EOF packet's warnings and status.
func ParseEOF(p []byte) (warnings, status uint16) {
	if len(p) >= 5 {
		return binary.LittleEndian.Uint16(p[1:]), binary.LittleEndian.Uint16(p[3:])
	}
	return 0, 0
}

// ParseEnd decodes the packet that ends a result set, a classic EOF or
// (CLIENT_DEPRECATE_EOF) a 0xfe-headed OK, into an OK.
func ParseEnd(p []byte) (OK, error) {
	if IsOldEOF(p) {
		var ok OK
		ok.Warnings, ok.Status = ParseEOF(p)
		return ok, nil
	}
	return ParseOK(p)
}

// ParseErr decodes an ERR packet (protocol 4.1) into a *mysql.MyError.
func ParseErr(p []byte) *mysql.MyError {
	e := &mysql.MyError{State: mysql.DEFAULT_MYSQL_STATE}
	if len(p) < 3 {
		e.Code = mysql.ER_UNKNOWN_ERROR
		e.Message = "malformed error packet"
		return e
	}
	e.Code = binary.LittleEndian.Uint16(p[1:])
	pos := 3
	if len(p) >= pos+6 && p[pos] == '#' {
		e.State = string(p[pos+1 : pos+6])
		pos += 6
	}
	e.Message = string(p[pos:])
	return e
}

// Errors a server sends as it closes a connection (a shutdown, a KILL of
// the connection, MySQL's idle timeout): the statement did not run there,
// and the connection is gone.
const (
	errServerShutdown     = 1053 // ER_SERVER_SHUTDOWN
	errConnectionKilled   = 1927 // ER_CONNECTION_KILLED (MariaDB)
	errInteractionTimeout = 4031 // ER_CLIENT_INTERACTION_TIMEOUT (MySQL)
)

// IsGone reports whether p is an ERR packet saying the server closes the
// connection (see errServerShutdown).
func IsGone(p []byte) bool {
	if len(p) < 3 || p[0] != ErrHeader {
		return false
	}
	switch binary.LittleEndian.Uint16(p[1:]) {
	case errServerShutdown, errConnectionKilled, errInteractionTimeout:
		return true
	}
	return false
}

// SetOKInsertID appends to b the OK packet p with its insert id replaced by
// id, everything else as it came (p must parse as an OK).
func SetOKInsertID(b, p []byte, id uint64) []byte {
	_, _, n := lenEncInt(p[1:])
	_, _, m := lenEncInt(p[1+n:])
	b = append(b, p[:1+n]...)
	b = mysql.AppendLengthEncodedInteger(b, id)
	return append(b, p[1+n+m:]...)
}

// AppendOK appends an OK packet payload without session-state information
// (see AppendOKState). The info, if any, is length-encoded, as servers send it.
func AppendOK(b []byte, affected, insertID uint64, status, warnings uint16, info string) []byte {
	b = append(b, OKHeader)
	b = mysql.AppendLengthEncodedInteger(b, affected)
	b = mysql.AppendLengthEncodedInteger(b, insertID)
	b = binary.LittleEndian.AppendUint16(b, status&^StatusSessionStateChange)
	b = binary.LittleEndian.AppendUint16(b, warnings)
	if info == "" {
		return b
	}
	b = mysql.AppendLengthEncodedInteger(b, uint64(len(info)))
	return append(b, info...)
}

// AppendEOF appends a classic EOF packet payload.
func AppendEOF(b []byte, warnings, status uint16) []byte {
	b = append(b, EOFHeader)
	b = binary.LittleEndian.AppendUint16(b, warnings)
	return binary.LittleEndian.AppendUint16(b, status&^StatusSessionStateChange)
}

// AppendResultEndOK appends the 0xfe-headed OK that ends a result set when
// CLIENT_DEPRECATE_EOF is on.
func AppendResultEndOK(b []byte, warnings, status uint16) []byte {
	b = append(b, EOFHeader, 0, 0)
	b = binary.LittleEndian.AppendUint16(b, status&^StatusSessionStateChange)
	return binary.LittleEndian.AppendUint16(b, warnings)
}

// AppendErr appends an ERR packet payload.
func AppendErr(b []byte, code uint16, state, msg string) []byte {
	b = append(b, ErrHeader)
	b = binary.LittleEndian.AppendUint16(b, code)
	if len(state) != 5 {
		state = mysql.DEFAULT_MYSQL_STATE
	}
	b = append(b, '#')
	b = append(b, state...)
	return append(b, msg...)
}

// AppendLenEncString appends a length-encoded string.
func AppendLenEncString(b []byte, s string) []byte {
	b = mysql.AppendLengthEncodedInteger(b, uint64(len(s)))
	return append(b, s...)
}

// AppendLenEncNull appends the NULL marker of a text row.
func AppendLenEncNull(b []byte) []byte { return append(b, 0xfb) }

// ReadLenEncString decodes a length-encoded string at p[pos:] and returns it
// with the new position. null is true for the 0xfb NULL marker.
func ReadLenEncString(p []byte, pos int) (s []byte, null bool, next int, err error) {
	if pos >= len(p) {
		return nil, false, pos, ErrMalformed
	}
	n, isNull, m := lenEncInt(p[pos:])
	if isNull {
		return nil, true, pos + 1, nil
	}
	if m == 0 || pos+m+int(n) > len(p) || int(n) < 0 {
		return nil, false, pos, ErrMalformed
	}
	pos += m
	return p[pos : pos+int(n)], false, pos + int(n), nil
}

// ReadLenEncInt decodes a length-encoded integer at p[pos:].
func ReadLenEncInt(p []byte, pos int) (v uint64, next int, err error) {
	if pos >= len(p) {
		return 0, pos, ErrMalformed
	}
	v, _, m := lenEncInt(p[pos:])
	if m == 0 || pos+m > len(p) {
		return 0, pos, ErrMalformed
	}
	return v, pos + m, nil
}

// ReadNulString decodes a NUL-terminated string at p[pos:].
func ReadNulString(p []byte, pos int) (s []byte, next int, err error) {
	for i := pos; i < len(p); i++ {
		if p[i] == 0 {
			return p[pos:i], i + 1, nil
		}
	}
	return nil, pos, fmt.Errorf("%w: unterminated string", ErrMalformed)
}

// ColumnFixed returns the offset in column definition p of its
// fixed-length fields (0x0c, charset(2), length(4), type(1), flags(2),
// decimals(1)), after catalog, schema, table, org_table, name, org_name
// and, when MariaDB's extended type info was negotiated (ext), the
// extended metadata.
func ColumnFixed(p []byte, ext bool) (int, error) {
	pos := 0
	var err error
	n := 6
	if ext {
		n = 7 // the extended metadata is one length-encoded string too
	}
	for i := 0; i < n; i++ {
		if _, _, pos, err = ReadLenEncString(p, pos); err != nil {
			return 0, err
		}
	}
	if pos+11 > len(p) {
		return 0, ErrMalformed
	}
	return pos, nil
}

// RenameColumnTable returns column definition p with its table and
// org_table fields renamed by rename (ok false: kept), appended to dst, or
// reports false (and returns dst) when neither is renamed.
func RenameColumnTable(dst, p []byte, rename func(name []byte) (string, bool)) ([]byte, bool) {
	pos := 0
	var fields [4][2]int // catalog, schema, table, org_table: start, end
	for i := range fields {
		_, _, next, err := ReadLenEncString(p, pos)
		if err != nil {
			return dst, false
		}
		fields[i] = [2]int{pos, next}
		pos = next
	}
	var names [2][]byte
	var repl [2]string
	changed := [2]bool{}
	for i := range names {
		names[i], _, _, _ = ReadLenEncString(p, fields[2+i][0])
		repl[i], changed[i] = rename(names[i])
	}
	if !changed[0] && !changed[1] {
		return dst, false
	}
	out := append(dst[:0], p[:fields[2][0]]...)
	for i := range names {
		if changed[i] {
			out = AppendLenEncString(out, repl[i])
		} else {
			out = append(out, p[fields[2+i][0]:fields[2+i][1]]...)
		}
	}
	return append(out, p[fields[3][1]:]...), true
}

// ColumnType returns the type (MYSQL_TYPE_*) and charset of a column
// definition packet (ext: see ColumnFixed).
func ColumnType(p []byte, ext bool) (typ byte, charset uint16, err error) {
	pos, err := ColumnFixed(p, ext)
	if err != nil {
		return 0, 0, err
	}
	return p[pos+7], uint16(p[pos+1]) | uint16(p[pos+2])<<8, nil
}

// ColumnName extracts the name (not the original name) from a column
// definition packet (protocol 4.1).

func ColumnName(p []byte) ([]byte, error) {
	pos := 0
	var err error
	for i := 0; i < 4; i++ { // catalog, schema, table, org_table
		if _, _, pos, err = ReadLenEncString(p, pos); err != nil {
			return nil, err
		}
	}
	name, _, _, err := ReadLenEncString(p, pos)
	return name, err
}

// ColumnOrgName extracts the original name (org_name: the column's own,
// whatever its alias) from a column definition packet (protocol 4.1).
func ColumnOrgName(p []byte) ([]byte, error) {
	pos := 0
	var err error
	for i := 0; i < 5; i++ { // catalog, schema, table, org_table, name
		if _, _, pos, err = ReadLenEncString(p, pos); err != nil {
			return nil, err
		}
	}
	name, _, _, err := ReadLenEncString(p, pos)
	return name, err
}

// lenEncInt decodes a length-encoded integer; n == 0 means b is too short.
// (go-mysql's LengthEncodedInt indexes past short input.)
func lenEncInt(b []byte) (v uint64, isNull bool, n int) {
	if len(b) == 0 {
		return 0, false, 0
	}
	switch b[0] {
	case 0xfb:
		return 0, true, 1
	case 0xfc:
		if len(b) < 3 {
			return 0, false, 0
		}
		return uint64(b[1]) | uint64(b[2])<<8, false, 3
	case 0xfd:
		if len(b) < 4 {
			return 0, false, 0
		}
		return uint64(b[1]) | uint64(b[2])<<8 | uint64(b[3])<<16, false, 4
	case 0xfe:
		if len(b) < 9 {
			return 0, false, 0
		}
		return binary.LittleEndian.Uint64(b[1:]), false, 9
	case 0xff:
		return 0, false, 0
	}
	return uint64(b[0]), false, 1
}

// IsProgress reports whether p is a MariaDB progress report: an ERR
// header with error code 0xffff, sent before the answer of a long
// statement (ALTER TABLE, LOAD DATA...) to a client that negotiated
// MARIADB_CLIENT_PROGRESS. It is not an error.
func IsProgress(p []byte) bool {
	return len(p) >= 3 && p[0] == ErrHeader && p[1] == 0xff && p[2] == 0xff
}
