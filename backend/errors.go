package backend

import (
	"errors"
	"fmt"
)

// Kind classifies errors made by the backend package. The proxy maps each
// kind to a MySQL errno and SQLSTATE in exactly one place.
type Kind int

// Error kinds. Adding one means adding its mapping in the proxy; a test there
// fails otherwise.
const (
	KindPoolTimeout Kind = iota + 1 // no connection free within pool_wait_timeout
	KindConnect                     // dial or handshake to the backend failed
	KindLost                        // connection lost or broken during a command
	KindProtocol                    // the backend sent something we cannot parse
	KindClosed                      // the pool is closed (shutdown or node removed)
	KindAuth                        // the backend refused our credentials
	KindDown                        // the backend is marked down (health checks or an admin)
	kindEnd
)

// Kinds lists every error kind, for the proxy's mapping test.
func Kinds() []Kind {
	ks := make([]Kind, 0, kindEnd-1)
	for k := KindPoolTimeout; k < kindEnd; k++ {
		ks = append(ks, k)
	}
	return ks
}

func (k Kind) String() string {
	switch k {
	case KindPoolTimeout:
		return "pool timeout"
	case KindConnect:
		return "connect"
	case KindLost:
		return "connection lost"
	case KindProtocol:
		return "protocol"
	case KindClosed:
		return "pool closed"
	case KindAuth:
		return "auth"
	case KindDown:
		return "down"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Error is an error made talking to one backend node.
type Error struct {
	Kind Kind
	Node string // node name from ks.yaml
	Addr string // host:port
	Role Role   // master, or a replica (named in the message)
	Msg  string // what keyshard was doing
	Err  error  // cause, may be nil
}

func (e *Error) Error() string {
	s := fmt.Sprintf("node %s (%s): %s", e.Node, e.Addr, e.Msg)
	if e.Role == RoleReplica {
		s = fmt.Sprintf("node %s slave (%s): %s", e.Node, e.Addr, e.Msg)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the kind of a backend error, or 0 when err is not one.
func KindOf(err error) Kind {
	var be *Error
	if errors.As(err, &be) {
		return be.Kind
	}
	return 0
}
