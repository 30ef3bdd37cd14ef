package control

import (
	"errors"
	"fmt"
)

// ArgError is a bad argument to an operator control: an unknown node, a
// malformed address, a change that fails validation. Missing: it names
// something to remove that is not there (a blacklist entry). Package
// proxy maps it to ER_WRONG_ARGUMENTS.
type ArgError struct {
	Missing bool
	msg     string
}

func (e *ArgError) Error() string { return e.msg }

// argErr is the error for a bad argument to an operator control.
func argErr(format string, args ...any) error {
	return &ArgError{msg: fmt.Sprintf(format, args...)}
}

// ArgErrorf is a bad argument to an operator's query (an unknown digest
// order, say), for the data plane's answers to the operator.
func ArgErrorf(format string, args ...any) error { return argErr(format, args...) }

// IsArgError reports whether err is a bad argument to an operator control
// (an unknown node, a malformed address, a change that fails validation).
func IsArgError(err error) bool {
	var ae *ArgError
	return errors.As(err, &ae)
}

// IsMissing reports whether err is a bad argument naming something to
// remove that is not there (a blacklist entry).
func IsMissing(err error) bool {
	var ae *ArgError
	return errors.As(err, &ae) && ae.Missing
}
