package admin

import (
	"errors"
	"reflect"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		sql    string
		ours   bool
		region string
		vals   []string
		code   uint16 // error code, 0 for none
	}{
		{"admin server(opt,k,v) values('show','proxy','config')", true, "server", []string{"show", "proxy", "config"}, 0},
		{"ADMIN SERVER (OPT, K, V) VALUES ('change', \"log_sql\", 'on');", true, "server", []string{"change", "log_sql", "on"}, 0},
		{"admin node(opt,node,k,v) values('add','node1','slave','127.0.0.1:3307@2')", true, "node", []string{"add", "node1", "slave", "127.0.0.1:3307@2"}, 0},
		{"admin server(opt,k,v) values('add','black_sql','select * from t where a = ''x'' and b = \\'y\\'')", true, "server",
			[]string{"add", "black_sql", "select * from t where a = 'x' and b = 'y'"}, 0},
		{"admin server(opt,k,v) values('change','slow_log_time',50)", true, "server", []string{"change", "slow_log_time", "50"}, 0},
		{"admin help", true, "help", nil, 0},
		{"admin reload", true, "server", []string{"reload", "proxy", "config"}, 0},
		{"admin reload config;", true, "server", []string{"reload", "proxy", "config"}, 0},
		{"show proxy status", true, "server", []string{"show", "proxy", "status"}, 0},
		{"SHOW  BACKENDS ;", true, "server", []string{"show", "node", "config"}, 0},
		{"show shard rules", true, "server", []string{"show", "schema", "config"}, 0},
		{"show proxy blacklist", true, "server", []string{"show", "black_sql", "config"}, 0},
		{"show digests", true, "server", []string{"show", "digests", "total,20"}, 0},
		{"SHOW DIGESTS ORDER BY count LIMIT 5;", true, "server", []string{"show", "digests", "count,5"}, 0},
		{"show digests limit 0", true, "server", []string{"show", "digests", "total,0"}, 0},
		{"admin reset digests", true, "server", []string{"reset", "digests", "all"}, 0},
		{"show digests limit", true, "", nil, mysql.ER_PARSE_ERROR},
		{"show digests order count", true, "", nil, mysql.ER_PARSE_ERROR},
		{"show digests order by 5", true, "", nil, mysql.ER_PARSE_ERROR},
		{"show digests limit count", true, "", nil, mysql.ER_PARSE_ERROR},
		{"show digests limit -1", true, "", nil, mysql.ER_PARSE_ERROR},
		{"admin reset everything", true, "", nil, mysql.ER_PARSE_ERROR},
		// Not ours: the backend answers.
		{"show tables", false, "", nil, 0},
		{"show status like 'proxy'", false, "", nil, 0},
		{"show variables like 'x", false, "", nil, 0},
		// Ours, malformed.
		{"admin", true, "", nil, mysql.ER_PARSE_ERROR},
		{"admin help me", true, "", nil, mysql.ER_PARSE_ERROR},
		{"admin reload everything", true, "", nil, mysql.ER_PARSE_ERROR},
		{"admin server(opt,k,v) values('show','proxy','config'", true, "", nil, mysql.ER_PARSE_ERROR},
		{"admin server(opt,k,v) values('show','proxy','config') extra", true, "", nil, mysql.ER_PARSE_ERROR},
		{"admin server(opt,k,v) ('show','proxy','config')", true, "", nil, mysql.ER_PARSE_ERROR},
		{"admin server(opt,node,k,v) values('show','a','proxy','config')", true, "", nil, mysql.ER_PARSE_ERROR},
		{"admin node(opt,node,k,v) values('up','node1','slave')", true, "", nil, mysql.ER_PARSE_ERROR},
		{"admin server(opt,k,v) values('show',,'config')", true, "", nil, mysql.ER_PARSE_ERROR},
		{"admin server(opt,k,v) values('unterminated)", true, "", nil, mysql.ER_PARSE_ERROR},
		{"admin shard(opt) values('x')", true, "", nil, mysql.ER_PARSE_ERROR},
	} {
		cmd, ours, err := parse(c.sql)
		if ours != c.ours {
			t.Errorf("%s: ours = %v", c.sql, ours)
			continue
		}
		var me *mysql.MyError
		switch {
		case c.code != 0:
			if !errors.As(err, &me) || me.Code != c.code {
				t.Errorf("%s: err %v, want code %d", c.sql, err, c.code)
			}
		case err != nil:
			t.Errorf("%s: %v", c.sql, err)
		case cmd.region != c.region || !reflect.DeepEqual(cmd.vals, c.vals):
			t.Errorf("%s: %+v, want %s %q", c.sql, cmd, c.region, c.vals)
		}
	}
}
