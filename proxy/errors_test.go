package proxy

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/blacklist"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/control"
	"github.com/keyshard/keyshard/proxy/engine"
	"github.com/keyshard/keyshard/proxy/frontend"
	"github.com/keyshard/keyshard/router"
	"go.uber.org/zap"
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
	// The errors of the packages proxy imports that make their own.
	for _, c := range []struct {
		err  error
		code uint16
	}{
		{control.ArgErrorf("bad argument"), mysql.ER_WRONG_ARGUMENTS},
		{missingBlackSQL(t), mysql.ER_WRONG_ARGUMENTS},
		{blacklistErr(t, "select 1"), mysql.ER_OPTION_PREVENTS_STATEMENT},
		{blacklistErr(t, "prepare s from @q"), mysql.ER_NOT_SUPPORTED_YET},
	} {
		e := toMySQL(fmt.Errorf("wrapped: %w", c.err))
		if e.Code != c.code || len(e.State) != 5 || e.Message != "wrapped: "+c.err.Error() {
			t.Errorf("%T %q: mapped to %d %q %q, want %d", c.err, c.err, e.Code, e.State, e.Message, c.code)
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

// blacklistErr is the SQL blacklist's refusal of sql by a list of
// "select 1".
func blacklistErr(t *testing.T, sql string) error {
	t.Helper()
	err := blacklist.New([]string{"select 1"}).Check(router.NewParser(), sql, "")
	if err == nil {
		t.Fatalf("the blacklist let %q through", sql)
	}
	return err
}

// missingBlackSQL is the error of removing a blacklist entry that is not
// there (a control.ArgError with Missing set).
func missingBlackSQL(t *testing.T) error {
	t.Helper()
	cfg, _, err := config.Parse([]byte(`
user_list:
  - user: ks
    password: ks
nodes:
  - name: node1
    user: ks
    password: ks
    master: 127.0.0.1:1
schema_list:
  - user: ks
    nodes: [node1]
    default: node1
`), "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, zap.NewNop(), config.Local{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	err = s.Control().By(control.Actor{User: "t"}).DelBlackSQL("select 9")
	if !control.IsMissing(err) {
		t.Fatalf("removing a missing blacklist entry: %v, want a control.ArgError with Missing", err)
	}
	return err
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

// A backend's refusal of keyshard's own login is not relayed as the
// server's 1045 (the client would read it as its own credentials): 1429
// naming the node and keyshard's account.
func TestOwnLoginRefusalIsNotTheClients(t *testing.T) {
	in := &backend.Error{Kind: backend.KindAuth, Node: "node2", Addr: "127.0.0.1:3308", Msg: "refused keyshard's login as 'ks'",
		Err: &mysql.MyError{Code: mysql.ER_ACCESS_DENIED_ERROR, State: "28000", Message: "Access denied for user 'ks'@'localhost' (using password: YES)"}}
	got := toMySQL(fmt.Errorf("statement: %w", in))
	want := "keyshard: statement: node node2 (127.0.0.1:3308): refused keyshard's login as 'ks': ERROR 1045 (28000): Access denied for user 'ks'@'localhost' (using password: YES)"
	if got.Code != mysql.ER_CONNECT_TO_FOREIGN_DATA_SOURCE || got.State != "HY000" || got.Message != want {
		t.Fatalf("got %d %s %q, want 1429 HY000 %q", got.Code, got.State, got.Message, want)
	}
}
