package frontend

import (
	"errors"
	"fmt"
)

// Kind classifies the errors the frontend makes itself. It maps none to a
// MySQL errno: the one mapping of errors to what a client sees is
// keyshard's (Server.Answer), which covers every Kind.
type Kind int

const (
	AccessDenied       Kind = iota + 1
	HostNotAllowed          // allow_ips refuses the client's address
	HostBlocked             // locked out after failed logins
	TooManyConnections      // max_connections, max_unauthenticated_per_host
	MalformedPacket
	PacketTooLarge
	Shutdown
	NotSupported
	UnknownCommand // a command the connection no longer takes (COM_CHANGE_USER after three refusals)
	KindEnd        // the number of kinds + 1, for the mapping's test
)

// Error is an error of the frontend's own.
type Error struct {
	Kind Kind
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func newErr(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// isAccessDenied reports whether err is a refused login.
func isAccessDenied(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == AccessDenied
}

// EndingError is an error after which the connection is closed (a
// session that could not restart).
type EndingError struct{ Err error }

func (e *EndingError) Error() string { return e.Err.Error() }
func (e *EndingError) Unwrap() error { return e.Err }
