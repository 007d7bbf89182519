"""A fresh PostgreSQL database per test: importable by any test module (like fixture_paths)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

POSTGRES_URL = os.environ.get(
    "PROOFNET_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


@contextmanager
def fresh_database(prefix: str) -> Iterator[str]:
    """Create a database named `<prefix>_<random>` on the test server, yield its URL, drop it
    (ending its sessions first). Fails, never skips, when PostgreSQL is unreachable: the
    tests marked `postgres` must really run."""
    admin_url = make_url(POSTGRES_URL)
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield admin_url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = :name AND pid <> pg_backend_pid()"
                ),
                {"name": name},
            )
            # WITH (FORCE): a pool the test left open may reconnect between the terminate
            # above and the drop (seen once under CI load); the drop then ends it itself.
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
