"""Alembic environment: runs against the engine `api.migrate` hands over."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Engine

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
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            # SQLite cannot ALTER most things; batch mode copies the table instead.
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    raise RuntimeError("offline (--sql) migrations are not supported; run against a database")
run_migrations_online()
