package e2e

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend/wire"
)

// trackEntries decodes an OK packet's session-state information into
// "type:name=value" strings.
func trackEntries(t *testing.T, p []byte) []string {
	t.Helper()
	ok, err := wire.ParseOK(p)
	if err != nil {
		t.Fatalf("OK packet %x: %v", p, err)
	}
	var out []string
	st := ok.State
	for pos := 0; pos < len(st); {
		typ := st[pos]
		data, _, next, err := wire.ReadLenEncString(st, pos+1)
		if err != nil {
			t.Fatalf("session state %x: %v", st, err)
		}
		pos = next
		switch typ {
		case wire.TrackSchema:
			db, _, _, err := wire.ReadLenEncString(data, 0)
			if err != nil {
				t.Fatalf("schema entry %x: %v", data, err)
			}
			out = append(out, "schema="+string(db))
		case wire.TrackSystemVariables:
			name, _, n, err := wire.ReadLenEncString(data, 0)
			if err != nil {
				t.Fatalf("variable entry %x: %v", data, err)
			}
			val, _, _, err := wire.ReadLenEncString(data, n)
			if err != nil {
				t.Fatalf("variable entry %x: %v", data, err)
			}
			out = append(out, string(name)+"="+string(val))
		default:
			out = append(out, fmt.Sprintf("type%d=%x", typ, data))
		}
	}
	return out
}

// TestSessionTrack runs the same statements directly on MariaDB and through
// keyshard, with and without CLIENT_SESSION_TRACK, and requires the same OK
// packets byte for byte: the schema and system variables a tracking client
// is told about, and for a client that does not track, OKs without
// session-state information and the same info text.
func TestSessionTrack(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	setup := direct(t, basePort, "ks_test")
	mustExec(t, setup, "DROP TABLE IF EXISTS track_t")
	mustExec(t, setup, "CREATE TABLE track_t (id INT PRIMARY KEY, v INT)")
	mustExec(t, setup, "INSERT INTO track_t VALUES (1, 1), (2, 2)")
	t.Cleanup(func() { _, _ = setup.Exec("DROP TABLE IF EXISTS ks_test.track_t") })

	type step struct {
		cmd byte
		arg string
	}
	steps := []step{
		{mysql.COM_INIT_DB, "mysql"},
		{mysql.COM_QUERY, "USE ks_test"},
		{mysql.COM_QUERY, "SET autocommit = 0"},
		{mysql.COM_QUERY, "SET autocommit = 1"},
		{mysql.COM_QUERY, "SET NAMES latin1"},
		{mysql.COM_QUERY, "SET NAMES utf8mb4"},
		{mysql.COM_QUERY, "SET time_zone = '+01:00'"},
		{mysql.COM_QUERY, "SET @x = 1"},
		{mysql.COM_QUERY, "UPDATE track_t SET v = v + 1 WHERE id <= 2"},
		{mysql.COM_QUERY, "SET session_track_system_variables = '*'"},
		{mysql.COM_QUERY, "SET sql_mode = 'ANSI_QUOTES'"},
		{mysql.COM_QUERY, "SET session_track_schema = OFF"},
		{mysql.COM_QUERY, "USE mysql"},
		{mysql.COM_INIT_DB, "ks_test"},
		{mysql.COM_QUERY, "SET session_track_schema = ON"},
		{mysql.COM_INIT_DB, "ks_test"},
	}
	run := func(c *client.Conn) [][]byte {
		var out [][]byte
		for _, s := range steps {
			pk := command(t, c, append([]byte{s.cmd}, s.arg...)...)
			if pk[0] != mysql.OK_HEADER {
				t.Fatalf("%q: answer %q, want OK", s.arg, pk)
			}
			out = append(out, bytes.Clone(pk))
		}
		return out
	}
	for _, tracking := range []bool{true, false} {
		opt := withCaps(mysql.CLIENT_SESSION_TRACK, 0)
		if !tracking {
			opt = withCaps(0, mysql.CLIENT_SESSION_TRACK)
		}
		mustExec(t, setup, "UPDATE track_t SET v = id")
		want := run(goMySQL(t, fmt.Sprintf("127.0.0.1:%d", basePort), opt))
		mustExec(t, setup, "UPDATE track_t SET v = id")
		got := run(goMySQL(t, p.Addr, opt))
		sawState := false
		for i, s := range steps {
			if e := trackEntries(t, want[i]); tracking && len(e) > 0 {
				t.Logf("%q: %v", s.arg, e)
				sawState = true
			}
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("tracking %v, %q:\n keyshard %x %v\n mariadb  %x %v", tracking, s.arg,
					got[i], trackEntries(t, got[i]), want[i], trackEntries(t, want[i]))
			}
			if !tracking {
				if ok, _ := wire.ParseOK(got[i]); ok.Status&wire.StatusSessionStateChange != 0 || len(ok.State) > 0 {
					t.Errorf("%q: session state sent to a client without CLIENT_SESSION_TRACK: %x", s.arg, got[i])
				}
			}
		}
		if tracking && !sawState {
			t.Fatal("MariaDB reported no session state at all: the comparison proves nothing")
		}
	}
}
