"""Engines for the oracle's store: SQLite by default, PostgreSQL by URL.

The oracle does not import `api`, so the SQLite set-up the API uses (WAL, foreign keys,
single-writer transactions) is repeated here for the oracle's own database.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlmodel import Session


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def make_engine(url: str, **kwargs: Any) -> Engine:
    """An engine for `url`; on SQLite with WAL, foreign keys and BEGIN IMMEDIATE."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database and database != ":memory:" and not database.startswith("file:"):
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": 30}, **kwargs
        )
        _configure_sqlite(engine)
        return engine
    if parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() in ("", "psycopg2"):
        # psycopg 3 is what the project installs; a bare postgresql:// URL means it.
        url = parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
    return create_engine(url, pool_pre_ping=True, **kwargs)


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # A deferred transaction that reads then writes fails with SQLITE_BUSY when another
        # writer committed in between; taking the write lock up front avoids that.
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def open_session(engine: Engine) -> Session:
    return Session(engine, expire_on_commit=False)
