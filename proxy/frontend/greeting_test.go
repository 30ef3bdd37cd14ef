package frontend

import (
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// A MySQL identity greets with CLIENT_MYSQL (as MySQL), a MariaDB one
// without (as MariaDB); CLIENT_SSL only with TLS.
func TestGreetingCaps(t *testing.T) {
	if caps := greetingCaps(Greeting{Version: "8.0.36-keyshard"}, false); caps&mysql.CLIENT_LONG_PASSWORD == 0 || caps&mysql.CLIENT_SSL != 0 {
		t.Errorf("a MySQL identity without TLS greets with caps %#x", caps)
	}
	if caps := greetingCaps(Greeting{Version: "5.5.5-10.11.19-MariaDB-keyshard", MariaDB: true}, true); caps&mysql.CLIENT_LONG_PASSWORD != 0 || caps&mysql.CLIENT_SSL == 0 {
		t.Errorf("a MariaDB identity with TLS greets with caps %#x", caps)
	}
}
