package proxy

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/proxy/blacklist"
	"github.com/keyshard/keyshard/proxy/control"
	"github.com/keyshard/keyshard/proxy/engine"
	"github.com/keyshard/keyshard/proxy/frontend"
	"github.com/keyshard/keyshard/router"
)

// errKind classifies errors made by the proxy itself.
type errKind int

const (
	errUnknownCommand errKind = iota + 1
	errMalformedPacket
	errPacketTooLarge
	errNoSuchThread
	errNotSupported
	errNoSchema
	errKilled
	errOffline
	errUserLimit
	errTableExists  // a DDL's table exists (on some or all of its nodes)
	errUnknownTable // a DROP TABLE's table is missing (on some or all)
	errNoSuchTable  // a TRUNCATE TABLE's table is missing (on some or all)
	errHeld         // a statement waited too long for a layout switch
	errKindEnd
)

// Error is an error made by keyshard (not relayed from a backend).
type Error struct {
	kind errKind
	msg  string
}

func (e *Error) Error() string { return e.msg }

func newErr(kind errKind, format string, args ...any) *Error {
	return &Error{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// proxyCodes maps each proxy error kind to its MySQL errno. The SQLSTATE
// comes from the errno (mysql.MySQLState).
var proxyCodes = map[errKind]uint16{
	errUnknownCommand:  mysql.ER_UNKNOWN_COM_ERROR,
	errMalformedPacket: mysql.ER_MALFORMED_PACKET,
	errPacketTooLarge:  mysql.ER_NET_PACKET_TOO_LARGE,
	errNoSuchThread:    mysql.ER_NO_SUCH_THREAD,
	errNotSupported:    mysql.ER_NOT_SUPPORTED_YET,
	errNoSchema:        mysql.ER_DBACCESS_DENIED_ERROR,
	errKilled:          mysql.ER_QUERY_INTERRUPTED,
	errOffline:         erServerOfflineMode,
	errUserLimit:       mysql.ER_USER_LIMIT_REACHED,
	errTableExists:     mysql.ER_TABLE_EXISTS_ERROR,
	errUnknownTable:    mysql.ER_BAD_TABLE_ERROR,
	errNoSuchTable:     mysql.ER_NO_SUCH_TABLE,
	errHeld:            mysql.ER_LOCK_WAIT_TIMEOUT,
}

// erServerOfflineMode is MySQL's ER_SERVER_OFFLINE_MODE (offline_mode=ON),
// which go-mysql does not list.
const erServerOfflineMode = 3032

// backendCodes maps each backend error kind to its MySQL errno.
var backendCodes = map[backend.Kind]uint16{
	backend.KindPoolTimeout: mysql.ER_CON_COUNT_ERROR,
	backend.KindConnect:     mysql.ER_CONNECT_TO_FOREIGN_DATA_SOURCE,
	backend.KindLost:        mysql.ER_NET_READ_ERROR,
	backend.KindProtocol:    mysql.ER_NET_READ_ERROR,
	backend.KindClosed:      mysql.ER_SERVER_SHUTDOWN,
	backend.KindAuth:        mysql.ER_CONNECT_TO_FOREIGN_DATA_SOURCE,
	backend.KindDown:        mysql.ER_CONNECT_TO_FOREIGN_DATA_SOURCE,
}

// engineCodes maps each engine error kind to its MySQL errno.
var engineCodes = map[engine.Kind]uint16{
	engine.KindNoSchema:     mysql.ER_DBACCESS_DENIED_ERROR,
	engine.KindCrossNode:    mysql.ER_NOT_SUPPORTED_YET,
	engine.KindNotSupported: mysql.ER_NOT_SUPPORTED_YET,
	engine.KindTxLost:       mysql.ER_ERROR_DURING_ROLLBACK,
	engine.KindStateLost:    mysql.ER_NET_READ_ERROR,
	engine.KindKilled:       mysql.ER_QUERY_INTERRUPTED,
	engine.KindNoResult:     mysql.ER_NOT_SUPPORTED_YET,
}

// blacklistCodes maps the SQL blacklist's refusals (Uncheckable) to their
// MySQL errno.
var blacklistCodes = map[bool]uint16{
	false: mysql.ER_OPTION_PREVENTS_STATEMENT,
	true:  mysql.ER_NOT_SUPPORTED_YET,
}

// sqlStates overrides SQLSTATEs where go-mysql's table has none or a
// different one from the MySQL server.
var sqlStates = map[uint16]string{
	mysql.ER_MALFORMED_PACKET:               "HY000",
	mysql.ER_CONNECT_TO_FOREIGN_DATA_SOURCE: "HY000",
	mysql.ER_QUERY_INTERRUPTED:              "70100",
	erServerOfflineMode:                     "HY000",
}

// toMySQL is THE mapping from any error keyshard hands a client to a MySQL
// error: errors relayed from a backend keep their own errno, SQLSTATE and
// message; keyshard's own carry a kind from birth.
func toMySQL(err error) *mysql.MyError {
	var me *mysql.MyError
	if errors.As(err, &me) && !ownLogin(err) {
		return me
	}
	var code uint16 = mysql.ER_UNKNOWN_ERROR
	msg := err.Error()
	var pe *Error
	var fe *frontend.Error
	var be *backend.Error
	var re *router.Error
	var ee *engine.Error
	var ae *control.ArgError
	var ble *blacklist.Error
	switch {
	case errors.As(err, &fe):
		if c, ok := frontendCodes[fe.Kind]; ok {
			code = c
		}
	case errors.As(err, &ee):
		if c, ok := engineCodes[ee.Kind]; ok {
			code = c
		}
	case errors.As(err, &pe):
		if c, ok := proxyCodes[pe.kind]; ok {
			code = c
		}
	case errors.As(err, &ae):
		code = mysql.ER_WRONG_ARGUMENTS // a bad argument to an operator control (Missing too)
	case errors.As(err, &ble):
		code = blacklistCodes[ble.Uncheckable]
	case errors.As(err, &be):
		if c, ok := backendCodes[be.Kind]; ok {
			code = c
		}
		msg = "keyshard: " + msg
	case errors.As(err, &re):
		code = mysql.ER_NOT_SUPPORTED_YET
		if re.Code != 0 {
			code = re.Code
		}
		if re.Parse {
			code = mysql.ER_PARSE_ERROR
		}
	case errors.Is(err, wire.ErrPacketTooLarge):
		code = mysql.ER_NET_PACKET_TOO_LARGE
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		code = mysql.ER_QUERY_INTERRUPTED
	}
	state, ok := sqlStates[code]
	if !ok {
		state, ok = mysql.MySQLState[code]
		if !ok {
			state = mysql.DEFAULT_MYSQL_STATE
		}
	}
	return &mysql.MyError{Code: code, State: state, Message: msg}
}

// ownLogin reports whether err is a backend's refusal of keyshard's own
// connection (its login, or the connection itself: too many connections,
// host blocked): the server's errno (1045, 1040, 1129) would read as the
// client's, so it is reported as 1429 naming the node and keyshard's
// account, as a FEDERATED table reports its remote login.
func ownLogin(err error) bool {
	k := backend.KindOf(err)
	return k == backend.KindAuth || k == backend.KindConnect
}

// frontendCodes maps each frontend error kind to its MySQL errno.
var frontendCodes = map[frontend.Kind]uint16{
	frontend.AccessDenied:       mysql.ER_ACCESS_DENIED_ERROR,
	frontend.HostNotAllowed:     mysql.ER_HOST_NOT_PRIVILEGED,
	frontend.HostBlocked:        mysql.ER_HOST_IS_BLOCKED,
	frontend.TooManyConnections: mysql.ER_CON_COUNT_ERROR,
	frontend.MalformedPacket:    mysql.ER_MALFORMED_PACKET,
	frontend.PacketTooLarge:     mysql.ER_NET_PACKET_TOO_LARGE,
	frontend.Shutdown:           mysql.ER_SERVER_SHUTDOWN,
	frontend.NotSupported:       mysql.ER_NOT_SUPPORTED_YET,
	frontend.UnknownCommand:     mysql.ER_UNKNOWN_COM_ERROR,
}

// refusal reports whether err is an answer to the client, keyshard's own
// or a server's (not a broken connection).
func refusal(err error) bool {
	var pe *Error
	var fe *frontend.Error
	return errors.As(err, &pe) || errors.As(err, &fe) || isMyError(err)
}
