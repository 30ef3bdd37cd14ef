package proxy

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/engine"
	"github.com/keyshard/keyshard/proxy/frontend"
)

// Every internal error kind must map to a real MySQL errno, never the
// catch-all ER_UNKNOWN_ERROR.
func TestEveryErrorKindIsMapped(t *testing.T) {
	for k := errKind(1); k < errKindEnd; k++ {
		e := toMySQL(fmt.Errorf("wrapped: %w", newErr(k, "kind %d", k)))
		if e.Code == mysql.ER_UNKNOWN_ERROR || proxyCodes[k] == 0 {
			t.Errorf("proxy error kind %d is not mapped", k)
		}
		if len(e.State) != 5 {
			t.Errorf("kind %d: bad SQLSTATE %q", k, e.State)
		}
	}
	for _, k := range backend.Kinds() {
		e := toMySQL(&backend.Error{Kind: k, Node: "node1", Addr: "127.0.0.1:1", Msg: "x"})
		if e.Code == mysql.ER_UNKNOWN_ERROR || backendCodes[k] == 0 {
			t.Errorf("backend error kind %v is not mapped", k)
		}
		if want := "keyshard: node node1 (127.0.0.1:1): x"; e.Message != want {
			t.Errorf("kind %v: message %q, want %q", k, e.Message, want)
		}
	}
	for k := frontend.Kind(1); k < frontend.KindEnd; k++ {
		e := toMySQL(fmt.Errorf("wrapped: %w", &frontend.Error{Kind: k, Msg: "x"}))
		if e.Code == mysql.ER_UNKNOWN_ERROR || frontendCodes[k] == 0 {
			t.Errorf("frontend error kind %d is not mapped", k)
		}
		if len(e.State) != 5 {
			t.Errorf("frontend kind %d: bad SQLSTATE %q", k, e.State)
		}
	}
	for _, k := range engine.Kinds() {
		e := toMySQL(fmt.Errorf("wrapped: %w", engine.Errorf(k, "kind %d", k)))
		if e.Code == mysql.ER_UNKNOWN_ERROR || engineCodes[k] == 0 {
			t.Errorf("engine error kind %d is not mapped", k)
		}
		if len(e.State) != 5 {
			t.Errorf("engine kind %d: bad SQLSTATE %q", k, e.State)
		}
	}
}

func TestRelayedErrorKeepsItsCode(t *testing.T) {
	in := &mysql.MyError{Code: 1146, State: "42S02", Message: "Table 'x.y' doesn't exist"}
	if got := toMySQL(fmt.Errorf("ctx: %w", in)); got != in {
		t.Fatalf("got %v, want the backend's error unchanged", got)
	}
	if got := toMySQL(errors.New("boom")); got.Code != mysql.ER_UNKNOWN_ERROR {
		t.Fatalf("unclassified error got %d", got.Code)
	}
	if got := toMySQL(&frontend.Error{Kind: frontend.AccessDenied, Msg: "x"}); got.State != "28000" {
		t.Fatalf("access denied state %q", got.State)
	}
}
