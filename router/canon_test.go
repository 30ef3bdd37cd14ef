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

	for _, q := range []string{"prepare s from @q", "execute immediate @q", "execute immediate concat('dele', 'te from t')", "select 1; prepare s from @q"} {
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
		"select `/*!` , \"*/\" /*!50000": "select `/*!` , \"*/\"  ",
	} {
		if got := openExecComments(in); got != want {
			t.Errorf("openExecComments(%q) = %q, want %q", in, got, want)
		}
	}
}
