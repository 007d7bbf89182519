"""Revision 0006 (job units) on a database that already holds jobs and leases: they become
single-unit jobs and whole-job leases, and a downgrade keeps them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from alembic import command
from sqlalchemy import Connection, MetaData, Table, insert, inspect, select

from api.db import make_engine
from api.migrate import alembic_config, upgrade_head

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def _table(conn: Connection, name: str) -> Table:
    return Table(name, MetaData(), autoload_with=conn)


def _insert(conn: Connection, table: str, **values: Any) -> int:
    result = conn.execute(insert(_table(conn, table)).values(**values))
    key = result.inserted_primary_key
    assert key is not None
    return int(key[0])


def test_existing_jobs_and_leases_survive_the_units_revision(database_url: str) -> None:
    engine = make_engine(database_url)
    try:
        config = alembic_config(engine)
        command.upgrade(config, "0005")
        with engine.begin() as conn:
            user = _insert(
                conn,
                "users",
                address="addr_test1x",
                payment_key_hash="00" * 28,
                is_senior=False,
                is_approved=True,
                created_at=T0,
            )
            job = _insert(
                conn,
                "jobs",
                job_id="j" * 64,
                owner_id=user,
                spec={"n": 1},
                gpu_count=1,
                gpu_memory_mb=1024,
                status="leased",
                attempts=1,
                failures=0,
                max_attempts=3,
                progress=0.5,
                progress_message="",
                last_error="",
                created_at=T0,
                updated_at=T0,
                version=3,
            )
            provider = _insert(
                conn,
                "providers",
                worker_key="a" * 64,
                key_id="b" * 56,
                payout_address="addr_test1p",
                binding={},
                capabilities={},
                registered_at=T0,
            )
            lease = _insert(
                conn,
                "leases",
                job_id=job,
                provider_id=provider,
                token_hash="c" * 64,
                nonce="d" * 64,
                reason="",
                attempt=1,
                created_at=T0,
                expires_at=T0,
            )
            # What hangs off the lease: SQLite's table copies must not cascade into it.
            _insert(
                conn,
                "job_results",
                job_id=job,
                lease_id=lease,
                name="metrics.json",
                sha256="e" * 64,
                size=3,
                uploaded_at=T0,
            )
        upgrade_head(engine)
        with engine.connect() as conn:
            assert conn.execute(select(_table(conn, "jobs").c.unit_count)).scalar_one() == 0
            assert conn.execute(select(_table(conn, "leases").c.unit_id)).scalar_one() is None
            assert conn.execute(select(_table(conn, "job_units"))).all() == []
            assert len(conn.execute(select(_table(conn, "job_results"))).all()) == 1
        command.downgrade(config, "0005")
        inspector = inspect(engine)
        assert "job_units" not in inspector.get_table_names()
        assert "unit_id" not in {c["name"] for c in inspector.get_columns("leases")}
        with engine.connect() as conn:
            jobs = conn.execute(select(_table(conn, "jobs"))).mappings().all()
            assert [(j["status"], j["version"]) for j in jobs] == [("leased", 3)]
            assert len(conn.execute(select(_table(conn, "leases"))).all()) == 1
            assert len(conn.execute(select(_table(conn, "job_results"))).all()) == 1
        if engine.dialect.name == "sqlite":
            with engine.connect() as conn:  # the pool's connections keep foreign keys on
                assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        engine.dispose()
