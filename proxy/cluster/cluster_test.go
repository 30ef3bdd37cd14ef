package cluster

import (
	"slices"
	"testing"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		in        string
		endpoints []string
		prefix    string
		user, pw  string
		tls       bool
		str       string
	}{
		{"etcd://127.0.0.1:2379/keyshard", []string{"127.0.0.1:2379"}, "/keyshard", "", "", false, "etcd://127.0.0.1:2379/keyshard"},
		{"etcd://a:1,b:2,c/x/y/", []string{"a:1", "b:2", "c:2379"}, "/x/y", "", "", false, "etcd://a:1,b:2,c:2379/x/y"},
		{"etcd://h:1", []string{"h:1"}, "/keyshard", "", "", false, "etcd://h:1/keyshard"},
		{"etcds://ks:s3cret@h:1/p", []string{"h:1"}, "/p", "ks", "s3cret", true, "etcds://ks@h:1/p"},
	} {
		u, err := ParseURL(c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if !slices.Equal(u.Endpoints, c.endpoints) || u.Prefix != c.prefix || u.User != c.user || u.Password != c.pw || u.TLS != c.tls {
			t.Errorf("%s: %+v", c.in, u)
		}
		if u.String() != c.str {
			t.Errorf("%s: String() %q, want %q (never the password)", c.in, u.String(), c.str)
		}
		if !IsURL(c.in) {
			t.Errorf("IsURL(%q) false", c.in)
		}
	}
	for _, bad := range []string{"etcd:///p", "etcd://", "http://h:1/p", "etc/ks.yaml"} {
		if _, err := ParseURL(bad); err == nil {
			t.Errorf("ParseURL(%q) took it", bad)
		}
	}
	if IsURL("etc/ks.yaml") {
		t.Error("a file is not an etcd URL")
	}
}
