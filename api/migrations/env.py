"""Alembic environment: runs against the engine `api.migrate` hands over."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, Engine

import api.models
from api.db import make_engine

target_metadata = api.models.metadata


def run_migrations_online() -> None:
    engine = context.config.attributes.get("engine")
    if engine is None:
        url = context.config.get_main_option("sqlalchemy.url")
        if not url:
            raise RuntimeError("no engine or sqlalchemy.url given to the migrations")
        engine = make_engine(url)
    assert isinstance(engine, Engine)
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # Batch mode copies a table, drops the original and renames the copy; with
            # foreign keys on, the drop would first cascade-delete every row referencing the
            # table (dropping `leases` would empty job_results, job_log_lines, lease_usage).
            # SQLite switches foreign keys only outside a transaction.
            _sqlite_pragma(connection, "PRAGMA foreign_keys=OFF")
        try:
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                # SQLite cannot ALTER most things; batch mode copies the table instead.
                render_as_batch=sqlite,
                compare_type=True,
            )
            with context.begin_transaction():
                context.run_migrations()
                if sqlite:
                    _check_sqlite_foreign_keys(connection)
            # End whatever transaction is left open (SQLAlchemy begins one on any read), so
            # the pragma below is outside one and takes effect.
            if connection.in_transaction():
                connection.commit()
        except BaseException:
            if connection.in_transaction():
                connection.rollback()
            raise
        finally:
            if sqlite:
                _sqlite_pragma(connection, "PRAGMA foreign_keys=ON")


def _sqlite_pragma(connection: Connection, pragma: str) -> None:
    # On the driver connection: through SQLAlchemy, the statement would begin a transaction.
    driver = connection.connection.driver_connection
    assert driver is not None
    driver.execute(pragma)


def _check_sqlite_foreign_keys(connection: Connection) -> None:
    """Refuse (roll back) a migration that left rows pointing at nothing."""
    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    if broken:
        raise RuntimeError(f"the migration broke foreign keys: {broken[:5]}")


if context.is_offline_mode():
    raise RuntimeError("offline (--sql) migrations are not supported; run against a database")
run_migrations_online()
