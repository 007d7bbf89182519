"""Engines for the oracle's store: SQLite by default, PostgreSQL by URL (shared set-up)."""

from proofnet.db import is_sqlite, make_engine, open_session

__all__ = ["is_sqlite", "make_engine", "open_session"]
