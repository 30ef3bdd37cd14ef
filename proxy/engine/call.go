package engine

import (
	"bytes"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/router"
)

// Call describes an executed CALL statement.
type Call struct {
	Params int    // the statement's placeholder count
	SQL    string // its text
	DB     string // the database it was prepared in
}

// relayCall relays the answer to an EXECUTE of a CALL for a client lacking
// one of callCaps, as MariaDB answers such a client:
//   - without CLIENT_PS_MULTI_RESULTS, the result set of the OUT and INOUT
//     placeholders (the last before the final OK; its terminator has
//     SERVER_PS_OUT_PARAMS) is left out, the rest sent as they are;
//   - without CLIENT_MULTI_RESULTS, a procedure that returns a result set
//     gets ER_SP_BADSELECT.
//
// Only its terminator tells the OUT-parameter set, which has one row and
// at most c.Params columns: a result set that could be it has its column
// definitions and first row held back until its next packet; the others
// stream as Relay streams them. So memory is bounded by one row.
//
// A client without CLIENT_MULTI_RESULTS gets a backend connection without
// it too (backend.FlavorCaps), so the server itself refuses such a
// procedure before running it; without CLIENT_PS_MULTI_RESULTS alone, the
// OUT-parameter set is left out here.
func (e *Engine) relayCall(bc *backend.Conn, c *Call) (Result, error) {
	var res Result
	bp := bc.Packets()
	caps := e.Client.caps // which of the two is missing decides
	for {
		p, done, err := e.readResult(bc, &res)
		if done || err != nil {
			return res, err
		}
		if p == nil {
			continue
		}
		n, _, perr := wire.ReadLenEncInt(p, 0)
		if perr != nil {
			return res, lostConn(bc, perr)
		}
		held := [][]byte{bytes.Clone(p)} // column count, definitions
		for range n {
			cp, err := bp.ReadPacket()
			if err != nil {
				return res, lostConn(bc, err)
			}
			held = append(held, bytes.Clone(cp))
		}
		var colsEnd []byte // the server's own EOF after the definitions
		if !bc.DeprecateEOF() {
			eof, err := readColsEOF(bc)
			if err != nil {
				return res, err
			}
			colsEnd = bytes.Clone(eof)
		}
		var row [][]byte // first row, physical packets
		p = nil
		out := false
		if n <= uint64(c.Params) {
			if p, err = bp.ReadRaw(); err != nil {
				return res, lostConn(bc, err)
			}
			if len(p) == 0 {
				return res, lostConn(bc, wire.ErrMalformed)
			}
			for cont := p[0] == 0x00; cont; { // a binary row
				row = append(row, bytes.Clone(p))
				cont = len(p) == wire.MaxPayload
				if p, err = bp.ReadRaw(); err != nil {
					return res, lostConn(bc, err)
				}
			}
			if len(row) > 0 && wire.IsEOF(p) {
				ok, perr := wire.ParseEnd(p)
				if perr != nil {
					return res, lostConn(bc, perr)
				}
				out = ok.Status&mysql.SERVER_PS_OUT_PARAMS != 0
				if out && caps&mysql.CLIENT_PS_MULTI_RESULTS == 0 {
					if ok.Status&wire.StatusMoreResultsExists == 0 {
						return res, lostConn(bc, wire.ErrMalformed) // no final OK
					}
					continue
				}
			}
		}
		if !out && caps&mysql.CLIENT_MULTI_RESULTS == 0 {
			return res, e.badSelect(bc, c, p, &res)
		}
		res.ResultSets++
		for _, hp := range held {
			if err := e.Client.Packet(hp); err != nil {
				return res, err
			}
		}
		if colsEnd != nil {
			w, st := wire.ParseEOF(colsEnd)
			err = e.Client.ColsEnd(w, st)
		} else {
			err = e.colsEOF(bc, 0)
		}
		if err != nil {
			return res, err
		}
		for _, rp := range row {
			if err := e.Client.Raw(rp); err != nil {
				return res, err
			}
		}
		var rows uint64
		if row != nil {
			rows = 1
		}
		if more, err := e.relayRows(bc, p, rows, false, &res); err != nil || !more {
			return res, err
		}
	}
}

// badSelect answers ER_SP_BADSELECT for c after reading and discarding
// the rest of the backend's answer, from within a result set's rows (p, if
// set, is the next packet, already read).
func (e *Engine) badSelect(bc *backend.Conn, c *Call, p []byte, res *Result) error {
	bp := bc.Packets()
	rows, cont := true, false
	for done := false; !done; p = nil {
		var err error
		if p == nil {
			if p, err = bp.ReadRaw(); err != nil {
				return lostConn(bc, err)
			}
		}
		switch {
		case cont:
			cont = len(p) == wire.MaxPayload
		case len(p) == 0:
			return lostConn(bc, wire.ErrMalformed)
		case p[0] == wire.ErrHeader && len(p) < wire.MaxPayload:
			done = true
		case rows && wire.IsEOF(p), !rows && p[0] == wire.OKHeader:
			ok, perr := wire.ParseEnd(p)
			if perr != nil {
				return lostConn(bc, perr)
			}
			bc.SetStatus(ok.Status)
			rows, done = false, ok.Status&wire.StatusMoreResultsExists == 0
		case rows:
			cont = len(p) == wire.MaxPayload
		default: // the column count of the next result set
			n, _, perr := wire.ReadLenEncInt(p, 0)
			if perr != nil {
				return lostConn(bc, perr)
			}
			for range n {
				if _, err := bp.ReadPacket(); err != nil {
					return lostConn(bc, err)
				}
			}
			if !bc.DeprecateEOF() {
				if _, err := readColsEOF(bc); err != nil {
					return err
				}
			}
			rows = true
		}
	}
	e.Last.RowCount = -1
	res.Err = &mysql.MyError{Code: mysql.ER_SP_BADSELECT, State: "0A000",
		Message: "PROCEDURE " + callName(c.SQL, c.DB) + " can't return a result set in the given context"}
	e.Client.Error(res.Err)
	return nil
}

// callName is the procedure a CALL names, as MariaDB's messages print it:
// db.name, unquoted, db defaulting to the current database db.
func callName(sql, db string) string {
	i := router.Classify(sql).Start + len("call")
	name, i := sqlIdent(sql, i)
	if j := skipBlanks(sql, i); j < len(sql) && sql[j] == '.' {
		db = name
		name, _ = sqlIdent(sql, j+1)
	}
	return db + "." + name
}

// sqlIdent reads the identifier at sql[i:], after blanks, unquoting it,
// and returns it with the offset after it.
func sqlIdent(sql string, i int) (string, int) {
	i = skipBlanks(sql, i)
	if i < len(sql) && (sql[i] == '`' || sql[i] == '"') {
		q := sql[i]
		var b []byte
		for i++; i < len(sql); i++ {
			if sql[i] == q {
				if i+1 < len(sql) && sql[i+1] == q {
					i++
				} else {
					return string(b), i + 1
				}
			}
			b = append(b, sql[i])
		}
		return string(b), i
	}
	j := i
	for j < len(sql) && (sql[j] == '_' || sql[j] == '$' || sql[j] >= 0x80 ||
		sql[j] >= '0' && sql[j] <= '9' || sql[j]|0x20 >= 'a' && sql[j]|0x20 <= 'z') {
		j++
	}
	return sql[i:j], j
}

func skipBlanks(sql string, i int) int {
	for i < len(sql) && (sql[i] == ' ' || sql[i] == '\t' || sql[i] == '\n' || sql[i] == '\r') {
		i++
	}
	return i
}
