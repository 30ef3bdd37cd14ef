package users

import (
	"strings"
	"testing"
)

func TestMatchHost(t *testing.T) {
	for _, tc := range []struct {
		pattern, host string
		want          bool
	}{
		{"%", "10.1.2.3", true},
		{"", "10.1.2.3", true},
		{"localhost", "127.0.0.1", true},
		{"LOCALHOST", "::1", true},
		{"localhost", "10.1.2.3", false},
		{"127.0.0.1", "127.0.0.1", true},
		{"127.0.0.1", "::ffff:127.0.0.1", true},
		{"127.0.0.1", "127.0.0.10", false},
		{"::1", "::1", true},
		{"10.0.0.%", "10.0.0.7", true},
		{"10.0.0.%", "10.0.1.7", false},
		{"10.0.0._", "10.0.0.7", true},
		{"10.0.0._", "10.0.0.17", false},
		{"local%", "127.0.0.1", true},
		{"10.0.0.0/255.255.255.0", "10.0.0.200", true},
		{"10.0.0.0/255.255.255.0", "10.0.1.200", false},
		{"10.0.0.0/bad", "10.0.0.1", false},
		{`10\_0.%`, "10_0.1", true},
		{`10\_0.%`, "1000.1", false},
		{"db.example.com", "10.0.0.1", false},
	} {
		if got := MatchHost(tc.pattern, tc.host); got != tc.want {
			t.Errorf("MatchHost(%q, %q) = %v, want %v", tc.pattern, tc.host, got, tc.want)
		}
	}
}

// The first account that matches is the most specific one, as the server
// picks it: an exact host before a wildcard, a longer prefix first, '%'
// last; another user's accounts never match.
func TestPick(t *testing.T) {
	set := newSet([]Account{
		{User: "app", Host: "%", Refuse: "any"},
		{User: "app", Host: "10.0.%", Refuse: "ten"},
		{User: "app", Host: "10.0.0.%", Refuse: "ten-zero-zero"},
		{User: "app", Host: "localhost", Refuse: "local"},
		{User: "other", Host: "10.0.0.5"},
	})
	for host, want := range map[string]string{
		"10.0.0.5": "ten-zero-zero", "10.0.9.9": "ten", "127.0.0.1": "local", "192.168.1.1": "any",
	} {
		a, ok := set.pick("app", host)
		if !ok || a.Refuse != want {
			t.Errorf("app@%s: %+v %v, want %s", host, a, ok, want)
		}
	}
	if _, ok := set.pick("nobody", "10.0.0.5"); ok {
		t.Error("nobody matched")
	}
}

// A row of mysql.global_priv or mysql.user as an account: its hash, or
// why it cannot log in through keyshard; roles and anonymous accounts are
// left out.
func TestParseAccount(t *testing.T) {
	s := func(v string) *string { return &v }
	const hash = "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19" // PASSWORD('password')
	for _, tc := range []struct {
		row    []*string
		ok     bool
		hash   bool
		refuse string
	}{
		{[]*string{s("app"), s("%"), s("mysql_native_password"), s(hash), s("false"), s("false")}, true, true, ""},
		{[]*string{s("app"), s("%"), s(""), s(hash), s("N"), s("N")}, true, true, ""},
		{[]*string{s("app"), s("%"), s("mysql_native_password"), s(""), nil, nil}, true, false, ""},
		{[]*string{s("app"), s("%"), s("mysql_native_password"), s(hash), s("true"), nil}, true, false, "locked"},
		{[]*string{s("app"), s("%"), s("mysql_native_password"), s(hash), s("Y"), s("N")}, true, false, "locked"},
		{[]*string{s("app"), s("%"), s("ed25519"), s("xyz"), nil, nil}, true, false, "ed25519"},
		{[]*string{s("app"), s("%"), s("unix_socket"), s(""), nil, nil}, true, false, "unix_socket"},
		{[]*string{s("root"), s("localhost"), s("mysql_native_password"), s("invalid"), nil, nil}, true, false, "not a mysql_native_password hash"},
		{[]*string{s("app"), s("%"), s("mysql_native_password"), s("*ZZ70C0C06DEE42FD1618BB99005ADCA2EC9D1E19"), nil, nil}, true, false, "malformed"},
		{[]*string{s("r1"), s(""), s(""), s(""), s("false"), s("true")}, false, false, ""},
		{[]*string{s(""), s("localhost"), s(""), s(""), nil, nil}, false, false, ""},
	} {
		a, ok := parseAccount(tc.row)
		if ok != tc.ok || (len(a.Hash) == 20) != tc.hash || !strings.Contains(a.Refuse, tc.refuse) || (tc.refuse == "") != (a.Refuse == "") {
			t.Errorf("%v: %+v %v", *tc.row[0], a, ok)
		}
	}
}
