package router

import "testing"

func TestClassify(t *testing.T) {
	cases := []struct {
		sql   string
		kind  Kind
		flags Flags
	}{
		{"SELECT 1", KindSelect, 0},
		{"  /* hint */ select c from t where id=1", KindSelect, 0},
		{"-- comment\nINSERT INTO t VALUES (1)", KindInsert, 0},
		{"# comment\nupdate t set a=1", KindUpdate, 0},
		{"delete from t", KindDelete, 0},
		{"REPLACE INTO t VALUES (1)", KindReplace, 0},
		{"set names utf8mb4", KindSet, 0},
		{"SET @a = 1", KindSet, FlagUserVar},
		{"SET @@session.sql_mode = ''", KindSet, FlagSysVar},
		{"use db1", KindUse, 0},
		{"BEGIN", KindBegin, 0},
		{"start transaction read only", KindBegin, 0},
		{"START SLAVE", KindOther, 0},
		{"commit", KindCommit, 0},
		{"ROLLBACK", KindRollback, 0},
		{"lock tables t write", KindLockTables, 0},
		{"UNLOCK TABLES", KindUnlockTables, 0},
		{"kill query 5", KindKill, FlagKill},
		{"show tables", KindShow, 0},
		{"create table t (a int)", KindDDL, 0},
		{"CREATE TEMPORARY TABLE t (a int)", KindDDL, FlagTemporary},
		{"drop temporary table t", KindDDL, 0},
		{"select last_insert_id()", KindSelect, FlagSessionFunc},
		{"select @@identity", KindSelect, FlagSessionFunc | FlagSysVar},
		{"select @@session.last_insert_id", KindSelect, FlagSessionFunc | FlagSysVar},
		{"select ROW_COUNT(), found_rows()", KindSelect, FlagSessionFunc},
		{"select connection_id()", KindSelect, FlagSessionFunc},
		{"select sql_calc_found_rows * from t limit 1", KindSelect, FlagCalcFoundRows},
		{"select get_lock('x', 1)", KindSelect, FlagGetLock},
		{"select 'last_insert_id()', \"@a\", `get_lock` from t", KindSelect, 0},
		{"select 'it''s @a' from t", KindSelect, 0},
		{"select 'back\\'slash @a' from t", KindSelect, 0},
		{"select 1; select 2", KindSelect, FlagMulti},
		{"select 1;", KindSelect, 0},
		{"select 1; -- trailing\n", KindSelect, 0},
		{"select 1;  ", KindSelect, 0},
		{"/*!40101 SET NAMES utf8 */", KindSet, 0},
		{"/* only a comment */", KindEmpty, 0},
		{"", KindEmpty, 0},
		{"PREPARE s FROM 'select 1'", KindPrepare, 0},
		{"EXECUTE s USING @a", KindExecute, FlagUserVar},
		{"deallocate prepare s", KindDeallocate, 0},
		{"call p()", KindCall, 0},
		{"with x as (select 1) select * from x", KindSelect, 0},
		{"select @a:=1", KindSelect, FlagUserVar},
		{"select a@b from t", KindSelect, FlagUserVar},
		{"select 1 from t where x = '@@identity'", KindSelect, 0},
		// Reads that must stay on the master; writes are not flagged.
		{"select * from t where id = 1 for update", KindSelect, FlagMasterOnly},
		{"SELECT * FROM t LOCK IN SHARE MODE", KindSelect, FlagMasterOnly},
		{"select nextval(s)", KindSelect, FlagMasterOnly},
		{"select next value for s", KindSelect, FlagMasterOnly},
		{"select previous value for s", KindSelect, FlagMasterOnly},
		{"select setval(s, 10)", KindSelect, FlagMasterOnly},
		{"select release_lock('x')", KindSelect, FlagMasterOnly},
		{"select a into outfile '/tmp/x' from t", KindSelect, FlagMasterOnly},
		{"/*master*/ select * from t", KindSelect, FlagMasterOnly},
		{"/* Master */select 1", KindSelect, FlagMasterOnly},
		{"/* masters */ select 1", KindSelect, 0},
		{"select 'for update', `share` from t", KindSelect, 0},
		{"insert into t select * from u", KindInsert, 0},
		{"/*master*/ insert into t values (1)", KindInsert, FlagMasterOnly},
	}
	for _, c := range cases {
		got := Classify(c.sql)
		if got.Kind != c.kind || got.Flags != c.flags {
			t.Errorf("Classify(%q) = %v/%b, want %v/%b", c.sql, got.Kind, got.Flags, c.kind, c.flags)
		}
	}
}

func TestClassifyStart(t *testing.T) {
	if got := Classify("  /* x */ KILL 5").Start; got != 10 {
		t.Fatalf("Start = %d, want 10", got)
	}
}

func BenchmarkClassifyPointSelect(b *testing.B) {
	q := "SELECT c FROM sbtest1 WHERE id=5012"
	b.ReportAllocs()
	for b.Loop() {
		_ = Classify(q)
	}
}

func FuzzClassify(f *testing.F) {
	for _, s := range []string{"select 1", "/*!40101 set @a=1*/;", "'unterminated", "-- x", "@@", "@`x`"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		info := Classify(s)
		if info.Start < 0 || info.Start > len(s) {
			t.Fatalf("bad start %d", info.Start)
		}
	})
}

func TestReadOnlyAndWrites(t *testing.T) {
	for _, c := range []struct {
		sql           string
		read, written bool
	}{
		{"select * from t where id = 1", true, false},
		{"with x as (select 1) select * from x", true, false},
		{"select * from t for update", false, false},
		{"/*master*/ select 1", false, false},
		{"select last_insert_id()", false, false},
		{"select @a", false, false},
		{"select get_lock('l', 1)", false, false},
		{"select 1; select 2", false, false},
		{"show tables", false, false},
		{"insert into t values (1)", false, true},
		{"update t set a = 1", false, true},
		{"delete from t", false, true},
		{"replace into t values (1)", false, true},
		{"create table t (a int)", false, true},
		{"commit", false, true},
		{"call p()", false, true},
		{"do release_lock('x')", false, true},
		{"begin", false, false},
		{"rollback", false, false},
		{"set names utf8mb4", false, false},
		{"use db", false, false},
	} {
		info := Classify(c.sql)
		if got := ReadOnly(info); got != c.read {
			t.Errorf("ReadOnly(%q) = %v, want %v", c.sql, got, c.read)
		}
		if got := Writes(info); got != c.written {
			t.Errorf("Writes(%q) = %v, want %v", c.sql, got, c.written)
		}
	}
}
