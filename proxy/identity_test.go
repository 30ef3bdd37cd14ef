package proxy

import "testing"

// The greeting's identity for each flavor: MariaDB keeps its 5.5.5- prefix
// and -MariaDB, MySQL its bare version; the distribution suffix becomes
// -keyshard.
func TestGreetingIdentity(t *testing.T) {
	for _, c := range []struct{ backend, greeting, family string }{
		{"5.5.5-10.11.19-MariaDB-0+deb12u1-log", "5.5.5-10.11.19-MariaDB-keyshard", "MariaDB 10.11"},
		{"11.4.3-MariaDB", "11.4.3-MariaDB-keyshard", "MariaDB 11.4"},
		{"8.0.36-0ubuntu0.22.04.1", "8.0.36-keyshard", "MySQL 8.0"},
		{"8.4.2", "8.4.2-keyshard", "MySQL 8.4"},
		{"5.7.44-log", "5.7.44-keyshard", "MySQL 5.7"},
	} {
		if got := greetingVersion(c.backend); got != c.greeting {
			t.Errorf("greetingVersion(%q) = %q, want %q", c.backend, got, c.greeting)
		}
		if got := family(c.backend); got != c.family {
			t.Errorf("family(%q) = %q, want %q", c.backend, got, c.family)
		}
	}
}
