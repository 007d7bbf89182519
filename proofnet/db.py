"""Database engines shared by the services that keep state (API, oracle).

SQLite is the embedded default and PostgreSQL what multi-instance deployments use. On
SQLite every connection runs in WAL mode with foreign keys on, and every transaction takes
the write lock up front (single writer), which is what makes claim-and-update atomic there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlmodel import Session


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def make_engine(
    url: str, *, pool_size: int | None = None, max_overflow: int | None = None, **kwargs: Any
) -> Engine:
    """An engine for `url`. `pool_size`/`max_overflow` size PostgreSQL's connection pool."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database and database != ":memory:" and not database.startswith("file:"):
            # The default URLs point into .proofnet/, which a fresh checkout lacks.
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        connect_args = {"check_same_thread": False, "timeout": 30}
        engine = create_engine(url, connect_args=connect_args, **kwargs)
        _configure_sqlite(engine)
        return engine
    if parsed.get_backend_name() == "postgresql":
        if parsed.get_driver_name() in ("", "psycopg2"):
            # psycopg 3 is what the project installs; a bare postgresql:// URL means it.
            url = parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
        if "poolclass" not in kwargs:
            if pool_size is not None:
                kwargs.setdefault("pool_size", pool_size)
            if max_overflow is not None:
                kwargs.setdefault("max_overflow", max_overflow)
        engine = create_engine(url, pool_pre_ping=True, **kwargs)
        if engine.dialect.driver == "psycopg":
            engine.dialect.do_ping = _ping_outside_transaction  # type: ignore[method-assign]
        return engine
    return create_engine(url, pool_pre_ping=True, **kwargs)


def _ping_outside_transaction(dbapi_connection: Any) -> bool:
    """The pre-ping on checkout as one empty query at the libpq level. The dialect's own
    ping goes through a cursor, so psycopg first opens a transaction (BEGIN, then the
    ping, then ROLLBACK when the connection goes back: three round trips, not one). A
    dead connection still raises here, and the pool replaces it as before."""
    from psycopg import OperationalError, pq

    pgconn = dbapi_connection.pgconn
    result = pgconn.exec_(b"")
    if pgconn.status != pq.ConnStatus.OK or result.status == pq.ExecStatus.FATAL_ERROR:
        raise OperationalError("the database connection is gone")
    return True


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy, not the sqlite3 module, decide when transactions begin.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # A deferred transaction that reads then writes fails at once with SQLITE_BUSY when
        # another writer committed in between (WAL snapshots cannot be upgraded).
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def open_session(engine: Engine) -> Session:
    return Session(engine, expire_on_commit=False)
