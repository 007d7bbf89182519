"""Engines and sessions for SQLite (default) and PostgreSQL (`DATABASE_URL`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlmodel import Session

# Connections per process on PostgreSQL: kept open, and the most opened for a burst beyond.
POOL_SIZE = 20
POOL_MAX_OVERFLOW = 20


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def make_engine(url: str, **kwargs: Any) -> Engine:
    """An engine for `url`; on SQLite with WAL, foreign keys and single-writer transactions."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database and database != ":memory:" and not database.startswith("file:"):
            # The default URL points into .proofnet/, which a fresh checkout lacks.
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        connect_args = {"check_same_thread": False, "timeout": 30}
        engine = create_engine(url, connect_args=connect_args, **kwargs)
        _configure_sqlite(engine)
        return engine
    if parsed.get_backend_name() == "postgresql":
        if parsed.get_driver_name() in ("", "psycopg2"):
            # psycopg 3 is what the project installs; a bare postgresql:// URL means it.
            url = parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
        # Sized for the request thread pool (AnyIO's default limit is 40 threads): up to
        # POOL_SIZE connections stay open between bursts, so a busy process does not open
        # and close an overflow connection per request; connections open only on demand.
        if "poolclass" not in kwargs:
            kwargs.setdefault("pool_size", POOL_SIZE)
            kwargs.setdefault("max_overflow", POOL_MAX_OVERFLOW)
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


@contextmanager
def read_connection(engine: Engine) -> Iterator[Connection]:
    """A pooled connection for a few independent reads. On PostgreSQL it runs in
    autocommit, so the reads cost no BEGIN and no ROLLBACK round trip; each statement
    reads its own snapshot, which under READ COMMITTED (the default) it does anyway."""
    with engine.connect() as conn:
        if not is_sqlite(engine):
            conn.execution_options(isolation_level="AUTOCOMMIT")
        yield conn


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
        # Every transaction takes the write lock up front. A deferred transaction that
        # reads and then writes fails at once with SQLITE_BUSY when another writer
        # committed in between (WAL snapshots cannot be upgraded), so single-writer
        # transactions are what make claim-and-update atomic on SQLite.
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def open_session(engine: Engine) -> Session:
    return Session(engine, expire_on_commit=False)


def session_scope(engine: Engine) -> Iterator[Session]:
    with open_session(engine) as session:
        yield session
