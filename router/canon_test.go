package router

import (
	"errors"
	"testing"
)

// canonForms returns every form Canonical gives for sql in db.
func canonForms(t *testing.T, sql, db string) ([]string, error) {
	t.Helper()
	var out []string
	_, err := NewParser().Canonical(sql, db, func(f string) bool { out = append(out, f); return false })
	return out, err
}

func TestCanonicalEquivalents(t *testing.T) {
	entry, err := canonForms(t, "DELETE FROM t WHERE id = 1", "")
	if err != nil || len(entry) != 2 {
		t.Fatalf("entry forms %q, %v", entry, err)
	}
	key := entry[0]
	t.Logf("key %q", key)
	same := []string{
		"delete from t where id=1",
		"DELETE   FROM t WHERE id = 99",
		"delete from `t` where `id` = 1",
		"delete from app.t where id = 1",
		"delete from `app`.`t` where t.id = 1",
		"delete from t where app.t.id = 1",
		"delete from t where (id = 1)",
		"delete from t where ((id = 1))",
		"delete from t where 1=1 and id = 1",
		"delete from t where id = 1 and 1",
		"delete from t where id = 1 and 'a'='a'",
		"delete from t where (1=1) and (id = 1)",
		"delete from t where 0 or id = 1",
		"delete from t where not 0 and id = 1",
		"/*!40101 delete from t where id = 1 */",
		"/*!delete from t where id = 1*/",
		"/*M!100500 delete from t where id = 1 */",
		"delete /*!from t*/ where id=1",
		"delete /* hi */ from t where id=1 -- x\n",
		"select 1; delete from t where id = 1",
		"prepare s from 'delete from t where id = 1'",
		"execute immediate 'delete from t where id = 1'",
		"select 1; execute immediate 'delete from t where id = 1'",
		"PREPARE s FROM \"DELETE FROM t WHERE id = ?\"",
		"SET STATEMENT max_statement_time=0 FOR DELETE FROM t WHERE id = 1",
		"delete from t where id = 1 and 9007199254740993 <> 9007199254740992",
		"DELETE FROM t WHERE id=1 /*!99999 AND 0 */",
		"select 1 # '\n; delete from t where id = 1",
		"select 1; /* c */ delete from t where id = 1",
	}
	for _, q := range same {
		forms, err := canonForms(t, q, "app")
		if err != nil {
			t.Errorf("%q: %v", q, err)
			continue
		}
		found := false
		for _, f := range forms {
			found = found || f == key
		}
		if !found {
			t.Errorf("%q: forms %q, none is %q", q, forms, key)
		}
	}
	different := []string{
		"delete from t where id = 1 or 1=1",
		"delete from t where id = 1 and 'a'='a '",
		"delete from u where id = 1",
		"delete from t where id > 1",
		"delete from t",
		"select * from t where id = 1",
		"delete from t where id = 1 and x = 2",
		"delete from t where id = 1 and 9007199254740993 = 9007199254740992",
		"select id = 1 and 1 from t",
	}
	for _, q := range different {
		forms, _ := canonForms(t, q, "app")
		for _, f := range forms {
			if f == key {
				t.Errorf("%q matches the entry's form %q", q, key)
			}
		}
	}

	// A qualified entry matches its database only.
	q, _ := canonForms(t, "delete from app.t where id = 1", "")
	for db, want := range map[string]bool{"app": true, "other": false} {
		forms, _ := canonForms(t, "delete from t where id = 5", db)
		if got := forms[0] == q[0]; got != want {
			t.Errorf("in %s: qualified form %q vs entry %q: match %v, want %v", db, forms[0], q[0], got, want)
		}
	}

	for _, q := range []string{"prepare s from @q", "execute immediate @q", "execute immediate concat('dele', 'te from t')", "select 1; prepare s from @q",
		"execute immediate 'dele' 'te from t'", "prepare s from 'dele' 'te from t'", "prepare s from concat('a')", "prepare s from x'41'",
		"begin not atomic delete from t; end", "if 1 then delete from t; end if", "lbl: loop leave lbl; end loop"} {
		if _, err := canonForms(t, q, "app"); !errors.Is(err, ErrUncheckable) {
			t.Errorf("%q: err %v, want ErrUncheckable", q, err)
		}
	}
}

func TestOpenExecComments(t *testing.T) {
	for in, want := range map[string]string{
		"select 1":                       "select 1",
		"select /*!40101 2 */":           "select   2  ",
		"select '/*!x*/' /* c */ 1":      "select '/*!x*/'   1",
		"/*M!100500 a /* b */ c */ d":    "  a   c   d",
		"select 1 # '\n; /*M! x */ # '":  "select 1 # '\n;   x   # '",
		"select `/*!` , \"*/\" /*!50000": "select `/*!` , \"*/\"  ",
	} {
		if got := openExecComments(in, true); got != want {
			t.Errorf("openExecComments(%q, true) = %q, want %q", in, got, want)
		}
	}
}
