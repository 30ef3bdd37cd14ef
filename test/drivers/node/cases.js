// Driver matrix cases for node-mysql2 (promise API). One JSON line per case
// on stdout: {"case": name, "result": ...}; errors are {errno, sqlstate, msg}.
// Usage: node cases.js HOST PORT (test/drivers/run.sh sets NODE_PATH).
'use strict';
const mysql = require('mysql2/promise');

const [host, port] = [process.argv[2], Number(process.argv[3])];
const base = { host, port, user: 'ks', password: 'ks', connectTimeout: 10000, multipleStatements: true };
const connect = (opts = {}) => mysql.createConnection({ ...base, database: 'ks_compat', ...opts });

const err = (e) => (e && e.errno !== undefined
  ? { errno: e.errno, sqlstate: e.sqlState, msg: e.sqlMessage || e.message }
  : { exception: e && e.code ? e.code : String(e), msg: e && e.message });
const attempt = async (f) => { try { return await f(); } catch (e) { return err(e); } };
const value = (v) => {
  if (v === null || v === undefined) return v === null ? null : 'undefined';
  if (Buffer.isBuffer(v)) return `Buffer:${v.toString('hex')}`;
  if (v instanceof Date) return `Date:${isNaN(v) ? 'Invalid' : v.toISOString()}`;
  if (typeof v === 'object') return `${v.constructor.name}:${JSON.stringify(v)}`;
  return `${typeof v}:${v}`;
};
const fieldMeta = (f) => [f.name, f.columnType, f.columnLength, f.flags, f.decimals, f.characterSet,
  f.extendedFormat || f.extendedTypeName || null];
// header keeps what an OK packet tells the client.
const header = (h) => ({
  affectedRows: h.affectedRows, insertId: h.insertId, info: h.info,
  serverStatus: h.serverStatus, warningStatus: h.warningStatus, changedRows: h.changedRows,
});
// result normalizes one answer of query/execute: rows (+ fields) or an OK header.
const result = (rows, fields, meta = false) => {
  if (!Array.isArray(rows)) return header(rows);
  const r = { rows: rows.map((row) => (Array.isArray(row) ? row.map(value) : Object.values(row).map(value))) };
  if (meta && fields) r.fields = fields.map(fieldMeta);
  return r;
};
// results normalizes a multi-result answer (multi-statement, CALL).
const results = ([rows, fields]) => (Array.isArray(rows) && rows.length && (Array.isArray(rows[0]) || rows[0].constructor.name === 'ResultSetHeader')
  ? rows.map((r, i) => result(r, fields && fields[i]))
  : [result(rows, fields)]);
const scalar = async (c, sql) => value(Object.values((await c.query(sql))[0][0])[0]);

const cases = {
  async server_version() {
    const c = await connect();
    try {
      return {
        greeting: c.connection._handshakePacket.serverVersion,
        is_mariadb: c.connection._isMariaDB, // mysql2 asks MariaDB for extended column metadata
        select_version: await scalar(c, 'SELECT VERSION()'),
      };
    } finally { await c.end(); }
  },
  async connect_db() {
    const c = await connect();
    try {
      const [rows] = await c.query('SELECT DATABASE() AS db, @@autocommit AS ac');
      return { database: rows[0].db, autocommit: rows[0].ac };
    } finally { await c.end(); }
  },
  async connect_nodb() {
    const c = await connect({ database: undefined });
    try { return { database: await scalar(c, 'SELECT DATABASE()') }; } finally { await c.end(); }
  },
  async select_types() {
    const c = await connect();
    try { return result(...(await c.query('SELECT * FROM t_types ORDER BY id')), true); } finally { await c.end(); }
  },
  async insert_update() {
    const r = {};
    const c = await connect(); // mysql2 sends CLIENT_FOUND_ROWS by default
    try {
      r.insert = header((await c.query("INSERT INTO t_rows (v) VALUES ('a'), ('b')"))[0]);
      r.update_same_found = header((await c.query("UPDATE t_rows SET v = 'a' WHERE id = 1"))[0]);
      r.update_changed = header((await c.query("UPDATE t_rows SET v = 'z' WHERE id = 2"))[0]);
      r.delete_none = header((await c.query('DELETE FROM t_rows WHERE id > 100'))[0]);
    } finally { await c.end(); }
    const c2 = await connect({ flags: ['-FOUND_ROWS'] });
    try {
      r.update_same_affected = header((await c2.query("UPDATE t_rows SET v = 'a' WHERE id = 1"))[0]);
    } finally { await c2.end(); }
    return r;
  },
  async prepared() {
    const c = await connect();
    try {
      const sql = "SELECT ? + 1 AS a, CONCAT(?, 'x') AS b, ? IS NULL AS c, d, dt, j FROM t_types WHERE id = ?";
      const first = result(...(await c.execute(sql, [41, 'ab', null, 1])), true);
      const second = result(...(await c.execute(sql, [-1, 'é', 3, 2])));
      const stmt = await c.prepare('INSERT INTO t_prep (v) VALUES (?)');
      const insert = header((await stmt.execute(['p1']))[0]);
      const params = stmt.statement.parameters.length;
      await stmt.close();
      return { first, second, insert, params };
    } finally { await c.end(); }
  },
  async txn() {
    const c = await connect();
    const other = await connect();
    try {
      const r = {};
      r.set_autocommit = header((await c.query('SET autocommit = 0'))[0]);
      r.insert = header((await c.query("INSERT INTO t_txn (v) VALUES ('t1')"))[0]);
      r.seen_by_other = await scalar(other, "SELECT COUNT(*) FROM t_txn");
      await c.rollback();
      await c.query("INSERT INTO t_txn (v) VALUES ('t2')");
      r.commit = header((await c.query('COMMIT'))[0]);
      r.committed = await scalar(other, "SELECT GROUP_CONCAT(v ORDER BY id) FROM t_txn");
      await c.beginTransaction();
      r.begin_insert = header((await c.query("INSERT INTO t_txn (v) VALUES ('t3')"))[0]);
      await c.rollback();
      r.autocommit = await scalar(c, 'SELECT @@autocommit');
      return r;
    } finally { await c.end(); await other.end(); }
  },
  async call_proc() {
    const c = await connect();
    try {
      return {
        text: results(await c.query('CALL p_compat(20, @b)')),
        out_var: await scalar(c, 'SELECT @b'),
        execute: await attempt(async () => results(await c.execute('CALL p_compat(?, ?)', [20, null]))),
      };
    } finally { await c.end(); }
  },
  async multi_stmt() {
    const c = await connect();
    try {
      return results(await c.query("SELECT 1 AS a; INSERT INTO t_multi (v) VALUES ('m1'), ('m2'); "
        + "SELECT COUNT(*) AS c FROM t_multi WHERE v LIKE 'm%'"));
    } finally { await c.end(); }
  },
  async multi_stmt_error() {
    const c = await connect();
    try {
      return {
        batch: await attempt(async () => results(await c.query('SELECT 1 AS a; SELECT * FROM no_such_table; SELECT 3'))),
        after: await attempt(() => scalar(c, 'SELECT 4')),
      };
    } finally { await c.end(); }
  },
  async errors() {
    const c = await connect();
    try {
      return {
        unknown_table: await attempt(() => c.query('SELECT * FROM no_such_table')),
        syntax: await attempt(() => c.query('SELEC 1')),
        duplicate: await attempt(() => c.query('INSERT INTO t_types (id) VALUES (1)')),
        prepare_unknown: await attempt(() => c.execute('SELECT * FROM no_such_table WHERE id = ?', [1])),
        after: await scalar(c, 'SELECT 1'),
      };
    } finally { await c.end(); }
  },
  async warnings() {
    const c = await connect();
    try {
      const r = {};
      r.value = await scalar(c, "SELECT CAST('12abc' AS SIGNED) AS v");
      r.select_warnings = result(...(await c.query('SHOW WARNINGS')));
      r.insert_ignore = header((await c.query('INSERT IGNORE INTO t_types (id) VALUES (1)'))[0]);
      r.insert_warnings = result(...(await c.query('SHOW WARNINGS')));
      return r;
    } finally { await c.end(); }
  },
  async change_user() {
    const c = await connect();
    try {
      await c.query('SET @x = 5');
      await c.query('CREATE TEMPORARY TABLE tmp_cu (a INT)');
      const r = {};
      r.change = await attempt(async () => { await c.changeUser({ user: 'ks2', password: 'ks2', database: 'ks_compat' }); return 'ok'; });
      r.after = await attempt(async () => result(...(await c.query('SELECT DATABASE(), @x'))));
      r.temp_table = await attempt(() => c.query('SELECT COUNT(*) FROM tmp_cu'));
      r.back_nodb = await attempt(async () => {
        await c.changeUser({ user: 'ks', password: 'ks', database: undefined });
        return scalar(c, 'SELECT DATABASE()');
      });
      r.bad_password = await attempt(async () => { await c.changeUser({ user: 'ks2', password: 'wrong' }); return 'ok'; });
      r.after_bad = await attempt(() => scalar(c, 'SELECT 1'));
      return r;
    } finally { c.destroy(); }
  },
  async pool() {
    const pool = mysql.createPool({ ...base, database: 'ks_compat', connectionLimit: 3 });
    try {
      return await Promise.all([0, 1, 2, 3, 4, 5].map(async (n) => attempt(async () => result(
        ...(await pool.query(`SELECT DATABASE(), @@autocommit, COUNT(*) + ${n} FROM t_types`))).rows)));
    } finally { await pool.end(); }
  },
};

(async () => {
  for (const [name, f] of Object.entries(cases)) {
    let r;
    try { r = await f(); } catch (e) { r = err(e); }
    process.stdout.write(`${JSON.stringify({ case: name, result: r })}\n`);
  }
  process.exit(0);
})();
