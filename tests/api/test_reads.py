"""The polled reads' thread pool (api.reads): one long-lived connection per thread on
PostgreSQL, none held on SQLite, all closed with the pool."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import Connection, text

from api.db import make_engine
from api.reads import ReadPool


def _backend(conn: Connection) -> int:
    return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


def _gather(pool: ReadPool, n: int) -> list[int]:
    async def reads() -> list[int]:
        return list(await asyncio.gather(*(pool.run(_backend) for _ in range(n))))

    return asyncio.run(reads())


@pytest.mark.postgres
def test_each_thread_keeps_its_connection_until_the_pool_closes(postgres_url: str) -> None:
    engine = make_engine(postgres_url)
    pool = ReadPool(engine, threads=3)
    try:
        first = set(_gather(pool, 30))
        assert 1 <= len(first) <= 3
        assert set(_gather(pool, 30)) <= first  # the same connections, not new ones
        assert engine.pool.checkedout() == len(first)  # type: ignore[attr-defined]
        pool.close()
        assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]
        with pytest.raises(RuntimeError):
            _gather(pool, 1)
    finally:
        pool.close()
        engine.dispose()


def _autocommit(conn: Connection) -> bool:
    conn.execute(text("SELECT 1"))
    return bool(conn.connection.dbapi_connection.autocommit)  # type: ignore[union-attr]


@pytest.mark.postgres
def test_reads_run_outside_a_transaction(postgres_url: str) -> None:
    engine = make_engine(postgres_url)
    pool = ReadPool(engine, threads=1)
    try:
        assert asyncio.run(pool.run(_autocommit)) is True
    finally:
        pool.close()
        engine.dispose()


def test_sqlite_reads_hold_no_connection(sqlite_url: str) -> None:
    engine = make_engine(sqlite_url)
    pool = ReadPool(engine, threads=2)
    try:

        async def read() -> int:
            return int(await pool.run(lambda c: c.execute(text("SELECT 41 + 1")).scalar_one()))

        assert asyncio.run(read()) == 42
        assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    finally:
        pool.close()
        engine.dispose()
