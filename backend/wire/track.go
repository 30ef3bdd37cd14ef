package wire

import (
	"encoding/binary"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// Session-state change types in an OK packet's session-state information
// (CLIENT_SESSION_TRACK).
const (
	TrackSystemVariables = 0
	TrackSchema          = 1
	TrackStateChange     = 2
)

// AppendOKState appends an OK packet payload for a client with
// CLIENT_SESSION_TRACK that carries state, the session-state entries (made
// with AppendTrackSchema and AppendTrackVariable); empty state is a plain OK.
func AppendOKState(b []byte, affected, insertID uint64, status, warnings uint16, info string, state []byte) []byte {
	if len(state) == 0 {
		return AppendOK(b, affected, insertID, status, warnings, info)
	}
	b = append(b, OKHeader)
	b = mysql.AppendLengthEncodedInteger(b, affected)
	b = mysql.AppendLengthEncodedInteger(b, insertID)
	b = binary.LittleEndian.AppendUint16(b, status|StatusSessionStateChange)
	b = binary.LittleEndian.AppendUint16(b, warnings)
	b = mysql.AppendLengthEncodedInteger(b, uint64(len(info)))
	b = append(b, info...)
	b = mysql.AppendLengthEncodedInteger(b, uint64(len(state)))
	return append(b, state...)
}

// AppendTrackSchema appends the entry reporting the current database.
func AppendTrackSchema(b []byte, db string) []byte {
	b = append(b, TrackSchema)
	b = mysql.AppendLengthEncodedInteger(b, uint64(lenEncLen(uint64(len(db)))+len(db)))
	return appendLenEncString(b, db)
}

// AppendTrackVariable appends the entry reporting a system variable's new
// value.
func AppendTrackVariable(b []byte, name, value string) []byte {
	b = append(b, TrackSystemVariables)
	n := lenEncLen(uint64(len(name))) + len(name) + lenEncLen(uint64(len(value))) + len(value)
	b = mysql.AppendLengthEncodedInteger(b, uint64(n))
	b = appendLenEncString(b, name)
	return appendLenEncString(b, value)
}

func appendLenEncString(b []byte, s string) []byte {
	b = mysql.AppendLengthEncodedInteger(b, uint64(len(s)))
	return append(b, s...)
}

func lenEncLen(n uint64) int {
	switch {
	case n < 251:
		return 1
	case n < 1<<16:
		return 3
	case n < 1<<24:
		return 4
	}
	return 9
}

// StripState rewrites a backend's OK packet p (0x00 or 0xfe headed) that
// carries session-state information for a client without
// CLIENT_SESSION_TRACK: the state and its status flag go, the info stays.
// It returns p itself when there is nothing to strip, else the packet
// appended to b.
func StripState(b, p []byte) []byte {
	ok, err := ParseOK(p)
	if err != nil || ok.Status&StatusSessionStateChange == 0 {
		return p
	}
	b = append(b, p[0])
	b = mysql.AppendLengthEncodedInteger(b, ok.AffectedRows)
	b = mysql.AppendLengthEncodedInteger(b, ok.InsertID)
	b = binary.LittleEndian.AppendUint16(b, ok.Status&^StatusSessionStateChange)
	b = binary.LittleEndian.AppendUint16(b, ok.Warnings)
	if len(ok.Info) > 0 {
		b = mysql.AppendLengthEncodedInteger(b, uint64(len(ok.Info)))
		b = append(b, ok.Info...)
	}
	return b
}

// TrackedSchema returns the current database an OK packet's session-state
// information (OK.State) reports, if it reports one: the server's word
// for a change made by any statement (USE behind a comment, a batch, a
// procedure), which the proxy cannot see in the SQL.
func TrackedSchema(state []byte) (db string, ok bool) {
	for pos := 0; pos < len(state); {
		typ := state[pos]
		data, _, next, err := ReadLenEncString(state, pos+1)
		if err != nil {
			return "", false
		}
		if typ == TrackSchema {
			name, _, _, err := ReadLenEncString(data, 0)
			if err != nil {
				return "", false
			}
			db, ok = string(name), true
		}
		pos = next
	}
	return db, ok
}

// TrackedVars calls fn for each system variable an OK packet's
// session-state information (OK.State) reports changed, with its new
// value as the server prints it (name and value alias state).
func TrackedVars(state []byte, fn func(name, value []byte)) {
	for pos := 0; pos < len(state); {
		typ := state[pos]
		data, _, next, err := ReadLenEncString(state, pos+1)
		if err != nil {
			return
		}
		if typ == TrackSystemVariables {
			name, _, n, err := ReadLenEncString(data, 0)
			if err != nil {
				return
			}
			value, _, _, err := ReadLenEncString(data, n)
			if err != nil {
				return
			}
			fn(name, value)
		}
		pos = next
	}
}
