package engine

import (
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
)

// PerStatementStatus are the status flags that describe one statement's
// execution (MariaDB's SERVER_STATUS_CLEAR_SET, cleared as each command
// starts): a status keyshard writes itself never carries them over from an
// earlier answer.
const PerStatementStatus = mysql.SERVER_STATUS_NO_GOOD_INDEX_USED | mysql.SERVER_STATUS_NO_INDEX_USED |
	wire.StatusMoreResultsExists | mysql.SERVER_STATUS_METADATA_CHANGED | mysql.SERVER_QUERY_WAS_SLOW |
	mysql.SERVER_STATUS_DB_DROPPED | mysql.SERVER_STATUS_CURSOR_EXISTS | mysql.SERVER_STATUS_LAST_ROW_SEND |
	mysql.SERVER_SESSION_STATE_CHANGED

// ClientError marks an error writing to the client: the client is gone
// (or stopped reading) and the session ends after the command.
type ClientError struct{ Err error }

func (e *ClientError) Error() string { return "client write: " + e.Err.Error() }
func (e *ClientError) Unwrap() error { return e.Err }

// Client writes answers to one client connection. It is the only place
// that encodes what the client negotiated: the EOF packets of clients
// without CLIENT_DEPRECATE_EOF, the session-state information of OK
// packets for clients without CLIENT_SESSION_TRACK. Executors hand it
// packets and statuses, and ask it (DeprecateEOF, MultiResults,
// LocalFiles) only where the answer they relay must take another shape.
//
// It is a concrete type on purpose: rows go through it once per packet (or
// once per buffer, RelayRows), and an interface call there would cost on
// every row.
type Client struct {
	pkt    *wire.Conn
	caps   uint32
	ext    uint32 // MariaDB extended capabilities
	buf    []byte
	mapErr func(error) *mysql.MyError
	// draining: a failed write does not stop the relay (see Drain);
	// gone is the first such failure.
	draining bool
	gone     error
	// more: the answer being written is not the command's last (a
	// statement of a batch keyshard runs one by one), so the packet that
	// ends it says SERVER_MORE_RESULTS_EXISTS.
	more bool
	mbuf []byte
}

// SetMore, on, marks the end of every answer written until it is turned
// off with SERVER_MORE_RESULTS_EXISTS: the statements of a multi-statement
// batch run one by one, each answer followed by the next.
func (c *Client) SetMore(on bool) { c.more = on }

// More reports whether SetMore is on: the answer being written is not the
// command's last.
func (c *Client) More() bool { return c.more }

// withMore returns status with SERVER_MORE_RESULTS_EXISTS while SetMore is on.
func (c *Client) withMore(status uint16) uint16 {
	if c.more {
		return status | wire.StatusMoreResultsExists
	}
	return status
}

// moreIn returns p, an OK, EOF or 0xfe-headed OK packet whose status is
// status, with SERVER_MORE_RESULTS_EXISTS set while SetMore is on (a copy
// when it changes).
func (c *Client) moreIn(p []byte, status uint16) []byte {
	if !c.more || status&wire.StatusMoreResultsExists != 0 || len(p) == 0 {
		return p
	}
	at := 3 // an EOF: header, warnings, then the status
	if !wire.IsOldEOF(p) {
		at = 1
		// header, affected rows, insert id, then the status.
		for range 2 {
			if at >= len(p) {
				return p
			}
			switch h := p[at]; {
			case h < 0xfb:
				at++
			case h == 0xfc:
				at += 3
			case h == 0xfd:
				at += 4
			case h == 0xfe:
				at += 9
			default:
				return p
			}
		}
	}
	if at+2 > len(p) {
		return p
	}
	c.mbuf = append(c.mbuf[:0], p...)
	c.mbuf[at] |= byte(wire.StatusMoreResultsExists)
	return c.mbuf
}

// Drain, on, makes a failed write to the client no reason to stop
// relaying: the answer is read to its end all the same (a pipelined
// connection's next answer is someone else's). Off, it returns the
// *ClientError of a write that failed meanwhile (nil: none).
func (c *Client) Drain(on bool) error {
	c.draining = on
	if on || c.gone == nil {
		return nil
	}
	err := &ClientError{c.gone}
	c.gone = nil
	return err
}

// wfail is what a failed write to the client returns: a *ClientError,
// or nil while draining.
func (c *Client) wfail(err error) error {
	if c.draining {
		if c.gone == nil {
			c.gone = err
		}
		return nil
	}
	return &ClientError{err}
}

// NewClient writes to pkt; mapErr turns any error into the MySQL error the
// client sees (the proxy's one mapper).
func NewClient(pkt *wire.Conn, mapErr func(error) *mysql.MyError) *Client {
	return &Client{pkt: pkt, mapErr: mapErr}
}

// SetCaps records the capabilities the client negotiated, and the
// MariaDB extended ones (backend.MariaDB*).
func (c *Client) SetCaps(caps, ext uint32) { c.caps, c.ext = caps, ext }

// DeprecateEOF reports whether the client negotiated CLIENT_DEPRECATE_EOF.
func (c *Client) DeprecateEOF() bool { return c.caps&mysql.CLIENT_DEPRECATE_EOF != 0 }

// Tracks reports whether the client asked for session-state tracking.
func (c *Client) Tracks() bool { return c.caps&mysql.CLIENT_SESSION_TRACK != 0 }

// MultiResults reports whether the client takes several result sets for
// one command, text and prepared (CLIENT_MULTI_RESULTS and
// CLIENT_PS_MULTI_RESULTS); the answer to a CALL assumes both.
func (c *Client) MultiResults() bool {
	const both = mysql.CLIENT_MULTI_RESULTS | mysql.CLIENT_PS_MULTI_RESULTS
	return c.caps&both == both
}

// LocalFiles reports whether the client sends files for LOAD DATA LOCAL.
func (c *Client) LocalFiles() bool { return c.caps&mysql.CLIENT_LOCAL_FILES != 0 }

// Packet writes one logical packet.
func (c *Client) Packet(p []byte) error {
	if err := c.pkt.WritePacket(p); err != nil {
		return c.wfail(err)
	}
	return nil
}

// Progress writes a MariaDB progress report and sends it at once (the
// client shows it while the statement runs).
func (c *Client) Progress(p []byte) error {
	if err := c.pkt.WritePacket(p); err != nil {
		return c.wfail(err)
	}
	if err := c.pkt.Flush(); err != nil {
		return c.wfail(err)
	}
	return nil
}

// Raw writes one physical packet (a row, or part of a long one).
func (c *Client) Raw(p []byte) error {
	if err := c.pkt.WriteRaw(p); err != nil {
		return c.wfail(err)
	}
	return nil
}

// Error writes err as an ERR packet (mapped by the proxy's mapper). A
// failed write shows at the next flush.
func (c *Client) Error(err error) {
	e := c.mapErr(err)
	c.buf = wire.AppendErr(c.buf[:0], e.Code, e.State, e.Message)
	_ = c.pkt.WritePacket(c.buf)
}

// OK writes an OK packet.
func (c *Client) OK(affected, insertID uint64, status, warnings uint16, info string) error {
	c.buf = wire.AppendOK(c.buf[:0], affected, insertID, c.withMore(status), warnings, info)
	return c.Packet(c.buf)
}

// UseOK answers a change of database (USE, COM_INIT_DB) to db: a client
// tracking session state is told the new database while track is on (the
// session's session_track_schema), as MySQL does.
func (c *Client) UseOK(status uint16, db string, track bool) error {
	if !track || !c.Tracks() {
		return c.OK(0, 0, status, 0, "")
	}
	var st [80]byte
	c.buf = wire.AppendOKState(c.buf[:0], 0, 0, c.withMore(status), 0, "", wire.AppendTrackSchema(st[:0], db))
	return c.Packet(c.buf)
}

// ResultEnd writes the packet that ends a result set keyshard writes
// itself: an EOF, or with CLIENT_DEPRECATE_EOF the 0xfe-headed OK.
func (c *Client) ResultEnd(warnings, status uint16) error {
	status = c.withMore(status)
	if c.DeprecateEOF() {
		c.buf = wire.AppendResultEndOK(c.buf[:0], warnings, status)
	} else {
		c.buf = wire.AppendEOF(c.buf[:0], warnings, status)
	}
	return c.Packet(c.buf)
}

// ColsEnd writes, for a client without CLIENT_DEPRECATE_EOF, the EOF that
// follows column (or parameter) definitions; nothing for the others.
func (c *Client) ColsEnd(warnings, status uint16) error {
	if c.DeprecateEOF() {
		return nil
	}
	return c.EOF(warnings, status)
}

// EOF writes a classic EOF packet whatever the client negotiated (a
// cursor's EXECUTE answer, COM_FIELD_LIST).
func (c *Client) EOF(warnings, status uint16) error {
	c.buf = wire.AppendEOF(c.buf[:0], warnings, status)
	return c.Packet(c.buf)
}

// RelayOK relays a backend's OK packet p (0x00-headed) whose status is
// status, without its session-state information for a client that did
// not ask for it.
func (c *Client) RelayOK(p []byte, status uint16) error {
	if status&wire.StatusSessionStateChange != 0 && !c.Tracks() {
		c.buf = wire.StripState(c.buf[:0], p)
		p = c.buf
	}
	return c.Packet(c.moreIn(p, status))
}

// RelayEnd relays the backend's terminator rp of a result set's rows (a
// classic EOF, or a 0xfe-headed OK from a connection with
// CLIENT_DEPRECATE_EOF) with its warnings and status: as it came when the
// client expects that form (an OK less session state the client did not
// ask for), else converted. rp is one physical packet.
func (c *Client) RelayEnd(rp []byte, warnings, status uint16) error {
	old := wire.IsOldEOF(rp)
	if c.more && status&wire.StatusMoreResultsExists == 0 {
		rp = c.moreIn(rp, status)
		status |= wire.StatusMoreResultsExists
	}
	if !c.DeprecateEOF() {
		if old {
			return c.Raw(rp) // the server's own
		}
		return c.EOF(warnings, status)
	}
	if old {
		c.buf = wire.AppendResultEndOK(c.buf[:0], warnings, status)
		return c.Packet(c.buf)
	}
	if status&wire.StatusSessionStateChange != 0 && !c.Tracks() {
		c.buf = wire.StripState(c.buf[:0], rp)
		rp = c.buf
	}
	return c.Raw(rp)
}

// ResultSet writes a small text result set made by keyshard itself
// (every column a VARCHAR in utf8mb4), ended with status.
func (c *Client) ResultSet(cols []string, rows [][]string, status uint16) error {
	if err := c.resultCols(cols, status); err != nil {
		return err
	}
	for _, r := range rows {
		b := c.buf[:0]
		for _, v := range r {
			b = wire.AppendLenEncString(b, v)
		}
		c.buf = b
		if err := c.Packet(c.buf); err != nil {
			return err
		}
	}
	return c.ResultEnd(0, status)
}

// NullableResultSet is ResultSet with NULL values (nil).
func (c *Client) NullableResultSet(cols []string, rows [][]*string, status uint16) error {
	if err := c.resultCols(cols, status); err != nil {
		return err
	}
	for _, r := range rows {
		b := c.buf[:0]
		for _, v := range r {
			if v == nil {
				b = append(b, 0xfb)
			} else {
				b = wire.AppendLenEncString(b, *v)
			}
		}
		c.buf = b
		if err := c.Packet(c.buf); err != nil {
			return err
		}
	}
	return c.ResultEnd(0, status)
}

// resultCols writes the column count and definitions of ResultSet.
func (c *Client) resultCols(cols []string, status uint16) error {
	c.buf = mysql.AppendLengthEncodedInteger(c.buf[:0], uint64(len(cols)))
	if err := c.Packet(c.buf); err != nil {
		return err
	}
	for _, col := range cols {
		b := c.buf[:0]
		b = wire.AppendLenEncString(b, "def")
		b = wire.AppendLenEncString(b, "")
		b = wire.AppendLenEncString(b, "")
		b = wire.AppendLenEncString(b, "")
		b = wire.AppendLenEncString(b, col)
		b = wire.AppendLenEncString(b, col)
		if c.ext&backend.MariaDBExtendedTypeInfo != 0 {
			b = append(b, 0) // no extended type info
		}
		b = append(b, 0x0c, 45, 0) // utf8mb4_general_ci
		b = append(b, 0, 0, 1, 0)  // column length 65536
		b = append(b, mysql.MYSQL_TYPE_VAR_STRING, 0, 0, 0x1f, 0, 0)
		c.buf = b
		if err := c.Packet(c.buf); err != nil {
			return err
		}
	}
	return c.ColsEnd(0, status)
}
