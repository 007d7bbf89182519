"""The Alembic migrations build exactly the schema the models describe, on both databases."""

from __future__ import annotations

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

import api.models
from api.db import make_engine
from api.migrate import alembic_config, current_revision, head_revision, upgrade_head


def test_upgrade_head_matches_models(database_url: str) -> None:
    engine = make_engine(database_url)
    try:
        upgrade_head(engine)
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = compare_metadata(context, api.models.metadata)
        assert diff == [], diff
        tables = set(inspect(engine).get_table_names()) - {"alembic_version"}
        assert tables == set(api.models.metadata.tables)
        assert current_revision(engine) == head_revision()
        # Upgrading an up-to-date database is a no-op.
        upgrade_head(engine)
        assert current_revision(engine) == head_revision()
    finally:
        engine.dispose()


def test_downgrade_to_base_removes_everything(database_url: str) -> None:
    engine = make_engine(database_url)
    try:
        upgrade_head(engine)
        command.downgrade(alembic_config(engine), "base")
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
        upgrade_head(engine)
        assert set(api.models.metadata.tables) <= set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_sqlite_connections_use_wal_and_foreign_keys(sqlite_url: str) -> None:
    engine = make_engine(sqlite_url)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        engine.dispose()
