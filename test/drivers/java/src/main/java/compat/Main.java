// Driver matrix cases for MySQL Connector/J ("mysql") and MariaDB
// Connector/J ("mariadb"), plain JDBC and through HikariCP. One JSON line
// per case on stdout: {"case": name, "result": ...}; errors are
// {"errno", "sqlstate", "msg"}. Usage: Main mysql|mariadb HOST PORT.
// test/drivers/run.sh runs it straight against MariaDB and through keyshard.
package compat;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.sql.*;
import java.util.*;
import java.util.concurrent.*;

public final class Main {
    static String flavor, host;
    static int port;

    interface Case {
        Object run() throws Exception;
    }

    public static void main(String[] a) throws Exception {
        flavor = a[0];
        host = a[1];
        port = Integer.parseInt(a[2]);
        DriverManager.setLoginTimeout(10);

        run("server_version", () -> {
            try (Connection c = conn("ks_compat", "")) {
                DatabaseMetaData md = c.getMetaData();
                return map("product", md.getDatabaseProductName(), "version", md.getDatabaseProductVersion(),
                        "major", md.getDatabaseMajorVersion(), "select_version", scalar(c, "SELECT VERSION()"));
            }
        });
        run("connect_db", () -> {
            try (Connection c = conn("ks_compat", "")) {
                return map("database", scalar(c, "SELECT DATABASE()"), "catalog", attempt(c::getCatalog),
                        "getAutoCommit", attempt(c::getAutoCommit), "isolation", attempt(c::getTransactionIsolation),
                        "autocommit", scalar(c, "SELECT @@autocommit"));
            }
        });
        run("connect_nodb", () -> {
            try (Connection c = conn("", "")) {
                return map("database", scalar(c, "SELECT DATABASE()"), "catalog", attempt(c::getCatalog));
            }
        });
        run("select_types", () -> {
            try (Connection c = conn("ks_compat", ""); Statement st = c.createStatement()) {
                return rows(st.executeQuery("SELECT * FROM t_types ORDER BY id"), true);
            }
        });
        run("insert_update", () -> {
            Map<String, Object> r = new LinkedHashMap<>();
            // Both drivers send CLIENT_FOUND_ROWS unless useAffectedRows=true.
            try (Connection c = conn("ks_compat", ""); Statement st = c.createStatement()) {
                r.put("insert", st.executeUpdate("INSERT INTO t_rows (v) VALUES ('a'), ('b')", Statement.RETURN_GENERATED_KEYS));
                r.put("keys", rows(st.getGeneratedKeys(), false).get("rows"));
                r.put("update_same_found", st.executeUpdate("UPDATE t_rows SET v = 'a' WHERE id = 1"));
                r.put("update_changed", st.executeUpdate("UPDATE t_rows SET v = 'z' WHERE id = 2"));
                r.put("delete_none", st.executeUpdate("DELETE FROM t_rows WHERE id > 100"));
            }
            try (Connection c = conn("ks_compat", "useAffectedRows=true"); Statement st = c.createStatement()) {
                r.put("update_same_affected", st.executeUpdate("UPDATE t_rows SET v = 'a' WHERE id = 1"));
            }
            return r;
        });
        run("prepared", () -> {
            Map<String, Object> r = new LinkedHashMap<>();
            try (Connection c = conn("ks_compat", "");
                 PreparedStatement ps = c.prepareStatement(
                         "SELECT ? + 1 AS a, CONCAT(?, 'x') AS b, ? IS NULL AS c, d, dt, j FROM t_types WHERE id = ?")) {
                r.put("params", attempt(() -> ps.getParameterMetaData().getParameterCount()));
                ps.setInt(1, 41);
                ps.setString(2, "ab");
                ps.setNull(3, Types.INTEGER);
                ps.setInt(4, 1);
                r.put("first", rows(ps.executeQuery(), true));
                ps.setLong(1, -1);
                ps.setString(2, "é");
                ps.setInt(3, 3);
                ps.setInt(4, 2);
                r.put("second", rows(ps.executeQuery(), false));
                try (PreparedStatement ins = c.prepareStatement("INSERT INTO t_prep (v) VALUES (?)")) {
                    ins.setString(1, "p1");
                    r.put("insert", ins.executeUpdate());
                }
            }
            return r;
        });
        run("batch", () -> {
            Map<String, Object> r = new LinkedHashMap<>();
            try (Connection c = conn("ks_compat", "");
                 PreparedStatement ps = c.prepareStatement("INSERT INTO t_bulk (v) VALUES (?)")) {
                for (String v : new String[] {"bulk1", "bulk2", "bulk3"}) {
                    ps.setString(1, v);
                    ps.addBatch();
                }
                r.put("counts", Arrays.toString(ps.executeBatch()));
                r.put("rows", scalar(c, "SELECT GROUP_CONCAT(v ORDER BY id) FROM t_bulk WHERE v LIKE 'bulk%'"));
            }
            return r;
        });
        run("txn", () -> {
            Map<String, Object> r = new LinkedHashMap<>();
            try (Connection c = conn("ks_compat", ""); Connection other = conn("ks_compat", "")) {
                c.setAutoCommit(false);
                r.put("autocommit", scalar(c, "SELECT @@autocommit"));
                Statement st = c.createStatement();
                st.executeUpdate("INSERT INTO t_txn (v) VALUES ('t1')");
                r.put("in_trans", scalar(c, "SELECT @@in_transaction"));
                r.put("seen_by_other", scalar(other, "SELECT COUNT(*) FROM t_txn"));
                c.rollback();
                st.executeUpdate("INSERT INTO t_txn (v) VALUES ('t2')");
                c.commit();
                r.put("in_trans_after_commit", scalar(c, "SELECT @@in_transaction"));
                r.put("committed", scalar(other, "SELECT GROUP_CONCAT(v ORDER BY id) FROM t_txn"));
                c.setAutoCommit(true);
                r.put("autocommit_back", scalar(c, "SELECT @@autocommit"));
            }
            return r;
        });
        run("call_proc", () -> {
            Map<String, Object> r = new LinkedHashMap<>();
            try (Connection c = conn("ks_compat", ""); CallableStatement cs = c.prepareCall("{call p_compat(?, ?)}")) {
                cs.setInt(1, 20);
                cs.registerOutParameter(2, Types.INTEGER);
                boolean rs = cs.execute();
                r.put("result", rs ? rows(cs.getResultSet(), true) : cs.getUpdateCount());
                r.put("out", cs.getInt(2));
            }
            return r;
        });
        run("multi_stmt", () -> {
            try (Connection c = conn("ks_compat", ""); Statement st = c.createStatement()) {
                return results(st, "SELECT 1 AS a; INSERT INTO t_multi (v) VALUES ('m1'), ('m2'); "
                        + "SELECT COUNT(*) AS c FROM t_multi WHERE v LIKE 'm%'");
            }
        });
        run("multi_stmt_error", () -> {
            try (Connection c = conn("ks_compat", ""); Statement st = c.createStatement()) {
                List<Object> r = results(st, "SELECT 1 AS a; SELECT * FROM no_such_table; SELECT 3");
                r.add(map("after", scalar(c, "SELECT 4")));
                return r;
            }
        });
        run("errors", () -> {
            Map<String, Object> r = new LinkedHashMap<>();
            try (Connection c = conn("ks_compat", ""); Statement st = c.createStatement()) {
                r.put("unknown_table", attempt(() -> st.executeQuery("SELECT * FROM no_such_table")));
                r.put("syntax", attempt(() -> st.execute("SELEC 1")));
                r.put("duplicate", attempt(() -> st.executeUpdate("INSERT INTO t_types (id) VALUES (1)")));
                r.put("prepare_unknown", attempt(() -> {
                    PreparedStatement ps = c.prepareStatement("SELECT * FROM no_such_table WHERE id = ?");
                    ps.setInt(1, 1);
                    return ps.executeQuery();
                }));
                r.put("after", scalar(c, "SELECT 1"));
            }
            return r;
        });
        run("warnings", () -> {
            Map<String, Object> r = new LinkedHashMap<>();
            try (Connection c = conn("ks_compat", ""); Statement st = c.createStatement()) {
                ResultSet rs = st.executeQuery("SELECT CAST('12abc' AS SIGNED) AS v");
                rs.next();
                r.put("value", rs.getString(1));
                r.put("select_warnings", warnings(st.getWarnings()));
                r.put("insert_ignore", st.executeUpdate("INSERT IGNORE INTO t_types (id) VALUES (1)"));
                r.put("insert_warnings", warnings(st.getWarnings()));
            }
            return r;
        });
        if (flavor.equals("mysql")) {
            // MariaDB Connector/J has no change-user call.
            run("change_user", () -> {
                Map<String, Object> r = new LinkedHashMap<>();
                try (Connection c = conn("ks_compat", ""); Statement st = c.createStatement()) {
                    st.execute("SET @x = 5");
                    st.execute("CREATE TEMPORARY TABLE tmp_cu (a INT)");
                    com.mysql.cj.jdbc.JdbcConnection jc = c.unwrap(com.mysql.cj.jdbc.JdbcConnection.class);
                    r.put("change", attempt(() -> { jc.changeUser("ks2", "ks2"); return "ok"; }));
                    r.put("after", attempt(() -> row(c, "SELECT DATABASE(), @x")));
                    r.put("temp_table", attempt(() -> scalar(c, "SELECT COUNT(*) FROM tmp_cu")));
                    r.put("bad_password", attempt(() -> { jc.changeUser("ks2", "wrong"); return "ok"; }));
                    r.put("after_bad", attempt(() -> scalar(c, "SELECT 1")));
                }
                return r;
            });
        }
        run("pool", () -> {
            HikariConfig hc = new HikariConfig();
            hc.setJdbcUrl(url("ks_compat", ""));
            hc.setUsername("ks");
            hc.setPassword("ks");
            hc.setMaximumPoolSize(3);
            hc.setMinimumIdle(3);
            hc.setConnectionTimeout(10000);
            hc.setPoolName("compat");
            try (HikariDataSource ds = new HikariDataSource(hc)) {
                ExecutorService ex = Executors.newFixedThreadPool(3);
                List<Future<Object>> fs = new ArrayList<>();
                for (int i = 0; i < 6; i++) {
                    final int n = i;
                    fs.add(ex.submit(() -> {
                        try (Connection c = ds.getConnection()) {
                            return row(c, "SELECT DATABASE(), @@autocommit, COUNT(*) + " + n + " FROM t_types");
                        }
                    }));
                }
                List<Object> r = new ArrayList<>();
                for (Future<Object> f : fs) {
                    try {
                        r.add(f.get());
                    } catch (ExecutionException e) {
                        r.add(err(e.getCause()));
                    }
                }
                ex.shutdown();
                return r;
            }
        });
        System.exit(0);
    }

    static String url(String db, String extra) {
        String common = "useServerPrepStmts=true&allowMultiQueries=true&connectTimeout=10000&socketTimeout=20000";
        if (flavor.equals("mysql")) {
            common += "&sslMode=DISABLED";
        } else {
            common += "&useBulkStmts=true";
        }
        if (!extra.isEmpty()) common += "&" + extra;
        return "jdbc:" + flavor + "://" + host + ":" + port + "/" + db + "?" + common;
    }

    static Connection conn(String db, String extra) throws SQLException {
        return DriverManager.getConnection(url(db, extra), "ks", "ks");
    }

    static void run(String name, Case c) {
        Object r;
        try {
            r = c.run();
        } catch (Throwable e) {
            r = err(e);
        }
        System.out.println("{\"case\":" + json(name) + ",\"result\":" + json(r) + "}");
        System.out.flush();
    }

    static Object attempt(Case c) {
        try {
            Object v = c.run();
            return v instanceof ResultSet ? rows((ResultSet) v, false) : v;
        } catch (Throwable e) {
            return err(e);
        }
    }

    static Map<String, Object> err(Throwable e) {
        if (e instanceof SQLException s) {
            return map("errno", s.getErrorCode(), "sqlstate", s.getSQLState(), "msg", firstLine(s.getMessage()));
        }
        Throwable cause = e.getCause();
        return map("exception", e.getClass().getName(), "msg", firstLine(e.getMessage()),
                "cause", cause instanceof SQLException ? err(cause) : (cause == null ? null : cause.toString()));
    }

    static String firstLine(String s) {
        if (s == null) return null;
        int i = s.indexOf('\n');
        return i < 0 ? s : s.substring(0, i);
    }

    static Object scalar(Connection c, String sql) throws SQLException {
        try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery(sql)) {
            return rs.next() ? value(rs.getObject(1)) : "(no row)";
        }
    }

    static List<Object> row(Connection c, String sql) throws SQLException {
        try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery(sql)) {
            List<Object> r = new ArrayList<>();
            rs.next();
            for (int i = 1; i <= rs.getMetaData().getColumnCount(); i++) r.add(value(rs.getObject(i)));
            return r;
        }
    }

    // rows: column metadata (when meta) and every row, values as "Class:value".
    static Map<String, Object> rows(ResultSet rs, boolean meta) throws SQLException {
        ResultSetMetaData md = rs.getMetaData();
        Map<String, Object> r = new LinkedHashMap<>();
        if (meta) {
            List<Object> cols = new ArrayList<>();
            for (int i = 1; i <= md.getColumnCount(); i++) {
                cols.add(List.of(md.getColumnLabel(i), md.getColumnTypeName(i), md.getColumnClassName(i),
                        md.getPrecision(i), md.getScale(i), md.isNullable(i)));
            }
            r.put("columns", cols);
        }
        List<Object> out = new ArrayList<>();
        while (rs.next()) {
            List<Object> row = new ArrayList<>();
            for (int i = 1; i <= md.getColumnCount(); i++) row.add(value(rs.getObject(i)));
            out.add(row);
        }
        rs.close();
        r.put("rows", out);
        return r;
    }

    static Object value(Object v) {
        if (v == null) return null;
        if (v instanceof byte[] b) {
            StringBuilder sb = new StringBuilder("byte[]:");
            for (byte x : b) sb.append(String.format("%02x", x));
            return sb.toString();
        }
        return v.getClass().getSimpleName() + ":" + v;
    }

    // results walks a multi-statement answer: result sets and update counts,
    // and the error that ends it.
    static List<Object> results(Statement st, String sql) {
        List<Object> r = new ArrayList<>();
        try {
            boolean isRs = st.execute(sql);
            while (true) {
                if (isRs) {
                    r.add(rows(st.getResultSet(), false));
                } else {
                    int n = st.getUpdateCount();
                    if (n == -1) break;
                    r.add(map("update_count", n));
                }
                isRs = st.getMoreResults();
            }
        } catch (Throwable e) {
            r.add(err(e));
        }
        return r;
    }

    static List<Object> warnings(SQLWarning w) {
        List<Object> r = new ArrayList<>();
        for (; w != null; w = w.getNextWarning()) r.add(List.of(w.getErrorCode(), String.valueOf(w.getSQLState()), String.valueOf(w.getMessage())));
        return r;
    }

    static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        return m;
    }

    static String json(Object o) {
        if (o == null) return "null";
        if (o instanceof Number || o instanceof Boolean) return o.toString();
        if (o instanceof Map<?, ?> m) {
            StringJoiner j = new StringJoiner(",", "{", "}");
            m.forEach((k, v) -> j.add(json(String.valueOf(k)) + ":" + json(v)));
            return j.toString();
        }
        if (o instanceof Collection<?> c) {
            StringJoiner j = new StringJoiner(",", "[", "]");
            c.forEach(v -> j.add(json(v)));
            return j.toString();
        }
        StringBuilder sb = new StringBuilder("\"");
        for (char ch : o.toString().toCharArray()) {
            switch (ch) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                default -> {
                    if (ch < 0x20) sb.append(String.format("\\u%04x", (int) ch));
                    else sb.append(ch);
                }
            }
        }
        return sb.append('"').toString();
    }
}
