"""Where the polled reads (job status, balances, their sign-in) run their queries.

A request's event loop must not wait on the database, so these reads run on threads. Each
went through the thread pool and checked a connection out of the engine's pool per request:
a check-out with its pre-ping round trip, autocommit switched on and, at check-in, off again
costs about as much CPU as the query itself. `ReadPool` keeps `threads` threads (never more,
so a burst queues rather than contends for the GIL) that each hold one autocommit connection
for their lifetime and run the reads on it.

What the pre-ping did on check-out is done on failure instead: a read that finds its
connection gone (server restart, failover, idle timeout) is run again, once, on a fresh one;
reads are idempotent. On SQLite, where a connection is a file handle and a transaction the
database's write lock, each read still checks out a connection and gives it back.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError

from api.db import is_sqlite, read_connection

# On a few cores more threads only contend for the GIL; each PostgreSQL thread keeps one
# connection open, so an API process holds this many for its polled reads.
READ_THREADS = 8

_T = TypeVar("_T")


class ReadPool:
    """Runs `func(conn, *args)` on one of `threads` threads, with that thread's connection."""

    def __init__(self, engine: Engine, threads: int = READ_THREADS) -> None:
        self.engine = engine
        self.held = not is_sqlite(engine)
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="proofnet-read")
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: set[Connection] = set()
        self._closed = False

    async def run(self, func: Callable[..., _T], *args: Any) -> _T:
        """`func(conn, *args)` on a read thread; the event loop waits without blocking."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._call, func, args)

    def _call(self, func: Callable[..., _T], args: tuple[Any, ...]) -> _T:
        if not self.held:
            with read_connection(self.engine) as conn:
                return func(conn, *args)
        conn = self._connection()
        try:
            try:
                return func(conn, *args)
            except DBAPIError as e:
                if not e.connection_invalidated:
                    raise
            # The server dropped the connection before or during the read: what the
            # pre-ping would have caught on check-out. Once more, on a new one.
            self._discard(conn)
            conn = self._connection()
            return func(conn, *args)
        finally:
            # End the transaction SQLAlchemy opened on first use (in autocommit the server
            # has none, so this sends nothing) and free the statement's cursor state.
            if not conn.closed and not conn.invalidated:
                conn.rollback()

    def _connection(self) -> Connection:
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is not None and not conn.closed and not conn.invalidated:
            return conn
        if conn is not None:
            self._discard(conn)
        with self._lock:
            if self._closed:
                raise RuntimeError("the read pool is closed (the app is shutting down)")
        conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        with self._lock:
            self._connections.add(conn)
        self._local.conn = conn
        return conn

    def _discard(self, conn: Connection) -> None:
        with self._lock:
            self._connections.discard(conn)
        if getattr(self._local, "conn", None) is conn:
            self._local.conn = None
        with contextlib.suppress(Exception):  # already broken: the pool replaces it
            conn.close()

    def close(self) -> None:
        """Stop the threads (after the reads in flight) and give their connections back
        to the engine's pool (which the app disposes of next)."""
        with self._lock:
            self._closed = True
        self._executor.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            connections, self._connections = self._connections, set()
        for conn in connections:
            with contextlib.suppress(Exception):  # a broken one has nothing left to close
                conn.close()
