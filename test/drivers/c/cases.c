/*
 * Driver matrix cases for MariaDB Connector/C (libmariadb): text protocol,
 * prepared statements with bulk execution (STMT_ATTR_ARRAY_SIZE), CALL with
 * an OUT parameter, a read-only cursor, multi-results, mysql_change_user
 * and warning counts. One JSON line per case on stdout:
 * {"case": name, "result": ...}; errors are {"errno", "sqlstate", "msg"}.
 * Usage: cases HOST PORT (test/drivers/run.sh builds and runs it).
 */
#include <mysql.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *host;
static unsigned port;

/* ---- a growing JSON buffer for the current case ---- */
static char *buf;
static size_t len, cap;

static void put(const char *fmt, ...) {
	va_list ap;
	for (;;) {
		va_start(ap, fmt);
		int n = vsnprintf(buf + len, cap - len, fmt, ap);
		va_end(ap);
		if (n >= 0 && (size_t)n < cap - len) {
			len += n;
			return;
		}
		cap = cap * 2 + (n > 0 ? n : 0) + 64;
		buf = realloc(buf, cap);
	}
}

static void str(const char *s, size_t n) { /* a JSON string, or null */
	if (!s) {
		put("null");
		return;
	}
	put("\"");
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = s[i];
		if (ch == '"' || ch == '\\')
			put("\\%c", ch);
		else if (ch < 0x20)
			put("\\u%04x", ch);
		else
			put("%c", ch);
	}
	put("\"");
}
static void cstr(const char *s) { str(s, s ? strlen(s) : 0); }
/* val writes a column value: binary strings (charset 63) as "hex:..." */
static void val(const char *s, size_t n, const MYSQL_FIELD *f) {
	if (s && f && f->charsetnr == 63 &&
	    (f->type == MYSQL_TYPE_VAR_STRING || f->type == MYSQL_TYPE_STRING || f->type == MYSQL_TYPE_BLOB)) {
		put("\"hex:");
		for (size_t i = 0; i < n; i++) put("%02x", (unsigned char)s[i]);
		put("\"");
		return;
	}
	str(s, n);
}
static void key(const char *k) { /* ,"k": (no comma after { or [) */
	if (len && buf[len - 1] != '{' && buf[len - 1] != '[') put(",");
	put("\"%s\":", k);
}
static void comma(void) {
	if (len && buf[len - 1] != '{' && buf[len - 1] != '[') put(",");
}
static void begin(void) { len = 0; put("{"); }
static void end(const char *name) {
	put("}");
	printf("{\"case\":\"%s\",\"result\":%.*s}\n", name, (int)len, buf);
	fflush(stdout);
}

static void merr(MYSQL *m) {
	put("{\"errno\":%u,\"sqlstate\":", mysql_errno(m));
	cstr(mysql_sqlstate(m));
	put(",\"msg\":");
	cstr(mysql_error(m));
	put("}");
}
static void serr(MYSQL_STMT *s) {
	put("{\"errno\":%u,\"sqlstate\":", mysql_stmt_errno(s));
	cstr(mysql_stmt_sqlstate(s));
	put(",\"msg\":");
	cstr(mysql_stmt_error(s));
	put("}");
}

static unsigned status(MYSQL *m) {
	unsigned st = 0;
	mariadb_get_infov(m, MARIADB_CONNECTION_SERVER_STATUS, &st);
	return st;
}
static void flags(MYSQL *m) { /* the status bits a client acts on */
	unsigned st = status(m);
	put("{\"in_trans\":%d,\"autocommit\":%d}", !!(st & SERVER_STATUS_IN_TRANS), !!(st & SERVER_STATUS_AUTOCOMMIT));
}

/* conn opens a connection as user/pass; on failure it records the error under
 * "connect" and returns NULL. */
static MYSQL *conn_as(const char *user, const char *pass, const char *db, unsigned long cflags) {
	MYSQL *m = mysql_init(NULL);
	unsigned t = 10, rw = 20;
	mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &t);
	mysql_options(m, MYSQL_OPT_READ_TIMEOUT, &rw);
	mysql_options(m, MYSQL_OPT_WRITE_TIMEOUT, &rw);
	mysql_options(m, MYSQL_SET_CHARSET_NAME, "utf8mb4");
	if (!mysql_real_connect(m, host, user, pass, db, port, NULL, cflags | CLIENT_MULTI_STATEMENTS)) {
		key("connect");
		merr(m);
		mysql_close(m);
		return NULL;
	}
	return m;
}
static MYSQL *conn(const char *db, unsigned long cflags) { return conn_as("ks", "ks", db, cflags); }

/* answer writes the current result of m: a result set (with field metadata
 * when meta), or the OK packet's counts. */
static void answer(MYSQL *m, int meta) {
	MYSQL_RES *res = mysql_store_result(m);
	if (!res) {
		if (mysql_field_count(m) == 0) {
			put("{\"affected\":%lld,\"insert_id\":%llu,\"warnings\":%u,\"info\":", (long long)mysql_affected_rows(m),
			    (unsigned long long)mysql_insert_id(m), mysql_warning_count(m));
			cstr(mysql_info(m));
			put("}");
		} else
			merr(m);
		return;
	}
	unsigned nf = mysql_num_fields(res);
	MYSQL_FIELD *f = mysql_fetch_fields(res);
	put("{");
	if (meta) {
		key("fields");
		put("[");
		for (unsigned i = 0; i < nf; i++) {
			MARIADB_CONST_STRING fmt = {0, 0};
			mariadb_field_attr(&fmt, &f[i], MARIADB_FIELD_ATTR_FORMAT_NAME);
			comma();
			put("[");
			cstr(f[i].name);
			put(",%d,%lu,%u,%u,%u,", f[i].type, f[i].length, f[i].flags, f[i].decimals, f[i].charsetnr);
			str(fmt.str, fmt.length);
			put("]");
		}
		put("]");
	}
	key("rows");
	put("[");
	MYSQL_ROW row;
	while ((row = mysql_fetch_row(res))) {
		unsigned long *l = mysql_fetch_lengths(res);
		comma();
		put("[");
		for (unsigned i = 0; i < nf; i++) {
			if (i) put(",");
			val(row[i], l[i], &f[i]);
		}
		put("]");
	}
	put("]");
	if (mysql_errno(m)) {
		key("fetch_error");
		merr(m);
	}
	key("warnings");
	put("%u}", mysql_warning_count(m));
	mysql_free_result(res);
}

/* query runs sql (possibly several statements) and writes every answer: one
 * value, or an array when there are several; an error ends the list. */
static void query(MYSQL *m, const char *sql, int meta) {
	if (mysql_real_query(m, sql, strlen(sql))) {
		merr(m);
		return;
	}
	size_t start = len;
	int n = 0, rc;
	put("[");
	do {
		comma();
		answer(m, meta);
		n++;
		rc = mysql_next_result(m);
		if (rc > 0) {
			comma();
			merr(m);
			n++;
		}
	} while (rc == 0);
	put("]");
	if (n == 1) { /* unwrap a single answer */
		memmove(buf + start, buf + start + 1, len - start - 2);
		len -= 2;
	}
}
static void kq(const char *k, MYSQL *m, const char *sql) {
	key(k);
	query(m, sql, 0);
}

/* ---- prepared statements: every parameter and result column as a string ---- */
#define MAXCOL 16
typedef struct {
	MYSQL_BIND b[MAXCOL];
	char data[MAXCOL][256];
	unsigned long l[MAXCOL];
	my_bool null[MAXCOL], error[MAXCOL];
} binds;

/* stmt_rows writes the current result of s (fields, rows) or its counts. */
static void stmt_rows(MYSQL_STMT *s, int meta) {
	unsigned nf = mysql_stmt_field_count(s);
	if (nf == 0) {
		put("{\"affected\":%lld,\"insert_id\":%llu}", (long long)mysql_stmt_affected_rows(s),
		    (unsigned long long)mysql_stmt_insert_id(s));
		return;
	}
	static binds r;
	memset(&r, 0, sizeof r);
	MYSQL_RES *md = mysql_stmt_result_metadata(s);
	MYSQL_FIELD *f = md ? mysql_fetch_fields(md) : NULL;
	put("{");
	if (meta && f) {
		key("fields");
		put("[");
		for (unsigned i = 0; i < nf; i++) {
			comma();
			put("[");
			cstr(f[i].name);
			put(",%d,%u,%u]", f[i].type, f[i].flags, f[i].decimals);
		}
		put("]");
	}
	for (unsigned i = 0; i < nf && i < MAXCOL; i++) {
		r.b[i].buffer_type = MYSQL_TYPE_STRING;
		r.b[i].buffer = r.data[i];
		r.b[i].buffer_length = sizeof r.data[i];
		r.b[i].length = &r.l[i];
		r.b[i].is_null = &r.null[i];
		r.b[i].error = &r.error[i];
	}
	key("rows");
	if (mysql_stmt_bind_result(s, r.b)) {
		serr(s);
		put("}");
		if (md) mysql_free_result(md);
		return;
	}
	put("[");
	int rc;
	while ((rc = mysql_stmt_fetch(s)) == 0 || rc == MYSQL_DATA_TRUNCATED) {
		comma();
		put("[");
		for (unsigned i = 0; i < nf; i++) {
			if (i) put(",");
			if (r.null[i])
				put("null");
			else
				val(r.data[i], r.l[i], f ? &f[i] : NULL);
		}
		put("]");
	}
	put("]");
	if (rc == 1) {
		key("fetch_error");
		serr(s);
	}
	put("}");
	if (md) mysql_free_result(md);
}

static MYSQL_STMT *prepare(MYSQL *m, const char *sql) {
	MYSQL_STMT *s = mysql_stmt_init(m);
	if (mysql_stmt_prepare(s, sql, strlen(sql))) {
		serr(s);
		mysql_stmt_close(s);
		return NULL;
	}
	return s;
}

static void bind_int(MYSQL_BIND *b, int *v) {
	memset(b, 0, sizeof *b);
	b->buffer_type = MYSQL_TYPE_LONG;
	b->buffer = v;
}
static void bind_str(MYSQL_BIND *b, const char *v, unsigned long *l) {
	memset(b, 0, sizeof *b);
	b->buffer_type = MYSQL_TYPE_STRING;
	b->buffer = (char *)v;
	*l = strlen(v);
	b->length = l;
}

/* ---- cases ---- */
static void case_server_version(void) {
	begin();
	MYSQL *m = conn("ks_compat", 0);
	if (m) {
		key("greeting");
		cstr(mysql_get_server_info(m));
		key("version");
		put("%lu", mysql_get_server_version(m));
		key("is_mariadb");
		put("%d", mariadb_connection(m));
		kq("select_version", m, "SELECT VERSION()");
		mysql_close(m);
	}
	end("server_version");
}

static void case_connect_db(void) {
	begin();
	MYSQL *m = conn("ks_compat", 0);
	if (m) {
		kq("select", m, "SELECT DATABASE(), @@autocommit");
		key("status");
		flags(m);
		mysql_close(m);
	}
	end("connect_db");
}

static void case_connect_nodb(void) {
	begin();
	MYSQL *m = conn(NULL, 0);
	if (m) {
		kq("select", m, "SELECT DATABASE()");
		mysql_close(m);
	}
	end("connect_nodb");
}

static void case_select_types(void) {
	begin();
	MYSQL *m = conn("ks_compat", 0);
	if (m) {
		key("text");
		query(m, "SELECT * FROM t_types ORDER BY id", 1);
		key("binary");
		MYSQL_STMT *s = prepare(m, "SELECT * FROM t_types ORDER BY id");
		if (s) {
			if (mysql_stmt_execute(s) || mysql_stmt_store_result(s))
				serr(s);
			else
				stmt_rows(s, 1);
			mysql_stmt_close(s);
		}
		mysql_close(m);
	}
	end("select_types");
}

static void case_insert_update(void) {
	begin();
	MYSQL *m = conn("ks_compat", CLIENT_FOUND_ROWS);
	if (m) {
		kq("insert", m, "INSERT INTO t_rows (v) VALUES ('a'), ('b')");
		kq("update_same_found", m, "UPDATE t_rows SET v = 'a' WHERE id = 1");
		kq("update_changed", m, "UPDATE t_rows SET v = 'z' WHERE id = 2");
		kq("delete_none", m, "DELETE FROM t_rows WHERE id > 100");
		mysql_close(m);
	}
	if ((m = conn("ks_compat", 0))) {
		kq("update_same_affected", m, "UPDATE t_rows SET v = 'a' WHERE id = 1");
		mysql_close(m);
	}
	end("insert_update");
}

static void case_prepared(void) {
	begin();
	MYSQL *m = conn("ks_compat", CLIENT_FOUND_ROWS);
	if (!m) goto out;
	key("first");
	MYSQL_STMT *s = prepare(m, "SELECT ? + 1 AS a, CONCAT(?, 'x') AS b, ? IS NULL AS c, d, dt, j FROM t_types WHERE id = ?");
	if (s) {
		MYSQL_BIND p[4];
		int a = 41, id = 1;
		unsigned long sl;
		my_bool isnull = 1;
		bind_int(&p[0], &a);
		bind_str(&p[1], "ab", &sl);
		memset(&p[2], 0, sizeof p[2]);
		p[2].buffer_type = MYSQL_TYPE_NULL;
		p[2].is_null = &isnull;
		bind_int(&p[3], &id);
		if (mysql_stmt_bind_param(s, p) || mysql_stmt_execute(s))
			serr(s);
		else
			stmt_rows(s, 1);
		key("second");
		a = -1, id = 2;
		bind_str(&p[1], "é", &sl);
		if (mysql_stmt_bind_param(s, p) || mysql_stmt_execute(s))
			serr(s);
		else
			stmt_rows(s, 0);
		key("params");
		put("%lu", mysql_stmt_param_count(s));
		mysql_stmt_close(s);
	}
	key("insert");
	if ((s = prepare(m, "INSERT INTO t_prep (v) VALUES (?)"))) {
		MYSQL_BIND p[1];
		unsigned long sl;
		bind_str(&p[0], "p1", &sl);
		if (mysql_stmt_bind_param(s, p) || mysql_stmt_execute(s))
			serr(s);
		else
			stmt_rows(s, 0);
		mysql_stmt_close(s);
	}
	mysql_close(m);
out:
	end("prepared");
}

static void case_bulk(void) {
	begin();
	MYSQL *m = conn("ks_compat", 0);
	if (!m) goto out;
	key("execute");
	MYSQL_STMT *s = prepare(m, "INSERT INTO t_bulk (v) VALUES (?)");
	if (s) {
		const char *vals[] = {"bulk1", "bulk2", "bulk3"};
		unsigned long lens[] = {5, 5, 5};
		unsigned int size = 3;
		MYSQL_BIND p[1];
		memset(p, 0, sizeof p);
		p[0].buffer_type = MYSQL_TYPE_STRING;
		p[0].buffer = (void *)vals;
		p[0].length = lens;
		if (mysql_stmt_attr_set(s, STMT_ATTR_ARRAY_SIZE, &size) || mysql_stmt_bind_param(s, p) ||
		    mysql_stmt_execute(s))
			serr(s);
		else
			stmt_rows(s, 0);
		mysql_stmt_close(s);
	}
	kq("rows", m, "SELECT GROUP_CONCAT(v ORDER BY id) FROM t_bulk WHERE v LIKE 'bulk%'");
	mysql_close(m);
out:
	end("bulk");
}

static void case_cursor(void) {
	begin();
	MYSQL *m = conn("ks_compat", 0);
	if (!m) goto out;
	key("fetch");
	MYSQL_STMT *s = prepare(m, "SELECT id, s, dt FROM t_types ORDER BY id");
	if (s) {
		unsigned long type = CURSOR_TYPE_READ_ONLY, prefetch = 1;
		if (mysql_stmt_attr_set(s, STMT_ATTR_CURSOR_TYPE, &type) ||
		    mysql_stmt_attr_set(s, STMT_ATTR_PREFETCH_ROWS, &prefetch) || mysql_stmt_execute(s)) {
			serr(s);
		} else {
			unsigned st = status(m);
			stmt_rows(s, 0);
			key("cursor_exists");
			put("%d", !!(st & SERVER_STATUS_CURSOR_EXISTS));
		}
		/* a second execution of the same statement reopens the cursor */
		key("again");
		if (mysql_stmt_execute(s))
			serr(s);
		else
			stmt_rows(s, 0);
		mysql_stmt_close(s);
	}
	kq("after", m, "SELECT 1");
	mysql_close(m);
out:
	end("cursor");
}

static void case_txn(void) {
	begin();
	MYSQL *m = conn("ks_compat", 0), *other = conn("ks_compat", 0);
	if (!m || !other) goto out;
	key("autocommit_off");
	put("%d", mysql_autocommit(m, 0));
	key("status_off");
	flags(m);
	kq("insert", m, "INSERT INTO t_txn (v) VALUES ('t1')");
	key("status_insert");
	flags(m);
	kq("seen_by_other", other, "SELECT COUNT(*) FROM t_txn");
	key("rollback");
	put("%d", mysql_rollback(m));
	kq("insert2", m, "INSERT INTO t_txn (v) VALUES ('t2')");
	key("commit");
	put("%d", mysql_commit(m));
	key("status_commit");
	flags(m);
	kq("committed", other, "SELECT GROUP_CONCAT(v ORDER BY id) FROM t_txn");
	mysql_autocommit(m, 1);
	key("status_on");
	flags(m);
out:
	if (m) mysql_close(m);
	if (other) mysql_close(other);
	end("txn");
}

static void case_call_proc(void) {
	begin();
	MYSQL *m = conn("ks_compat", 0);
	if (!m) goto out;
	key("prepared");
	MYSQL_STMT *s = prepare(m, "CALL p_compat(?, ?)");
	if (s) {
		MYSQL_BIND p[2];
		int a = 20, b = 0;
		bind_int(&p[0], &a);
		bind_int(&p[1], &b);
		if (mysql_stmt_bind_param(s, p) || mysql_stmt_execute(s)) {
			serr(s);
		} else {
			put("[");
			int rc;
			do {
				comma();
				put("{\"out_params\":%d,\"result\":", !!(status(m) & SERVER_PS_OUT_PARAMS));
				stmt_rows(s, 0);
				put("}");
				rc = mysql_stmt_next_result(s);
				if (rc > 0) {
					comma();
					serr(s);
				}
			} while (rc == 0);
			put("]");
		}
		mysql_stmt_close(s);
	}
	kq("text", m, "CALL p_compat(20, @b)");
	kq("out_var", m, "SELECT @b");
	mysql_close(m);
out:
	end("call_proc");
}

static void case_multi_stmt(void) {
	begin();
	MYSQL *m = conn("ks_compat", 0);
	if (m) {
		kq("results", m,
		   "SELECT 1 AS a; INSERT INTO t_multi (v) VALUES ('m1'), ('m2'); SELECT COUNT(*) AS c FROM t_multi WHERE v LIKE 'm%'");
		mysql_close(m);
	}
	end("multi_stmt");
}

static void case_multi_stmt_error(void) {
	begin();
	MYSQL *m = conn("ks_compat", 0);
	if (m) {
		kq("batch", m, "SELECT 1 AS a; SELECT * FROM no_such_table; SELECT 3");
		kq("after", m, "SELECT 4");
		mysql_close(m);
	}
	end("multi_stmt_error");
}

static void case_errors(void) {
	begin();
	MYSQL *m = conn("ks_compat", 0);
	if (m) {
		kq("unknown_table", m, "SELECT * FROM no_such_table");
		kq("syntax", m, "SELEC 1");
		kq("duplicate", m, "INSERT INTO t_types (id) VALUES (1)");
		key("prepare_unknown");
		MYSQL_STMT *s = prepare(m, "SELECT * FROM no_such_table WHERE id = ?");
		if (s) {
			put("\"prepared\"");
			mysql_stmt_close(s);
		}
		kq("after", m, "SELECT 1");
		mysql_close(m);
	}
	end("errors");
}

static void case_warnings(void) {
	begin();
	MYSQL *m = conn("ks_compat", 0);
	if (m) {
		kq("select", m, "SELECT CAST('12abc' AS SIGNED) AS v");
		kq("select_warnings", m, "SHOW WARNINGS");
		kq("insert_ignore", m, "INSERT IGNORE INTO t_types (id) VALUES (1)");
		kq("insert_warnings", m, "SHOW WARNINGS");
		mysql_close(m);
	}
	end("warnings");
}

static void case_change_user(void) {
	begin();
	MYSQL *m = conn("ks_compat", 0);
	if (!m) goto out;
	if (mysql_query(m, "SET @x = 5") || mysql_query(m, "CREATE TEMPORARY TABLE tmp_cu (a INT)")) {
		key("setup");
		merr(m);
		goto close;
	}
	key("change");
	if (mysql_change_user(m, "ks2", "ks2", "ks_compat"))
		merr(m);
	else
		put("\"ok\"");
	kq("after", m, "SELECT DATABASE(), @x");
	kq("temp_table", m, "SELECT COUNT(*) FROM tmp_cu");
	key("back_nodb");
	if (mysql_change_user(m, "ks", "ks", NULL))
		merr(m);
	else
		query(m, "SELECT DATABASE()", 0);
	key("bad_password");
	if (mysql_change_user(m, "ks2", "wrong", NULL))
		merr(m);
	else
		put("\"ok\"");
	kq("after_bad", m, "SELECT 1");
close:
	mysql_close(m);
out:
	end("change_user");
}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: %s HOST PORT\n", argv[0]);
		return 2;
	}
	host = argv[1];
	port = (unsigned)atoi(argv[2]);
	cap = 4096;
	buf = malloc(cap);
	mysql_library_init(0, NULL, NULL);
	case_server_version();
	case_connect_db();
	case_connect_nodb();
	case_select_types();
	case_insert_update();
	case_prepared();
	case_bulk();
	case_cursor();
	case_txn();
	case_call_proc();
	case_multi_stmt();
	case_multi_stmt_error();
	case_errors();
	case_warnings();
	case_change_user();
	mysql_library_end();
	return 0;
}
