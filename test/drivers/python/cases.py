"""Driver matrix cases for PyMySQL and mysqlclient (MySQLdb).

One JSON line per case on stdout: {"case": name, "result": ...}; errors are
{"errno", "exception", "msg"} (neither driver keeps the SQLSTATE; the DB-API
exception class stands for it). Usage: cases.py pymysql|mysqlclient HOST PORT.
"""
import json
import sys

DRV, HOST, PORT = sys.argv[1], sys.argv[2], int(sys.argv[3])
if DRV == "pymysql":
    import pymysql as db
    from pymysql.constants import CLIENT
else:
    import MySQLdb as db
    from MySQLdb.constants import CLIENT


def connect(database="ks_compat", found_rows=True, user="ks", password="ks"):
    flags = CLIENT.MULTI_STATEMENTS | (CLIENT.FOUND_ROWS if found_rows else 0)
    kw = dict(host=HOST, port=PORT, user=user, password=password, client_flag=flags,
              connect_timeout=10, read_timeout=20, write_timeout=20, charset="utf8mb4")
    if database:
        kw["database"] = database
    return db.connect(**kw)


def err(e):
    if isinstance(e, db.Error) and e.args and isinstance(e.args[0], int):
        return {"errno": e.args[0], "exception": type(e).__name__, "msg": str(e.args[1]) if len(e.args) > 1 else None}
    return {"exception": type(e).__name__, "msg": str(e)}


def attempt(f):
    try:
        return f()
    except Exception as e:  # noqa: BLE001 - every failure is a result
        return err(e)


def value(v):
    if v is None:
        return None
    if isinstance(v, (bytes, bytearray)):
        return "bytes:" + v.hex()
    return f"{type(v).__name__}:{v}"


def rows(cur, meta=False):
    r = {"rows": [[value(v) for v in row] for row in cur.fetchall()]}
    if meta:
        r["columns"] = [list(d) for d in cur.description]
    return r


def q(c, sql, args=None, meta=False):
    cur = c.cursor()
    cur.execute(sql, args)
    return rows(cur, meta) if cur.description else {"rowcount": cur.rowcount, "lastrowid": cur.lastrowid}


def scalar(c, sql):
    cur = c.cursor()
    cur.execute(sql)
    return value(cur.fetchone()[0])


def results(c, sql):
    """All answers of a multi-statement batch, ending with its error if any."""
    out, cur = [], c.cursor()
    try:
        cur.execute(sql)
        while True:
            out.append(rows(cur) if cur.description else {"rowcount": cur.rowcount})
            if not cur.nextset():
                break
    except Exception as e:  # noqa: BLE001
        out.append(err(e))
    return out


def status(c):
    """What the driver knows of the server status flags."""
    r = {"get_autocommit": c.get_autocommit()}
    if DRV == "pymysql":
        r["in_trans"] = bool(c.server_status & 1)
    return r


def warning_count(c, cur):
    return cur.warning_count if DRV == "pymysql" else c.warning_count()


def case_server_version():
    with connect() as c:
        return {"greeting": c.get_server_info(), "select_version": scalar(c, "SELECT VERSION()")}


def case_connect_db():
    with connect() as c:
        return {"database": scalar(c, "SELECT DATABASE()"), "autocommit": scalar(c, "SELECT @@autocommit"), **status(c)}


def case_connect_nodb():
    with connect(database=None) as c:
        return {"database": scalar(c, "SELECT DATABASE()")}


def case_select_types():
    with connect() as c:
        return q(c, "SELECT * FROM t_types ORDER BY id", meta=True)


def case_insert_update():
    r = {}
    with connect() as c:
        r["insert"] = q(c, "INSERT INTO t_rows (v) VALUES ('a'), ('b')")
        r["update_same_found"] = q(c, "UPDATE t_rows SET v = 'a' WHERE id = 1")
        if DRV == "mysqlclient":
            r["info"] = c.info()
        r["update_changed"] = q(c, "UPDATE t_rows SET v = 'z' WHERE id = 2")
        r["delete_none"] = q(c, "DELETE FROM t_rows WHERE id > 100")
    with connect(found_rows=False) as c:
        r["update_same_affected"] = q(c, "UPDATE t_rows SET v = 'a' WHERE id = 1")
    return r


def case_prepared():
    # Both drivers bind parameters on the client (no server-side prepare).
    sql = "SELECT %s + 1 AS a, CONCAT(%s, 'x') AS b, %s IS NULL AS c, d, dt, j FROM t_types WHERE id = %s"
    with connect() as c:
        cur = c.cursor()
        return {
            "first": q(c, sql, (41, "ab", None, 1), meta=True),
            "second": q(c, sql, (-1, "é", 3, 2)),
            "executemany": cur.executemany("INSERT INTO t_prep (v) VALUES (%s)", [("p1",), ("p2",), ("p3",)]),
        }


def case_txn():
    with connect() as c, connect() as other:
        r = {}
        other.autocommit(True)  # a fresh snapshot for each read
        c.autocommit(False)
        r["autocommit"] = scalar(c, "SELECT @@autocommit")
        q(c, "INSERT INTO t_txn (v) VALUES ('t1')")
        r["after_insert"] = status(c)
        r["seen_by_other"] = scalar(other, "SELECT COUNT(*) FROM t_txn")
        c.rollback()
        q(c, "INSERT INTO t_txn (v) VALUES ('t2')")
        c.commit()
        r["after_commit"] = status(c)
        r["committed"] = scalar(other, "SELECT GROUP_CONCAT(v ORDER BY id) FROM t_txn")
        c.autocommit(True)
        r["autocommit_back"] = status(c)
        return r


def case_call_proc():
    with connect() as c:
        cur = c.cursor()
        cur.callproc("p_compat", (20, None))
        out = [rows(cur) if cur.description else {"rowcount": cur.rowcount}]
        while cur.nextset():
            out.append(rows(cur) if cur.description else {"rowcount": cur.rowcount})
        return {"results": out, "out": scalar(c, "SELECT @_p_compat_1")}


def case_multi_stmt():
    with connect() as c:
        return results(c, "SELECT 1 AS a; INSERT INTO t_multi (v) VALUES ('m1'), ('m2'); "
                          "SELECT COUNT(*) AS c FROM t_multi WHERE v LIKE 'm%'")


def case_multi_stmt_error():
    with connect() as c:
        return {"batch": results(c, "SELECT 1 AS a; SELECT * FROM no_such_table; SELECT 3"),
                "after": attempt(lambda: scalar(c, "SELECT 4"))}


def case_errors():
    with connect() as c:
        return {
            "unknown_table": attempt(lambda: q(c, "SELECT * FROM no_such_table")),
            "syntax": attempt(lambda: q(c, "SELEC 1")),
            "duplicate": attempt(lambda: q(c, "INSERT INTO t_types (id) VALUES (1)")),
            "after": scalar(c, "SELECT 1"),
        }


def case_warnings():
    with connect() as c:
        r, cur = {}, c.cursor()
        cur.execute("SELECT CAST('12abc' AS SIGNED) AS v")
        r["value"] = value(cur.fetchone()[0])
        r["select_warning_count"] = warning_count(c, cur)
        r["select_warnings"] = q(c, "SHOW WARNINGS")
        r["insert_ignore"] = cur.execute("INSERT IGNORE INTO t_types (id) VALUES (1)")
        r["insert_warning_count"] = warning_count(c, cur)
        r["insert_warnings"] = q(c, "SHOW WARNINGS")
        return r


def case_change_user():
    # mysqlclient only: PyMySQL has no change-user call.
    c = connect()
    q(c, "SET @x = 5")
    q(c, "CREATE TEMPORARY TABLE tmp_cu (a INT)")
    r = {"change": attempt(lambda: c.change_user("ks2", "ks2", "ks_compat") or "ok")}
    r["after"] = attempt(lambda: q(c, "SELECT DATABASE(), @x"))
    r["temp_table"] = attempt(lambda: q(c, "SELECT COUNT(*) FROM tmp_cu"))
    r["back_nodb"] = attempt(lambda: c.change_user("ks", "ks", "") or scalar(c, "SELECT DATABASE()"))
    r["bad_password"] = attempt(lambda: c.change_user("ks2", "wrong", "") or "ok")
    r["after_bad"] = attempt(lambda: scalar(c, "SELECT 1"))
    attempt(c.close)
    return r


def case_orm():
    """SQLAlchemy on a table that keyshard shards (user orm: orm_items, 4
    sub-tables; directly a plain table): create, CRUD through the ORM,
    reflection, and Alembic's autogenerate compare, which must find the
    table as its model says."""
    import sqlalchemy as sa
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

    dialect = "pymysql" if DRV == "pymysql" else "mysqldb"
    engine = sa.create_engine(f"mysql+{dialect}://orm:orm@{HOST}:{PORT}/ks_compat?charset=utf8mb4")

    class Base(DeclarativeBase):
        pass

    class Item(Base):
        __tablename__ = "orm_items"
        id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True, autoincrement=False)
        name: Mapped[str] = mapped_column(sa.String(64), index=True)
        price: Mapped[float] = mapped_column(sa.Numeric(10, 2), nullable=True)
        sku: Mapped[str] = mapped_column(sa.String(16), unique=True, nullable=True)

    r = {}
    try:
        Base.metadata.drop_all(engine)
        Base.metadata.create_all(engine)
        with Session(engine) as s:
            s.add_all([Item(id=i, name=f"n{i % 3}", price=i * 1.5, sku=f"s{i}") for i in range(1, 9)])
            s.commit()
            it = s.get(Item, 5)
            it.price = 99
            s.commit()
            s.delete(s.get(Item, 2))
            s.commit()
            r["rows"] = [[i.id, i.name, str(i.price), i.sku] for i in s.scalars(sa.select(Item).order_by(Item.id))]
            r["count_n1"] = s.scalar(sa.select(sa.func.count()).select_from(Item).where(Item.name == "n1"))
        insp = sa.inspect(engine)
        r["has_table"] = insp.has_table("orm_items")
        r["tables"] = [t for t in insp.get_table_names() if t.startswith("orm")]
        r["columns"] = [[c["name"], str(c["type"]), c["nullable"], str(c.get("default")), c.get("autoincrement")]
                        for c in insp.get_columns("orm_items")]
        r["pk"] = insp.get_pk_constraint("orm_items")
        r["indexes"] = sorted([[i["name"], i["column_names"], bool(i["unique"])] for i in insp.get_indexes("orm_items")])
        r["unique"] = sorted([[u["name"], u["column_names"]] for u in insp.get_unique_constraints("orm_items")])
        with engine.connect() as conn:
            mc = MigrationContext.configure(conn, opts={
                "include_name": lambda name, type_, parent: type_ != "table" or name == "orm_items"})
            diffs = compare_metadata(mc, Base.metadata)
        r["autogenerate_diffs"] = [str(d) for d in diffs]
    finally:
        engine.dispose()
    return r


CASES = [case_server_version, case_connect_db, case_connect_nodb, case_select_types, case_insert_update,
         case_prepared, case_txn, case_call_proc, case_multi_stmt, case_multi_stmt_error, case_errors,
         case_warnings, case_orm]
if DRV == "mysqlclient":
    CASES.append(case_change_user)

for case in CASES:
    try:
        res = case()
    except Exception as e:  # noqa: BLE001
        res = err(e)
    print(json.dumps({"case": case.__name__[5:], "result": res}, ensure_ascii=False), flush=True)
