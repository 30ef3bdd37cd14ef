package engine

import (
	"fmt"

	"github.com/keyshard/keyshard/backend/wire"
)

// Kind classifies the errors the engine makes itself. The proxy's one
// error mapper gives each an errno (a test there checks every kind).
type Kind int

// Engine error kinds.
const (
	KindNoSchema     Kind = iota + 1 // the user has no schema to run on
	KindCrossNode                    // a transaction would span nodes
	KindNotSupported                 // a routing the engine cannot run
	KindTxLost                       // the connection of an open transaction was lost
	KindStateLost                    // the connection holding other session state was lost
	KindKilled                       // the session was killed while the statement ran
	KindNoResult                     // a fan-out produced no result set
	kindEnd
)

// Kinds lists every error kind, for the proxy's mapping test.
func Kinds() []Kind {
	out := make([]Kind, 0, kindEnd-1)
	for k := KindNoSchema; k < kindEnd; k++ {
		out = append(out, k)
	}
	return out
}

// Error is an error made by the engine (not relayed from a backend).
type Error struct {
	Kind Kind
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Errorf makes an engine error of kind k.
func Errorf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...)}
}

// ErrNoSchema is the error for a user without a schema in schema_list.
func ErrNoSchema(user string) error {
	return Errorf(KindNoSchema, "keyshard: user '%s' has no schema in schema_list", user)
}

// holding says, for an error message, why the session is bound to one
// node's transaction (status: the session's, see Conns.Status), and what
// a client should know after the refusal.
func holding(status uint16) (where, after string) {
	if status&wire.StatusInTrans != 0 {
		return "inside a transaction", " (the transaction is still open)"
	}
	return "with autocommit off (every statement opens a transaction)", ""
}

func crossNode(format string, args ...any) error { return Errorf(KindCrossNode, format, args...) }
