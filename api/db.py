"""Engines and sessions for SQLite (default) and PostgreSQL (`DATABASE_URL`).

The engine set-up is shared with the oracle (`proofnet.db`); the API adds its pool size
and the autocommit read connection its polled routes use.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine
from sqlmodel import Session

from proofnet.db import is_sqlite, open_session
from proofnet.db import make_engine as _make_engine

__all__ = ["is_sqlite", "make_engine", "open_session", "read_connection", "session_scope"]

# Connections per process on PostgreSQL: kept open, and the most opened for a burst beyond.
# Sized for the request thread pool (AnyIO's default limit is 40 threads): up to POOL_SIZE
# connections stay open between bursts, so a busy process does not open and close an
# overflow connection per request; connections open only on demand.
POOL_SIZE = 20
POOL_MAX_OVERFLOW = 20


def make_engine(url: str, **kwargs: Any) -> Engine:
    """An engine for `url`; on SQLite with WAL, foreign keys and single-writer transactions."""
    return _make_engine(url, pool_size=POOL_SIZE, max_overflow=POOL_MAX_OVERFLOW, **kwargs)


@contextmanager
def read_connection(engine: Engine) -> Iterator[Connection]:
    """A pooled connection for a few independent reads. On PostgreSQL it runs in
    autocommit, so the reads cost no BEGIN and no ROLLBACK round trip; each statement
    reads its own snapshot, which under READ COMMITTED (the default) it does anyway."""
    with engine.connect() as conn:
        if not is_sqlite(engine):
            conn.execution_options(isolation_level="AUTOCOMMIT")
        yield conn


def session_scope(engine: Engine) -> Iterator[Session]:
    with open_session(engine) as session:
        yield session
